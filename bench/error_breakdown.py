"""Where the errors of a scored predictions file are: skeleton, entities, relations.

    python bench/error_breakdown.py PREDICTIONS [--name NAME]

PREDICTIONS is a `pgmr eval` (or `pgmr generate --resolve`) JSONL file with `gold` and the final query
(`sparql`, else `prediction`). Each row lands in one bucket: exact (Query EM), no final query (invalid or
refused), or wrong, split by whether the skeleton matches (the normalized query with every Wikidata ID masked,
literals kept), whether the entity IDs (Q) match gold's as a set, and whether the property IDs (P) do.
Writes bench/results/error_breakdown[-NAME].json.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from _common import console, table, write_result
from pgmr.evaluation.metrics import normalize_query, query_exact_match, query_ids
from pgmr.jsonl import read_jsonl

_ID = re.compile(r"<http://www\.wikidata\.org/(?:entity|prop(?:/direct|/statement|/qualifier)?)/[QPL]\d+>")


def bucket(row: dict) -> str:
    gold = row["gold"]
    final = row.get("sparql") or (row.get("prediction") if row.get("status") is None else None)
    if not final:
        return "no final query (invalid or refused)"
    if query_exact_match(final, gold):
        return "exact"
    # The lexer behind normalize_query takes broken text too (an unclosed literal runs to the end).
    same_shape = _ID.sub("ID", normalize_query(final)) == _ID.sub("ID", normalize_query(gold))
    skeleton = "skeleton ok" if same_shape else "skeleton wrong"
    mine, theirs = query_ids(final), query_ids(gold)
    entities = {i for i in mine if i.startswith("Q")} == {i for i in theirs if i.startswith("Q")}
    relations = {i for i in mine if i.startswith("P")} == {i for i in theirs if i.startswith("P")}
    return f"wrong: {skeleton}, entities {'ok' if entities else 'wrong'}, relations {'ok' if relations else 'wrong'}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("predictions")
    parser.add_argument("--name", help="suffix of the result file (default: the predictions file's stem)")
    args = parser.parse_args()
    rows = [r for r in read_jsonl(args.predictions) if r.get("gold")]
    if not rows:
        raise SystemExit(f"{args.predictions}: no rows with a gold query")
    counts = Counter(bucket(r) for r in rows)
    ordered = counts.most_common()
    console.print(
        table(
            f"error breakdown: {args.predictions} ({len(rows)} rows)",
            ["bucket", "rows", "share"],
            [[name, n, n / len(rows)] for name, n in ordered],
        )
    )
    write_result(
        f"error_breakdown-{args.name or Path(args.predictions).stem}",
        {
            "predictions": args.predictions,
            "rows": len(rows),
            "buckets": {name: {"rows": n, "share": round(n / len(rows), 4)} for name, n in ordered},
        },
    )


if __name__ == "__main__":
    main()
