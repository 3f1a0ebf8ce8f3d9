"""Running heads and folios of pages read from pixels (reading/furniture.py), alone and
through the layout reader."""

from __future__ import annotations

import pytest

from reading import layout
from reading.furniture import split_furniture
from schemas.pages import OcrBox

WIDTH, HEIGHT = 1000, 1400
LINE = 24  # pixels: a line's height on this page
BODY = [
    "any was very trifling. Since the use of bones has, however, become general, the",
    "turnip crop has been, in many instances, ten-fold, and in few less than four or",
    "five-fold its former bulk. All the succeeding crops of grain and seeds have been",
    "amazingly increased, and, upon the four or five-shift system, there is no doubt",
]


def _line(text: str, x0: float, y0: float, x1: float | None = None) -> OcrBox:
    x1 = x1 if x1 is not None else x0 + 13 * len(text)
    return OcrBox(text=text, confidence=0.9,
                  box=[(x0, y0), (x1, y0), (x1, y0 + LINE), (x0, y0 + LINE)])  # fmt: skip


def _body(top: float = 160) -> list[OcrBox]:
    return [_line(text, 80, top + i * 1.5 * LINE) for i, text in enumerate(BODY)]


def _book_head(y: float = 50) -> list[OcrBox]:
    """A book's running head: folio, title, chapter, on one row in the top margin."""
    return [_line("400", 80, y), _line("BRITISH HUSBANDRY.", 380, y), _line("[Ch. XIX.", 800, y)]


def _texts(lines: list[OcrBox]) -> list[str]:
    return [line.text for line in lines]


def test_a_book_s_running_head_with_its_folio_is_furniture() -> None:
    page = split_furniture(_book_head() + _body(), HEIGHT)
    assert sorted(_texts(page.head)) == ["400", "BRITISH HUSBANDRY.", "[Ch. XIX."]
    assert _texts(page.body) == BODY and page.foot == []


@pytest.mark.parametrize("folio", ["17", "- 17 -", "Page 17", "17 / 240", "xiv", "(17)"])
def test_a_folio_alone_at_the_foot_is_furniture(folio: str) -> None:
    page = split_furniture([*_body(), _line(folio, 480, HEIGHT - 60)], HEIGHT)
    assert _texts(page.foot) == [folio] and _texts(page.body) == BODY


def test_what_a_browser_prints_round_a_web_page_is_furniture() -> None:
    head = [_line("3/4/14, 10:23 AM", 40, 20), _line("Optical character recognition", 500, 20)]
    foot = [
        _line("https://en.wikipedia.org/wiki/OCR", 40, HEIGHT - 40),
        _line("1/9", 900, HEIGHT - 40),
    ]
    page = split_furniture(head + _body() + foot, HEIGHT)
    assert sorted(_texts(page.head)) == sorted(_texts(head))
    assert sorted(_texts(page.foot)) == sorted(_texts(foot))


@pytest.mark.parametrize(
    "first",
    [
        [_line("BRITISH HUSBANDRY", 300, 50)],  # a title: no folio
        [_line("12/03/2021", 700, 50)],  # a letter's date: no time beside it
        [_line("400", 80, 300)],  # a number below the top band
        [_line("2019", 300, 50), _line("2020", 500, 50), _line("2021", 700, 50)],  # a table
    ],
    ids=["title", "letter-date", "below-the-band", "table-head"],
)
def test_a_row_without_a_folio_in_the_band_stays_body(first: list[OcrBox]) -> None:
    page = split_furniture(first + _body(top=340), HEIGHT)
    assert page.head == [] and len(page.body) == len(BODY) + len(first)


def test_a_book_s_head_set_close_above_the_body_is_furniture() -> None:
    """Folio, title and chapter spread across the row: no gap needed (a book scan's
    running head sits 3 px above its body at 300 dpi)."""
    page = split_furniture(_book_head(y=50) + _body(top=50 + LINE + 3), HEIGHT)
    assert len(page.head) == 3 and _texts(page.body) == BODY


def test_a_numbered_line_set_close_to_the_body_stays_body() -> None:
    """A list item's number beside its text: no gap, and the row is a line of text."""
    item = [_line("1", 80, 50), _line("The first thing the committee found was", 110, 50)]
    page = split_furniture(item + _body(top=50 + LINE + 3), HEIGHT)
    assert page.head == []


def test_a_long_row_is_not_a_running_head() -> None:
    words = " ".join(["word"] * 13)
    page = split_furniture([_line("7", 40, 40), _line(words, 100, 40, 960), *_body()], HEIGHT)
    assert page.head == []


def test_a_page_of_one_row_is_all_body() -> None:
    page = split_furniture([_line("400", 80, 40), _line("BRITISH HUSBANDRY.", 380, 40)], HEIGHT)
    assert page.head == [] and page.foot == [] and len(page.body) == 2


def test_the_layout_reader_drops_the_head_keeps_it_marked_and_as_a_block() -> None:
    lines = _book_head() + _body()
    dropped = layout.read_lines(WIDTH, HEIGHT, lines, keep_headers=False)
    assert "HUSBANDRY" not in dropped.markdown and "400" not in dropped.markdown
    assert "turnip crop" in dropped.markdown
    kept = layout.read_lines(WIDTH, HEIGHT, lines, keep_headers=True)
    assert kept.markdown.startswith("<!-- page-header: 400 BRITISH HUSBANDRY. [Ch. XIX. -->")
    for reading in (dropped, kept):  # the document JSON keeps furniture either way
        head = reading.blocks[0]
        assert (head.kind, head.order, head.text) == (
            "page-header",
            0,
            "400 BRITISH HUSBANDRY. [Ch. XIX.",
        )
        assert head.box is not None and head.box[1] == 50 and head.box[3] == 50 + LINE
        assert [b.order for b in reading.blocks] == list(range(len(reading.blocks)))
