"""Why answerable questions of the relation-removed set are refused, and what a memory-constrained relation
fallback of the structured member would trade (LC-QuAD 2.0 validation; issue #19,
docs/research-log.md, "2026-12-04 — Why relation-removed questions are refused").

    pgmr experiment fit-refusal --label supported --predictions artifacts/rerank/validation.drafts.jsonl \
        --out artifacts/refusal-calibration/s18r            # writes placeholders.jsonl (one row per draft, memory)
    python bench/relation_removed_refusals.py --rows artifacts/refusal-calibration/s18r/placeholders.jsonl

1. Refused answerable questions at the shipped threshold, from the collected rows and the shipped support model:
   whether any draft is right on the full memory, and what each draft's weakest placeholder is (kind, right or
   wrong, `named_absent`). A question is refused when every draft has a placeholder under the threshold.
2. The structured member's relation scores on the relation-removed memory (the same seeded removal as
   pgmr.experiments.unanswerable): for slots whose first choice was removed, how often the best remaining
   property is gold, in answerable and unanswerable questions, by the first choice's and the fallback's
   probability.
3. Answered unanswerable questions (the recall side), on both reduced memories: every wrong placeholder of
   the drafts that reach the threshold, by kind and by how its label meets the memory (the own label of the
   best candidate, an alias of it, or no label or alias). A wrong relation written as the own label of a
   property the memory still holds means the generator wrote a wrong relation, which no memory signal can
   catch (measured 2026-12-05, commit 16051fb). Writes bench/results/relation_removed_refusals.json; --no-fallback skips part 2 (no
   model needed).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import torch

from _common import console, table, write_result
from pgmr.config import resolve_data_dir


def refused_answerable(rows_path: Path, threshold: float) -> dict[str, Any]:
    from pgmr.resolver.support import shipped_calibration

    calibration = shipped_calibration()
    by_question: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in rows_path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["set"] == "relation-removed":
            by_question[row["id"]].append(row)
    kinds: Counter[str] = Counter()
    answerable = refused = any_right = 0
    for drafts in by_question.values():
        if not drafts[0]["answerable"]:
            continue
        answerable += 1
        weakest = []
        for d in drafts:
            if not d["parsed"]:
                weakest.append(None)
                continue
            scored = [
                (calibration.models[p["kind"]].probability(p["features"]), p) for p in d["placeholders"]
            ]
            weakest.append(min(scored, key=lambda x: x[0]) if scored else (1.0, None))
        if any(w is None or w[0] >= threshold for w in weakest if w is not None) or all(
            w is None for w in weakest
        ):
            continue
        refused += 1
        any_right += any(d["query_em"] for d in drafts)
        if any(d["query_em"] for d in drafts):
            kinds["a draft is right on the full memory"] += 1
            continue
        parts = sorted(
            (
                f"{p['kind']} {'right' if p['correct'] else 'wrong'}"
                f"{' (named_absent)' if p['features'].get('named_absent') else ''}"
            )
            for w in weakest
            if w is not None and (p := w[1]) is not None
        )
        kinds[" / ".join(parts)] += 1
    return {"answerable": answerable, "refused": refused, "with_a_right_draft": any_right, "weakest": kinds}


def answered_unanswerable(rows_path: Path, threshold: float) -> dict[str, Any]:
    from pgmr.resolver.support import shipped_calibration

    calibration = shipped_calibration()
    questions: dict[str, set[str]] = defaultdict(set)
    answered: dict[str, set[str]] = defaultdict(set)
    wrong: dict[str, Counter[str]] = defaultdict(Counter)
    for line in rows_path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["set"] == "full" or row["answerable"]:
            continue
        questions[row["set"]].add(row["id"])
        if not row["parsed"]:
            continue
        placeholders = row["placeholders"]
        if any(calibration.models[p["kind"]].probability(p["features"]) < threshold for p in placeholders):
            continue
        answered[row["set"]].add(row["id"])
        for p in placeholders:
            if not p["correct"]:
                f = p["features"]
                how = "own label" if f["own_label"] else "alias" if f["exact"] else "no label or alias"
                wrong[row["set"]][f"{p['kind']}, {how}"] += 1
    return {
        name: {
            "unanswerable": len(questions[name]),
            "answered": len(answered[name]),
            "wrong_placeholders": dict(wrong[name].most_common()),
        }
        for name in sorted(questions)
    }


@torch.no_grad()
def fallback(data_dir: Path, model_dir: Path, floors: list[float]) -> dict[str, Any]:
    from pgmr.datasets import load_named
    from pgmr.experiments.unanswerable import gold_ids, removal
    from pgmr.generators.structured.decoding import encode_questions
    from pgmr.generators.structured.frames import placeholder_counts
    from pgmr.generators.structured.generator import StructuredGenerator

    records = list(load_named("lcquad2-validation", data_dir).records)
    chosen, removed = removal("relation-removed", records, seed=0)  # as the refusal experiment removes them
    g = StructuredGenerator.load(model_dir)
    slots = []
    for i in range(0, len(chosen), 64):
        batch = chosen[i : i + 64]
        enc = encode_questions(g.tokenizer, [r.question for r in batch], g.max_source_len, g.lexicon)
        out = g.model(
            enc.input_ids,
            enc.attention_mask,
            enc.span_starts,
            enc.span_ends,
            relation_features=enc.relation_features,
        )
        logp = out.relation.float().log_softmax(-1)
        for b, record in enumerate(batch):
            template = g.vocab.templates[int(out.template[b].argmax())]
            gold = gold_ids(record, "relation")
            answerable = not (gold & removed)
            for r in range(placeholder_counts(template)[1]):
                top = torch.topk(logp[b, r].exp(), 20)
                ranked = [
                    (g.vocab.relations[int(k)].id, float(p))
                    for p, k in zip(top.values, top.indices, strict=True)
                ]
                if ranked[0][0] not in removed:
                    continue
                alt = next((x for x in ranked if x[0] not in removed), None)
                if alt is not None:
                    slots.append((answerable, alt[0] in gold, ranked[0][1], alt[1]))
    by_floor = []
    for floor in floors:
        sel = [s for s in slots if s[3] >= floor]
        by_floor.append(
            {
                "floor": floor,
                "answerable_turned_right": sum(a and ok for a, ok, _, _ in sel),
                "answerable_still_wrong": sum(a and not ok for a, ok, _, _ in sel),
                "unanswerable_answered_wrongly": sum(not a and not ok for a, ok, _, _ in sel),
            }
        )
    return {
        "removed_relations": len(removed),
        "slots_first_choice_removed": {
            "answerable": sum(s[0] for s in slots),
            "answerable_fallback_right": sum(s[0] and s[1] for s in slots),
            "unanswerable": sum(not s[0] for s in slots),
            "unanswerable_fallback_wrong": sum(not s[0] and not s[1] for s in slots),
        },
        "by_floor": by_floor,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rows", type=Path, required=True, help="`pgmr experiment fit-refusal`'s placeholders.jsonl"
    )
    ap.add_argument("--threshold", type=float, help="default: the shipped one")
    ap.add_argument("--structured", type=Path, default=Path("models/pgmr-structured"))
    ap.add_argument("--data-dir", type=Path)
    ap.add_argument(
        "--no-fallback", action="store_true", help="skip part 2 (the structured member's fallback)"
    )
    args = ap.parse_args()
    from pgmr.resolver.support import shipped_threshold

    threshold = shipped_threshold() if args.threshold is None else args.threshold
    refusals = refused_answerable(args.rows, threshold)
    console.print(
        f"relation-removed, threshold {threshold}: {refusals['refused']} of {refusals['answerable']} answerable "
        f"questions refused, {refusals['with_a_right_draft']} with a draft right on the full memory"
    )
    console.print(
        table("weakest placeholder of each draft", ["drafts", "questions"], refusals["weakest"].most_common())
    )
    fb = None
    if not args.no_fallback:
        fb = fallback(resolve_data_dir(args.data_dir), args.structured, [0.0, 0.05, 0.1, 0.2, 0.3])
        console.print(fb["slots_first_choice_removed"])
        console.print(
            table(
                "structured member falling back to its best remaining relation (relation slots)",
                [
                    "fallback probability >=",
                    "answerable turned right",
                    "answerable still wrong",
                    "unanswerable answered wrongly",
                ],
                [[str(x["floor"]), *(str(x[k]) for k in list(x)[1:])] for x in fb["by_floor"]],
            )
        )
    unanswered = answered_unanswerable(args.rows, threshold)
    for name, part in unanswered.items():
        console.print(
            table(
                f"{name}: {part['answered']} of {part['unanswerable']} unanswerable questions answered; "
                "wrong placeholders of their drafts that reach the threshold",
                ["placeholder, its label in the memory", "count"],
                [[k, str(v)] for k, v in part["wrong_placeholders"].items()],
            )
        )
    write_result(
        "relation_removed_refusals",
        {
            "threshold": threshold,
            "refused_answerable": {**refusals, "weakest": dict(refusals["weakest"])},
            "fallback": fb,
            "answered_unanswerable": unanswered,
        },
    )


if __name__ == "__main__":
    main()
