"""`pagestream exporter`: consumer lag and topic offsets for Prometheus (kafka_exporter names)."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Annotated

import typer

from streams.cli.common import out, settings


def register(app: typer.Typer) -> None:
    app.command("exporter")(exporter_cmd)


def exporter_cmd(
    port: Annotated[int | None, typer.Option(help="default: PAGESTREAM_EXPORTER__PORT")] = None,
) -> None:
    """Serve consumer-group lag, status and topic offsets on /metrics until stopped."""
    from streams.admin.exporter import Exporter

    s = settings()
    conf = s.exporter if port is None else s.exporter.model_copy(update={"port": port})
    exporter = Exporter(s.kafka, conf)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    bound = exporter.start_http()
    out.print(f"exporter on http://{conf.host}:{bound}/metrics, reading every {conf.interval_s:g}s")
    exporter.run(stop)
