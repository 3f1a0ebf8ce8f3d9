"""`pagestream lag`: committed offset, log end and lag per group, topic and partition."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from streams import kafka
from streams import lag as lag_mod
from streams.cli.common import out, settings


def register(app: typer.Typer) -> None:
    app.command()(lag)


def lag(
    group: Annotated[list[str] | None, typer.Option("--group", "-g")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Committed offset, log-end offset and lag per group, topic and partition."""
    groups = lag_mod.all_lag(kafka.admin(settings().kafka), group)
    if as_json:
        out.print_json(json.dumps([g.as_dict() for g in groups]))
        return
    print_lag(groups)


def print_lag(groups: list[lag_mod.GroupLag]) -> None:
    for g in groups:
        table = Table(
            "topic",
            "partition",
            "committed",
            "log end",
            "lag",
            "consumer",
            title=f"group {g.group} ({g.state}), total lag {g.total_lag}",
        )
        for p in g.partitions:
            dash = "-"
            table.add_row(
                p.topic,
                str(p.partition),
                dash if p.committed is None else str(p.committed),
                str(p.log_end),
                dash if p.lag is None else str(p.lag),
                p.consumer_id or dash,
            )
        out.print(table)
    if not groups:
        out.print("no consumer groups")
