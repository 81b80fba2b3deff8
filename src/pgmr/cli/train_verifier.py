"""`pgmr train-verifier`: the ensemble's draft verifier (pgmr.generators.verifier) from resolved drafts of
training questions."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer
from rich.table import Table

from pgmr.cli.common import console, out, print_error, progress_bar
from pgmr.cli.memory import MEMORY_OPTION, open_memory
from pgmr.jsonl import JsonlError, read_jsonl


def train_verifier(
    drafts: list[Path] = typer.Argument(
        ...,
        exists=True,
        dir_okay=False,
        help="`pgmr generate ENSEMBLE lcquad2-train-part --resolve` outputs (every draft, resolved, with gold)",
    ),
    out_dir: Path = typer.Option(
        ..., "--out", "-o", help="Run directory: checkpoint.pt while training, the verifier in model/"
    ),
    memory_dir: Path | None = MEMORY_OPTION,
    epochs: float = typer.Option(1.0, min=0.0, help="Passes over the examples"),
    max_steps: int | None = typer.Option(None, min=1, help="Stop after N steps (overrides --epochs)"),
    batch_size: int = typer.Option(32, min=1),
    learning_rate: float = typer.Option(3e-5, "--lr", min=0.0, max=1.0),
    max_length: int = typer.Option(128, min=8, help="Tokens of question and query together"),
    bf16: bool = typer.Option(True, help="bfloat16 autocast (1.5x faster on CPUs with AVX512-BF16)"),
    layers: int | None = typer.Option(None, min=1, max=6, help="Keep the first N encoder layers (tests)"),
    init_from: Path | None = typer.Option(
        None,
        "--init-from",
        exists=True,
        file_okay=False,
        help="Continue from this verifier's weights (e.g. models/pgmr-ensemble/verifier) instead of a fresh one",
    ),
    gold_negatives: int = typer.Option(
        0,
        min=0,
        max=3,
        help="Per question, up to N wrong queries made from its gold query: a relation swapped for a near "
        "neighbour, a triple turned round, an entity swapped for a homonym (pgmr.experiments.gold_negatives)",
    ),
) -> None:
    """Train the verifier that scores each resolved draft for the reranker; resumable (run it again)."""
    from pgmr.experiments.verifier_fit import DraftRowsError, verifier_examples
    from pgmr.generators.verifier import VerifierConfig, VerifierError, memory_describer
    from pgmr.generators.verifier import train_verifier as train

    try:
        config = VerifierConfig(
            epochs=epochs,
            max_steps=max_steps,
            batch_size=batch_size,
            learning_rate=learning_rate,
            max_length=max_length,
            bf16=bf16,
        )
    except ValueError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    memory = open_memory(memory_dir)
    describe = memory_describer(memory)
    try:
        rows = [row for path in drafts for row in read_jsonl(path)]
        negatives = None
        if gold_negatives:
            from pgmr.experiments.gold_negatives import GoldNegatives

            with console.status("finding each gold ID's neighbours in the memory"):
                negatives = GoldNegatives(memory, [str(r.get("gold") or "") for r in rows])
        examples, counts = verifier_examples(
            rows,
            describe,
            description_words=config.description_words,
            negatives=negatives,
            negatives_per_question=gold_negatives,
        )
    except (JsonlError, DraftRowsError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    console.print(
        f"{counts['questions']} questions, {counts['examples']} examples ({counts['right']} right); "
        f"{counts['with_wrong_draft']} questions with a wrong draft, {counts['gold_added']} with the gold query added"
        + (f", {counts['gold_negatives']} wrong queries made from gold ones" if gold_negatives else "")
    )
    card = {
        "description": "Draft verifier of an ensemble: a cross-encoder (all-MiniLM-L6-v2, one output) that scores "
        "a question beside a resolved draft written with the memory's labels (pgmr.generators.verifier).",
        "command": shlex.join(["pgmr", *sys.argv[1:]]),
        "drafts": [str(p) for p in drafts],
        "data": counts,
    }
    try:
        with progress_bar() as bar:
            task = bar.add_task("training the verifier", total=None)

            def progress(step: int, total: int, loss: float) -> None:
                bar.update(
                    task, completed=step, total=total, description=f"training the verifier (loss {loss:.3f})"
                )

            verifier = train(
                examples, out_dir, config, layers=layers, init_from=init_from, card=card, progress=progress
            )
    except (ValueError, VerifierError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    training = verifier.card["training"]
    table = Table(title="pgmr train-verifier")
    table.add_column("")
    table.add_column("value", justify="right")
    for name in ("examples", "right", "steps", "seconds"):
        table.add_row(name, str(training[name]))
    out.print(table)
    console.print(
        f"wrote {out_dir / 'model'}: add it with pgmr ensemble create ENSEMBLE ... --verifier {out_dir}, then "
        "refit the reranker (pgmr ensemble fit-rerank)"
    )
