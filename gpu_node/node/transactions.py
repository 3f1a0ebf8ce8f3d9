"""Kafka transactions of the GPU node: outputs and consumed offsets commit together.

`Transactions.commit(ready)` writes one `Ready` set (outputs and dead letters of
every partition's resolved prefix, see ordering.py) and the next offsets to consume
in one transaction. Readers with read_committed see all of it or none of it, so a
crash anywhere loses nothing (the offsets were not committed: the work is redone)
and doubles nothing (the unfinished transaction is aborted when the node restarts
with the same transactional.id).

What goes wrong, and what happens then:
- an abortable error, a record the broker refuses, a local queue that stays full:
  the transaction is aborted and the partitions are rewound to the first released
  offset, so the same work is redone. An output the broker refused as too large (a
  topic whose max.message.bytes is below pagestream's record limit) makes its input a
  suspect: the broker refuses a whole batch, so the refusal may be a neighbour's. On the
  redo a suspect's outputs are produced alone (flushed before and after); refused
  again, the input and the topics that refused it go to `on_refused`, and its next
  redo dead-letters it instead of writing the same refused record forever;
- a retriable error on commit: the commit is repeated (its outcome is unknown, and
  aborting would be invalid), a few times, then the node must restart;
- a fatal error (fenced by a newer instance, say), or an abort that fails: the
  producer is unusable; `FatalNodeError` tells the entry point to exit so the
  orchestrator restarts the process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from gpu_node.node.metrics import NodeMetrics
from gpu_node.node.ordering import Ready, RecordKey, TopicPartitionKey
from streams.kafka.envelope import Outgoing

log = logging.getLogger(__name__)

# Inputs whose outputs the broker refused as too large, and the topics that refused them.
Refusals = dict[RecordKey, set[str]]

TXN_TIMEOUT_S = 30.0
_COMMIT_RETRIES = 5


class FatalNodeError(RuntimeError):
    """The transactional producer is unusable (fenced or fatal): the process must restart."""


class WedgedClientError(FatalNodeError):
    """A client call did not return long after its own timeout: the client is wedged and
    only a new process (which aborts the open transaction on start) gets out of it."""


# How long past its own timeout a client call may take before the client counts as
# wedged. librdkafka's send_offsets_to_transaction() can block forever when the group
# coordinator goes away during the call (it never checks its coordinator-request
# timeout: confluentinc/librdkafka#5456, #5511); seen here after a broker restart.
_WEDGED_AFTER_S = 30.0


class Transactions:
    def __init__(
        self,
        producer: Producer,
        consumer: Consumer,
        metrics: NodeMetrics,
        *,
        count_outputs: Callable[[list[Outgoing]], None],
        interval_s: float = 0.0,
        on_refused: Callable[[Refusals], None] = lambda _: None,
        on_committed: Callable[[set[RecordKey]], None] = lambda _: None,
    ) -> None:
        self._producer = producer
        self._consumer = consumer
        self._metrics = metrics
        self._count_outputs = count_outputs
        self._on_refused = on_refused
        self._on_committed = on_committed
        self._open = False
        self._interval_s = interval_s
        self._began_at = float("-inf")  # monotonic: the first finished work commits at once
        # Inputs of the open transaction whose outputs the broker refused as too large,
        # and the topics that refused them; those produced alone, which are sure.
        self._refused: Refusals = {}
        self._alone: set[RecordKey] = set()
        # Inputs refused in a batch with others: produced alone on their redo.
        self._suspects: set[RecordKey] = set()

    def init(self) -> None:
        """Fences an older instance with the same transactional.id and aborts its open
        transaction; call once before the first commit."""
        self._producer.init_transactions(TXN_TIMEOUT_S * 2)

    def due_in(self) -> float:
        """Seconds until the next commit is due (<= 0: now): commits are `interval_s`
        apart at least, when the caller asks for it."""
        return self._began_at + self._interval_s - time.monotonic()

    def commit(self, ready: Ready, assigned: set[TopicPartitionKey]) -> bool:
        """Commit `ready` in one transaction; False when it was aborted and rewound
        (the caller must drop the rewound partitions' later work too)."""
        producer, consumer = self._producer, self._consumer
        self._began_at = time.monotonic()
        try:
            producer.begin_transaction()
            self._open = True
            self._refused, self._alone = {}, set()
            for out, source in zip(ready.outputs, ready.sources, strict=True):
                self._produce(out, source, alone=source in self._suspects)
            offsets = [TopicPartition(t, p, o) for (t, p), o in ready.next_offsets.items()]
            metadata = consumer.consumer_group_metadata()
            _bounded(
                "send_offsets_to_transaction",
                lambda: producer.send_offsets_to_transaction(offsets, metadata, TXN_TIMEOUT_S),
                TXN_TIMEOUT_S + _WEDGED_AFTER_S,
            )
            self._commit_with_retries()
            self._open = False
        except (KafkaException, BufferError) as exc:
            error = exc.args[0] if isinstance(exc, KafkaException) else None
            if isinstance(error, KafkaError) and error.fatal():
                raise FatalNodeError(f"transaction failed fatally: {error}") from exc
            # Anything else (abortable, a refused record, a full queue): abort and redo.
            log.warning("transaction aborted (%s); %d records will be redone", exc, ready.records)
            self._producer.poll(0)  # delivery reports still queued: which were refused
            self._abort_and_rewind(ready, assigned)
            sure = {s: topics for s, topics in self._refused.items() if s in self._alone}
            self._suspects |= self._refused.keys() - sure.keys()
            if sure:
                self._on_refused(sure)
            return False
        self._metrics.transactions.labels("commit").inc()
        self._count_outputs(ready.outputs)
        committed = set(ready.sources)
        self._suspects -= committed
        self._on_committed(committed)
        return True

    def close(self) -> None:
        if self._open:
            # Left open by an error: abort now rather than make read_committed readers
            # wait for transaction.timeout.ms (a fenced producer cannot).
            try:
                self._producer.abort_transaction(10)
            except KafkaException as exc:
                log.warning("abort on close: %s", exc)
        self._producer.flush(10)

    def _commit_with_retries(self) -> None:
        for attempt in range(1, _COMMIT_RETRIES + 1):
            try:
                self._producer.commit_transaction(TXN_TIMEOUT_S)
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                # Retriable: the outcome is unknown; the same call may be repeated.
                if not error.retriable():
                    raise
                if attempt == _COMMIT_RETRIES:
                    # Still in flight: aborting now is invalid, so only a restart settles it.
                    raise FatalNodeError(f"commit_transaction kept failing: {error}") from exc
                log.warning("commit_transaction retriable error (%s), retrying", error)

    def _produce(self, out: Outgoing, source: RecordKey, *, alone: bool) -> None:
        deadline = time.monotonic() + TXN_TIMEOUT_S

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                self._refused.setdefault(source, set()).add(out.topic)

        if alone:  # in a batch of its own: a refusal then is this record's
            self._producer.flush(TXN_TIMEOUT_S)
            self._alone.add(source)
        while True:
            try:
                self._producer.produce(out.topic, out.value, out.key, headers=list(out.headers),
                                       on_delivery=delivered)  # fmt: skip
                break
            except KafkaException as exc:
                if exc.args and exc.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE:
                    # Over this client's own message.max.bytes: this record's, for sure.
                    self._refused.setdefault(source, set()).add(out.topic)
                    self._alone.add(source)
                raise
            except BufferError:
                if time.monotonic() > deadline:
                    raise  # deliveries are not draining: abort the transaction
                self._producer.poll(0.1)  # local queue full: let deliveries drain
        if alone:
            self._producer.flush(TXN_TIMEOUT_S)

    def _abort_and_rewind(self, ready: Ready, assigned: set[TopicPartitionKey]) -> None:
        try:
            self._producer.abort_transaction(TXN_TIMEOUT_S)
        except KafkaException as exc:
            # Even the abort failed: the producer is unusable.
            raise FatalNodeError(f"abort_transaction failed: {exc}") from exc
        self._open = False
        self._metrics.transactions.labels("abort").inc()
        # Redo from the first released record of each partition.
        for (topic, partition), offset in ready.first_offsets.items():
            if (topic, partition) in assigned:
                self._consumer.seek(TopicPartition(topic, partition, offset))


def _bounded(what: str, call: Callable[[], object], limit_s: float) -> None:
    """Run `call` in a daemon thread; raise WedgedClientError if it has not returned
    within `limit_s`, re-raise what it raised otherwise."""
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"pagestream-{what}", daemon=True).start()
    if not done.wait(limit_s):
        raise WedgedClientError(f"{what} did not return within {limit_s:.0f}s")
    if failure:
        raise failure[0]
