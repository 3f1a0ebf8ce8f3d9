"""A batch's records sent: every output acknowledged, or its record's dead letter
(batches.py's steps 3 and 4), and a state's own records written.

The broker judges a batch of records, so an output refused as too large beside others
is sent again alone; refused alone, it is the record's fault: its dead letter, the
value aside, then the letter's error headers alone. Any other failure is the world's:
the same outputs are sent again with capped backoff, with every later record of the
same input partition (order per key), until they are acknowledged (byte-identical, so
a copy the broker kept after all is a duplicate that downstream dedupe absorbs). A
fatal producer error raises: the worker goes down, to be restarted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar, cast

from confluent_kafka import KafkaError, KafkaException, Producer

from streams.agents.metrics import AgentMetrics
from streams.faults import is_worlds_fault
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing

log = logging.getLogger(__name__)

# The broker (or the producer, before sending) refuses the record as too large.
_TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})
Written = Callable[[Outgoing, int], None]  # a state record acknowledged at an offset
T = TypeVar("T")


class Stopped(Exception):
    """The loop was asked to stop while it waited: the batch is left uncommitted, to be
    read again by the partition's next owner."""


@dataclass(eq=False)
class Record:
    """One polled record, its outputs, and what became of them."""

    origin: Origin
    outputs: list[Outgoing]
    failed: KafkaError | None = None  # the first delivery failure of its outputs
    refusals: int = 0  # times refused as too large: 1, sent alone; 2, its letter; 3, bare
    sent: list[Outgoing] = field(default_factory=list)  # outputs acknowledged


class Backoff:
    """Capped exponential backoff, as the other agents' (failure_policy.py), cut short by
    `stop`; each retry counted and logged."""

    def __init__(self, stage: str, metrics: AgentMetrics | None, initial_s: float,
                 max_s: float) -> None:  # fmt: skip
        self.stage = stage
        self.metrics = metrics
        self.initial_s = initial_s
        self.max_s = max_s
        self.stop = threading.Event()

    def count(self, origin: Origin | None, exc: BaseException | None) -> None:
        where = "" if origin is None else f" {origin.topic}[{origin.partition}]@{origin.offset}"
        if self.metrics is not None:
            self.metrics.retries.labels(self.stage, type(exc).__name__).inc()
        log.warning("%s%s will be retried: %s: %s", self.stage, where, type(exc).__name__, exc)

    def retried(self, call: Callable[[int], T], worth: Callable[[BaseException], bool],
                origin: Origin | None = None) -> T:  # fmt: skip
        """`call(try number)`, tried again for as long as what it raises is `worth` it."""
        attempt = 0
        while True:
            try:
                return call(attempt + 1)
            except Exception as exc:
                if not worth(exc):
                    raise
                attempt += 1
                self.count(origin, exc)
                self.sleep(attempt)

    def sleep(self, attempt: int) -> None:
        """The wait before try `attempt` + 1; Stopped if asked to stop meanwhile."""
        if self.stop.wait(float(min(self.max_s, self.initial_s * 2 ** (attempt - 1)))):
            raise Stopped


class Sends:
    def __init__(self, stage: str, producer: Producer, dead_letters: DeadLetters,
                 backoff: Backoff) -> None:  # fmt: skip
        self.stage = stage
        self._producer = producer
        self._dead_letters = dead_letters
        self._backoff = backoff

    def deliver(self, records: list[Record]) -> None:
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
                        self._backoff.count(record.origin, exc)
                else:
                    world = True
                    self._backoff.count(record.origin, KafkaException(failed))
            if world:
                attempt += 1
                self._backoff.sleep(attempt)
            todo = _again(todo)
        for record in records:
            self._dead_letters.sent(record.sent)

    def _refused(self, record: Record) -> list[Outgoing]:
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

    def _produce(self, record: Record) -> None:
        for out in record.outputs:
            try:
                self._produce_one(out, partial(_acked, record, out))
            except KafkaException as exc:  # refused before it left (over the size)
                record.failed = record.failed or exc.args[0]
                return  # judged with the delivery failures, fatal ones included

    def _produce_one(self, out: Outgoing, acked: Callable[[KafkaError | None, Any], None]) -> None:
        partition = -1 if out.partition is None else out.partition  # -1: the key's
        hdrs = cast("list[tuple[str, str | bytes | None]]", out.headers)
        while True:
            try:
                self._producer.produce(out.topic, out.value, out.key, partition=partition,
                                       headers=hdrs, on_delivery=acked)  # fmt: skip
                return
            except BufferError:  # the producer's queue is full: let it drain
                self._producer.poll(0.05)

    def _flush(self) -> None:
        while self._producer.flush(0.5) > 0:
            if self._backoff.stop.is_set():
                raise Stopped

    def write(self, writes: list[Outgoing], written: Written | None) -> None:
        """The state's records acknowledged: sent again while the world fails them; a
        refusal (a record over the broker's limit: the state checks the limit first)
        takes the worker down, to be restarted, rather than lose a write."""
        attempt = 0
        while writes:
            failed: list[tuple[Outgoing, KafkaError]] = []
            for out in writes:
                self._produce_one(out, partial(_state_acked, out, failed, written))
            self._flush()
            refused = [e for _, e in failed if e.fatal() or e.code() in _TOO_LARGE]
            if refused:
                raise KafkaException(refused[0])
            if failed:
                attempt += 1
                self._backoff.count(None, KafkaException(failed[0][1]))
                self._backoff.sleep(attempt)
            writes = [out for out, _ in failed]


def _again(records: list[Record]) -> list[Record]:
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


def _acked(record: Record, out: Outgoing, err: KafkaError | None, _msg: object) -> None:
    if err is None:
        record.sent.append(out)
    elif record.failed is None:
        record.failed = err


def _state_acked(out: Outgoing, failed: list[tuple[Outgoing, KafkaError]],
                 written: Written | None, err: KafkaError | None, msg: Any) -> None:  # fmt: skip
    if err is not None:
        failed.append((out, err))
    elif written is not None:
        written(out, msg.offset())
