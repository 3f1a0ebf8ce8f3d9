"""A page result's part of the document JSON (schemas/document_json.py).

Whoever read the page, the document JSON has its blocks:
- the layout reader's (`OcrResult.layout`: text-layer pages, OCR'd pages under
  layout=model), as the reader laid the page out for its Markdown;
- a VLM's grounded blocks (`OcrResult.blocks`), mapped onto the same kinds, their
  tables parsed into cells;
- else the page's lines, a text block each (layout=fast, a page past the layout budget,
  a page whose layout fell back to its lines).
Pure functions: the caller fetches a claim-checked OCR result (`ocr_ref`) first.
`outputs` writes the document JSON and its chunks (reading/chunks.py) page by page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Literal, get_args

from reading.chunks import DEFAULT_MAX_TOKENS, Chunker
from reading.tables import as_table, parse, table_text
from schemas.document_json import (
    Block,
    Chunks,
    DocumentBlockKind,
    DocumentJson,
    DocumentPage,
    Table,
    TableCell,
)
from schemas.pages import OcrBlock, OcrResult
from schemas.results import PageResult

_VLM_KINDS: dict[str, DocumentBlockKind] = {"header": "page-header", "footer": "page-footer"}
_SAME_KINDS: dict[str, DocumentBlockKind] = {k: k for k in get_args(DocumentBlockKind)}
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+")
_TAG = re.compile(r"<[^>]+>")
_MARK = re.compile(r"^\s{0,3}(#{1,6}\s+|[-*+]\s+|>\s?)|[*_`]", re.M)
_SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?$")


def document_page(page: PageResult, ocr: OcrResult | None) -> DocumentPage:
    """`page`'s part of the document JSON; `ocr` its OCR result (`page.ocr`, or the one
    its `ocr_ref` names), None when it has none."""
    width, height = _image_size(page)
    rotation = page.orientation.rotation_degrees if page.orientation is not None else 0
    if ocr is None:
        error = page.error or "no OCR result"
        return DocumentPage(page_no=page.page_no, width=width, height=height,
                            rotation=rotation, error=error)  # fmt: skip
    layout = ocr.layout
    if layout is not None:
        width, height = layout.width or width, layout.height or height
        rotation = layout.rotation if page.orientation is None else rotation
    if layout is not None and layout.blocks:
        blocks = layout.blocks
    elif ocr.blocks:
        blocks = [_vlm_block(b, i) for i, b in enumerate(ocr.blocks)]
    else:
        blocks = [Block(kind="text", order=i, box=line.extent(), text=line.text)
                  for i, line in enumerate(ocr.boxes)]  # fmt: skip
    return DocumentPage(page_no=page.page_no, width=width, height=height, rotation=rotation,
                        blocks=blocks, source=ocr.source, error=page.error,
                        warnings=ocr.warnings)  # fmt: skip


def _image_size(page: PageResult) -> tuple[int | None, int | None]:
    """The upright page's pixels, from its image (before the orientation's turn)."""
    image = page.image
    if image is None or not image.media_type.startswith("image/"):
        return None, None
    turned = page.orientation is not None and page.orientation.rotation_degrees in (90, 270)
    return (image.height, image.width) if turned else (image.width, image.height)


def _vlm_block(block: OcrBlock, order: int) -> Block:
    """A VLM's grounded block as a document block: kinds by their document names, the
    heading level of a title's `#`s, a table's cells."""
    kind = _VLM_KINDS.get(block.kind) or _SAME_KINDS[block.kind]
    level = None
    if kind == "title":
        heading = _HEADING.match(block.markdown)
        level = len(heading.group(1)) if heading else 1
    table = _vlm_table(block.markdown) if kind == "table" else None
    text = table_text(table) if table is not None else _plain(block.markdown)
    return Block(kind=kind, order=order, box=block.box, text=text, level=level, table=table)


def _vlm_table(markdown: str) -> Table | None:
    """A VLM's table: HTML (rowspan, colspan, <th>), or a Markdown pipe table whose first
    row is its header; None when it is neither."""
    if "<table" in markdown.lower():
        rows = parse(markdown)
        return as_table(rows) if rows is not None else None
    lines = [line.strip() for line in markdown.splitlines() if line.strip().startswith("|")]
    body = [line for line in lines if not _SEPARATOR.match(line)]
    if not body:
        return None
    headed = len(body) < len(lines)  # a separator line under the first row
    cells = [
        TableCell(row=r, col=c, text=" ".join(text.split()), header=r == 0 and headed)
        for r, line in enumerate(body)
        for c, text in enumerate(re.split(r"(?<!\\)\|", line.strip("|")))
    ]  # fmt: skip
    return Table(rows=len(body), cols=max(c.col for c in cells) + 1, cells=cells)


def _plain(markdown: str) -> str:
    return " ".join(_MARK.sub("", _TAG.sub(" ", markdown)).split())


Part = Literal["document", "chunks"]


def outputs(doc_id: str, page_count: int, pages: Iterable[DocumentPage], *,
            max_tokens: int = DEFAULT_MAX_TOKENS) -> Iterator[tuple[Part, bytes]]:  # fmt: skip
    """The document JSON and its chunks (`Chunks`) of `pages`, as pieces of their JSON
    texts, each named by the output it continues, taking one page at a time: a writer
    (a file, a blob) of each output gets its JSON whole, and no one holds a document."""
    doc_head, doc_tail = _cut(DocumentJson(doc_id=doc_id, page_count=page_count))
    chunk_head, chunk_tail = _cut(Chunks(doc_id=doc_id, max_tokens=max_tokens))
    yield "document", doc_head
    yield "chunks", chunk_head
    chunker = Chunker(max_tokens)
    first_page = first_chunk = True
    for page in pages:
        yield "document", (b"" if first_page else b",") + page.model_dump_json().encode()
        first_page = False
        for chunk in chunker.add(page):
            yield "chunks", (b"" if first_chunk else b",") + chunk.model_dump_json().encode()
            first_chunk = False
    for chunk in chunker.finish():
        yield "chunks", (b"" if first_chunk else b",") + chunk.model_dump_json().encode()
        first_chunk = False
    yield "document", doc_tail
    yield "chunks", chunk_tail


def _cut(model: DocumentJson | Chunks) -> tuple[bytes, bytes]:
    """`model`'s JSON (its last field an empty list) cut where that list's items go."""
    text = model.model_dump_json().encode()
    if not text.endswith(b"[]}"):  # the list is the model's last field
        raise AssertionError(f"{type(model).__name__} does not end with its list")
    return text[:-2], text[-2:]
