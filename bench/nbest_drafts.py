"""More drafts per question from the structured members: does the right query hide in their runners-up, and can
the reranker find it? (LC-QuAD 2.0 validation; issue #18, docs/generators.md.)

    pgmr generate models/pgmr-ensemble lcquad2-validation --batch-size 32 \
        -o artifacts/rerank/validation.drafts.jsonl                       # the shipped members' drafts
    python bench/nbest_drafts.py [--verifier DIR] [--out DIR]

Per structured member, two more drafts beside the ensemble's three, from the same forward pass: `+t2`, the frame of
its second most probable template, and `+r2`, its top frame with the least probable relation slot given its next
property (one not already used). Every draft is resolved with the shipped grounding and no refusal and scored
with the reranker's signals (pgmr.experiments.rerank_fit.draft_outcomes, as scripts/fit_rerank.py; with
--verifier, the verifier's signal too). Then, for the shipped three and for the three plus each kind of
runner-up: the oracle (any draft right) and the pairwise reranker refitted on them, on the first 600 (fitted on
the rest) and the rest (two-fold), as scripts/fit_rerank.py reports. Writes bench/results/nbest_drafts.json;
the drafts and signals are cached in --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import torch

from _common import console, table, write_result
from pgmr.config import default_memory_dir, resolve_data_dir

BASE = ("seq2seq", "structured", "structured-s7")
MEMBERS = {"structured": "models/pgmr-structured", "structured-s7": "models/pgmr-structured-s7"}
KINDS = ("t2", "r2")


@torch.no_grad()
def runner_up_drafts(rows: list[dict[str, Any]]) -> tuple[dict[str, list[dict[str, Any]]], Counter[str]]:
    """Per question id, each structured member's +t2 and +r2 drafts; and per member how many of its top frames
    differ from the shipped draft (batching moves near ties in bfloat16)."""
    from pgmr.generators.base import generate_in_length_order
    from pgmr.generators.structured.decoding import SlotValue, decode_frames, encode_questions
    from pgmr.generators.structured.generator import StructuredGenerator

    extra: dict[str, list[dict[str, Any]]] = defaultdict(list)
    differ: Counter[str] = Counter()
    for source, directory in MEMBERS.items():
        g = StructuredGenerator.load(directory)

        def run(indexes: list[int], g: Any = g, source: str = source) -> list[list[dict[str, Any]]]:
            batch = [rows[i] for i in indexes]
            enc = encode_questions(g.tokenizer, [r["question"] for r in batch], g.max_source_len, g.lexicon)
            out = g.model(
                enc.input_ids,
                enc.attention_mask,
                enc.span_starts,
                enc.span_ends,
                relation_features=enc.relation_features,
            )
            top = out.template.float().topk(2, -1).indices
            span = g.model.heads.max_span_tokens
            first = decode_frames(out, top[:, 0], enc, g.vocab, span, g.ranker)
            second = decode_frames(out, top[:, 1], enc, g.vocab, span, g.ranker)
            relation_logp = out.relation.float().log_softmax(-1)
            result = []
            for b, row in enumerate(batch):
                own = next(d for d in row["drafts"] if d["source"] == source)
                differ[source] += own["text"] != first[b].query().to_text()
                drafts = [_draft(f"{source}+t2", second[b])]
                frame = first[b]
                swapped = None
                if frame.relations:
                    j = min(range(len(frame.relations)), key=lambda r: frame.relations[r].confidence)
                    used = {v.label for v in frame.relations}
                    for k in relation_logp[b, j].topk(5).indices.tolist():
                        choice = g.vocab.relations[k]
                        if choice.label not in used:
                            value = SlotValue(
                                choice.label, choice.description, math.exp(float(relation_logp[b, j, k]))
                            )
                            relations = (*frame.relations[:j], value, *frame.relations[j + 1 :])
                            swapped = dataclasses.replace(frame, relations=relations)
                            break
                # Without a relation slot the member's own draft stands in (it resolves the same).
                drafts.append(
                    _draft(f"{source}+r2", swapped) if swapped else {**own, "source": f"{source}+r2"}
                )
                result.append(drafts)
            return result

        order = list(range(len(rows)))
        # The generator's own batching (by question length, 32 a batch), so the top frames match the shipped.
        for row, drafts in zip(
            rows, generate_in_length_order(order, 32, run, lambda i: len(rows[i]["question"])), strict=True
        ):
            extra[row["id"]].extend(drafts)
    return extra, differ


def _draft(source: str, frame: Any) -> dict[str, Any]:
    slots = [v.confidence for v in (*frame.entities, *frame.relations)]
    return {
        "source": source,
        "text": frame.query().to_text(),
        "confidence": {"template": frame.template_confidence, "slots": min(slots, default=1.0)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--drafts", type=Path, default=Path("artifacts/rerank/validation.drafts.jsonl"))
    ap.add_argument("--verifier", type=Path, help="a trained draft verifier (pgmr train-verifier's model)")
    ap.add_argument("--out", type=Path, default=Path("artifacts/nbest"))
    ap.add_argument("--data-dir", type=Path)
    args = ap.parse_args()
    from pgmr.datasets import load_named
    from pgmr.datasets.splits import split_train_validation
    from pgmr.experiments.rerank_fit import draft_outcomes, report
    from pgmr.generators.ensemble import Draft
    from pgmr.memory import Memory
    from pgmr.pipeline import StageConfig
    from pgmr.resolver import Resolver, ResolverConfig
    from pgmr.resolver.grounding import GroundingConfig

    args.out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in args.drafts.read_text(encoding="utf-8").splitlines()]
    drafts_path = args.out / "drafts.jsonl"
    if not drafts_path.exists():
        extra, differ = runner_up_drafts(rows)
        console.print(f"top frames differing from the shipped drafts: {dict(differ)}")
        drafts_path.write_text(
            "".join(json.dumps({**r, "drafts": r["drafts"] + extra[r["id"]]}) + "\n" for r in rows),
            encoding="utf-8",
        )
    signals_path = args.out / ("signals.verifier.json" if args.verifier else "signals.json")
    if not signals_path.exists():
        data = [json.loads(line) for line in drafts_path.read_text(encoding="utf-8").splitlines()]
        records = load_named("lcquad2-train", resolve_data_dir(args.data_dir)).records
        gold = {r.id: r for r in split_train_validation(records)[1]}
        stages = StageConfig(GroundingConfig(), resolver=ResolverConfig())
        verifier = None
        if args.verifier:
            from pgmr.generators.verifier import Verifier

            verifier = Verifier.load(args.verifier)
        questions = draft_outcomes(
            [r["id"] for r in data],
            [r["question"] for r in data],
            [
                tuple(Draft(d["source"], d["text"], d.get("confidence") or {}) for d in r["drafts"])
                for r in data
            ],
            gold,
            Resolver(Memory.load(default_memory_dir()), stages.resolver),
            stages,
            verifier,
        )
        signals_path.write_text(json.dumps(questions), encoding="utf-8")
    questions = json.loads(signals_path.read_text(encoding="utf-8"))
    variants = {
        "shipped three": BASE,
        **{f"three + {k}": (*BASE, *(f"{m}+{k}" for m in MEMBERS)) for k in KINDS},
        "three + t2 + r2": (*BASE, *(f"{m}+{k}" for m in MEMBERS for k in KINDS)),
    }
    results: dict[str, Any] = {}
    table_rows = []
    for name, sources in variants.items():
        part = [{**q, "drafts": [d for d in q["drafts"] if d["source"] in sources]} for q in questions]
        figures = report(part, list(sources), 1.0, held_out=600)
        first, rest = figures["first"], figures["rest"]
        results[name] = {"sources": list(sources), "first": first, "rest": rest}
        table_rows.append(
            [
                name,
                *(f"{100 * v:.2f}" for v in (first["oracle"], first["reranked (fitted on the rest)"])),
                *(f"{100 * v:.2f}" for v in (rest["oracle"], rest["reranked (two-fold)"])),
            ]
        )
    console.print(
        table(
            f"Query EM %, LC-QuAD 2.0 validation ({'with' if args.verifier else 'without'} the verifier signal)",
            ["drafts", "first 600: oracle", "reranked", "rest: oracle", "reranked (two-fold)"],
            table_rows,
        )
    )
    write_result(
        "nbest_drafts" + ("-verifier" if args.verifier else ""),
        {"drafts": str(args.drafts), "verifier": str(args.verifier) if args.verifier else None, **results},
    )


if __name__ == "__main__":
    main()
