"""`pagestream schemas export`: the JSON Schemas of the record contracts."""

from __future__ import annotations

from pathlib import Path

import typer

from schemas import export_json_schemas
from streams.cli.common import out

schemas_app = typer.Typer(no_args_is_help=True, help="Message contracts.")


def register(app: typer.Typer) -> None:
    app.add_typer(schemas_app, name="schemas")


@schemas_app.command("export")
def schemas_export(out_dir: Path) -> None:
    """Write the JSON Schema of every record and extraction model to OUT_DIR."""
    for path in export_json_schemas(out_dir):
        out.print(str(path))
