"""Write the role facts that ship with the resolver (src/pgmr/resolver/facts.json, pgmr.resolver.facts) from the
gold queries of the shipped generator's training data: LC-QuAD 2.0 train without the validation carve, so the
orientation rule is measured on validation without seeing it.

    .venv/bin/python scripts/build_facts.py --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from pgmr.config import resolve_data_dir
from pgmr.datasets import load_named
from pgmr.jsonl import atomic_write_text
from pgmr.resolver.facts import FACTS_FILE, TrainingFacts

OUT = Path(__file__).resolve().parents[1] / "src" / "pgmr" / "resolver" / FACTS_FILE


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("-o", "--out", type=Path, default=OUT)
    args = parser.parse_args()
    train = load_named("lcquad2-train-part", resolve_data_dir(args.data_dir)).records
    provenance = {
        "what": "role facts (which entities and classes are a property's subject or object) of gold queries",
        "dataset": "lcquad2-train-part (lcquad2-train without the validation carve)",
        "records": len(train),
        "command": shlex.join(["python", "scripts/build_facts.py", *sys.argv[1:]]),
    }
    facts = TrainingFacts.from_sparql((r.sparql for r in train), provenance)
    atomic_write_text(args.out, json.dumps(facts.to_json(), separators=(",", ":")) + "\n")
    print(f"wrote {args.out}: {len(facts)} facts from {len(train)} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
