"""`pgmr ask --candidates N`: the several final queries of a result as one table that fits 80 columns."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pgmr.pipeline import MAX_CANDIDATES, AskResult, QueryCandidate

CANDIDATES_OPTION = typer.Option(
    1,
    "--candidates",
    min=1,
    max=MAX_CANDIDATES,
    help="Show up to N final queries with their support, for a person to choose: the answer first, then "
    "the best supported alternatives (1: the answer alone, as without the option)",
)


def _query_lines(sparql: str) -> str:
    """The query without its PREFIX lines: every candidate declares the same ones."""
    lines = [line for line in sparql.splitlines() if not line.lstrip().upper().startswith("PREFIX")]
    return "\n".join(lines).strip()


def _ids(candidate: QueryCandidate) -> Text:
    text = Text()
    for p in candidate.picks:
        text.append(f"{p.name} ", style="blue" if p.kind == "entity" else "green")
        text.append(f"{p.id} {p.label} ")
        text.append(f"{p.confidence:.3f}", style=None if p.supported else "magenta")
        text.append("\n")
    text.append(_query_lines(candidate.sparql), style="dim")
    return text


def _notes(candidate: QueryCandidate) -> str:
    notes = []
    if candidate.answer:
        notes.append("[bold]answer[/]")
    if not candidate.supported:
        notes.append("[magenta]below the threshold[/]")
    if candidate.results is not None:
        notes.append(f"KG: {candidate.results} result{'' if candidate.results == 1 else 's'}")
    if candidate.source:
        notes.append(f"draft by {escape(candidate.source)}")
    return "\n".join(notes)


def candidates_table(result: AskResult) -> Table:
    """One row per candidate query: its support, each placeholder's ID with the probability that it is what
    the placeholder names (magenta: under the refusal threshold), the query, and why it stands where it does."""
    first = "the answer first, then" if result.candidates and result.candidates[0].answer else "ranked"
    table = Table(
        title=f"candidates ({len(result.candidates)}): {first} by support",
        title_justify="left",
        show_lines=True,
    )
    table.add_column("#", justify="right")
    table.add_column("support", justify="right")
    table.add_column("IDs (probability) and query", overflow="fold")
    table.add_column("note")
    for rank, c in enumerate(result.candidates, 1):
        support = "" if c.support is None else f"{c.support:.3f}"
        table.add_row(str(rank), support, _ids(c), _notes(c), style="bold" if c.answer else None)
    return table


__all__ = ["CANDIDATES_OPTION", "candidates_table"]
