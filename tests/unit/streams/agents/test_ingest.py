"""ingest as a plain function: one DocumentSubmitted in, its pages (or a dead letter) out."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from schemas import (
    DocumentResult,
    DocumentSubmitted,
    Operation,
    Options,
    PageState,
    WebhookDelivery,
    decode,
    encode,
)
from schemas import headers as h
from schemas.pages import OcrResult
from streams.agents.ingest import Ingest
from streams.blobs import BlobStore
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin
from streams.media.raster import Budget, PageEncoding
from streams.media.sandbox import Abandon, RenderAbandonedError, Renderer
from streams.topics import DLQ, GPU_CLASSIFY, GPU_ORIENT, RAW, RESULTS, WEBHOOKS, Topology
from synth.pdf import images_to_pdf

TOPO = Topology("t.")
DEAD_LETTERS = DeadLetters(TOPO.name(DLQ), group="g", max_record_bytes=1_000_000)
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def _png(width: int = 64, height: int = 48) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buf, format="PNG")
    return buf.getvalue()


def _origin(value: bytes, offset: int = 7) -> Origin:
    return Origin(
        TOPO.name(RAW), 2, offset, None, b"k", value,
        ((h.EVENT_ID, b"evt-raw"), (h.TRACEPARENT, f"00-{TRACE_ID}-00f067aa0ba902b7-01".encode())),
    )  # fmt: skip


def _submitted(data: bytes, **fields: object) -> bytes:
    sub = DocumentSubmitted.model_validate(
        {"payload": {"inline_base64": base64.b64encode(data).decode()}, **fields}
    )
    return sub.model_dump_json().encode()


@pytest.fixture(scope="module")
def renderer() -> Iterator[Renderer]:
    r = Renderer(timeout_s=60, memory_bytes=2 * 1024**3)
    yield r
    r.close()


@pytest.fixture
def ingest(tmp_path: Path, renderer: Renderer) -> Ingest:
    budget = Budget(max_pixels=10**9, max_bytes=10**9)
    return Ingest(TOPO, BlobStore(str(tmp_path / "blobs")), dead_letters=DEAD_LETTERS,
                  renderer=renderer, max_pixels=10_000_000, budget=budget)  # fmt: skip


def test_pages_are_written_in_the_page_format_and_say_so(ingest: Ingest, tmp_path: Path) -> None:
    # PAGESTREAM_AGENTS__PAGE_FORMAT=jpeg: the render process writes JPEG (which a GPU
    # node decodes with nvjpeg), and the page's reference names it.
    ingest.encoding = PageEncoding("jpeg", 90)
    (out,) = ingest.handle(_origin(_submitted(_png(), doc_id="d-jpeg", operation="classify")))
    page = decode(PageState, out.value)
    assert page.image.media_type == "image/jpeg"
    stored = ingest.blobs.get(page.image.uri, expected_sha256=page.image.sha256)
    assert stored.startswith(b"\xff\xd8\xff")


def test_an_image_becomes_one_page_on_the_first_stage(ingest: Ingest) -> None:
    (out,) = ingest.handle(_origin(_submitted(_png(), doc_id="d1", operation="classify")))
    assert out.topic == TOPO.name(GPU_ORIENT) and out.key == b"d1"
    page = decode(PageState, out.value)
    assert (page.doc_id, page.page_no, page.page_count) == ("d1", 1, 1)
    assert (page.image.width, page.image.height, page.image.media_type) == (64, 48, "image/png")
    assert ingest.blobs.get(page.image.uri, expected_sha256=page.image.sha256).startswith(
        b"\x89PNG"
    )
    assert out.header(h.SCHEMA) == "PageState/1"
    # Same trace as the submission, a new span for this hop.
    _, trace_id, span_id, _ = (out.header(h.TRACEPARENT) or "").split("-")
    assert trace_id == TRACE_ID and span_id != "00f067aa0ba902b7"


def test_without_auto_rotate_the_first_stage_is_the_operation_s(ingest: Ingest) -> None:
    value = _submitted(
        _png(), doc_id="d2", operation="classify", options=Options(auto_rotate=False).model_dump()
    )
    (out,) = ingest.handle(_origin(value))
    assert out.topic == TOPO.name(GPU_CLASSIFY)


def test_a_pdf_becomes_one_record_per_page_with_distinct_event_ids(ingest: Ingest) -> None:
    images = [Image.new("RGB", (120, 160), c) for c in ("white", "gray", "black")]
    value = _submitted(images_to_pdf(images, dpi=72), doc_id="d3", operation=Operation.ocr)
    outs = ingest.handle(_origin(value))
    pages = [decode(PageState, o.value) for o in outs]
    assert [(p.page_no, p.page_count) for p in pages] == [(1, 3), (2, 3), (3, 3)]
    assert len({o.header(h.EVENT_ID) for o in outs}) == 3


def test_redoing_a_record_yields_the_same_records(ingest: Ingest) -> None:
    # At-least-once: a record handled twice must emit byte-identical values and the same
    # event ids, so deliver's table and docs.results' compaction absorb the duplicate.
    value = _submitted(_png(), operation="classify")
    first, again = ingest.handle(_origin(value)), ingest.handle(_origin(value))
    assert [o.value for o in first] == [o.value for o in again]
    assert [o.header(h.EVENT_ID) for o in first] == [o.header(h.EVENT_ID) for o in again]
    # No doc_id from the client: one derived from the content, equal on the redo.
    assert first[0].key == again[0].key and first[0].key


def test_an_unreadable_document_with_a_doc_id_is_dead_lettered_and_failed(ingest: Ingest) -> None:
    origin = _origin(_submitted(b"not an image at all", doc_id="d4"))
    dead, failed = ingest.handle(origin)
    assert dead.topic == TOPO.name(DLQ)
    assert (dead.key, dead.value) == (origin.key, origin.value)  # the original, untouched
    assert dead.header(h.ERROR_STAGE) == "ingest"
    assert dead.header(h.ERROR_TOPIC) == TOPO.name(RAW)
    assert failed.topic == TOPO.name(RESULTS) and failed.key == b"d4"
    result = decode(DocumentResult, failed.value)
    assert result.status == "failed" and result.errors


def test_an_abandoned_render_is_no_verdict_on_the_document(ingest: Ingest) -> None:
    # A rebalance handed the record back: its next owner renders it, so nothing is
    # written here, neither pages nor a dead letter nor a failed result.
    abandon = Abandon()
    abandon.abandon()
    with pytest.raises(RenderAbandonedError):
        ingest.handle(_origin(_submitted(_png(), doc_id="d9", operation="classify")), abandon)


def test_an_unreadable_document_with_a_callback_has_its_failed_result_posted(
    ingest: Ingest,
) -> None:
    # The failed result's webhook record leaves in the same outputs as the result.
    url = "https://example.com/hook?token=t0ken"
    origin = _origin(_submitted(b"not an image at all", doc_id="d5", callback=url))
    dead, failed, hook = ingest.handle(origin)
    assert (dead.topic, failed.topic, hook.topic) == (
        TOPO.name(DLQ), TOPO.name(RESULTS), TOPO.name(WEBHOOKS))  # fmt: skip
    assert hook.key == b"d5" and failed.value is not None
    assert b"t0ken" not in failed.value
    delivery = decode(WebhookDelivery, hook.value)
    assert delivery.callback == url and delivery.result.status == "failed"
    assert delivery.idempotency_key == f"d5:{failed.header(h.EVENT_ID)}"
    assert encode(delivery.result) == failed.value


def test_a_record_that_is_not_a_submission_is_only_dead_lettered(ingest: Ingest) -> None:
    (dead,) = ingest.handle(_origin(b'{"payload": 12}'))
    assert dead.topic == TOPO.name(DLQ)
    assert "payload" in (dead.header(h.ERROR_EXCEPTION_MESSAGE) or "")


def _mixed_pdf() -> tuple[bytes, list]:
    from synth.dataset import generate
    from synth.pdf import report_pages, text_pdf

    specs = report_pages(4, 2)
    (scan,) = generate(6, 1, rotations=[0], width=320)
    return text_pdf([specs[0], scan.image, specs[1]]), specs


def test_ocr_answers_born_digital_pages_from_the_text_layer_and_renders_only_the_scans(
    ingest: Ingest,
) -> None:
    from streams.topics import GPU_OCR, PAGES_DONE

    data, specs = _mixed_pdf()
    sub = _submitted(data, doc_id="mix", operation="ocr", options={"auto_rotate": False})
    out = ingest.handle(_origin(sub))
    assert [o.topic for o in out] == [TOPO.name(t) for t in (PAGES_DONE, GPU_OCR, PAGES_DONE)]
    pages = [decode(PageState, o.value) for o in out]
    assert [(p.page_no, p.page_count) for p in pages] == [(1, 3), (2, 3), (3, 3)]
    for page, spec in ((pages[0], specs[0]), (pages[2], specs[1])):
        assert page.ocr is not None and page.ocr.source == "text_layer"
        assert page.ocr.text == spec.text()
        assert (page.ocr.markdown or "").startswith(f"# {spec.heading}")
        # Nothing was rendered: the page refers to the submitted PDF.
        assert page.image.media_type == "application/pdf"
        assert ingest.blobs.get(page.image.uri) == data
    assert pages[1].ocr is None and pages[1].image.media_type == "image/png"


def test_a_text_layer_page_too_large_for_a_record_carries_its_ocr_by_reference(
    tmp_path: Path, renderer: Renderer
) -> None:
    # Before: the page's record was over the record limit, so RecordHandling replaced
    # every output of the document with one dead letter (no result, no webhook).
    from synth.pdf import report_pages, text_pdf

    spec = report_pages(9, 1)[0]
    blobs = BlobStore(str(tmp_path / "blobs"))
    small = DeadLetters(TOPO.name(DLQ), group="g", max_record_bytes=4_000)
    ingest = Ingest(TOPO, blobs, dead_letters=small, renderer=renderer, max_pixels=10_000_000,
                    budget=Budget(max_pixels=10**9, max_bytes=10**9))  # fmt: skip
    sub = _submitted(text_pdf([spec]), doc_id="dense", operation="ocr",
                     options={"auto_rotate": False})  # fmt: skip
    (out,) = ingest.handle(_origin(sub))
    assert out.topic != TOPO.name(DLQ) and out.fits(4_000)
    page = decode(PageState, out.value)
    assert page.ocr is None and page.ocr_ref is not None
    stored = OcrResult.model_validate_json(blobs.get(page.ocr_ref.uri))
    assert stored.source == "text_layer" and stored.text == spec.text()


def test_text_layer_never_renders_every_page_and_only_renders_none(ingest: Ingest) -> None:
    from streams.topics import GPU_OCR, PAGES_DONE

    data, _ = _mixed_pdf()
    options = {"auto_rotate": False, "text_layer": "never"}
    out = ingest.handle(_origin(_submitted(data, doc_id="n", operation="ocr", options=options)))
    assert [o.topic for o in out] == [TOPO.name(GPU_OCR)] * 3
    options["text_layer"] = "only"
    out = ingest.handle(_origin(_submitted(data, doc_id="o", operation="ocr", options=options)))
    assert [o.topic for o in out] == [TOPO.name(PAGES_DONE)] * 3
    scan = decode(PageState, out[1].value)
    assert scan.error == "text layer: the page has no text layer" and scan.ocr is None


def test_other_operations_never_read_the_text_layer(ingest: Ingest) -> None:
    data, _ = _mixed_pdf()
    out = ingest.handle(_origin(_submitted(data, doc_id="c", operation="classify")))
    assert [o.topic for o in out] == [TOPO.name(GPU_ORIENT)] * 3


def test_a_document_over_its_budget_is_dead_lettered_naming_it(
    tmp_path: Path, renderer: Renderer
) -> None:
    budget = Budget(max_pixels=5_000, max_bytes=10**9)
    small = Ingest(TOPO, BlobStore(str(tmp_path / "blobs")), dead_letters=DEAD_LETTERS,
                   renderer=renderer, max_pixels=10_000_000, budget=budget)  # fmt: skip
    pdf = images_to_pdf([Image.new("RGB", (64, 48), "white")] * 2, dpi=72)
    dead, failed = small.handle(_origin(_submitted(pdf, doc_id="d9", options={"dpi": 72})))
    assert dead.topic == TOPO.name(DLQ)
    assert "document budget of 5000 pixels" in (dead.header(h.ERROR_EXCEPTION_MESSAGE) or "")
    result = decode(DocumentResult, failed.value)
    assert result.status == "failed" and "DocumentTooLargeError" in result.errors[0]
    assert not list((tmp_path / "blobs").rglob("*.png"))  # nothing was rendered or stored


def test_a_tiff_over_its_budget_once_scaled_up_for_ocr_is_dead_lettered_naming_it(
    tmp_path: Path, renderer: Renderer
) -> None:
    # Issue 34: 4 frames of 100 x 100 (40 000 px declared) that OCR scales up 4 times
    # (target_px 400): 640 000 px of pages, over a budget of 100 000. Before, the budget
    # saw the declared sizes only and every page was rendered and stored.
    budget = Budget(max_pixels=100_000, max_bytes=10**9)
    small = Ingest(TOPO, BlobStore(str(tmp_path / "blobs")), dead_letters=DEAD_LETTERS,
                   renderer=renderer, max_pixels=10_000_000, budget=budget)  # fmt: skip
    frame = Image.new("L", (100, 100), 255)
    buf = io.BytesIO()
    frame.save(buf, format="TIFF", save_all=True, append_images=[frame] * 3)
    sub = _submitted(buf.getvalue(), doc_id="t4", operation="ocr",
                     options={"target_px": 400, "auto_rotate": False})  # fmt: skip
    dead, failed = small.handle(_origin(sub))
    message = dead.header(h.ERROR_EXCEPTION_MESSAGE) or ""
    assert "4 image/tiff frames scaled up towards 400 px" in message, message
    assert "640000 pixels, above the document budget of 100000 pixels" in message
    assert decode(DocumentResult, failed.value).status == "failed"
    assert not list((tmp_path / "blobs").rglob("*.png"))  # nothing was rendered or stored


# ---- the tenant travels with the document ----------------------------------------------


@pytest.mark.slow  # over 2.5 s: make test, not make check
def test_every_page_of_a_submission_carries_its_tenant(tmp_path: Path, renderer: Renderer) -> None:
    from schemas import Progress
    from streams.topics import PROGRESS

    ingest = Ingest(TOPO, BlobStore(str(tmp_path / "blobs")), dead_letters=DEAD_LETTERS,
                    renderer=renderer, max_pixels=10_000_000,
                    budget=Budget(max_pixels=10**9, max_bytes=10**9), progress=True)  # fmt: skip
    # Rendered pages and pages answered from the text layer are made in different places.
    data, _ = _mixed_pdf()
    sub = _submitted(data, doc_id="t", operation="ocr", options={"auto_rotate": False},
                     tenant="acme")  # fmt: skip
    out = ingest.handle(_origin(sub))
    pages = [decode(PageState, o.value) for o in out if o.header(h.SCHEMA) == "PageState/1"]
    assert [(p.page_no, p.tenant) for p in pages] == [(1, "acme"), (2, "acme"), (3, "acme")]
    assert pages[0].ocr is not None and pages[1].ocr is None  # both kinds of page
    moved = [decode(Progress, o.value) for o in out if o.topic == TOPO.name(PROGRESS)]
    assert [(p.page_no, p.tenant) for p in moved] == [(1, "acme"), (2, "acme"), (3, "acme")]


def test_a_submission_without_a_tenant_makes_pages_without_one(ingest: Ingest) -> None:
    (out,) = ingest.handle(_origin(_submitted(_png(), doc_id="nt", operation="classify")))
    assert decode(PageState, out.value).tenant is None


def test_a_document_that_ends_at_ingest_ends_with_its_tenant(
    tmp_path: Path, renderer: Renderer
) -> None:
    from schemas import Progress

    ingest = Ingest(TOPO, BlobStore(str(tmp_path / "blobs")), dead_letters=DEAD_LETTERS,
                    renderer=renderer, max_pixels=10_000_000,
                    budget=Budget(max_pixels=10**9, max_bytes=10**9), progress=True)  # fmt: skip
    url = "https://example.com/hook"
    origin = _origin(_submitted(b"not an image at all", doc_id="tf", callback=url,
                                tenant="team-7"))  # fmt: skip
    dead, failed, hook, ended = ingest.handle(origin)
    assert dead.topic == TOPO.name(DLQ) and dead.value == origin.value  # the tenant inside
    assert decode(DocumentResult, failed.value).tenant == "team-7"
    assert decode(WebhookDelivery, hook.value).result.tenant == "team-7"
    assert (decode(Progress, ended.value).stage, decode(Progress, ended.value).tenant) == (
        "ended", "team-7")  # fmt: skip


def test_a_tenants_document_naming_another_tenants_upload_is_refused(ingest: Ingest) -> None:
    # Issue 34: the gateway lets a JSON submission name only its own tenant's uploads;
    # ingest holds the same line for a record that reached docs.raw some other way.
    data = _png()
    stored = ingest.blobs.scoped("acme").put(data)
    payload = {"uri": stored.uri, "sha256": stored.sha256}

    def submitted(tenant: str) -> bytes:
        return DocumentSubmitted.model_validate(
            {"doc_id": f"d-{tenant}", "operation": "classify", "payload": payload,
             "tenant": tenant}
        ).model_dump_json().encode()  # fmt: skip

    (own,) = ingest.handle(_origin(submitted("acme")))
    assert decode(PageState, own.value).tenant == "acme"
    dead, failed = ingest.handle(_origin(submitted("other")))
    assert dead.topic == TOPO.name(DLQ)
    assert "another tenant's upload" in (dead.header(h.ERROR_EXCEPTION_MESSAGE) or "")
    assert decode(DocumentResult, failed.value).status == "failed"


def test_attributes_over_their_encoded_bound_are_refused_not_copied(ingest: Ingest) -> None:
    # 40 values of 1,000 control characters: 240 kB as a record carries them, which
    # the counts of the schema alone let through, onto every page and into the result.
    fat = {f"k{n}": "\x01" * 1000 for n in range(40)}
    for data in (_png(), b"not a document"):  # readable or not: refused before the payload
        letter, result = ingest.handle(_origin(_submitted(data, doc_id="fat", attributes=fat)))
        assert letter.topic == TOPO.name(DLQ)
        ended = decode(DocumentResult, result.value)
        assert (ended.status, ended.attributes) == ("failed", {})
        assert "over the limit of 16384" in ended.errors[0]
    # Within the bound, a failed result keeps them, as before.
    fine = {f"k{n}": "\x01" * 100 for n in range(10)}
    _, result = ingest.handle(_origin(_submitted(b"not a document", doc_id="ok", attributes=fine)))
    assert decode(DocumentResult, result.value).attributes == fine
