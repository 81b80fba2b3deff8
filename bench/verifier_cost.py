"""What the ensemble's draft verifier adds to a question's time: its scoring of the resolved drafts.

    python bench/verifier_cost.py DRAFTS --verifier DIR [--questions 256] [--one-by-one 40]

DRAFTS is `pgmr generate ENSEMBLE DATASET --resolve` output (every draft's final SPARQL). Per question, its
distinct resolved drafts are verbalized with the memory's labels and scored as the pipeline scores them
(`pgmr.pipeline.rerank.verifier_scores`): the first --one-by-one questions one question per call (`pgmr ask`),
then the first --questions in calls of 32 questions (`pgmr generate`, the experiments). Prints milliseconds
per question and writes bench/results/verifier_cost.json. Compare with the question-to-SPARQL time of
bench/generation_speed.py (the same machine, the same load).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import console, table, write_result
from pgmr.config import default_memory_dir
from pgmr.generators.verifier import Verifier, memory_describer
from pgmr.jsonl import read_jsonl
from pgmr.memory import Memory


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("drafts", type=Path)
    parser.add_argument(
        "--verifier", type=Path, required=True, help="a verifier directory (pgmr train-verifier's OUT/model)"
    )
    parser.add_argument("--memory", type=Path)
    parser.add_argument("--questions", type=int, default=256)
    parser.add_argument("--one-by-one", type=int, default=40)
    args = parser.parse_args()

    verifier = Verifier.load(args.verifier)
    verbalize = verifier.describe_with(memory_describer(Memory.load(args.memory or default_memory_dir())))
    rows = list(read_jsonl(args.drafts))[: max(args.questions, args.one_by_one)]
    per_question = []
    for row in rows:
        texts = {verbalize(d["sparql"]) for d in row["drafts"] if d.get("sparql")} - {None}
        per_question.append([(row["question"], t) for t in sorted(texts)])  # type: ignore[type-var]

    def timed(groups: list[list[tuple[str, str]]]) -> float:
        started = time.perf_counter()
        for group in groups:
            if group:
                verifier.score([q for q, _ in group], [t for _, t in group])
        return time.perf_counter() - started

    timed(per_question[:2])  # warm-up: the first call pays for lazy initialisation
    one = per_question[: args.one_by_one]
    batch1 = timed(one) / len(one)
    many = per_question[: args.questions]
    batch32 = timed([[p for g in many[i : i + 32] for p in g] for i in range(0, len(many), 32)]) / len(many)
    drafts = sum(len(g) for g in many) / len(many)
    console.print(
        table(
            "draft verifier: time per question",
            ["questions per call", "questions", "distinct resolved drafts per question", "ms per question"],
            [
                [1, len(one), f"{sum(len(g) for g in one) / len(one):.2f}", f"{1000 * batch1:.1f}"],
                [32, len(many), f"{drafts:.2f}", f"{1000 * batch32:.1f}"],
            ],
        )
    )
    write_result(
        "verifier_cost",
        {
            "drafts": str(args.drafts),
            "verifier": str(args.verifier),
            "bf16": verifier.bf16,
            "ms_per_question": {"batch_1": 1000 * batch1, "batch_32": 1000 * batch32},
            "questions": {"batch_1": len(one), "batch_32": len(many)},
            "distinct_drafts_per_question": drafts,
        },
    )


if __name__ == "__main__":
    main()
