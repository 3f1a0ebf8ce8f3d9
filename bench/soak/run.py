"""The soak's run: the pipeline started and warmed, the steady load submitted while
the sampler samples, then every document waited for; the pipeline stopped."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from bench.cluster import pipeline_environment
from bench.soak.load import Load, hostile_submissions, ordinary_documents
from bench.soak.sample import Sample, Sampler
from streams.blobs import BlobStore
from streams.local.up import Child, PipelineError, running_pipeline
from streams.settings import Settings

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
