"""A stateless agent's loop in batches, on confluent-kafka: poll what is on hand, step
every record, produce every output, wait for every acknowledgement, commit, poll again.

Why: one record at a time through faust, aiokafka and asyncio, a route worker spends
about six times the CPU per record that this loop does on the same step (measured,
docs/benchmarks.md "The transport, by measurement"): librdkafka polls, batches,
compresses and acknowledges in its own threads, in C, and the per-record framework
(event loop, sensors, ack window) is gone.

One thread, one batch at a time:
1. poll up to `batch` records, what is on hand: a lone record is taken at once, never
   waited for to fill a batch;
2. step each record (tried again with backoff while the world fails it); a record that
   fails its step, or whose outputs are over the record limit, gets its dead letter
   instead (DeadLetters): never its batch;
3. produce every output (idempotent, acks=all), in the order polled;
4. wait for every acknowledgement. An output the broker refuses as too large, even
   sent alone, is the record's fault: the record's dead letter replaces its outputs
   (the broker judges a batch of records, so a refusal beside others is tried again
   alone first). Any other failure is the world's: the same outputs are sent again,
   with capped backoff, until they are acknowledged (byte-identical, so a copy the
   broker kept after all is a duplicate that downstream dedupe absorbs);
5. commit the batch's offsets, then poll again.

Nothing is in flight when it polls, so a rebalance (which runs inside poll) never
finds work under way, and an input's offset is committed only once its outputs are
acknowledged: at-least-once. Outputs leave in the order their inputs were polled,
through an idempotent producer, so order per key holds (outputs sent again after the
world failed them come after those acknowledged beside them, as in the other agents'
failure policy). A commit refused because the group moved on is logged: the
partition's next owner reads the batch again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from streams.agents.metrics import AgentMetrics
from streams.agents.spans import hop_span
from streams.agents.takeover import Takeover
from streams.faults import is_worlds_fault
from streams.kafka import clients as kafka
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing
from streams.settings import KafkaSettings

log = logging.getLogger(__name__)

BatchStep = Callable[[Origin], list[Outgoing]]
_START_TRIES = 5
# The broker (or the producer, before sending) refuses the record as too large.
_TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})


class Stopped(Exception):
    """The loop was asked to stop while it waited: the batch is left uncommitted, to be
    read again by the partition's next owner."""


@dataclass(eq=False)
class _Record:
    """One polled record, its outputs, and what became of them."""

    origin: Origin
    outputs: list[Outgoing]
    failed: KafkaError | None = None  # the first delivery failure of its outputs
    refusals: int = 0  # times refused as too large: 1, sent alone; 2, its letter; 3, bare
    sent: list[Outgoing] = field(default_factory=list)  # outputs acknowledged


class BatchLoop:
    def __init__(
        self,
        stage: str,
        step: BatchStep,
        *,
        consumer: Consumer,  # made by `consumer()` below
        producer: Producer,
        topics: list[str],
        dead_letters: DeadLetters,
        metrics: AgentMetrics | None = None,
        batch: int = 1000,
        poll_s: float = 0.1,
        retry_initial_s: float = 0.5,
        retry_max_s: float = 30.0,
        takeover: Takeover | None = None,
    ) -> None:
        self.stage = stage
        self._step = step
        self._consumer = consumer
        self._producer = producer
        self._topics = topics
        self._dead_letters = dead_letters
        self.metrics = metrics
        self._batch = batch
        self._poll_s = poll_s
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._takeover = takeover  # where partitions this group never committed start
        self._to_commit: list[TopicPartition] = []  # those starts, committed at once
        self._stop = threading.Event()

    def run(self, stop: threading.Event | None = None) -> None:
        """Poll, step, produce, acknowledge and commit until `stop` is set; then leave
        the group (its partitions go to the other workers at once)."""
        if stop is not None:
            self._stop = stop
        self._consumer.subscribe(self._topics, on_assign=self._on_assign)
        try:
            while not self._stop.is_set():
                try:
                    self.run_once()
                except Stopped:
                    break
        finally:
            self._consumer.close()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Partitions this group never committed start where the group it takes over
        from left them (takeover.py), and are committed there by the next batch."""
        if self._takeover is not None and partitions:
            for attempt in range(1, _START_TRIES + 1):
                try:
                    committed = consumer.committed(partitions, timeout=10)
                    fresh = [tp for tp in committed if tp.offset < 0]
                    starts = self._takeover.starts(fresh) if fresh else {}
                    break
                except KafkaException as exc:  # the world's; without it, no start
                    if attempt == _START_TRIES:
                        raise
                    self._count_retry(None, exc)
                    self._sleep(self._wait_s(attempt))
            self._to_commit = []
            for tp in partitions:
                start = starts.get((tp.topic, tp.partition))
                if start is not None:
                    log.info("%s: %s[%d] starts at %d, where group %s left it", self.stage,
                             tp.topic, tp.partition, start, self._takeover.group)  # fmt: skip
                    tp.offset = start
                    self._to_commit.append(TopicPartition(tp.topic, tp.partition, start))
        # Given a callback, the client leaves the assignment to it (an eager protocol:
        # the whole assignment, every rebalance).
        consumer.assign(partitions)

    def _take_over(self) -> None:
        """The starts of the last assignment committed (takeover.py)."""
        if self._to_commit:
            self._commit_offsets(self._to_commit)
            self._to_commit = []

    def run_once(self) -> int:
        """One batch, polled to committed: how many records it held."""
        origins = self._poll()
        self._take_over()
        if not origins:
            return 0
        started = time.perf_counter()
        records = [_Record(origin, self._outputs(origin)) for origin in origins]
        self._deliver(records)
        self._commit(origins)
        if self.metrics is not None:  # each record's latency: its batch's
            seconds = time.perf_counter() - started
            self.metrics.record_batch(self.stage, [r.sent for r in records], seconds)
        return len(records)

    def _poll(self) -> list[Origin]:
        origins = []
        for msg in self._consumer.consume(self._batch, self._poll_s):
            error = msg.error()
            if error is not None:  # the client's news (a broker down, say): it retries
                log.warning("%s: consumer: %s", self.stage, error)
                continue
            origins.append(Origin.from_message(msg))
        return origins

    def _outputs(self, origin: Origin) -> list[Outgoing]:
        """The step's outputs fitted to the record limit, or the record's dead letter;
        tried again, with backoff, for as long as the world fails the step (or the blob
        store a dead letter's value goes to)."""
        attempt = 0
        while True:
            try:
                return self._try_outputs(origin, attempt + 1)
            except Exception as exc:
                if not is_worlds_fault(exc):
                    raise
                attempt += 1
                self._count_retry(origin, exc)
                self._sleep(self._wait_s(attempt))

    def _try_outputs(self, origin: Origin, attempts: int) -> list[Outgoing]:
        with hop_span(self.stage, origin):
            try:
                outputs = self._step(origin)
            except Exception as exc:
                if is_worlds_fault(exc):
                    raise
                return [self._dead_letters.letter(self.stage, origin, exc, attempts=attempts)]
        return self._dead_letters.fit(self.stage, origin, outputs)

    def _count_retry(self, origin: Origin | None, exc: BaseException | None) -> None:
        where = "" if origin is None else f" {origin.topic}[{origin.partition}]@{origin.offset}"
        if self.metrics is not None:
            self.metrics.retries.labels(self.stage, type(exc).__name__).inc()
        log.warning("%s%s will be retried: %s: %s", self.stage, where, type(exc).__name__, exc)

    def _deliver(self, records: list[_Record]) -> None:
        """Every record's outputs acknowledged (or its dead letter, if refused)."""
        todo = records
        alone = False  # each record's outputs sent and acknowledged before the next's
        attempt = 0
        while todo:
            for record in todo:
                record.failed = None
                record.sent = []
                self._produce(record)
                if alone:
                    self._flush()
            self._flush()
            world = False
            for record in todo:
                failed = record.failed
                if failed is None:
                    continue
                if failed.fatal() or failed.code() == KafkaError._FATAL:
                    raise KafkaException(failed)  # the producer is done for: so is the worker
                if failed.code() in _TOO_LARGE:
                    alone = True
                    world = world or record.refusals >= 3  # even the bare letter: wait
                    try:
                        record.outputs = self._refused(record)
                    except Exception as exc:  # the blob store its value goes to is down
                        if not is_worlds_fault(exc):
                            raise
                        record.refusals -= 1  # refused alone again next time, then this
                        world = True
                        self._count_retry(record.origin, exc)
                else:
                    world = True
                    self._count_retry(record.origin, KafkaException(failed))
            if world:
                attempt += 1
                self._sleep(self._wait_s(attempt))
            todo = _again(todo)
        for record in records:
            self._dead_letters.sent(record.sent)

    def _refused(self, record: _Record) -> list[Outgoing]:
        """What to send after the broker refused one of the record's outputs as too large.

        The broker judges a batch of records, so a record refused beside others is sent
        again alone first. Refused alone, it is the record's fault (the broker's limit is
        below ours): its dead letter, the value aside; that refused too, the letter with
        its error headers alone."""
        record.refusals += 1
        if record.refusals == 1:
            return record.outputs
        assert record.failed is not None  # noqa: S101 - the refusal
        if record.refusals == 2:
            return [self._dead_letters.letter(self.stage, record.origin,
                                              KafkaException(record.failed),
                                              without_value=True)]  # fmt: skip
        return [self._dead_letters.bare(record.outputs[0])]  # sent until it goes

    def _produce(self, record: _Record) -> None:
        for out in record.outputs:
            partition = -1 if out.partition is None else out.partition  # -1: the key's
            hdrs = cast("list[tuple[str, str | bytes | None]]", out.headers)
            acked = partial(_acked, record, out)
            while True:
                try:
                    self._producer.produce(out.topic, out.value, out.key, partition=partition,
                                           headers=hdrs, on_delivery=acked)  # fmt: skip
                    break
                except BufferError:  # the producer's queue is full: let it drain
                    self._producer.poll(0.05)
                except KafkaException as exc:  # refused before it left (over the size)
                    record.failed = record.failed or exc.args[0]
                    return  # judged with the delivery failures, fatal ones included

    def _flush(self) -> None:
        while self._producer.flush(0.5) > 0:
            if self._stop.is_set():
                raise Stopped

    def _commit(self, origins: list[Origin]) -> None:
        ends = {(o.topic, o.partition): o.offset + 1 for o in origins}
        self._commit_offsets([TopicPartition(t, p, o) for (t, p), o in ends.items()])

    def _commit_offsets(self, offsets: list[TopicPartition]) -> None:
        try:
            done = self._consumer.commit(offsets=offsets, asynchronous=False) or []
            refused = [tp for tp in done if tp.error is not None]
            if refused:  # read again by the next owner, as below
                where = [(tp.topic, tp.partition) for tp in refused]
                log.warning("%s: commit refused for %s: %s", self.stage, where, refused[0].error)
        except KafkaException as exc:
            # The group moved on (a rebalance, this member timed out): the partition's
            # next owner reads these records again; their outputs carry the same ids.
            log.warning("%s: commit of %d partitions refused: %s", self.stage, len(offsets),
                        exc.args[0])  # fmt: skip

    def _wait_s(self, attempt: int) -> float:
        """Capped exponential backoff, as the other agents' (failure_policy.py)."""
        return float(min(self._retry_max_s, self._retry_initial_s * 2 ** (attempt - 1)))

    def _sleep(self, seconds: float) -> None:
        if self._stop.wait(seconds):
            raise Stopped


def _again(records: list[_Record]) -> list[_Record]:
    """What to send again after a round: each failed record and, for order per key, every
    record after it from the same input partition (keys keep to one partition), even
    acknowledged: a copy with the same ids is a duplicate downstream dedupe absorbs, a
    later record ahead of an earlier one would not be. A record refused as too large
    goes again alone: its outputs were not written."""
    failed_from: dict[tuple[str, int], int] = {}
    for i, record in enumerate(records):
        if record.failed is not None and record.failed.code() not in _TOO_LARGE:
            failed_from.setdefault((record.origin.topic, record.origin.partition), i)
    return [
        r for i, r in enumerate(records)
        if r.failed is not None
        or i > failed_from.get((r.origin.topic, r.origin.partition), len(records))
    ]  # fmt: skip


def _acked(record: _Record, out: Outgoing, err: KafkaError | None, _msg: object) -> None:
    if err is None:
        record.sent.append(out)
    elif record.failed is None:
        record.failed = err


def consumer(settings: KafkaSettings, group: str, **overrides: Any) -> Consumer:
    """A consumer for a BatchLoop. Its assignor spreads each topic's partitions over the
    members, as faust's does: the sticky assignors balance the count over all the
    topics, and gave one of two workers every partition of docs.oriented. An eager
    one, so the loop's assignment callback assigns the whole assignment."""
    return kafka.consumer(settings, group, **{"partition.assignment.strategy": "range",
                                              **overrides})  # fmt: skip
