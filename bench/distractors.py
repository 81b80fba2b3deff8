"""Distractor memory: resolution quality as the entity memory grows around the test entities.

    python bench/distractors.py [--sizes 0,1,3,5,9] [--memory DIR]

Size m means the memory holds the gold entities of the LC-QuAD 2.0 test queries plus m times as many other
entities (drawn at random, seed 0, from all of ../shared/data/memory); relations are all kept. Embeddings come
from the full memory's cache, so nothing is re-encoded. Writes bench/results/distractors.json.
"""

from __future__ import annotations

import argparse
import random

from _common import (
    console,
    converted_split,
    embedding_cache,
    mappings,
    prior_counts_for,
    resolve_all,
    setup,
    table,
    write_result,
)
from pgmr.evaluation.oracle import condition_query, oracle_cases, score_slots
from pgmr.memory import EmbeddingCache, Memory
from pgmr.resolver import Prior, Resolver


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir")
    parser.add_argument("--memory")
    parser.add_argument("--cache-dir", help="embedding cache (default: the memory's sibling .cache)")
    parser.add_argument("--sizes", default="0,1,3,5,9")
    parser.add_argument("--conditions", default="label+description,label")
    args = parser.parse_args()

    data_dir, catalog, full = setup(args.data_dir, args.memory)
    records, _ = converted_split("test", data_dir, catalog)
    cases = oracle_cases(records)
    gold_entities = sorted({wid for c in cases for name, wid in c.gold if name.startswith("entity")})
    others = sorted(e.id for e in catalog.of_kind("entity") if e.label and e.id not in set(gold_entities))
    random.Random(0).shuffle(others)
    relations = {e.id for e in catalog.of_kind("relation")}
    cache = (
        EmbeddingCache(args.cache_dir, full.encoder.name, full.encoder.dimension)
        if args.cache_dir
        else embedding_cache(args.memory, full)
    )
    prior = Prior(prior_counts_for("test", data_dir))
    queries = {
        cond: [condition_query(c, cond, catalog) for c in cases] for cond in args.conditions.split(",")
    }

    results, rows = [], []
    for size in (int(s) for s in args.sizes.split(",")):
        extra = others[: size * len(gold_entities)]
        if len(extra) < size * len(gold_entities):
            console.print(f"[yellow]size {size}x: only {len(extra)} other entities available[/yellow]")
        ids = set(gold_entities) | set(extra) | relations
        memory = Memory.build_in_memory(catalog, full.encoder, cache=cache, ids=ids, progress=False)
        if memory.build_stats and memory.build_stats.encoded:
            console.print(
                f"[yellow]{memory.build_stats.encoded} texts were not cached and got encoded[/yellow]"
            )
        resolver = Resolver(memory, prior=prior)
        entry = {
            "size": size,
            "entities_in_memory": len(memory.entities),
            "entity_rows": len(memory.entities.rows),
        }
        row = [f"{size}x", len(memory.entities)]
        for cond, qs in queries.items():
            scores = score_slots(cases, mappings(resolve_all(resolver, qs)))
            entry[cond] = scores.to_json()
            row += [scores.entity_accuracy, scores.query_accuracy]
        results.append(entry)
        rows.append(row)
        console.print(f"size {size}x done")
    columns = ["distractors", "entities"]
    for cond in queries:
        columns += [f"entity acc ({cond})", f"queries correct ({cond})"]
    console.print(
        table(f"Distractor memory, LC-QuAD 2.0 test ({len(gold_entities)} gold entities)", columns, rows)
    )
    write_result("distractors", {"gold_entities": len(gold_entities), "results": results})


if __name__ == "__main__":
    main()
