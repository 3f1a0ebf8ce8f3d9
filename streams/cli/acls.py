"""`pagestream acls apply|show`: the principals and rights declared in streams/security/acls.py."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from streams.cli.common import fail, out, settings
from streams.kafka import clients as kafka
from streams.kafka.errors import explain
from streams.security import acls, acls_apply, credentials

acls_app = typer.Typer(
    no_args_is_help=True, help="Principals and ACLs declared in streams/security/acls.py."
)


def register(app: typer.Typer) -> None:
    app.add_typer(acls_app, name="acls")


@acls_app.command("apply")
def acls_apply_cmd(
    users: Annotated[
        bool | None,
        typer.Option(
            "--users/--no-users",
            help="Also create the SCRAM users missing from the cluster, with the passwords "
            "in the embedded broker's credentials folder. Default: when the broker "
            "settings say secure.",
        ),
    ] = None,
    prune: Annotated[
        bool,
        typer.Option(
            help="Delete the declared principals' ACLs that the declaration lacks "
            "(leave off when other pipelines on the cluster share the principals)."
        ),
    ] = False,
) -> None:
    """Make the cluster's ACLs match the declaration (run it as an admin principal)."""
    s = settings()
    roles = acls.for_settings(s)
    passwords = None
    if users if users is not None else s.broker.secure:
        try:
            passwords = credentials.ensure(s.broker)
        except OSError as exc:
            fail(f"cannot read the credentials in {credentials.folder(s.broker)}: {exc}")
        passwords.pop(acls.ADMIN)  # seeded when the broker's storage was formatted
    try:
        changes = acls_apply.apply(kafka.admin(s.kafka), roles, passwords, prune=prune)
    except Exception as exc:
        fail(f"acls apply failed: {explain(exc, s.kafka)}")
    for change in changes:
        out.print(str(change), markup=False, highlight=False)
    if not changes:
        out.print("nothing changed: every principal has exactly the declared rights")
    _table(roles)


@acls_app.command("show")
def acls_show(
    markdown: Annotated[bool, typer.Option("--markdown", help="A Markdown table.")] = False,
) -> None:
    """The declared rights: principal, resource, name, pattern, operations."""
    roles = acls.for_settings(settings())
    if markdown:
        out.print(markdown_table(roles), markup=False, highlight=False, soft_wrap=True)
    else:
        _table(roles)


def rows(roles: tuple[acls.Role, ...]) -> list[tuple[str, str, str, str, str]]:
    """(principal, resource, names, pattern, operations): the grants of a role that differ
    only by name share a row, so the table reads as who may do what."""
    grouped: dict[tuple[str, str, str, str], list[str]] = {}
    for role in roles:
        for g in role.grants:
            key = (role.principal, g.kind, g.pattern, ", ".join(g.operations))
            grouped.setdefault(key, []).append(g.name)
    return [(p, kind, ", ".join(names), pattern, ops)
            for (p, kind, pattern, ops), names in grouped.items()]  # fmt: skip


def markdown_table(roles: tuple[acls.Role, ...]) -> str:
    head = "| principal | resource | names | pattern | operations |\n|---|---|---|---|---|\n"
    body = "".join(
        f"| {p} | {kind} | {', '.join(f'`{n}`' for n in names.split(', '))} | {pattern} | {ops} |\n"
        for p, kind, names, pattern, ops in rows(roles)
    )
    return head + body


def _table(roles: tuple[acls.Role, ...]) -> None:
    title = f"ACLs (User:{acls.ADMIN} is a super user; everything else is refused)"
    table = Table("principal", "resource", "names", "pattern", "operations", title=title)
    for row in rows(roles):
        table.add_row(*row)
    out.print(table)
