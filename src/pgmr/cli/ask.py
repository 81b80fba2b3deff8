"""`pgmr ask "question"`: the whole pipeline on one question, shown step by step (or as JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from pgmr.cli.ask_candidates import CANDIDATES_OPTION, candidates_table
from pgmr.cli.common import PRECISION_OPTION, Settings, console, out, print_error
from pgmr.cli.tables import (
    DESCRIPTION_FLOOR,
    ID_WIDTH,
    LABEL_FLOOR,
    WIDE_OPTION,
    Column,
    FittedTable,
    row,
)
from pgmr.pipeline import AskResult, Pipeline, PipelineConfig, PipelineError, PlaceholderView
from pgmr.precision import DEFAULT_PRECISION
from pgmr.resolver.grounding import LITERAL
from pgmr.resolver.support import shipped_threshold

MAX_QUESTION_CHARS = 1000

MODEL_OPTION = typer.Option(
    None, "--model", help="Trained generator directory (default: $PGMR_MODEL_DIR or models/pgmr-ensemble)"
)
MEMORY_OPTION = typer.Option(None, "--memory", "-m", help="Memory directory (default: ~/.cache/pgmr/memory)")
STORE_OPTION = typer.Option(
    None,
    "--store",
    help="SPARQL store: 'wdqs' or 'qlever-wikidata' (public Wikidata endpoints), an http(s) endpoint, an "
    "oxigraph directory, an RDF file, or 'none' "
    "(default: the data directory's kg/qald10_answer_derived.nt, loaded in memory)",
)
K_OPTION = typer.Option(5, "--k", "-k", min=1, max=50, help="Candidates kept per placeholder")
THRESHOLD_OPTION = typer.Option(
    shipped_threshold(),
    "--threshold",
    min=0.0,
    max=1.0,
    help="Refuse when a placeholder's support (estimated probability that the memory holds what it names) is "
    "below this "
    "(default: the setting chosen on LC-QuAD 2.0 validation; 0 never refuses)",
)
REFUSAL_OPTION = typer.Option(
    True, "--refusal/--no-refusal", help="--no-refusal: always answer (the same as --threshold 0)"
)
KG_CHECK_OPTION = typer.Option(
    True,
    "--kg-check/--no-kg-check",
    help="Among the top-k candidates, prefer a combination the KG has facts for",
)
MAX_PROBES_OPTION = typer.Option(8, "--max-probes", min=1, max=100, help="Queries the KG check may run")
TIMEOUT_OPTION = typer.Option(10.0, "--timeout", min=0.1, max=600.0, help="Seconds per store query")


def quiet_transformers() -> None:
    """Loading bars and generation-config warnings from transformers are noise on a CLI."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers is a dependency
        return
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def build_config(
    settings: Settings,
    *,
    model: Path | None,
    memory_dir: Path | None,
    store: str | None,
    k: int,
    threshold: float,
    kg_check: bool,
    max_probes: int,
    timeout: float,
    verify_memory: bool,
    refusal: bool = True,
    precision: str = DEFAULT_PRECISION,
) -> PipelineConfig:
    """Settings from the command line, checked here; bad ones exit with code 2 and a message."""
    from pgmr.stores import default_kg_file

    try:
        data_dir: Path | None = settings.data_dir
    except FileNotFoundError:
        data_dir = None  # labels then come from the memory; only the default store needs the data dir
    if store is None:
        if data_dir is None:
            print_error(
                "no data directory for the default store; pass --data-dir, or --store SPEC or --store none"
            )
            raise typer.Exit(2)
        kg_file = default_kg_file(data_dir)
        if not kg_file.is_file():
            print_error(f"no knowledge graph at {kg_file}; pass --store SPEC (or --store none)")
            raise typer.Exit(2)
        store_spec: str | None = str(kg_file)
    elif store.strip().lower() == "none":
        store_spec = None
    else:
        store_spec = store
    try:
        return PipelineConfig(
            model_dir=model,
            memory_dir=memory_dir,
            store=store_spec,
            data_dir=data_dir,
            k=k,
            min_confidence=threshold if refusal else 0.0,
            kg_check=kg_check,
            max_probes=max_probes,
            timeout=timeout,
            verify_memory=verify_memory,
            precision=precision,
        )
    except ValueError as exc:
        print_error(exc)
        raise typer.Exit(2) from None


def load_pipeline(config: PipelineConfig) -> Pipeline:
    quiet_transformers()
    try:
        with console.status("loading the generator, memory and store"):
            return Pipeline.load(config)
    except PipelineError as exc:
        print_error(exc)
        raise typer.Exit(2) from None


# -- rendering -------------------------------------------------------------------------------------------------

STATUS_STYLE = {
    "answered": "bold green",
    "empty": "bold yellow",
    "resolved": "bold yellow",
    "refused": "bold magenta",
    "invalid": "bold red",
    "error": "bold red",
}


def highlighted(text: str) -> Text:
    rendered = Text(text)
    rendered.highlight_regex(r"\bentity\d+\b", "bold blue")
    rendered.highlight_regex(r"\brelation\d+\b", "bold green")
    rendered.highlight_regex(r"\[/?(ENT|REL)\]", "dim")
    return rendered


# A reader picks among candidates by ID, label and description (the description tells two "Paris" apart), so
# those stay, wrapped when long. The rows are already in score order and those under the similarity threshold
# are dimmed, so the two numbers add the least: similarity goes first, then the score.
CANDIDATE_COLUMNS = (
    Column(""),
    Column("id", floor=ID_WIDTH),
    Column("label", wrap=True, floor=LABEL_FLOOR),
    Column("description", wrap=True, floor=DESCRIPTION_FLOOR),
    Column("score", drop=1, justify="right"),
    Column("similarity", drop=2, justify="right"),
)
# The variable's name matters only when a query returns several; the answer and what it is matter always.
ANSWER_COLUMNS = (
    Column("variable", drop=1),
    Column("answer", wrap=True, floor=LABEL_FLOOR),
    Column("id", floor=ID_WIDTH),
    Column("description / datatype", wrap=True, floor=DESCRIPTION_FLOOR),
)
PROBE_COLUMNS = (
    Column("#", justify="right"),
    Column("mapping", wrap=True),
    Column("score", justify="right"),
    Column("results", justify="right"),
    Column("error", wrap=True),
)


def candidate_table(p: PlaceholderView, wide: bool = False) -> FittedTable:
    colour = "blue" if p.kind == "entity" else "green"
    title = f"[bold {colour}]{p.name}[/] [{'ENT' if p.kind == 'entity' else 'REL'}] {escape(p.label)}"
    if p.description:
        title += f" [dim]{escape(p.description)}[/]"
    rows = []
    for c in p.candidates:
        chosen = c.id == p.chosen
        style = "bold" if chosen else ("dim" if c.similarity < p.threshold else None)
        cells = (
            "✓" if chosen else "",
            c.id,
            c.label,
            c.description or "",
            f"{c.score:.3f}",
            f"{c.similarity:.3f}",
        )
        rows.append(row(*cells, style=style))
    caption = None
    if not p.supported:
        caption = f"[magenta]rejected: {escape(p.rejected)}[/]"
    elif p.confidence is not None:
        caption = f"[dim]confidence {p.confidence:.3f} (threshold {p.min_confidence:.3f})[/]"
    return FittedTable(CANDIDATE_COLUMNS, tuple(rows), title=title, caption=caption, wide=wide)


def answers_table(result: AskResult, wide: bool = False) -> FittedTable:
    rows = []
    for a in result.answers:
        extra = a.description or a.language or (a.datatype.rsplit("#", 1)[-1] if a.datatype else "")
        rows.append(row(a.variable or "", a.label or a.value, a.id or "", extra or ""))
    caption = None
    if result.answer_count > len(result.answers):
        caption = f"first {len(result.answers)} of {result.answer_count}"
    return FittedTable(
        ANSWER_COLUMNS, tuple(rows), title=f"answers ({result.answer_count})", caption=caption, wide=wide
    )


def probes_table(result: AskResult, wide: bool = False) -> FittedTable:
    rows = (
        row(
            str(i),
            " ".join(f"{k}={v}" for k, v in p.mapping),
            f"{p.score:.3f}",
            "" if p.count is None else str(p.count),
            p.error or "",
            style="bold" if p.has_result else None,
        )
        for i, p in enumerate(result.probes, 1)
    )
    title = f"KG check: {len(result.probes)} probe(s), choice: {result.choice}"
    return FittedTable(PROBE_COLUMNS, tuple(rows), title=title, wide=wide)


def render(result: AskResult, wide: bool = False) -> Group:
    parts: list[object] = []
    if result.question:
        parts.append(Text.assemble(("question: ", "bold"), result.question))
    if result.intermediate is not None:
        chosen = next((d.source for d in result.drafts if d.chosen), None)
        parts.append(
            Panel(
                highlighted(result.intermediate),
                title=f"intermediate query ({result.mode}{f', draft by {chosen}' if chosen else ''})",
                title_align="left",
            )
        )
    if result.drafts:
        # An ensemble: every member's draft, as the reranker scored it (the chosen one is shown above).
        parts.append(
            Text.assemble(
                ("drafts: ", "bold"),
                ", ".join(
                    f"{d.source} {d.status} {d.score:.2f}{' (chosen)' if d.chosen else ''}"
                    for d in result.drafts
                ),
            )
        )
    for name, generated, grounded in result.grounded:
        # A literal is shown as the query writes it (quotes included); a label as a Python string.
        change = f"{generated} -> {grounded}" if name == LITERAL else f"{generated!r} -> {grounded!r}"
        parts.append(Text.assemble((f"grounded {name}: ", "bold"), f"{change} (from the question)"))
    for note in result.notes:
        parts.append(Text.assemble(("resolver: ", "bold"), note))
    parts.extend(candidate_table(p, wide) for p in result.placeholders)
    if result.sparql:
        parts.append(
            Panel(
                Syntax(result.sparql, "sparql", word_wrap=True, theme="ansi_dark"),
                title="final SPARQL",
                title_align="left",
            )
        )
    if len(result.probes) > 1 or result.choice in ("kg", "fallback"):
        parts.append(probes_table(result, wide))
    status = Text.assemble(("status: ", "bold"), (result.status, STATUS_STYLE[result.status]))
    if result.reason:
        status.append(f"  {result.reason}")
    if result.error and result.error.line is not None:
        where = f" (line {result.error.line}" + (
            f", column {result.error.column})" if result.error.column else ")"
        )
        status.append(where, "dim")
    parts.append(status)
    if result.boolean is not None:
        parts.append(Text.assemble(("answer: ", "bold"), ("yes" if result.boolean else "no", "bold")))
    elif result.answers:
        parts.append(answers_table(result, wide))
    timings = " · ".join(f"{stage} {seconds * 1000:.0f} ms" for stage, seconds in result.timings)
    parts.append(Text(timings, style="dim"))
    return Group(*parts)  # type: ignore[arg-type]


def ask(
    ctx: typer.Context,
    question: str = typer.Argument(..., help="A question in English"),
    model: Path | None = MODEL_OPTION,
    memory_dir: Path | None = MEMORY_OPTION,
    store: str | None = STORE_OPTION,
    k: int = K_OPTION,
    threshold: float = THRESHOLD_OPTION,
    refusal: bool = REFUSAL_OPTION,
    kg_check: bool = KG_CHECK_OPTION,
    max_probes: int = MAX_PROBES_OPTION,
    timeout: float = TIMEOUT_OPTION,
    precision: str = PRECISION_OPTION,
    verify_memory: bool = typer.Option(
        False, "--verify-memory", help="Check the memory files' sha256 (slower)"
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON"),
    candidates: int = CANDIDATES_OPTION,
    wide: bool = WIDE_OPTION,
) -> None:
    """Answer one question: intermediate query, candidates per placeholder, final SPARQL and answers (with
    --candidates N, also the N best final queries with their support)."""
    question = " ".join(question.split())
    if not question:
        print_error("the question is empty")
        raise typer.Exit(2)
    if len(question) > MAX_QUESTION_CHARS:
        print_error(f"the question is {len(question)} characters long; at most {MAX_QUESTION_CHARS}")
        raise typer.Exit(2)
    config = build_config(
        ctx.obj,
        model=model,
        memory_dir=memory_dir,
        store=store,
        k=k,
        threshold=threshold,
        kg_check=kg_check,
        max_probes=max_probes,
        timeout=timeout,
        verify_memory=verify_memory,
        refusal=refusal,
        precision=precision,
    )
    pipeline = load_pipeline(config)
    try:
        with console.status("asking"):
            result = pipeline.ask(question, candidates=candidates)
    finally:
        pipeline.close()
    if json_out:
        out.print_json(json.dumps(result.to_json()))
    else:
        # Uncropped: a --wide table may be wider than the terminal on purpose.
        out.print(render(result, wide), crop=not wide)
        if result.candidates:
            out.print(candidates_table(result))
    if result.status == "error":
        raise typer.Exit(1)


__all__ = ["REFUSAL_OPTION", "THRESHOLD_OPTION", "ask", "build_config", "load_pipeline", "render"]
