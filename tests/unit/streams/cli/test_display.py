"""What `pagestream up`, `results` and `lag` print: a compact block per result, and lag one
line per group and topic, each whole within an 80-column terminal."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import UTC, datetime

from rich.console import Console

from schemas import DocumentResult, DocumentType, Operation
from schemas.extraction import ExtractionResult, RGFields
from schemas.pages import OcrBox, OcrResult
from schemas.results import PageResult, document_markdown
from streams.admin.lag import GroupLag, PartitionLag
from streams.cli.display import MARKDOWN_LINES, print_lag, print_result, result_lines

NOW = datetime(2026, 11, 25, 20, 0, tzinfo=UTC)
CHANGELOG = "pagestream-agents-deliver-pages-changelog"  # the longest default topic name


def _printed(show: Callable[[Console], None], width: int = 80) -> list[str]:
    """What `show` prints on a terminal `width` columns wide."""
    buffer = io.StringIO()
    show(Console(width=width, file=buffer, color_system=None))
    return buffer.getvalue().splitlines()


def _extract_result() -> DocumentResult:
    fields = RGFields(name="MARIA DA SILVA", cpf="123.456.789-09", birth_date="1990-05-17")
    return DocumentResult(
        doc_id="sample-1-extract-rg-back",
        operation=Operation.extract,
        status="completed",
        page_count=1,
        pages=[
            PageResult(
                page_no=1,
                extraction=ExtractionResult(
                    document_type=DocumentType.rg_back, fields=fields, engine="rules"
                ),
            )
        ],
        document_type=DocumentType.rg_back,
        confidence=0.973,
        image_correction="rotated 90 clockwise",
        fields=fields,
        submitted_at=NOW,
        completed_at=NOW,
    )


def _ocr_page(page_no: int, heading: str, lines: int) -> PageResult:
    body = "\n\n".join(f"Paragraph {i} of {heading}." for i in range(lines))
    boxes = [OcrBox(text=f"line {i}", confidence=0.9, box=[(10, 20 * i), (300, 20 * i),
                                                           (300, 20 * i + 15), (10, 20 * i + 15)])
             for i in range(lines)]  # fmt: skip
    ocr = OcrResult(text=body, confidence=0.95, boxes=boxes, source="text_layer",
                    markdown=f"# {heading}\n\n{body}")  # fmt: skip
    return PageResult(page_no=page_no, ocr=ocr)


def _ocr_result() -> DocumentResult:
    pages = [_ocr_page(1, "Section 1", 8), _ocr_page(2, "Section 2", 8)]
    return DocumentResult(
        doc_id="sample-1-ocr-born-digital-report",
        operation=Operation.ocr,
        status="completed",
        page_count=2,
        pages=pages,
        markdown=document_markdown(pages),
        submitted_at=NOW,
        completed_at=NOW,
    )


def test_an_extract_result_is_a_heading_and_one_line_per_field() -> None:
    lines = _printed(lambda c: print_result(c, _extract_result()))
    assert lines[0] == "sample-1-extract-rg-back: extract -> completed"
    body = "\n".join(lines[1:])
    assert "type      rg_back, confidence 0.97" in body
    assert "image     rotated 90 clockwise" in body
    assert "fields    name: MARIA DA SILVA" in body
    assert [ln.strip() for ln in lines if "123.456.789-09" in ln] == ["cpf: 123.456.789-09"]
    assert "errors" not in body
    assert len(lines) == 7  # heading, type, pages, image, three fields


def test_an_ocr_result_shows_the_first_markdown_lines_and_no_boxes() -> None:
    result = _ocr_result()
    lines = _printed(lambda c: print_result(c, result))
    assert lines[0] == "sample-1-ocr-born-digital-report: ocr -> completed"
    assert "  pages     2, read by text_layer (pages 1-2)" in lines
    start = lines.index("  markdown  <!-- page 1 -->")
    assert [ln.strip() for ln in lines[start + 1 : start + 5]] == [
        "# Section 1", "Paragraph 0 of Section 1.", "Paragraph 1 of Section 1.",
        "Paragraph 2 of Section 1.",
    ]  # fmt: skip
    markdown_lines = [ln for ln in (result.markdown or "").splitlines() if ln.strip()]
    assert (
        lines[start + MARKDOWN_LINES].strip()
        == f"({len(markdown_lines) - MARKDOWN_LINES} more lines: --json or --markdown-out)"
    )
    assert len(lines) == start + MARKDOWN_LINES + 1
    assert "300" not in "\n".join(lines)  # no box coordinate
    # --json: the whole record, on one line.
    (full,) = _printed(lambda c: print_result(c, result, as_json=True))
    assert DocumentResult.model_validate_json(full) == result


def test_a_partial_result_lists_its_page_errors_once() -> None:
    result = _ocr_result().model_copy(
        update={
            "status": "partial",
            "page_count": 3,
            "pages": [*_ocr_result().pages, PageResult(page_no=3, error="ocr: timed out")],
            "markdown": None,
            "errors": ["page 3: ocr: timed out", "page 1: text layer doubtful"],
        }
    )
    lines = result_lines(result)
    assert lines[0].endswith(": ocr -> partial")
    start = next(i for i, ln in enumerate(lines) if ln.startswith("  errors"))
    assert [ln[12:] for ln in lines[start:]] == [
        "page 3: ocr: timed out",
        "page 1: text layer doubtful",
    ]
    # A page error the document's errors do not name is shown too.
    quiet = result.model_copy(update={"errors": []})
    assert result_lines(quiet)[-1] == "  errors    page 3: ocr: timed out"
    # Without the document's Markdown the pages' own make the preview.
    assert "  markdown  <!-- page 1 -->" in lines


def _partitions(group: str, topic: str, n: int, *, lag: int = 0, consumer: bool = True,
                committed: bool = True) -> list[PartitionLag]:  # fmt: skip
    member = "pagestream-agents-0d4f6a2e-1c3b-4e5f-8a9b-7c6d5e4f3a2b"
    return [
        PartitionLag(group, topic, p, 120 if committed else None, 120 + lag,
                     lag if committed else None,
                     consumer_id=member if consumer else None,
                     records=lag if committed else None,
                     position=120 if committed else None)
        for p in range(n)
    ]  # fmt: skip


def _groups() -> list[GroupLag]:
    agents = "pagestream-agents"
    topics = ["docs.raw", "docs.oriented", "docs.classified", "docs.extracted",
              "docs.recognized", "docs.pages.done"]  # fmt: skip
    rows = [p for t in topics for p in _partitions(agents, t, 6, lag=2 if t == "docs.raw" else 0)]
    rows += _partitions(agents, CHANGELOG, 6, committed=False)
    gpu = "pagestream-gpu"
    gpu_rows = [p for t in ("gpu.classify", "gpu.orient") for p in _partitions(gpu, t, 6)]
    gpu_rows += _partitions(gpu, "gpu.ocr", 6, lag=1000000, consumer=False)
    return [
        GroupLag(agents, "Stable", sorted(rows, key=lambda p: (p.topic, p.partition)), 1),
        GroupLag(gpu, "Empty", sorted(gpu_rows, key=lambda p: (p.topic, p.partition)), 0),
    ]


def _whole(lines: list[str]) -> None:
    for line in lines:
        assert len(line) <= 80 and "…" not in line, line


def test_lag_is_one_line_per_group_and_topic_within_80_columns() -> None:
    groups = _groups()
    lines = _printed(lambda c: print_lag(c, groups))
    _whole(lines)
    topics = {(g.group, p.topic) for g in groups for p in g.partitions}
    # A heading and a column line per group, then one line per topic: nothing wrapped.
    assert len(lines) == 2 * len(groups) + len(topics)
    assert lines[0] == "group pagestream-agents (Stable), total lag 12 records"
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines if ln.startswith("  ")}
    assert rows["docs.raw"] == ["6", "12", "behind"]
    assert rows["docs.oriented"] == ["6", "0", "caught", "up"]
    assert rows[CHANGELOG] == ["6", "-", "not", "committed"]
    assert rows["gpu.ocr"] == ["6", "6000000", "no", "consumer"]
    assert "group pagestream-gpu (Empty), total lag 6000000 records" in lines


def test_lag_per_partition_fits_80_columns_too() -> None:
    groups = _groups()
    lines = _printed(lambda c: print_lag(c, groups, partitions=True))
    _whole(lines)
    topics = {(g.group, p.topic) for g in groups for p in g.partitions}
    partitions = sum(len(g.partitions) for g in groups)
    assert len(lines) == 2 * len(groups) + len(topics) + partitions
    assert lines[1].split() == ["partition", "committed", "log", "end", "lag", "records",
                                "consumer"]  # fmt: skip
    assert lines[2] == "  docs.classified"
    assert lines[3].split() == ["0", "120", "120", "0", "0", "7c6d5e4f3a2b"]
    changelog = lines[lines.index(f"  {CHANGELOG}") + 1]
    assert changelog.split() == ["0", "-", "120", "-", "-", "7c6d5e4f3a2b"]


def test_no_groups_says_so() -> None:
    assert _printed(lambda c: print_lag(c, [])) == ["no consumer groups"]
