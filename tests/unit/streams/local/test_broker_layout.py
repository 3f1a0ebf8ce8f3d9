"""Where the embedded cluster's nodes live and listen (no JVM started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.local import broker, config
from streams.settings import BrokerSettings


def test_one_node_keeps_the_data_folder_and_ports(tmp_path: Path) -> None:
    s = BrokerSettings(port=9092, controller_port=9093, data_dir=tmp_path)
    assert broker.layout(s) == [broker.Node(1, 9092, 9093, tmp_path)]
    assert broker.bootstrap_servers(s) == "127.0.0.1:9092"


def test_three_nodes_step_their_ports_and_have_folders_of_their_own(tmp_path: Path) -> None:
    s = BrokerSettings(nodes=3, port=9092, controller_port=9093, data_dir=tmp_path)
    nodes = broker.layout(s)
    assert [(n.node_id, n.port, n.controller_port) for n in nodes] == [
        (1, 9092, 9093), (2, 9102, 9103), (3, 9112, 9113)]  # fmt: skip
    assert [n.data_dir for n in nodes] == [tmp_path / f"node-{k}" for k in (1, 2, 3)]
    assert broker.bootstrap_servers(s) == "127.0.0.1:9092,127.0.0.1:9102,127.0.0.1:9112"


def test_every_node_votes_and_internal_topics_need_two_of_three(tmp_path: Path) -> None:
    s = BrokerSettings(nodes=3, port=9092, controller_port=9093, data_dir=tmp_path)
    nodes = broker.layout(s)
    props = dict(
        line.split("=", 1) for line in config.server_properties(s, nodes[1], nodes).splitlines()
    )
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093,2@127.0.0.1:9103,3@127.0.0.1:9113"
    assert props["transaction.state.log.replication.factor"] == "3"
    assert props["transaction.state.log.min.isr"] == "2"
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["min.insync.replicas"] == "2"


def test_a_data_folder_keeps_the_node_count_it_was_made_with(tmp_path: Path) -> None:
    (tmp_path / "kraft-logs").mkdir()
    (tmp_path / "kraft-logs" / "meta.properties").write_text("cluster.id=x\n")
    with pytest.raises(broker.BrokerError, match="holds a 1-node cluster, not 3"):
        broker.layout(BrokerSettings(nodes=3, data_dir=tmp_path))
    (tmp_path / "kraft-logs" / "meta.properties").unlink()
    (tmp_path / "cluster.json").write_text('{"nodes": 3, "cluster_id": "x"}')
    # stop/status without --nodes find all three from the folder.
    assert len(broker.layout(BrokerSettings(data_dir=tmp_path))) == 3
