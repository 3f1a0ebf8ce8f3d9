"""What the commands print for people: one compact block per DocumentResult, and consumer
lag one line per group and topic (or per partition), each within 80 columns.

`pagestream up`, `results` and `lag` print through these functions, so a result or a
lag reading looks the same whichever command shows it. A full DocumentResult is long
(every OCR box is in it): the block keeps what a reader checks first (status, type,
fields, the start of the Markdown, errors) and `--json` gives the whole record. Lines
are plain text printed without markup, so a field value or a topic name is shown as
it is, and they are laid out by hand rather than as rich tables because a table squeezed
into a narrow terminal cuts its cells with '…'.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby

from pydantic import BaseModel
from rich.console import Console

from schemas import DocumentResult
from schemas.extraction import GenericFields
from schemas.results import document_markdown
from streams.admin.lag import GroupLag, PartitionLag

MARKDOWN_LINES = 8  # of an OCR result's Markdown: enough to recognise the document and a table
FIELD_LINES = 12  # labelled values of a generic document; --json has them all
_VALUE_CHARS = 60  # of a field value or a Markdown line; the block stays within 80 columns
_LABEL = 10  # width of the labels column of a result block


def print_result(console: Console, result: DocumentResult, *, as_json: bool = False) -> None:
    """The result as a compact block (a heading line and indented details), or with
    `as_json` the full record on one line."""
    if as_json:
        console.print(result.model_dump_json(), markup=False, highlight=False, soft_wrap=True)
        return
    heading, *details = result_lines(result)
    console.print(heading, style="bold", markup=False, highlight=False)
    for line in details:
        console.print(line, markup=False, highlight=False)


def result_lines(result: DocumentResult) -> list[str]:
    """The block of `print_result`: `<doc_id>: <operation> -> <status>`, then the details."""
    rows: list[tuple[str, list[str]]] = []
    if result.document_type is not None:
        conf = "" if result.confidence is None else f", confidence {result.confidence:.2f}"
        rows.append(("type", [f"{result.document_type.value}{conf}"]))
    rows.append(("pages", [_pages(result)]))
    if result.image_correction not in (None, "none"):
        rows.append(("image", [str(result.image_correction)]))
    if result.fields is not None:
        rows.append(("fields", _fields(result.fields) or ["(none found)"]))
    markdown = _markdown_preview(result)
    if markdown:
        rows.append(("markdown", markdown))
    errors = _errors(result)
    if errors:
        rows.append(("errors", errors))
    lines = [f"{result.doc_id}: {result.operation.value} -> {result.status}"]
    for label, values in rows:
        for i, value in enumerate(values):
            lines.append(f"  {label if i == 0 else '':<{_LABEL}}{value}")
    return lines


def _pages(result: DocumentResult) -> str:
    """The page count, and for OCR what read the pages (EasyOCR, the text layer, a VLM)."""
    text = str(result.page_count)
    by_source: dict[str, list[int]] = {}
    for page in result.pages:
        if page.ocr is not None:
            by_source.setdefault(page.ocr.source or "unknown", []).append(page.page_no)
    if by_source:
        read = ", ".join(f"{s} ({_page_span(nos)})" for s, nos in sorted(by_source.items()))
        text += f", read by {read}"
    return text


def _page_span(page_nos: list[int]) -> str:
    """`pages 1-3, 5` from [1, 2, 3, 5]."""
    spans = []
    for _, run in groupby(enumerate(page_nos), key=lambda item: item[1] - item[0]):
        nos = [n for _, n in run]
        spans.append(str(nos[0]) if len(nos) == 1 else f"{nos[0]}-{nos[-1]}")
    return ("page " if len(page_nos) == 1 else "pages ") + ", ".join(spans)


def _fields(fields: BaseModel) -> list[str]:
    if isinstance(fields, GenericFields):
        pairs = [(kv.key, kv.value) for kv in fields.fields]
    else:
        pairs = [(k, str(v)) for k, v in fields.model_dump(exclude_none=True).items()]
    lines = [_clip(f"{key}: {value}") for key, value in pairs[:FIELD_LINES]]
    if len(pairs) > FIELD_LINES:
        lines.append(f"({len(pairs) - FIELD_LINES} more: --json for all)")
    return lines


def _markdown_preview(result: DocumentResult) -> list[str]:
    markdown = result.markdown
    if markdown is None and result.markdown_ref is not None:
        return ["(in the blob store: `pagestream results` fetches it)"]
    if markdown is None and any(p.ocr is not None for p in result.pages):
        markdown = document_markdown(result.pages)
    if markdown is None:
        return []
    lines = [line for line in markdown.splitlines() if line.strip()]
    shown = [_clip(line) for line in lines[:MARKDOWN_LINES]]
    if len(lines) > MARKDOWN_LINES:
        shown.append(f"({len(lines) - MARKDOWN_LINES} more lines: --json or --markdown-out)")
    return shown


def _errors(result: DocumentResult) -> list[str]:
    """The document's errors, and any page error they do not already name."""
    errors = list(result.errors)
    for page in result.pages:
        line = f"page {page.page_no}: {page.error}"
        if page.error and line not in errors:
            errors.append(line)
    return [_clip(e) for e in errors]


def _clip(text: str, chars: int = _VALUE_CHARS) -> str:
    """One line of at most `chars` characters (a value may hold newlines)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 3] + "..."


# ---- lag -------------------------------------------------------------------------


def print_lag(console: Console, groups: list[GroupLag], *, partitions: bool = False) -> None:
    """Per group a line with its total lag, then one line per topic (`partitions`: per
    partition, under a line naming the topic)."""
    if not groups:
        console.print("no consumer groups")
        return
    for line, bold in lag_lines(groups, partitions=partitions):
        console.print(line, style="bold" if bold else None, markup=False, highlight=False)


def lag_lines(groups: list[GroupLag], *, partitions: bool = False) -> list[tuple[str, bool]]:
    """The lines of `print_lag`, each with whether it is a heading."""
    width = max([len("topic")] + [len(p.topic) for g in groups for p in g.partitions])
    lines: list[tuple[str, bool]] = []
    for g in groups:
        lines.append((f"group {g.group} ({g.state}), total lag {g.total_lag} records", True))
        by_topic = [(t, list(ps)) for t, ps in groupby(g.partitions, key=lambda p: p.topic)]
        if not by_topic:
            lines.append(("  (no partitions)", False))
            continue
        if partitions:
            lines.append((_PARTITION_ROW.format("partition", "committed", "log end", "lag",
                                                "records", "consumer"), False))  # fmt: skip
            for topic, parts in by_topic:
                lines.append((f"  {topic}", False))
                lines.extend((_partition_row(p), False) for p in parts)
        else:
            lines.append((_topic_row("topic", "partitions", "lag", "status", width), False))
            for topic, parts in by_topic:
                lag = "-" if _never_committed(parts) else str(sum(p.behind for p in parts))
                lines.append((_topic_row(topic, str(len(parts)), lag, _status(parts), width),
                              False))  # fmt: skip
    return lines


def _topic_row(topic: str, parts: str, lag: str, status: str, width: int) -> str:
    # 79 columns with faust's changelog topic (41 characters) and "not committed".
    return f"  {topic:<{width}}  {parts:>10}  {lag:>7}  {status}"


_PARTITION_ROW = "  {:>9}  {:>9}  {:>9}  {:>8}  {:>8}  {}"


def _partition_row(p: PartitionLag) -> str:
    def num(value: int | None) -> str:
        return "-" if value is None else str(value)

    # The member id's tail (a UUID's last group) tells the group's consumers apart;
    # `--json` has the whole id, host and client id.
    consumer = "-" if not p.consumer_id else p.consumer_id[-12:]
    return _PARTITION_ROW.format(p.partition, num(p.committed), p.log_end, num(p.lag),
                                 num(p.records), consumer)  # fmt: skip


def _never_committed(parts: Iterable[PartitionLag]) -> bool:
    # faust's changelog partitions: assigned through the group, read without commits.
    return all(p.committed is None and p.records is None for p in parts)


def _status(parts: list[PartitionLag]) -> str:
    if _never_committed(parts):
        return "not committed"
    lagging = [p for p in parts if p.behind > 0]
    if not lagging:
        return "caught up"
    return "behind" if any(p.consumer_id for p in lagging) else "no consumer"
