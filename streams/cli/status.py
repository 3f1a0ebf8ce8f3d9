"""`pagestream status DOC_ID`: where a document is, page by page, from docs.progress."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

import typer
from confluent_kafka import KafkaException
from rich.table import Table

from streams.cli.common import fail, out, settings
from streams.client.status import read_progress
from streams.kafka.errors import explain


def register(app: typer.Typer) -> None:
    app.command()(status)


def status(
    doc_id: Annotated[str, typer.Argument(help="The document's id.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Pages done, and the stage each other page waits in and for how long."""
    s = settings()
    try:
        found = read_progress(s.kafka, s.topology, doc_id)
    except KafkaException as exc:
        fail(f"cannot read docs.progress: {explain(exc, s.kafka, probe=True)}", 2)
    if found.document is None and not found.pages:
        fail(f"no progress recorded for {doc_id} (not submitted yet, not a valid id, or "
             "older than docs.progress keeps)", 1)  # fmt: skip
    now = datetime.now(UTC)
    waiting = found.waiting(now)
    # The document's own record says "submitted" (the HTTP gateway) until it has ended.
    ended = found.document if found.document and found.document.stage == "ended" else None
    if as_json:
        out.print_json(json.dumps({
            "doc_id": doc_id,
            "pages_total": found.pages_total,
            "pages_done": found.pages_done,
            "status": None if ended is None else ended.status,
            "ended_at": None if ended is None else ended.at.isoformat(),
            "waiting": [{"page_no": n, "stage": st, "seconds": round(sec, 3)}
                        for n, st, sec in waiting],
        }))  # fmt: skip
        return
    head = f"{doc_id}: {found.pages_done} of {found.pages_total} pages done"
    if ended is not None:
        head += f"; ended {ended.status} at {ended.at:%Y-%m-%d %H:%M:%S}Z"
    out.print(head)
    if waiting:
        table = Table("page", "waits in", "for")
        for page_no, stage, seconds in waiting:
            table.add_row(str(page_no), stage, f"{seconds:.1f}s")
        out.print(table)
