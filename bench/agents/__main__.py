"""`python -m bench.agents`: route and deliver throughput, one worker and two, each
configuration repeated (see the package's docstring)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from bench.agents.figures import report, report_profile
from bench.agents.run import measure, wait_for_coordinator, worker_settings
from bench.agents.work import AGENTS
from bench.cluster import cluster
from streams.kafka import clients as kafka
from streams.settings import KafkaSettings

app = typer.Typer(add_completion=False)


@app.command()
def main(
    records: Annotated[int, typer.Option(min=1)] = 20_000,
    agent: Annotated[
        list[str] | None, typer.Option(help="route, deliver (repeatable); default both")
    ] = None,
    repeats: Annotated[int, typer.Option(min=1, help="runs of each configuration")] = 3,
    workers: Annotated[
        list[int] | None, typer.Option(min=1, help="worker counts (repeatable); default 1 and 2")
    ] = None,
    nodes: Annotated[
        int, typer.Option(min=1, help="brokers of the bench's own cluster (3: three copies)")
    ] = 1,
    prefill: Annotated[
        bool, typer.Option(help="fill the input topic before the workers start (see docstring)")
    ] = False,
    progress: Annotated[
        bool, typer.Option(help="the workers write docs.progress (progress_events)")
    ] = True,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="a worker setting, NAME=VALUE (repeatable; PAGESTREAM_ prefix optional), "
            "e.g. AGENTS__PRODUCER_LINGER_MS=0",
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="seconds per run")] = 600.0,
    bootstrap: Annotated[str | None, typer.Option(help="use this cluster")] = None,
    profile: Annotated[
        Path | None,
        typer.Option(
            help="instead: one run of one worker per agent under py-spy; its "
            "flame graph and stacks go to this folder"
        ),
    ] = None,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    names = agent or list(AGENTS)
    unknown = set(names) - set(AGENTS)
    if unknown:
        raise typer.BadParameter(f"unknown agent(s): {', '.join(sorted(unknown))}")
    try:
        settings = worker_settings(set_ or [])
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    counts = sorted(set(workers or [1, 2]))
    if counts[0] != 1:  # every ratio is to one worker
        counts.insert(0, 1)
    with cluster(bootstrap, nodes) as (address, scratch):
        kafka_settings = KafkaSettings(bootstrap_servers=address)
        wait_for_coordinator(kafka.admin(kafka_settings))
        for name in names:
            if profile is not None:
                result = measure(AGENTS[name], 1, records, kafka_settings, scratch, timeout,
                                 prefill=False, profile=profile, nodes=nodes,
                                 progress=progress, settings=settings)  # fmt: skip
                report(AGENTS[name], [result], progress=progress, settings=settings)
                report_profile(AGENTS[name], profile)
                continue
            results = []
            for _ in range(repeats):
                for k in counts:  # alternating: a slow phase of the machine hits each
                    results.append(measure(AGENTS[name], k, records, kafka_settings, scratch,
                                           timeout, prefill=prefill, nodes=nodes,
                                           progress=progress, settings=settings))  # fmt: skip
            report(AGENTS[name], results, progress=progress, settings=settings)


if __name__ == "__main__":
    app()
