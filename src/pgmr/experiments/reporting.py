"""How experiments tell a person what they are doing, without knowing how it is shown.

The experiments run in the CLI (rich progress bars and coloured notes: `pgmr.cli.experiment_options`), in tests and
in notebooks (quiet). They call a `Reporter`; the CLI passes its own, everything else gets `QUIET`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

# Called with how many more items are done.
Advance = Callable[[int], None]


class Reporter(Protocol):
    def progress(self, description: str, total: int) -> AbstractContextManager[Advance]:
        """A unit of work of `total` items; the block calls the yielded `advance(k)` as items are done."""
        ...

    def status(self, message: str) -> AbstractContextManager[None]:
        """Something slow without a count (loading a memory)."""
        ...

    def note(self, message: str) -> None:
        """A line of plain text for the reader (never markup)."""
        ...

    def warn(self, message: str) -> None:
        """A line about something missing or skipped (a model, a plot): the run goes on."""
        ...


class Quiet:
    """Says nothing: the default outside the CLI."""

    @contextmanager
    def progress(self, description: str, total: int) -> Iterator[Advance]:
        yield lambda k: None

    @contextmanager
    def status(self, message: str) -> Iterator[None]:
        yield

    def note(self, message: str) -> None:
        return

    def warn(self, message: str) -> None:
        return


QUIET: Reporter = Quiet()

__all__ = ["QUIET", "Advance", "Quiet", "Reporter"]
