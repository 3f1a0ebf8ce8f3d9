"""The records of docs.dlq: what a dead letter says about its failure, a filter over
them, and reading the topic up to its end (listing never commits)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from tenacity import retry, retry_if_exception, stop_after_delay, wait_exponential

from schemas import headers
from streams.kafka import clients as kafka
from streams.kafka.envelope import Origin
from streams.settings import Settings
from streams.topics import DLQ

_POLL_S = 1.0
_IDLE_GIVE_UP_S = 30.0


@dataclass(frozen=True)
class DeadLetter(Origin):
    """A record read from docs.dlq, with the facts its error headers carry."""

    @property
    def doc_id(self) -> str | None:
        return self.key.decode("utf-8", "replace") if self.key is not None else None

    @property
    def stage(self) -> str | None:
        return self.header(headers.ERROR_STAGE)

    @property
    def exception_class(self) -> str | None:
        return self.header(headers.ERROR_EXCEPTION_CLASS)

    @property
    def failed_at(self) -> datetime | None:
        raw = self.header(headers.ERROR_FAILED_AT)
        try:
            return datetime.fromisoformat(raw) if raw else None
        except ValueError:
            return None

    @property
    def tenant(self) -> str | None:
        """The tenant of the document the letter is about, as its record says (a
        submission, a page and a webhook delivery's result carry it); None when it does not
        say: not a record, no tenant, or a value too large for the letter (kept in the
        blob store). Such letters are an operator's alone."""
        if self.value is None:
            return None
        try:
            record = json.loads(self.value)
        except ValueError:
            return None
        if not isinstance(record, dict):
            return None
        tenant = record.get("tenant")
        if tenant is None and isinstance(record.get("result"), dict):
            tenant = record["result"].get("tenant")
        return tenant if isinstance(tenant, str) else None

    @property
    def replays(self) -> int:
        raw = self.header(headers.REPLAY_COUNT)
        return int(raw) if raw and raw.isdigit() else 0


@dataclass(frozen=True)
class Filter:
    stage: str | None = None
    exception: str | None = None  # substring of the exception class, e.g. "ImageDecodeError"
    doc_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    # A selection by position, (partition, offset) on docs.dlq: the console's checkboxes.
    letters: frozenset[tuple[int, int]] | None = None
    # Only the letters of this tenant's documents (DeadLetter.tenant): a tenant's admin key.
    tenant: str | None = None

    def matches(self, dead: DeadLetter) -> bool:
        if self.letters is not None and (dead.partition, dead.offset) not in self.letters:
            return False
        if self.stage is not None and dead.stage != self.stage:
            return False
        if self.exception is not None and self.exception not in (dead.exception_class or ""):
            return False
        if self.doc_id is not None and dead.doc_id != self.doc_id:
            return False
        failed_at = dead.failed_at
        if self.since is not None and (failed_at is None or failed_at < self.since):
            return False
        if self.until is not None and (failed_at is None or failed_at > self.until):
            return False
        return self.tenant is None or dead.tenant == self.tenant


# What a partition between leaders answers for a moment. Decided by code: the error
# get_watermark_offsets raises does not carry librdkafka's retriable flag.
_BETWEEN_LEADERS = frozenset({
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
})  # fmt: skip


def _retriable(exc: BaseException) -> bool:
    if not isinstance(exc, KafkaException) or not exc.args:
        return False
    error = exc.args[0]
    return isinstance(error, KafkaError) and error.code() in _BETWEEN_LEADERS


@retry(retry=retry_if_exception(_retriable), stop=stop_after_delay(30),
       wait=wait_exponential(multiplier=0.1, max=2), reraise=True)  # fmt: skip
def _log_end(consumer: Consumer, tp: TopicPartition) -> int:
    # A partition between leaders (a topic just created, a broker restarting) answers
    # NOT_LEADER_FOR_PARTITION for a moment: asked again, not given up on.
    return int(consumer.get_watermark_offsets(tp, timeout=10)[1])


def partitions(consumer: Consumer, topic: str) -> list[TopicPartition]:
    parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    return [TopicPartition(topic, p) for p in parts]


def read(consumer: Consumer, topic: str, starts: list[TopicPartition]) -> Iterator[DeadLetter]:
    """Every dead letter up to the log end as of the start, from `starts` (a negative
    offset: from the beginning). Partitions are assigned, not subscribed: one operator
    command, no group rebalance to wait for."""
    tps = [TopicPartition(topic, tp.partition) for tp in starts]
    ends = {tp.partition: _log_end(consumer, tp) for tp in tps}
    consumer.assign(
        [
            TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
            for tp in starts
        ]
    )
    remaining = {tp.partition for tp in starts if max(tp.offset, 0) < ends[tp.partition]}
    idle_since = time.monotonic()
    while remaining:
        msgs = consumer.consume(500, _POLL_S)
        for msg in msgs:
            if msg.error() is not None:
                continue
            dead = DeadLetter.from_message(msg)
            if dead.offset >= ends[dead.partition]:
                remaining.discard(dead.partition)
                continue
            yield dead
            if dead.offset + 1 >= ends[dead.partition]:
                remaining.discard(dead.partition)
        if not msgs:
            # Transaction markers take offsets too: the position passes the end
            # without a last record to say so.
            for tp in consumer.position([TopicPartition(topic, p) for p in remaining]):
                if tp.offset >= ends[tp.partition]:
                    remaining.discard(tp.partition)
            if time.monotonic() - idle_since > _IDLE_GIVE_UP_S:
                raise TimeoutError(f"{topic}: no progress reading partitions {sorted(remaining)}")
        else:
            idle_since = time.monotonic()


def list_dead(settings: Settings, flt: Filter) -> list[DeadLetter]:
    topic = settings.topology.name(DLQ)
    consumer = kafka.consumer(
        settings.kafka,
        f"pagestream-dlq-list-{uuid.uuid4().hex[:8]}",
        **{"enable.auto.commit": False},
    )
    try:
        return [d for d in read(consumer, topic, partitions(consumer, topic)) if flt.matches(d)]
    finally:
        consumer.close()
