"""An agent's loop in batches, on confluent-kafka: poll what is on hand, step
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
4. wait for every acknowledgement (batch_sends.py): an output the broker refuses as
   too large, even sent alone, is the record's fault, and its dead letter replaces its
   outputs; any other failure is the world's, and the outputs are sent again;
5. commit the batch's offsets, then poll again.

A step with state (deliver's table: deliver_batches.py) is a `BatchState`: a record
that must see the state settled waits, and what came before it in the batch goes
through 3 and 4 first (`holds`); once a part's outputs are acknowledged, the state's
own records (its changelog) are written and acknowledged before the commit (`settle`);
on every assignment the state holds the partitions given before any is read.

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
from functools import partial
from typing import Any, Protocol

from confluent_kafka import (
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)

from streams.agents.batch_sends import Backoff, Record, Sends, Stopped
from streams.agents.metrics import AgentMetrics
from streams.agents.spans import hop_span
from streams.agents.takeover import Takeover
from streams.faults import is_worlds_fault
from streams.kafka import clients as kafka
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing
from streams.kafka.errors import is_transient
from streams.settings import KafkaSettings

log = logging.getLogger(__name__)

BatchStep = Callable[[Origin], list[Outgoing]]


class BatchState(Protocol):
    """What a step with state tells its loop (see the module's docstring)."""

    def holds(self, origin: Origin) -> bool: ...

    def settle(self, sent: dict[int, list[Outgoing]]) -> list[Outgoing]: ...

    def written(self, out: Outgoing, offset: int) -> None: ...

    def assigned(self, partitions: list[TopicPartition], stopped: Callable[[], bool]) -> None: ...


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
        state: BatchState | None = None,
    ) -> None:
        self.stage = stage
        self._step = step
        self._consumer = consumer
        self._topics = topics
        self._dead_letters = dead_letters
        self.metrics = metrics
        self._batch = batch
        self._poll_s = poll_s
        self._backoff = Backoff(stage, metrics, retry_initial_s, retry_max_s)
        self._sends = Sends(stage, producer, dead_letters, self._backoff)
        self._takeover = takeover  # where partitions this group never committed start
        self._to_commit: list[TopicPartition] = []  # those starts, committed at once
        self._state = state

    def run(self, stop: threading.Event | None = None) -> None:
        """Poll, step, produce, acknowledge and commit until `stop` is set; then leave
        the group (its partitions go to the other workers at once)."""
        if stop is not None:
            self._backoff.stop = stop
        self._consumer.subscribe(self._topics, on_assign=self._on_assign)
        try:
            while not self._backoff.stop.is_set():
                try:
                    self.run_once()
                except Stopped:
                    break
        finally:
            self._consumer.close()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Partitions this group never committed start where the group it takes over
        from left them (takeover.py), and are committed there by the next batch; the
        state, if any, holds the partitions given."""
        self._to_commit = []
        if self._takeover is not None and partitions:
            starts = self._tried(partial(self._starts, consumer, partitions))
            for tp in partitions:
                start = starts.get((tp.topic, tp.partition))
                if start is not None:
                    log.info("%s: %s[%d] starts at %d, where group %s left it", self.stage,
                             tp.topic, tp.partition, start, self._takeover.group)  # fmt: skip
                    tp.offset = start
                    self._to_commit.append(TopicPartition(tp.topic, tp.partition, start))
        if self._state is not None:
            self._tried(partial(self._state.assigned, partitions, self._backoff.stop.is_set))
        # Given a callback, the client leaves the assignment to it (an eager protocol:
        # the whole assignment, every rebalance).
        consumer.assign(partitions)

    def _starts(
        self, consumer: Consumer, partitions: list[TopicPartition]
    ) -> dict[tuple[str, int], int]:
        assert self._takeover is not None  # noqa: S101 - asked only with one
        committed = consumer.committed(partitions, timeout=10)
        fresh = [tp for tp in committed if tp.offset < 0]
        return self._takeover.starts(fresh) if fresh else {}

    def _tried(self, call: Callable[[], Any]) -> Any:
        """`call`, tried again with backoff for as long as the cluster fails it for a
        while (a broker restarting, its coordinator loading): a worker that gave up
        after a few tries crashed on every broker restart (the chaos test). An error
        that is not transient (a right refused) raises: the worker goes down, saying
        why."""
        return self._backoff.retried(lambda _: call(), is_transient)

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
        records: list[Record] = []
        part = 0  # where the records not yet settled start
        for origin in origins:
            if self._state is not None and self._state.holds(origin):
                self._settle(records[part:])
                part = len(records)
            records.append(Record(origin, self._outputs(origin)))
        self._settle(records[part:])
        self._commit(origins)
        if self.metrics is not None:  # each record's latency: its batch's
            seconds = time.perf_counter() - started
            self.metrics.record_batch(self.stage, [r.sent for r in records], seconds)
        return len(records)

    def _settle(self, records: list[Record]) -> None:
        """`records`' outputs acknowledged, then the state's records."""
        self._sends.deliver(records)
        if self._state is not None:
            writes = self._state.settle({id(r.origin): r.sent for r in records})
            self._sends.write(writes, self._state.written)

    def _poll(self) -> list[Origin]:
        """What is on hand, up to `batch` records; with nothing on hand, the first record
        to come within `poll_s` and what came with it. Never waits to fill a batch:
        `consume` returns only once it has `batch` records or its timeout passed, which
        kept a lone record waiting `poll_s` (measured: route's hop p50 14 ms -> 61 ms)."""
        msgs = self._consumer.consume(self._batch, 0)
        if not msgs:
            first = self._consumer.poll(self._poll_s)
            if first is None:
                return []
            more = self._consumer.consume(self._batch - 1, 0) if self._batch > 1 else []
            msgs = [first, *more]
        origins = []
        for msg in msgs:
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
        return self._backoff.retried(partial(self._try_outputs, origin), is_worlds_fault, origin)

    def _try_outputs(self, origin: Origin, attempts: int) -> list[Outgoing]:
        with hop_span(self.stage, origin):
            try:
                outputs = self._step(origin)
            except Exception as exc:
                if is_worlds_fault(exc):
                    raise
                return [self._dead_letters.letter(self.stage, origin, exc, attempts=attempts)]
        return self._dead_letters.fit(self.stage, origin, outputs)

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


def consumer(settings: KafkaSettings, group: str, **overrides: Any) -> Consumer:
    """A consumer for a BatchLoop. Its assignor spreads each topic's partitions over the
    members, as faust's does: the sticky assignors balance the count over all the
    topics, and gave one of two workers every partition of docs.oriented. An eager
    one, so the loop's assignment callback assigns the whole assignment."""
    return kafka.consumer(settings, group, **{"partition.assignment.strategy": "range",
                                              **overrides})  # fmt: skip
