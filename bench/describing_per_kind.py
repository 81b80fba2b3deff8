"""The shipped ensemble's choice and resolution with description agreement as shipped and judged per kind.

    python bench/describing_per_kind.py SET=DRAFTS.jsonl [SET=DRAFTS.jsonl ...] [--model DIR] [--out NAME]

SET is a dataset name (lcquad2-validation, qald10-validation, plain-dev, ...) and DRAFTS a JSONL with each
question's drafts as `pgmr generate ENSEMBLE SET` writes them. The drafts are chosen by the ensemble's reranker
and resolved through today's memory twice, with `ResolverConfig(describing_per_kind=False)` (as shipped) and
`True`, refusal off and at the shipped threshold: Query EM and final queries that differ. Nothing is generated
again, so a set takes minutes. Writes bench/results/OUT.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from _common import console, draft_sets, reranked_em, table, write_result
from pgmr.config import default_memory_dir, resolve_data_dir
from pgmr.generators.trained import load_trained
from pgmr.memory import Memory
from pgmr.pipeline import shipped_resolver
from pgmr.pipeline.rerank import reranker_of
from pgmr.resolver.support import shipped_threshold


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sets", nargs="+", help="SET=DRAFTS.jsonl")
    parser.add_argument("--model", type=Path, default=Path("models/pgmr-ensemble"))
    parser.add_argument("--data-dir")
    parser.add_argument("--out", default="describing_per_kind")
    args = parser.parse_args()
    data_dir = resolve_data_dir(args.data_dir)
    memory = Memory.load(default_memory_dir())
    reranker = reranker_of(load_trained(args.model))
    rows: list[dict[str, Any]] = []
    for name, records, drafts in draft_sets(args.sets, data_dir):
        finals: dict[bool, list[str]] = {}
        row: dict[str, Any] = {"set": name, "questions": len(records)}
        for per_kind in (False, True):
            for threshold in (0.0, shipped_threshold()):
                config = shipped_resolver(min_confidence=threshold, describing_per_kind=per_kind)
                em, sparql = reranked_em(memory, records, drafts, reranker, config)
                key = f"{'per_kind' if per_kind else 'shipped'}_{'off' if threshold == 0.0 else 'on'}"
                row[key] = em
                if threshold == 0.0:
                    finals[per_kind] = sparql
            console.print(f"{name}, per kind {per_kind}: {row}")
        row["differ"] = sum(a != b for a, b in zip(finals[False], finals[True], strict=True))
        rows.append(row)
    console.print(
        table(
            f"Description agreement in {args.model} (Query EM, refusal off / at the shipped threshold)",
            ["set", "questions", "as shipped", "per kind", "differ"],
            [
                [
                    r["set"],
                    str(r["questions"]),
                    f"{100 * r['shipped_off']:.2f} / {100 * r['shipped_on']:.2f}",
                    f"{100 * r['per_kind_off']:.2f} / {100 * r['per_kind_on']:.2f}",
                    str(r["differ"]),
                ]
                for r in rows
            ],
        )
    )
    write_result(args.out, {"model": str(args.model), "sets": rows})


if __name__ == "__main__":
    main()
