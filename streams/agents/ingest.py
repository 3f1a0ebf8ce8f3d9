"""ingest: DocumentSubmitted -> one PageState per page, into the first stage's work topic.

Bytes come inline or from the blob store; the real media type is sniffed from the
bytes; PDFs are rasterized and images decoded safely (streams/media.py); each page
is stored in the blob store as PNG and travels by reference. A document that cannot
be split goes to docs.dlq with the reason, and a `failed` DocumentResult tells the
client without making it read the DLQ.
"""

from __future__ import annotations

import base64
import logging
from datetime import UTC, datetime

from schemas import DocumentResult, DocumentSubmitted, PageState, RecordError, decode
from schemas.pages import BlobRef
from streams import media
from streams.agents.deliver import WebhookCall
from streams.blobs import BlobStore, BlobStoreUnavailableError
from streams.envelope import Origin, Outgoing, dead_letter, error_message, next_record
from streams.routing import next_step
from streams.submit import stable_doc_id
from streams.topics import DLQ, RESULTS, Topology

log = logging.getLogger(__name__)

STAGE = "ingest"


class Ingest:
    def __init__(
        self, topology: Topology, blobs: BlobStore, *, group: str, max_pixels: int
    ) -> None:
        self.topology = topology
        self.blobs = blobs
        self.group = group
        self.max_pixels = max_pixels

    def handle(self, origin: Origin) -> list[Outgoing]:
        submitted: DocumentSubmitted | None = None
        try:
            submitted = decode(DocumentSubmitted, origin.value)
            data = self._payload(submitted)
            return self._split(origin, submitted, data)
        except BlobStoreUnavailableError:
            raise  # the world's fault, not the document's: the record is retried
        except Exception as exc:  # a hostile document can make anything raise
            log.warning(
                "ingest: dead letter %s[%d]@%d %s",
                origin.topic,
                origin.partition,
                origin.offset,
                type(exc).__name__,
            )
            out = [
                dead_letter(
                    origin,
                    dlq_topic=self.topology.name(DLQ),
                    stage=STAGE,
                    group=self.group,
                    exc=exc,
                )
            ]
            failed = self._failed_result(origin, submitted, exc)
            return out + ([failed] if failed is not None else [])

    def webhook_for(self, origin: Origin, emits: list[Outgoing]) -> WebhookCall | None:
        """The webhook of a `failed` result ingest emitted, if the submission has a
        callback: webhook callers get every terminal result, this one included."""
        results = [e for e in emits if e.topic == self.topology.name(RESULTS)]
        if not results:
            return None
        try:
            callback = decode(DocumentSubmitted, origin.value).callback  # parsed once already
        except RecordError:
            return None
        return None if callback is None else WebhookCall.for_result(str(callback), results[0])

    def _payload(self, sub: DocumentSubmitted) -> bytes:
        p = sub.payload
        if p.inline_base64 is not None:
            data = base64.b64decode(p.inline_base64, validate=True)
        else:
            assert p.uri is not None  # noqa: S101 - the schema requires one of the two
            data = self.blobs.get(p.uri, expected_sha256=p.sha256)
        if p.sha256 is not None and p.inline_base64 is not None:
            import hashlib

            if hashlib.sha256(data).hexdigest() != p.sha256:
                raise RecordError("payload.sha256 does not match the inline payload")
        return data

    def _split(self, origin: Origin, sub: DocumentSubmitted, data: bytes) -> list[Outgoing]:
        doc_id = sub.doc_id or stable_doc_id(data, sub.operation, sub.options)
        pages = media.split_pages(
            data,
            dpi=sub.options.dpi,
            max_pages=sub.options.max_pages,
            max_pixels=self.max_pixels,
        )
        out: list[Outgoing] = []
        for page in pages:
            stored = self.blobs.put(page.png)
            state = PageState(
                doc_id=doc_id,
                page_no=page.page_no,
                page_count=len(pages),
                operation=sub.operation,
                options=sub.options,
                image=BlobRef(
                    uri=stored.uri,
                    sha256=stored.sha256,
                    media_type="image/png",
                    size_bytes=stored.size_bytes,
                    width=page.width,
                    height=page.height,
                ),
                callback=sub.callback,
                attributes=sub.attributes,
                submitted_at=sub.submitted_at,
            )
            route = next_step(state)
            out.append(
                next_record(
                    self.topology.name(route.topic), doc_id, state, origin, f"page{page.page_no}"
                )
            )
        log.info(
            "ingest: doc %s %s, %d bytes, %d pages",
            doc_id,
            pages[0].source_media_type,
            len(data),
            len(pages),
        )
        return out

    def _failed_result(
        self, origin: Origin, sub: DocumentSubmitted | None, exc: BaseException
    ) -> Outgoing | None:
        if sub is None or sub.doc_id is None:
            return None  # no id the client knows: the DLQ record is all there is
        now = datetime.now(UTC)
        result = DocumentResult(
            doc_id=sub.doc_id,
            operation=sub.operation,
            status="failed",
            page_count=0,
            errors=[f"{type(exc).__name__}: {error_message(exc)}"],
            attributes=sub.attributes,
            submitted_at=sub.submitted_at,
            completed_at=now,
        )
        return next_record(self.topology.name(RESULTS), sub.doc_id, result, origin, "failed")
