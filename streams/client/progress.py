"""docs.progress: where each page of a document is, for `pagestream status DOC_ID`.

The agents write one small record each time a page moves (ingest and route: the work
topic it now waits in; deliver: done, and the document ended). Keys are
`doc_id/page_no` (`doc_id` for the document, "/" is not allowed in a doc_id) and every
key of a document goes to the partition of its doc_id, so the topic, compacted, holds
the latest place of every page, and one partition answers for a document.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from tenacity import retry, retry_if_exception, stop_after_delay, wait_exponential

from schemas import DocumentResult, PageState, Progress, ProgressStage, RecordError, decode
from schemas.common import Stage
from streams.kafka import clients as kafka
from streams.kafka.envelope import Origin, Outgoing, next_record
from streams.kafka.partitioning import partition_for
from streams.settings import KafkaSettings
from streams.topics import PAGES_DONE, PROGRESS, WORK_BY_STAGE, Topology

_STAGE_OF_TOPIC = {spec.base: Stage(stage).value for stage, spec in WORK_BY_STAGE.items()}


def stage_of(topology: Topology, topic: str) -> ProgressStage | None:
    """The progress stage of a page sent to `topic` (None: a topic pages do not wait in)."""
    base = topic.removeprefix(topology.prefix)
    if base == PAGES_DONE.base:
        return "aggregate"
    return _STAGE_OF_TOPIC.get(base)  # type: ignore[return-value]


def _record(topology: Topology, progress: Progress, origin: Origin) -> Outgoing:
    key = progress.doc_id if progress.page_no is None else f"{progress.doc_id}/{progress.page_no}"
    out = next_record(topology.name(PROGRESS), key, progress, origin,
                      f"progress:{key}:{progress.stage}")  # fmt: skip
    return replace(out, partition=partition_for(progress.doc_id.encode(), PROGRESS.partitions))


def page_moved(topology: Topology, page: PageState, topic: str, origin: Origin) -> list[Outgoing]:
    """The progress record of a page sent to `topic`, if it is a topic pages wait in."""
    stage = stage_of(topology, topic)
    if stage is None:
        return []
    progress = Progress(doc_id=page.doc_id, page_no=page.page_no, pages_total=page.page_count,
                        stage=stage)  # fmt: skip
    return [_record(topology, progress, origin)]


def page_done(topology: Topology, page: PageState, pages_done: int, origin: Origin) -> Outgoing:
    progress = Progress(doc_id=page.doc_id, page_no=page.page_no, pages_total=page.page_count,
                        stage="done", pages_done=pages_done)  # fmt: skip
    return _record(topology, progress, origin)


def document_ended(topology: Topology, result: DocumentResult, origin: Origin) -> Outgoing:
    done = sum(1 for p in result.pages if p.error is None)
    progress = Progress(doc_id=result.doc_id, pages_total=result.page_count, stage="ended",
                        pages_done=done, status=result.status)  # fmt: skip
    return _record(topology, progress, origin)


# ---- reading it back -------------------------------------------------------


@dataclass(frozen=True)
class DocumentProgress:
    doc_id: str
    document: Progress | None  # set once the document ended
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


_LEADERSHIP = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
}


def _retriable(exc: BaseException) -> bool:
    if not isinstance(exc, KafkaException):
        return False
    err = exc.args[0]
    return bool(err.retriable()) or err.code() in _LEADERSHIP


@retry(retry=retry_if_exception(_retriable), stop=stop_after_delay(15),
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
    partition = partition_for(doc_id.encode(), PROGRESS.partitions)
    consumer = kafka.consumer(settings, f"{settings.client_id}-status",
                              **{"enable.partition.eof": True})  # fmt: skip
    document: Progress | None = None
    pages: dict[int, Progress] = {}
    prefix = f"{doc_id}/".encode()
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
            key = msg.key() or b""
            if key != doc_id.encode() and not key.startswith(prefix):
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
