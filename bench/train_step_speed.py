"""Training step time of the `minilm` preset on this machine: float32 against bfloat16 autocast, side by side.

    python bench/train_step_speed.py [--steps 20] [--rounds 3] [--batch-size 32] [--threads N]
                                     [--tokenizer models/pgmr-default] [--records 3000]

Why: `pgmr train` fits a wall-clock budget, so the step time decides how many steps the default model gets.
CPUs with AVX512-BF16 (or AMX) run bfloat16 matrix products through oneDNN; `pgmr train --bf16` turns on
the same autocast the Hugging Face Trainer uses on a CPU (accelerate's mixed precision "bf16").

Both variants train their own copy of the same freshly built model on the same real pgmr-mode batches
(LC-QuAD 2.0 train, descriptions dropped, batches of similar length, as `pgmr train` makes them), in
alternating rounds so that machine noise hits both alike; the table gives median seconds per step and the
ratio. The first steps of each variant are a warm-up and are not timed. Writes
bench/results/train_step_speed.json.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import random
import statistics
import time

import torch

from _common import console, table, write_result
from pgmr.config import resolve_data_dir
from pgmr.conversion import ConversionSummary, convert_records
from pgmr.datasets import load_named
from pgmr.generators.examples import build_examples
from pgmr.generators.seq2seq.model import build_encoder_decoder, source_tokenizer_for
from pgmr.kg.catalog import LabelCatalog


def batches(
    examples, source_tok, target_tok, batch_size: int, count: int, seed: int, max_source: int, max_target: int
):
    """`count` batches of similar total length (sorted windows of a shuffled pool, as group_by_length does)."""
    rng = random.Random(seed)
    pool = list(examples)
    rng.shuffle(pool)
    window = pool[: batch_size * count]
    window.sort(key=lambda e: len(e.source) + len(e.target))
    out = []
    for start in range(0, len(window), batch_size):
        chunk = window[start : start + batch_size]
        src = _tokenize(source_tok, [e.source for e in chunk], max_source)
        tgt = _tokenize(target_tok, [e.target for e in chunk], max_target)
        labels = tgt["input_ids"].masked_fill(tgt["attention_mask"] == 0, -100)
        out.append({"input_ids": src["input_ids"], "attention_mask": src["attention_mask"], "labels": labels})
    rng.shuffle(out)
    return out


def _tokenize(tokenizer, texts: list[str], max_length: int):
    return tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")


def _precision(bf16: bool):
    """What `pgmr train --bf16` does on a CPU: bfloat16 autocast around the forward pass."""
    return torch.autocast(device_type="cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()


def run_steps(model, optimizer, batch_list, bf16: bool) -> list[float]:
    times = []
    model.train()
    for batch in batch_list:
        started = time.perf_counter()
        with _precision(bf16):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir")
    parser.add_argument(
        "--tokenizer", default="models/pgmr-default", help="a model dir with a target tokenizer"
    )
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per variant per round")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-source-len", type=int, default=64)
    parser.add_argument("--max-target-len", type=int, default=160)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from transformers import AutoTokenizer

    data_dir = resolve_data_dir(args.data_dir)
    catalog = LabelCatalog.from_data_dir(data_dir)
    records = load_named("lcquad2-train", data_dir).records[: args.records]
    converted = list(convert_records(records, catalog, ConversionSummary()))
    examples = build_examples(converted, "pgmr", max_description_words=0)
    target_tok = AutoTokenizer.from_pretrained(args.tokenizer)
    source_tok = source_tokenizer_for("minilm")
    torch.manual_seed(0)
    base = build_encoder_decoder("minilm", source_tok, target_tok)
    variants = {"float32": False, "bfloat16 autocast": True}
    models = {name: copy.deepcopy(base) for name in variants}
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=1e-4) for name, m in models.items()}
    needed = args.warmup + args.steps * args.rounds
    data = batches(
        examples, source_tok, target_tok, args.batch_size, needed, 0, args.max_source_len, args.max_target_len
    )
    first_loss = {}
    with torch.no_grad():
        for name, bf16 in variants.items():
            with _precision(bf16):
                first_loss[name] = float(models[name](**data[0]).loss)
    timed: dict[str, list[float]] = {name: [] for name in variants}
    for name, bf16 in variants.items():
        run_steps(models[name], optimizers[name], data[: args.warmup], bf16)
    for r in range(args.rounds):
        chunk = data[args.warmup + r * args.steps : args.warmup + (r + 1) * args.steps]
        for name, bf16 in variants.items():
            timed[name].extend(run_steps(models[name], optimizers[name], chunk, bf16))
    reference = statistics.median(timed["float32"])
    rows = []
    result_rows = []
    for name in variants:
        median = statistics.median(timed[name])
        rows.append([name, f"{median:.3f}", f"{reference / median:.2f}x", f"{first_loss[name]:.4f}"])
        result_rows.append(
            {
                "variant": name,
                "median_s_per_step": median,
                "speedup_vs_float32": reference / median,
                "first_batch_loss": first_loss[name],
                "steps_timed": len(timed[name]),
            }
        )
    console.print(
        table(
            f"minilm preset, batch {args.batch_size}, {torch.get_num_threads()} threads, {len(timed['float32'])} steps each",
            ["variant", "s/step (median)", "speed vs float32", "loss, first batch (same weights)"],
            rows,
        )
    )
    write_result(
        "train_step_speed",
        {"threads": torch.get_num_threads(), "batch_size": args.batch_size, "rows": result_rows},
    )


if __name__ == "__main__":
    main()
