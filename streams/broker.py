"""A real single-node Apache Kafka (KRaft, combined mode) without Docker.

The jars come from Maven Central through ``ops/kafka/pom.xml`` into a cache
folder outside git; the broker runs as a detached JVM whose pid, ports and
version are recorded in its data directory so ``stop`` and ``status`` work from
another process. The same jars run Kafka's own command-line tools.
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

from confluent_kafka.admin import AdminClient

from streams.settings import BrokerSettings

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


@dataclass(frozen=True)
class BrokerInfo:
    pid: int
    version: str
    bootstrap: str
    data_dir: Path


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


def _server_properties(settings: BrokerSettings, log_dir: Path) -> str:
    h, p, c = settings.host, settings.port, settings.controller_port
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{h}:{c}",
        "listeners": f"PLAINTEXT://{h}:{p},CONTROLLER://{h}:{c}",
        "advertised.listeners": f"PLAINTEXT://{h}:{p}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        # One node: every internal topic must be satisfiable with one replica.
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        # Tests create and join many groups; the default 3 s delay only slows them.
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _meta_path(settings: BrokerSettings) -> Path:
    return settings.data_dir / "broker.json"


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


def answers_metadata(bootstrap: str, timeout: float = 2.0) -> bool:
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.connection.setup.timeout.ms": 1000,
            # A probe: "connection refused" until the broker listens is the expected
            # answer, not an error worth librdkafka's stderr lines (level 3).
            "log_level": 2,
        }
    )
    try:
        md = admin.list_topics(timeout=timeout)
    except Exception:  # any failure means "not ready yet"
        return False
    return bool(md.brokers)


def status(settings: BrokerSettings) -> BrokerInfo | None:
    """The running broker recorded in data_dir, or None when none is running."""
    meta = _meta_path(settings)
    if not meta.exists():
        return None
    info = json.loads(meta.read_text())
    if not _pid_alive(int(info["pid"])):
        return None
    return BrokerInfo(int(info["pid"]), info["version"], info["bootstrap"], settings.data_dir)


def start(settings: BrokerSettings) -> BrokerInfo:
    """Start the broker (formatting its log dir once); return when it answers metadata."""
    running = status(settings)
    if running is not None:
        return running
    version = kafka_version(settings)
    cp, props = configure(settings)
    data = settings.data_dir
    bootstrap = f"{settings.host}:{settings.port}"
    logfile = (data / "broker.log").open("ab")
    proc = subprocess.Popen(  # noqa: S603
        [
            _java(),
            f"-Xmx{settings.heap}",
            f"-Xms{settings.heap}",
            f"-Dlog4j2.configurationFile={data / 'log4j2.properties'}",
            "-cp",
            cp,
            "kafka.Kafka",
            str(props),
        ],
        stdout=logfile,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # survives the CLI that started it
    )
    logfile.close()
    _meta_path(settings).write_text(
        json.dumps({"pid": proc.pid, "version": version, "bootstrap": bootstrap})
    )
    deadline = time.monotonic() + settings.start_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _meta_path(settings).unlink(missing_ok=True)
            raise BrokerError(f"broker exited with {proc.returncode}:\n{_log_tail(data)}")
        if answers_metadata(bootstrap, timeout=1.0):
            return BrokerInfo(proc.pid, version, bootstrap, data)
        time.sleep(0.25)
    stop(settings)
    raise BrokerError(
        f"broker did not answer within {settings.start_timeout_s}s:\n{_log_tail(data)}"
    )


def stop(settings: BrokerSettings, timeout: float = 30.0) -> bool:
    """Controlled shutdown (SIGTERM), SIGKILL after `timeout`. False if none ran."""
    info = status(settings)
    if info is None:
        _meta_path(settings).unlink(missing_ok=True)
        return False
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _pid_alive(info.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _pid_alive(info.pid):
        log.warning("broker pid %d ignored SIGTERM for %.0fs; killing it", info.pid, timeout)
        os.kill(info.pid, signal.SIGKILL)
        while _pid_alive(info.pid):
            time.sleep(0.1)
    _meta_path(settings).unlink(missing_ok=True)
    return True


def configure(settings: BrokerSettings, cluster_id: str | None = None) -> tuple[str, Path]:
    """Jars, server.properties and log4j2 config in data_dir, and the log dir formatted
    once (with `cluster_id`, else a new one); returns the classpath and the properties."""
    cp = _classpath(ensure_jars(settings))
    data = settings.data_dir
    log_dir = data / "kraft-logs"
    data.mkdir(parents=True, exist_ok=True)
    props = data / "server.properties"
    props.write_text(_server_properties(settings, log_dir))
    (data / "log4j2.properties").write_text(_BROKER_LOG4J)
    if not (log_dir / "meta.properties").exists():
        _format_storage(cp, props, log_dir, cluster_id or new_cluster_id())
    return cp, props


def _format_storage(classpath: str, props: Path, log_dir: Path, cluster_id: str) -> None:
    """Kafka's storage tool: write meta.properties for a new KRaft node."""
    fmt = subprocess.run(  # noqa: S603
        [
            _java(),
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            # Joined with "=": an id that begins with '-' would otherwise be read as an
            # option ("argument --cluster-id/-t: expected one argument").
            f"--cluster-id={cluster_id}",
            "-c",
            str(props),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if fmt.returncode != 0:
        raise BrokerError(f"formatting {log_dir} failed:\n{fmt.stdout}{fmt.stderr}")


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
