"""`pgmr experiment NAME`: the reference paper's experiments, and `results-doc` to gather them."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.markdown import Markdown
from rich.table import Table

from pgmr.cli.common import Settings, console, out, print_error, word_limit
from pgmr.experiments import (
    DEFAULT_OUT_ROOT,
    DEFAULT_PUBLISHED_DIR,
    EXPERIMENTS,
    default_out_dir,
    experiment_module,
)

app = typer.Typer(
    help="Run the reference paper's experiments (report.md, metrics.json, predictions, plots) and gather "
    "them into docs/results.md.",
    no_args_is_help=True,
)

OUT_OPTION = typer.Option(None, "--out", "-o", help="Output directory (default: artifacts/experiments/NAME)")
LIMIT_OPTION = typer.Option(None, min=1, help="Only the first N test questions (quick runs)")
MODELS_OPTION = typer.Option(
    None,
    "--models",
    help="Model directories, e.g. pgmr=DIR,direct=DIR,rag=DIR,rag-pgmr=DIR (default, relative to the working "
    "directory: models/pgmr-default, runs/direct-minilm/model, runs/rag-minilm/model; rag-pgmr only when given)",
)
MEMORY_OPTION = typer.Option(None, "--memory", "-m", help="Memory directory (default: ~/.cache/pgmr/memory)")
BATCH_OPTION = typer.Option(16, min=1, help="Generation batch size")
DEVICE_OPTION = typer.Option("cpu", help="torch device: cpu, cuda, cuda:1, mps")
BEAMS_OPTION = typer.Option(None, min=1, help="Beam width (default: the model card's)")
NEW_TOKENS_OPTION = typer.Option(None, min=1, help="Generation length limit (default: the model card's)")
COPY_BIAS_OPTION = typer.Option(
    None,
    min=0.0,
    max=100.0,
    help="pgmr models: score bonus for copying question spans into entity labels (default: the tuned one, "
    "docs/generators.md; 0 turns it off)",
)
RELATION_COPY_BIAS_OPTION = typer.Option(
    None,
    min=0.0,
    max=100.0,
    help="pgmr models: the same inside relation labels (default: the tuned one; 0 turns it off)",
)
ENTITY_THRESHOLD_OPTION = typer.Option(0.0, min=-1.0, max=1.0, help="Resolver: entity similarity threshold")
RELATION_THRESHOLD_OPTION = typer.Option(
    0.0, min=-1.0, max=1.0, help="Resolver: relation similarity threshold"
)
THRESHOLD_OPTION = typer.Option(
    None,
    "--threshold",
    min=0.0,
    max=1.0,
    help="pgmr systems: refuse when a placeholder's support (estimated probability that the memory holds what "
    "it names) is below this (default: the shipped setting, chosen on LC-QuAD 2.0 validation; 0 never refuses)",
)
REFUSAL_OPTION = typer.Option(
    True,
    "--refusal/--no-refusal",
    help="--no-refusal: pgmr systems always answer (the same as --threshold 0)",
)
PREDICTIONS_OPTION = typer.Option(
    None,
    "--predictions",
    help="Raw pgmr outputs to use instead of generating ({id, prediction} JSONL, e.g. a previous run's "
    "generated.jsonl or `pgmr generate` output)",
)
SEED_OPTION = typer.Option(0, help="Seed of the random draws")
KEEP_FROM_OPTION = typer.Option(
    None,
    "--keep-from",
    help="An earlier run of this experiment (its metrics.json or directory, e.g. docs/results/NAME): each "
    "system this run does not evaluate (no model, no chat server) keeps that run's results, marked with its "
    "date and command. It must have scored the same questions.",
)

# Options never written into the recorded command.
_SECRET = {"api_key"}


def _command(ctx: typer.Context) -> str:
    """The command line as typed, reconstructed from the parsed options (non-default ones only)."""
    settings: Settings = ctx.obj
    args = ["pgmr"]
    if settings.data_dir_option is not None:
        args += ["--data-dir", str(settings.data_dir_option)]
    args += ["experiment", ctx.info_name or ""]
    for param in ctx.command.params:
        # typer's options are not click.Option instances (typer vendors click): ask the parameter itself.
        if param.param_type_name != "option" or param.name in _SECRET:
            continue
        value = ctx.params.get(param.name or "")
        if value is None or value == param.default:
            continue
        opts = list(getattr(param, "opts", ()))
        long = max(opts, key=len)
        if getattr(param, "is_flag", False):
            args.append(long if value else max(getattr(param, "secondary_opts", ()), key=len, default=long))
        else:
            args += [long, str(value)]
    return shlex.join(args)


def _workspace(
    ctx: typer.Context,
    name: str,
    *,
    out_dir: Path | None,
    limit: int | None,
    models: str | None,
    memory_dir: Path | None,
    batch_size: int = 16,
    device: str = "cpu",
    num_beams: int | None = None,
    max_new_tokens: int | None = None,
    copy_bias: float | None = None,
    relation_copy_bias: float | None = None,
    entity_threshold: float = 0.0,
    relation_threshold: float = 0.0,
    threshold: float | None = None,
    refusal: bool = True,
    keep_from: Path | None = None,
) -> Any:
    from pgmr.experiments.common import ExperimentError, ExperimentSettings, Workspace, parse_models
    from pgmr.resolver.support import shipped_threshold

    settings: Settings = ctx.obj
    try:
        data_dir = settings.data_dir
        parsed = parse_models(models)
    except (FileNotFoundError, ExperimentError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    return Workspace(
        ExperimentSettings(
            data_dir=data_dir,
            out_dir=out_dir or default_out_dir(name),
            limit=limit,
            models=parsed,
            memory_dir=memory_dir,
            batch_size=batch_size,
            device=device,
            num_beams=num_beams,
            max_new_tokens=max_new_tokens,
            copy_bias=copy_bias,
            relation_copy_bias=relation_copy_bias,
            entity_threshold=entity_threshold,
            relation_threshold=relation_threshold,
            min_confidence=(shipped_threshold() if threshold is None else threshold) if refusal else 0.0,
            keep_from=keep_from,
            command=_command(ctx),
        )
    )


def _execute(name: str, ws: Any, call: Callable[[], dict[str, Any]]) -> None:
    from pgmr.experiments.common import ExperimentError

    try:
        doc = call()
    except ExperimentError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    module = experiment_module(name)
    out.print(Markdown(f"## {module.TITLE}\n\n{module.tables(doc)}"))
    console.print(
        f"wrote report.md, metrics.json and per-system outputs to {ws.out_dir} in {doc['wall_seconds']} s"
    )
    systems = doc.get("systems")
    if systems is not None and not any(s.get("status") == "ok" for s in systems.values()):
        print_error("no system could be evaluated (see the missing models above)")
        raise typer.Exit(1)


@app.command("list")
def list_experiments(
    root: Path = typer.Option(DEFAULT_OUT_ROOT, "--experiments-dir", help="Where the experiments write"),
) -> None:
    """The experiments, and which have results under --experiments-dir."""
    table = Table(title="pgmr experiments")
    table.add_column("name")
    table.add_column("what")
    table.add_column("results")
    for name, info in EXPERIMENTS.items():
        metrics = root / name / "metrics.json"
        table.add_row(name, info.summary, str(metrics) if metrics.is_file() else "not run")
    out.print(table)


@app.command("lcquad2-original")
def lcquad2_original(
    ctx: typer.Context,
    out_dir: Path | None = OUT_OPTION,
    limit: int | None = LIMIT_OPTION,
    models: str | None = MODELS_OPTION,
    memory_dir: Path | None = MEMORY_OPTION,
    batch_size: int = BATCH_OPTION,
    device: str = DEVICE_OPTION,
    num_beams: int | None = BEAMS_OPTION,
    max_new_tokens: int | None = NEW_TOKENS_OPTION,
    copy_bias: float | None = COPY_BIAS_OPTION,
    relation_copy_bias: float | None = RELATION_COPY_BIAS_OPTION,
    entity_threshold: float = ENTITY_THRESHOLD_OPTION,
    relation_threshold: float = RELATION_THRESHOLD_OPTION,
    threshold: float | None = THRESHOLD_OPTION,
    refusal: bool = REFUSAL_OPTION,
    keep_from: Path | None = KEEP_FROM_OPTION,
) -> None:
    """Direct vs RAG vs PGMR (and rag-pgmr when given) on LC-QuAD 2.0 test, beside the paper's Table 1."""
    from pgmr.experiments import lcquad2_original as experiment

    ws = _workspace(
        ctx,
        experiment.NAME,
        out_dir=out_dir,
        limit=limit,
        models=models,
        memory_dir=memory_dir,
        batch_size=batch_size,
        device=device,
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
    _execute(experiment.NAME, ws, lambda: experiment.run(ws))


@app.command("lcquad2-unknown-uri")
def lcquad2_unknown_uri(
    ctx: typer.Context,
    out_dir: Path | None = OUT_OPTION,
    limit: int | None = LIMIT_OPTION,
    memory_dir: Path | None = MEMORY_OPTION,
    batch_size: int = BATCH_OPTION,
    device: str = DEVICE_OPTION,
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
) -> None:
    """Re-split LC-QuAD 2.0 so that no test entity occurs in training, train the models on it (same preset
    and budget each; resumable run dirs under --out), evaluate them on its test part."""
    from pgmr.experiments import lcquad2_unknown_uri as experiment

    try:
        options = experiment.UnknownUriOptions(
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
        )
    except ValueError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    ws = _workspace(
        ctx,
        experiment.NAME,
        out_dir=out_dir,
        limit=limit,
        models=None,
        memory_dir=memory_dir,
        batch_size=batch_size,
        device=device,
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
    _execute(experiment.NAME, ws, lambda: experiment.run(ws, options))


@app.command("qald10")
def qald10(
    ctx: typer.Context,
    out_dir: Path | None = OUT_OPTION,
    limit: int | None = LIMIT_OPTION,
    models: str | None = MODELS_OPTION,
    memory_dir: Path | None = MEMORY_OPTION,
    batch_size: int = BATCH_OPTION,
    device: str = DEVICE_OPTION,
    num_beams: int | None = BEAMS_OPTION,
    max_new_tokens: int | None = NEW_TOKENS_OPTION,
    copy_bias: float | None = COPY_BIAS_OPTION,
    relation_copy_bias: float | None = RELATION_COPY_BIAS_OPTION,
    entity_threshold: float = ENTITY_THRESHOLD_OPTION,
    relation_threshold: float = RELATION_THRESHOLD_OPTION,
    threshold: float | None = THRESHOLD_OPTION,
    refusal: bool = REFUSAL_OPTION,
    keep_from: Path | None = KEEP_FROM_OPTION,
    store: str | None = typer.Option(
        None,
        help="Where answers are executed: endpoint URL, store dir or .nt/.ttl (default: the data dir's kg)",
    ),
    timeout: float = typer.Option(30.0, min=0.1, help="Seconds per query on the store"),
    server: str | None = typer.Option(None, help="OpenAI-compatible chat server URL for the chat-LLM row"),
    server_model: str | None = typer.Option(None, help="Model name on --server"),
    shots: str = typer.Option("lcquad2-train", help="Chat: dataset (name or file) of few-shot examples"),
    shots_limit: int | None = typer.Option(None, min=1, help="Chat: only the first N shot records"),
    k_shots: int = typer.Option(5, min=0, help="Chat: examples per prompt"),
    constrain: str = typer.Option("auto", help="Chat: grammar-constrained decoding: auto | gbnf | none"),
    api_key: str | None = typer.Option(None, envvar="PGMR_LLM_API_KEY", help="Chat: API key"),
    server_timeout: float = typer.Option(60.0, min=0.1, help="Chat: seconds per request"),
) -> None:
    """The LC-QuAD-trained models on QALD-10 test, with answer P/R/F1 from a store; plus a chat LLM."""
    from pgmr.experiments import qald10 as experiment

    chat = experiment.ChatOptions(
        server=server,
        model=server_model,
        shots=shots,
        shots_limit=shots_limit,
        k_shots=k_shots,
        constrain=constrain,
        api_key=api_key,
        timeout=server_timeout,
    )
    ws = _workspace(
        ctx,
        experiment.NAME,
        out_dir=out_dir,
        limit=limit,
        models=models,
        memory_dir=memory_dir,
        batch_size=batch_size,
        device=device,
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
    _execute(experiment.NAME, ws, lambda: experiment.run(ws, store=store, timeout=timeout, chat=chat))


@app.command("distractors")
def distractors(
    ctx: typer.Context,
    out_dir: Path | None = OUT_OPTION,
    limit: int | None = LIMIT_OPTION,
    models: str | None = MODELS_OPTION,
    memory_dir: Path | None = MEMORY_OPTION,
    batch_size: int = BATCH_OPTION,
    device: str = DEVICE_OPTION,
    num_beams: int | None = BEAMS_OPTION,
    max_new_tokens: int | None = NEW_TOKENS_OPTION,
    copy_bias: float | None = COPY_BIAS_OPTION,
    relation_copy_bias: float | None = RELATION_COPY_BIAS_OPTION,
    entity_threshold: float = ENTITY_THRESHOLD_OPTION,
    relation_threshold: float = RELATION_THRESHOLD_OPTION,
    threshold: float | None = THRESHOLD_OPTION,
    refusal: bool = REFUSAL_OPTION,
    sizes: str = typer.Option(
        "1,3,5,9,full", help="Distractors per gold entity, comma-separated; 'full': all"
    ),
    seed: int = SEED_OPTION,
    predictions: Path | None = PREDICTIONS_OPTION,
) -> None:
    """The pgmr model's outputs (generated once) resolved against memories grown around the gold entities."""
    from pgmr.experiments import distractors as experiment
    from pgmr.experiments.common import ExperimentError

    try:
        parsed_sizes = experiment.parse_sizes(sizes)
    except ExperimentError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    ws = _workspace(
        ctx,
        experiment.NAME,
        out_dir=out_dir,
        limit=limit,
        models=models,
        memory_dir=memory_dir,
        batch_size=batch_size,
        device=device,
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        copy_bias=copy_bias,
        relation_copy_bias=relation_copy_bias,
        entity_threshold=entity_threshold,
        relation_threshold=relation_threshold,
        threshold=threshold,
        refusal=refusal,
    )
    _execute(
        experiment.NAME,
        ws,
        lambda: experiment.run(ws, sizes=parsed_sizes, seed=seed, predictions=predictions),
    )


@app.command("refusal")
def refusal(
    ctx: typer.Context,
    out_dir: Path | None = OUT_OPTION,
    limit: int | None = LIMIT_OPTION,
    models: str | None = MODELS_OPTION,
    memory_dir: Path | None = MEMORY_OPTION,
    batch_size: int = BATCH_OPTION,
    device: str = DEVICE_OPTION,
    num_beams: int | None = BEAMS_OPTION,
    max_new_tokens: int | None = NEW_TOKENS_OPTION,
    copy_bias: float | None = COPY_BIAS_OPTION,
    relation_copy_bias: float | None = RELATION_COPY_BIAS_OPTION,
    relation_threshold: float = RELATION_THRESHOLD_OPTION,
    threshold: float | None = typer.Option(
        None,
        "--threshold",
        min=0.0,
        max=1.0,
        help="The operating point, resolved for real besides the sweep (default: the shipped setting)",
    ),
    seed: int = SEED_OPTION,
    predictions: Path | None = PREDICTIONS_OPTION,
) -> None:
    """Refusal-threshold sweep and risk-coverage over answerable and unanswerable questions (gold entities, or
    gold relations, removed from the memory)."""
    from pgmr.experiments import refusal as experiment

    ws = _workspace(
        ctx,
        experiment.NAME,
        out_dir=out_dir,
        limit=limit,
        models=models,
        memory_dir=memory_dir,
        batch_size=batch_size,
        device=device,
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        copy_bias=copy_bias,
        relation_copy_bias=relation_copy_bias,
        relation_threshold=relation_threshold,
        threshold=threshold,
    )
    _execute(experiment.NAME, ws, lambda: experiment.run(ws, seed=seed, predictions=predictions))


@app.command("results-doc")
def results_doc(
    experiments_dir: Path = typer.Option(
        DEFAULT_OUT_ROOT, "--experiments-dir", help="Where the experiments wrote (their scratch directories)"
    ),
    published_dir: Path = typer.Option(
        DEFAULT_PUBLISHED_DIR,
        "--published",
        help="Versioned copies of each experiment's metrics.json, report.md and plots; the document is made "
        "from these",
    ),
    publish: bool = typer.Option(
        True, "--publish/--no-publish", help="Copy the runs under --experiments-dir into --published first"
    ),
    out_path: Path = typer.Option(Path("docs") / "results.md", "--out", "-o", help="The markdown to write"),
) -> None:
    """Publish every experiment's metrics.json, report.md and plots into docs/results/NAME/ and gather them
    into docs/results.md (tables beside the paper's, wall times, deviations; experiments not re-run keep their
    published results; "not run" where none was ever published)."""
    from pgmr.experiments.results_doc import ResultsDocError, write_results_doc
    from pgmr.experiments.results_doc import publish as publish_runs

    try:
        published = publish_runs(experiments_dir, published_dir) if publish else []
        docs = write_results_doc(published_dir, out_path)
    except ResultsDocError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    ran = [name for name, doc in docs.items() if doc is not None]
    if published:
        console.print(f"published {', '.join(published)} from {experiments_dir} into {published_dir}")
    console.print(
        f"wrote {out_path}: {len(ran)} of {len(docs)} experiments with results"
        + (f" (not run: {', '.join(n for n in docs if n not in ran)})" if len(ran) < len(docs) else "")
    )
