"""Train the default ensemble's structured member on the unknown-URI split (issue #18: the lcquad2-unknown-uri
row of the shipped default needs both members trained on that split's training part).

    python scripts/train_unknown_uri_structured.py -o /work/runs/unknown-uri-structured [--max-steps 10000]
    python scripts/train_unknown_uri_structured.py -o /work/runs/unknown-uri-structured-s7 --seed 7

The split and the validation carve are built exactly as `pgmr experiment lcquad2-unknown-uri` builds them (the
same conversion, seed, test share and 8% validation carve of the pool, `pgmr.datasets.splits`), so no test
entity is seen in training and the kept checkpoint is chosen on that split's own validation part. The recipe is
models/pgmr-structured's (10,000 steps of 32, lr 1e-3 / encoder 1e-4, 300 warm-up steps, paraphrases,
bfloat16), through the same trainer as `pgmr train --preset structured`: resumable (rerun the same command; a
checkpoint from other data is refused), the kept model in OUT/model. The experiment's ensemble row takes it:

    pgmr experiment lcquad2-unknown-uri --modes pgmr --max-steps 6000 --max-minutes 130 --bf16 --structured OUT
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
    parser.add_argument("--max-steps", type=int, default=10000)
    parser.add_argument("--max-minutes", type=float, default=None, help="stop (resumably) after this long")
    parser.add_argument(
        "--seed", type=int, default=42, help="42: the structured member's; 7: the structured-s7 member's"
    )
    args = parser.parse_args()

    from pgmr.cli.train_structured import train_structured_cli
    from pgmr.config import resolve_data_dir
    from pgmr.datasets.splits import split_train_validation
    from pgmr.experiments.settings import ExperimentSettings
    from pgmr.experiments.unknown_uri_split import NAME, UnknownUriOptions, unknown_uri_split
    from pgmr.experiments.workspace import Workspace

    split_options = UnknownUriOptions()
    ws = Workspace(ExperimentSettings(data_dir=resolve_data_dir(args.data_dir), out_dir=args.out / "split"))
    split, _, _ = unknown_uri_split(ws, split_options)
    train_part, validation_part = split_train_validation(list(split.train), split_options.validation_share)
    print(
        f"unknown-URI split (seed {split_options.seed}): {len(train_part)} training, {len(validation_part)} "
        f"validation, {len(split.test)} test records"
    )
    options = {
        "max_steps": args.max_steps,
        "batch_size": 32,
        "learning_rate": 1e-3,
        "encoder_learning_rate": 1e-4,
        "warmup_steps": 300,
        "weight_decay": 0.01,
        "eval_steps": 1000,
        "max_eval_examples": 600,
        "max_minutes": args.max_minutes,
        "max_source_len": 128,
        "encoder_layers": None,
        "bf16": True,
        "seed": args.seed,
        "paraphrases": True,
    }
    data_info = {
        "datasets": [f"{NAME} split (seed {split_options.seed}), training part"],
        "test_share": split_options.test_share,
        "validation_share": split_options.validation_share,
        "train_records": len(train_part),
        "validation_records": len(validation_part),
    }
    command = shlex.join(["python", "scripts/train_unknown_uri_structured.py", *sys.argv[1:]])
    train_structured_cli(
        train_part,
        validation_part,
        ws.catalog,
        args.out,
        options=options,
        data_info=data_info,
        command=command,
    )


if __name__ == "__main__":
    main()
