"""`pagestream broker start|stop|status`: the embedded KRaft broker (one node or a cluster)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from streams.cli.common import fail, out, settings
from streams.local import broker as broker_mod
from streams.security import credentials

broker_app = typer.Typer(no_args_is_help=True, help="The embedded KRaft broker.")


def register(app: typer.Typer) -> None:
    app.add_typer(broker_app, name="broker")


@broker_app.command("start")
def broker_start(
    nodes: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=9,
            help="Nodes of a local cluster (3: replication factor 3, min.insync.replicas 2); "
            "node k listens on the port + 10*(k-1). Default: PAGESTREAM_BROKER__NODES (1).",
        ),
    ] = None,
    secure: Annotated[
        bool | None,
        typer.Option(
            "--secure/--plaintext",
            help="SASL_SSL (SCRAM-SHA-512) with ACLs, one principal per role; passwords in "
            "<data dir>/credentials. Default: PAGESTREAM_BROKER__SECURE (false).",
        ),
    ] = None,
) -> None:
    """Start the broker's nodes that are not running; returns once all answer."""
    s = settings().broker
    if nodes is not None:
        s = s.model_copy(update={"nodes": nodes})
    if secure is not None:
        s = s.model_copy(update={"secure": secure})
    else:
        s = broker_mod.in_recorded_mode(s)
    t0 = time.monotonic()
    try:
        info = broker_mod.start(s)
    except broker_mod.BrokerError as exc:
        fail(f"broker failed to start: {exc}")
    pids = ", ".join(f"node {n.node_id} pid {n.pid}" for n in info.nodes)
    out.print(
        f"Apache Kafka {info.version} at {info.bootstrap} ({pids}; data {info.data_dir}) "
        f"ready in {time.monotonic() - t0:.1f}s"
    )
    if s.secure:
        out.print(
            f"SASL_SSL with ACLs: each role's settings are in {credentials.folder(s)}/<role>.env "
            "(PAGESTREAM_ENV_FILE=<that file> pagestream ...); `pagestream acls apply` as "
            "admin creates the users and their rights"
        )


@broker_app.command("stop")
def broker_stop() -> None:
    """Stop every node cleanly (controlled shutdown)."""
    out.print("stopped" if broker_mod.stop(settings().broker) else "no broker was running")


@broker_app.command("status")
def broker_status() -> None:
    """Print the Kafka version, bootstrap address and nodes; exit 1 if none is running."""
    s = settings().broker
    info = broker_mod.status(s)
    if info is None or not broker_mod.answers_metadata(info.bootstrap, settings=s):
        out.print("not running")
        raise typer.Exit(1)
    expected = len(broker_mod.layout(s))
    pids = ", ".join(f"node {n.node_id} pid {n.pid}" for n in info.nodes)
    out.print(
        f"running: Apache Kafka {info.version}, bootstrap {info.bootstrap} "
        f"({'SASL_SSL, ACLs' if broker_mod.recorded_secure(s) else 'PLAINTEXT'}), "
        f"{len(info.nodes)}/{expected} nodes up ({pids})"
    )
    if len(info.nodes) < expected:
        raise typer.Exit(1)
