"""Would the seq2seq member's own token probabilities help the ensemble's reranker? (issue #18,
docs/research-log.md, 2026-12-04)

    python bench/seq2seq_confidence_rerank.py --drafts artifacts/rerank/validation.drafts.jsonl \
        --signals artifacts/rerank/s18/drafts.signals.json

The shipped reranker reads the structured member's confidences (`generator_template`, `generator_slots`) and
nothing of the seq2seq member's. This decodes the seq2seq member again (greedy, the shipped copy bias, as the
ensemble does) keeping each written token's log-probability under the copy-biased scores, splits the tokens into
labels (`[ENT] ... [/ENT]`, `[REL] ... [/REL]`) and the rest, and refits the reranker
(pgmr.experiments.rerank_fit, as `pgmr ensemble fit-rerank`: fitted after the first 600 validation questions) with
candidate signals in the seq2seq member's two confidence slots. Reported: the reranked Query EM on the first 600
(fitted on the rest) and on the rest (two-fold), against the shipped signals alone. Writes
bench/results/seq2seq_confidence_rerank.json.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

import torch

from _common import console, table, write_result

VARIANTS: tuple[tuple[str | None, str | None], ...] = (
    (None, None),
    ("outside_sum", None),
    ("outside_mean", None),
    (None, "label_min_sum"),
    (None, "label_min_mean"),
    ("outside_sum", "label_min_sum"),
    ("outside_mean", "label_min_mean"),
    ("all_mean", None),
    ("all_min", None),
    ("all_mean", "all_min"),
)


def token_logprobs(model_dir: Path, questions: list[str], batch_size: int) -> list[dict[str, Any]]:
    from transformers import LogitsProcessorList

    from pgmr.generators.base import generate_in_length_order
    from pgmr.generators.seq2seq.generator import Seq2SeqGenerator

    g = Seq2SeqGenerator.load(model_dir)
    eos = g.tokenizer.eos_token_id

    def batch(idx: list[int]) -> list[dict[str, Any]]:
        part = [questions[i] for i in idx]
        processor = g._copy_processor(part)
        enc = g.source_tokenizer(
            part, padding=True, truncation=True, max_length=g.max_source_len, return_tensors="pt"
        )
        with torch.inference_mode():
            out = g.model.generate(
                input_ids=enc["input_ids"],
                attention_mask=enc["attention_mask"],
                max_new_tokens=g.max_new_tokens,
                num_beams=1,
                do_sample=False,
                logits_processor=LogitsProcessorList([processor] if processor is not None else []),
                return_dict_in_generate=True,
                output_scores=True,
            )
        tokens = out.sequences[:, 1:]
        scores = torch.log_softmax(torch.stack(out.scores, 1).float(), -1)
        chosen = scores.gather(-1, tokens[..., None])[..., 0]
        rows = []
        for t, lp in zip(tokens.tolist(), chosen.tolist(), strict=True):
            n = t.index(eos) + 1 if eos in t else len(t)
            text = g.tokenizer.decode(t[:n], skip_special_tokens=True, clean_up_tokenization_spaces=False)
            rows.append({"tokens": t[:n], "logp": lp[:n], "text": text})
        return rows

    markers = {}
    for text, role in ((" [ENT]", 1), (" [/ENT]", -1), (" [REL]", 1), (" [/REL]", -1)):
        ids = g.tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) == 1:
            markers[ids[0]] = role
    rows = generate_in_length_order(questions, batch_size, batch, len)
    for row in rows:
        row.update(_features(row, markers))
    return rows


def _features(row: dict[str, Any], markers: dict[int, int]) -> dict[str, float]:
    outside, n_outside, labels, means = 0.0, 0, [], []
    current: float | None = None
    length = 0
    for token, value in zip(row["tokens"], row["logp"], strict=True):
        role = markers.get(token)
        if current is not None:
            current += value
            length += 1
            if role == -1:
                labels.append(current)
                means.append(current / length)
                current = None
        else:
            outside += value
            n_outside += 1
            if role == 1:
                current, length = 0.0, 0
    logp = row["logp"] or [0.0]
    return {
        "outside_sum": outside,
        "outside_mean": outside / max(n_outside, 1),
        "label_min_sum": min(labels, default=0.0),
        "label_min_mean": min(means, default=0.0),
        "all_mean": sum(logp) / len(logp),
        "all_min": min(logp),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--drafts", type=Path, required=True, help="`pgmr generate ENSEMBLE` validation rows")
    parser.add_argument(
        "--signals", type=Path, required=True, help="`pgmr ensemble fit-rerank`'s drafts.signals.json"
    )
    parser.add_argument("--model", type=Path, default=Path("models/pgmr-default"))
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    from pgmr.experiments.rerank_fit import report
    from pgmr.jsonl import read_jsonl

    drafts = list(read_jsonl(args.drafts))
    questions = json.loads(args.signals.read_text(encoding="utf-8"))
    if [r["id"] for r in drafts] != [q["id"] for q in questions]:
        raise SystemExit("--drafts and --signals hold other questions (or another order)")
    rows = token_logprobs(args.model, [r["question"] for r in drafts], args.batch_size)
    # The drafts were written by `pgmr generate` in other batches: a few outputs may differ (bfloat16).
    same = sum(
        d["text"] == row["text"]
        for row, saved in zip(rows, drafts, strict=True)
        for d in saved["drafts"]
        if d["source"] == "seq2seq"
    )
    by_id = {q["id"]: row for q, row in zip(questions, rows, strict=True)}
    results = []
    for template, slots in VARIANTS:
        variant = copy.deepcopy(questions)
        for q in variant:
            for d in q["drafts"]:
                if d["source"] == "seq2seq":
                    if template:
                        d["signals"]["generator_template"] = by_id[q["id"]][template]
                    if slots:
                        d["signals"]["generator_slots"] = by_id[q["id"]][slots]
        figures = report(variant, ["seq2seq", "structured"], held_out=600)
        results.append(
            {
                "generator_template": template or "-",
                "generator_slots": slots or "-",
                "first_600": figures["first"]["reranked (fitted on the rest)"],
                "rest_two_fold": figures["rest"]["reranked (two-fold)"],
            }
        )
    console.print(
        table(
            "reranked Query EM, LC-QuAD 2.0 validation (seq2seq signals: log-probabilities)",
            ["template slot", "slots slot", "first 600", "rest (two-fold)"],
            [
                [r["generator_template"], r["generator_slots"], r["first_600"], r["rest_two_fold"]]
                for r in results
            ],
        )
    )
    console.print(f"{same} of {len(rows)} seq2seq outputs decoded again are the saved drafts' texts")
    write_result(
        "seq2seq_confidence_rerank",
        {"questions": len(questions), "same_texts": same, "variants": results},
    )


if __name__ == "__main__":
    main()
