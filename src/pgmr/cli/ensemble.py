"""`pgmr ensemble`: make an ensemble directory (pgmr.generators.ensemble) and fit what it ships beside its
members: the reranker (reranker.json) and the draft verifier's training rows (then `pgmr train-verifier`)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import typer
from rich.table import Table

from pgmr.cli.common import Settings, console, out, print_error
from pgmr.cli.memory import MEMORY_OPTION, open_memory

app = typer.Typer(
    help="Make an ensemble directory and fit its reranker and draft verifier's rows (docs/generators.md).",
    no_args_is_help=True,
)


def _member(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise typer.BadParameter(f"expected NAME=DIR, got {text!r}")
    return name, Path(path)


@app.command("create")
def create(
    directory: Path = typer.Argument(..., help="The ensemble directory to write (its model_card.json)"),
    member: list[str] = typer.Option(
        ...,
        "--member",
        help="NAME=DIR, once per member in order (a packed model or a training run); the card stores DIR "
        "relative to the ensemble",
    ),
    verifier: Path | None = typer.Option(
        None,
        "--verifier",
        exists=True,
        file_okay=False,
        help="A draft verifier (`pgmr train-verifier` RUN or RUN/model) to copy into DIRECTORY/verifier",
    ),
    description: str | None = typer.Option(None, help="The card's description"),
) -> None:
    """Write an ensemble's card naming its members (and copy in a draft verifier); reranker.json is kept."""
    from pgmr.experiments.ensemble_dir import EnsembleDirError, write_ensemble

    members = dict(_member(m) for m in member)
    if len(members) != len(member):
        print_error("member names must differ")
        raise typer.Exit(2)
    try:
        card = write_ensemble(
            directory,
            members,
            verifier=verifier,
            description=description,
            command=shlex.join(["pgmr", *sys.argv[1:]]),
        )
    except EnsembleDirError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    names = ", ".join(f"{m['name']} ({m['path']})" for m in card["members"])
    console.print(
        f"wrote {directory}: {names}"
        + (f"; verifier from {verifier}" if verifier else "")
        + ("" if (directory / "reranker.json").is_file() else "; next: pgmr ensemble fit-rerank")
    )


@app.command("fit-rerank")
def fit_rerank(
    ctx: typer.Context,
    ensemble: Path = typer.Argument(
        ..., exists=True, file_okay=False, help="The ensemble directory; its reranker.json is written"
    ),
    drafts: Path | None = typer.Option(
        None, "--drafts", exists=True, dir_okay=False, help="`pgmr generate ENSEMBLE lcquad2-validation` rows"
    ),
    memory_dir: Path | None = MEMORY_OPTION,
    l2: float = typer.Option(1.0, min=0.0, help="L2 penalty of the logistic regression"),
    held_out: int = typer.Option(
        600,
        "--held-out",
        min=0,
        help="Fit after the first N questions (where the seq2seq member's post-generation rules were tuned); "
        "they are reported apart",
    ),
    out_dir: Path = typer.Option(
        Path("artifacts") / "rerank", "--out", "-o", help="Where fit.json and drafts.signals.json go"
    ),
    rows: Path | None = typer.Option(
        None, "--rows", exists=True, dir_okay=False, help="Reuse collected signals (OUT/drafts.signals.json)"
    ),
    also: list[str] = typer.Option(
        [],
        "--also",
        help="Another validation set whose questions' drafts are in --drafts too (e.g. qald10-validation), "
        "after LC-QuAD 2.0's: gold queries come from it; repeatable",
    ),
    allow_unfitted: bool = typer.Option(
        False,
        "--allow-unfitted",
        help="When no question has a right and a wrong draft (tiny models), write zero weights instead of "
        "failing (the first member's resolved draft wins)",
    ),
) -> None:
    """Fit the ensemble's reranker on LC-QuAD 2.0 validation drafts; writes ENSEMBLE/reranker.json."""
    from pgmr.experiments.ensemble_dir import EnsembleDirError, member_dirs
    from pgmr.experiments.ensemble_rerank import (
        SIGNALS_FILE,
        RerankFitError,
        fit_reranker,
        validation_outcomes,
        write_fit,
    )
    from pgmr.jsonl import atomic_write_text

    settings: Settings = ctx.obj
    if (drafts is None) == (rows is None):
        print_error("give --drafts (drafts to resolve and score) or --rows (signals collected before)")
        raise typer.Exit(2)
    try:
        members = list(member_dirs(ensemble))
        if rows is not None:
            questions = json.loads(rows.read_text(encoding="utf-8"))
        else:
            assert drafts is not None
            with console.status("resolving and scoring every draft"):
                questions = validation_outcomes(
                    drafts, settings.data_dir, open_memory(memory_dir), ensemble, also=also
                )
            atomic_write_text(out_dir / SIGNALS_FILE, json.dumps(questions))
        fit = fit_reranker(
            questions,
            members,
            l2=l2,
            held_out=held_out,
            allow_unfitted=allow_unfitted,
            provenance={
                "drafts": str(drafts or rows),
                "command": shlex.join(["pgmr", *sys.argv[1:]]),
            },
        )
    except (EnsembleDirError, RerankFitError, FileNotFoundError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    reranker_path, fit_path = write_fit(ensemble, fit, out_dir)
    for part in ("first", "rest"):
        if part not in fit.figures:
            continue
        table = Table(title=f"validation, {part} ({fit.figures['questions'][part]} questions): Query EM")
        table.add_column("drafts")
        table.add_column("%", justify="right")
        for name, value in fit.figures[part].items():
            table.add_row(name, "-" if value is None else f"{100 * value:.2f}")
        out.print(table)
    if fit.figures.get("unfitted"):
        console.print("[yellow]warning:[/yellow] no question had a right and a wrong draft: zero weights")
    console.print(f"wrote {reranker_path} and {fit_path}")


@app.command("verifier-drafts")
def verifier_drafts(
    ensemble: Path = typer.Argument(
        ..., exists=True, file_okay=False, help="The ensemble that wrote the drafts (its structured members)"
    ),
    drafts: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="`pgmr generate ENSEMBLE lcquad2-train-part --resolve` output"
    ),
    out_path: Path = typer.Option(..., "--out", "-o", help="The rows for `pgmr train-verifier` (JSONL)"),
    memory_dir: Path | None = MEMORY_OPTION,
    batch_size: int = typer.Option(
        32, min=1, help="The batch size the drafts were generated with (near ties in bfloat16 move with it)"
    ),
) -> None:
    """Add each structured member's runners-up to the drafts, resolved: the draft verifier's training rows."""
    from pgmr.experiments.ensemble_dir import EnsembleDirError, structured_members
    from pgmr.experiments.verifier_drafts import with_runners_up
    from pgmr.experiments.verifier_fit import DraftRowsError
    from pgmr.jsonl import JsonlError, read_jsonl, write_jsonl
    from pgmr.resolver import Resolver, ResolverConfig

    try:
        members = structured_members(ensemble)
        if not members:  # before the memory loads: there would be nothing to resolve
            raise DraftRowsError(f"{ensemble} has no structured member: no runners-up to add")
        rows = list(read_jsonl(drafts))
        resolver = Resolver(open_memory(memory_dir), ResolverConfig())
        with console.status(f"runners-up of {', '.join(members) or 'no member'}, then resolving them"):
            made = with_runners_up(rows, members, resolver, batch_size=batch_size)
    except (EnsembleDirError, DraftRowsError, JsonlError) as exc:
        print_error(f"{drafts}: {exc}")
        raise typer.Exit(2) from None
    write_jsonl(out_path, made.rows)
    console.print(
        f"runners-up of {', '.join(made.members)} in {made.runners_up_seconds:.0f} s (top frames differing "
        f"from the rows: {dict(made.differing)}); {made.resolved} distinct drafts resolved in "
        f"{made.resolve_seconds:.0f} s"
    )
    console.print(
        f"wrote {out_path}: {len(made.rows)} questions; next: pgmr train-verifier {out_path} -o RUN"
    )
