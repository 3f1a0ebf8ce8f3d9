"""`pagestream agents`: one CPU agent worker (ingest, route, deliver)."""

from __future__ import annotations

import logging

import typer
from confluent_kafka import KafkaException

from streams.admin import topics_apply
from streams.blobs import BlobStoreConfigError, probed_store
from streams.cli.common import fail, settings
from streams.kafka import clients as kafka


def register(app: typer.Typer) -> None:
    app.command("agents")(agents_cmd)


def agents_cmd() -> None:
    """Run one CPU agent worker (ingest, route, deliver); start more to scale out."""
    from streams.agents.app import run_worker

    s = settings()
    try:  # before anything else: a store that can never work fails every document
        probed_store(s.blobs)
    except BlobStoreConfigError as exc:
        fail(str(exc))
    # Checked up front: faust would create its changelog itself (workers starting
    # together race for it) and a worker without its input topics just sits idle.
    try:
        absent = topics_apply.missing(kafka.admin(s.kafka), s.topology)
    except KafkaException as exc:
        fail(f"cannot list topics on {s.kafka.bootstrap_servers}: {exc}")
    if absent:
        fail(f"missing topics: {', '.join(absent)}; run `pagestream topics apply` first", 2)
    verbose = logging.getLogger().isEnabledFor(logging.INFO)
    run_worker(s, loglevel="INFO" if verbose else "WARNING")
