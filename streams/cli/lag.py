"""`pagestream lag`: committed offset, log end and lag (offsets and records) per partition."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from streams.cli.common import out, settings
from streams.kafka import clients as kafka
from streams.operations import lag as lag_mod


def register(app: typer.Typer) -> None:
    app.command()(lag)


def lag(
    group: Annotated[list[str] | None, typer.Option("--group", "-g")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Committed offset, log-end offset and lag per group, topic and partition.

    `lag` is log end - committed, as Kafka's own tool prints it; `records` is the
    lag in records (transaction markers and aborted records are not lag), which is
    what `total lag` sums.
    """
    conf = settings().kafka
    counter = lag_mod.record_counter(conf)
    try:
        groups = lag_mod.all_lag(kafka.admin(conf), group, counter)
    finally:
        counter.close()
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
            "records",
            "consumer",
            title=f"group {g.group} ({g.state}), total lag {g.total_lag} records",
        )
        for p in g.partitions:
            dash = "-"
            table.add_row(
                p.topic,
                str(p.partition),
                dash if p.committed is None else str(p.committed),
                str(p.log_end),
                dash if p.lag is None else str(p.lag),
                dash if p.records is None else str(p.records),
                p.consumer_id or dash,
            )
        out.print(table)
    if not groups:
        out.print("no consumer groups")
