"""An ended document's answers built once (gateway/answers.py), in a real blob store: the
same result, Markdown and page images the routes answered when they built them whole."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.answers import _build
from schemas import DocumentResult, Operation, encode
from schemas.pages import BlobRef, OcrResult
from schemas.results import PageResult, document_markdown
from streams.blobs import BlobStore
from streams.claim_check import ClaimCheck
from streams.client.results import resolved

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
