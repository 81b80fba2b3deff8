"""Train a seq2seq model on the unknown-URI split's training part, with the paraphrases as extra questions: the
third member of a three-member ensemble (issue #18), trained the same way on both splits.

    python scripts/train_unknown_uri_seq2seq.py -o /work/runs/unknown-uri-s2s-para [--seed 7]

The split and the validation carve are `pgmr experiment lcquad2-unknown-uri`'s (the same conversion, seed, test
share and 8% carve of the pool), so no test entity is seen in training and the kept checkpoint is chosen on the
split's own validation part. The recipe is the experiment's pgmr seq2seq recipe (MiniLM encoder + 2-layer
decoder, 8k BPE, 6,000 steps of 32, lr 1e-3 / encoder 1e-4, 300 warm-up steps, bfloat16) plus each training
record's paraphrased question as a second example. On the original split the same model is

    pgmr train --mode pgmr --preset minilm --paraphrases --seed 7 ... (docs/research-log.md, 2026-12-04)

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
    from pgmr.experiments.settings import ExperimentSettings
    from pgmr.experiments.unknown_uri_split import UnknownUriOptions, unknown_uri_split
    from pgmr.experiments.unknown_uri_systems import train_mode
    from pgmr.experiments.workspace import Workspace

    recipe = UnknownUriOptions(
        max_steps=args.max_steps,
        max_minutes=args.max_minutes,
        eval_steps=1000,
        bf16=True,
        paraphrases=not args.no_paraphrases,
        train_seed=args.seed,
    )
    command = shlex.join(["python", "scripts/train_unknown_uri_seq2seq.py", *sys.argv[1:]])
    ws = Workspace(
        ExperimentSettings(
            data_dir=resolve_data_dir(args.data_dir), out_dir=args.out / "split", command=command
        )
    )
    split, _, _ = unknown_uri_split(ws, recipe)
    train_part, validation_part = split_train_validation(list(split.train), recipe.validation_share)
    print(
        f"unknown-URI split (seed {recipe.seed}): {len(train_part)} training, {len(validation_part)} "
        f"validation, {len(split.test)} test records"
    )
    print(train_mode(ws, "pgmr", args.out, train_part, validation_part, recipe))


if __name__ == "__main__":
    main()
