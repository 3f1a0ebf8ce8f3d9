"""API keys: stored hashed, each bound to one tenant and one role.

A key reads `psk_<key_id>_<secret>`. The file keeps the key id, the tenant, the role and
the SHA-256 of the whole key, never the key: a leaked file lets no one in. The secret is
256 random bits, so a plain hash is enough (a slow password hash protects guessable
secrets; these are not). In Kubernetes the file is a Secret mounted read-only; the
gateway re-reads it when it changes, so a revoked key stops working without a restart.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import TypeAdapter, ValidationError

from schemas import Tenant

# user: its tenant's documents. admin: also the operator's routes (lag, dead letters),
# for its own tenant's dead letters. operator: an admin of every tenant's dead letters.
Role = Literal["user", "admin", "operator"]
_ROLES = ("user", "admin", "operator")
_KEY = re.compile(r"^psk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
_TENANT: TypeAdapter[str] = TypeAdapter(Tenant)


class KeyFileError(RuntimeError):
    """The keys file cannot be read or is not a keys file."""


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    tenant: str
    role: Role
    sha256: str
    created_at: str
    revoked_at: str | None = None

    @property
    def is_admin(self) -> bool:
        """May use the operator's routes (an operator key is an admin key too)."""
        return self.role in ("admin", "operator")

    @property
    def sees_every_tenant(self) -> bool:
        """Sees (and replays) every tenant's dead letters, not only its own tenant's."""
        return self.role == "operator"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def check_tenant(tenant: str) -> str:
    try:
        return _TENANT.validate_python(tenant)
    except ValidationError:
        raise ValueError(
            f"tenant {tenant!r} is not a tenant name: lower-case letters, digits, '_' and "
            "'-', starting with a letter or digit, at most 63 characters"
        ) from None


class KeyStore:
    """The keys file, read again whenever its modification time or size changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._keys: dict[str, ApiKey] = {}

    def keys(self) -> list[ApiKey]:
        self._refresh()
        return sorted(self._keys.values(), key=lambda k: (k.tenant, k.created_at))

    def authenticate(self, key: str) -> ApiKey | None:
        """The live key `key` is, or None (unknown, malformed or revoked)."""
        match = _KEY.fullmatch(key)
        if match is None:
            return None
        self._refresh()
        found = self._keys.get(match.group(1))
        if found is None or found.revoked_at is not None:
            return None
        return found if hmac.compare_digest(found.sha256, _digest(key)) else None

    def create(self, tenant: str, role: Role = "user") -> tuple[str, ApiKey]:
        """A new key for `tenant`: the key itself (shown once) and its stored record."""
        tenant = check_tenant(tenant)
        if role not in _ROLES:
            raise ValueError(f"role {role!r} is not one of: {', '.join(_ROLES)}")
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        key = f"psk_{key_id}_{secret}"
        record = ApiKey(key_id, tenant, role, _digest(key), _now())
        with self._locked():
            keys = self._read()
            keys[key_id] = record
            self._write(keys)
        return key, record

    def revoke(self, key_id: str) -> ApiKey:
        with self._locked():
            keys = self._read()
            if key_id not in keys:
                raise KeyError(f"no key {key_id!r} in {self.path}")
            keys[key_id] = record = ApiKey(**{**asdict(keys[key_id]), "revoked_at": _now()})
            self._write(keys)
        return record

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """This process's threads and every other process (two `api-keys` commands at
        once): a read-modify-write of the file never loses another's change."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        with self._lock, lock_path.open("a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._keys, self._stamp = {}, None
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            with self._lock:
                self._keys, self._stamp = self._read(), stamp

    def _read(self) -> dict[str, ApiKey]:
        try:
            raw = json.loads(self.path.read_text())
            return {k["key_id"]: ApiKey(**k) for k in raw["keys"]}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise KeyFileError(f"{self.path}: not a pagestream keys file ({exc})") from exc

    def _write(self, keys: dict[str, ApiKey]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"keys": [asdict(k) for k in keys.values()]}, indent=1)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".keys-")
        try:
            with os.fdopen(fd, "w") as f:  # mkstemp's 0600: only the owner reads the hashes
                f.write(body)
                f.flush()
                os.fsync(f.fileno())  # a crash leaves the old file or the new, never an empty one
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
