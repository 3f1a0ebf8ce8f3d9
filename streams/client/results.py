"""Reading docs.results the way a user does: the latest result per doc_id, with the
parts the deliver agent moved to the blob store fetched back (`pagestream results`).

docs.results is compacted by doc_id, so the last record of a doc_id is its answer
(a replayed dead letter can end a document again, upgraded). The reader uses no
consumer group: it assigns partitions and reads them from the start, so it commits
nothing and leaves no group behind. Asked for doc_ids, it reads only their partitions
(murmur2, as every producer here partitions).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from schemas import DocumentResult, RecordError, decode
from schemas.results import PageResult, document_markdown
from streams.blobs import BlobStore
from streams.kafka import clients as kafka
from streams.kafka.partitioning import partition_for
from streams.settings import Settings
from streams.topics import RESULTS

_POLL_S = 0.5


_REFUSED = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)


class ResultsUnavailableError(RuntimeError):
    """docs.results cannot be read (it does not exist)."""


class ResultsReader:
    def __init__(self, settings: Settings, doc_ids: list[str] | None = None) -> None:
        self.topic = settings.topology.name(RESULTS)
        self.doc_ids = set(doc_ids or [])
        self._consumer: Consumer = kafka.consumer(
            settings.kafka, f"pagestream-results-{uuid.uuid4().hex[:8]}"
        )
        try:
            meta = self._consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
        except KafkaException:
            self._consumer.close()  # else it keeps retrying (and logging) until exit
            raise
        if meta is not None and meta.error is not None and meta.error.code() in _REFUSED:
            # Not "not found": the topic is there, hidden from this principal by its ACLs.
            self._consumer.close()
            raise KafkaException(meta.error)
        count = len(meta.partitions) if meta is not None and meta.error is None else 0
        if count == 0:
            self._consumer.close()
            raise ResultsUnavailableError(
                f"topic {self.topic} not found; run `pagestream topics apply` first"
            )
        wanted = sorted({partition_for(d.encode(), count) for d in self.doc_ids}) or range(count)
        self._ends = {}
        for p in wanted:
            _, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), 10)
            self._ends[p] = high
        self._consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in wanted])
        self.skipped = 0  # records that are not DocumentResults (counted, never shown)

    def close(self) -> None:
        self._consumer.close()

    def until_now(self, idle_s: float = 10.0) -> dict[str, DocumentResult]:
        """The latest result of each doc_id (of those asked for) written so far. Stops
        early when nothing arrives for `idle_s` (records deleted under it, say)."""
        latest: dict[str, DocumentResult] = {}
        pending = {p for p, end in self._ends.items() if end > 0}
        last_read = time.monotonic()
        while pending and time.monotonic() - last_read < idle_s:
            for partition, offset, result in self._poll():
                last_read = time.monotonic()
                if result is not None:
                    latest[result.doc_id] = result
                if offset + 1 >= self._ends[partition]:
                    pending.discard(partition)
            pending = {p for p in pending if self._position(p) < self._ends[p]}
        return latest

    def follow(self, timeout_s: float | None = None) -> Iterator[DocumentResult]:
        """Results as they arrive (after until_now), for `timeout_s` or for ever."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while deadline is None or time.monotonic() < deadline:
            for _, _, result in self._poll():
                if result is not None:
                    yield result

    def _poll(self) -> Iterator[tuple[int, int, DocumentResult | None]]:
        for msg in self._consumer.consume(500, _POLL_S):
            if msg.error() is not None:
                continue
            partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
            try:
                result = decode(DocumentResult, msg.value())
            except RecordError:
                self.skipped += 1
                yield partition, offset, None
                continue
            keep = not self.doc_ids or result.doc_id in self.doc_ids
            yield partition, offset, result if keep else None

    def _position(self, partition: int) -> int:
        (tp,) = self._consumer.position([TopicPartition(self.topic, partition)])
        return int(tp.offset)


def resolved(result: DocumentResult, blobs: BlobStore) -> DocumentResult:
    """`result` with its claim-checked pages and Markdown fetched from the blob store."""
    update: dict[str, object] = {}
    if result.pages_ref is not None:
        raw = blobs.get(result.pages_ref.uri, expected_sha256=result.pages_ref.sha256)
        update |= {"pages": [PageResult.model_validate(p) for p in json.loads(raw)],
                   "pages_ref": None}  # fmt: skip
    if result.markdown_ref is not None:
        raw = blobs.get(result.markdown_ref.uri, expected_sha256=result.markdown_ref.sha256)
        update |= {"markdown": raw.decode(), "markdown_ref": None}
    return result.model_copy(update=update) if update else result


def write_markdown(result: DocumentResult, out_dir: Path) -> Path | None:
    """`out_dir/<doc_id>.md` for an OCR result (resolved first); None for the others."""
    markdown = result.markdown
    if markdown is None and any(p.ocr is not None for p in result.pages):
        markdown = document_markdown(result.pages)
    if markdown is None:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{result.doc_id}.md"  # DocId has no '/' and cannot start with '.'
    path.write_text(markdown)
    return path
