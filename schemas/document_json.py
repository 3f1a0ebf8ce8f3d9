"""The lossless document (`document.json`) and its retrieval chunks.

Markdown shows a page as a reader should read it: running heads and page numbers left
out, tables flattened to Markdown. The document JSON keeps what the layout reader saw,
page by page: every block with its kind, box, reading-order index and text (page
furniture included, marked as such), tables as cells with their spans, figures with
their boxes, the page's size and rotation. Chunks (`reading/chunks.py`) are cut from it
for retrieval: each carries its heading path, page numbers and boxes.

Units: every box is x0, y0, x1, y1 in pixels of the page as it was read, upright, the
same frame as `OcrResult.boxes`: a page read from its pixels in its image's pixels after
the orientation's correction, a page read from its PDF text layer in the pixels of the
rendering the pipeline would have made of it (`width` x `height`).

Versioned by `version` ("major.minor"): a minor step only adds optional fields.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from schemas.common import DocId, Model

DOCUMENT_JSON_VERSION: Final = "1.0"
CHUNKS_VERSION: Final = "1.0"

DocumentBlockKind = Literal["title", "text", "list", "table", "figure", "caption", "formula",
                            "footnote", "page-header", "page-footer"]  # fmt: skip
# Page furniture: kept in the document JSON, left out of the Markdown (unless
# `keep_headers`) and of the chunks.
FURNITURE: frozenset[str] = frozenset({"page-header", "page-footer"})

# x0, y0, x1, y1 in pixels of the upright page (see the module's docstring).
Box = tuple[float, float, float, float]


class TableCell(Model):
    """One cell of a table: where it starts in the grid (0-based), how far it spans."""

    row: int = Field(ge=0)
    col: int = Field(ge=0)
    row_span: int = Field(1, ge=1)
    col_span: int = Field(1, ge=1)
    text: str
    # A heading cell (<th>) as the table finder wrote it; False where it does not say.
    header: bool = False


class Table(Model):
    rows: int = Field(ge=0)
    cols: int = Field(ge=0)
    cells: list[TableCell] = Field(default_factory=list)  # by row, then column


class Block(Model):
    """A region of the page the reader set apart, in reading order."""

    kind: DocumentBlockKind
    order: int = Field(ge=0)  # reading-order index on its page, furniture included
    box: Box | None = None  # None: the reader gave no box (a VLM's untagged text)
    text: str  # plain text; a table's rows one a line, its cells joined by " | "
    level: int | None = Field(None, ge=1, le=6)  # titles: 1 the page's title, 2+ sections
    table: Table | None = None  # kind table: its cells


class PageLayout(Model):
    """One page as the layout reader laid it out (OcrResult.layout).

    `blocks` empty while the page has lines: no layout ran (layout=fast, the layout
    budget, a fallback); the document JSON then has a text block per line."""

    width: int | None = Field(None, ge=1)  # pixels; None when the reader did not know
    height: int | None = Field(None, ge=1)
    # Clockwise degrees the page was turned to be read: the orientation's correction of
    # a page of pixels, the PDF's /Rotate of a page read from its text layer (plus the
    # turn of its text where it runs sideways: reading/upright.py).
    rotation: Literal[0, 90, 180, 270] = 0
    blocks: list[Block] = Field(default_factory=list)


class DocumentPage(PageLayout):
    page_no: int = Field(ge=1)
    # What read it: an OCR engine, the PDF's text layer or a VLM (OcrResult.source).
    source: str | None = None
    error: str | None = None  # why the page has no result (then no blocks)
    warnings: list[str] = Field(default_factory=list)


class DocumentJson(Model):
    """`GET /v1/documents/{id}/document.json`, `pagestream results --json-out`."""

    version: Literal["1.0"] = DOCUMENT_JSON_VERSION
    doc_id: DocId
    page_count: int = Field(ge=0)
    pages: list[DocumentPage] = Field(default_factory=list)  # in page order


class ChunkBox(Model):
    page_no: int = Field(ge=1)
    box: Box


class BlockRef(Model):
    """A block (or a part of it: some rows of a table, a piece of a long text) a chunk
    holds."""

    page_no: int = Field(ge=1)
    order: int = Field(ge=0)


class Chunk(Model):
    index: int = Field(ge=0)
    text: str
    # The titles above the chunk, outermost first (their text, by level).
    headings: list[str] = Field(default_factory=list)
    page_nos: list[int] = Field(default_factory=list)
    boxes: list[ChunkBox] = Field(default_factory=list)  # one per block held, in order
    blocks: list[BlockRef] = Field(default_factory=list)
    tokens: int = Field(ge=0)  # as `Chunks.counted_as` says


class Chunks(Model):
    """`GET /v1/documents/{id}/chunks`, `pagestream results --chunks-out`."""

    version: Literal["1.0"] = CHUNKS_VERSION
    doc_id: DocId
    max_tokens: Annotated[int, Field(ge=1)]
    # How `Chunk.tokens` is counted: words between whitespace (reading/chunks.py).
    counted_as: Literal["whitespace-words"] = "whitespace-words"
    chunks: list[Chunk] = Field(default_factory=list)
