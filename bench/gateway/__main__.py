"""`python -m bench.gateway`: load the gateway with Locust; print and write the figures
(see the package's docstring)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer

from bench.gateway.figures import markdown
from bench.gateway.run import run

app = typer.Typer(add_completion=False)


@app.command()
def main(
    users: Annotated[int, typer.Option(min=1, help="Locust users")] = 20,
    seconds: Annotated[float, typer.Option(min=5, help="length of the load")] = 60.0,
    rounds: Annotated[int, typer.Option(min=10, help="idle rounds of each step")] = 200,
    out: Annotated[Path, typer.Option(help="gateway.md, gateway.json, Locust's CSVs")] = Path(
        "bench/results/gateway"
    ),
    bootstrap: Annotated[str | None, typer.Option(help="use this cluster")] = None,
) -> None:
    """Load the gateway with Locust; print and write the figures."""
    logging.basicConfig(level=logging.WARNING)
    report = run(users, seconds, rounds, out, bootstrap)
    text = markdown(report)
    (out / "gateway.md").write_text(text)
    (out / "gateway.json").write_text(json.dumps(report.as_dict(), indent=2, default=str) + "\n")
    typer.echo(text)


if __name__ == "__main__":
    app()
