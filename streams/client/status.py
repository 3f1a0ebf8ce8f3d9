"""`pagestream status DOC_ID`: where each page of a document is, read from docs.progress.

The agents write the records (streams/agents/progress.py); their keys and partitions
are streams/client/progress.py's: one partition, read from its log start, answers for a
document.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import Consumer, KafkaError, TopicPartition
from tenacity import retry, retry_if_exception, stop_after_delay, wait_exponential

from schemas import Progress, RecordError, decode
from streams.client.progress import is_key_of, partition_of
from streams.kafka import clients as kafka
from streams.kafka.errors import is_transient
from streams.settings import KafkaSettings
from streams.topics import PROGRESS, Topology


@dataclass(frozen=True)
class DocumentProgress:
    doc_id: str
    document: Progress | None  # its own record: submitted (over HTTP), then ended
    pages: dict[int, Progress]  # the latest per page

    @property
    def pages_total(self) -> int:
        known = [p.pages_total for p in self.pages.values()]
        if self.document is not None:
            known.append(self.document.pages_total)
        return max(known, default=0)

    @property
    def pages_done(self) -> int:
        return sum(1 for p in self.pages.values() if p.stage == "done")

    def waiting(self, now: datetime) -> list[tuple[int, str, float]]:
        """(page_no, stage, seconds there) of the pages not done yet."""
        return [(n, p.stage, (now - p.at).total_seconds())
                for n, p in sorted(self.pages.items()) if p.stage != "done"]  # fmt: skip


@retry(retry=retry_if_exception(is_transient), stop=stop_after_delay(15),
       wait=wait_exponential(multiplier=0.2, max=2), reraise=True)  # fmt: skip
def _watermarks(consumer: Consumer, tp: TopicPartition, timeout_s: float) -> tuple[int, int]:
    # A leader election (a broker restart, a topic just created) answers NOT_LEADER for
    # a moment: retried, not reported.
    low, high = consumer.get_watermark_offsets(tp, timeout_s)
    return int(low), int(high)


def read_progress(
    settings: KafkaSettings, topology: Topology, doc_id: str, timeout_s: float = 30.0
) -> DocumentProgress:
    """Every progress record of `doc_id`, read from its partition up to the end."""
    topic = topology.name(PROGRESS)
    partition = partition_of(doc_id)
    consumer = kafka.consumer(settings, f"{settings.client_id}-status",
                              **{"enable.partition.eof": True})  # fmt: skip
    document: Progress | None = None
    pages: dict[int, Progress] = {}
    try:
        _, end = _watermarks(consumer, TopicPartition(topic, partition), timeout_s)
        consumer.assign([TopicPartition(topic, partition, 0)])  # the log start
        deadline = time.monotonic() + timeout_s
        while end > 0 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    break
                continue
            if not is_key_of(msg.key() or b"", doc_id):
                continue
            try:
                progress = decode(Progress, msg.value())
            except RecordError:
                continue  # not ours to judge here; the writer is pagestream
            if progress.page_no is None:
                document = progress
            elif pages.get(progress.page_no, progress).stage != "done":
                # A redelivered route record may say a done page moved again: done stays.
                pages[progress.page_no] = progress
            else:
                pages.setdefault(progress.page_no, progress)
            if (msg.offset() or 0) + 1 >= end:
                break
    finally:
        consumer.close()
    return DocumentProgress(doc_id, document, pages)
