"""The draft verifier's training rows: an ensemble's resolved drafts with its structured members' runners-up added.

    pgmr generate models/pgmr-ensemble lcquad2-train-part --batch-size 32 --resolve -o train.drafts.jsonl  # 11 min
    .venv/bin/python scripts/verifier_drafts.py train.drafts.jsonl -o train.nbest.jsonl                    # 10 min
    pgmr train-verifier train.nbest.jsonl -o runs/verifier                                                 # 53 min

Per question, each structured member's `+t2` and `+r2` drafts (pgmr.experiments.runners_up) are resolved as
`pgmr generate --resolve` resolves (the shipped grounding, no refusal) and appended to the row with their final
SPARQL. They are near neighbours of the members' own drafts (another template, a relation's runner-up), mostly
wrong: the examples that teach the verifier the distinctions the reranker's support signals cannot make. The
verifier shipped on 2026-12-05 was trained on these rows; docs/research-log.md, "2026-12-05 — The draft
verifier ships".
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

MEMBERS = {"structured": "models/pgmr-structured", "structured-s7": "models/pgmr-structured-s7"}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("drafts", type=Path, help="`pgmr generate ENSEMBLE DATASET --resolve` output")
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--memory", type=Path, help="memory directory (default: ~/.cache/pgmr/memory)")
    parser.add_argument(
        "--member",
        action="append",
        metavar="NAME=DIR",
        help="a structured member and its model (default: the shipped ensemble's two)",
    )
    args = parser.parse_args()
    from pgmr.config import default_memory_dir
    from pgmr.experiments.runners_up import runner_up_drafts
    from pgmr.experiments.verifier_fit import resolved_sparql
    from pgmr.jsonl import atomic_write_text, read_jsonl
    from pgmr.memory import Memory
    from pgmr.resolver import Resolver, ResolverConfig
    from pgmr.resolver.grounding import GroundingConfig

    members = dict(m.split("=", 1) for m in args.member) if args.member else MEMBERS
    rows = list(read_jsonl(args.drafts))
    if not rows or any("drafts" not in r for r in rows):
        print(f"{args.drafts}: not `pgmr generate` output with drafts", file=sys.stderr)
        return 2
    started = time.monotonic()
    extra, differ = runner_up_drafts(rows, members)
    print(
        f"runners-up in {time.monotonic() - started:.0f} s; top frames differing from the rows: {dict(differ)}"
    )
    resolver = Resolver(Memory.load(args.memory or default_memory_dir()), ResolverConfig())
    started = time.monotonic()
    sparql = resolved_sparql(
        [(r["question"], d["text"]) for r in rows for d in extra[str(r["id"])]], resolver, GroundingConfig()
    )
    print(f"resolved {len(sparql)} distinct drafts in {time.monotonic() - started:.0f} s")
    lines = []
    for r in rows:
        more = [{**d, "sparql": sparql[(r["question"], d["text"])]} for d in extra[str(r["id"])]]
        lines.append(json.dumps({**r, "drafts": [*r["drafts"], *more]}) + "\n")
    atomic_write_text(args.out, "".join(lines))
    print(f"wrote {args.out}: {len(rows)} questions; next: pgmr train-verifier {args.out} -o RUN")
    return 0


if __name__ == "__main__":
    sys.exit(main())
