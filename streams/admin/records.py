"""The records behind a consumer group's offsets, as a read_committed consumer sees them.

Kafka's lag (log end - committed, streams/admin/lag.py) counts transaction
markers: a partition the GPU node writes ends with the commit marker of its last
transaction, and a group that has read everything shows a lag of 1 forever.
`RecordCounter` counts what a read_committed consumer starting at the committed
offset would still be given (markers and aborted records are not lag). It reads a
span of up to `scan_limit` offsets to count it; a longer span counts offset for
offset (an upper bound, off by at most one marker per transaction), and only its
first record is read, for its timestamp.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, TopicPartition

from streams.kafka import clients as kafka
from streams.settings import KafkaSettings

TP = tuple[str, int]


@dataclass(frozen=True)
class Span:
    records: int
    oldest_ms: int | None


class RecordCounter:
    """Counts the records in [start, end) of partitions as a read_committed consumer sees them.

    One assign-only consumer (it never joins or commits to a group) reused across calls.
    """

    def __init__(self, consumer: Consumer, scan_limit: int = 200, timeout_s: float = 5.0):
        self._consumer = consumer
        self.scan_limit = scan_limit
        self.timeout_s = timeout_s

    def count(self, spans: dict[TP, tuple[int, int]]) -> dict[TP, Span]:
        out: dict[TP, Span] = {tp: Span(0, None) for tp, (s, e) in spans.items() if e <= s}
        todo = {tp: se for tp, se in spans.items() if se[1] > se[0]}
        if not todo:
            return out
        # Spans up to scan_limit are read whole (a lag of a few records is exactly what
        # markers distort); longer ones only for their first record's timestamp, the
        # rest counting offset for offset (markers are a small share of a real backlog,
        # and reading it would cost a scrape as much as the consumer's own work).
        stop = {tp: e if e - s <= self.scan_limit else s + 1 for tp, (s, e) in todo.items()}
        counted = dict.fromkeys(todo, 0)
        oldest: dict[TP, int | None] = dict.fromkeys(todo)
        reached = {tp: s for tp, (s, _) in todo.items()}  # offsets known to be read past
        self._consumer.assign([TopicPartition(t, p, todo[(t, p)][0]) for t, p in todo])
        try:
            deadline = time.monotonic() + self.timeout_s
            pending = set(todo)
            while pending and time.monotonic() < deadline:
                for msg in self._consumer.consume(num_messages=500, timeout=0.2):
                    tp = (str(msg.topic()), int(msg.partition() or 0))
                    err = msg.error()
                    if err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                        # A describe-only principal (the monitor role, streams/security/acls.py) may
                        # not read records: its topic counts offset for offset.
                        pending -= {p for p in pending if p[0] == tp[0]}
                        continue
                    if tp not in pending:
                        continue
                    offset = int(msg.offset() or 0)
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            # Everything up to the last stable offset was read.
                            reached[tp] = max(reached[tp], offset)
                            pending.discard(tp)
                        continue
                    if offset >= stop[tp]:
                        # Nothing between the last record and this one was a record.
                        reached[tp] = stop[tp]
                        if oldest[tp] is None:
                            oldest[tp] = msg.timestamp()[1]
                        pending.discard(tp)
                        continue
                    counted[tp] += 1
                    reached[tp] = offset + 1
                    if oldest[tp] is None:
                        oldest[tp] = msg.timestamp()[1]
                    if offset + 1 >= stop[tp]:
                        pending.discard(tp)
        finally:
            self._consumer.unassign()
        for tp, (_, end) in todo.items():
            # Offsets not read (past scan_limit, an open transaction, a timeout) count as
            # records: the count errs on the side of lag, never hides it.
            out[tp] = Span(counted[tp] + max(0, end - reached[tp]), oldest[tp])
        return out

    def close(self) -> None:
        self._consumer.close()


def record_counter(settings: KafkaSettings, scan_limit: int = 200) -> RecordCounter:
    # Assign-only: it never joins the group it names and never commits.
    consumer = kafka.consumer(
        settings,
        f"{settings.client_id}-lag-probe",
        # Small fetches: a partition is read for a few records at most.
        **{
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
            "max.partition.fetch.bytes": 256 * 1024,
        },
    )
    return RecordCounter(consumer, scan_limit)
