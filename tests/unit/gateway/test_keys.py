"""API keys: a created key opens its own tenant and role and nothing else opens anything;
the file holds hashes only, is readable by its owner alone, and is read again when
another process (the CLI beside a running gateway) changes it."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import stat
from dataclasses import asdict
from pathlib import Path

import pytest

from gateway.keys import ApiKey, KeyFileError, KeyStore, check_tenant


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "secrets" / "keys.json"


def _secret(key: str) -> str:
    return key.split("_", 2)[2]


def _swap(char: str) -> str:
    # Another character of the same alphabet, so the key keeps its shape.
    return "a" if char != "a" else "b"


def test_a_created_key_authenticates_to_its_tenant_and_role(path: Path) -> None:
    store = KeyStore(path)
    key, record = store.create("acme", "admin")

    found = store.authenticate(key)

    assert found is not None
    assert found == record
    assert (found.tenant, found.role, found.revoked_at) == ("acme", "admin", None)
    assert key.startswith(f"psk_{record.key_id}_")


def test_each_key_opens_its_own_tenant_only(path: Path) -> None:
    store = KeyStore(path)
    acme, _ = store.create("acme")
    globex, _ = store.create("globex")

    found = [store.authenticate(k) for k in (acme, globex)]
    assert [k.tenant if k else None for k in found] == ["acme", "globex"]


def test_the_keys_file_holds_the_keys_sha256_never_the_key_or_its_secret(path: Path) -> None:
    store = KeyStore(path)
    key, record = store.create("acme")

    text = path.read_text()

    assert key not in text
    assert _secret(key) not in text
    assert record.sha256 == hashlib.sha256(key.encode()).hexdigest()
    assert json.loads(text)["keys"] == [asdict(record)]


def test_the_keys_file_is_readable_by_its_owner_only_after_create_and_revoke(
    path: Path,
) -> None:
    store = KeyStore(path)
    _, record = store.create("acme")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    store.revoke(record.key_id)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # The temporary file each write goes through is renamed over, never left beside it.
    # No temporary file left beside it (the lock file stays: it holds no secret).
    assert {p.name for p in path.parent.iterdir()} == {"keys.json", "keys.json.lock"}


def test_a_revoked_key_no_longer_authenticates(path: Path) -> None:
    store = KeyStore(path)
    key, record = store.create("acme")
    other, _ = store.create("acme")

    revoked = store.revoke(record.key_id)

    assert revoked.revoked_at is not None
    assert store.authenticate(key) is None
    assert store.authenticate(other) is not None


@pytest.mark.parametrize("where", ["key id", "first of the secret", "last of the secret"])
def test_a_key_with_one_character_changed_does_not_authenticate(path: Path, where: str) -> None:
    store = KeyStore(path)
    key, _ = store.create("acme")
    at = {"key id": len("psk_"), "first of the secret": len("psk_") + 13, "last of the secret": -1}
    i = at[where] % len(key)
    changed = key[:i] + _swap(key[i]) + key[i + 1 :]
    assert changed != key

    assert store.authenticate(changed) is None


def test_a_key_of_another_keys_file_does_not_authenticate(tmp_path: Path) -> None:
    key, _ = KeyStore(tmp_path / "a.json").create("acme")
    other = KeyStore(tmp_path / "b.json")
    other.create("acme")

    assert other.authenticate(key) is None


@pytest.mark.parametrize(
    "candidate",
    [
        "",
        "psk_",
        "psk_0123456789ab",
        "psk_0123456789ab_" + "A" * 42,  # secret one character short
        "psk_0123456789AB_" + "A" * 43,  # key id not lower-case hex
        "Bearer psk_0123456789ab_" + "A" * 43,
        "psk_0123456789ab_" + "A" * 42 + "=",
    ],
)
def test_a_malformed_key_does_not_authenticate(path: Path, candidate: str) -> None:
    store = KeyStore(path)
    store.create("acme")

    assert store.authenticate(candidate) is None


def test_a_well_formed_key_with_an_unknown_key_id_does_not_authenticate(path: Path) -> None:
    store = KeyStore(path)
    key, record = store.create("acme")
    unknown_id = "0" * 12 if record.key_id != "0" * 12 else "1" * 12

    assert store.authenticate(f"psk_{unknown_id}_{_secret(key)}") is None


def test_a_missing_keys_file_authenticates_nothing_and_lists_nothing(path: Path) -> None:
    store = KeyStore(path)

    assert store.authenticate("psk_0123456789ab_" + "A" * 43) is None
    assert store.keys() == []


def test_another_instance_sees_a_key_created_after_its_first_read(path: Path) -> None:
    cli, gateway = KeyStore(path), KeyStore(path)
    first, _ = cli.create("acme")
    assert gateway.authenticate(first) is not None  # the gateway has read the file once

    second, record = cli.create("globex")

    assert gateway.authenticate(second) == record


def test_another_instance_sees_a_revocation_without_a_restart(path: Path) -> None:
    cli, gateway = KeyStore(path), KeyStore(path)
    key, record = cli.create("acme")
    assert gateway.authenticate(key) is not None

    cli.revoke(record.key_id)

    assert gateway.authenticate(key) is None
    (listed,) = gateway.keys()
    assert listed.revoked_at is not None


def test_a_revocation_keeps_the_keys_another_instance_created(path: Path) -> None:
    # Each write starts from the file, not from what this instance read before.
    cli, other = KeyStore(path), KeyStore(path)
    key, record = cli.create("acme")
    assert cli.keys() == [record]
    late, _ = other.create("globex")

    cli.revoke(record.key_id)

    assert cli.authenticate(late) is not None
    assert cli.authenticate(key) is None


def test_revoking_an_unknown_key_id_raises_key_error_and_changes_nothing(path: Path) -> None:
    store = KeyStore(path)
    store.create("acme")
    before = path.read_bytes()

    with pytest.raises(KeyError, match="ffffffffffff"):
        store.revoke("ffffffffffff")
    assert path.read_bytes() == before


@pytest.mark.parametrize("tenant", ["Acme", "a b", "../x", "", "-acme", "a" * 64, "acme\n"])
def test_a_name_that_is_not_a_tenant_name_is_refused_naming_the_rule(
    path: Path, tenant: str
) -> None:
    store = KeyStore(path)

    with pytest.raises(ValueError, match="lower-case letters, digits") as refused:
        store.create(tenant)

    assert repr(tenant) in str(refused.value)
    assert not path.exists()


@pytest.mark.parametrize("tenant", ["acme", "team-7", "a_b", "0", "a" * 63])
def test_a_tenant_name_is_accepted_as_it_is(tenant: str) -> None:
    assert check_tenant(tenant) == tenant


@pytest.mark.parametrize(
    "content",
    [
        "not json {",
        "[]",
        "null",
        '{"no_keys": []}',
        '{"keys": [{"key_id": "0123456789ab"}]}',
        '{"keys": [{"key_id": "0123456789ab", "surprise": 1}]}',
    ],
)
def test_a_file_that_is_not_a_keys_file_raises_key_file_error_naming_its_path(
    path: Path, content: str
) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(content)
    store = KeyStore(path)

    with pytest.raises(KeyFileError, match="not a pagestream keys file") as first:
        store.keys()
    assert str(path) in str(first.value)
    with pytest.raises(KeyFileError, match=str(path)):
        store.authenticate("psk_0123456789ab_" + "A" * 43)


def test_listing_the_keys_gives_records_sorted_by_tenant_without_any_key(path: Path) -> None:
    store = KeyStore(path)
    made = [store.create(t) for t in ("globex", "acme", "initech")]

    listed = store.keys()

    assert [k.tenant for k in listed] == ["acme", "globex", "initech"]
    assert all(isinstance(k, ApiKey) for k in listed)
    for key, _ in made:
        for record in listed:
            values = [str(v) for v in asdict(record).values()]
            assert not any(key in v or _secret(key) in v for v in values)


def test_an_operator_key_is_an_admin_of_every_tenant_an_admin_of_its_own(path: Path) -> None:
    store = KeyStore(path)
    keys = {role: store.authenticate(store.create("acme", role)[0]) for role in
            ("user", "admin", "operator")}  # fmt: skip
    assert {r: (k.is_admin, k.sees_every_tenant) for r, k in keys.items() if k} == {
        "user": (False, False), "admin": (True, False), "operator": (True, True)}  # fmt: skip


def test_a_role_that_is_not_user_or_admin_is_refused_and_nothing_written(path: Path) -> None:
    with pytest.raises(ValueError, match="user, admin, operator"):
        KeyStore(path).create("acme", "root")  # type: ignore[arg-type]
    assert not path.exists()


def _create_many(path: Path, tenant: str, n: int) -> None:
    store = KeyStore(path)
    for _ in range(n):
        store.create(tenant)


def test_keys_created_by_processes_at_once_are_all_kept(path: Path) -> None:
    # Two `pagestream api-keys create` at the same moment: neither loses the other's keys
    # (nor a revocation), as a read-modify-write without a file lock would.
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_create_many, args=(path, t, 25)) for t in ("acme", "other")]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    tenants = [k.tenant for k in KeyStore(path).keys()]  # noqa: SIM118 - a method, not a dict
    assert (tenants.count("acme"), tenants.count("other")) == (25, 25)
