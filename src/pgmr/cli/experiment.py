"""`pgmr experiment NAME`: the reference paper's experiments, and `results-doc` to gather them."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer
from rich.table import Table

from pgmr.cli.common import PRECISION_OPTION, console, out, print_error
from pgmr.cli.experiment_ck25 import ck25
from pgmr.cli.experiment_options import (
    BATCH_OPTION,
    BEAMS_OPTION,
    COPY_BIAS_OPTION,
    DEVICE_OPTION,
    ENTITY_THRESHOLD_OPTION,
    KEEP_FROM_OPTION,
    LIMIT_OPTION,
    MEMORY_OPTION,
    MODELS_OPTION,
    NEW_TOKENS_OPTION,
    OUT_OPTION,
    PREDICTIONS_OPTION,
    REFUSAL_OPTION,
    RELATION_COPY_BIAS_OPTION,
    RELATION_THRESHOLD_OPTION,
    SEED_OPTION,
    THRESHOLD_OPTION,
    execute,
    workspace,
)
from pgmr.cli.experiment_unknown_uri import lcquad2_unknown_uri
from pgmr.cli.fit_refusal import fit_refusal
from pgmr.experiments import DEFAULT_OUT_ROOT, DEFAULT_PUBLISHED_DIR, EXPERIMENTS

app = typer.Typer(
    help="Run the reference paper's experiments (report.md, metrics.json, plots, and per system its scored "
    "predictions with the t2s-metrics.jsonl and qald.json exports of `pgmr eval`) and gather them into "
    "docs/results.md.",
    no_args_is_help=True,
)


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
) -> None:
    """Direct vs RAG vs PGMR (and rag-pgmr when given) on LC-QuAD 2.0 test, beside the paper's Table 1."""
    from pgmr.experiments import lcquad2_original as experiment

    ws = workspace(
        ctx,
        experiment.NAME,
        out_dir=out_dir,
        limit=limit,
        models=models,
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
    execute(experiment.NAME, ws, lambda: experiment.run(ws))


app.command("lcquad2-unknown-uri")(lcquad2_unknown_uri)
app.command("ck25")(ck25)
app.command("fit-refusal")(fit_refusal)


@app.command("qald10")
def qald10(
    ctx: typer.Context,
    out_dir: Path | None = OUT_OPTION,
    limit: int | None = LIMIT_OPTION,
    models: str | None = MODELS_OPTION,
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
    finetuned: Path | None = typer.Option(
        None,
        "--finetuned",
        help="A pgmr model fine-tuned on qald10-train, for its own row (pgmr-qald10-train); without it that row "
        "is kept from --keep-from's run",
    ),
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
    ws = workspace(
        ctx,
        experiment.NAME,
        out_dir=out_dir,
        limit=limit,
        models=models,
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
    execute(
        experiment.NAME,
        ws,
        lambda: experiment.run(ws, store=store, timeout=timeout, chat=chat, finetuned=finetuned),
    )


class GrownPrior(StrEnum):
    own = "own"
    shipped = "shipped"


@app.command("distractors")
def distractors(
    ctx: typer.Context,
    out_dir: Path | None = OUT_OPTION,
    limit: int | None = LIMIT_OPTION,
    models: str | None = MODELS_OPTION,
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
    sizes: str = typer.Option(
        "1,3,5,9,full", help="Distractors per gold entity, comma-separated; 'full': all"
    ),
    seed: int = SEED_OPTION,
    predictions: Path | None = PREDICTIONS_OPTION,
    grown: list[Path] = typer.Option(
        [],
        "--grown",
        help="A memory built elsewhere (e.g. from a synthetic dump, docs/scale.md) to resolve the same outputs "
        "against after the sizes; repeat for several",
    ),
    grown_prior: GrownPrior = typer.Option(
        GrownPrior.own,
        "--grown-prior",
        help="The prior --grown memories rank with: their own (a dump's sitelinks) or the shipped memory's "
        "(separates what a synthetic dump's distractors cost from what its drawn sitelink counts do)",
    ),
) -> None:
    """The pgmr model's outputs (generated once) resolved against memories grown around the gold entities."""
    from pgmr.experiments import distractors as experiment
    from pgmr.experiments.common import ExperimentError

    try:
        parsed_sizes = experiment.parse_sizes(sizes, allow_none=bool(grown))
    except ExperimentError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    ws = workspace(
        ctx,
        experiment.NAME,
        out_dir=out_dir,
        limit=limit,
        models=models,
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
    )
    execute(
        experiment.NAME,
        ws,
        lambda: experiment.run(
            ws,
            sizes=parsed_sizes,
            seed=seed,
            predictions=predictions,
            grown=grown,
            grown_prior=grown_prior.value,
        ),
    )


class Split(StrEnum):
    test = "test"
    validation = "validation"


@app.command("refusal")
def refusal(
    ctx: typer.Context,
    out_dir: Path | None = OUT_OPTION,
    limit: int | None = LIMIT_OPTION,
    models: str | None = MODELS_OPTION,
    memory_dir: Path | None = MEMORY_OPTION,
    batch_size: int = BATCH_OPTION,
    device: str = DEVICE_OPTION,
    precision: str = PRECISION_OPTION,
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
    split: Split = typer.Option(
        Split.test,
        "--split",
        help="LC-QuAD 2.0 split: test (what is reported) or validation (where `pgmr experiment fit-refusal` "
        "chooses the shipped threshold from this run's metrics.json)",
    ),
) -> None:
    """Refusal-threshold sweep and risk-coverage over answerable and unanswerable questions (gold entities, or
    gold relations, removed from the memory)."""
    from pgmr.experiments import refusal as experiment

    if out_dir is None and split is Split.validation:
        # Kept apart from the test runs that results-doc publishes.
        out_dir = Path("artifacts") / "refusal-calibration" / "validation"
    ws = workspace(
        ctx,
        experiment.NAME,
        out_dir=out_dir,
        limit=limit,
        models=models,
        memory_dir=memory_dir,
        batch_size=batch_size,
        device=device,
        precision=precision,
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        copy_bias=copy_bias,
        relation_copy_bias=relation_copy_bias,
        relation_threshold=relation_threshold,
        threshold=threshold,
    )
    execute(
        experiment.NAME,
        ws,
        lambda: experiment.run(ws, seed=seed, predictions=predictions, dataset=f"lcquad2-{split.value}"),
    )


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
