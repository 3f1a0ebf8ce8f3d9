"""Soak: the whole pipeline for half an hour at a steady rate, ordinary documents with
5 % generated hostile ones; nothing it holds may keep growing once warm.

    python -m bench.soak --minutes 30 --rate 5 --out bench/results/soak

What for: a leak shows only over time. A process whose memory or descriptors creep up,
a table that keeps what it should drop, a consumer that falls behind a little more each
minute: each passes every test that runs for seconds. Here each must stay flat once
warm, growth under 10 % from minute 10 to minute 30 (for a shorter run: from the end of
its first third to its end).

How: the pipeline `pagestream up` runs (streams/local/up.py's `running_pipeline`: the
embedded broker on free ports in a scratch folder, topics, `pagestream gpu-node` on CPU
with its real models, one `pagestream agents` worker), fed by the project's Submitter at
`--rate` documents a second: born-digital one-page reports with operation `ocr` (read
from their text layer by ingest's render processes) and, one in five, small upright
ID pages with operation `classify` (the GPU node's page model). Every twentieth is
instead a submission drawn by the fuzzer's strategies (tests/support/hostile_records.py:
any operation, sizes around the record limit, odd URIs into the blob store, broken
JSON, huge headers), produced as it is (hypothesis, from the `dev` extra).

The rate is not a capacity test: at 10 documents/s a 3-minute trial on the project's
2-core machine kept up (under 20 documents in flight, the pipeline's processes using
about 0.7 of a core), so the default of 5 keeps the pipeline well below saturation,
where growing lag would only say the rate is too high, on a machine shared with others.

Every `--interval-s` (10 s) it samples: consumer lag in records of the agents' group and
of the GPU node's (streams/operations/lag.py); RSS and open file descriptors of every
process of the pipeline (the broker's JVM, the GPU node, the agents worker and its
render processes; psutil); deliver's table (entries and bytes, read from its changelog,
which holds what the worker's table holds); documents submitted, ended and in flight.
deliver's markers are kept `--delivered-ttl-s` (default: half the warm-up; a day in
production, when the table grows for a day by design) and a document missing pages ends
after `--deadline-s`, so the table reaches its steady size within the warm-up.

Reported, under --out: soak.png (a panel per series; dashed: the judged span; shaded:
the spans whose medians are compared; thin beside RSS: its file-backed part, pages of
mapped files the kernel may drop), soak.md (per series: its value once warm and at the
end, the growth between those medians, flat or grew; documents submitted vs ended, and
any that did not end within the grace period after the last submission; each process's
CPU as a share of one core) and soak.json (every sample). Series that idle near zero
are judged against a floor (see `_soak_report.floor`).
A document ends with a result on docs.results, or a hostile record that never became a
document with its dead letter. Exit code 1 when a series grew by 10 % or more, a
document did not end, or a process of the pipeline died.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from bench._cluster import pipeline_environment
from bench._soak_load import Load, hostile_submissions, ordinary_documents
from bench._soak_report import cpu_shares, markdown, plot, verdicts, write_json
from bench._soak_sample import Sample, Sampler
from streams.blobs import BlobStore
from streams.local.up import Child, PipelineError, running_pipeline
from streams.settings import Settings

app = typer.Typer(add_completion=False)
# Models load and groups join before the clock starts: documents until their results.
_WARM_UP_TIMEOUT_S = 900.0


def _environment(scratch: Path, ttl_s: float, deadline_s: float, tick_s: float) -> dict[str, str]:
    """The pipeline's settings, for this process and the children it starts (they inherit
    its environment): a broker of its own on free ports, its data in `scratch`."""
    return pipeline_environment(scratch, "soak") | {
        "PAGESTREAM_AGENTS__DELIVERED_TTL_S": str(ttl_s),
        "PAGESTREAM_AGENTS__DOCUMENT_DEADLINE_S": str(deadline_s),
        "PAGESTREAM_AGENTS__TICK_INTERVAL_S": str(tick_s),
    }


def _alive(children: list[Child]) -> None:
    for child in children:
        if child.proc.poll() is not None:
            raise PipelineError(f"{child.name} exited with {child.proc.returncode} "
                                f"(its log: {child.log_path})")  # fmt: skip


def _warm_up(load: Load, children: list[Child]) -> None:
    """Two documents of each ordinary kind, until they end: models loaded, groups joined."""
    ids = []
    for kind in ("ocr", "classify"):
        docs = [d for d in load.ordinary if d.kind == kind]
        for k in range(2):
            ids.append(f"warm-{kind}-{load.run}-{k}")
            load.submit_ordinary(ids[-1], docs[k % len(docs)])
    load.flush()
    deadline = time.monotonic() + _WARM_UP_TIMEOUT_S
    while not set(ids) <= load.ledger.ended_ids:
        _alive(children)
        if time.monotonic() > deadline:
            raise PipelineError(f"the warm-up documents did not end in {_WARM_UP_TIMEOUT_S} s")
        load.read(0.5)


def _steady(load: Load, children: list[Child], rate: float, seconds: float,
            sampler: Sampler) -> None:  # fmt: skip
    started = sampler.started_at
    end = started + seconds
    n = 0
    checked = 0.0
    while (now := time.monotonic()) < end:
        while n < rate * seconds and started + n / rate <= now:
            load.submit_next()
            n += 1
        if now - checked > 1.0:
            _alive(children)
            checked = now
        load.read(max(0.0, min(0.2, started + n / rate - time.monotonic())))


def _grace(load: Load, children: list[Child], grace_s: float) -> list[str]:
    """Reads results until every document ended or `grace_s` passed; the ones left."""
    deadline = time.monotonic() + grace_s
    while load.ledger.open() and time.monotonic() < deadline:
        _alive(children)
        load.read(0.5)
    return load.ledger.open()


@dataclass(frozen=True)
class Plan:
    minutes: float
    rate: float
    hostile_share: float
    classify_share: float
    interval_s: float
    delivered_ttl_s: float
    deadline_s: float
    tick_interval_s: float
    grace_s: float
    seed: int

    @property
    def seconds(self) -> float:
        return self.minutes * 60

    @property
    def warm_s(self) -> float:
        return self.seconds / 3


@dataclass
class Outcome:
    samples: list[Sample] = field(default_factory=list)
    sampling_errors: list[str] = field(default_factory=list)
    ledger: dict[str, Any] = field(default_factory=dict)
    not_ended: list[str] = field(default_factory=list)
    failed: str | None = None


def run(plan: Plan, scratch: Path) -> Outcome:
    """Starts the pipeline, warms it, submits at the plan's rate while sampling, waits for
    every document to end, stops the pipeline."""
    os.environ.update(
        _environment(scratch, plan.delivered_ttl_s, plan.deadline_s, plan.tick_interval_s)
    )
    settings = Settings()
    store = BlobStore.from_settings(settings.blobs)
    # One of the fuzzer's URIs is a loop of links under the blob root.
    (scratch / "blobs").mkdir(parents=True, exist_ok=True)
    (scratch / "blobs" / "loop").symlink_to(scratch / "blobs" / "loop")
    n = int(plan.rate * plan.seconds * plan.hostile_share) + 1
    hostile = hostile_submissions(n, settings.kafka.max_record_bytes, store, plan.seed)
    ordinary = ordinary_documents(plan.seed)
    outcome = Outcome()
    with running_pipeline(settings, scratch / "logs") as children:
        load = Load(settings, ordinary, hostile, plan.hostile_share, plan.classify_share)
        sampler = Sampler(settings, children, plan.interval_s, load.ledger.counts)
        try:
            _warm_up(load, children)
            typer.echo("warm: the steady load starts")
            sampler.started_at = time.monotonic()
            sampler.start()
            try:
                _steady(load, children, plan.rate, plan.seconds, sampler)
            finally:
                sampler.stop()
            load.flush()
            typer.echo(f"submitted {load.ledger.submitted}; waiting up to {plan.grace_s:.0f} s "
                       "for every document to end")  # fmt: skip
            outcome.not_ended = _grace(load, children, plan.grace_s)
        except PipelineError as exc:
            outcome.failed = str(exc)
            outcome.not_ended = load.ledger.open()
        finally:
            load.close()
    outcome.samples, outcome.sampling_errors = sampler.samples, sampler.errors
    outcome.ledger = load.ledger.summary()
    return outcome


def report(plan: Plan, outcome: Outcome, out: Path) -> bool:
    """Writes soak.md, soak.png and soak.json; whether everything stayed flat and ended."""
    results = verdicts(outcome.samples, plan.warm_s, plan.seconds, plan.interval_s, plan.rate)
    out.mkdir(parents=True, exist_ok=True)
    title = f"Soak: {plan.minutes:g} minutes at {plan.rate:g} documents/s"
    cpu = cpu_shares(outcome.samples, plan.warm_s, plan.seconds)
    text = markdown(results, plan.warm_s, plan.seconds, outcome.ledger, outcome.not_ended,
                    title, cpu)  # fmt: skip
    (out / "soak.md").write_text(text)
    plot(out / "soak.png", outcome.samples, results, plan.warm_s, plan.seconds, plan.interval_s)
    write_json(out / "soak.json", asdict(plan), outcome.samples, results, outcome.ledger,
               outcome.not_ended)  # fmt: skip
    typer.echo(text)
    for error in outcome.sampling_errors:
        typer.echo(f"sampling: {error}")
    if outcome.failed is not None:
        typer.echo(f"FAILED: {outcome.failed}")
    return outcome.failed is None and not outcome.not_ended and all(v.flat for v in results)


_TTL_HELP = "deliver's markers kept (s). Default: half the warm-up."
_DEADLINE_HELP = "A document missing pages ends (s). Default: 120, at most half the warm-up."
_GRACE_HELP = "Wait for every document to end (s). Default: deadline + 2 ticks + 60."


@app.command()
def main(
    minutes: Annotated[float, typer.Option(min=1, help="Length of the steady load.")] = 30.0,
    rate: Annotated[float, typer.Option(min=0.1, help="Documents submitted per second.")] = 5.0,
    out: Annotated[Path, typer.Option(help="Folder of soak.png, soak.md, soak.json.")] = Path(
        "bench/results/soak"
    ),
    hostile_share: Annotated[float, typer.Option(min=0, max=0.5)] = 0.05,
    classify_share: Annotated[float, typer.Option(min=0, max=1, help="Of ordinary ones.")] = 0.2,
    interval_s: Annotated[float, typer.Option(min=1, help="Seconds between samples.")] = 10.0,
    delivered_ttl_s: Annotated[float | None, typer.Option(help=_TTL_HELP)] = None,
    deadline_s: Annotated[float | None, typer.Option(help=_DEADLINE_HELP)] = None,
    grace_s: Annotated[float | None, typer.Option(help=_GRACE_HELP)] = None,
    seed: Annotated[int, typer.Option(help="Of the documents and the hostile draws.")] = 25,
    keep: Annotated[bool, typer.Option(help="Keep the scratch folder (logs, data).")] = False,
) -> None:
    """Run the soak and write its report; exit 1 if anything grew or did not end."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    warm_s = minutes * 60 / 3
    deadline = deadline_s or min(120.0, warm_s / 2)
    tick_s = min(30.0, deadline / 4)
    plan = Plan(minutes, rate, hostile_share, classify_share, interval_s,
                delivered_ttl_s or warm_s / 2, deadline, tick_s,
                grace_s or deadline + 2 * tick_s + 60, seed)  # fmt: skip
    scratch = Path(tempfile.mkdtemp(prefix="pagestream-soak-"))
    typer.echo(f"soak: {minutes:g} min at {rate:g} documents/s; scratch {scratch}")
    ok = report(plan, run(plan, scratch), out)
    if ok and not keep:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        typer.echo(f"logs and data kept in {scratch}")
    raise typer.Exit(0 if ok else 1)


if __name__ == "__main__":
    app()
