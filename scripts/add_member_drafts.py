"""Add one member's drafts to the rows of `pgmr generate ENSEMBLE SET` (without --resolve), as if the ensemble
had that member last: members decode independently, so the rows equal a larger ensemble's without decoding the
other members again.

    python scripts/add_member_drafts.py DRAFTS.jsonl --name plain --model runs/structured-plain-ft/model \
        -o DRAFTS4.jsonl [--batch-size 32]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pgmr.generators.ensemble import member_outputs
from pgmr.generators.trained import load_trained
from pgmr.jsonl import read_jsonl, write_jsonl


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("drafts", type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    rows = list(read_jsonl(args.drafts))
    if not rows or any("drafts" not in r for r in rows):
        raise SystemExit(
            f"{args.drafts}: every row needs the drafts of an ensemble (pgmr generate ENSEMBLE SET)"
        )
    if any(d["source"] == args.name for r in rows for d in r["drafts"]):
        raise SystemExit(f"{args.drafts} has drafts named {args.name!r} already")
    member = load_trained(args.model)
    outputs = member_outputs(member, [r["question"] for r in rows], None, args.batch_size)
    for row, (text, confidence) in zip(rows, outputs, strict=True):
        row["drafts"].append({"source": args.name, "text": text, "confidence": dict(confidence)})
    write_jsonl(args.out, rows)
    print(f"wrote {len(rows)} rows with {len(rows[0]['drafts'])} drafts each to {args.out}")


if __name__ == "__main__":
    main()
