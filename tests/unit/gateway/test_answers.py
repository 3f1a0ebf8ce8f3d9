"""An ended document's answers built once (gateway/answers.py), in a real blob store: the
same result, Markdown and page images the routes answered when they built them whole."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from gateway.answers import ANSWERS_VERSION, Answers, _build, answers_of
from gateway.state import Gateway
from gateway.view import View
from schemas import DocumentResult, Operation, encode
from schemas.document_json import Chunks, DocumentJson, PageLayout
from schemas.pages import BlobRef, OcrBox, OcrResult
from schemas.results import PageResult, document_markdown
from streams.blobs import BlobStore
from streams.claim_check import ClaimCheck
from streams.client.document_json import GONE
from streams.client.results import resolved
from streams.settings import Settings

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> BlobStore:
    return BlobStore(str(tmp_path / "blobs"))


def _result(store: BlobStore, operation: Operation, *, markdown: bool) -> DocumentResult:
    image = store.put(b"\x89PNG page one")
    pages = [
        PageResult(
            page_no=1,
            image=BlobRef(
                uri=image.uri,
                sha256=image.sha256,
                media_type="image/png",
                size_bytes=image.size_bytes,
            ),
            ocr=OcrResult(text="caf\u00e9 \x01 one", confidence=0.5),
        ),
        PageResult(page_no=2, error="ocr: the model gave up"),
    ]
    return DocumentResult(doc_id="d", operation=operation, status="partial", page_count=2,
                          pages=pages, markdown=document_markdown(pages) if markdown else None,
                          attributes={"k": "v\n"}, tenant="acme", submitted_at=NOW,
                          completed_at=NOW)  # fmt: skip


@pytest.mark.parametrize("claim_checked", [False, True])
@pytest.mark.parametrize("markdown", [False, True])
def test_the_answers_are_the_result_resolved_its_markdown_and_its_images(
    store: BlobStore, claim_checked: bool, markdown: bool
) -> None:
    whole = _result(store, Operation.ocr, markdown=markdown)
    # A record limit that claim-checks the pages and the Markdown, or one that does not.
    record, value = ClaimCheck(store, 2_000 if claim_checked else None).apply(whole)
    assert (record.pages_ref is not None) is claim_checked
    answers = _build(store, store.put(value).sha256)

    built = json.loads(store.get(answers.result.uri))
    assert DocumentResult.model_validate(built) == resolved(record, store)
    assert built == resolved(record, store).model_dump(mode="json")
    assert answers.markdown is not None  # given, or built from the pages as the route did
    assert store.get(answers.markdown.uri).decode() == document_markdown(whole.pages)
    assert answers.images is not None
    images = json.loads(store.get(answers.images.uri))
    assert list(images) == ["1"] and images["1"]["sha256"] == whole.pages[0].image.sha256  # type: ignore[union-attr]


def test_a_document_without_ocr_has_no_markdown_answer(store: BlobStore) -> None:
    result = _result(store, Operation.classify, markdown=False)
    result = result.model_copy(update={"pages": [result.pages[1]]})  # no OCR, no image
    answers = _build(store, store.put(encode(result)).sha256)
    assert (answers.operation, answers.markdown, answers.images) == (Operation.classify, None, None)
    assert (answers.document, answers.chunks) == (None, None)  # they come with ocr


def test_an_ocr_documents_json_and_chunks_are_built_with_its_claim_checked_pages(
    store: BlobStore,
) -> None:
    lines = [OcrBox(text=f"line {i}", confidence=1.0, box=[(0, i), (9, i), (9, i + 1), (0, i + 1)])
             for i in range(2_000)]  # fmt: skip
    dense = OcrResult(text="\n".join(b.text for b in lines), confidence=1.0, boxes=lines,
                      layout=PageLayout(width=100, height=2_100))  # fmt: skip
    ref = store.put(dense.model_dump_json().encode())
    claimed = BlobRef(uri=ref.uri, sha256=ref.sha256, media_type="application/json",
                      size_bytes=ref.size_bytes)  # fmt: skip
    result = _result(store, Operation.ocr, markdown=True)
    result = result.model_copy(update={"pages": [*result.pages[:1], PageResult(
        page_no=2, ocr_ref=claimed)], "page_count": 2})  # fmt: skip
    answers = _build(store, store.put(encode(result)).sha256)
    assert answers.document is not None and answers.chunks is not None
    assert answers.version == ANSWERS_VERSION
    document = DocumentJson.model_validate_json(store.get(answers.document.uri))
    assert (document.doc_id, document.page_count, [p.page_no for p in document.pages]) == (
        "d", 2, [1, 2]
    )  # fmt: skip
    one, two = document.pages
    assert [b.text for b in one.blocks] == []  # an OCR result without lines has no blocks
    # The claim-checked page's lines, a text block each, fetched from the blob store.
    assert [b.text for b in two.blocks] == [f"line {i}" for i in range(2_000)]
    assert (two.width, two.height) == (100, 2_100)
    chunks = Chunks.model_validate_json(store.get(answers.chunks.uri))
    assert chunks.max_tokens == 512
    words = [w for c in chunks.chunks for w in c.text.split()]
    assert words == [w for i in range(2_000) for w in ("line", str(i))]
    assert all(c.tokens <= 512 and c.page_nos == [2] for c in chunks.chunks)


def test_a_claim_checked_page_gone_from_the_store_says_so_in_the_document(
    store: BlobStore,
) -> None:
    gone = BlobRef(uri=store.uri_for("0" * 64), sha256="0" * 64, media_type="application/json",
                   size_bytes=10)  # fmt: skip
    result = _result(store, Operation.ocr, markdown=True)
    result = result.model_copy(update={"pages": [PageResult(page_no=1, ocr_ref=gone)]})
    answers = _build(store, store.put(encode(result)).sha256)
    assert answers.document is not None
    (page,) = DocumentJson.model_validate_json(store.get(answers.document.uri)).pages
    assert page.error == GONE and page.blocks == []


def test_answers_noted_by_an_older_gateway_are_built_again_with_the_document_json(
    store: BlobStore, tmp_path: Path
) -> None:
    view = View(Settings(), tmp_path / "view.sqlite", store=store)
    result = _result(store, Operation.ocr, markdown=True)
    view._apply_result(encode(result), time.time())
    row = view.document("d")
    assert row is not None and row.result_sha256 is not None
    # What a gateway before the document JSON noted: no document, chunks or version.
    old = _build(store, row.result_sha256).model_dump(exclude={"document", "chunks", "version"})
    view.note_answers("d", row.result_sha256, json.dumps(old, default=str))
    gw = cast(Gateway, SimpleNamespace(store=store, view=view))
    answers = asyncio.run(answers_of(gw, view.document("d")))  # type: ignore[arg-type]
    assert answers.version == ANSWERS_VERSION and answers.document is not None
    noted = view.document("d")
    assert noted is not None and noted.answers is not None
    assert Answers.model_validate_json(noted.answers) == answers  # noted for the next read
