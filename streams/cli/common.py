"""What every command module shares: the consoles and the settings."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

from streams.settings import Settings

out = Console()
# soft_wrap: error lines stay whole for grep and log collectors.
err = Console(stderr=True, soft_wrap=True)


def settings() -> Settings:
    return Settings()


def fail(message: str, code: int = 1) -> NoReturn:
    """Print `message` on stderr (as is: no markup) and exit with `code`."""
    err.print(message, style="red", markup=False, highlight=False)
    raise typer.Exit(code)
