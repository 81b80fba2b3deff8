"""Train a seq2seq model on the unknown-URI split's training part, with the paraphrases as extra questions: the
third member of a three-member ensemble (issue #18), trained the same way on both splits.

    python scripts/train_unknown_uri_seq2seq.py -o /work/runs/unknown-uri-s2s-para [--seed 7]

The split and the validation carve are `pgmr experiment lcquad2-unknown-uri`'s (the same conversion, seed, test
share and 8% carve of the pool), so no test entity is seen in training and the kept checkpoint is chosen on the
split's own validation part. The recipe is the experiment's pgmr seq2seq recipe (MiniLM encoder + 2-layer
decoder, 8k BPE, 6,000 steps of 32, lr 1e-3 / encoder 1e-4, 300 warm-up steps, bfloat16) plus each training
record's paraphrased question as a second example. On the original split the same model is

    pgmr train --mode pgmr --preset minilm --paraphrases --seed 7 ... (docs/generators.md)

Resumable: rerun the same command.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-o", "--out", type=Path, required=True, help="run directory (resumable)")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--max-steps", type=int, default=6000)
    parser.add_argument("--max-minutes", type=float, default=None, help="stop (resumably) after this long")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-paraphrases", action="store_true")
    args = parser.parse_args()

    from pgmr.config import resolve_data_dir
    from pgmr.datasets.splits import split_train_validation
    from pgmr.experiments.lcquad2_unknown_uri import NAME, UnknownUriOptions, unknown_uri_split
    from pgmr.experiments.settings import ExperimentSettings
    from pgmr.experiments.workspace import Workspace
    from pgmr.generators.examples import build_examples, with_paraphrases
    from pgmr.generators.seq2seq.train import TrainConfig
    from pgmr.generators.trained import train_generator

    recipe = UnknownUriOptions()
    ws = Workspace(ExperimentSettings(data_dir=resolve_data_dir(args.data_dir), out_dir=args.out / "split"))
    split, _, _ = unknown_uri_split(ws, recipe)
    train_part, validation_part = split_train_validation(list(split.train), recipe.validation_share)
    asked = train_part if args.no_paraphrases else with_paraphrases(train_part)
    print(
        f"unknown-URI split (seed {recipe.seed}): {len(train_part)} training records "
        f"({len(asked) - len(train_part)} paraphrases added), {len(validation_part)} validation, "
        f"{len(split.test)} test records"
    )
    words = recipe.max_description_words
    config = TrainConfig(
        preset=recipe.preset,
        vocab_size=recipe.vocab_size,
        max_source_len=recipe.max_source_len,
        max_target_len=recipe.max_target_len,
        batch_size=recipe.batch_size,
        learning_rate=recipe.learning_rate,
        encoder_learning_rate=recipe.encoder_learning_rate,
        warmup_steps=recipe.warmup_steps,
        max_steps=args.max_steps,
        max_minutes=args.max_minutes,
        bf16=True,
        eval_steps=1000,
        max_eval_examples=300,
        seed=args.seed,
        command=shlex.join(["python", "scripts/train_unknown_uri_seq2seq.py", *sys.argv[1:]]),
    )
    result = train_generator(
        build_examples(asked, "pgmr", max_description_words=words),
        build_examples(validation_part, "pgmr", max_description_words=words),
        args.out,
        config,
        data_info={
            "datasets": [f"{NAME} split (seed {recipe.seed}), training part"],
            "test_share": recipe.test_share,
            "validation_share": recipe.validation_share,
            "train_records": len(train_part),
            "paraphrases": len(asked) - len(train_part),
            "validation_records": len(validation_part),
            "max_description_words": words,
        },
    )
    print(f"kept model: {result.model_dir} (step {result.global_step}, validation {dict(result.metrics)})")


if __name__ == "__main__":
    main()
