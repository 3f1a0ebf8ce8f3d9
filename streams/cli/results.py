"""`pagestream results`: the latest result per document, as a user reads docs.results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from schemas import DocumentResult
from streams.blobs import BlobStore
from streams.cli.common import fail, out, settings
from streams.client.results import ResultsReader, ResultsUnavailableError, resolved, write_markdown


def register(app: typer.Typer) -> None:
    app.command()(results)


def results(
    doc_id: Annotated[list[str] | None, typer.Option("--doc-id", help="Repeatable.")] = None,
    follow: Annotated[bool, typer.Option(help="Keep printing results as they arrive.")] = False,
    wait: Annotated[
        float, typer.Option(min=0, help="Seconds to wait for the --doc-id results to arrive.")
    ] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="One DocumentResult per line.")] = False,
    markdown_out: Annotated[
        Path | None, typer.Option(help="Write <doc_id>.md here for OCR results.")
    ] = None,
) -> None:
    """The latest result of each document in docs.results (claim-checked parts fetched)."""
    s = settings()
    blobs = BlobStore.from_settings(s.blobs)
    try:
        reader = ResultsReader(s, doc_id)
    except ResultsUnavailableError as exc:
        fail(str(exc), 2)
    try:
        latest = reader.until_now()
        missing = set(doc_id or []) - set(latest)
        if missing and wait > 0:
            for result in reader.follow(timeout_s=wait):
                latest[result.doc_id] = result
                missing.discard(result.doc_id)
                if not missing:
                    break
        shown = [_show(resolved(r, blobs), as_json, markdown_out) for r in latest.values()]
        if not as_json:
            _table(shown)
        if follow:
            for result in reader.follow():
                _table([_show(resolved(result, blobs), as_json, markdown_out)], as_json)
    finally:
        reader.close()
    if missing:
        fail(f"no result yet for {', '.join(sorted(missing))}")


def _show(result: DocumentResult, as_json: bool, markdown_out: Path | None) -> DocumentResult:
    if as_json:
        out.print(result.model_dump_json(), markup=False, highlight=False, soft_wrap=True)
    path = None if markdown_out is None else write_markdown(result, markdown_out)
    if path is not None and not as_json:
        out.print(f"{result.doc_id}: Markdown written to {path}")
    return result


def _table(shown: list[DocumentResult], as_json: bool = False) -> None:
    if as_json or not shown:
        return
    table = Table("doc_id", "status", "operation", "pages", "type", "errors", "completed")
    for r in shown:
        table.add_row(r.doc_id, r.status, r.operation.value, str(r.page_count),
                      r.document_type.value if r.document_type else "-", str(len(r.errors)),
                      r.completed_at.isoformat(timespec="seconds"))  # fmt: skip
    out.print(table)
