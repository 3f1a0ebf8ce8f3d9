"""What every command module shares: the consoles, the settings and the progress bar."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

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


@contextmanager
def progress_bar(label: str, *, disable: bool = False) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr, moved by the `(done, total)` callback it yields (the form
    the library functions' `on_progress` parameters take, so they need no rich). Off when
    stderr is not a terminal: test and CI logs get no bar frames."""
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=disable or not err.is_terminal,
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        with _logs_above(bar):
            yield update


@contextmanager
def _logs_above(bar: Progress) -> Iterator[None]:
    """Log lines printed above a live bar instead of through it: the bar replaced
    sys.stderr with a proxy that does so, but a logging handler kept the stream it had."""
    plain = [
        h
        for h in logging.getLogger().handlers
        if type(h) is logging.StreamHandler and h.stream is sys.__stderr__
    ]
    moved = not bar.disable and sys.stderr is not sys.__stderr__
    for handler in plain if moved else []:
        handler.setStream(sys.stderr)
    try:
        yield
    finally:
        for handler in plain if moved else []:
            handler.setStream(sys.__stderr__)
