"""`pagestream acls apply|show`: the principals and rights declared in streams/acls.py."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from streams import acls, acls_apply, credentials, kafka
from streams.cli.common import fail, out, settings
from streams.kafka_errors import explain

acls_app = typer.Typer(
    no_args_is_help=True, help="Principals and ACLs declared in streams/acls.py."
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
    return [
        (role.principal, g.kind, g.name, g.pattern, ", ".join(g.operations))
        for role in roles
        for g in role.grants
    ]


def markdown_table(roles: tuple[acls.Role, ...]) -> str:
    head = "| principal | resource | name | pattern | operations |\n|---|---|---|---|---|\n"
    return head + "".join(f"| {' | '.join(f'`{c}`' if i == 2 else c for i, c in enumerate(r))} |\n"
                          for r in rows(roles))  # fmt: skip


def _table(roles: tuple[acls.Role, ...]) -> None:
    title = f"ACLs (User:{acls.ADMIN} is a super user; everything else is refused)"
    table = Table("principal", "resource", "name", "pattern", "operations", title=title)
    for row in rows(roles):
        table.add_row(*row)
    out.print(table)
