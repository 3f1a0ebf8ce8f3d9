"""bench.quality's scoring: each kind of check passing and failing on small Markdown,
the normalisation both sides go through, tables parsed from Markdown and HTML, character
error, and the shipped corpus' checks being well formed."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from bench.quality.checks import Check, best_ratio, cer, matches, normalize, plain_text, score
from bench.quality.corpus import load_corpus, spread
from bench.quality.tables import all_tables, html_tables, markdown_tables


def check(kind: str, **fields: Any) -> Check:
    return Check.from_json({"id": "t", "page": "p", "type": kind, **fields})


def passed(kind: str, markdown: str, **fields: Any) -> bool:
    return score(check(kind, **fields), markdown).passed


PAGE = """<!-- page 1 -->

# Annual **report**

The company's revenue grew in the *third* quarter, driven by new
customers in the north-
ern region.

Page 7 of 12
"""


def test_present_passes_on_the_text_and_fails_without_it() -> None:
    assert passed("present", PAGE, text="The company's revenue grew in the third quarter")
    assert not passed("present", PAGE, text="The company's profit fell")


def test_present_is_fuzzy_within_max_diffs_only() -> None:
    text = "The company's revenue grow in the third quarter"  # one letter off
    assert not passed("present", PAGE, text=text)
    assert passed("present", PAGE, text=text, max_diffs=1)


def test_present_respects_case_unless_told_not_to() -> None:
    assert not passed("present", PAGE, text="ANNUAL REPORT")
    assert passed("present", PAGE, text="ANNUAL REPORT", case_sensitive=False)


def test_present_does_not_pass_because_the_output_is_a_piece_of_the_text() -> None:
    # partial_ratio would find a short output inside the expected passage.
    assert not passed("present", "Annual", text="Annual report of the company")
    assert best_ratio("Annual report", "") == 0.0


def test_absent_passes_without_the_text_and_fails_with_it() -> None:
    assert passed("absent", PAGE, text="Downloaded from example.org")
    outcome = score(check("absent", text="Page 7 of 12"), PAGE)
    assert not outcome.passed
    assert "found" in outcome.why


def test_absent_can_look_at_the_end_of_the_page_only() -> None:
    markdown = "7 reasons to read on\n\nBody text.\n\n7"
    assert not passed("absent", markdown, text="7", last_n=5)
    assert passed("absent", markdown.removesuffix("7"), text="7", last_n=5)


def test_order_passes_when_before_comes_first() -> None:
    assert passed("order", PAGE, before="Annual report", after="northern region")
    outcome = score(check("order", before="northern region", after="Annual report"), PAGE)
    assert not outcome.passed
    assert "comes before" in outcome.why


def test_order_fails_naming_the_passage_not_found() -> None:
    outcome = score(check("order", before="Annual report", after="southern region"), PAGE)
    assert not outcome.passed
    assert "'after' not found" in outcome.why


def test_order_uses_any_occurrence_and_fuzzy_matches() -> None:
    markdown = "Summary. Results follow. Methods. Results again."
    assert passed("order", markdown, before="Methods", after="Results")
    assert passed("order", "Intro. Metods here. Resuts there.", before="Methods here",
                  after="Results there", max_diffs=1)  # fmt: skip
    found = matches("results", "results, then resolts, then results", 1)
    assert found == [0, 14, 28]


def test_normalize_whitespace_emphasis_headings_and_comments() -> None:
    assert normalize("<!-- page 2 -->\n## The  **bold**\n\tand *it*  _x_ __y__") == (
        "The bold and it x y"
    )
    assert normalize("a<br>b<b>c</b> [link](http://x) \\*escaped\\*") == "a bc link *escaped*"


def test_normalize_keeps_underscores_and_asterisks_inside_words() -> None:
    assert normalize("FUNCTION_ID and USER_NAME") == "FUNCTION_ID and USER_NAME"
    assert normalize("grant *USE and *ALLOBJ rights") == "grant *USE and *ALLOBJ rights"


def test_normalize_joins_words_hyphenated_at_a_line_end_only() -> None:
    assert normalize("infor-\nmation") == "information"
    assert normalize("north-\n  ern") == "northern"
    assert normalize("twenty-\nFive and well-known") == "twenty- Five and well-known"
    assert normalize("a dash\u2014\nthen") == "a dash- then"


def test_normalize_quotes_dashes_and_ligatures() -> None:
    assert normalize("\u201cconﬁguration\u201d \u2013 it\u2019s") == '"configuration" - it\'s'


TABLE_MD = """Table 1. Results

| Model | Year | Score |
|---|---|---|
| Alpha | 2019 | 0.91 |
| Beta | 2020 | 0.87 |
"""


@pytest.mark.parametrize(
    ("fields", "ok"),
    [
        ({"cell": "0.91", "left": "2019"}, True),
        ({"cell": "0.91", "right": "0.87"}, False),
        ({"cell": "2019", "right": "0.91", "down": "2020"}, True),
        ({"cell": "0.87", "up": "0.91"}, True),
        ({"cell": "0.87", "up": "0.88"}, False),
        ({"cell": "0.87", "top_heading": "Score"}, True),
        ({"cell": "0.87", "left_heading": "Beta"}, True),
        ({"cell": "0.87", "left_heading": "Alpha"}, False),
        ({"cell": "0.99"}, False),
    ],
)
def test_table_cells_and_their_neighbours_in_markdown(fields: dict[str, str], ok: bool) -> None:
    assert passed("table", TABLE_MD, **fields) is ok


def test_table_check_fails_when_the_output_has_no_table() -> None:
    outcome = score(check("table", cell="0.91", left="2019"), "Alpha 2019 0.91")
    assert not outcome.passed
    assert outcome.why == "no table in the output"


def test_markdown_table_needs_its_separator_row() -> None:
    assert markdown_tables("a | b\nc | d\n") == []
    (table,) = markdown_tables(TABLE_MD)
    assert table.text[(0, 0)] == "Model"
    assert table.text[(2, 2)] == "0.87"
    assert (0, 1) in table.headings and (2, 0) in table.headings


TABLE_HTML = """<table>
<thead><tr><th rowspan="2">Region</th><th colspan="2">Sales</th></tr>
<tr><th>2023</th><th>2024</th></tr></thead>
<tr><td>North</td><td>1,136</td><td>1,892</td></tr>
<tr><td>South</td><td>680</td><td>702</td></tr>
</table>"""


def test_html_table_with_spans_parsed_into_cells() -> None:
    (table,) = html_tables(TABLE_HTML)
    assert table.text[(0, 0)] == "Region" and table.text[(0, 1)] == "Sales"
    assert table.text[(1, 1)] == "2023" and table.text[(2, 2)] == "1,892"
    assert table.grid[1][0] == (0, 0)  # Region spans two rows
    assert table.grid[0][2] == (0, 1)  # Sales spans two columns
    assert {table.text[p] for p in table.up((1, 2))} == {"Sales"}
    assert {table.text[p] for p in table.right((0, 0))} == {"Sales", "2023"}


def test_table_checks_on_an_html_table() -> None:
    assert passed("table", TABLE_HTML, cell="680", up="1,136", right="702")
    assert passed("table", TABLE_HTML, cell="1,892", top_heading="2024")
    assert passed("table", TABLE_HTML, cell="702", left_heading="South")
    assert not passed("table", TABLE_HTML, cell="680", top_heading="2024")
    assert len(all_tables(TABLE_MD + TABLE_HTML)) == 2


def test_cer_is_zero_for_the_truth_and_ignores_markdown_syntax() -> None:
    truth = "Model Year\nAlpha 2019\n"
    assert cer("| **Model** | Year |\n|---|---|\n| Alpha | 2019 |", truth) == 0.0
    assert plain_text("# Title\n\n<b>x</b>") == "Title x"
    # An inline mark sits inside its word; a cell or a break parts words.
    assert plain_text("Shaffer<sup>1.</sup>, Grant") == "Shaffer1., Grant"
    assert plain_text("<td>a</td><td>b</td>c<br>d") == "a b c d"
    assert plain_text("x<code>y</code>z <a href='u'>link</a>s") == "xyz links"


def test_cer_counts_edits_over_the_truth_and_is_capped_at_one() -> None:
    assert cer("abcdefghiX", "abcdefghij") == pytest.approx(0.1)
    assert cer("", "abcdefghij") == 1.0
    assert cer("x" * 50, "abc") == 1.0


def test_check_from_json_refuses_unknown_fields_and_missing_text() -> None:
    with pytest.raises(ValueError, match="unknown fields"):
        Check.from_json({"id": "a", "page": "p", "type": "present", "text": "x", "nope": 1})
    with pytest.raises(ValueError, match="order needs"):
        Check.from_json({"id": "a", "page": "p", "type": "order", "before": "x"})
    with pytest.raises(ValueError, match="unknown type"):
        Check.from_json({"id": "a", "page": "p", "type": "math", "text": "x"})


def test_the_shipped_corpus_is_well_formed() -> None:
    pages, checks, truths = load_corpus()
    kinds = Counter(c.type for c in checks)
    assert len(pages) >= 40
    assert sum(kinds[k] for k in ("present", "absent", "order", "table")) >= 120
    assert kinds["table"] >= 20 and kinds["absent"] >= 20 and kinds["order"] >= 15
    assert {p.origin for p in pages} == {"digital", "scan"}
    assert {p.rotation for p in pages} == {0, 90, 180, 270}
    assert all(text.strip() for text in truths.values())
    assert len({p.kind for p in spread(pages, 8)}) == 8  # a short trial sees every kind
