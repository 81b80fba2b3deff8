"""Decoder-only generators: a tiny random Llama trained by the same training loop (full and LoRA), resumed,
loaded through the card's backend, and its teacher-forced validation metric checked by hand."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pgmr.generators import Generator, build_examples
from test_generators import RECORDS

TINY = {
    "preset": "llama-tiny",
    "vocab_size": 400,
    "max_source_len": 32,
    "max_target_len": 64,
    "batch_size": 8,
    "eval_steps": 2,
    "warmup_steps": 0,
    "logging_steps": 100,
    "progress": False,
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from pgmr.generators.seq2seq import TrainConfig
    from pgmr.generators.trained import train_generator

    examples = build_examples(RECORDS, "pgmr", max_description_words=2)
    out = tmp_path_factory.mktemp("causal") / "run"
    config = TrainConfig(max_steps=2, command="pgmr train --preset llama-tiny", **TINY)  # type: ignore[arg-type]
    result = train_generator(examples[:12], examples[12:], out, config)
    return examples, out, config, result


def test_decoder_only_training_writes_a_causal_model_dir(trained) -> None:  # type: ignore[no-untyped-def]
    _, out, _, result = trained
    card = json.loads((result.model_dir / "model_card.json").read_text())
    assert card["backend"] == "causal" and card["model"]["architecture"] == "LlamaForCausalLM"
    assert card["generation"]["prompt_format"] == "pgmr-causal/1"
    assert card["training"]["global_step"] == 2 and "lora" not in card["model"]
    assert {"exact_match", "token_accuracy"} <= set(card["validation"])
    assert (result.model_dir / "model.safetensors").is_file()
    assert not list(out.glob(".model.*"))


def test_trained_loader_picks_the_causal_backend_and_batching_keeps_outputs(trained) -> None:  # type: ignore[no-untyped-def]
    from pgmr.generators.causal.generator import CausalGenerator
    from pgmr.generators.trained import load_trained

    _, out, _, _ = trained
    generator = load_trained(out, max_new_tokens=12)
    assert isinstance(generator, CausalGenerator) and isinstance(generator, Generator)
    questions = ["How many people live in Paris?", "Is France a human?", "What is the capital of Germany?"]
    outputs = generator.generate(questions, batch_size=2)
    assert len(outputs) == 3 and all(isinstance(o, str) for o in outputs)
    # Left padding: a question generates the same text alone as in a batch with longer prompts.
    assert generator.generate(questions[1:2]) == [outputs[1]]
    # The continuation only: the prompt's header never comes back.
    assert not any("### Question" in o for o in outputs)


def test_decoder_only_run_resumes(trained) -> None:  # type: ignore[no-untyped-def]
    from pgmr.generators.trained import train_generator

    examples, out, config, _ = trained
    result = train_generator(examples[:12], examples[12:], out, replace(config, max_steps=4))
    assert result.resumed_from is not None and Path(result.resumed_from).name == "checkpoint-2"
    assert result.global_step == 4


def test_lora_trains_only_adapters_and_saves_a_merged_model(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from pgmr.generators.seq2seq import TrainConfig
    from pgmr.generators.trained import load_trained, train_generator

    examples = build_examples(RECORDS, "pgmr", max_description_words=2)
    config = TrainConfig(max_steps=3, lora_r=4, lora_alpha=8, learning_rate=5e-2, **TINY)  # type: ignore[arg-type]
    result = train_generator(examples[:12], examples[12:], tmp_path / "run", config)
    card = json.loads((result.model_dir / "model_card.json").read_text())
    assert card["model"]["lora"]["r"] == 4 and card["model"]["architecture"] == "LlamaForCausalLM"
    assert 0 < card["model"]["lora"]["trainable_parameters"] < card["model"]["parameters"]
    # Merged: plain weights, no adapter files, loadable without peft.
    assert not (result.model_dir / "adapter_config.json").exists()
    model = AutoModelForCausalLM.from_pretrained(result.model_dir)
    assert not any("lora" in name for name, _ in model.named_parameters())
    assert len(load_trained(result.model_dir, max_new_tokens=6).generate(["Is Paris a human?"])) == 1
    resumed = train_generator(examples[:12], examples[12:], tmp_path / "run", replace(config, max_steps=4))
    assert resumed.resumed_from is not None and resumed.global_step == 4


def test_teacher_forced_exact_match_counts_whole_targets() -> None:
    """Position t predicts token t + 1; -100 marks prompt and padding. Hand-checked rows:
    row 0 right at both target positions, row 1 wrong at one of two, row 2 right at its single one."""
    from transformers import EvalPrediction

    from pgmr.generators.causal.train import _causal_metrics_fn

    labels = np.array([[-100, -100, 7, 8], [-100, 5, 6, -100], [-100, -100, -100, 9]])
    preds = np.array([[0, 7, 8, 1], [5, 0, 3, 0], [1, 2, 9, 4]])
    metrics = _causal_metrics_fn()(EvalPrediction(predictions=preds, label_ids=labels))
    assert metrics["exact_match"] == pytest.approx(2 / 3)
    assert metrics["token_accuracy"] == pytest.approx((1 + 0.5 + 1) / 3)


def test_mismatched_settings_are_clear_errors(tmp_path: Path) -> None:
    from pgmr.generators.causal.generator import CausalGenerator
    from pgmr.generators.causal.train import train_causal
    from pgmr.generators.seq2seq import TrainConfig, train_seq2seq
    from pgmr.generators.seq2seq.card import ModelCardError
    from pgmr.generators.trained import train_generator

    examples = build_examples(RECORDS, "pgmr", max_description_words=2)
    with pytest.raises(ValueError, match="encoder"):
        train_generator(
            examples[:12], examples[12:], tmp_path / "a", TrainConfig(encoder_learning_rate=1e-4, **TINY)
        )  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="LoRA"):
        train_generator(
            examples[:12],
            examples[12:],
            tmp_path / "b",
            TrainConfig(**{**TINY, "preset": "tiny", "lora_r": 4}),
        )  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="LoRA"):
        TrainConfig(lora_r=-1)
    # Each trainer knows its own presets; nothing is written for a preset it cannot build.
    with pytest.raises(ValueError, match="unknown preset 'llama-tiny'; expected one of tiny, "):
        train_seq2seq(examples[:12], examples[12:], tmp_path / "c", TrainConfig(**TINY))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown preset 'tiny'; expected one of llama-tiny, llama-small$"):
        train_causal(examples[:12], examples[12:], tmp_path / "d", TrainConfig(**{**TINY, "preset": "tiny"}))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown preset 'nope'; expected one of tiny, .*, llama-small$"):
        train_generator(
            examples[:12], examples[12:], tmp_path / "e", TrainConfig(**{**TINY, "preset": "nope"})
        )  # type: ignore[arg-type]
    assert not any((tmp_path / name).exists() for name in "cde")
    seq2seq_dir = tmp_path / "s"
    seq2seq_dir.mkdir()
    (seq2seq_dir / "model_card.json").write_text(json.dumps({"mode": "pgmr", "backend": "seq2seq"}))
    with pytest.raises(ModelCardError, match="not a decoder-only"):
        CausalGenerator.load(seq2seq_dir)
    from pgmr.generators.trained import load_trained

    (seq2seq_dir / "model_card.json").write_text(json.dumps({"mode": "pgmr", "backend": "onnx"}))
    with pytest.raises(ModelCardError, match="unknown generator backend 'onnx'"):
        load_trained(seq2seq_dir)
