"""`pgmr experiment ck25`: PGMR over CK25, a graph that is not Wikidata (pgmr.experiments.ck25)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markdown import Markdown

from pgmr.cli.common import PRECISION_OPTION, Settings, console, out, print_error
from pgmr.cli.experiment_options import RichReporter, recorded_command
from pgmr.experiments import DEFAULT_OUT_ROOT
from pgmr.resolver.support import shipped_threshold


def ck25(
    ctx: typer.Context,
    oracle: bool = typer.Option(
        False,
        "--oracle",
        help="A perfect generator: each gold query converted to SPARQL-PGMR with the graph's labels is the "
        "model output (the default when no --model is given)",
    ),
    model: Path | None = typer.Option(
        None, "--model", help="A trained generator to write the intermediate queries instead of the oracle"
    ),
    server: str | None = typer.Option(
        None,
        "--server",
        help="An OpenAI-compatible chat server (e.g. llama.cpp's) to write them instead, prompted with the "
        "graph's schema: no training pairs needed (`pgmr llm fetch` gets a local model)",
    ),
    server_model: str | None = typer.Option(
        None, "--server-model", help="--server: the model name (default: the first one the server lists)"
    ),
    server_timeout: float = typer.Option(
        600.0,
        "--server-timeout",
        min=0.1,
        help="--server: seconds per request, queueing at the server included",
    ),
    max_new_tokens: int = typer.Option(256, "--max-new-tokens", min=1, help="--server: tokens per answer"),
    questions: Path | None = typer.Option(
        None,
        "--questions",
        help="JSONL questions over the graph (id, question, sparql, answers, result_order_matters) "
        "(default: the data directory's ck25/questions-dev.jsonl)",
    ),
    graph: Path | None = typer.Option(
        None, "--graph", help="The graph, an RDF file (default: the data directory's ck25/prod-inst.ttl)"
    ),
    memory_dir: Path | None = typer.Option(
        None,
        "--memory",
        "-m",
        help="A memory of the graph (default: OUT/memory, built from --graph on the first run)",
    ),
    out_dir: Path | None = typer.Option(
        None, "--out", "-o", help="Output directory (default: artifacts/experiments/ck25[-model])"
    ),
    limit: int | None = typer.Option(None, min=1, help="The first N questions only"),
    threshold: float = typer.Option(
        shipped_threshold(),
        "--threshold",
        min=0.0,
        max=1.0,
        help="Refusal threshold on each placeholder's support (default: the shipped one)",
    ),
    refusal: bool = typer.Option(True, "--refusal/--no-refusal", help="--no-refusal: never refuse"),
    batch_size: int = typer.Option(
        16, min=1, help="--model: questions per generation batch; --server: requests sent at once"
    ),
    device: str = typer.Option("cpu", help="--model: torch device"),
    precision: str = PRECISION_OPTION,
    timeout: float = typer.Option(30.0, min=0.1, help="Seconds per query on the store"),
    keep_from: list[Path] = typer.Option(
        [],
        "--keep-from",
        help="An earlier ck25 run (its metrics.json or directory, e.g. docs/results/ck25 or "
        "artifacts/experiments/ck25-chat-qwen2.5-coder-1.5b) whose systems become rows beside this run's, marked "
        "with their date and command; repeat for several. It must have answered the same questions over the "
        "same graph. `pgmr experiment results-doc` publishes OUT=artifacts/experiments/ck25 with every row",
    ),
) -> None:
    """The oracle (or a model, or a chat LLM) over CK25: gold IRIs resolved right, IRIs invented, Query EM and answer
    P/R/F1 of the final queries run on an embedded store; metrics.json, predictions.jsonl and report.md."""
    from pgmr.experiments import ck25 as experiment
    from pgmr.experiments.ck25_report import details, tables
    from pgmr.experiments.settings import ExperimentError

    if sum([oracle, model is not None, server is not None]) > 1:
        print_error("give one of --oracle, --model and --server")
        raise typer.Exit(2)
    settings: Settings = ctx.obj
    name = experiment.NAME + ("-model" if model is not None else "-chat" if server is not None else "")
    try:
        data_dir = settings.data_dir if questions is None or graph is None else Path(".")
        run_settings = experiment.Ck25Settings(
            questions=questions or data_dir / experiment.DEFAULT_QUESTIONS,
            graph=graph or data_dir / experiment.DEFAULT_GRAPH,
            out_dir=out_dir or DEFAULT_OUT_ROOT / name,
            memory_dir=memory_dir,
            model_dir=model,
            limit=limit,
            min_confidence=threshold if refusal else 0.0,
            batch_size=batch_size,
            device=device,
            precision=precision,
            timeout=timeout,
            command=recorded_command(ctx),
            server=server,
            server_model=server_model,
            server_timeout=server_timeout,
            max_new_tokens=max_new_tokens,
            keep_from=tuple(keep_from),
        )
        for path in (run_settings.questions, run_settings.graph):
            if not path.is_file():
                raise ExperimentError(f"{path}: no such file")
        doc = experiment.run(run_settings, RichReporter())
    except (ExperimentError, FileNotFoundError, ValueError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    out.print(
        Markdown(
            f"## {experiment.TITLE}\n\n{details(doc)}\n\n### Every row (--keep-from), beside TEXT2SPARQL'25's best\n\n{tables(doc)}"
        )
    )
    console.print(
        f"wrote metrics.json, predictions.jsonl and report.md to {run_settings.out_dir} in {doc['wall_seconds']} s"
    )


__all__ = ["ck25"]
