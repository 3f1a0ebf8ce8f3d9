"""The declared roles (streams/security/acls.py): least privilege as a reviewer would check it, and
the security page's table (docs/security.md) generated from them."""

from __future__ import annotations

import re

from streams.cli.acls import markdown_table
from streams.security import acls
from streams.security.acls_apply import bindings
from streams.settings import DlqSettings, NodeSettings
from streams.topics import DLQ, FACTS_BY_STAGE, PROGRESS, RAW, RESULTS, WORK_BY_STAGE, Topology
from tests.support.prometheus import REPO

PREFIX = "p1."


def _roles(prefix: str = PREFIX) -> dict[str, acls.Role]:
    names = acls.Names(Topology(prefix), gpu_group=f"{prefix}gpu", dlq_replay_group=f"{prefix}dlq")
    return {r.name: r for r in acls.declared(names)}


def _rights(role: acls.Role, kind: str = "topic") -> dict[str, set[str]]:
    rights: dict[str, set[str]] = {}
    for g in role.grants:
        if g.kind == kind:
            rights.setdefault(g.name, set()).update(g.operations)
    return rights


def test_every_role_but_admin_is_declared_and_admin_holds_no_acl() -> None:
    assert set(_roles()) == set(acls.ROLES) - {acls.ADMIN}


def test_the_producer_may_only_write_docs_raw() -> None:
    producer = _roles()[acls.PRODUCER]
    assert _rights(producer) == {f"{PREFIX}{RAW.base}": {"WRITE", "DESCRIBE"}}
    assert {g.kind for g in producer.grants} == {"topic"}


def test_no_one_but_the_gpu_node_writes_facts_or_holds_transactional_ids() -> None:
    roles = _roles()
    facts = {f"{PREFIX}{t.base}" for t in FACTS_BY_STAGE.values()}
    for name, role in roles.items():
        written = {t for t, ops in _rights(role).items() if "WRITE" in ops}
        txn = [g for g in role.grants if g.kind == "transactional_id"]
        if name == acls.GPU_NODE:
            assert facts <= written
            assert [(g.name, g.pattern) for g in txn] == [("pagestream-gpu-", "prefixed")]
        elif name not in (
            acls.DLQ_REPLAY,
            acls.API,
        ):  # replay writes a letter back where it came from
            assert not (facts & written), name
            assert txn == [], name


def test_the_gpu_node_reads_only_work_topics_in_its_group() -> None:
    gpu = _roles()[acls.GPU_NODE]
    read = {t for t, ops in _rights(gpu).items() if "READ" in ops}
    assert read == {f"{PREFIX}{t.base}" for t in WORK_BY_STAGE.values()}
    assert _rights(gpu, "group") == {f"{PREFIX}gpu": {"READ", "DESCRIBE"}}
    assert f"{PREFIX}{DLQ.base}" in _rights(gpu)


def test_the_gateway_submits_reads_progress_and_results_and_replays_as_admin() -> None:
    roles = _roles()
    api, replay, monitor = roles[acls.API], roles[acls.DLQ_REPLAY], roles[acls.MONITOR]
    rights = _rights(api)
    assert rights[f"{PREFIX}{RAW.base}"] == {"WRITE", "DESCRIBE"}
    assert rights[f"{PREFIX}{PROGRESS.base}"] == {"READ", "WRITE", "DESCRIBE"}
    assert rights[f"{PREFIX}{RESULTS.base}"] == {"READ", "DESCRIBE"}
    # Admin keys list lag and replay dead letters: the monitor's and dlq-replay's rights,
    # nothing more (no other group, no other transactional id, no facts read).
    own = {f"{PREFIX}{PROGRESS.base}", f"{PREFIX}{RESULTS.base}"}
    wider = {t: ops for t, ops in rights.items() if t not in own}
    expected = {t: set(ops) for t, ops in _rights(replay).items()}
    for t, ops in _rights(monitor).items():
        expected.setdefault(t, set()).update(ops)
    assert wider == expected
    assert _rights(api, "group") == {"*": {"DESCRIBE"}, **_rights(replay, "group")}
    assert _rights(api, "transactional_id") == _rights(replay, "transactional_id")
    assert _rights(replay, "transactional_id") == {
        f"{PREFIX}dlq": {"WRITE", "DESCRIBE"}  # named after the replay group
    }


def test_the_monitor_only_describes() -> None:
    monitor = _roles()[acls.MONITOR]
    assert {op for g in monitor.grants for op in g.operations} == {"DESCRIBE"}
    # Behind a prefix it sees that pipeline's topics only.
    assert _rights(monitor) == {PREFIX: {"DESCRIBE"}}
    assert _rights(_roles("")[acls.MONITOR]) == {"*": {"DESCRIBE"}}


def test_the_agents_create_only_topics_named_after_their_app() -> None:
    agents = _roles()[acls.AGENTS]
    created = [g for g in agents.grants if "CREATE" in g.operations]
    assert [(g.name, g.pattern) for g in created] == [(f"{PREFIX}pagestream-agents-", "prefixed")]
    assert f"{PREFIX}{RESULTS.base}" in _rights(agents)
    assert "READ" not in _rights(agents)[f"{PREFIX}{RESULTS.base}"]


def test_every_grant_is_one_allow_binding_per_operation() -> None:
    roles = tuple(_roles().values())
    assert len(bindings(roles)) == sum(len(g.operations) for r in roles for g in r.grants)


def test_the_documented_table_is_the_declaration() -> None:
    page = (REPO / "docs" / "security.md").read_text()
    found = re.search(r"<!-- acls:begin -->\n(.*?)<!-- acls:end -->", page, re.S)
    assert found, "docs/security.md has no generated ACL table"
    names = acls.Names(Topology(), gpu_group=NodeSettings().group_id,
                       dlq_replay_group=DlqSettings().replay_group)  # fmt: skip
    assert found.group(1).strip() == markdown_table(acls.declared(names)).strip(), (
        "docs/security.md's ACL table is stale: paste `pagestream acls show --markdown`"
    )
