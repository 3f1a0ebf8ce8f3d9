"""Dead letters: list, show and replay the records in docs.dlq.

Replay puts a record back on the topic it failed on (the `pagestream.error.topic`
header) with its original key, value and headers, plus a replay count; a record
already replayed `max_replays` times is refused, so a poison record cannot loop
forever. Listing never commits. Nothing here prints record values: they are
documents and may hold personal data.

What "already replayed" means: a dead letter is replayed once by the replay group,
whatever filters the runs use. The group's committed offset on a partition is the
first dead letter it has not sent back and may still send (one a filter skipped, or
one whose kept value the blob store could not give), and the commit's metadata lists
the offsets after it that were sent back (`_Progress`). So a run with a filter never
passes over the dead letters it skipped, a later run finds them, and nothing is sent
back twice. A letter refused for good (replayed `max_replays` times, its value, key or
headers not kept, over the record limit) is passed over like one sent: to send those
again, replay with a new `--group`. Past the metadata's room (many skipped and sent
letters interleaved), letters are deferred to a later run, never sent unrecorded.
Progress is committed after each batch the broker acknowledged: an interrupted replay
resumes where it stopped.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from tenacity import retry, retry_if_exception, stop_after_delay, wait_exponential

from schemas import headers
from streams.blobs import BlobError, BlobStore
from streams.kafka import clients as kafka
from streams.kafka import sizes
from streams.kafka.envelope import Origin
from streams.kafka.faults import WorldError
from streams.settings import BlobSettings, Settings
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
        return not (self.until is not None and (failed_at is None or failed_at > self.until))


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


def _partitions(consumer: Consumer, topic: str) -> list[TopicPartition]:
    parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    return [TopicPartition(topic, p) for p in parts]


def _read(consumer: Consumer, topic: str, starts: list[TopicPartition]) -> Iterator[DeadLetter]:
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
        return [d for d in _read(consumer, topic, _partitions(consumer, topic)) if flt.matches(d)]
    finally:
        consumer.close()


def pending_dead(
    settings: Settings, flt: Filter, group: str | None = None, limit: int | None = None
) -> list[DeadLetter]:
    """The dead letters the replay group has not handled yet (neither sent back nor
    refused for good), oldest first, at most `limit`: what an operator still has to look
    at. Commits nothing."""
    topic = settings.topology.name(DLQ)
    group = settings.dlq_replay_group if group is None else settings.topology.own(group)
    consumer = kafka.consumer(settings.kafka, group, **{"enable.auto.commit": False})
    found: list[DeadLetter] = []
    try:
        committed = consumer.committed(_partitions(consumer, topic), timeout=10)
        progress = {tp.partition: _Progress.committed(tp) for tp in committed}
        starts = [TopicPartition(topic, p, pr.position) for p, pr in progress.items()]
        for dead in _read(consumer, topic, starts):
            if dead.offset not in progress[dead.partition].sent and flt.matches(dead):
                found.append(dead)
                if limit is not None and len(found) >= limit:
                    break
    finally:
        consumer.close()
    return found


@dataclass
class ReplayReport:
    replayed: int = 0
    refused: int = 0  # replayed too often already, or the value was dropped
    skipped: int = 0  # did not match the filter
    before: int = 0  # sent back by an earlier run of the group already
    # Not sent this run: the group's record of letters sent past a skipped one is full
    # (many skipped and sent letters interleaved). A run that sends the skipped ones
    # (another filter) moves the position on and makes room.
    deferred: int = 0


# The one refusal a later run may overturn by itself (the store back): it holds the
# group's position. Every other refusal is for good, and consumed like a letter sent.
_UNREADABLE = "refused: the original value is not readable"
_METADATA_CHARS = 3_500  # of the commit's metadata (brokers keep 4,096 by default)


@dataclass
class _Progress:
    """A replay group on one partition: `position`, the first dead letter it has not
    sent back, and `sent`, the offsets after it that it has (kept in the commit's
    metadata as ranges, e.g. "3-7,9")."""

    position: int
    sent: set[int]
    # Characters the metadata takes, counted as offsets are recorded (sorting the set
    # for every letter would cost a replay of many letters dearly).
    _chars: int = 0

    def __post_init__(self) -> None:
        self._chars = len(self.metadata())

    def record(self, offset: int) -> bool:
        """Records `offset` as sent back, if the commit's metadata has room for it; False
        (not recorded) if it has not: the letter must not be sent, or later runs would
        send it again, run after run."""
        # A run of its own ("o,") or a run's end rewritten: never more than this.
        grows = len(str(offset)) + 1
        if self._chars + grows > _METADATA_CHARS:
            return False
        self._chars += grows
        self.sent.add(offset)
        return True

    @classmethod
    def committed(cls, tp: TopicPartition) -> _Progress:
        sent: set[int] = set()
        for part in (tp.metadata or "").split(","):
            first, _, last = part.partition("-")
            if first.isdigit() and (not last or last.isdigit()):
                sent.update(range(int(first), int(last or first) + 1))
        return cls(tp.offset, sent)  # negative: nothing committed, from the beginning

    def advance(self, first_unsent: int | None, read_up_to: int) -> None:
        """After a run that read up to `read_up_to` (exclusive) and left `first_unsent`
        (or nothing) behind."""
        self.position = read_up_to if first_unsent is None else first_unsent
        self.sent = {o for o in self.sent if o >= self.position}
        self._chars = len(self.metadata())

    def metadata(self) -> str:
        """The sent offsets as ranges (`record` keeps them within the broker's limit)."""
        return ",".join(
            str(first) if first == last else f"{first}-{last}"
            for first, last in _runs(sorted(self.sent))
        )


def _runs(offsets: list[int]) -> Iterator[tuple[int, int]]:
    start = prev = None
    for o in offsets:
        if prev is not None and o == prev + 1:
            prev = o
            continue
        if start is not None and prev is not None:
            yield start, prev
        start = prev = o
    if start is not None and prev is not None:
        yield start, prev


def replay(
    settings: Settings,
    flt: Filter,
    *,
    dry_run: bool = False,
    rate_per_s: float | None = None,
    max_replays: int | None = None,
    group: str | None = None,
    on_each: Callable[[DeadLetter, str], None] | None = None,
) -> ReplayReport:
    """Send matching dead letters back to their original topic; see the module docstring.

    `rate_per_s`, `max_replays` and `group` default to `settings.dlq`."""
    rate_per_s = settings.dlq.replay_rate_per_s if rate_per_s is None else rate_per_s
    max_replays = settings.dlq.max_replays if max_replays is None else max_replays
    topo = settings.topology
    group = settings.dlq_replay_group if group is None else topo.own(group)
    consumer = kafka.consumer(settings.kafka, group)
    producer = None if dry_run else kafka.producer(settings.kafka)
    blobs = _LazyStore(settings.blobs)  # values too large for their letters
    report = ReplayReport()
    dlq_topic = topo.name(DLQ)
    send = None if producer is None else _Sender(producer, rate_per_s)
    try:
        committed = consumer.committed(_partitions(consumer, dlq_topic), timeout=10)
        progress = {tp.partition: _Progress.committed(tp) for tp in committed}
        starts = [TopicPartition(dlq_topic, p, pr.position) for p, pr in progress.items()]
        read_up_to: dict[int, int] = {}
        first_unsent: dict[int, int] = {}
        handled = 0
        for dead in _read(consumer, dlq_topic, starts):
            read_up_to[dead.partition] = dead.offset + 1
            if dead.offset in progress[dead.partition].sent:
                report.before += 1
                continue
            verdict, value = _decide(dead, flt, max_replays, blobs, settings.kafka.max_record_bytes)
            if verdict == "replay" and not progress[dead.partition].record(dead.offset):
                verdict = "deferred"
            if verdict == "replay":
                if send is not None:
                    send(dead, value)
                report.replayed += 1
            elif verdict == "deferred":
                first_unsent.setdefault(dead.partition, dead.offset)
                report.deferred += 1
            else:
                if verdict == "skip" or verdict.startswith(_UNREADABLE):
                    # A later run may send it (another filter, the store back): held.
                    first_unsent.setdefault(dead.partition, dead.offset)
                if verdict == "skip":
                    report.skipped += 1
                else:
                    report.refused += 1
            if on_each is not None:
                on_each(dead, verdict)
            handled += 1
            if producer is not None and handled % 100 == 0:
                _commit(producer, consumer, progress, first_unsent, read_up_to, dlq_topic)
        if producer is not None:
            _commit(producer, consumer, progress, first_unsent, read_up_to, dlq_topic)
    finally:
        consumer.close()
    return report


class _Sender:
    """Sends dead letters back to their original topic, at most `rate_per_s` a second."""

    def __init__(self, producer: Producer, rate_per_s: float) -> None:
        self._producer = producer
        self._interval = 1.0 / rate_per_s if rate_per_s > 0 else 0.0
        self._next = time.monotonic()

    def __call__(self, dead: DeadLetter, value: bytes | None) -> None:
        target = dead.header(headers.ERROR_TOPIC)
        assert target is not None  # noqa: S101 - _verdict checked it
        time.sleep(max(0.0, self._next - time.monotonic()))
        self._next = max(self._next, time.monotonic()) + self._interval
        sent: list[tuple[str, str | bytes | None]] = [*_sent_headers(dead)]
        self._producer.produce(target, value, dead.key, headers=sent)
        self._producer.poll(0)


def _decide(
    dead: DeadLetter, flt: Filter, max_replays: int, blobs: _LazyStore, max_record_bytes: int
) -> tuple[str, bytes | None]:
    """The verdict on a dead letter ("replay", "skip" or why it is refused), and the value
    to send back."""
    verdict = _verdict(dead, flt, max_replays)
    value = dead.value
    if verdict == "replay" and value is None:
        value, verdict = _kept_value(dead, blobs)
    if verdict == "replay":
        verdict = _fits(dead, value, max_record_bytes)
    return verdict, value


def _fits(dead: DeadLetter, value: bytes | None, max_record_bytes: int) -> str:
    """ "replay" if the record sent back fits the record limit (the one gate,
    streams/kafka/sizes.py), else why not: a producer would refuse it."""
    size = sizes.record_bytes(dead.key, value, _sent_headers(dead))
    if size > max_record_bytes:
        return f"refused: {size} bytes sent back, over the record limit of {max_record_bytes}"
    return "replay"


def _sent_headers(dead: DeadLetter) -> list[tuple[str, bytes]]:
    """The headers a replayed record carries: the original's, and the replay count."""
    kept = [(k, v) for k, v in dead.headers if not _replaced(k)]
    return [*kept, (headers.REPLAY_COUNT, str(dead.replays + 1).encode())]


def _replaced(header_name: str) -> bool:
    """Headers a replay drops: the error facts (a new failure writes fresh ones) and the
    old replay count."""
    return header_name.startswith(headers.ERROR_PREFIX) or header_name == headers.REPLAY_COUNT


def _verdict(dead: DeadLetter, flt: Filter, max_replays: int) -> str:
    if not flt.matches(dead):
        return "skip"
    if dead.replays >= max_replays:
        return f"refused: replayed {dead.replays} times already (max {max_replays})"
    if dead.value is None and dead.header(headers.VALUE_REF) is None:
        return "refused: the original value was too large to keep"
    if dead.header(headers.KEY_DROPPED) or dead.header(headers.HEADERS_DROPPED):
        return "refused: the original key or headers were too large to keep"
    if dead.header(headers.ERROR_TOPIC) is None:
        return "refused: no pagestream.error.topic header"
    return "replay"


class _LazyStore:
    """The blob store, opened on the first dead letter that needs it: a replay of letters
    that kept their values needs no store (nor its credentials)."""

    def __init__(self, settings: BlobSettings) -> None:
        self._settings = settings
        self._store: BlobStore | None = None

    def get(self, uri: str) -> bytes:
        if self._store is None:
            self._store = BlobStore.from_settings(self._settings)
        return self._store.get(uri)


def _kept_value(dead: DeadLetter, blobs: _LazyStore) -> tuple[bytes | None, str]:
    """The original value a dead letter kept in the blob store, and the verdict: a value
    gone from the store, or a store down now, refuses it for this run (a later run may
    send it: the position stays before it)."""
    ref = dead.header(headers.VALUE_REF)
    assert ref is not None  # noqa: S101 - _verdict checked it
    try:
        return blobs.get(ref), "replay"
    except (BlobError, WorldError) as exc:
        return None, f"{_UNREADABLE} ({type(exc).__name__})"


def _commit(
    producer: Producer,
    consumer: Consumer,
    progress: dict[int, _Progress],
    first_unsent: dict[int, int],
    read_up_to: dict[int, int],
    topic: str,
) -> None:
    # Offsets only after the replayed records are acknowledged: a crash in between
    # replays them again (at-least-once; consumers dedupe), never loses them.
    remaining = producer.flush(30)
    if remaining:
        raise RuntimeError(f"{remaining} replayed records not acknowledged; progress not committed")
    offsets = []
    for p, up_to in read_up_to.items():
        progress[p].advance(first_unsent.get(p), up_to)
        offsets.append(TopicPartition(topic, p, progress[p].position,
                                      metadata=progress[p].metadata()))  # fmt: skip
    if offsets:
        consumer.commit(offsets=offsets, asynchronous=False)
