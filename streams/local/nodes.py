"""The shape of the embedded cluster: its nodes, their ports and folders.

Node k (1-based) listens on ``port + 10*(k-1)`` and its controller on
``controller_port + 10*(k-1)``; a multi-node cluster keeps node k in
``data_dir/node-k`` and its layout in ``data_dir/cluster.json``, so ``stop`` and
``status`` need no flags. Every other module of streams/local/ starts from here,
and ``BrokerError`` (the one error the embedded broker raises) lives here for that reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from streams.settings import BrokerSettings


class BrokerError(RuntimeError):
    pass


# Node k's ports are the base ports plus this times (k - 1).
NODE_PORT_STEP = 10


@dataclass(frozen=True)
class Node:
    """Where one KRaft node of the embedded cluster lives."""

    node_id: int
    port: int
    controller_port: int
    data_dir: Path


def layout(settings: BrokerSettings) -> list[Node]:
    """The nodes of the cluster in data_dir: as recorded when it was formatted, else
    as `settings.nodes` asks. A data folder keeps the node count it was made with."""
    recorded = _recorded_nodes(settings)
    if recorded is not None and settings.nodes not in (1, recorded):
        raise BrokerError(
            f"{settings.data_dir} holds a {recorded}-node cluster, not {settings.nodes}; "
            "use another data folder for a different cluster"
        )
    count = recorded or settings.nodes
    if count == 1:
        return [Node(1, settings.port, settings.controller_port, settings.data_dir)]
    return [
        Node(
            k,
            settings.port + NODE_PORT_STEP * (k - 1),
            settings.controller_port + NODE_PORT_STEP * (k - 1),
            settings.data_dir / f"node-{k}",
        )
        for k in range(1, count + 1)
    ]


def bootstrap_servers(settings: BrokerSettings) -> str:
    return ",".join(f"{settings.host}:{node.port}" for node in layout(settings))


def _recorded_nodes(settings: BrokerSettings) -> int | None:
    path = settings.data_dir / "cluster.json"
    if path.exists():
        return int(json.loads(path.read_text())["nodes"])
    if (settings.data_dir / "kraft-logs" / "meta.properties").exists():
        return 1
    return None
