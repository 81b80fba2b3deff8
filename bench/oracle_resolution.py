"""Oracle resolution on LC-QuAD 2.0: URI accuracy of the memory vs a string-lookup peer, in one run.

    python bench/oracle_resolution.py [--split test|validation] [--memory DIR] [--prior-weight W]

Conditions and the peer are defined in pgmr.evaluation.oracle. Writes bench/results/oracle_resolution[-SPLIT].json.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from _common import (
    console,
    converted_split,
    mappings,
    prior_counts_for,
    resolve_all,
    setup,
    table,
    write_result,
)
from pgmr.evaluation.oracle import CONDITIONS, StringLookupPeer, condition_query, oracle_cases, score_slots
from pgmr.resolver import Prior, Resolver, ResolverConfig
from pgmr.resolver.ranking import normalize_label


def error_causes(cases, predictions, catalog, memory) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Why entity slots went wrong: the gold ID's label is shared in memory, and whether it has a description."""
    by_label: Counter[str] = Counter(normalize_label(r.label) for r in memory.entities.rows if not r.is_alias)
    causes: Counter[str] = Counter()
    for case, predicted in zip(cases, predictions, strict=True):
        for name, wid in case.gold:
            if not name.startswith("entity") or predicted.get(name) == wid:
                continue
            entry = catalog.get(wid)
            if wid not in memory:
                causes["gold not in memory"] += 1
                continue
            shared = by_label[normalize_label(entry.label)] > 1
            described = bool(entry.description)
            wrong = catalog.get(predicted.get(name) or "")
            same_text = (
                wrong is not None and wrong.label == entry.label and wrong.description == entry.description
            )
            if same_text:
                causes["identical label and description"] += 1
            elif shared and not described:
                causes["ambiguous label, gold has no description"] += 1
            elif shared:
                causes["ambiguous label, gold described"] += 1
            else:
                causes["unique label"] += 1
    return dict(causes.most_common())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", default="test", choices=("test", "validation"))
    parser.add_argument("--data-dir")
    parser.add_argument("--memory")

    parser.add_argument("--prior-weight", type=float, default=ResolverConfig.prior_weight)
    parser.add_argument("--agreement-weight", type=float, default=ResolverConfig.agreement_weight)
    parser.add_argument("--limit", type=int, default=0, help="first N records only (smoke runs)")
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    args = parser.parse_args()

    data_dir, catalog, memory = setup(args.data_dir, args.memory)
    records, conversion = converted_split(args.split, data_dir, catalog)
    if args.limit:
        records = records[: args.limit]
    cases = oracle_cases(records)
    config = ResolverConfig(prior_weight=args.prior_weight, agreement_weight=args.agreement_weight)
    resolver = Resolver(memory, config, Prior(prior_counts_for(args.split, data_dir)))
    peer = StringLookupPeer(catalog, ids=set(memory.entities.ids() | memory.relations.ids()))

    results: dict[str, dict] = {}
    rows = []
    for condition in args.conditions.split(","):
        queries = [condition_query(c, condition, catalog) for c in cases]
        started = time.perf_counter()
        predicted = mappings(resolve_all(resolver, queries))
        seconds = time.perf_counter() - started
        ours = score_slots(cases, predicted)
        fuzzy = condition.startswith("noisy")
        peer_predicted = [peer.resolve(q, fuzzy=fuzzy) for q in queries]
        theirs = score_slots(cases, peer_predicted)
        results[condition] = {
            "pgmr": ours.to_json(),
            "string_peer": theirs.to_json(),
            "pgmr_entity_error_causes": error_causes(cases, predicted, catalog, memory),
            "peer_entity_error_causes": error_causes(cases, peer_predicted, catalog, memory),
            "resolve_seconds": seconds,
        }
        rows.append(
            [
                condition,
                ours.entity_accuracy,
                theirs.entity_accuracy,
                ours.relation_accuracy,
                theirs.relation_accuracy,
                ours.query_accuracy,
                theirs.query_accuracy,
            ]
        )
        console.print(f"{condition}: done in {seconds:.0f}s")
    console.print(
        table(
            f"Oracle resolution, LC-QuAD 2.0 {args.split} ({len(cases)} queries, "
            f"{results[next(iter(results))]['pgmr']['entity_slots']} entity / "
            f"{results[next(iter(results))]['pgmr']['relation_slots']} relation slots)",
            [
                "condition",
                "entity pgmr",
                "entity peer",
                "relation pgmr",
                "relation peer",
                "query pgmr",
                "query peer",
            ],
            rows,
        )
    )
    for condition, r in results.items():
        console.print(f"{condition} entity errors (pgmr): {r['pgmr_entity_error_causes']}")
    name = "oracle_resolution" if args.split == "test" else f"oracle_resolution-{args.split}"
    write_result(
        name,
        {
            "split": args.split,
            "conversion": conversion,
            "config": config.__dict__,
            "memory": memory.manifest.to_json(),
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
