"""`pgmr generate`: run a trained generator on questions; optionally resolve its SPARQL-PGMR output."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from pgmr.cli.common import PRECISION_OPTION, Settings, console, out, print_error, progress_bar
from pgmr.cli.memory import MEMORY_OPTION, open_memory
from pgmr.datasets import DatasetError, load_dataset, load_named
from pgmr.datasets.loaders import NAMED_DATASETS
from pgmr.generators.base import PGMR_MODES, RAG_MODES
from pgmr.jsonl import JsonlError, read_jsonl, write_jsonl
from pgmr.query import IntermediateQueryError
from pgmr.resolver.grounding import GroundingConfig


def _questions(source: str, data_dir: Path | None, fmt: str) -> list[dict[str, Any]]:
    """[{id, question, gold?}] from a named dataset, a dataset file, or a JSONL of bare questions."""
    if source in NAMED_DATASETS:
        assert data_dir is not None
        records = load_named(source, data_dir).records
        return [{"id": r.id, "question": r.question, "gold": r.sparql} for r in records]
    path = Path(source)
    if not path.is_file():
        raise DatasetError(f"{source} is neither a dataset name ({', '.join(NAMED_DATASETS)}) nor a file")
    try:
        records = load_dataset(path, fmt).records
        return [{"id": r.id, "question": r.question, "gold": r.sparql} for r in records]
    except DatasetError:
        if path.suffix.lower() not in (".jsonl", ".ndjson"):
            raise
    # Questions without gold queries: the loaders want a sparql field, plain inputs need not have one.
    rows = []
    for i, obj in enumerate(read_jsonl(path), 1):
        question = obj.get("question")
        if isinstance(question, str) and question.strip():
            rows.append({"id": str(obj.get("id", f"{path.stem}:{i}")), "question": question.strip()})
    if not rows:
        raise DatasetError(f"{path}: no line has a 'question'")
    return rows


def generate(
    ctx: typer.Context,
    model_dir: str = typer.Argument(
        ...,
        help="Trained model directory (or the training --out directory), or the URL of an OpenAI-compatible "
        "chat server (http://... ; see docs/llm-backend.md)",
    ),
    source: str = typer.Argument(
        ..., help=f"Questions: a dataset name ({', '.join(NAMED_DATASETS)}), a dataset file or JSONL"
    ),
    out_path: Path = typer.Option(..., "--out", "-o", help="Output JSONL: {id, question, prediction, ...}"),
    fmt: str = typer.Option(
        "auto", "--format", help="Format of a dataset file: auto | lcquad2 | qald | jsonl"
    ),
    limit: int | None = typer.Option(None, min=1, help="Only the first N questions"),
    batch_size: int = typer.Option(16, min=1),
    num_beams: int | None = typer.Option(None, min=1, help="Beam width (default: as in validation)"),
    max_new_tokens: int | None = typer.Option(None, min=1, help="Default: the training target length"),
    copy_bias: float | None = typer.Option(
        None,
        min=0.0,
        max=100.0,
        help="pgmr models: score bonus for copying question spans into entity labels while decoding "
        "(default: the tuned one, docs/generators.md; 0 turns it off)",
    ),
    relation_copy_bias: float | None = typer.Option(
        None, min=0.0, max=100.0, help="pgmr models: the same inside relation labels (0 turns it off)"
    ),
    device: str = typer.Option("cpu", help="torch device: cpu, cuda, cuda:1, mps"),
    precision: str = PRECISION_OPTION,
    resolve: bool = typer.Option(False, help="pgmr modes: resolve predictions against the memory"),
    grounding: float = typer.Option(
        GroundingConfig.min_similarity,
        min=0.0,
        max=1.0,
        help="pgmr modes with --resolve: snap entity labels to the question span at least this similar "
        "before resolving (docs/generators.md); 1 turns it off",
    ),
    literal_grounding: bool = typer.Option(
        GroundingConfig.literals,
        help="pgmr modes with --resolve: replace numbers and quoted words that are not in the question by "
        "the question's closest ones (docs/generators.md)",
    ),
    memory_dir: Path | None = MEMORY_OPTION,
    chat_mode: str | None = typer.Option(
        None, "--mode", help="Chat server: what to write (pgmr | direct | rag | rag-pgmr)"
    ),
    llm_model: str | None = typer.Option(None, help="Chat server: model name (default: the first it lists)"),
    shots: str | None = typer.Option(
        None,
        help="Chat server: dataset (name or file) of few-shot examples (default: lcquad2-train; with a graph's "
        "--memory, none: the graph's schema prompt, and a file of your pairs over it adds its nearest ones)",
    ),
    shots_limit: int | None = typer.Option(None, min=1, help="Chat server: only the first N shot records"),
    k_shots: int = typer.Option(5, min=0, help="Chat server: examples per prompt, nearest to the question"),
    constrain: str = typer.Option(
        "auto", help="Chat server: grammar-constrained decoding: auto | gbnf | none"
    ),
    grammar_field: str = typer.Option("grammar", help="Chat server: request field of the GBNF grammar"),
    api_key: str | None = typer.Option(None, envvar="PGMR_LLM_API_KEY", help="Chat server: API key"),
    timeout: float = typer.Option(60.0, min=0.1, help="Chat server: seconds per request"),
    temperature: float = typer.Option(0.0, min=0.0, max=2.0, help="Chat server: sampling temperature"),
) -> None:
    """Write one prediction per question; with --resolve, also the SPARQL (or refusal, or parse error)."""
    from pgmr.generators.base import GeneratorError, check_mode
    from pgmr.generators.seq2seq.card import ModelCardError, read_model_card

    settings: Settings = ctx.obj
    chat = model_dir.startswith(("http://", "https://"))
    if chat:
        try:
            mode = check_mode(chat_mode or "")
        except ValueError:
            print_error(f"a chat server needs --mode (pgmr | direct | rag | rag-pgmr), got {chat_mode!r}")
            raise typer.Exit(2) from None
        card: dict[str, Any] = {"mode": mode}
    else:
        try:
            card = read_model_card(model_dir)
        except ModelCardError as exc:
            print_error(exc)
            raise typer.Exit(2) from None
    mode = card["mode"]
    if resolve and mode not in PGMR_MODES:
        console.print(f"[red]error:[/red] --resolve needs a pgmr or rag-pgmr model; this one is {mode!r}")
        raise typer.Exit(2)
    try:
        data_dir = settings.data_dir if source in NAMED_DATASETS else None
        rows = _questions(source, data_dir, fmt)[:limit]
    except (DatasetError, JsonlError, FileNotFoundError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    memory = open_memory(memory_dir, precision) if resolve or mode in RAG_MODES else None
    contexts: list[str] | None = None
    if mode in RAG_MODES:
        from pgmr.generators.rag import CandidateRetriever

        retriever = CandidateRetriever.from_settings(
            memory,  # type: ignore[arg-type]
            card.get("data", {}).get("retriever"),
        )
        console.print("retrieving candidates")
        contexts = retriever.contexts([r["question"] for r in rows])

    if chat:
        from pgmr.generators.chat.build import chat_generator_for_cli, graph_prompt, memory_catalog
        from pgmr.generators.chat.schema import SchemaError

        schema, shot_catalog = None, None
        if mode == "pgmr" and memory_dir is not None and (memory_dir / "graph.json").is_file():
            # A graph's memory: the model is told the graph's schema instead of being shown Wikidata pairs.
            memory = memory or open_memory(memory_dir, precision)
            if memory.graph is not None:
                try:
                    console.print("reading the graph's schema")
                    schema, shot_catalog = graph_prompt(memory), memory_catalog(memory)
                except SchemaError as exc:
                    print_error(exc)
                    raise typer.Exit(2) from None
        try:
            generator: Any = chat_generator_for_cli(
                model_dir,
                mode,
                settings,
                model=llm_model,
                shots=shots if schema is not None else shots or "lcquad2-train",
                shots_limit=shots_limit,
                k_shots=k_shots,
                constrain=constrain,
                grammar_field=grammar_field,
                api_key=api_key,
                timeout=timeout,
                temperature=temperature,
                max_tokens=max_new_tokens or 256,
                shot_context=retriever.contexts if mode in RAG_MODES else None,
                schema=schema,
                catalog=shot_catalog,
            )
        except GeneratorError as exc:  # the server, not the input: same status as failing mid-run
            print_error(exc)
            raise typer.Exit(1) from None
        except (ValueError, DatasetError, FileNotFoundError) as exc:
            print_error(exc)
            raise typer.Exit(2) from None
    else:
        from pgmr.generators.trained import load_trained

        generator = load_trained(
            model_dir,
            device,
            num_beams=num_beams,
            max_new_tokens=max_new_tokens,
            copy_bias=copy_bias,
            relation_copy_bias=relation_copy_bias,
            precision=precision,
        )
    reranker = None
    if resolve:  # an ensemble that cannot choose among its drafts fails before it generates
        from pgmr.pipeline.rerank import RerankerError, reranker_of

        try:
            reranker = reranker_of(generator)
        except RerankerError as exc:
            print_error(exc)
            raise typer.Exit(2) from None
    from pgmr.generators.ensemble import Draft, generate_drafts

    drafts: list[tuple[Draft, ...]] = []
    chunk = batch_size * 8
    with progress_bar() as bar:
        task = bar.add_task("generating", total=len(rows))
        for start in range(0, len(rows), chunk):
            questions = [r["question"] for r in rows[start : start + chunk]]
            part = contexts[start : start + chunk] if contexts is not None else None
            try:
                drafts.extend(generate_drafts(generator, questions, contexts=part, batch_size=batch_size))
            except GeneratorError as exc:
                print_error(exc)
                raise typer.Exit(1) from None
            bar.advance(task, len(questions))
    results: list[dict[str, Any]] = []
    for row, options in zip(rows, drafts, strict=True):
        # An ensemble's choice needs the memory (--resolve); without it the first member's draft stands.
        item: dict[str, Any] = {"id": row["id"], "question": row["question"], "prediction": options[0].text}
        if len(options) > 1:
            item["drafts"] = [
                {"source": d.source, "text": d.text, "confidence": dict(d.confidence)} for d in options
            ]
        if "gold" in row:
            item["gold"] = row["gold"]
        results.append(item)
    counts: Counter[str] = Counter()
    if resolve:
        _resolve_into(results, memory, grounding, literal_grounding, drafts, reranker)
        counts.update(r["status"] for r in results)
    elif mode in PGMR_MODES:
        counts["parses"] = sum(1 for r in results if _parses(r["prediction"]))
    write_jsonl(out_path, results)
    table = Table(title=f"pgmr generate ({mode}): {source}")
    table.add_column("measure")
    table.add_column("count", justify="right")
    table.add_row("questions", str(len(results)))
    for key in ("parses", "resolved", "refused", "invalid"):
        if key in counts or (resolve and key != "parses"):
            table.add_row(key, str(counts[key]))
    out.print(table)
    console.print(f"wrote {len(results)} predictions to {out_path}")


def _parses(text: str) -> bool:
    from pgmr.pipeline.stages import parse_output

    try:
        parse_output(text, "pgmr")
    except IntermediateQueryError:
        return False
    return True


def _resolve_into(
    results: list[dict[str, Any]],
    memory: Any,
    grounding: float,
    literal_grounding: bool,
    drafts: Sequence[Sequence[Any]],
    reranker: Any,
) -> None:
    """Adds status plus sparql/mapping/evidence (resolved), reason (refused) or error (invalid) to each row;
    `grounded` lists the labels and literals snapped to the question before resolution. The pipeline's
    stages with its grounding, and without refusal (refusal is `pgmr ask`'s and `pgmr eval`'s to apply):
    every row keeps the resolver's best candidates and their evidence. An ensemble's drafts are reranked
    as in `pgmr ask`: `prediction` becomes the chosen draft and `drafts` records every draft's score."""
    from pgmr.pipeline import StageConfig
    from pgmr.pipeline.rerank import prepare_drafts
    from pgmr.pipeline.stages import finish_all
    from pgmr.resolver import Resolver, ResolverConfig

    stages = StageConfig(GroundingConfig(grounding, literals=literal_grounding), resolver=ResolverConfig())
    resolver = Resolver(memory, stages.resolver)
    questions = [item.get("question") for item in results]
    prepared = prepare_drafts(questions, drafts, "pgmr", resolver, stages.grounding, reranker)
    for item, result in zip(results, finish_all(prepared, stages), strict=True):
        if result.grounded:
            item["grounded"] = result.grounded_json()
        row = result.to_row(evidence=True)
        row.pop("drafts", None)
        item.update(row)
        if result.drafts:
            item["prediction"] = result.intermediate
            written = {d["source"]: d for d in item.get("drafts", [])}
            item["drafts"] = [
                {
                    **d.to_json(),
                    "text": written[d.source]["text"],
                    "confidence": written[d.source]["confidence"],
                }
                for d in result.drafts
            ]
