"""Does a draft verifier tell a gold query from one edit away? (LC-QuAD 2.0 validation; issue #18.)

    python bench/verifier_negatives.py --verifier NAME=DIR [--verifier NAME=DIR ...] [--limit N]

For each validation question, the gold query and its negatives made as `pgmr train-verifier --gold-negatives`
makes them (pgmr.experiments.gold_negatives, neighbours among the properties the training queries use): a
relation swapped for a near neighbour, a triple turned round, an entity swapped for a homonym or nearest
neighbour. Each verifier scores every text; per kind, the share of questions where the gold query scores above
its negative (pairwise accuracy). The verifiers are scored side by side on the same texts. Writes
bench/results/verifier_negatives.json.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from _common import console, gold_records, table, write_result
from pgmr.config import default_memory_dir, resolve_data_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--verifier", action="append", required=True, metavar="NAME=DIR")
    ap.add_argument("--limit", type=int, help="the first N validation questions")
    ap.add_argument("--data-dir", type=Path)
    ap.add_argument("--memory", type=Path)
    args = ap.parse_args()
    from pgmr.datasets import load_named
    from pgmr.datasets.splits import split_train_validation
    from pgmr.evaluation.metrics import query_exact_match
    from pgmr.experiments.gold_negatives import KINDS, GoldNegatives
    from pgmr.generators.verifier import Verifier, memory_describer
    from pgmr.memory import Memory

    verifiers = {}
    for spec in args.verifier:
        name, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"--verifier {spec!r}: expected NAME=DIR")
        verifiers[name] = Verifier.load(path)
    data_dir = resolve_data_dir(args.data_dir)
    memory = Memory.load(args.memory or default_memory_dir())
    train = split_train_validation(load_named("lcquad2-train", data_dir).records)[0]
    negatives = GoldNegatives(memory, [r.sparql for r in train])
    records = gold_records("validation", data_dir)[: args.limit]
    # Every verifier here reads the same verbalization (checked below), so the texts are made once.
    words = {v.description_words for v in verifiers.values()}
    if len(words) != 1:
        raise SystemExit(f"the verifiers read different description lengths: {sorted(words)}")
    verbalize = next(iter(verifiers.values())).describe_with(memory_describer(memory))
    pairs: list[
        tuple[int, str, str]
    ] = []  # (question index, kind, verbalized text); kind "" is the gold query
    texts: list[str] = []
    questions: list[str] = []
    for n, record in enumerate(records):
        if verbalize(record.sparql) is None:
            continue
        made = negatives.candidates(record.sparql, random.Random(n))
        kept = {k: s for k, s in made.items() if not query_exact_match(s, record.sparql)}
        for kind, sparql in [("", record.sparql), *kept.items()]:
            text = verbalize(sparql)
            if text is not None:
                pairs.append((n, kind, text))
                texts.append(text)
                questions.append(record.question)
    results: dict[str, dict[str, float | int]] = {}
    rows = []
    for name, verifier in verifiers.items():
        started = time.perf_counter()
        scores = verifier.score(questions, texts, batch_size=64)
        gold: dict[int, float] = {}
        by_kind: dict[str, list[bool]] = {k: [] for k in KINDS}
        for (n, kind, _), score in zip(pairs, scores, strict=True):
            if kind == "":
                gold[n] = score
        for (n, kind, _), score in zip(pairs, scores, strict=True):
            if kind and n in gold:
                by_kind[kind].append(gold[n] > score)
        results[name] = {
            **{k: sum(v) / len(v) for k, v in by_kind.items() if v},
            **{f"{k}_n": len(v) for k, v in by_kind.items()},
            "seconds": round(time.perf_counter() - started, 1),
        }
        rows.append([name, *(f"{100 * results[name].get(k, 0.0):.1f}" for k in KINDS)])
    console.print(
        table(
            f"gold query scored above its negative, % of {len(records)} LC-QuAD 2.0 validation questions",
            ["verifier", *(f"{k} (n={results[next(iter(results))][f'{k}_n']})" for k in KINDS)],
            rows,
        )
    )
    write_result(
        "verifier_negatives",
        {
            "verifiers": dict(s.partition("=")[::2] for s in args.verifier),
            "questions": len(records),
            **results,
        },
    )


if __name__ == "__main__":
    main()
