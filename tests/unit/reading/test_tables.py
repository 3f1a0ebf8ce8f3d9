"""Repairs of the table finder's HTML tables (reading/tables.py), on the shapes it
got wrong in bench/quality."""

from __future__ import annotations

from reading.tables import parse, repaired

MERGED_ROWS = (
    '<table><tr><th rowspan="2">#</th><th rowspan="2">Language</th><th colspan="2">TEDs</th>'
    "</tr><tr><th>simple</th><th>all</th></tr>"
    "<tr><td>6</td><td>OTSL<br/>HTML</td><td>0.965<br/>0.969</td><td>0.955<br/>0.955</td></tr>"
    "</table>"
)


def test_a_row_of_two_line_cells_becomes_two_rows_its_one_line_cells_spanning_them() -> None:
    rows = parse(repaired(MERGED_ROWS))
    assert rows is not None
    assert [(c.html, c.rowspan) for c in rows[2]] == [("6", 2), ("OTSL", 1), ("0.965", 1),
                                                      ("0.955", 1)]  # fmt: skip
    assert [c.html for c in rows[3]] == ["HTML", "0.969", "0.955"]


def test_a_row_with_one_wrapped_cell_is_left_alone() -> None:
    table = ("<table><tr><th>Item</th><th>A</th><th>B</th></tr>"
             "<tr><td>Net income<br/>attributable</td><td>1</td><td>2</td></tr>"
             "<tr><td>x</td><td>3</td><td>4</td></tr></table>")  # fmt: skip
    assert "|Net income<br>attributable|1|2|" in repaired(table)


def test_heading_only_columns_merge_into_an_empty_heading_or_the_words_they_read_on_to() -> None:
    table = ("<table><tr><th>Year</th><th></th><th>Freshwater</th><th>Ducks</th></tr>"
             "<tr><td></td><td>2019</td><td></td><td>120</td></tr>"
             "<tr><td></td><td>2020</td><td></td><td>135</td></tr></table>")  # fmt: skip
    md = repaired(table, lambda left, right: (left, right) == ("Freshwater", "Ducks"))
    assert md.splitlines() == ["|Year|Freshwater Ducks|", "|---|---|", "|2019|120|", "|2020|135|"]


def test_a_column_nobody_marks_stays_a_column() -> None:
    table = ("<table><tr><th>Action</th><th>JOBCTL</th><th>SECADM</th><th>SQLADM</th></tr>"
             "<tr><td>SET DEGREE</td><td>X</td><td></td><td>X</td></tr>"
             "<tr><td>CHGQRYA</td><td>X</td><td></td><td>X</td></tr></table>")  # fmt: skip
    assert repaired(table).splitlines()[0] == "|Action|JOBCTL|SECADM|SQLADM|"


def test_spanning_headings_stay_html_and_pipes_are_escaped_in_markdown() -> None:
    spanning = ('<table><tr><th></th><th colspan="2">Year Ended</th></tr>'
                "<tr><td>Total</td><td>1</td><td>2</td></tr></table>")  # fmt: skip
    assert repaired(spanning) == spanning
    assert repaired("<table><tr><th>a|b</th></tr></table>") == "|a\\|b|\n|---|"
