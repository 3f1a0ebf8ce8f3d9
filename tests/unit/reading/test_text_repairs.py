"""Repairs of a text layer's parse: furniture rows, words drawn without spaces, drop caps,
and a form's tables read as text; on generated pages whose parts are known."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pymupdf
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reading import layout
from reading.text_repairs import (
    DropCap,
    drop_caps,
    furniture_rows,
    raw_lines,
    respace,
    spaced_words,
    with_drop_caps,
)
from schemas import Layout
from streams.media.pdf import read_text_layer
from tests.support.hard_pages import report_page

_FONT = pymupdf.Font("helv")


def _glyphs(page: Any, x: float, y: float, words: list[str], size: float, gap: float) -> None:
    """`words` drawn glyph by glyph from (x, y), `gap` points apart and no space between."""
    for word in words:
        for char in word:
            page.insert_text((x, y), char, fontname="helv", fontsize=size)
            x += _FONT.text_length(char, fontsize=size)
        x += gap


def test_gaps_where_a_page_drew_no_spaces_become_spaces() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    _glyphs(page, 72, 100, ["Table", "1"], 9, 1.1)
    _glyphs(page, 120, 100, ["Composition", "of", "the", "data."], 9, 1.1)
    _glyphs(page, 72, 130, ["CAPS"], 9, 0)  # an ordinary word
    # letter-spaced: every gap wide, none a space
    for i, char in enumerate("SPACED"):
        page.insert_text((72 + i * 9, 160), char, fontname="helv", fontsize=9)
    spaced = spaced_words(raw_lines(page))
    assert spaced == {"Table1": "Table 1", "Compositionofthedata.": "Composition of the data.",
                      "Compositionofthedata": "Composition of the data"}  # fmt: skip
    markdown = "**Table1 Compositionofthedata**. CAPS S P A C E D"
    assert respace(markdown, spaced) == "**Table 1 Composition of the data**. CAPS S P A C E D"
    # a block's text sets the closing "." apart
    assert respace("Compositionofthedata .", spaced) == "Composition of the data ."


def test_respacing_keeps_style_marks_and_leaves_other_words() -> None:
    spaced = {"aword": "a word", "aword,": "a word,", "x_y": "x_ y"}
    assert respace("_aword_, <sup>aword</sup> awords aword", spaced) == (
        "_a word_, <sup>a word</sup> awords a word"
    )
    assert respace("x_y", spaced) == "x_ y"  # an underscore of the text layer's own
    assert respace("aword", {}) == "aword"


def _drop_cap_page() -> Any:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((50, 126), "O", fontname="tiro", fontsize=36)
    lines = ["ver the past three decades", "pressure from non-govern-", "mental groups and the",
             "United Nations, has made"]  # fmt: skip
    for i, line in enumerate(lines):
        page.insert_text((78, 106 + i * 10), line, fontname="tiro", fontsize=9)
    return page


def test_a_drop_cap_is_found_with_the_lines_beside_it() -> None:
    (cap,) = drop_caps(raw_lines(_drop_cap_page()))
    assert cap.letter == "O"
    assert cap.lines[:3] == ["ver the past three decades", "pressure from non-govern-",
                             "mental groups and the"]  # fmt: skip


def test_a_drop_cap_goes_back_before_its_paragraph() -> None:
    cap = DropCap("O", ["ver the past three decades", "pressure from non-govern-",
                        "mental groups and the"])  # fmt: skip
    between = "ver the past three decades pressure from non-governO mental groups and the"
    before = "O\n\nver the past three decades pressure from non-governmental groups and the"
    right = "Over the past three decades pressure from non-governmental groups and the"
    assert with_drop_caps(between, [cap]) == right
    assert with_drop_caps(before, [cap]) == right
    assert with_drop_caps(right, [cap]) == right  # already in place
    twice = f"{between} {between}"  # found twice: which one is unknown
    assert with_drop_caps(twice, [cap]) == twice


def test_a_drop_cap_found_nowhere_or_twice_leaves_the_markdown_alone() -> None:
    # "n 1990" inside "In 1990": the opening is not there; the cap "I" is a word elsewhere.
    cap = DropCap("I", ["n 1990 the company", "grew fast and"], glue=True)
    placed = "In 1990 the company grew fast and I never looked back."
    assert with_drop_caps(placed, [cap]) == placed
    # the opening twice: which one the cap begins is unknown
    cap = DropCap("A", ["long time ago", "there lived"], glue=False)
    twice = "# long time ago\n\nA\n\nlong time ago there lived"
    assert with_drop_caps(twice, [cap]) == twice
    # a replacement built from the page's text is not a pattern
    cap = DropCap("O", ["ver the C:\\Users\\", "path goes"], glue=True)
    md = r"ver the C:\Users\O path goes"
    assert with_drop_caps(md, [cap]) == r"Over the C:\Users\ path goes"


def test_a_cap_that_is_a_word_keeps_its_space_and_a_capitalised_line_has_no_cap() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    for x, y, letter, line in ((50, 126, "A", "long time ago there"), (50, 326, "O", "livro de"),
                               (50, 526, "A", "Abstract: a summary")):  # fmt: skip
        page.insert_text((x, y), letter, fontname="tiro", fontsize=36)
        for i, text in enumerate((line, "lived a king who", "ruled the land")):
            page.insert_text((x + 28, y - 20 + i * 10), text, fontname="tiro", fontsize=9)
    caps = drop_caps(raw_lines(page))
    assert [(c.letter, c.lines[0], c.glue) for c in caps] == [
        ("A", "long time ago there", False), ("O", "livro de", False)]  # fmt: skip
    md = "long time ago there lived a king who A ruled the land"
    assert with_drop_caps(md, caps[:1]) == "A long time ago there lived a king who ruled the land"


def test_the_document_jsons_blocks_get_the_markdowns_repairs() -> None:
    page = _drop_cap_page()
    # "over" on the page: the cap "O" (a Portuguese word too) is glued to "ver"
    page.insert_text((78, 170), "Then it was over, and a paragraph closed the page.",
                     fontname="tiro", fontsize=9)  # fmt: skip
    _glyphs(page, 78, 200, ["Table", "1"], 9, 1.1)
    _glyphs(page, 120, 200, ["Composition", "of", "the", "data."], 9, 1.1)
    reading = layout.layout_pages(page.parent, [0], keep_headers=False)[1]
    texts = " ".join(b.text or "" for b in reading.blocks)
    for read in (reading.markdown, texts):
        assert "Over the past three decades" in read
        assert "non-governmental" in read
        assert "Table 1 Composition of the data" in read


def _box(kind: str, y0: float, y1: float, lines: int = 1) -> Any:
    return SimpleNamespace(boxclass=kind, y0=y0, y1=y1, textlines=[{}] * lines)


def test_text_on_a_footers_row_in_the_bottom_band_is_furniture() -> None:
    revision, body = _box("text", 707, 714), _box("text", 651, 695, lines=4)
    lone = _box("text", 707, 714)
    page = SimpleNamespace(boxes=[body, revision, _box("page-footer", 707, 714)])
    assert furniture_rows(page, 792) == 1
    assert (revision.boxclass, body.boxclass) == ("page-footer", "text")
    # no footer on its row, or the row above the band: text stays text
    assert furniture_rows(SimpleNamespace(boxes=[lone]), 792) == 0
    high = _box("text", 600, 607)
    page = SimpleNamespace(boxes=[high, _box("page-footer", 600, 607)])
    assert furniture_rows(page, 792) == 0
    assert high.boxclass == "text"


def _tables(markdown: str) -> bool:
    return any(line.startswith("|") for line in markdown.splitlines()) or "<table" in markdown


@pytest.mark.parametrize(("as_table", "as_text", "read_as_text"),
                         [(0.90, 1.0, True), (0.90, 0.93, False), (0.97, 1.0, False)])  # fmt: skip
def test_tables_that_lose_words_are_read_as_text_when_that_keeps_clearly_more(
    monkeypatch: pytest.MonkeyPatch, as_table: float, as_text: float, read_as_text: bool
) -> None:
    # The report page's ruled table, given shares of words kept as a form's would have.
    monkeypatch.setattr(
        layout, "word_share", lambda markdown, page: as_table if _tables(markdown) else as_text
    )
    (page,) = read_text_layer(report_page(), dpi=150, max_pages=10, max_pixels=40_000_000,
                              layout=Layout.model)  # fmt: skip
    markdown = page.result.markdown or ""
    assert _tables(markdown) is not read_as_text
    assert all(word in markdown for word in ("Region", "North", "1,204", "12%"))
    noted = [w for w in page.result.warnings if w.startswith("tables read as text")]
    assert noted == (["tables read as text (as tables: 10% of words lost)"] if read_as_text else [])


@given(
    words=st.lists(st.text(alphabet="ab_*`<>/supx ,", min_size=1, max_size=12), max_size=8),
    spaced=st.dictionaries(
        st.text(alphabet="abx,_", min_size=2, max_size=6),
        st.integers(min_value=1, max_value=5),
        max_size=4,
    ),
)
def test_respacing_only_puts_spaces_in(words: list[str], spaced: dict[str, int]) -> None:
    # Each word of the map is given one space, at a position of its own.
    mapping = {w: w[: min(at, len(w) - 1)] + " " + w[min(at, len(w) - 1) :]
               for w, at in spaced.items()}  # fmt: skip
    text = " ".join(words)
    assert respace(text, mapping).replace(" ", "") == text.replace(" ", "")


_words = st.text(alphabet="aAbOo-\\ \n", min_size=1, max_size=8)


@given(
    markdown=st.text(alphabet="aAbOo-\\ \n(*", max_size=60),
    letter=st.sampled_from("AOb"),
    lines=st.lists(_words, min_size=1, max_size=4),
    glue=st.booleans(),
)
def test_a_drop_cap_only_moves_its_letter(
    markdown: str, letter: str, lines: list[str], glue: bool
) -> None:
    # Whatever the parse wrote: no error, and every character but spaces and a line's
    # end hyphen is kept, as many times.
    out = with_drop_caps(markdown, [DropCap(letter, lines, glue=glue)])

    def kept(text: str) -> list[str]:
        return sorted(c for c in text if not c.isspace() and c != "-")

    assert kept(out) == kept(markdown)
