"""Make a cluster's topics match `streams.topics`, idempotently.

Creates missing topics, raises partition counts (Kafka cannot lower them, so a
topic with more partitions than declared is reported, not touched) and sets the
declared configs with incremental alter (configs we do not declare are left as
the operator set them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from tenacity import retry, retry_if_exception, stop_after_delay, wait_fixed

from streams.kafka import sizes
from streams.topics import Topology

_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Change:
    topic: str
    action: str  # created | partitions | config | warning
    detail: str

    def __str__(self) -> str:
        return f"{self.topic}: {self.action} {self.detail}"


def missing(admin: AdminClient, topology: Topology) -> list[str]:
    """Declared topics the cluster does not have."""
    existing = admin.list_topics(timeout=_TIMEOUT_S).topics
    return [name for name, _ in topology.specs() if name not in existing]


def apply(
    admin: AdminClient,
    topology: Topology,
    replication_factor: int = 1,
    min_insync_replicas: int | None = None,
    *,
    max_record_bytes: int | None = None,
) -> list[Change]:
    """The cluster's changes made; `max_record_bytes` (the one record limit,
    KafkaSettings) sets every topic's max.message.bytes to what it needs."""
    existing = admin.list_topics(timeout=_TIMEOUT_S).topics
    declared = _declared(topology, min_insync_replicas, max_record_bytes)
    changes: list[Change] = []
    to_create: list[NewTopic] = []
    to_grow: list[NewPartitions] = []
    to_check: list[str] = []
    for name, spec in topology.specs():
        meta = existing.get(name)
        if meta is None:
            to_create.append(
                NewTopic(name, spec.partitions, replication_factor, config=declared[name])
            )
            detail = f"{spec.partitions} partitions {declared[name]}"
            changes.append(Change(name, "created", detail))
            continue
        to_check.append(name)
        have = len(meta.partitions)
        if have < spec.partitions:
            to_grow.append(NewPartitions(name, spec.partitions))
            changes.append(Change(name, "partitions", f"{have} -> {spec.partitions}"))
            if spec.grow_warning:
                changes.append(Change(name, "warning", spec.grow_warning))
        elif have > spec.partitions:
            changes.append(
                Change(
                    name,
                    "warning",
                    f"has {have} partitions, declared {spec.partitions}; "
                    "Kafka cannot reduce partitions, left as is",
                )
            )
    changes = _create(admin, to_create, changes)
    if to_grow:
        for fut in admin.create_partitions(to_grow, operation_timeout=_TIMEOUT_S).values():
            fut.result()
    changes.extend(_align_configs(admin, declared, to_check))
    # Creation and partition growth reach the brokers' metadata asynchronously;
    # return only once they are visible and led, so the next `apply` sees a settled
    # state and the first producer finds a leader.
    _await_visible(
        admin,
        {t.topic: t.num_partitions for t in to_create}
        | {p.topic: p.new_total_count for p in to_grow},
    )
    return changes


def _await_visible(admin: AdminClient, want: dict[str, int]) -> None:
    deadline = time.monotonic() + _TIMEOUT_S
    while want:
        topics = admin.list_topics(timeout=_TIMEOUT_S).topics
        want = {n: p for n, p in want.items() if not _led(topics.get(n), p)}
        if want and time.monotonic() > deadline:
            raise TimeoutError(f"topics without leaders after {_TIMEOUT_S}s: {sorted(want)}")
        if want:
            time.sleep(0.1)


def _led(meta: Any, partitions: int) -> bool:
    """Every partition listed, each with a leader. A partition without one refuses
    produce requests, and a new idempotent producer's first batch retried behind later
    ones can then be reported delivered though never written (confluent-kafka-go#921)."""
    if meta is None or len(meta.partitions) < partitions:
        return False
    return all(p.leader >= 0 and p.error is None for p in meta.partitions.values())


def _create(admin: AdminClient, topics: list[NewTopic], changes: list[Change]) -> list[Change]:
    if not topics:
        return changes
    raced = set()
    for name, fut in admin.create_topics(topics, operation_timeout=_TIMEOUT_S).items():
        try:
            fut.result()
        except KafkaException as exc:
            # Another `apply` (or metadata not yet propagated) won the race: the
            # topic exists but was not checked this run.
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            raced.add(name)
    return [c for c in changes if c.topic not in raced] + [
        Change(n, "warning", "created concurrently by someone else; run apply again to check it")
        for n in sorted(raced)
    ]


def _config_drift(
    admin: AdminClient, names: list[str], declared: dict[str, dict[str, str]]
) -> dict[str, dict[str, str | None]]:
    """For each topic, the declared keys whose current value differs: key -> current."""
    current = topic_configs(admin, names)
    drift: dict[str, dict[str, str | None]] = {}
    for name in names:
        for key, want in declared[name].items():
            entry = current[name].get(key)
            have = entry.value if entry is not None else None
            if have != want:
                drift.setdefault(name, {})[key] = have
    return drift


def _unknown_topic(exc: BaseException) -> bool:
    unknown = KafkaError.UNKNOWN_TOPIC_OR_PART
    return isinstance(exc, KafkaException) and exc.args[0].code() == unknown


@retry(retry=retry_if_exception(_unknown_topic), stop=stop_after_delay(_TIMEOUT_S),
       wait=wait_fixed(0.2), reraise=True)  # fmt: skip
def topic_configs(admin: AdminClient, names: list[str]) -> dict[str, dict[str, Any]]:
    """Each topic's configs (name -> ConfigEntry), asked again while the broker answering
    does not know a topic yet: on a cluster, each broker learns of a topic just created
    on its own schedule, and the one `_await_visible` asked may not be the one asked here
    (a second `apply` right after the first failed so on three brokers)."""
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    return {res.name: fut.result() for res, fut in admin.describe_configs(resources).items()}


def _declared(
    topology: Topology, min_insync_replicas: int | None, max_record_bytes: int | None
) -> dict[str, dict[str, str]]:
    """Each topic's enforced configs: its spec's, and the cluster-wide min.insync.replicas
    and record limit the settings ask for."""
    extra = {} if min_insync_replicas is None else {"min.insync.replicas": str(min_insync_replicas)}
    if max_record_bytes is not None:
        extra["max.message.bytes"] = str(sizes.topic_max_message_bytes(max_record_bytes))
    return {name: {**spec.configs(), **extra} for name, spec in topology.specs()}


def _align_configs(
    admin: AdminClient, declared: dict[str, dict[str, str]], names: list[str]
) -> list[Change]:
    if not names:
        return []
    drift = _config_drift(admin, names, declared)
    if not drift:
        return []
    alters = [
        ConfigResource(
            ResourceType.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry(k, declared[name][k], incremental_operation=AlterConfigOpType.SET)
                for k in keys
            ],
        )
        for name, keys in drift.items()
    ]
    for fut in admin.incremental_alter_configs(alters).values():
        fut.result()
    # Like topic creation, config changes reach describe_configs asynchronously.
    deadline = time.monotonic() + _TIMEOUT_S
    while _config_drift(admin, list(drift), declared):
        if time.monotonic() > deadline:
            raise TimeoutError(f"config changes not visible after {_TIMEOUT_S}s")
        time.sleep(0.1)
    return [
        Change(name, "config", f"{key}: {have} -> {declared[name][key]}")
        for name, keys in drift.items()
        for key, have in keys.items()
    ]
