"""A Kafka cluster for a benchmark run: the one given, or a throw-away broker."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.processes import free_port, free_ports
from streams.local import broker
from streams.settings import BrokerSettings, TopicSettings


def cluster_settings(
    data_dir: Path, nodes: int = 1, heap: str = "768m", *, secure: bool = False
) -> BrokerSettings:
    """An embedded broker of `nodes` nodes on free ports (every node's, not only the
    first's) with its data in `data_dir`; `secure`: SASL_SSL on every listener."""
    port = free_ports(nodes, broker.NODE_PORT_STEP)[0]
    controller_port = free_ports(nodes, broker.NODE_PORT_STEP)[0]
    return BrokerSettings(nodes=nodes, port=port, controller_port=controller_port,
                          data_dir=data_dir, heap=heap, secure=secure)  # fmt: skip


def replicated_topics(prefix: str, nodes: int) -> TopicSettings:
    """Topics as a production cluster of `nodes` brokers has them: three copies and two
    in sync to acknowledge once there are three brokers."""
    replicas = min(3, nodes)
    return TopicSettings(
        prefix=prefix, replication_factor=replicas, min_insync_replicas=2 if replicas >= 3 else None
    )


@contextmanager
def cluster(bootstrap: str | None, nodes: int = 1) -> Iterator[tuple[str, Path]]:
    """The bootstrap address and a scratch directory (deleted on exit). Without
    `bootstrap`, a broker of `nodes` nodes on free ports with its data in the scratch
    directory, stopped on exit."""
    with tempfile.TemporaryDirectory(prefix="pagestream-bench-") as tmp:
        scratch = Path(tmp)
        if bootstrap is not None:
            yield bootstrap, scratch
            return
        settings = cluster_settings(scratch / "broker", nodes)
        try:
            yield broker.start(settings).bootstrap, scratch
        finally:
            broker.stop(settings)


def pipeline_environment(scratch: Path, name: str) -> dict[str, str]:
    """The settings of a whole pipeline of its own (`pagestream up`'s processes inherit
    them): a broker on free ports, its data, blobs and agents' state in `scratch`, the
    GPU node on CPU with a transactional id named after `name`."""
    bs = cluster_settings(scratch / "broker")
    return {
        "PAGESTREAM_BROKER__PORT": str(bs.port),
        "PAGESTREAM_BROKER__CONTROLLER_PORT": str(bs.controller_port),
        "PAGESTREAM_BROKER__DATA_DIR": str(bs.data_dir),
        "PAGESTREAM_BROKER__HEAP": bs.heap,
        "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap_servers(bs),
        "PAGESTREAM_BLOBS__ROOT": str(scratch / "blobs"),
        "PAGESTREAM_AGENTS__DATA_DIR": str(scratch / "agents"),
        "PAGESTREAM_AGENTS__WEB_PORT": str(free_port()),
        "PAGESTREAM_API__PORT": str(free_port()),
        "PAGESTREAM_NODE__HTTP_HOST": "127.0.0.1",
        "PAGESTREAM_NODE__HTTP_PORT": str(free_port()),
        "PAGESTREAM_NODE__TRANSACTIONAL_ID": f"{name}-{uuid.uuid4().hex[:8]}",
        "PAGESTREAM_MODELS__DEVICE": "cpu",
    }
