"""The secured embedded broker (SASL_SSL, SCRAM-SHA-512, StandardAuthorizer): the pipeline
end to end as one principal per role, and every principal refused outside its rights.

One secure broker for this module, started only when these tests run. Each refusal test
also takes the allowed path with the same principal, so it fails if the ACL or the login
were missing rather than passing because nothing works; refusals are asserted by their
Kafka error code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from pydantic import SecretStr

from bench.cluster import cluster_settings
from bench.processes import free_port
from streams.admin import topics_apply
from streams.kafka import clients as kafka
from streams.kafka import errors as kafka_errors
from streams.local import broker
from streams.security import acls, acls_apply, credentials
from streams.settings import (
    BlobSettings,
    BrokerSettings,
    KafkaSettings,
    Settings,
    TopicSettings,
)
from streams.topics import DLQ, GPU_ORIENT, ORIENTED, RAW, RESULTS
from tests.support.brokers import stop_broker
from tests.support.coordinator import wait_for_group_coordinator
from tests.support.up import EXPECTED, sample_statuses

# One worker runs the module: its secure broker (module-scoped) starts once, not once on
# each worker that --dist loadgroup would hand some of its tests.
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.xdist_group("secure")]


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerSettings]:
    settings = BrokerSettings(
        port=free_port(),
        controller_port=free_port(),
        data_dir=tmp_path_factory.mktemp("secure") / "broker",
        heap="768m",
        secure=True,
    )
    broker.start(settings)
    try:
        wait_for_group_coordinator(broker.admin_kafka(settings))
        yield settings
    finally:
        stop_broker(settings)


@pytest.fixture
def secure(secure_broker: BrokerSettings, tmp_path: Path) -> Settings:
    """Settings of a pipeline of its own (topic prefix, GPU group) on the secure broker, as
    admin, with its topics, users and ACLs applied."""
    prefix = f"t{uuid.uuid4().hex[:10]}."
    settings = Settings(
        kafka=broker.admin_kafka(secure_broker),
        broker=secure_broker,
        topics=TopicSettings(prefix=prefix),
        blobs=BlobSettings(root=str(tmp_path / "blobs")),
    )
    admin = kafka.admin(settings.kafka)
    topics_apply.apply(admin, settings.topology)
    passwords = credentials.ensure(secure_broker)
    passwords.pop(acls.ADMIN)
    acls_apply.apply(admin, acls.for_settings(settings), passwords)
    return settings


def _as(settings: Settings, role: str) -> KafkaSettings:
    return credentials.role_kafka(settings.broker, settings.kafka, role)


def _produce(conf: KafkaSettings, topic: str, **overrides: object) -> KafkaError | None:
    """The delivery error of one record (None: written)."""
    producer = kafka.producer(conf, **overrides)
    errors: list[KafkaError | None] = []
    producer.produce(topic, key=b"k", value=b"v", on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0
    return errors[0]


def _read_error(conf: KafkaSettings, topic: str, until: Callable[[KafkaError], bool]) -> KafkaError:
    """Assign partition 0 of `topic` and return the first error `until` accepts."""
    consumer = kafka.consumer(
        conf, f"probe-{uuid.uuid4().hex[:8]}", **{"enable.partition.eof": True}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            err = None if msg is None else msg.error()
            if err is not None and until(err):
                return err
        raise AssertionError(f"no matching error reading {topic}")
    finally:
        consumer.close()


def _is_topic_answer(err: KafkaError) -> bool:
    # An assign-only consumer's group lookup may be refused first (GROUP_AUTHORIZATION_FAILED,
    # no group rights are granted for it): only the topic's answer counts here.
    return err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError._PARTITION_EOF)


def test_the_producer_writes_docs_raw_and_cannot_read_results(secure: Settings) -> None:
    topo = secure.topology
    producer = _as(secure, acls.PRODUCER)
    assert _produce(producer, topo.name(RAW)) is None  # idempotent, without IDEMPOTENT_WRITE
    # Without Describe the topic is hidden from it: no partition to fetch from.
    consumer = kafka.consumer(producer, f"probe-{uuid.uuid4().hex[:8]}")
    try:
        refused = consumer.list_topics(topo.name(RESULTS), timeout=10).topics[topo.name(RESULTS)]
    finally:
        consumer.close()
    assert refused.error is not None
    assert refused.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The reader role is allowed the same read.
    allowed = _read_error(_as(secure, acls.READER), topo.name(RESULTS), _is_topic_answer)
    assert allowed.code() == KafkaError._PARTITION_EOF


def test_the_agents_write_work_topics_and_cannot_write_gpu_facts(secure: Settings) -> None:
    topo = secure.topology
    agents = _as(secure, acls.AGENTS)
    assert _produce(agents, topo.name(GPU_ORIENT)) is None
    refused = _produce(agents, topo.name(ORIENTED))
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(_as(secure, acls.GPU_NODE), topo.name(ORIENTED)) is None


def test_only_the_gpu_node_owns_its_transactional_ids(secure: Settings) -> None:
    own = secure.topology.own(acls.GPU_TRANSACTIONAL_ID_PREFIX)  # behind the topic prefix
    txn = {"transactional.id": f"{own}{uuid.uuid4().hex[:6]}"}
    with pytest.raises(KafkaException) as refused:
        kafka.producer(_as(secure, acls.PRODUCER), **txn).init_transactions(30)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    kafka.producer(_as(secure, acls.GPU_NODE), **txn).init_transactions(30)


def test_the_monitor_reads_lag_but_not_records(secure: Settings) -> None:
    from streams.admin.lag import all_lag
    from streams.admin.records import record_counter

    topo = secure.topology
    gpu = _as(secure, acls.GPU_NODE)
    assert _produce(gpu, topo.name(DLQ)) is None
    monitor = _as(secure, acls.MONITOR)
    refused = _read_error(monitor, topo.name(DLQ), _is_topic_answer)
    assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A group that committed on docs.dlq: the monitor sees its lag, counted offsets.
    dlq_group = secure.dlq_replay_group
    consumer = kafka.consumer(_as(secure, acls.DLQ_REPLAY), dlq_group)
    consumer.commit(offsets=[TopicPartition(topo.name(DLQ), 0, 0)], asynchronous=False)
    consumer.close()
    counter = record_counter(monitor)
    try:
        (lag,) = all_lag(kafka.admin(monitor), [dlq_group], counter)
    finally:
        counter.close()
    assert lag.total_lag >= 1


def test_an_unauthenticated_client_cannot_connect(secure: Settings) -> None:
    plaintext = KafkaSettings(bootstrap_servers=secure.kafka.bootstrap_servers)
    tls_only = plaintext.model_copy(
        update={"security_protocol": "SSL", "ssl_cafile": secure.kafka.ssl_cafile}
    )
    for conf in (plaintext, tls_only):
        admin = kafka.admin(conf.model_copy(update={"client_id": "anonymous"}))
        with pytest.raises(KafkaException) as refused:
            admin.list_topics(timeout=5)
        assert refused.value.args[0].code() == KafkaError._TRANSPORT
    assert secure.topology.name(RAW) in kafka.admin(secure.kafka).list_topics(timeout=10).topics


def test_a_wrong_password_fails_with_a_clear_error_that_shows_no_password(
    secure: Settings,
) -> None:
    wrong = "wrong-" + uuid.uuid4().hex
    right = credentials.role_env(secure.broker, acls.PRODUCER)["PAGESTREAM_KAFKA__SASL_PASSWORD"]
    env = {
        **os.environ,
        **credentials.role_env(secure.broker, acls.PRODUCER),
        "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": secure.kafka.bootstrap_servers,
        "PAGESTREAM_TOPICS__PREFIX": secure.topics.prefix,
        "PAGESTREAM_KAFKA__SASL_PASSWORD": wrong,
        "COLUMNS": "400",
    }
    proc = _cli(env, "results", "--doc-id", "some-doc")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    ours = [line for line in proc.stderr.splitlines() if not line.startswith("%")]
    assert ours and "refused the login of user 'producer'" in ours[-1], proc.stderr[-2000:]
    assert "wrong user name or password" in ours[-1]
    for secret in (wrong, right):
        assert secret not in proc.stdout + proc.stderr
    # The settings layer says the same to a library caller, and masks the password.
    bad = _as(secure, acls.PRODUCER).model_copy(update={"sasl_password": SecretStr(wrong)})
    err = kafka_errors.diagnose(bad)
    assert err is not None and kafka_errors.is_authentication(err)
    text = kafka_errors.explain(KafkaException(err), bad)
    assert "refused the login of user 'producer'" in text and wrong not in text


def test_a_refused_right_is_named_in_one_line(secure: Settings) -> None:
    """The producer asking for results: the CLI names the ACL, not a missing topic."""
    env = {
        **os.environ,
        **credentials.role_env(secure.broker, acls.PRODUCER),
        "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": secure.kafka.bootstrap_servers,
        "PAGESTREAM_TOPICS__PREFIX": secure.topics.prefix,
        "COLUMNS": "400",
    }
    proc = _cli(env, "results")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = [line for line in proc.stderr.splitlines() if not line.startswith("%")][-1]
    assert "refused user 'producer'" in last and "TOPIC_AUTHORIZATION_FAILED" in last, last
    reader = {**env, **credentials.role_env(secure.broker, acls.READER)}
    assert _cli(reader, "results").returncode == 0


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streams", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_the_data_folder_remembers_it_is_secure(secure_broker: BrokerSettings) -> None:
    """`broker status`, `broker start` and `up` without --secure find the mode by themselves."""
    unflagged = secure_broker.model_copy(update={"secure": False})
    assert broker.in_recorded_mode(unflagged).secure
    assert broker.answers_metadata(broker.bootstrap_servers(unflagged), settings=unflagged)
    assert not broker.answers_metadata(broker.bootstrap_servers(unflagged))  # plaintext probe
    props = secure_broker.data_dir / "server.properties"
    before = props.read_text()
    with pytest.raises(broker.BrokerError, match="holds a secure broker"):
        broker.configure(unflagged)
    assert props.read_text() == before  # the running node's files are left alone


def test_acls_apply_twice_changes_nothing_the_second_time(secure: Settings) -> None:
    admin = kafka.admin(secure.kafka)
    roles = acls.for_settings(secure)
    # The fixture applied them. Other tests' pipelines (prefixes) on this broker share
    # the principals: their rights are reported stale, and kept.
    again = acls_apply.apply(admin, roles)
    assert [c for c in again if not c.action.startswith("stale")] == []
    have = acls_apply.current(admin, (r.principal for r in roles))
    assert acls_apply.bindings(roles) <= have


def test_acls_apply_prune_deletes_the_declared_principals_other_rights(
    secure: Settings,
) -> None:
    admin = kafka.admin(secure.kafka)
    roles = acls.for_settings(secure)
    extra = acls.Role(acls.PRODUCER, "", (acls.Grant("topic", secure.topology.name(RESULTS),
                                                      "literal", ("READ",)),))  # fmt: skip
    acls_apply.apply(admin, (extra,))
    (stray,) = acls_apply.bindings((extra,))
    kept = acls_apply.apply(admin, roles)
    assert any(c.action.startswith("stale") and "docs.results" in c.detail for c in kept)
    assert stray in acls_apply.current(admin, [stray.principal])
    pruned = acls_apply.apply(admin, roles, prune=True)
    assert any(c.action == "deleted" and c.detail == acls_apply.describe(stray) for c in pruned)
    have = acls_apply.current(admin, (r.principal for r in roles))
    assert stray not in have and acls_apply.bindings(roles) <= have


def test_up_secure_runs_every_operation_with_no_secret_in_any_log(
    secure: Settings, tmp_path: Path
) -> None:
    """`pagestream up --secure` on the secure broker: GPU node and agents as their own
    principals, samples submitted as the producer, results read as the reader."""
    b = secure.broker
    env = dict(
        os.environ,
        PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS=secure.kafka.bootstrap_servers,
        PAGESTREAM_TOPICS__PREFIX=secure.topics.prefix,
        PAGESTREAM_BLOBS__ROOT=secure.blobs.root,
        PAGESTREAM_BROKER__DATA_DIR=str(b.data_dir),
        PAGESTREAM_BROKER__PORT=str(b.port),
        PAGESTREAM_BROKER__CONTROLLER_PORT=str(b.controller_port),
        PAGESTREAM_AGENTS__WEB_PORT=str(free_port()),
        PAGESTREAM_API__PORT=str(free_port()),
        PAGESTREAM_AGENTS__DATA_DIR=str(tmp_path / "agents"),
        PAGESTREAM_NODE__HTTP_PORT=str(free_port()),
        PAGESTREAM_NODE__MAX_WAIT_MS="50",
        COLUMNS="200",
    )
    # The parent knows no credentials of its own: each process gets its role's.
    env = {k: v for k, v in env.items() if not k.startswith("PAGESTREAM_KAFKA__SASL")}
    passwords = {
        role: credentials.role_env(b, role)["PAGESTREAM_KAFKA__SASL_PASSWORD"]
        for role in acls.ROLES
    }
    out_path = tmp_path / "up.out"
    on_argv: set[str] = set()
    with out_path.open("wb") as out_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streams", "up", "--secure", "--exit-when-done",
             "--timeout", "600"],
            env=env, stdout=out_file, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 700
        while proc.poll() is None and time.monotonic() < deadline:
            # Every command line and environment on the machine while the pipeline runs
            # (the children read their role's file themselves): no password.
            seen = _argv_and_environments()
            on_argv |= {r for r, pw in passwords.items() if any(pw.encode() in t for t in seen)}
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
    printed = out_path.read_text()
    assert proc.wait() == 0, printed[-5000:]
    assert on_argv == set(), f"passwords on a command line or in an environment: {on_argv}"
    assert sample_statuses(printed) == EXPECTED, printed[-5000:]
    # What `up` printed after the last result: the lag of both groups, partition by partition;
    # and the end of the agents' log (a rebalance, a commit refused), to tell why if not 0.
    lag_tables = printed[max(0, printed.find("total lag") - 300) :]
    agents_log = (b.data_dir.parent / "up-logs" / "agents.log").read_text(errors="replace")
    agents_end = "\n".join(ln for ln in agents_log.splitlines() if "%3|" not in ln)[-3000:]
    topo = secure.topology
    for group in (*topo.agents_groups, secure.gpu_group):
        assert re.search(rf"group {re.escape(group)} \(\w+\), total lag 0 records", printed), (
            f"{lag_tables[-6000:]}\n--- agents.log ---\n{agents_end}"
        )

    logs = {"up": printed}
    log_dir = b.data_dir.parent / "up-logs"
    logs |= {p.name: p.read_text(errors="replace") for p in sorted(log_dir.glob("*.log"))}
    logs["broker.log"] = (b.data_dir / "broker.log").read_text(errors="replace")
    assert {"gpu-node.log", "agents.log", "api.log"} <= set(logs)
    assert re.search(r"^HTTP gateway: http://", printed, flags=re.MULTILINE), printed[-3000:]
    # The children did authenticate as their roles: their logs show work, not refusals.
    for name in ("gpu-node.log", "agents.log", "api.log"):
        assert "AUTHORIZATION_FAILED" not in logs[name], logs[name][-3000:]
    dead = _dead_letter_bytes(secure)
    for role, password in passwords.items():
        for name, text in logs.items():
            assert password not in text, f"{role}'s password in {name}"
        assert password.encode() not in dead, f"{role}'s password in a dead letter"


def _argv_and_environments() -> list[bytes]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        for part in ("cmdline", "environ"):
            try:
                found.append((proc / part).read_bytes())
            except OSError:  # the process ended meanwhile, or is not ours to read
                continue
    return found


def _dead_letter_bytes(settings: Settings) -> bytes:
    """Every header and value on this pipeline's docs.dlq, as one blob to search."""
    topic = settings.topology.name(DLQ)
    consumer = kafka.consumer(settings.kafka, f"dlq-scan-{uuid.uuid4().hex[:6]}",
                              **{"enable.partition.eof": True})  # fmt: skip
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    blob = bytearray()
    pending = set(parts)
    deadline = time.monotonic() + 30
    try:
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                continue
            blob += msg.value() or b""
            for _, value in msg.headers() or []:
                blob += value or b""
    finally:
        consumer.close()
    return bytes(blob)


def test_a_three_node_secure_cluster_replicates_between_its_nodes_as_admin(
    tmp_path: Path,
) -> None:
    """Inter-broker traffic is SASL_SSL too: acks=all with min.insync.replicas 2 succeeds
    only if the followers, logging in as admin, fetch from the leader."""
    cluster = cluster_settings(tmp_path / "cluster", nodes=3, heap="384m", secure=True)
    broker.start(cluster)
    try:
        topics = TopicSettings(replication_factor=3, min_insync_replicas=2)
        settings = Settings(kafka=broker.admin_kafka(cluster), broker=cluster, topics=topics)
        admin = kafka.admin(settings.kafka)
        topics_apply.apply(admin, settings.topology, 3, 2)
        passwords = credentials.ensure(cluster)
        passwords.pop(acls.ADMIN)
        acls_apply.apply(admin, acls.for_settings(settings), passwords)
        raw = settings.topology.name(RAW)
        assert _produce(_as(settings, acls.PRODUCER), raw) is None
        refused = _produce(_as(settings, acls.AGENTS), settings.topology.name(ORIENTED))
        assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        partitions = admin.list_topics(raw, timeout=10).topics[raw].partitions.values()
        assert all(sorted(p.isrs) == [1, 2, 3] for p in partitions)
    finally:
        stop_broker(cluster)
