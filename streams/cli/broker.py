"""`pagestream broker start|stop|status`: the embedded single-node KRaft broker."""

from __future__ import annotations

import time

import typer

from streams import broker as broker_mod
from streams.cli.common import fail, out, settings

broker_app = typer.Typer(no_args_is_help=True, help="The embedded single-node KRaft broker.")


def register(app: typer.Typer) -> None:
    app.add_typer(broker_app, name="broker")


@broker_app.command("start")
def broker_start() -> None:
    """Start the broker; returns once it answers metadata requests."""
    s = settings().broker
    t0 = time.monotonic()
    try:
        info = broker_mod.start(s)
    except broker_mod.BrokerError as exc:
        fail(f"broker failed to start: {exc}")
    out.print(
        f"Apache Kafka {info.version} at {info.bootstrap} (pid {info.pid}, "
        f"data {info.data_dir}) ready in {time.monotonic() - t0:.1f}s"
    )


@broker_app.command("stop")
def broker_stop() -> None:
    """Stop the broker cleanly (controlled shutdown)."""
    out.print("stopped" if broker_mod.stop(settings().broker) else "no broker was running")


@broker_app.command("status")
def broker_status() -> None:
    """Print the Kafka version and bootstrap address; exit 1 if not running."""
    info = broker_mod.status(settings().broker)
    if info is None or not broker_mod.answers_metadata(info.bootstrap):
        out.print("not running")
        raise typer.Exit(1)
    out.print(f"running: Apache Kafka {info.version}, bootstrap {info.bootstrap}, pid {info.pid}")
