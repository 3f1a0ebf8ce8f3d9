"""Retrieval chunks cut from the document JSON: a pure function, page by page.

- Chunks follow headings: a title starts a new chunk (titles in a row stay together,
  with what follows them), and each chunk carries its heading path, the titles above
  it outermost first (a title of level n ends every title of level n or deeper).
- A token budget (`max_tokens`, default 512): a token is a word between whitespace
  (`count_tokens`), a simple rule any client can redo; a chunk holds blocks in reading
  order until the next would take it past the budget.
- A text longer than the budget is cut between words: the chunk it starts in is filled,
  then the next ones. A text that fits in a chunk is not cut: it starts the next one.
- A table is never cut inside a row: a table longer than the budget goes on in the next
  chunk between two rows, its header rows (the cells the table finder marked as
  headings, else its first row) repeated at the top where they fit beside the row.
  A single row longer than the budget is a chunk of its own, over the budget.
- Page furniture (running heads, page numbers) is left out, as from the Markdown.
Each chunk names its pages, and the box of each block it holds (a table's box for
its rows). `Chunker` takes one page at a time, so a long document is never held whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from schemas.document_json import FURNITURE, Block, BlockRef, Chunk, ChunkBox, DocumentPage

DEFAULT_MAX_TOKENS = 512


def count_tokens(text: str) -> int:
    """Tokens as the budget counts them: words between whitespace."""
    return len(text.split())


@dataclass(frozen=True)
class _Unit:
    """What a chunk is made of: a block, a piece of a long text, or a table row."""

    page_no: int
    block: Block
    text: str
    tokens: int
    title: bool = False
    splittable: bool = False  # a text, cut between words where it is over the budget
    # A table row's: the table's header rows (their text) and whether it is one of them.
    header: str = ""
    is_header: bool = False


@dataclass
class _Open:
    units: list[_Unit] = field(default_factory=list)
    tokens: int = 0
    headings: list[str] | None = None  # the path when its first non-title unit came
    # The table whose rows end the chunk, and whether its header was written again.
    table: tuple[int, int] | None = None
    text: list[str] = field(default_factory=list)


class Chunker:
    """Chunks of a document fed page by page (`add`), then `finish`."""

    def __init__(self, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        self.max_tokens = max_tokens
        self._headings: list[tuple[int, str]] = []  # (level, text), outermost first
        self._open = _Open()
        self._index = 0
        # The table whose rows were last written, and whether they went past a chunk.
        self._last_table: tuple[int, int] | None = None

    def add(self, page: DocumentPage) -> list[Chunk]:
        """The chunks `page` completes."""
        done: list[Chunk] = []
        for block in sorted(page.blocks, key=lambda b: b.order):
            if block.kind in FURNITURE:
                continue
            for unit in _units(page.page_no, block):
                done += self._take(unit)
        return done

    def finish(self) -> list[Chunk]:
        """The last chunk, if any."""
        return self._flush()

    def _take(self, unit: _Unit) -> list[Chunk]:
        done: list[Chunk] = []
        has_body = any(not u.title for u in self._open.units)
        if unit.title and has_body:
            done += self._flush()
        if unit.title and unit.block.level is not None:
            level = unit.block.level
            self._headings = [(n, t) for n, t in self._headings if n < level]
            self._headings.append((level, unit.text))
        key = (unit.page_no, unit.block.order)
        if unit.splittable and unit.tokens > self.max_tokens:
            words = unit.text.split()
            while words:
                room = self.max_tokens - self._open.tokens
                if room <= 0:
                    done += self._flush()
                    continue
                piece, words = words[:room], words[room:]
                self._append(replace(unit, text=" ".join(piece), tokens=len(piece)), key, "")
            return done
        repeat = ""
        if self._open.tokens + unit.tokens > self.max_tokens and self._open.units:
            done += self._flush()
        goes_on = not self._open.units and self._last_table == key and not unit.is_header
        if goes_on and count_tokens(unit.header) + unit.tokens <= self.max_tokens:
            # The table goes on from the chunk before: its header again, where it fits.
            repeat = unit.header
        self._append(unit, key, repeat)
        return done

    def _append(self, unit: _Unit, key: tuple[int, int], repeat: str) -> None:
        chunk = self._open
        if not unit.title and chunk.headings is None:
            chunk.headings = [t for _, t in self._headings]
        in_table = bool(unit.header or unit.is_header) or unit.block.kind == "table"
        if in_table and chunk.table == key:
            chunk.text[-1] += "\n" + unit.text  # the table's rows, a row a line
        else:
            chunk.text.append(f"{repeat}\n{unit.text}" if repeat else unit.text)
        chunk.table = key if in_table else None
        self._last_table = key if in_table else None
        chunk.units.append(unit)
        chunk.tokens += unit.tokens + count_tokens(repeat)

    def _flush(self) -> list[Chunk]:
        chunk = self._open
        if not chunk.units:
            return []
        self._open = _Open()
        refs: list[tuple[int, Block]] = []
        for unit in chunk.units:
            if not refs or (refs[-1][0], refs[-1][1].order) != (unit.page_no, unit.block.order):
                refs.append((unit.page_no, unit.block))
        headings = chunk.headings if chunk.headings is not None else [t for _, t in self._headings]
        out = Chunk(
            index=self._index,
            text="\n\n".join(chunk.text),
            headings=headings,
            page_nos=sorted({n for n, _ in refs}),
            boxes=[ChunkBox(page_no=n, box=b.box) for n, b in refs if b.box is not None],
            blocks=[BlockRef(page_no=n, order=b.order) for n, b in refs],
            tokens=chunk.tokens,
        )
        self._index += 1
        return [out]


def chunk_document(pages: Iterable[DocumentPage], *,
                   max_tokens: int = DEFAULT_MAX_TOKENS) -> Iterator[Chunk]:  # fmt: skip
    """The chunks of a document's pages, in order (see the module's docstring)."""
    chunker = Chunker(max_tokens)
    for page in pages:
        yield from chunker.add(page)
    yield from chunker.finish()


def _units(page_no: int, block: Block) -> list[_Unit]:
    if block.table is not None and block.table.rows:
        return _rows(page_no, block)
    words = block.text.split()
    if not words:
        return []
    return [_Unit(page_no, block, " ".join(words), len(words), title=block.kind == "title",
                  splittable=True)]  # fmt: skip


def _rows(page_no: int, block: Block) -> list[_Unit]:
    """A table's rows, a unit each: the cells starting in the row joined by " | "."""
    assert block.table is not None  # noqa: S101 - the caller checked
    rows: list[list[str]] = [[] for _ in range(block.table.rows)]
    heads: list[list[bool]] = [[] for _ in range(block.table.rows)]
    for cell in sorted(block.table.cells, key=lambda c: (c.row, c.col)):
        rows[cell.row].append(cell.text)
        heads[cell.row].append(cell.header)
    texts = [" | ".join(cells) for cells in rows]
    # Header rows: the leading rows every cell of which is a heading; else the first row.
    lead = 0
    while lead < len(rows) and heads[lead] and all(heads[lead]):
        lead += 1
    lead = lead or 1
    header = "\n".join(t for t in texts[:lead] if t.strip()) if len(rows) > lead else ""
    return [
        _Unit(page_no, block, text, count_tokens(text), header=header, is_header=r < lead)
        for r, text in enumerate(texts)
        if text.strip()
    ]
