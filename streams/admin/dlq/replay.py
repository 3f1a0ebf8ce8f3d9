"""Replay: dead letters sent back to the topic they failed on (the
`pagestream.error.topic` header), with their original key, value and headers plus a
replay count, at a bounded rate, or refused with the reason; what the replay group has
sent already is its progress (progress.py).

The letters sent and the group's progress are committed together, in one Kafka
transaction a batch, under a transactional id named after the group. A replay of the
same group started anywhere else (another gateway replica, another `pagestream dlq
replay`) fences this one: what this one had not committed is aborted, unseen by the
read_committed consumers, and the newer run starts from the last commit. So two runs
at once never send a letter twice, on one machine or across replicas.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from schemas import headers
from streams.admin.dlq.letters import DeadLetter, Filter, partitions, read
from streams.admin.dlq.progress import Progress
from streams.blobs import BlobError, BlobStore
from streams.faults import WorldError
from streams.kafka import clients as kafka
from streams.kafka import sizes
from streams.settings import BlobSettings, Settings
from streams.topics import DLQ


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


class ReplayTakenOver(RuntimeError):
    """Another run of the same replay group started and fenced this one."""


# A transaction's batch: this many letters, or this long, whichever comes first.
_BATCH_LETTERS = 100
_BATCH_S = 5.0
_TXN_TIMEOUT_S = 30.0
# The errors that say a newer producer with this transactional id took over.
_FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                     KafkaError.INVALID_PRODUCER_EPOCH})  # fmt: skip

# One replay of a replay group at a time in this process (the gateway's admin requests,
# each on a thread of its pool): they take turns rather than fence each other (issue
# 34). Keyed by the group's name on the cluster.
_RUNNING: dict[str, threading.Lock] = {}
_RUNNING_GUARD = threading.Lock()


def _group_lock(group: str) -> threading.Lock:
    with _RUNNING_GUARD:
        return _RUNNING.setdefault(group, threading.Lock())


# The one refusal a later run may overturn by itself (the store back): it holds the
# group's position. Every other refusal is for good, and consumed like a letter sent.
_UNREADABLE = "refused: the original value is not readable"


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
    """Send matching dead letters back to their original topic, each once per replay group
    (progress.py says what "once" means). Runs of one group in this process take turns:
    each starts from what the one before it committed. A run of the group started in
    another process fences this one: ReplayTakenOver, with only what this one committed
    sent.

        `rate_per_s`, `max_replays` and `group` default to `settings.dlq`."""
    group = settings.dlq_replay_group if group is None else settings.topology.own(group)
    with _group_lock(group):
        return _replay(settings, flt, dry_run=dry_run, rate_per_s=rate_per_s,
                       max_replays=max_replays, group=group, on_each=on_each)  # fmt: skip


def _replay(
    settings: Settings,
    flt: Filter,
    *,
    dry_run: bool,
    rate_per_s: float | None,
    max_replays: int | None,
    group: str,
    on_each: Callable[[DeadLetter, str], None] | None,
) -> ReplayReport:
    rate_per_s = settings.dlq.replay_rate_per_s if rate_per_s is None else rate_per_s
    max_replays = settings.dlq.max_replays if max_replays is None else max_replays
    topo = settings.topology
    errors: list[KafkaError] = []  # the producer's, as librdkafka reports them
    producer = None if dry_run else _transactional(settings, group, errors, rate_per_s)
    consumer = kafka.consumer(settings.kafka, group)
    blobs = _LazyStore(settings.blobs)  # values too large for their letters
    report = ReplayReport()
    dlq_topic = topo.name(DLQ)
    send = None if producer is None else _Sender(producer, rate_per_s)
    try:
        # Read after init_transactions: a fenced run's open transaction is aborted by
        # then, so this is the last progress any run committed.
        committed = consumer.committed(partitions(consumer, dlq_topic), timeout=10)
        progress = {tp.partition: Progress.committed(tp) for tp in committed}
        starts = [TopicPartition(dlq_topic, p, pr.position) for p, pr in progress.items()]
        read_up_to: dict[int, int] = {}
        first_unsent: dict[int, int] = {}
        handled = 0
        batch_ends = time.monotonic() + _BATCH_S
        for dead in read(consumer, dlq_topic, starts):
            read_up_to[dead.partition] = dead.offset + 1
            if dead.offset in progress[dead.partition].sent:
                report.before += 1
                continue
            verdict, value = _decide(dead, flt, max_replays, blobs, settings.kafka.max_record_bytes)
            if verdict == "replay" and not progress[dead.partition].record(dead.offset):
                verdict = "deferred"
            if verdict == "replay" and send is not None:
                send(dead, value)
            if _count(report, verdict):
                first_unsent.setdefault(dead.partition, dead.offset)
            if on_each is not None:
                on_each(dead, verdict)
            handled += 1
            if producer is not None and (
                handled % _BATCH_LETTERS == 0 or time.monotonic() > batch_ends
            ):
                _commit(producer, consumer, progress, first_unsent, read_up_to, dlq_topic)
                producer.begin_transaction()
                batch_ends = time.monotonic() + _BATCH_S
        if producer is not None:
            _commit(producer, consumer, progress, first_unsent, read_up_to, dlq_topic)
    except BaseException as exc:
        if producer is not None:
            if isinstance(exc, KafkaException) and _fenced(producer, exc, errors):
                raise ReplayTakenOver(
                    f"another replay of group {group!r} started and took over: the letters "
                    "this run had not committed are left to it"
                ) from exc
            with contextlib.suppress(KafkaException):
                producer.abort_transaction(_TXN_TIMEOUT_S)
        raise
    finally:
        consumer.close()
    return report


def _fenced(producer: Producer, exc: KafkaException, errors: list[KafkaError]) -> bool:
    """Whether `exc` comes of this run's producer being fenced by a newer one with its
    transactional id. A send after the fencing fails with a bare "fatal error": the
    cause is the fatal error librdkafka reports on the next poll: to the error callback,
    or raised by the poll itself."""
    causes = [*exc.args]
    try:
        producer.poll(0)
    except KafkaException as fatal:
        causes.extend(fatal.args)
    found = [e for e in (*causes, *errors) if isinstance(e, KafkaError)]
    return any(e.code() in _FENCED or "fenced" in e.str() for e in found)


def _count(report: ReplayReport, verdict: str) -> bool:
    """Counts `verdict` in `report`; True if the letter is held for a later run (the
    group's position stays before it): skipped by the filter, deferred, or refused for
    a reason a later run may not have (the blob store back)."""
    if verdict == "replay":
        report.replayed += 1
        return False
    if verdict == "deferred":
        report.deferred += 1
        return True
    if verdict == "skip":
        report.skipped += 1
        return True
    report.refused += 1
    return verdict.startswith(_UNREADABLE)


def _transactional(
    settings: Settings, group: str, errors: list[KafkaError], rate_per_s: float
) -> Producer:
    """The group's transactional producer, in a transaction. Its init fences any other
    run of the group and waits until that run's open transaction is aborted."""
    # A batch stays open up to _BATCH_S and one letter's wait more: the broker must not
    # abort it first (its transaction.max.timeout.ms, 15 min by default, bounds this).
    open_s = _BATCH_S + (1.0 / rate_per_s if rate_per_s > 0 else 0.0) + _TXN_TIMEOUT_S
    producer = kafka.producer(
        settings.kafka,
        **{
            "transactional.id": group,
            "transaction.timeout.ms": int(min(open_s, 900.0) * 1000),
            "error_cb": errors.append,
        },
    )
    producer.init_transactions(_TXN_TIMEOUT_S)
    producer.begin_transaction()
    return producer


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
    progress: dict[int, Progress],
    first_unsent: dict[int, int],
    read_up_to: dict[int, int],
    topic: str,
) -> None:
    # The letters sent and the progress past them, in one transaction: a crash or a
    # fencing before the commit sends neither, and the next run sends them.
    offsets = []
    for p, up_to in read_up_to.items():
        progress[p].advance(first_unsent.get(p), up_to)
        offsets.append(TopicPartition(topic, p, progress[p].position,
                                      metadata=progress[p].metadata()))  # fmt: skip
    if offsets:
        producer.send_offsets_to_transaction(
            offsets, consumer.consumer_group_metadata(), _TXN_TIMEOUT_S
        )
    producer.commit_transaction(_TXN_TIMEOUT_S)
