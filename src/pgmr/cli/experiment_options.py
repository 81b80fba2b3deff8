"""What every `pgmr experiment` command shares: the options, the recorded command line, the workspace, the
rich progress reports the experiments call back into, and how a run's results are shown."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.markdown import Markdown
from rich.markup import escape

from pgmr.cli.common import Settings, console, out, print_error, progress_bar
from pgmr.experiments import default_out_dir, experiment_module
from pgmr.precision import DEFAULT_PRECISION


class RichReporter:
    """pgmr.experiments.reporting.Reporter on the terminal: transient progress bars and status spinners on
    stderr, notes in plain text and warnings in yellow."""

    @contextmanager
    def progress(self, description: str, total: int) -> Iterator[Callable[[int], None]]:
        with progress_bar() as bar:
            task = bar.add_task(description, total=total)
            yield lambda k: bar.advance(task, k)

    @contextmanager
    def status(self, message: str) -> Iterator[None]:
        with console.status(escape(message)):
            yield

    def note(self, message: str) -> None:
        console.print(escape(message))

    def warn(self, message: str) -> None:
        console.print(f"[yellow]{escape(message)}[/yellow]")


OUT_OPTION = typer.Option(None, "--out", "-o", help="Output directory (default: artifacts/experiments/NAME)")
LIMIT_OPTION = typer.Option(None, min=1, help="Only the first N test questions (quick runs)")
MODELS_OPTION = typer.Option(
    None,
    "--models",
    help="Model directories, e.g. pgmr=DIR,direct=DIR,rag=DIR,rag-pgmr=DIR (default, relative to the working "
    "directory: models/pgmr-ensemble, runs/direct-minilm/model, runs/rag-minilm/model; rag-pgmr only when given)",
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


def recorded_command(ctx: typer.Context) -> str:
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
        if isinstance(value, list | tuple):  # a repeatable option: once per value, as typed
            if value:
                name = str(max(getattr(param, "opts", ()), key=len))
                args += [a for v in value for a in (name, str(v))]
            continue
        opts = list(getattr(param, "opts", ()))
        long = max(opts, key=len)
        if getattr(param, "is_flag", False):
            secondary: list[str] = list(getattr(param, "secondary_opts", ()))
            args.append(long if value else max(secondary, key=len, default=long))
        else:
            args += [long, str(value)]
    return shlex.join(args)


def workspace(
    ctx: typer.Context,
    name: str,
    *,
    out_dir: Path | None,
    limit: int | None,
    models: str | None,
    memory_dir: Path | None,
    batch_size: int = 16,
    device: str = "cpu",
    precision: str = DEFAULT_PRECISION,
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
            precision=precision,
            num_beams=num_beams,
            max_new_tokens=max_new_tokens,
            copy_bias=copy_bias,
            relation_copy_bias=relation_copy_bias,
            entity_threshold=entity_threshold,
            relation_threshold=relation_threshold,
            min_confidence=(shipped_threshold() if threshold is None else threshold) if refusal else 0.0,
            keep_from=keep_from,
            command=recorded_command(ctx),
        ),
        RichReporter(),
    )


def execute(name: str, ws: Any, call: Callable[[], dict[str, Any]]) -> None:
    from pgmr.experiments.common import ExperimentError

    try:
        doc = call()
    except ExperimentError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    module = experiment_module(name)
    out.print(Markdown(f"## {module.TITLE}\n\n{module.tables(doc)}"))
    console.print(
        f"wrote report.md, metrics.json and per-system outputs (predictions.jsonl, metrics.json, report.md, "
        f"t2s-metrics.jsonl, qald.json) to {ws.out_dir} in {doc['wall_seconds']} s"
    )
    systems = doc.get("systems")
    if systems is not None and not any(s.get("status") == "ok" for s in systems.values()):
        print_error("no system could be evaluated (see the missing models above)")
        raise typer.Exit(1)


__all__ = ["RichReporter", "execute", "recorded_command", "workspace"]
