"""Born-digital pages whose text runs sideways (reading/upright.py): a page set landscape
through /Rotate and a page printed turned are read upright, their tables found, their
blocks in the upright page's frame; a page turned both ways is left as it is."""

from __future__ import annotations

import pymupdf
import pytest

from reading.upright import text_turn, turned
from schemas import Layout
from streams.media.pdf import read_text_layer
from synth.layout_pages import sideways
from tests.support.hard_pages import BODY, RUNNING_HEAD, TABLE, report_page

LIMITS = {"dpi": 150, "max_pages": 10, "max_pixels": 40_000_000}


def _turn(pdf: bytes) -> tuple[int | None, int | None]:
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        return text_turn(doc[0]), turned(doc[0])


def test_how_far_a_page_is_from_upright() -> None:
    assert _turn(report_page()) == (0, None)
    assert _turn(sideways(report_page())) == (90, 90)
    # /Rotate turns the page, not its text in its own frame.
    assert _turn(sideways(report_page(), rotate_entry=True)) == (0, 90)
    # Printed sideways and set upright again through /Rotate: upright as displayed.
    assert _turn(_rotated(sideways(report_page()), 270)) == (90, 0)
    # Half of it one way, half the other: no turn makes it upright.
    assert _turn(report_page(turned_body=True)) == (None, None)


def _rotated(pdf: bytes, degrees: int) -> bytes:
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        doc[0].set_rotation(degrees)
        return bytes(doc.tobytes())


@pytest.mark.parametrize(
    ("pdf", "rotation"),
    [(sideways(report_page()), 90), (sideways(report_page(), rotate_entry=True), 90),
     (_rotated(sideways(report_page()), 270), 0)],
    ids=["printed-sideways", "rotate-entry", "both-undone"],
)  # fmt: skip
def test_a_turned_page_is_read_upright_with_its_table(pdf: bytes, rotation: int) -> None:
    (page,) = read_text_layer(pdf, **LIMITS, layout=Layout.model)
    markdown = page.result.markdown or ""
    assert page.result.warnings == []
    assert " ".join(BODY) in " ".join(markdown.split()) and RUNNING_HEAD not in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    assert "|" + "|".join(TABLE[1]) + "|" in rows
    layout = page.result.layout
    assert layout is not None and layout.rotation == rotation
    # The blocks' frame is the upright page: portrait, as the report was written.
    assert layout.width is not None and layout.height is not None
    assert layout.width < layout.height
    (table,) = [b for b in layout.blocks if b.kind == "table"]
    assert table.box is not None and table.box[2] <= layout.width
