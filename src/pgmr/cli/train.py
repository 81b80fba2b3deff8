"""`pgmr train`: train a generator (pgmr, direct, rag, rag-pgmr) on a converted dataset."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from pgmr.cli.common import Settings, console, out, print_error, progress_bar, track, word_limit
from pgmr.cli.memory import MEMORY_OPTION, open_memory
from pgmr.config import default_memory_dir
from pgmr.conversion import ConversionSummary, convert_records
from pgmr.datasets import DatasetError, load_any
from pgmr.datasets.loaders import NAMED_DATASETS
from pgmr.datasets.mixing import parse_weighted
from pgmr.datasets.splits import split_train_validation
from pgmr.generators.base import MODES, RAG_MODES
from pgmr.kg.catalog import LabelCatalog


def train(
    ctx: typer.Context,
    mode: str = typer.Option(..., "--mode", help=f"What the model writes: {' | '.join(MODES)}"),
    out_dir: Path = typer.Option(
        ..., "--out", "-o", help="Run directory (checkpoints; the final model goes to OUT/model)"
    ),
    preset: str = typer.Option(
        "small",
        help="Model preset: from-scratch T5 tiny | small | base, a MiniLM-encoder model "
        "minilm-tiny | minilm | minilm-3l, a from-scratch decoder-only llama-tiny | llama-small, or "
        "structured (pgmr mode: a query template plus slot values read off one MiniLM pass; the default's)",
    ),
    base: str | None = typer.Option(
        None,
        help="Start from a checkpoint directory (or hub name) instead of a preset: seq2seq (T5, BART, or a "
        "model `pgmr train` wrote, packed too, e.g. models/pgmr-default) or decoder-only (Llama, SmolLM2, "
        "Qwen; see --lora-r)",
    ),
    train_data: str = typer.Option(
        "lcquad2-train", "--train", help=f"Training dataset: a file or one of {', '.join(NAMED_DATASETS)}"
    ),
    extra_train: list[str] = typer.Option(
        [],
        "--extra-train",
        help="More training records, never validation: a file or dataset name, `*K` to repeat it K times "
        "(e.g. qald10-train-part*4, plain.jsonl); repeatable",
    ),
    graph_memory: Path | None = typer.Option(
        None,
        "--graph",
        help="A memory of your own graph (`pgmr memory build --from-rdf`): the training pairs are queries over "
        "it, converted with its labels (default: Wikidata, with the data directory's labels)",
    ),
    fmt: str = typer.Option(
        "auto", "--format", help="Format of a dataset file: auto | lcquad2 | qald | jsonl"
    ),
    validation_share: float = typer.Option(
        0.08, min=0.001, max=0.999, help="Share of records carved out (by id hash) for validation"
    ),
    limit: int | None = typer.Option(None, min=2, help="Use only the first N records of the dataset"),
    max_description_words: int = typer.Option(
        8, help="Words of each mapping description kept in pgmr targets (0 drops them, -1 keeps them whole)"
    ),
    memory_dir: Path | None = MEMORY_OPTION,
    k_entities: int = typer.Option(5, min=0, help="rag modes: entity candidates per question"),
    k_relations: int = typer.Option(5, min=0, help="rag modes: relation candidates per question"),
    candidate_description_words: int = typer.Option(
        8,
        min=-1,
        help="rag modes: words of each candidate's description in the input (0 drops them: inputs about "
        "half as long; -1 keeps them whole)",
    ),
    max_minutes: float | None = typer.Option(
        None, min=0.001, help="Wall budget: stop (evaluate, save) past it"
    ),
    max_steps: int | None = typer.Option(None, min=1, help="Total optimizer steps (overrides --epochs)"),
    epochs: float = typer.Option(20.0, min=0.01),
    batch_size: int = typer.Option(16, min=1),
    learning_rate: float = typer.Option(1e-3, "--lr", min=0.0),
    encoder_learning_rate: float | None = typer.Option(
        None, "--encoder-lr", min=0.0, help="Learning rate of the (pretrained) encoder; default: --lr"
    ),
    warmup_steps: int = typer.Option(100, min=0),
    eval_steps: int = typer.Option(500, min=1, help="Validate and checkpoint every N steps"),
    max_eval_examples: int = typer.Option(
        512, min=1, help="Validation examples generated at each evaluation"
    ),
    vocab_size: int = typer.Option(4000, min=300, help="BPE vocabulary (from-scratch presets)"),
    max_source_len: int = typer.Option(256, min=8),
    max_target_len: int = typer.Option(256, min=8),
    num_beams: int = typer.Option(1, min=1, help="Beams in validation generation"),
    seed: int = typer.Option(42),
    gradient_accumulation_steps: int = typer.Option(
        1, min=1, help="Batches per optimizer step (effective batch = batch size x this x devices)"
    ),
    bf16: bool = typer.Option(
        False, help="bfloat16 mixed precision (GPUs that support it; CPUs with AVX512-BF16 or AMX)"
    ),
    anneal_to_budget: bool = typer.Option(
        False,
        help="Decay the learning rate to 0 by --max-steps or by the end of --max-minutes, whichever is first",
    ),
    lora_r: int = typer.Option(
        0,
        min=0,
        help="Decoder-only models: LoRA rank (0 trains every weight); adapters are merged at the end",
    ),
    lora_alpha: int = typer.Option(16, min=1, help="LoRA scale (alpha)"),
    lora_dropout: float = typer.Option(0.05, min=0.0, max=0.99, help="LoRA dropout"),
    group_by_length: bool = typer.Option(
        True, help="Batch examples of similar source + target length (less padding, faster steps)"
    ),
    paraphrases: bool | None = typer.Option(
        None,
        help="Also train on each training record's paraphrased question (LC-QuAD 2.0) [default: on for "
        "--preset structured, off otherwise, as the shipped models were trained]",
    ),
    encoder_layers: int | None = typer.Option(
        None, min=1, help="structured: keep only the first N pretrained encoder layers (tests)"
    ),
    weight_decay: float = typer.Option(0.01, min=0.0, help="structured: AdamW weight decay"),
    init_from: Path | None = typer.Option(
        None, "--init-from", help="structured: start from this trained model's weights and vocabulary"
    ),
    progress: bool = typer.Option(True, help="Progress bars"),
) -> None:
    """Train a seq2seq generator; resumes from the last checkpoint in --out when there is one."""
    from pgmr.generators.examples import build_examples, with_paraphrases
    from pgmr.generators.rag import CONTEXT_CACHE_FILE, CandidateRetriever, ContextCache, memory_fingerprint

    settings: Settings = ctx.obj
    if mode not in MODES:
        console.print(f"[red]error:[/red] unknown --mode {mode!r}; choose from {', '.join(MODES)}")
        raise typer.Exit(2)
    try:
        loaded = load_any(train_data, settings.data_dir, fmt)
    except DatasetError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    records_in = loaded.records[:limit] if limit else loaded.records
    if graph_memory is not None:
        from pgmr.cli.convert import graph_catalog_for

        catalog = graph_catalog_for(graph_memory)
    else:
        catalog = LabelCatalog.from_data_dir(settings.data_dir)
    summary = ConversionSummary()
    converted = list(convert_records(track(records_in, "converting", len(records_in)), catalog, summary))
    train_records, val_records = split_train_validation(converted, validation_share)
    extra_info: dict[str, int] = {}
    for spec in extra_train:
        try:
            source, times = parse_weighted(spec)
            extra = load_any(source, settings.data_dir).records
        except DatasetError as exc:
            print_error(exc)
            raise typer.Exit(2) from None
        extra_converted = list(convert_records(extra, catalog, summary))
        train_records.extend(extra_converted * times)
        extra_info[spec] = len(extra_converted) * times
    if not train_records or not val_records:
        console.print(
            f"[red]error:[/red] {len(converted)} converted records leave {len(train_records)} for training and "
            f"{len(val_records)} for validation; use more data or another --validation-share"
        )
        raise typer.Exit(2)
    if preset == "structured":
        if mode != "pgmr" or base is not None:
            console.print("[red]error:[/red] --preset structured trains --mode pgmr, without --base")
            raise typer.Exit(2)
        from pgmr.cli.train_structured import train_structured_cli

        options = {
            "max_steps": max_steps or 8000,
            "batch_size": batch_size,
            "learning_rate": learning_rate,
            "encoder_learning_rate": encoder_learning_rate if encoder_learning_rate is not None else 1e-4,
            "warmup_steps": warmup_steps,
            "weight_decay": weight_decay,
            "eval_steps": eval_steps,
            "max_eval_examples": max_eval_examples,
            "max_minutes": max_minutes,
            "max_source_len": min(max_source_len, 128),
            "encoder_layers": encoder_layers,
            "bf16": bf16,
            "seed": seed,
            "paraphrases": True if paraphrases is None else paraphrases,
            "init_from": str(init_from) if init_from else None,
        }
        structured_info: dict[str, Any] = {
            "datasets": [train_data],
            "extra_train": extra_info,
            "graph": str(graph_memory) if graph_memory else None,
            "records_in": summary.records_in,
            "converted": summary.converted,
            "skipped": dict(summary.skipped),
            "validation_share": validation_share,
        }
        train_structured_cli(
            train_records, val_records, catalog, out_dir, options=options, data_info=structured_info
        )
        return
    words = word_limit(max_description_words)
    retriever: CandidateRetriever | ContextCache | None = None
    data_info: dict[str, Any] = {
        "datasets": [train_data],
        "extra_train": extra_info,
        "graph": str(graph_memory) if graph_memory else None,
        "records_in": summary.records_in,
        "converted": summary.converted,
        "skipped": dict(summary.skipped),
        "validation_share": validation_share,
        "max_description_words": words,
    }
    if paraphrases:
        before = len(train_records)
        train_records = with_paraphrases(train_records)
        data_info["paraphrases"] = len(train_records) - before
    if mode in RAG_MODES:
        memory_path = memory_dir or default_memory_dir()
        candidates = CandidateRetriever(
            open_memory(memory_path),
            k_entities=k_entities,
            k_relations=k_relations,
            max_description_words=word_limit(candidate_description_words),
        )
        data_info["retriever"] = {"memory": str(memory_path), **candidates.settings()}
        # Kept in the run directory: a resumed run (or a retry after a crash) does not retrieve again.
        cache = ContextCache(
            candidates, out_dir / CONTEXT_CACHE_FILE, memory_id=memory_fingerprint(memory_path)
        )
        questions = [r.question for r in (*train_records, *val_records)]
        with progress_bar() as bar:
            task = bar.add_task("retrieving candidates for the rag inputs", total=len(questions))
            cache.contexts(
                questions, progress=lambda done, total: bar.update(task, completed=done, total=total)
            )
        retriever = cache
    train_examples = build_examples(train_records, mode, retriever=retriever, max_description_words=words)
    val_examples = build_examples(val_records, mode, retriever=retriever, max_description_words=words)
    console.print(
        f"{len(train_examples)} training and {len(val_examples)} validation examples "
        f"({summary.converted} of {summary.records_in} records converted)"
    )
    from pgmr.generators.seq2seq.config import TrainConfig
    from pgmr.generators.trained import train_generator

    try:
        config = TrainConfig(
            preset=preset,
            base=base,
            vocab_size=vocab_size,
            max_source_len=max_source_len,
            max_target_len=max_target_len,
            batch_size=batch_size,
            learning_rate=learning_rate,
            encoder_learning_rate=encoder_learning_rate,
            warmup_steps=warmup_steps,
            epochs=epochs,
            max_steps=max_steps,
            max_minutes=max_minutes,
            eval_steps=eval_steps,
            max_eval_examples=max_eval_examples,
            seed=seed,
            num_beams=num_beams,
            group_by_length=group_by_length,
            gradient_accumulation_steps=gradient_accumulation_steps,
            bf16=bf16,
            anneal_to_budget=anneal_to_budget,
            lora_r=lora_r,
            lora_alpha=lora_alpha,
            lora_dropout=lora_dropout,
            progress=progress,
            command=shlex.join(["pgmr", *sys.argv[1:]]),
        )
        result = train_generator(train_examples, val_examples, out_dir, config, data_info=data_info)
    except ValueError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    table = Table(title=f"pgmr train ({mode}): validation of the kept model")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in ("exact_match", "parse_rate", "token_accuracy", "loss"):
        if key in result.metrics:
            table.add_row(key, f"{result.metrics[key]:.4f}")
    table.add_row("steps", str(result.global_step))
    table.add_row("parameters", f"{result.parameters:,}")
    table.add_row("wall seconds", f"{result.wall_seconds:.1f}")
    if result.stopped_by_budget:
        table.add_row("stopped", "wall budget reached")
    if result.resumed_from:
        table.add_row("resumed from", Path(result.resumed_from).name)
    out.print(table)
    cut = result.card.get("data", {}).get("truncated_targets", 0)
    if cut:
        console.print(
            f"[yellow]warning:[/yellow] {cut} of {len(train_examples)} training targets were longer than "
            f"--max-target-len {max_target_len} tokens and were cut"
        )
    console.print(f"model written to {result.model_dir}")


def pack(
    model_dir: Path = typer.Argument(..., help="A trained model dir (or the run dir holding model/)"),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Where the packed model dir is written"),
) -> None:
    """Store a trained seq2seq model with int8 weights (about a quarter of the size), e.g. to commit it."""
    from pgmr.generators.seq2seq.card import ModelCardError, read_model_card, resolve_model_dir
    from pgmr.generators.seq2seq.packing import pack_model_dir

    try:
        if read_model_card(model_dir).get("backend") == "structured":
            from pgmr.generators.structured.store import pack_structured

            info = pack_structured(resolve_model_dir(model_dir), out_dir)
        else:
            info = pack_model_dir(resolve_model_dir(model_dir), out_dir)
    except (ModelCardError, OSError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    console.print(
        f"packed {info['quantized_parameters']:,} parameters as int8 and {info['float_parameters']:,} as float32: "
        f"{info['bytes'] / 1e6:.1f} MB in {out_dir}"
    )
