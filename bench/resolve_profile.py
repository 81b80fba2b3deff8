"""Where a warm question's resolve time goes, part by part, through one memory.

    python bench/resolve_profile.py MEMORY [--questions 300] [--out resolve_profile]

The questions are bench/memory_scale.py's warm ones (LC-QuAD 2.0 test gold queries as placeholders, the same
seeded sample): the memory is loaded, its rows and lexical tier read into the page cache as `Memory.load` does,
the first `--questions` of the sample resolved once to warm the process, then `--questions` others timed, one
at a time through `Resolver.resolve`. Each part is the time inside the named calls, counted once where one
calls another (a lexicon's `similarities` reads `surfaces_of`); "other" is the rest (ranking, support, the
final query). Prints the mean milliseconds a question spends in each part over all questions and over the
slowest 1% per placeholder (what sets the p99), and writes bench/results/OUT.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import console, converted_split, table, write_result

PARTS = ("encode", "entity search", "relation search", "entity rows", "relation rows", "entity lexical",
         "relation lexical", "other")  # fmt: skip


class Timer:
    """Seconds spent in wrapped calls, by part; a call made inside another wrapped call counts for the outer."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self._depth = 0

    def wrap(self, owner: Any, name: str, part: str) -> None:
        inner: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return inner(*args, **kwargs)
            self._depth += 1
            began = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.spent[part] += time.perf_counter() - began
                self._depth -= 1

        # Frozen dataclasses (a lexicon may be one) take the attribute through object's own setter.
        object.__setattr__(owner, name, timed)


def _resolution(resolved: Any) -> str:
    """A resolution or refusal as one JSON line: its final query (or refusal reason) and every placeholder's
    candidates with their scores."""
    evidence = [[(c.id, c.score) for c in e.candidates] for e in getattr(resolved, "evidence", ())]
    final = getattr(resolved, "sparql", None) or str(getattr(resolved, "reason", ""))
    return json.dumps({"final": final, "candidates": evidence})


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("memory", type=Path)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--data-dir")
    parser.add_argument("--out", default="resolve_profile", help="result name: bench/results/OUT.json")
    parser.add_argument(
        "--resolutions",
        type=Path,
        help="also write each timed question's resolution (final query, candidates and scores) to this JSONL "
        "file: two checkouts that answer alike write the same bytes",
    )
    args = parser.parse_args()

    from pgmr.config import resolve_data_dir
    from pgmr.evaluation.oracle import oracle_cases
    from pgmr.kg.catalog import LabelCatalog
    from pgmr.memory import Memory
    from pgmr.memory.page_cache import files_to_warm, warm_up
    from pgmr.resolver import Resolver

    memory = Memory.load(args.memory, verify=False, warm=False)
    data = resolve_data_dir(args.data_dir)
    converted, _ = converted_split("test", data, LabelCatalog.from_data_dir(data))
    # memory_scale.py's sample: its first question warms up, then cold ones, then the warm ones timed here.
    sample = random.Random(1).sample(oracle_cases(converted), 2 * args.questions + 1)
    resolver = Resolver(memory)
    warming = warm_up(files_to_warm(args.memory, memory.manifest))
    if warming is not None:
        warming.wait()
    timer = Timer()
    timer.wrap(memory.encoder, "encode", "encode")
    for kind in ("entity", "relation"):
        dictionary = memory.dictionary(kind)
        timer.wrap(dictionary, "search_vectors", f"{kind} search")
        for name in ("similarities", "get"):
            timer.wrap(dictionary, name, f"{kind} rows")
        lexicon = resolver.lexicon(kind)
        for name in ("exact", "fuzzy", "similarities", "knows", "surfaces_of"):
            timer.wrap(lexicon, name, f"{kind} lexical")
    for case in sample[: args.questions]:
        resolver.resolve(case.query)
    questions, resolutions = [], []
    for case in sample[args.questions + 1 :]:
        timer.spent.clear()
        began = time.perf_counter()
        resolved = resolver.resolve(case.query)
        total = (time.perf_counter() - began) * 1000
        resolutions.append(_resolution(resolved))
        parts = {part: seconds * 1000 for part, seconds in timer.spent.items()}
        parts["other"] = total - sum(parts.values())
        placeholders = max(1, len(case.query.placeholders))
        questions.append({"ms": total, "placeholders": placeholders, "ms_per_placeholder": total / placeholders,
                          "parts": parts})  # fmt: skip
    if args.resolutions:
        args.resolutions.write_text("".join(line + "\n" for line in resolutions), encoding="utf-8")
    questions.sort(key=lambda q: -q["ms_per_placeholder"])
    slowest = questions[: max(1, len(questions) // 100)]
    per_placeholder = sorted(q["ms_per_placeholder"] for q in questions)

    def means(group: list[dict[str, Any]]) -> dict[str, float]:
        return {part: statistics.fmean(q["parts"].get(part, 0.0) for q in group) for part in PARTS}

    overall, tail = means(questions), means(slowest)
    rows = [[part, f"{overall[part]:.1f}", f"{tail[part]:.1f}"] for part in PARTS]
    rows.append(["question", f"{statistics.fmean(q['ms'] for q in questions):.1f}",
                 f"{statistics.fmean(q['ms'] for q in slowest):.1f}"])  # fmt: skip
    p50 = statistics.median(per_placeholder)
    p99 = per_placeholder[int(0.99 * (len(per_placeholder) - 1))]
    console.print(
        table(
            f"Warm resolve time by part, ms a question (per placeholder: p50 {p50:.1f}, p99 {p99:.1f})",
            ["part", f"all {len(questions)}", f"slowest {len(slowest)}"],
            rows,
        )
    )
    write_result(
        args.out,
        {
            "memory": str(args.memory),
            "index_options": memory.entities.index.options(),
            "questions": len(questions),
            "warm_ms_per_placeholder_p50": p50,
            "warm_ms_per_placeholder_p99": p99,
            "mean_ms_by_part": overall,
            "slowest_mean_ms_by_part": tail,
            "slowest": slowest,
        },
    )


if __name__ == "__main__":
    main()
