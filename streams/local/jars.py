"""The Kafka jars and the JVM that runs them.

The jars come from Maven Central through ``streams/local/pom.xml`` (the one place the
Kafka version is pinned) into a cache folder outside git, once per version. The
same jars run the broker and Kafka's own command-line tools (`run_tool`).
"""

from __future__ import annotations

import fcntl
import logging
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from streams.local.nodes import BrokerError
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


def kafka_version(settings: BrokerSettings) -> str:
    """The Kafka version pinned in the pom (the single source of that fact)."""
    root = ET.parse(settings.pom).getroot()  # noqa: S314 - our own file
    node = root.find("m:properties/m:kafka.version", _POM_NS)
    if node is None or not node.text:
        raise BrokerError(f"{settings.pom} has no <kafka.version> property")
    return node.text.strip()


def ensure_jars(settings: BrokerSettings) -> Path:
    """Resolve the Kafka jars once; later calls reuse the cache folder.

    Processes that start together on a fresh machine (test workers, `pagestream up`
    beside a cluster's nodes) resolve them once: the first takes the folder's lock
    and the others wait for it, then find the jars. Each resolution writes into a
    folder of its own, renamed into place once Maven is done, so a failed or killed
    one is never taken for the jars.
    """
    version = kafka_version(settings)
    libs = settings.jars_dir / version / "libs"
    done = libs / ".complete"
    if done.exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError("Maven (mvn) is not on PATH; it resolves the Kafka jars")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with (libs.parent / ".resolve.lock").open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # released when the file closes
        if done.exists():
            return libs
        tmp = Path(tempfile.mkdtemp(prefix="libs.partial.", dir=libs.parent))
        try:
            log.info("resolving Apache Kafka %s jars with Maven into %s", version, libs)
            cmd = [mvn, "-q", "-B", "-f", str(settings.pom),
                   "dependency:copy-dependencies", f"-DoutputDirectory={tmp}"]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)  # noqa: S603
            if proc.returncode != 0:
                raise BrokerError(f"Maven could not resolve the Kafka jars:\n{proc.stdout[-3000:]}")
            shutil.rmtree(libs, ignore_errors=True)
            tmp.rename(libs)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        done.write_text(version)
    return libs


def classpath(libs: Path) -> str:
    return str(libs / "*")


def java() -> str:
    path = shutil.which("java")
    if path is None:
        raise BrokerError("java is not on PATH; the broker needs Java 17 or newer")
    return path


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
        java(),
        *settings.jvm_options,
        "-Xmx256m",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        classpath(libs),
        main_class,
        *args,
    ]
    return subprocess.run(  # noqa: S603
        cmd, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
