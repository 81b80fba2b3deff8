"""`pgmr experiment lcquad2-unknown-uri`: its split and training options are its own (registered on
`pgmr experiment` by pgmr.cli.experiment)."""

from __future__ import annotations

from pathlib import Path

import typer

from pgmr.cli.common import PRECISION_OPTION, print_error, word_limit
from pgmr.cli.experiment_options import (
    BATCH_OPTION,
    BEAMS_OPTION,
    COPY_BIAS_OPTION,
    DEVICE_OPTION,
    ENTITY_THRESHOLD_OPTION,
    KEEP_FROM_OPTION,
    LIMIT_OPTION,
    MEMORY_OPTION,
    NEW_TOKENS_OPTION,
    OUT_OPTION,
    REFUSAL_OPTION,
    RELATION_COPY_BIAS_OPTION,
    RELATION_THRESHOLD_OPTION,
    SEED_OPTION,
    THRESHOLD_OPTION,
    execute,
    workspace,
)


def lcquad2_unknown_uri(
    ctx: typer.Context,
    out_dir: Path | None = OUT_OPTION,
    limit: int | None = LIMIT_OPTION,
    memory_dir: Path | None = MEMORY_OPTION,
    batch_size: int = BATCH_OPTION,
    device: str = DEVICE_OPTION,
    precision: str = PRECISION_OPTION,
    num_beams: int | None = BEAMS_OPTION,
    max_new_tokens: int | None = NEW_TOKENS_OPTION,
    copy_bias: float | None = COPY_BIAS_OPTION,
    relation_copy_bias: float | None = RELATION_COPY_BIAS_OPTION,
    entity_threshold: float = ENTITY_THRESHOLD_OPTION,
    relation_threshold: float = RELATION_THRESHOLD_OPTION,
    threshold: float | None = THRESHOLD_OPTION,
    refusal: bool = REFUSAL_OPTION,
    keep_from: Path | None = KEEP_FROM_OPTION,
    modes: str = typer.Option("pgmr,direct", help="Modes to train and evaluate: pgmr, direct, rag, rag-pgmr"),
    train: bool = typer.Option(True, "--train/--no-train", help="Train (or resume) before evaluating"),
    test_share: float = typer.Option(0.1, min=0.001, max=0.999, help="Test share of the pooled records"),
    test_size: int | None = typer.Option(None, min=1, help="Test records (overrides --test-share)"),
    seed: int = SEED_OPTION,
    train_limit: int | None = typer.Option(None, min=2, help="Only the first N training records"),
    preset: str = typer.Option("minilm", help="Model preset (as `pgmr train --preset`)"),
    max_minutes: float | None = typer.Option(60.0, min=0.001, help="Wall budget per model and call"),
    max_steps: int | None = typer.Option(None, min=1, help="Total optimizer steps (overrides --epochs)"),
    epochs: float = typer.Option(5.0, min=0.01),
    train_batch_size: int = typer.Option(32, min=1),
    learning_rate: float = typer.Option(1e-3, "--lr", min=0.0),
    encoder_learning_rate: float = typer.Option(1e-4, "--encoder-lr", min=0.0, help="MiniLM presets only"),
    warmup_steps: int = typer.Option(300, min=0),
    eval_steps: int = typer.Option(400, min=1),
    max_eval_examples: int = typer.Option(300, min=1),
    vocab_size: int = typer.Option(8000, min=300),
    max_source_len: int = typer.Option(64, min=8),
    max_target_len: int = typer.Option(160, min=8),
    max_description_words: int = typer.Option(0, help="Description words in pgmr targets (-1: whole)"),
    rag_max_source_len: int = typer.Option(256, min=8, help="Input tokens of rag and rag-pgmr models"),
    candidate_description_words: int = typer.Option(
        8, min=-1, help="rag modes: description words of each candidate in the input (-1: whole)"
    ),
    bf16: bool = typer.Option(False, help="bfloat16 mixed precision (as `pgmr train --bf16`)"),
    anneal_to_budget: bool = typer.Option(
        False, help="Learning rate reaches 0 at --max-steps or --max-minutes, whichever is first"
    ),
    structured: Path | None = typer.Option(
        None,
        help="A structured model trained on this split (scripts/train_unknown_uri_structured.py): adds the row "
        "pgmr-ensemble, the default's recipe (the pgmr run + this model, reranker fitted on the split's "
        "validation part)",
    ),
    member: list[str] = typer.Option(
        [],
        "--member",
        help="NAME=DIR: a further member of the pgmr-ensemble row, trained on this split "
        "(scripts/train_unknown_uri_seq2seq.py); repeatable; needs --structured",
    ),
    verifier: Path | None = typer.Option(
        None,
        help="The pgmr-ensemble row's draft verifier, trained on this split's training drafts "
        "(scripts/unknown_uri_verifier_drafts.py, then pgmr train-verifier): its run or model directory, "
        "copied into the ensemble; needs --structured",
    ),
) -> None:
    """Re-split LC-QuAD 2.0 so that no test entity occurs in training, train the models on it (same preset
    and budget each; resumable run dirs under --out), evaluate them on its test part."""
    from pgmr.experiments import lcquad2_unknown_uri as experiment
    from pgmr.experiments.unknown_uri_split import UnknownUriOptions

    try:
        extra_members = tuple(_member(m) for m in member)
        options = UnknownUriOptions(
            modes=tuple(m.strip() for m in modes.split(",") if m.strip()),
            test_share=test_share,
            test_size=test_size,
            seed=seed,
            train=train,
            train_limit=train_limit,
            max_description_words=word_limit(max_description_words),
            preset=preset,
            vocab_size=vocab_size,
            max_source_len=max_source_len,
            max_target_len=max_target_len,
            batch_size=train_batch_size,
            learning_rate=learning_rate,
            encoder_learning_rate=encoder_learning_rate,
            warmup_steps=warmup_steps,
            epochs=epochs,
            max_steps=max_steps,
            max_minutes=max_minutes,
            eval_steps=eval_steps,
            max_eval_examples=max_eval_examples,
            rag_max_source_len=rag_max_source_len,
            candidate_description_words=word_limit(candidate_description_words),
            bf16=bf16,
            anneal_to_budget=anneal_to_budget,
            structured=structured,
            extra_members=extra_members,
            verifier=verifier,
        )
    except ValueError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    ws = workspace(
        ctx,
        experiment.NAME,
        out_dir=out_dir,
        limit=limit,
        models=None,
        memory_dir=memory_dir,
        batch_size=batch_size,
        device=device,
        precision=precision,
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        copy_bias=copy_bias,
        relation_copy_bias=relation_copy_bias,
        entity_threshold=entity_threshold,
        relation_threshold=relation_threshold,
        threshold=threshold,
        refusal=refusal,
        keep_from=keep_from,
    )
    execute(experiment.NAME, ws, lambda: experiment.run(ws, options))


def _member(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise ValueError(f"--member {text!r}: write NAME=DIR")
    return name.strip(), Path(path.strip())
