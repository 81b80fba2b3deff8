"""Train the structured member's relation ranker (pgmr.generators.structured.ranker) on LC-QuAD 2.0 train.

    .venv/bin/python scripts/train_relation_ranker.py -o /work/runs/relation-ranker --bf16
    .venv/bin/python scripts/train_relation_ranker.py -o /work/runs/relation-ranker --bf16 \
        --pack-to models/pgmr-relation-ranker --top-k 10 --weight 1.0

The training questions are the structured member's (LC-QuAD 2.0 train minus the 8% validation carve, with
paraphrases); the candidates are that member's best properties per gold relation slot, given the gold template.
Resumable: rerun the same command. `--pack-to` writes the int8 ranker with the given top_k and weight (chosen on
validation, docs/research-log.md, "2026-12-04 — A relation ranker") and can be run again after training
without retraining.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-o", "--out", type=Path, required=True, help="run directory (checkpoint, ranker/)")
    parser.add_argument("--structured", type=Path, default=Path("models/pgmr-structured"))
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--max-steps", type=int, default=2500)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--pack-to", type=Path, help="write the int8 ranker here when training is done")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--weight", type=float, default=1.0)
    args = parser.parse_args()

    import torch

    from pgmr.config import resolve_data_dir
    from pgmr.conversion import ConversionSummary, convert_records
    from pgmr.datasets import load_named
    from pgmr.datasets.splits import split_train_validation
    from pgmr.generators.seq2seq.card import MODEL_CARD
    from pgmr.generators.structured.generator import StructuredGenerator
    from pgmr.generators.structured.ranker import RankerConfig, RelationRanker
    from pgmr.generators.structured.ranker_train import (
        RANKER_DIR,
        RankerTrainConfig,
        ranker_examples,
        train_ranker,
    )
    from pgmr.generators.structured.targets import frame_targets
    from pgmr.kg.catalog import LabelCatalog

    data_dir = resolve_data_dir(args.data_dir)
    config = RankerTrainConfig(max_steps=args.max_steps, batch_size=args.batch_size, bf16=args.bf16)
    card = args.out / RANKER_DIR / MODEL_CARD
    done = card.is_file() and (
        json.loads(card.read_text(encoding="utf-8")).get("trained", {}).get("steps") == config.max_steps
    )
    if not done:
        catalog = LabelCatalog.from_data_dir(data_dir)
        records = load_named("lcquad2-train", data_dir).records
        converted = list(convert_records(records, catalog, ConversionSummary()))
        train, _ = split_train_validation(converted)
        paraphrases = {r.id: [p] for r in train if (p := dict(r.meta).get("paraphrase"))}
        targets = frame_targets(train, catalog, paraphrases=paraphrases)
        generator = StructuredGenerator.load(args.structured, precision="fp32")
        with torch.no_grad():
            examples = ranker_examples(generator, targets, candidates=config.candidates)
        print(f"{len(targets)} training questions, {len(examples)} relation slots", file=sys.stderr)
        columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"))
        with Progress(*columns, TimeRemainingColumn()) as bar:
            task = bar.add_task("training the relation ranker", total=config.max_steps)

            losses: list[float] = []

            def progress(step: int, total: int, loss: float) -> None:
                bar.update(
                    task, completed=step, description=f"training the relation ranker (loss {loss:.3f})"
                )
                losses.append(loss)
                if not sys.stderr.isatty() and step % 100 == 0:  # a log file sees no bar
                    print(
                        f"step {step}/{total}: loss {sum(losses[-100:]) / len(losses[-100:]):.4f}",
                        file=sys.stderr,
                    )

            train_ranker(
                examples,
                generator.vocab,
                args.out,
                config,
                run_info={
                    "command": shlex.join(["scripts/train_relation_ranker.py", *sys.argv[1:]]),
                    "structured": str(args.structured),
                },
                progress=progress,
            )
    if args.pack_to:
        ranker = RelationRanker.load(args.out / RANKER_DIR)
        ranker.config = RankerConfig(
            top_k=args.top_k, weight=args.weight, max_length=ranker.config.max_length
        )
        ranker.save(args.pack_to, packed=True)
        size = sum(f.stat().st_size for f in args.pack_to.iterdir() if f.is_file())
        print(f"wrote {args.pack_to} ({size / 1e6:.1f} MB; top_k {args.top_k}, weight {args.weight})")


if __name__ == "__main__":
    main()
