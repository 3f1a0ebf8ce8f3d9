"""deliver in batches: its step and table as a BatchLoop's state (batches.py).

deliver.py decides what each page does to its document's entries; this module runs it
record after record over a batch, in the loop that route runs in, and keeps its table
(changelog_table.py) in step with the loop:

- each record is handled with the table writing to its partition;
- a document's end is marked in the table (deliver.mark_ended) only once its outputs
  are acknowledged, and only if they went out as made (not a dead letter instead):
  a document whose result never left ends again on the next page or tick;
- so a record that would read such a mark first (a page of a document ended earlier
  in the batch, or a tick while any document is ending) waits: the loop settles what
  came before it (`holds`);
- the table's writes go to its changelog after the outputs, before the commit
  (`settle`);
- on every assignment the table holds the partitions given, read again from the
  changelog where another worker wrote since (`assigned`).
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition

from schemas import headers
from streams.agents.changelog_table import ChangelogTable
from streams.agents.deliver import Deliver, Delivery
from streams.agents.json_table import JsonTable
from streams.agents.metrics import AgentMetrics
from streams.kafka.envelope import Origin, Outgoing


class DeliverBatches:
    def __init__(
        self,
        deliver: Deliver,
        table: ChangelogTable,
        *,
        reader: Callable[[], Consumer],  # a consumer to read the changelog with
        max_record_bytes: int | None,
        metrics: AgentMetrics | None = None,
    ) -> None:
        self._deliver = deliver
        self.table = table
        self._pages = JsonTable(table, max_record_bytes=max_record_bytes)
        self._reader = reader
        self._metrics = metrics
        self._handled: list[tuple[Origin, Delivery]] = []  # since the last settle
        self._ending: set[bytes] = set()  # doc_ids those records ended

    def step(self, origin: Origin) -> list[Outgoing]:
        self.table.partition = origin.partition
        delivery = self._deliver.handle(origin, self._pages)
        self._handled.append((origin, delivery))
        self._ending.update(d.encode() for d in delivery.completed)
        return delivery.emits

    def holds(self, origin: Origin) -> bool:
        """Whether `origin` must wait until the records before it are settled: it may
        read the end of a document one of them ended."""
        if not self._ending:
            return False
        return origin.key in self._ending or origin.header(headers.SCHEMA) == headers.TICK_SCHEMA

    def settle(self, sent: dict[int, list[Outgoing]]) -> list[Outgoing]:
        """Once the outputs of the records handled since the last call are acknowledged
        (`sent`: each record's, by id of its origin): the documents they ended marked,
        and every table write since as changelog records, to be acknowledged before the
        commit."""
        for origin, delivery in self._handled:
            went = sent.get(id(origin), [])
            if delivery.completed and {id(o) for o in went} == {id(o) for o in delivery.emits}:
                self.table.partition = origin.partition
                self._deliver.mark_ended(origin.partition, delivery, self._pages)
                if self._metrics is not None:
                    self._metrics.ended(delivery.outcomes)
        self._handled.clear()
        self._ending.clear()
        return self.table.take_writes()

    def written(self, out: Outgoing, offset: int) -> None:
        if out.partition is not None:
            self.table.written(out.partition, offset)

    def assigned(self, partitions: list[TopicPartition], stopped: Callable[[], bool]) -> None:
        """The table holds the partitions now assigned (the input's and the changelog's
        partitions are the same: co-partitioned)."""
        self._handled.clear()
        self._ending.clear()
        if self.table.assign(sorted({tp.partition for tp in partitions}), self._reader, stopped):
            self._deliver.recovered()
