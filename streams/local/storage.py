"""A node's KRaft log folder: formatted once by Kafka's storage tool, and the mode
(plaintext or secure) it was formatted with, which the folder keeps for good.

A secure node's first metadata holds the admin's SCRAM credential, so the password
is handed to the tool in a private argument file, never on the command line.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from streams.local.jars import java
from streams.local.nodes import BrokerError, layout
from streams.security import credentials
from streams.security.acls import ADMIN
from streams.settings import BrokerSettings


def recorded_secure(settings: BrokerSettings) -> bool | None:
    """The mode the data folder was formatted with; None before it is formatted."""
    log_dir = layout(settings)[0].data_dir / "kraft-logs"
    if not (log_dir / "meta.properties").exists():
        return None
    return formatted_secure(log_dir)


def in_recorded_mode(settings: BrokerSettings) -> BrokerSettings:
    """`settings` in the mode its data folder was formatted with (a folder formatted
    secure stays secure without the flag being repeated)."""
    if not settings.secure and recorded_secure(settings):
        return settings.model_copy(update={"secure": True})
    return settings


def formatted_secure(log_dir: Path) -> bool:
    return (log_dir / ".secure").exists()


def format_storage(
    classpath: str,
    props: Path,
    log_dir: Path,
    cluster_id: str,
    admin_password: str | None,
    jvm_options: list[str],
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
            [java(), *jvm_options, "-cp", classpath, f"@{argfile}"],
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
