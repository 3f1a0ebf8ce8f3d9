"""route's and deliver's steps in process, without Kafka: what a record costs the step
itself (decode, route or aggregate, every output built, encoded and gated, deliver's
table settled), apart from the loop's poll and produce.

    python -m bench.agents.steps                         # CPU us per record, both
    python -m bench.agents.steps --agent route --instructions

CPU time per record (the best of --repeats passes) moves by a third from one minute to
the next on a shared machine. With --instructions it also counts the instructions per
record under valgrind's callgrind, which noise does not move: the figure to compare a
new tree with an old one by (run each tree's `bench.agents.steps`, or `git stash` in
between). Callgrind counts only inside the measured loop: the loop runs inside a C
function (libc's qsort, comparing two items, calls back into Python once), and callgrind
collects only within it (`--toggle-collect`). The count is taken for --records and for
twice as many; their difference, per record, leaves out what a first call pays once.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from confluent_kafka import Consumer
from rich.console import Console

from bench.agents.work import AGENTS, copies
from streams.agents.changelog_table import ChangelogTable
from streams.agents.deliver import Deliver
from streams.agents.deliver_batches import DeliverBatches
from streams.agents.route import Router
from streams.blobs import BlobStore
from streams.kafka.envelope import Origin, Outgoing, header_pairs
from streams.settings import Settings

out = Console()
app = typer.Typer(add_completion=False)

_SETTLE_EVERY = 100  # deliver's records per settle, as a loop's batch would


def origins(agent: str, n: int, blob_root: str) -> list[Origin]:
    """n records as the agent's loop would poll them (bench.agents' work)."""
    now_ms, topic = int(time.time() * 1000), AGENTS[agent].source.base
    made = copies(AGENTS[agent].page(blob_root), n)
    return [
        Origin(topic, i % 6, i, now_ms, key, value, header_pairs(headers))
        for i, (value, key, headers) in enumerate(made)
    ]


def stepper(agent: str, settings: Settings) -> Callable[[list[Origin]], int]:
    """A fresh step (deliver's with an empty table) over a list of records: how many
    outputs it made, each gated as the loop gates it."""
    topo, agents = settings.topology, settings.agents
    limit = settings.kafka.max_record_bytes

    def gated(outputs: list[Outgoing]) -> int:
        return sum(1 for o in outputs if o.fits(limit))

    if agent == "route":
        router = Router(topo, min_confidence=agents.min_confidence, progress=True)
        return lambda records: sum(gated(router.handle(o)) for o in records)
    deliver = Deliver(topo, min_confidence=agents.min_confidence,
                      delivered_ttl_s=agents.delivered_ttl_s,
                      deadline_s=agents.document_deadline_s,
                      blobs=BlobStore.from_settings(settings.blobs), max_record_bytes=limit,
                      progress=True)  # fmt: skip
    state = DeliverBatches(deliver, ChangelogTable("bench-changelog"), reader=_no_reader,
                           max_record_bytes=limit)  # fmt: skip

    def deliver_all(records: list[Origin]) -> int:
        made = 0
        for start in range(0, len(records), _SETTLE_EVERY):
            sent = {}
            for origin in records[start : start + _SETTLE_EVERY]:
                sent[id(origin)] = outputs = state.step(origin)
                made += gated(outputs)
            made += len(state.settle(sent))
        return made

    return deliver_all


def _no_reader() -> Consumer:
    raise AssertionError("the bench's table is never assigned partitions")


def cpu_us(agent: str, n: int, repeats: int, blob_root: str) -> float:
    """CPU us per record of this thread, the best of `repeats` passes over fresh records."""
    best = float("inf")
    for _ in range(repeats):
        records, step = origins(agent, n, blob_root), stepper(agent, Settings())
        started = time.thread_time()
        step(records)
        best = min(best, (time.thread_time() - started) / n * 1e6)
    return best


def inside_qsort(agent: str, n: int, blob_root: str) -> int:
    """One pass, run from inside libc's qsort (what callgrind counts; see the docstring):
    the outputs it made."""
    records, step = origins(agent, n, blob_root), stepper(agent, Settings())
    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    made: list[int] = []

    def measured(_a: object, _b: object) -> int:
        if not made:  # called once for two items; never the pass twice
            made.append(step(records))
        return 0

    items = (ctypes.c_int * 2)(1, 2)
    ctypes.CDLL(None).qsort(items, 2, ctypes.sizeof(ctypes.c_int), compare(measured))
    return made[0]


def instructions(agent: str, n: int) -> float:
    """Instructions per record under callgrind: counted for n and 2n records."""
    if shutil.which("valgrind") is None:
        raise typer.BadParameter("--instructions needs valgrind (apt install valgrind)")
    counts = []
    with tempfile.TemporaryDirectory(prefix="pagestream-steps-") as tmp:
        for records in (n, 2 * n):
            cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
                   "--toggle-collect=*qsort_r", f"--callgrind-out-file={tmp}/out",
                   sys.executable, "-m", "bench.agents.steps", "--agent", agent,
                   "--records", str(records), "--inside-qsort", tmp]  # fmt: skip
            env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dicts every run
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)  # noqa: S603
            found = re.search(r"Collected : (\d+)", done.stderr)
            if found is None:
                raise RuntimeError(f"callgrind said no count: {done.stderr[-500:]}")
            counts.append(int(found.group(1)))
    return (counts[1] - counts[0]) / n


@app.command()
def main(
    agent: Annotated[list[str] | None, typer.Option(help="route, deliver; default both")] = None,
    records: Annotated[int, typer.Option(min=1)] = 5000,
    repeats: Annotated[int, typer.Option(min=1, help="passes timed, the best kept")] = 5,
    count: Annotated[
        bool, typer.Option("--instructions", help="also count instructions (valgrind)")
    ] = False,
    counted: Annotated[Path | None, typer.Option("--inside-qsort", hidden=True)] = None,
) -> None:
    names = agent or list(AGENTS)
    if counted is not None:  # a pass under callgrind, started by `instructions`
        inside_qsort(names[0], records, str(counted))
        return
    with tempfile.TemporaryDirectory(prefix="pagestream-steps-") as blob_root:
        for name in names:
            line = f"{name}: {cpu_us(name, records, repeats, blob_root):.1f} CPU us per record"
            if count:  # fewer records: callgrind runs some 50 times slower
                line += f", {instructions(name, min(records, 1000)):,.0f} instructions per record"
            out.print(line)


if __name__ == "__main__":
    app()
