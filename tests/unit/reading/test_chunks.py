"""Retrieval chunks (reading/chunks.py): headings, the token budget, tables cut between
rows with their header repeated, furniture left out; and, over generated documents, the
properties every chunking keeps (no row cut, every block's words once and in order, the
budget kept but for a single oversized row)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reading.chunks import DEFAULT_MAX_TOKENS, Chunker, chunk_document, count_tokens
from schemas.document_json import FURNITURE, Block, Chunk, DocumentPage, Table, TableCell


def _page(page_no: int, *blocks: Block) -> DocumentPage:
    ordered = [b.model_copy(update={"order": i}) for i, b in enumerate(blocks)]
    return DocumentPage(page_no=page_no, width=1000, height=1400, blocks=ordered)


def _text(text: str, kind: str = "text", level: int | None = None) -> Block:
    return Block.model_validate({"kind": kind, "order": 0, "box": (10, 20, 30, 40), "text": text,
                                 "level": level})  # fmt: skip


def _title(text: str, level: int) -> Block:
    return _text(text, "title", level)


def _table(rows: list[list[str]], *, headed: bool = True) -> Block:
    cells = [TableCell(row=r, col=c, text=t, header=headed and r == 0)
             for r, row in enumerate(rows) for c, t in enumerate(row)]  # fmt: skip
    table = Table(rows=len(rows), cols=max(len(r) for r in rows), cells=cells)
    text = "\n".join(" | ".join(r) for r in rows)
    return Block(kind="table", order=0, box=(0, 500, 900, 900), text=text, table=table)


def test_the_default_budget_and_the_token_rule() -> None:
    assert DEFAULT_MAX_TOKENS == 512
    assert count_tokens("  two\twords\n") == 2
    with pytest.raises(ValueError, match="max_tokens"):
        Chunker(0)


def test_chunks_follow_headings_and_carry_their_path() -> None:
    pages = [
        _page(1, _text("Journal running head", "page-header"), _title("Report", 1),
              _text("intro words"), _title("Method", 2), _text("method words"),
              _text("17", "page-footer")),
        _page(2, _title("Data", 3), _text("data words"), _title("Results", 2),
              _text("result words")),
    ]  # fmt: skip
    chunks = list(chunk_document(pages))
    assert [c.text for c in chunks] == [
        "Report\n\nintro words",
        "Method\n\nmethod words",
        "Data\n\ndata words",
        "Results\n\nresult words",
    ]
    assert [c.headings for c in chunks] == [
        ["Report"],
        ["Report", "Method"],
        ["Report", "Method", "Data"],
        ["Report", "Results"],  # a level-2 title ends the level-2 and level-3 ones
    ]
    assert [c.page_nos for c in chunks] == [[1], [1], [2], [2]]
    assert [c.index for c in chunks] == [0, 1, 2, 3]
    # Running heads and page numbers are not retrieval text.
    assert not any("running head" in c.text or "17" in c.text.split() for c in chunks)
    assert [(b.page_no, b.order) for b in chunks[0].blocks] == [(1, 1), (1, 2)]
    assert [(b.page_no, b.box) for b in chunks[0].boxes] == [(1, (10, 20, 30, 40))] * 2


def test_titles_in_a_row_stay_together_with_what_follows() -> None:
    chunks = list(chunk_document([_page(1, _title("Part I", 1), _title("Chapter 1", 2),
                                        _text("body"))]))  # fmt: skip
    assert [c.text for c in chunks] == ["Part I\n\nChapter 1\n\nbody"]
    assert chunks[0].headings == ["Part I", "Chapter 1"]


def test_a_long_text_fills_the_chunk_then_goes_on_and_a_fitting_one_is_not_cut() -> None:
    words = [f"w{i}" for i in range(25)]
    page = _page(1, _text("a b c"), _text(" ".join(words)), _text("x y z q"), _text("u v w s"))
    chunks = list(chunk_document([page], max_tokens=10))
    assert [c.tokens for c in chunks] == [10, 10, 8, 8]
    assert chunks[0].text == "a b c\n\n" + " ".join(words[:7])
    assert chunks[1].text == " ".join(words[7:17])
    assert chunks[2].text == " ".join(words[17:])
    # "x y z q" did not fit beside the long text's tail: it starts the next chunk, whole.
    assert chunks[3].text == "x y z q\n\nu v w s"


def test_a_table_longer_than_the_budget_goes_on_between_rows_with_its_header() -> None:
    rows = [["Region", "Revenue"], *([f"r{i}", f"{i}00"] for i in range(6))]
    chunks = list(chunk_document([_page(1, _table(rows))], max_tokens=10))
    # Each row is 3 tokens ("a | b"): the header and two rows, then the header again.
    assert [c.text for c in chunks] == [
        "Region | Revenue\nr0 | 000\nr1 | 100",
        "Region | Revenue\nr2 | 200\nr3 | 300",
        "Region | Revenue\nr4 | 400\nr5 | 500",
    ]
    assert all(c.tokens <= 10 for c in chunks)
    assert all(c.blocks == chunks[0].blocks for c in chunks)  # one block, in three parts


def test_a_table_without_heading_cells_repeats_its_first_row() -> None:
    rows = [["a", "b"], ["c", "d"], ["e", "f"]]
    chunks = list(chunk_document([_page(1, _table(rows, headed=False))], max_tokens=6))
    assert [c.text for c in chunks] == ["a | b\nc | d", "a | b\ne | f"]


def test_a_row_over_the_budget_is_a_chunk_of_its_own() -> None:
    long_cell = " ".join(f"x{i}" for i in range(30))
    rows = [["h1", "h2"], ["a", "b"], [long_cell, "c"], ["d", "e"]]
    chunks = list(chunk_document([_page(1, _text("before"), _table(rows))], max_tokens=8))
    assert [c.text for c in chunks] == [
        "before\n\nh1 | h2\na | b",
        f"{long_cell} | c",  # over the budget, whole, and no room for the header
        "h1 | h2\nd | e",
    ]
    assert chunks[1].tokens == 32


# --- properties over generated documents ---


def _documents() -> st.SearchStrategy[tuple[list[DocumentPage], int]]:
    """Pages of titles, texts, furniture and tables whose words are all different, so
    where each word went tells where its block went."""
    counter = itertools.count()

    def words(n: int) -> str:
        return " ".join(f"w{next(counter)}" for _ in range(n))

    def block(kind: str, size: int, level: int, shape: tuple[int, int, bool]) -> Block:
        if kind == "table":
            rows, cols, headed = shape
            cells = [TableCell(row=r, col=c, text=words(1 + (size + r + c) % 4),
                               header=headed and r == 0)
                     for r in range(rows) for c in range(cols)]  # fmt: skip
            return Block(kind="table", order=0, text="", box=(1, 2, 3, 4),
                         table=Table(rows=rows, cols=cols, cells=cells))  # fmt: skip
        return _text(words(size), kind, level if kind == "title" else None)

    blocks = st.builds(
        block,
        st.sampled_from(["text", "text", "title", "table", "list", "page-header", "page-footer"]),
        st.integers(0, 40),
        st.integers(1, 4),
        st.tuples(st.integers(1, 8), st.integers(1, 4), st.booleans()),
    )
    pages = st.lists(st.lists(blocks, max_size=8), min_size=1, max_size=4).map(
        lambda pp: [_page(i + 1, *bs) for i, bs in enumerate(pp)]
    )
    return st.tuples(pages, st.integers(1, 30))


def _rows(block: Block) -> Iterator[list[str]]:
    """A table's rows as their words, in order."""
    assert block.table is not None
    for r in range(block.table.rows):
        yield [w for c in block.table.cells if c.row == r for w in c.text.split()]


@settings(max_examples=300, deadline=None)
@given(_documents())
def test_chunking_never_cuts_a_row_keeps_every_word_once_in_order_and_the_budget(
    document: tuple[list[DocumentPage], int],
) -> None:
    pages, budget = document
    chunks: list[Chunk] = list(chunk_document(pages, max_tokens=budget))
    body = [b for p in pages for b in p.blocks if b.kind not in FURNITURE]
    rows = [row for b in body if b.table is not None for row in _rows(b) if row]
    headers = {w for b in body if b.table is not None for row in list(_rows(b))[:1] for w in row}
    expected = [w for b in body for w in (b.text.split() if b.table is None
                                           else [w for row in _rows(b) for w in row])]  # fmt: skip
    seen: list[str] = []
    for chunk in chunks:
        assert chunk.tokens == count_tokens(chunk.text) == len(chunk.text.split())
        words = [w for w in chunk.text.split() if w != "|"]  # a row's cells are joined by |
        # A row is in a chunk whole, its words side by side, or not at all.
        for row in rows:
            present = [w for w in row if w in words]
            if present:
                assert present == row
                start = words.index(row[0])
                assert words[start : start + len(row)] == row
        # Over the budget only a single row (nothing else: no header repeated beside it).
        if chunk.tokens > budget:
            assert any(words == row for row in rows), chunk.text
        new = [w for w in words if w not in seen]
        repeated = [w for w in words if w in seen]
        assert set(repeated) <= headers  # only a table's header rows come again
        seen += new
        assert all(not c.isspace() for c in chunk.text[:1])
    # Every word of every block but the furniture once, in reading order.
    assert seen == expected
    assert [c.index for c in chunks] == list(range(len(chunks)))
