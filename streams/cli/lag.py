"""`pagestream lag`: consumer lag per group and topic, or per partition (--partitions)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from streams.admin import lag as lag_mod
from streams.admin import records
from streams.cli.common import out, settings
from streams.cli.display import print_lag
from streams.kafka import clients as kafka


def register(app: typer.Typer) -> None:
    app.command()(lag)


def lag(
    group: Annotated[list[str] | None, typer.Option("--group", "-g")] = None,
    partitions: Annotated[
        bool, typer.Option("--partitions", help="One line per partition, not per topic.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Consumer lag: per group its total, then one line per topic with its partitions,
    lag and status (caught up, behind, no consumer, not committed).

    The lag counted is records (transaction markers and aborted records are not lag),
    which is what `total lag` sums. --partitions shows each partition's committed
    offset, log-end offset, `lag` (log end - committed, as Kafka's own tool prints it),
    `records` and consumer.
    """
    conf = settings().kafka
    counter = records.record_counter(conf)
    try:
        groups = lag_mod.all_lag(kafka.admin(conf), group, counter)
    finally:
        counter.close()
    if as_json:
        out.print_json(json.dumps([g.as_dict() for g in groups]))
        return
    print_lag(out, groups, partitions=partitions)
