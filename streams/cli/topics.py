"""`pagestream topics apply|list`: the topics declared in streams/topics.py."""

from __future__ import annotations

import typer
from rich.table import Table

from streams.admin import topics_apply
from streams.cli.common import out, settings
from streams.kafka import clients as kafka

topics_app = typer.Typer(no_args_is_help=True, help="Topics declared in streams/topics.py.")


def register(app: typer.Typer) -> None:
    app.add_typer(topics_app, name="topics")


@topics_app.command("apply")
def topics_apply_cmd() -> None:
    """Create missing topics, raise partition counts, align configs."""
    s = settings()
    changes = topics_apply.apply(
        kafka.admin(s.kafka),
        s.topology,
        s.topics.replication_factor,
        s.topics.min_insync_replicas,
        max_record_bytes=s.kafka.max_record_bytes,
    )
    for change in changes:
        out.print(str(change))
    if not changes:
        out.print("nothing changed: every topic matches streams/topics.py")


@topics_app.command("list")
def topics_list() -> None:
    """The declared topics, their purpose and configs."""
    s = settings()
    table = Table("topic", "partitions", "configs", "purpose")
    for name, spec in s.topology.specs():
        configs = " ".join(f"{k}={v}" for k, v in spec.configs().items())
        table.add_row(name, str(spec.partitions), configs, spec.purpose)
    out.print(table)
