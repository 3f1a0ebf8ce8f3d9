"""ingest: DocumentSubmitted -> one PageState per page, into the first stage's work topic.

Bytes come inline or from the blob store; the real media type is sniffed from the
bytes; PDFs are rasterized and images decoded safely (streams/media/raster.py) in a render
process with a deadline and a memory cap (streams/media/sandbox.py); each page is stored in
the blob store as PNG as it arrives, and travels by reference. Operation `ocr` on a
PDF answers the pages whose own text layer is usable here, on the CPU
(reading/text_layer.py): they go straight to docs.pages.done and are never rendered.
A document that cannot be split goes to docs.dlq with the reason, and a `failed`
DocumentResult tells the client without making it read the DLQ (and its callback,
through a WebhookDelivery on docs.webhooks, when the submission gave one). A render the
agent abandons (a rebalance hands the record back: streams/agents/pipelined.py) raises the
world's RenderAbandonedError instead: no verdict on the document, so no output at all.
"""

from __future__ import annotations

import base64
import logging
from datetime import UTC, datetime

from reading.text_layer import TextPage
from schemas import (
    DocumentResult,
    DocumentSubmitted,
    Operation,
    PageState,
    RecordError,
    Stage,
    TextLayer,
    decode,
)
from schemas.common import MAX_ATTRIBUTES_BYTES, attributes_bytes
from schemas.pages import BlobRef
from streams import media
from streams.agents import progress
from streams.blobs import BlobStore
from streams.claim_check import ClaimCheck
from streams.client.submit import stable_doc_id
from streams.faults import OutputTooLargeError, is_worlds_fault
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing, error_message, next_record
from streams.media.raster import PNG_PAGES, PageEncoding
from streams.media.render_child import RenderJob, TextLayerRead
from streams.media.sandbox import Abandon, Renderer, RendererPool
from streams.routing import next_step
from streams.topics import RESULTS, Topology
from streams.webhooks.record import webhook_record

log = logging.getLogger(__name__)

STAGE = "ingest"


class Ingest:
    def __init__(
        self,
        topology: Topology,
        blobs: BlobStore,
        *,
        dead_letters: DeadLetters,
        renderer: Renderer | RendererPool,
        max_pixels: int,
        budget: media.Budget,
        encoding: PageEncoding = PNG_PAGES,
        progress: bool = False,
    ) -> None:
        self.progress = progress  # also write docs.progress (streams/agents/progress.py)
        self.topology = topology
        self.blobs = blobs
        self.claim_check = ClaimCheck(blobs, dead_letters.max_record_bytes)
        # Beside its dead letter, a document that cannot be split ends `failed`.
        self.dead_letters = dead_letters
        self.renderer = renderer
        self.max_pixels = max_pixels
        self.budget = budget
        self.encoding = encoding

    def handle(self, origin: Origin, abandon: Abandon | None = None) -> list[Outgoing]:
        """The records of `origin`; its render gives up once `abandon` is abandoned."""
        submitted: DocumentSubmitted | None = None
        try:
            submitted = decode(DocumentSubmitted, origin.value)
            _check_attributes(submitted)
            data = self._payload(submitted)
            return self._split(origin, submitted, data, abandon)
        except Exception as exc:  # a hostile document can make anything raise
            if is_worlds_fault(exc):
                raise  # the world's fault, not the document's: the record is retried
            letter = self.dead_letters.letter(STAGE, origin, exc)
            return [letter, *self._failed_result(origin, submitted, exc)]

    def _payload(self, sub: DocumentSubmitted) -> bytes:
        p = sub.payload
        if p.inline_base64 is not None:
            data = base64.b64decode(p.inline_base64, validate=True)
        else:
            assert p.uri is not None  # noqa: S101 - the schema requires one of the two
            # A tenant's document reads no other tenant's upload (streams/blobs/store.py).
            data = self.blobs.get(p.uri, expected_sha256=p.sha256, tenant=sub.tenant)
        if p.sha256 is not None and p.inline_base64 is not None:
            import hashlib

            if hashlib.sha256(data).hexdigest() != p.sha256:
                raise RecordError("payload.sha256 does not match the inline payload")
        return data

    def _split(
        self, origin: Origin, sub: DocumentSubmitted, data: bytes, abandon: Abandon | None
    ) -> list[Outgoing]:
        doc_id = sub.doc_id or stable_doc_id(data, sub.operation, sub.options)
        reading = sub.operation is Operation.ocr
        job = RenderJob(data=data, dpi=sub.options.dpi, max_pages=sub.options.max_pages,
                        max_pixels=self.max_pixels, budget=self.budget,
                        text_layer=self._text_layer_mode(sub),
                        target_px=sub.options.target_px if reading else None,
                        layout=sub.options.layout,
                        keep_headers=sub.options.keep_headers,
                        encoding=self.encoding)  # fmt: skip
        text_pages: list[TextPage] = []
        images: dict[int, BlobRef] = {}
        for item in self.renderer.pages(job, abandon):
            if isinstance(item, TextLayerRead):
                text_pages = item.pages
                continue
            stored = self.blobs.put(item.png)  # one page at a time: none is held on to
            images[item.page_no] = BlobRef(uri=stored.uri, sha256=stored.sha256,
                                           media_type=item.media_type,
                                           size_bytes=stored.size_bytes, width=item.width,
                                           height=item.height)  # fmt: skip
        mode = sub.options.text_layer
        answered = {p.page_no for p in text_pages if p.refusal(mode) is None}
        count = len(text_pages) or len(images)
        source = self._source_ref(data) if text_pages and len(images) < count else None
        states = {n: self._page(sub, doc_id, n, count, image) for n, image in images.items()}
        for text_page in text_pages:
            if text_page.page_no in states:
                continue
            assert source is not None  # noqa: S101 - set whenever a page is not rendered
            image = source.model_copy(update={"width": text_page.width,
                                              "height": text_page.height})  # fmt: skip
            state = self._page(sub, doc_id, text_page.page_no, count, image)
            refusal = text_page.refusal(mode)
            states[text_page.page_no] = state.model_copy(
                update={"last_stage": Stage.ocr, "ocr": text_page.result}
                if refusal is None
                else {"error": f"text layer: {refusal}"}
            )
        out = []
        for page_no, page in sorted(states.items()):
            topic = self.topology.name(next_step(page).topic)
            record = next_record(topic, doc_id, page, origin, f"page{page_no}")
            if page.ocr is not None and not record.fits(self.dead_letters.max_record_bytes):
                # A dense text layer (100,000 characters a page) outgrows a record on its
                # own: the page carries its OCR by reference, as the GPU node's do.
                state = self.claim_check.ocr_by_reference(page)
                record = next_record(topic, doc_id, state, origin, f"page{page_no}")
            else:
                state = page
            if not record.fits(self.dead_letters.max_record_bytes):
                # A page carries its submission's attributes and callback: ended here,
                # with its `failed` result, instead of the step's outputs all replaced by
                # one dead letter (DeadLetters.fit) that the client never hears of.
                raise OutputTooLargeError(
                    f"page {page_no} is a {record.size_bytes}-byte record, over the record "
                    f"limit of {self.dead_letters.max_record_bytes}: its attributes or "
                    "callback are too large"
                )
            out.append(record)
            if self.progress:
                out += progress.page_moved(self.topology, state, topic, origin)
        log.info("ingest: doc %s %s, %d bytes, %d pages, %d from the text layer", doc_id,
                 media.sniff(data), len(data), count, len(answered))  # fmt: skip
        return out

    @staticmethod
    def _text_layer_mode(sub: DocumentSubmitted) -> TextLayer | None:
        """Whether a PDF's text layer is read (operation ocr, unless the submission
        says never), and under which mode."""
        if sub.operation is not Operation.ocr or sub.options.text_layer is TextLayer.never:
            return None
        return sub.options.text_layer

    def _source_ref(self, data: bytes) -> BlobRef:
        """The submitted PDF itself: what a page answered from its text layer was read
        from (it has no image of its own: nothing was rendered)."""
        stored = self.blobs.put(data)
        return BlobRef(uri=stored.uri, sha256=stored.sha256, media_type=media.PDF,
                       size_bytes=stored.size_bytes)  # fmt: skip

    @staticmethod
    def _page(sub: DocumentSubmitted, doc_id: str, page_no: int, count: int,
              image: BlobRef) -> PageState:  # fmt: skip
        return PageState(doc_id=doc_id, page_no=page_no, page_count=count,
                         operation=sub.operation, options=sub.options, image=image,
                         callback=sub.callback, attributes=sub.attributes,
                         tenant=sub.tenant, submitted_at=sub.submitted_at)  # fmt: skip

    def _failed_result(
        self, origin: Origin, sub: DocumentSubmitted | None, exc: BaseException
    ) -> list[Outgoing]:
        if sub is None or sub.doc_id is None:
            return []  # no id the client knows: the DLQ record is all there is
        now = datetime.now(UTC)
        result = DocumentResult(
            doc_id=sub.doc_id,
            operation=sub.operation,
            status="failed",
            page_count=0,
            errors=[f"{type(exc).__name__}: {error_message(exc)}"],
            # Copied only within the bound: a result is kept (in docs.results, in every
            # gateway's view, in the blob store) long after the payload was refused.
            attributes=sub.attributes if _attributes_fit(sub) else {},
            tenant=sub.tenant,
            submitted_at=sub.submitted_at,
            completed_at=now,
        )
        emit = next_record(self.topology.name(RESULTS), sub.doc_id, result, origin, "failed")
        out = [emit]
        if sub.callback is not None:
            # Webhook callers get every terminal result, this one included.
            out.append(webhook_record(self.topology, result, emit, str(sub.callback), origin,
                                      "failed"))  # fmt: skip
        if self.progress:
            out.append(progress.document_ended(self.topology, result, origin))
        return out


def _attributes_fit(sub: DocumentSubmitted) -> bool:
    return attributes_bytes(sub.attributes) <= MAX_ATTRIBUTES_BYTES


def _check_attributes(sub: DocumentSubmitted) -> None:
    """A submission written to docs.raw directly (the gateway answers 422 before) whose
    attributes are over the bound is refused whole, not truncated: a client that reads
    its attributes back must not find them silently cut. It is dead-lettered and ends
    `failed`, its result without them, saying why."""
    if not _attributes_fit(sub):
        raise RecordError(
            f"attributes are {attributes_bytes(sub.attributes)} bytes encoded as JSON, "
            f"over the limit of {MAX_ATTRIBUTES_BYTES}"
        )
