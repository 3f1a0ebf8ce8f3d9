"""A real Apache Kafka (KRaft, combined broker+controller nodes) without Docker.

One node by default; ``nodes=3`` (``pagestream broker start --nodes 3``) runs a
local three-node cluster whose internal topics are replicated three times with
min.insync.replicas 2, so one node can die and come back while clients keep
working. Node k (1-based) listens on ``port + 10*(k-1)`` and its controller on
``controller_port + 10*(k-1)``; a multi-node cluster keeps node k in
``data_dir/node-k`` and its layout in ``data_dir/cluster.json`` (so ``stop`` and
``status`` need no flags). The jars come from Maven Central through
``ops/kafka/pom.xml`` into a cache folder outside git; each node runs as a
detached JVM whose pid and version are recorded in its folder. The same jars run
Kafka's own command-line tools.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import signal
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from streams.security import credentials
from streams.security import tls as broker_tls
from streams.security.acls import ADMIN
from streams.settings import BrokerSettings, KafkaSettings

log = logging.getLogger(__name__)

_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
_TOOL_LOG4J = """\
status = error
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %p %m%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""
_BROKER_LOG4J = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.state.name = state.change.logger
logger.state.level = WARN
"""


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


def kafka_version(settings: BrokerSettings) -> str:
    """The Kafka version pinned in the pom (the single source of that fact)."""
    root = ET.parse(settings.pom).getroot()  # noqa: S314 - our own file
    node = root.find("m:properties/m:kafka.version", _POM_NS)
    if node is None or not node.text:
        raise BrokerError(f"{settings.pom} has no <kafka.version> property")
    return node.text.strip()


def ensure_jars(settings: BrokerSettings) -> Path:
    """Resolve the Kafka jars once; later calls reuse the cache folder."""
    version = kafka_version(settings)
    libs = settings.jars_dir / version / "libs"
    done = libs / ".complete"
    if done.exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError("Maven (mvn) is not on PATH; it resolves the Kafka jars")
    tmp = libs.with_name("libs.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    log.info("resolving Apache Kafka %s jars with Maven into %s", version, libs)
    cmd = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(settings.pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={tmp}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)  # noqa: S603
    if proc.returncode != 0:
        raise BrokerError(f"Maven could not resolve the Kafka jars:\n{proc.stdout[-3000:]}")
    shutil.rmtree(libs, ignore_errors=True)
    tmp.rename(libs)
    done.write_text(version)
    return libs


def _classpath(libs: Path) -> str:
    return str(libs / "*")


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise BrokerError("java is not on PATH; the broker needs Java 17 or newer")
    return java


def run_tool(
    settings: BrokerSettings,
    main_class: str,
    *args: str,
    stdin: str | None = None,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's own command-line tools from the cached jars."""
    libs = ensure_jars(settings)
    log4j = libs.parent / "tools-log4j2.properties"
    if not log4j.exists():
        log4j.write_text(_TOOL_LOG4J)
    cmd = [
        _java(),
        "-Xmx256m",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        _classpath(libs),
        main_class,
        *args,
    ]
    return subprocess.run(  # noqa: S603
        cmd, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )


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


def _server_properties(
    settings: BrokerSettings, node: Node, nodes: list[Node], admin_password: str | None = None
) -> str:
    h = settings.host
    # Internal topics as a production cluster has them: three copies, two in sync to
    # acknowledge (with fewer nodes, as many as there are).
    replicas = str(min(3, len(nodes)))
    min_isr = "2" if len(nodes) >= 3 else "1"
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": ",".join(f"{n.node_id}@{h}:{n.controller_port}" for n in nodes),
        "listeners": f"PLAINTEXT://{h}:{node.port},CONTROLLER://{h}:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{h}:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(node.data_dir / "kraft-logs"),
        "num.partitions": "1",
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        # Tests create and join many groups; the default 3 s delay only slows them.
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
    }
    if settings.secure:
        if admin_password is None:
            raise BrokerError("a secure broker needs the admin password")
        props.update(_secure_properties(settings, node, admin_password))
    return "".join(f"{k}={v}\n" for k, v in props.items())


# Kafka's own authorizer for KRaft: ACLs live in the metadata log.
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _secure_properties(settings: BrokerSettings, node: Node, admin_password: str) -> dict[str, str]:
    """One SASL_SSL listener (SCRAM-SHA-512) for clients and for the nodes between them,
    and the authorizer refusing whatever no ACL allows.

    Inter-broker traffic uses the same listener as the admin principal (a super user)
    rather than a separate unauthenticated one: a loopback PLAINTEXT listener would have
    to be a super user too, and anyone on the machine could reach it. The controller
    listener stays on the loopback host; it is SASL_PLAINTEXT with PLAIN (the layout
    Kafka's maintainers give for KRaft in KAFKA-15513: the controllers' own logins do
    not depend on credentials kept in the metadata they serve) for the same reason:
    without a login, a local process could send admin requests to it (KIP-919).
    """
    h = settings.host
    tls = broker_tls.TlsFiles.under(settings.data_dir)
    scram = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN}" password="{admin_password}";'
    )
    plain = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{ADMIN}" password="{admin_password}" user_{ADMIN}="{admin_password}";'
    )
    return {
        "listeners": f"SECURE://{h}:{node.port},CONTROLLER://{h}:{node.controller_port}",
        "advertised.listeners": f"SECURE://{h}:{node.port}",
        "listener.security.protocol.map": "SECURE:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SECURE",
        "sasl.enabled.mechanisms": credentials.MECHANISM,
        "sasl.mechanism.inter.broker.protocol": credentials.MECHANISM,
        "listener.name.secure.scram-sha-512.sasl.jaas.config": scram,
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": plain,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca_cert),
        "ssl.client.auth": "none",
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{ADMIN}",
    }


def recorded_secure(settings: BrokerSettings) -> bool | None:
    """The mode the data folder was formatted with; None before it is formatted."""
    log_dir = layout(settings)[0].data_dir / "kraft-logs"
    if not (log_dir / "meta.properties").exists():
        return None
    return _formatted_secure(log_dir)


def in_recorded_mode(settings: BrokerSettings) -> BrokerSettings:
    """`settings` in the mode its data folder was formatted with (a folder formatted
    secure stays secure without the flag being repeated)."""
    if not settings.secure and recorded_secure(settings):
        return settings.model_copy(update={"secure": True})
    return settings


def admin_kafka(settings: BrokerSettings) -> KafkaSettings:
    """Client settings of the broker's own admin principal (plaintext when not secure)."""
    base = KafkaSettings(
        bootstrap_servers=bootstrap_servers(settings), client_id="pagestream-broker"
    )
    if not (settings.secure or recorded_secure(settings)):
        return base
    return credentials.role_kafka(settings, base, ADMIN)


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
            _java(),
            f"-Xmx{settings.heap}",
            f"-Xms{settings.heap}",
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


def configure(settings: BrokerSettings, cluster_id: str | None = None) -> str:
    """Jars, and per node its server.properties and log4j2 config, its log dir formatted
    once (every node with the same cluster id: `cluster_id`, else a new one); returns
    the classpath."""
    cp = _classpath(ensure_jars(settings))
    nodes = layout(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    recorded = recorded_secure(settings)
    if recorded is not None and recorded != settings.secure:
        # Checked before anything is written: a running node's files stay as they are.
        mode = {True: "secure", False: "plaintext"}
        raise BrokerError(
            f"{settings.data_dir} holds a {mode[recorded]} broker; use another data folder "
            f"to run it {mode[settings.secure]}"
        )
    admin_password = None
    if settings.secure:
        broker_tls.ensure(settings.data_dir, [settings.host])
        admin_password = credentials.ensure(settings)[ADMIN].get_secret_value()
    cluster_file = settings.data_dir / "cluster.json"
    if len(nodes) > 1:
        if cluster_file.exists():
            cluster_id = json.loads(cluster_file.read_text())["cluster_id"]
        else:
            cluster_id = cluster_id or new_cluster_id()
            cluster_file.write_text(json.dumps({"nodes": len(nodes), "cluster_id": cluster_id}))
    for node in nodes:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        props = node.data_dir / "server.properties"
        # A secure node's properties hold the admin password (its JAAS lines).
        props.touch(mode=0o600)
        props.chmod(0o600)
        props.write_text(_server_properties(settings, node, nodes, admin_password))
        (node.data_dir / "log4j2.properties").write_text(_BROKER_LOG4J)
        log_dir = node.data_dir / "kraft-logs"
        if not (log_dir / "meta.properties").exists():
            cluster_id = cluster_id or new_cluster_id()
            _format_storage(cp, props, log_dir, cluster_id, admin_password)
    return cp


def _formatted_secure(log_dir: Path) -> bool:
    return (log_dir / ".secure").exists()


def _format_storage(
    classpath: str, props: Path, log_dir: Path, cluster_id: str, admin_password: str | None
) -> None:
    """Kafka's storage tool: write meta.properties for a new KRaft node; a secure node
    gets the admin's SCRAM credential in its first metadata (the node authenticates
    as admin to itself before anyone could create users)."""
    args = [
        "kafka.tools.StorageTool",
        "format",
        # Joined with "=": an id that begins with '-' would otherwise be read as an
        # option ("argument --cluster-id/-t: expected one argument").
        f"--cluster-id={cluster_id}",
        "-c",
        str(props),
    ]
    if admin_password is not None:
        args += ["--add-scram", f"{credentials.MECHANISM}=[name={ADMIN},password={admin_password}]"]
    # The arguments travel in a java @argument file (0600, deleted after), not argv: the
    # password must not show in `ps`.
    argfile = props.with_name("format.args")
    argfile.touch(mode=0o600)
    argfile.chmod(0o600)
    argfile.write_text("\n".join(f'"{a}"' for a in args) + "\n")
    try:
        fmt = subprocess.run(  # noqa: S603
            # The class path stays outside: the launcher does not expand its "*" in a file.
            [_java(), "-cp", classpath, f"@{argfile}"],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        argfile.unlink(missing_ok=True)
    if fmt.returncode != 0:
        out = f"{fmt.stdout}{fmt.stderr}"
        if admin_password is not None:
            out = out.replace(admin_password, "***")
        raise BrokerError(f"formatting {log_dir} failed:\n{out}")
    if admin_password is not None:
        (log_dir / ".secure").touch()


def new_cluster_id() -> str:
    """16 random bytes, URL-safe base64 without padding; like Kafka's Uuid.randomUuid,
    never one that begins with '-' (tools read such an id as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _log_tail(data: Path, lines: int = 40) -> str:
    log_file = data / "broker.log"
    if not log_file.exists():
        return "(no broker.log)"
    return "\n".join(log_file.read_text(errors="replace").splitlines()[-lines:])
