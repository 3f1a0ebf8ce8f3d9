"""`pagestream submit`: publish documents to docs.raw."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from schemas import (
    Backend,
    DocumentType,
    Layout,
    OcrEngineName,
    Operation,
    Options,
    RecordError,
    TextLayer,
)
from streams.cli.common import fail, out, progress_bar, settings
from streams.client import submit as submit_mod
from streams.topics import RAW


def register(app: typer.Typer) -> None:
    app.command()(submit)


def _parse_attrs(attrs: list[str]) -> dict[str, str | int | float | bool | None]:
    parsed: dict[str, str | int | float | bool | None] = {}
    for item in attrs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--attr expects KEY=VALUE, got {item!r}")
        parsed[key] = value
    return parsed


def submit(
    paths: Annotated[list[Path], typer.Argument(help="Images, PDFs or folders (recursive).")],
    operation: Annotated[Operation, typer.Option()] = Operation.process,
    auto_rotate: Annotated[bool, typer.Option("--auto-rotate/--no-auto-rotate")] = True,
    backend: Annotated[Backend, typer.Option()] = Backend.auto,
    document_type: Annotated[DocumentType | None, typer.Option()] = None,
    max_pages: Annotated[int, typer.Option(min=1)] = 10,
    dpi: Annotated[int, typer.Option(min=72, max=400)] = 150,
    text_layer: Annotated[
        TextLayer, typer.Option(help="ocr on PDFs: answer pages from their own text layer?")
    ] = TextLayer.auto,
    layout: Annotated[
        Layout, typer.Option(help="ocr: the layout model's Markdown, or the fast classic one.")
    ] = Layout.model,
    keep_headers: Annotated[
        bool, typer.Option(help="ocr: keep running heads and footers, as comments.")
    ] = False,
    ocr_engine: Annotated[
        OcrEngineName, typer.Option(help="ocr: what reads pages from their pixels.")
    ] = OcrEngineName.rapidocr,
    target_px: Annotated[
        int, typer.Option(min=256, max=8000, help="ocr: pixels on a page's long side.")
    ] = 1600,
    doc_id: Annotated[str | None, typer.Option(help="Only with a single file.")] = None,
    callback: Annotated[str | None, typer.Option(help="Webhook URL for the result.")] = None,
    attr: Annotated[list[str] | None, typer.Option(help="KEY=VALUE, repeatable.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Publish documents to docs.raw."""
    s = settings()
    options = Options(
        auto_rotate=auto_rotate,
        backend=backend,
        document_type=document_type,
        max_pages=max_pages,
        dpi=dpi,
        text_layer=text_layer,
        layout=layout,
        keep_headers=keep_headers,
        ocr_engine=ocr_engine,
        target_px=target_px,
    )
    try:
        files = submit_mod.discover(paths)
    except submit_mod.SubmitError as exc:
        fail(str(exc), 2)
    done = itertools.count(1)
    with progress_bar("submitting", disable=as_json) as progress:
        try:
            subs = submit_mod.submit_paths(
                s,
                files,
                operation=operation,
                options=options,
                doc_id=doc_id,
                callback=callback,
                attributes=_parse_attrs(attr or []),
                on_each=lambda _: progress(next(done), len(files)),
            )
        except (submit_mod.SubmitError, RecordError) as exc:
            fail(str(exc))
    if as_json:
        rows = [
            {"path": str(x.path), "doc_id": x.doc_id, "size_bytes": x.size_bytes, "via": x.via}
            for x in subs
        ]
        out.print_json(json.dumps(rows))
        return
    table = Table("doc_id", "bytes", "via", "file")
    for x in subs:
        table.add_row(x.doc_id, str(x.size_bytes), x.via, str(x.path))
    out.print(table)
    out.print(f"{len(subs)} documents submitted to {s.topology.name(RAW)}")
