"""`pgmr train --preset structured`: the structure-first generator (template + slots, one encoder pass)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from pgmr.cli.common import console, out, print_error, progress_bar
from pgmr.conversion import ConvertedRecord
from pgmr.kg.catalog import LabelCatalog


def train_structured_cli(
    train_records: list[ConvertedRecord],
    val_records: list[ConvertedRecord],
    catalog: LabelCatalog,
    out_dir: Path,
    *,
    options: dict[str, Any],
    data_info: dict[str, Any],
    command: str | None = None,
) -> None:
    """`command`: what the card records as the command that trained it (default: this `pgmr` call)."""
    from pgmr.generators.structured.targets import Vocabulary, build_vocabulary, frame_targets
    from pgmr.generators.structured.train import StructuredTrainConfig, train_structured

    paraphrases = (
        {r.id: [p] for r in train_records if (p := dict(r.meta).get("paraphrase"))}
        if options.pop("paraphrases")
        else {}
    )
    train = frame_targets(train_records, catalog, paraphrases=paraphrases)
    validation = frame_targets(val_records, catalog)
    # Starting from a trained model keeps its vocabulary: its heads are sized for it. Training questions of a
    # template it does not know still teach the slots; their template is not scored.
    init_from = options.get("init_from")
    vocab = Vocabulary.load(Path(init_from)) if init_from else build_vocabulary(train, catalog)
    console.print(
        f"{len(train)} training targets ({len(paraphrases)} paraphrases), {len(validation)} validation; "
        f"{len(vocab.templates)} templates, {len(vocab.relations)} properties, {len(vocab.fallbacks)} implied entities"
    )
    try:
        config = StructuredTrainConfig(**options)
    except (TypeError, ValueError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    run_info = {
        "command": command or shlex.join(["pgmr", *sys.argv[1:]]),
        "data": data_info,
        "paraphrases": len(paraphrases),
    }
    try:
        with progress_bar() as bar:
            task = bar.add_task("training (structured)", total=config.max_steps)

            def progress(step: int, total: int, parts: dict[str, float]) -> None:
                bar.update(
                    task, completed=step, total=total, description=f"training (loss {parts['loss']:.3f})"
                )

            card = train_structured(
                train, validation, vocab, out_dir, config, run_info=run_info, progress=progress
            )
    except ValueError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    best = next((h for h in card["history"] if h["step"] == card["best_step"]), card["history"][-1])
    table = Table(title="pgmr train (structured): validation of the kept model")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in (
        "frame_exact",
        "template_accuracy",
        "entity_accuracy",
        "relation_accuracy",
        "literal_accuracy",
    ):
        table.add_row(key, f"{best[key]:.4f}")
    table.add_row("steps", f"{card['steps']} (kept {card['best_step']})")
    if card.get("resumed_from_step") is not None:
        table.add_row("resumed from step", str(card["resumed_from_step"]))
    table.add_row("wall seconds", f"{card['train_seconds']:.1f}")
    out.print(table)
    console.print(f"model written to {out_dir / 'model'}")
