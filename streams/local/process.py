"""The nodes as processes: start, stop, kill and status of detached JVMs.

Each node runs as a detached JVM (its own session, so it outlives the CLI that
started it) whose pid, version and address are recorded in ``broker.json`` in its
folder; `start` returns once every node answers metadata and the cluster lists them all.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from streams.local.config import admin_kafka, configure
from streams.local.jars import java, kafka_version
from streams.local.nodes import BrokerError, Node, bootstrap_servers, layout
from streams.settings import BrokerSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeInfo:
    node_id: int
    pid: int
    bootstrap: str


@dataclass(frozen=True)
class BrokerInfo:
    """The running nodes of the embedded cluster; `bootstrap` names every node."""

    version: str
    bootstrap: str
    data_dir: Path
    nodes: tuple[NodeInfo, ...]


def _probe_config(settings: BrokerSettings, bootstrap: str) -> dict[str, Any]:
    return admin_kafka(settings).confluent_config(
        **{
            "bootstrap.servers": bootstrap,
            "socket.connection.setup.timeout.ms": 1000,
            # A probe: "connection refused" until the broker listens is the expected
            # answer, not an error worth librdkafka's stderr lines (level 3).
            "log_level": 2,
        }
    )


def _meta_path(node: Node) -> Path:
    return node.data_dir / "broker.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still answers kill(0); reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == 0


def answers_metadata(
    bootstrap: str, timeout: float = 2.0, settings: BrokerSettings | None = None
) -> bool:
    """Whether `bootstrap` answers a metadata request (as the admin of `settings`' broker
    when it is secure)."""
    conf: dict[str, Any] = (
        _probe_config(settings, bootstrap)
        if settings is not None
        else {"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 1000,
              "log_level": 2}
    )  # fmt: skip
    admin = AdminClient(conf)
    try:
        md = admin.list_topics(timeout=timeout)
    except Exception:  # any failure means "not ready yet"
        return False
    return bool(md.brokers)


def status(settings: BrokerSettings) -> BrokerInfo | None:
    """The running nodes recorded in data_dir, or None when none is running."""
    running = [info for node in layout(settings) if (info := _node_status(node)) is not None]
    if not running:
        return None
    return BrokerInfo(
        kafka_version(settings), bootstrap_servers(settings), settings.data_dir, tuple(running)
    )


def _node_status(node: Node) -> NodeInfo | None:
    meta = _meta_path(node)
    if not meta.exists():
        return None
    info = json.loads(meta.read_text())
    if not _pid_alive(int(info["pid"])):
        return None
    return NodeInfo(node.node_id, int(info["pid"]), info["bootstrap"])


def start(settings: BrokerSettings) -> BrokerInfo:
    """Start every node that is not running (formatting its log dir once); return when
    each answers metadata and the cluster lists all of them."""
    nodes = layout(settings)
    cp = configure(settings)
    started = {n.node_id: _spawn(settings, n, cp) for n in nodes if _node_status(n) is None}
    bootstrap = bootstrap_servers(settings)
    deadline = time.monotonic() + settings.start_timeout_s
    waiting = {n.node_id: n for n in nodes if n.node_id in started}
    while time.monotonic() < deadline:
        for node_id, proc in started.items():
            if proc.poll() is not None:
                node = next(n for n in nodes if n.node_id == node_id)
                _meta_path(node).unlink(missing_ok=True)
                raise BrokerError(
                    f"node {node_id} exited with {proc.returncode}:\n{_log_tail(node.data_dir)}"
                )
        waiting = {
            k: n
            for k, n in waiting.items()
            if not answers_metadata(f"{settings.host}:{n.port}", settings=settings)
        }
        if not waiting and _brokers_listed(settings, bootstrap) >= len(nodes):
            info = status(settings)
            if info is not None:
                return info
        time.sleep(0.25)
    if len(started) == len(nodes):  # nothing was running before: leave nothing behind
        stop(settings)
    tails = "\n".join(_log_tail(n.data_dir) for n in nodes if n.node_id in started)
    raise BrokerError(f"broker did not answer within {settings.start_timeout_s}s:\n{tails}")


def _spawn(settings: BrokerSettings, node: Node, classpath: str) -> subprocess.Popen[bytes]:
    logfile = (node.data_dir / "broker.log").open("ab")
    proc = subprocess.Popen(  # noqa: S603
        [
            java(),
            *settings.jvm_options,
            f"-Xmx{settings.heap}",
            f"-Xms{settings.heap}",
            # The whole heap touched at start: the broker's memory is what it will be from
            # its first minute (a memory limit is met at start, not hours in, and a soak
            # sees a flat line rather than the heap being paged in).
            "-XX:+AlwaysPreTouch",
            f"-Dlog4j2.configurationFile={node.data_dir / 'log4j2.properties'}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(node.data_dir / "server.properties"),
        ],
        stdout=logfile,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # survives the CLI that started it
    )
    logfile.close()
    _meta_path(node).write_text(
        json.dumps(
            {
                "pid": proc.pid,
                "version": kafka_version(settings),
                "bootstrap": f"{settings.host}:{node.port}",
            }
        )
    )
    return proc


def _brokers_listed(settings: BrokerSettings, bootstrap: str) -> int:
    admin = AdminClient(_probe_config(settings, bootstrap))
    try:
        return len(admin.list_topics(timeout=1.0).brokers)
    except Exception:  # not ready yet
        return 0


def kill_node(settings: BrokerSettings, node_id: int) -> bool:
    """SIGKILL one node (a crash, for chaos tests); False if it was not running."""
    node = next(n for n in layout(settings) if n.node_id == node_id)
    info = _node_status(node)
    if info is None:
        return False
    os.kill(info.pid, signal.SIGKILL)
    while _pid_alive(info.pid):
        time.sleep(0.05)
    return True


def stop(settings: BrokerSettings, timeout: float = 30.0) -> bool:
    """Controlled shutdown (SIGTERM) of every node at once, SIGKILL after `timeout`.
    False if none ran."""
    nodes = layout(settings)
    running = [info for n in nodes if (info := _node_status(n)) is not None]
    for info in running:
        os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(_pid_alive(i.pid) for i in running) and time.monotonic() < deadline:
        time.sleep(0.2)
    for info in running:
        if _pid_alive(info.pid):
            log.warning("node %d ignored SIGTERM for %.0fs; killing it", info.node_id, timeout)
            os.kill(info.pid, signal.SIGKILL)
            while _pid_alive(info.pid):
                time.sleep(0.1)
    for n in nodes:
        _meta_path(n).unlink(missing_ok=True)
    return bool(running)


def _log_tail(data: Path, lines: int = 40) -> str:
    log_file = data / "broker.log"
    if not log_file.exists():
        return "(no broker.log)"
    return "\n".join(log_file.read_text(errors="replace").splitlines()[-lines:])
