"""`pagestream lag` must print the numbers Kafka's own tool prints."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from confluent_kafka import TopicPartition
from typer.testing import CliRunner

from streams.admin import lag, records
from streams.cli import app
from streams.kafka import clients as kafka
from streams.local import broker
from streams.settings import BrokerSettings, Settings
from tests.support.pages import produce_transactional

pytestmark = pytest.mark.kafka

Row = tuple[str, int, int | None, int, int | None]


def _reference(broker_settings: BrokerSettings, bootstrap: str, group: str) -> set[Row]:
    """Rows of `kafka-consumer-groups --describe` (Apache Kafka's own tool)."""
    proc = broker.run_tool(
        broker_settings,
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "--bootstrap-server",
        bootstrap,
        "--describe",
        "--group",
        group,
    )
    assert proc.returncode == 0, proc.stderr
    rows = set()
    for line in proc.stdout.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == group:

            def num(x: str) -> int | None:
                return None if x == "-" else int(x)

            rows.add((cols[1], int(cols[2]), num(cols[3]), int(cols[4]), num(cols[5])))
    return rows


def _ours(settings: Settings, group: str) -> set[Row]:
    g = lag.group_lag(kafka.admin(settings.kafka), group)
    return {(p.topic, p.partition, p.committed, p.log_end, p.lag) for p in g.partitions}


def test_lag_equals_kafka_consumer_groups_describe(
    settings: Settings,
    broker_settings: BrokerSettings,
    make_topic: Callable[[str, int], str],
    prefix: str,
) -> None:
    topic_a, topic_b = make_topic(f"{prefix}lag.a", 3), make_topic(f"{prefix}lag.b", 2)
    prod = kafka.producer(settings.kafka)
    for i in range(50):
        prod.produce(topic_a, key=f"k{i}".encode(), value=b"x", partition=i % 3)
    for _ in range(7):
        prod.produce(topic_b, value=b"y", partition=0)
    assert prod.flush(30) == 0

    # A group that read part of each log and committed where it stopped.
    group = f"{prefix}group"
    cons = kafka.consumer(settings.kafka, group)
    commits = [
        TopicPartition(topic_a, 0, 5),
        TopicPartition(topic_a, 1, 17),
        TopicPartition(topic_a, 2, 0),
        TopicPartition(topic_b, 0, 7),
    ]
    cons.commit(offsets=commits, asynchronous=False)
    cons.close()

    ours = _ours(settings, group)
    reference = _reference(broker_settings, settings.kafka.bootstrap_servers, group)
    assert ours == reference
    assert len(ours) == 4
    assert sum(r[4] or 0 for r in ours) == (17 - 5) + (17 - 17) + (16 - 0) + (7 - 7)

    # With a live member the assigned-but-uncommitted partition (topic_b/1) appears as "-".
    live = kafka.consumer(settings.kafka, group)
    live.subscribe([topic_a, topic_b])
    for _ in range(100):
        live.poll(0.2)
        if len(live.assignment()) == 5:
            break
    try:
        ours = _ours(settings, group)
        assert (topic_b, 1, None, 0, None) in ours
        assert ours == _reference(broker_settings, settings.kafka.bootstrap_servers, group)
    finally:
        live.close()


def test_lag_cli_json_totals(
    cli_env: Settings, make_topic: Callable[[str, int], str], prefix: str
) -> None:
    topic = make_topic(f"{prefix}lag.cli", 1)
    prod = kafka.producer(cli_env.kafka)
    for _ in range(9):
        prod.produce(topic, value=b"z")
    assert prod.flush(30) == 0
    group = f"{prefix}cli"
    cons = kafka.consumer(cli_env.kafka, group)
    cons.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    cons.close()

    result = CliRunner().invoke(app, ["lag", "--group", group, "--json"])
    assert result.exit_code == 0, result.output
    (g,) = json.loads(result.output)
    assert g["total_lag"] == 5
    assert g["partitions"][0]["log_end"] == 9
    # For people: a line per topic, or (--partitions) per partition.
    shown = CliRunner().invoke(app, ["lag", "--group", group])
    assert shown.exit_code == 0, shown.output
    assert f"group {group} (EMPTY), total lag 5 records" in shown.output
    rows = [ln.split() for ln in shown.output.splitlines() if ln.startswith(f"  {topic} ")]
    assert rows == [[topic, "1", "5", "no", "consumer"]], shown.output
    shown = CliRunner().invoke(app, ["lag", "--group", group, "--partitions"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[lines.index(f"  {topic}") + 1].split() == ["0", "4", "9", "5", "5", "-"]


def test_lag_in_records_leaves_out_transaction_markers_and_aborted_records(
    settings: Settings,
    broker_settings: BrokerSettings,
    make_topic: Callable[[str, int], str],
    prefix: str,
) -> None:
    """A group that read everything a transactional producer wrote reads lag 0 records,
    where Kafka's tool shows 1 (the commit marker); aborted records are not lag either."""
    topic = make_topic(f"{prefix}lag.tx", 1)
    produce_transactional(settings, topic, [b"a", b"b", b"c"], commit=True)  # offsets 0-2, marker 3
    group = f"{prefix}tx"
    cons = kafka.consumer(settings.kafka, group)
    cons.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    cons.close()
    counter = records.record_counter(settings.kafka)
    admin = kafka.admin(settings.kafka)
    try:
        (row,) = lag.group_lag(admin, group, counter).partitions
        assert (row.committed, row.log_end, row.lag, row.records) == (3, 4, 1, 0)
        assert lag.group_lag(admin, group, counter).total_lag == 0
        # Kafka's own tool counts the marker.
        reference = _reference(broker_settings, settings.kafka.bootstrap_servers, group)
        assert reference == {(topic, 0, 3, 4, 1)}

        # An aborted transaction (offsets 4-5, marker 6), then two plain records (7, 8).
        produce_transactional(settings, topic, [b"x", b"y"], commit=False)
        prod = kafka.producer(settings.kafka)
        for v in (b"p", b"q"):
            prod.produce(topic, value=v, partition=0)
        assert prod.flush(30) == 0
        (row,) = lag.group_lag(admin, group, counter).partitions
        assert (row.lag, row.records) == (6, 2)
        assert row.oldest_ms is not None and row.oldest_ms > 0

        # A span longer than the scan limit counts offset for offset past its first
        # offset (never hides lag), and still knows its first record's timestamp.
        short = records.RecordCounter(counter._consumer, scan_limit=2)
        (row,) = lag.group_lag(admin, group, short).partitions
        assert row.records == 9 - 4  # offset 3 (the marker) read: no record; 4-8 counted
        assert row.oldest_ms is not None
    finally:
        counter.close()


def test_lag_cli_prints_records_beside_offsets(
    cli_env: Settings, make_topic: Callable[[str, int], str], prefix: str
) -> None:
    topic = make_topic(f"{prefix}lag.cli.tx", 1)
    produce_transactional(cli_env, topic, [b"a", b"b"], commit=True)
    group = f"{prefix}clitx"
    cons = kafka.consumer(cli_env.kafka, group)
    cons.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    cons.close()
    result = CliRunner().invoke(app, ["lag", "--group", group, "--json"])
    assert result.exit_code == 0, result.output
    (g,) = json.loads(result.output)
    assert g["total_lag"] == 0
    assert (g["partitions"][0]["lag"], g["partitions"][0]["records"]) == (1, 0)


def test_records_lag_covers_partitions_the_group_never_committed_on(
    settings: Settings, make_topic: Callable[[str, int], str], prefix: str
) -> None:
    """A stopped group that committed on partition 0 only: the records waiting on
    partition 1 are lag (it would start there from the log start), though Kafka's tool
    shows no row for that partition."""
    topic = make_topic(f"{prefix}lag.uncommitted", 2)
    prod = kafka.producer(settings.kafka)
    for p, n in ((0, 2), (1, 3)):
        for _ in range(n):
            prod.produce(topic, value=b"v", partition=p)
    assert prod.flush(30) == 0
    group = f"{prefix}partial"
    cons = kafka.consumer(settings.kafka, group)
    cons.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    cons.close()
    admin = kafka.admin(settings.kafka)
    assert [(p.partition, p.lag) for p in lag.group_lag(admin, group).partitions] == [(0, 0)]
    counter = records.record_counter(settings.kafka)
    try:
        g = lag.group_lag(admin, group, counter)
    finally:
        counter.close()
    rows = [(p.partition, p.committed, p.position, p.records) for p in g.partitions]
    assert rows == [(0, 2, 2, 0), (1, None, 0, 3)]
    assert g.total_lag == 3
