"""Shared CLI plumbing: the console, progress bars and settings resolved once at the edge."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from pgmr.config import resolve_data_dir
from pgmr.precision import DEFAULT_PRECISION, check_precision

T = TypeVar("T")
console = Console(stderr=True)
out = Console()


def usage_error_callback(check: Callable[[T], T]) -> Callable[[T], T]:
    """A typer callback from a settings check: the checked value, or a usage error (exit 2) with the check's
    message (e.g. a precision name and the choices)."""

    def callback(value: T) -> T:
        try:
            return check(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    return callback


# Every command that loads a model or encodes queries (ask, serve, generate, demo, the experiments); a bad value is
# a usage error (exit 2) before anything loads.
PRECISION_OPTION = typer.Option(
    DEFAULT_PRECISION,
    "--precision",
    callback=usage_error_callback(check_precision),
    help="Number format of the models and the query encoder: auto (bfloat16 where the hardware computes it "
    "natively, else float32), fp32 or bf16",
)


@dataclass(frozen=True)
class Settings:
    data_dir_option: Path | None

    @property
    def data_dir(self) -> Path:
        return resolve_data_dir(self.data_dir_option)


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    with progress_bar() as bar:
        task = bar.add_task(description, total=total)
        for item in items:
            yield item
            bar.advance(task)


@contextmanager
def progress_callback(description: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar driven by the core's `progress(done, total)` callbacks (memory builds, dump reads)."""
    with progress_bar() as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def word_limit(words: int) -> int | None:
    """A words-per-description option: a negative value means whole descriptions (None)."""
    return None if words < 0 else words


def print_error(message: object) -> None:
    """An error line; the message is escaped, since user text may hold [brackets] rich would read as markup."""
    from rich.markup import escape

    console.print(f"[red]error:[/red] {escape(str(message))}")
