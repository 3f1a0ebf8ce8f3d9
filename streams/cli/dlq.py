"""`pagestream dlq list|show|replay`: dead letters in docs.dlq."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.table import Table

from schemas import headers as schema_headers
from streams.admin import dlq
from streams.cli.common import fail, out, settings
from streams.settings import DlqSettings

dlq_app = typer.Typer(no_args_is_help=True, help="Dead letters in docs.dlq: list, show, replay.")


def register(app: typer.Typer) -> None:
    app.add_typer(dlq_app, name="dlq")


def _dlq_filter(
    stage: str | None, exception: str | None, doc_id: str | None,
    since: datetime | None, until: datetime | None,
) -> dlq.Filter:  # fmt: skip
    def aware(t: datetime | None) -> datetime | None:
        return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t

    return dlq.Filter(stage, exception, doc_id, aware(since), aware(until))


def _from_settings(text: str, field: str) -> str:
    default = DlqSettings.model_fields[field].default
    return f"{text} (default {default}, from PAGESTREAM_DLQ__{field.upper()})"


StageOpt = Annotated[str | None, typer.Option(help="ingest, route, deliver, webhook, orient, ...")]
ExcOpt = Annotated[str | None, typer.Option(help="substring of the exception class")]
DocOpt = Annotated[str | None, typer.Option("--doc-id")]
SinceOpt = Annotated[datetime | None, typer.Option(help="failed at or after (UTC if no zone)")]
UntilOpt = Annotated[datetime | None, typer.Option(help="failed at or before")]


@dlq_app.command("list")
def dlq_list(
    stage: StageOpt = None,
    exception: ExcOpt = None,
    doc_id: DocOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
) -> None:
    """Dead letters matching the filters (headers only: values are documents)."""

    found = dlq.list_dead(settings(), _dlq_filter(stage, exception, doc_id, since, until))
    table = Table("partition", "offset", "doc_id", "stage", "exception", "message", "replays",
                  "failed at", title=f"{len(found)} dead letters")  # fmt: skip
    for d in found:
        table.add_row(
            str(d.partition), str(d.offset), d.doc_id or "-", d.stage or "-",
            (d.exception_class or "-").rsplit(".", 1)[-1],
            (d.header(schema_headers.ERROR_EXCEPTION_MESSAGE) or "")[:80],
            str(d.replays), d.header(schema_headers.ERROR_FAILED_AT) or "-",
        )  # fmt: skip
    out.print(table)


@dlq_app.command("show")
def dlq_show(
    partition: int,
    offset: int,
    stacktrace: Annotated[bool, typer.Option(help="include the stack trace")] = False,
) -> None:
    """Every header of one dead letter, and the size of its value."""

    found = [d for d in dlq.list_dead(settings(), dlq.Filter())
             if d.partition == partition and d.offset == offset]  # fmt: skip
    if not found:
        fail(f"no dead letter at partition {partition} offset {offset}")
    dead = found[0]
    table = Table("header", "value", title=f"dead letter {partition}/{offset}")
    for k, v in dead.headers:
        if k == schema_headers.ERROR_EXCEPTION_STACKTRACE and not stacktrace:
            continue
        table.add_row(k, v.decode("utf-8", "replace"))
    table.add_row("(key)", dead.doc_id or "-")
    table.add_row("(value size)", "dropped" if dead.value is None else f"{len(dead.value)} bytes")
    out.print(table)


@dlq_app.command("replay")
def dlq_replay(
    stage: StageOpt = None,
    exception: ExcOpt = None,
    doc_id: DocOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show, send nothing")] = False,
    rate: Annotated[
        float | None,
        typer.Option(help=_from_settings("records per second", "replay_rate_per_s")),
    ] = None,
    max_replays: Annotated[
        int | None,
        typer.Option(help=_from_settings("refuse records replayed this often", "max_replays")),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(help=_from_settings("consumer group that remembers progress", "replay_group")),
    ] = None,
) -> None:
    """Send matching dead letters back to the topic they failed on (original key and value)."""

    def each(dead: Any, verdict: str) -> None:
        if verdict != "skip":
            what = "would replay" if dry_run and verdict == "replay" else verdict
            out.print(f"{dead.partition}/{dead.offset} {dead.doc_id or '-'}: {what}")

    try:
        report = dlq.replay(
            settings(), _dlq_filter(stage, exception, doc_id, since, until), dry_run=dry_run,
            rate_per_s=rate, max_replays=max_replays, group=group, on_each=each,
        )  # fmt: skip
    except dlq.ReplayTakenOver as exc:
        fail(str(exc))
    verb = "would replay" if dry_run else "replayed"
    out.print(f"{verb} {report.replayed}, refused {report.refused}, "
              f"not matching {report.skipped}, replayed before {report.before}")  # fmt: skip
    if report.deferred:
        out.print(f"deferred {report.deferred}: too many letters sent past skipped ones "
                  "for the group to record; replay the skipped ones (another filter) "
                  "to go on")  # fmt: skip
