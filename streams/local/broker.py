"""A real Apache Kafka (KRaft, combined broker+controller nodes) without Docker.

One node by default; ``nodes=3`` (``pagestream broker start --nodes 3``) runs a
local three-node cluster whose internal topics are replicated three times with
min.insync.replicas 2, so one node can die and come back while clients keep
working. Node k (1-based) listens on ``port + 10*(k-1)`` and its controller on
``controller_port + 10*(k-1)``; a multi-node cluster keeps node k in
``data_dir/node-k`` and its layout in ``data_dir/cluster.json`` (so ``stop`` and
``status`` need no flags). The jars come from Maven Central through
``streams/local/pom.xml`` into a cache folder outside git; each node runs as a
detached JVM whose pid and version are recorded in its folder. The same jars run
Kafka's own command-line tools.

This module is the public face (``from streams.local import broker``;
``broker.start(settings)``); the work is done by one module per job:

    nodes.py    the cluster's shape: nodes, ports, folders (and BrokerError)
    jars.py     the Kafka jars from Maven, the JVM, Kafka's command-line tools
    config.py   each node's server.properties (plaintext or secure), the admin client
    storage.py  formatting a node's log folder, the mode it was formatted with
    process.py  start, stop, kill, status of the detached JVMs
"""

from __future__ import annotations

from streams.local.config import AUTHORIZER, admin_kafka, configure
from streams.local.jars import ensure_jars, kafka_version, run_tool
from streams.local.nodes import NODE_PORT_STEP, BrokerError, Node, bootstrap_servers, layout
from streams.local.process import (
    BrokerInfo,
    NodeInfo,
    answers_metadata,
    kill_node,
    start,
    status,
    stop,
)
from streams.local.storage import in_recorded_mode, new_cluster_id, recorded_secure

__all__ = [
    "AUTHORIZER",
    "NODE_PORT_STEP",
    "BrokerError",
    "BrokerInfo",
    "Node",
    "NodeInfo",
    "admin_kafka",
    "answers_metadata",
    "bootstrap_servers",
    "configure",
    "ensure_jars",
    "in_recorded_mode",
    "kafka_version",
    "kill_node",
    "layout",
    "new_cluster_id",
    "recorded_secure",
    "run_tool",
    "start",
    "status",
    "stop",
]
