"""One run of the gateway bench: a cluster, the topics and a key, the pipeline's
children, the idle steps, then the load; the report of what was measured."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

import httpx
import typer

from bench.cluster import cluster
from bench.gateway.children import TENANT, environment, spawn, wait_ready, warm_up
from bench.gateway.figures import Latency, Report
from bench.gateway.load import Sampler, run_load
from bench.gateway.locust import SKIP_PATCH
from bench.gateway.steps import Direct, idle_steps, measure_idle
from gateway.keys import KeyStore
from streams.admin import topics_apply
from streams.blobs import BlobStore
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import RAW, Topology


def run(users: int, seconds: float, rounds: int, out: Path, bootstrap: str | None) -> Report:
    out.mkdir(parents=True, exist_ok=True)
    report = Report(users, seconds, {"when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                                     "cpus": os.cpu_count()})  # fmt: skip
    # The pipeline's settings reach this process (Settings()) and its children through
    # the environment, put back as it was on the way out.
    with mock.patch.dict(os.environ), cluster(bootstrap) as (address, scratch):
        prefix = f"bench{uuid.uuid4().hex[:8]}."
        os.environ.update(environment(address, scratch, prefix))
        settings = Settings()
        topo, direct_topo = settings.topology, Topology(f"bench{uuid.uuid4().hex[:8]}.")
        admin = kafka.admin(settings.kafka)
        for t in (topo, direct_topo):
            topics_apply.apply(admin, t, max_record_bytes=settings.kafka.max_record_bytes)
        key, _ = KeyStore(settings.api.keys_file).create(TENANT)
        logs = scratch / "logs"
        logs.mkdir()
        script = str(Path(sys.executable).with_name("pagestream"))
        env = {k: v for k, v in os.environ.items() if k != SKIP_PATCH}
        agents = spawn("agents", [script, "agents"], env, logs)
        api = spawn("api", [script, "api"], env, logs)
        children = [agents, api]
        url = f"http://{settings.api.host}:{settings.api.port}"
        store = BlobStore.from_settings(settings.blobs)
        direct = Direct(settings, store, direct_topo.name(RAW))
        close: Callable[[], None] = lambda: None  # noqa: E731
        try:
            wait_ready(url, api)
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                              timeout=60) as client:  # fmt: skip
                warm_up(client, children)
                typer.echo(f"warm; idle steps, {rounds} rounds")
                steps, close = idle_steps(settings, store, direct, client, topo)
                report.idle = measure_idle(steps, rounds)
                close()  # the Publishers' poll threads stop before the load
                close = lambda: None  # noqa: E731
            typer.echo(f"load: {users} users for {seconds:g} s")
            load = run_load(users, seconds, url, key, out, Sampler(api.proc.pid, direct),
                            agents, logs)  # fmt: skip
            for child in children:
                child.check()
        except BaseException:
            for child in children:
                tail = child.log.read_text(errors="replace")[-2000:]
                typer.echo(f"--- {child.name} log:\n{tail}")
            raise
        finally:
            close()
            direct.producer.flush(10)
            for child in reversed(children):
                child.stop()
    report.locust = load.pop("rows")
    report.under_load = {"POST /v1/documents": Latency.of(load.pop("submit_ms")),
                         "produce + flush": Latency.of(load.pop("produce_ms"))}  # fmt: skip
    report.load = load
    return report
