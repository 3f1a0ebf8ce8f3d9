"""`pagestream results`: the latest result per document, as a user reads docs.results."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from reading.chunks import DEFAULT_MAX_TOKENS
from schemas import DocumentResult, Operation
from streams.blobs import BlobStore
from streams.cli.common import fail, out, settings
from streams.cli.display import print_result
from streams.client.document_json import write_document
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
    json_out: Annotated[
        Path | None,
        typer.Option(
            help="Write the document JSON (blocks, tables, boxes) of the one --doc-id "
            "(an OCR result) to this file."
        ),
    ] = None,
    chunks_out: Annotated[
        Path | None,
        typer.Option(
            help="Write the retrieval chunks of the one --doc-id (an OCR result) to this file."
        ),
    ] = None,
    chunk_tokens: Annotated[
        int, typer.Option(min=1, help="The chunks' budget, in whitespace-separated words.")
    ] = DEFAULT_MAX_TOKENS,
) -> None:
    """The latest result of each document in docs.results (claim-checked parts fetched):
    a short block per document (status, type, fields, the start of the Markdown,
    errors); --json prints the whole record."""
    if (json_out or chunks_out) and len(set(doc_id or [])) != 1:
        fail("--json-out and --chunks-out write one document: give exactly one --doc-id", 2)
    outputs = _Outputs(markdown_out, json_out, chunks_out, chunk_tokens)
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
            _show(resolved(result, blobs), blobs, as_json, outputs)
        if follow:
            for result in reader.follow():
                _show(resolved(result, blobs), blobs, as_json, outputs)
    finally:
        reader.close()
    if missing:
        fail(f"no result yet for {', '.join(sorted(missing))}")


@dataclass(frozen=True)
class _Outputs:
    markdown: Path | None
    document: Path | None
    chunks: Path | None
    chunk_tokens: int


def _show(result: DocumentResult, blobs: BlobStore, as_json: bool, outputs: _Outputs) -> None:
    print_result(out, result, as_json=as_json)
    path = None if outputs.markdown is None else write_markdown(result, outputs.markdown)
    if path is not None and not as_json:
        out.print(f"  Markdown written to {path}", markup=False, highlight=False)
    if outputs.document is None and outputs.chunks is None:
        return
    if result.operation is not Operation.ocr:
        fail(f"{result.doc_id}: operation {result.operation.value} has no document JSON "
             "(it comes with ocr)")  # fmt: skip
    write_document(result, blobs, json_out=outputs.document, chunks_out=outputs.chunks,
                   max_tokens=outputs.chunk_tokens)  # fmt: skip
    if not as_json:
        for what, written in (("document JSON", outputs.document), ("chunks", outputs.chunks)):
            if written is not None:
                out.print(f"  {what} written to {written}", markup=False, highlight=False)
