"""`pagestream results`: the latest result per document, as a user reads docs.results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from schemas import DocumentResult
from streams.blobs import BlobStore
from streams.cli.common import fail, out, settings
from streams.cli.display import print_result
from streams.client.results import ResultsReader, ResultsUnavailableError, resolved, write_markdown


def register(app: typer.Typer) -> None:
    app.command()(results)


def results(
    doc_id: Annotated[list[str] | None, typer.Option("--doc-id", help="Repeatable.")] = None,
    follow: Annotated[bool, typer.Option(help="Keep printing results as they arrive.")] = False,
    wait: Annotated[
        float, typer.Option(min=0, help="Seconds to wait for the --doc-id results to arrive.")
    ] = 0.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="The full DocumentResult, one per line.")
    ] = False,
    markdown_out: Annotated[
        Path | None, typer.Option(help="Write <doc_id>.md here for OCR results.")
    ] = None,
) -> None:
    """The latest result of each document in docs.results (claim-checked parts fetched):
    a short block per document (status, type, fields, the start of the Markdown,
    errors); --json prints the whole record."""
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
        for result in latest.values():
            _show(resolved(result, blobs), as_json, markdown_out)
        if follow:
            for result in reader.follow():
                _show(resolved(result, blobs), as_json, markdown_out)
    finally:
        reader.close()
    if missing:
        fail(f"no result yet for {', '.join(sorted(missing))}")


def _show(result: DocumentResult, as_json: bool, markdown_out: Path | None) -> None:
    print_result(out, result, as_json=as_json)
    path = None if markdown_out is None else write_markdown(result, markdown_out)
    if path is not None and not as_json:
        out.print(f"  Markdown written to {path}", markup=False, highlight=False)
