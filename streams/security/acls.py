"""Who may do what on the cluster: one principal per role, least privilege, declared in
terms of the Topology (streams/topics.py), so a topic added there is granted here by
name and nowhere else. `pagestream acls apply` makes a cluster match it
(streams/security/acls_apply.py); `pagestream acls show` prints it.

Operations are Kafka's ACL operation names. Every right is ALLOW from any host;
anything not granted is refused (the embedded secure broker runs the StandardAuthorizer
with allow.everyone.if.no.acl.found=false). The `admin` role is a super user and holds
no ACLs: it creates topics, users and these ACLs.

Decisions a reviewer should see:
- Idempotent producers need no IDEMPOTENT_WRITE on the cluster: since Kafka 3.0 Write
  on a topic is enough to get a producer id (KIP-679); verified against the embedded
  broker by tests/integration/streams/security/test_secure.py.
- The monitor (`pagestream lag`, the exporter) only describes: it never reads record
  bytes (they are identity documents). Its lag is then counted offset for offset,
  transaction markers included (streams/admin/records.py falls back when refused).
- Reading results (`pagestream results`, `pagestream status`) is a role of its own
  (`reader`): the producer role writes docs.raw and nothing else.
- faust creates and reads topics named after the agents' app id (its changelog and
  leader topics): the agents get those by prefix, never other topics.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from streams.topics import (
    DLQ,
    FACTS_BY_STAGE,
    PAGES_DONE,
    PROGRESS,
    RAW,
    RESULTS,
    WEBHOOKS,
    WORK_BY_STAGE,
    TopicSpec,
    Topology,
)

if TYPE_CHECKING:
    from streams.settings import Settings

ResourceKind = Literal["topic", "group", "transactional_id"]
Pattern = Literal["literal", "prefixed"]
Operation = Literal["READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS"]

ADMIN = "admin"
PRODUCER = "producer"
AGENTS = "agents"
GPU_NODE = "gpu-node"
MONITOR = "monitor"
DLQ_REPLAY = "dlq-replay"
READER = "reader"
API = "api"
# Every role with a principal, admin first (the broker's own super user).
ROLES = (ADMIN, PRODUCER, AGENTS, GPU_NODE, MONITOR, DLQ_REPLAY, READER, API)

# The GPU node's transactional ids begin with this (NodeSettings.transactional_id),
# behind the topic prefix: one id per node instance, all owned by the gpu-node principal.
GPU_TRANSACTIONAL_ID_PREFIX = "pagestream-gpu-"


@dataclass(frozen=True)
class Grant:
    kind: ResourceKind
    name: str
    pattern: Pattern
    operations: tuple[Operation, ...]


@dataclass(frozen=True)
class Role:
    name: str
    purpose: str
    grants: tuple[Grant, ...]

    @property
    def principal(self) -> str:
        return f"User:{self.name}"


@dataclass(frozen=True)
class Names:
    """The names the rights are about, beyond the topics: groups and transactional ids
    (some are settings, so one cluster can host several pipelines)."""

    topology: Topology
    gpu_group: str
    dlq_replay_group: str
    gpu_transactional_prefix: str = GPU_TRANSACTIONAL_ID_PREFIX


def _topics(names: Names, *specs: TopicSpec, ops: tuple[Operation, ...]) -> Iterator[Grant]:
    for spec in specs:
        yield Grant("topic", names.topology.name(spec), "literal", ops)


_R: tuple[Operation, ...] = ("READ", "DESCRIBE")
_W: tuple[Operation, ...] = ("WRITE", "DESCRIBE")
_RW: tuple[Operation, ...] = ("READ", "WRITE", "DESCRIBE")


def declared(names: Names) -> tuple[Role, ...]:
    """Every role but admin, with its rights."""
    topo = names.topology
    work = tuple(WORK_BY_STAGE.values())
    facts = tuple(FACTS_BY_STAGE.values())
    app = topo.agents_app
    # The topics a dead letter can come from: every topic a stage consumes.
    replayable = (RAW, *work, *facts, PAGES_DONE, WEBHOOKS)
    monitor_topics = (
        Grant("topic", topo.prefix, "prefixed", ("DESCRIBE",))
        if topo.prefix
        else Grant("topic", "*", "literal", ("DESCRIBE",))
    )
    return (
        Role(
            PRODUCER,
            "`pagestream submit` and any client publishing documents",
            tuple(_topics(names, RAW, ops=_W)),
        ),
        Role(
            AGENTS,
            "the faust CPU agents (`pagestream agents`): ingest, route, deliver, notify",
            (
                *_topics(names, RAW, *facts, ops=_R),
                *_topics(names, PAGES_DONE, WEBHOOKS, ops=_RW),
                *_topics(names, *work, RESULTS, PROGRESS, DLQ, ops=_W),
                # faust's changelog and leader topics, "<app id>-...": it creates them.
                Grant("topic", f"{app}-", "prefixed", ("CREATE", "READ", "WRITE", "DESCRIBE")),
                Grant("group", app, "literal", ("READ", "DESCRIBE")),
                Grant("group", topo.route_group, "literal", ("READ", "DESCRIBE")),
                Grant("group", topo.deliver_group, "literal", ("READ", "DESCRIBE")),
            ),
        ),
        Role(
            GPU_NODE,
            "the GPU node (`pagestream gpu-node`): work topics in, facts and dead letters out, "
            "in transactions",
            (
                *_topics(names, *work, ops=_R),
                *_topics(names, *facts, DLQ, ops=_W),
                Grant("group", names.gpu_group, "literal", ("READ", "DESCRIBE")),
                Grant(
                    "transactional_id",
                    names.gpu_transactional_prefix,
                    "prefixed",
                    ("WRITE", "DESCRIBE"),
                ),
            ),
        ),
        Role(
            MONITOR,
            "`pagestream lag` and the exporter: offsets and groups, never records",
            (monitor_topics, Grant("group", "*", "literal", ("DESCRIBE",))),
        ),
        Role(
            DLQ_REPLAY,
            "`pagestream dlq list|show|replay`: reads docs.dlq, writes dead letters back",
            (
                *_topics(names, DLQ, ops=_R),
                *_topics(names, *replayable, ops=_W),
                Grant("group", names.dlq_replay_group, "literal", ("READ", "DESCRIBE")),
                # A replay's transactions (streams/admin/dlq/replay.py) are named after it.
                Grant("transactional_id", names.dlq_replay_group, "literal", _W),
            ),
        ),
        Role(
            READER,
            "consumers of results: `pagestream results`, `pagestream status`",
            tuple(_topics(names, RESULTS, PROGRESS, ops=_R)),
        ),
        Role(
            API,
            "the HTTP gateway (`pagestream api`): submits to docs.raw, marks a submission "
            "on docs.progress, reads docs.progress and docs.results (assigned, no group); "
            "for admin keys, the monitor's and dlq-replay's rights (lag, replay)",
            (
                *_topics(names, PROGRESS, ops=_RW),
                *_topics(names, RESULTS, DLQ, ops=_R),
                *_topics(names, *replayable, ops=_W),
                monitor_topics,
                Grant("group", "*", "literal", ("DESCRIBE",)),
                Grant("group", names.dlq_replay_group, "literal", ("READ", "DESCRIBE")),
                # A replay's transactions (streams/admin/dlq/replay.py) are named after it.
                Grant("transactional_id", names.dlq_replay_group, "literal", _W),
            ),
        ),
    )


def names_for(settings: Settings) -> Names:
    return Names(
        settings.topology,
        gpu_group=settings.gpu_group,
        dlq_replay_group=settings.dlq_replay_group,
        gpu_transactional_prefix=settings.topology.own(GPU_TRANSACTIONAL_ID_PREFIX),
    )


def for_settings(settings: Settings) -> tuple[Role, ...]:
    """The declared roles with the names this cluster uses (prefix, groups)."""
    return declared(names_for(settings))
