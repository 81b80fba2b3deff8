"""`pgmr experiment ck25`: PGMR over a graph that is not Wikidata, CK25 (TEXT2SPARQL'25's corporate graph).

Every question goes the way `pgmr ask` takes it, over a memory built from the graph (docs/own-graph.md):
- `--oracle`: the generator is perfect, its output the gold query converted to SPARQL-PGMR with the graph's
  labels (what a model trained on the graph's converted pairs learns to write); what is left to go wrong is
  the memory and the resolver;
- `--model DIR`: a trained generator writes the intermediate queries instead;
- `--server URL`: a chat LLM on an OpenAI-compatible server writes them, prompted with the graph's schema and
  worked examples written from it (pgmr.generators.chat.schema_prompt: no training pair of the graph needed),
  grammar-constrained where the server is llama.cpp.
Then each final query runs on an embedded pyoxigraph store holding the graph, and is scored against the gold:
IRIs (every gold IRI of the graph resolved right; every IRI of the final query present in the graph, so none
invented), Query EM, and answer precision/recall/F1 against the gold `answers` (order-aware where the question
says `result_order_matters`, pgmr.evaluation.ordered). The questions and the graph are options, with CK25 as
the default, so another question set over the same graph runs unchanged.

Each run evaluates one system; `--keep-from` keeps the rows of earlier runs (other systems, run at other
times) beside it, so that one metrics.json holds every row that `pgmr experiment results-doc` publishes
(pgmr.experiments.ck25_systems).

Writes metrics.json, predictions.jsonl and report.md (pgmr.experiments.ck25_report) into the output directory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgmr.experiments.ck25_questions import GraphQuestion, load_questions
from pgmr.experiments.ck25_report import tables
from pgmr.experiments.reporting import QUIET, Reporter
from pgmr.experiments.settings import ExperimentError
from pgmr.jsonl import write_json

if TYPE_CHECKING:
    from pgmr.kg.graph import GraphCatalog
    from pgmr.memory import Memory
    from pgmr.pipeline import AskResult

NAME = "ck25"
TITLE = "CK25: PGMR over a corporate knowledge graph (not Wikidata)"
DEFAULT_QUESTIONS = Path("ck25") / "questions-dev.jsonl"
DEFAULT_GRAPH = Path("ck25") / "prod-inst.ttl"


@dataclass(frozen=True)
class Ck25Settings:
    """Validated at the edge (the CLI). `memory_dir` None: `out_dir/memory`, built from `graph` when missing.
    `model_dir` and `server` None: the oracle. `server_model` None: the first model the server lists."""

    questions: Path
    graph: Path
    out_dir: Path
    memory_dir: Path | None = None
    model_dir: Path | None = None
    limit: int | None = None
    min_confidence: float = 0.0
    batch_size: int = 16
    device: str = "cpu"
    precision: str = "auto"
    timeout: float = 30.0
    command: str = ""
    server: str | None = None
    server_model: str | None = None
    server_timeout: float = 600.0
    max_new_tokens: int = 256
    keep_from: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if self.server is not None and self.model_dir is not None:
            raise ValueError("give a trained model or a chat server, not both")
        if not self.server_timeout > 0 or self.max_new_tokens < 1:
            raise ValueError("server_timeout must be positive seconds and max_new_tokens >= 1")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be positive, got {self.limit}")
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError(f"the refusal threshold is a probability in [0, 1], got {self.min_confidence}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive seconds, got {self.timeout}")

    @property
    def condition(self) -> str:
        if self.server is not None:
            return "chat"
        return "oracle" if self.model_dir is None else "model"


def graph_memory(settings: Ck25Settings, reporter: Reporter) -> Memory:
    """The memory of the graph: loaded when it exists, else built from the graph file (embeddings cached in
    `<memory>.cache`, so a rebuild encodes nothing)."""
    from pgmr.kg.catalog import CatalogError
    from pgmr.kg.rdf import read_rdf_files
    from pgmr.memory import Memory, PgmrMemoryError, load_encoder

    path = settings.memory_dir or settings.out_dir / "memory"
    try:
        if (path / "manifest.json").is_file():
            with reporter.status(f"loading the memory from {path}"):
                memory = Memory.load(path, precision=settings.precision, warm=False)
        else:
            with reporter.status(f"building the memory of {settings.graph} in {path}"):
                catalog = read_rdf_files([settings.graph])
                memory = Memory.build(catalog, path, load_encoder(None))
    except (PgmrMemoryError, CatalogError) as exc:
        raise ExperimentError(str(exc)) from None
    if memory.graph is None:
        raise ExperimentError(
            f"{path} is a Wikidata memory; give a memory of the graph (`pgmr memory build --from-rdf "
            f"{settings.graph}`) or leave out --memory"
        )
    return memory


def run(settings: Ck25Settings, reporter: Reporter = QUIET) -> dict[str, Any]:
    from pgmr import __version__
    from pgmr.experiments.ck25_report import score_question, summary, write_outputs
    from pgmr.experiments.ck25_systems import combined, kept_systems, run_entry, system_label
    from pgmr.memory.graph_file import graph_catalog
    from pgmr.stores import OxigraphStore, StoreError

    started, started_at = time.monotonic(), datetime.now(UTC).isoformat(timespec="seconds")
    questions = load_questions(settings.questions, settings.limit)
    questions_sha256, graph_sha256 = _sha256(settings.questions), _sha256(settings.graph)
    kept = kept_systems(
        settings.keep_from,
        {
            "questions file": settings.questions.name,
            "graph file": settings.graph.name,
            "questions": len(questions),
            "questions sha256": questions_sha256,
            "graph sha256": graph_sha256,
        },
    )
    memory = graph_memory(settings, reporter)
    assert memory.graph is not None
    if not any(Path(s).name == settings.graph.name for s in memory.graph.sources):
        reporter.warn(
            f"the memory was built from {', '.join(memory.graph.sources)}, the queries run on {settings.graph}: "
            "make sure they hold the same graph"
        )
    catalog = graph_catalog(memory.entities.rows, memory.relations.rows, memory.graph)
    try:
        store = OxigraphStore.from_file(settings.graph, timeout=settings.timeout)
    except (StoreError, OSError) as exc:
        raise ExperimentError(f"cannot load {settings.graph} into a store: {exc}") from None
    with store:
        graph_iris = _graph_iris(store)
        intermediates, skipped = _converted(questions, catalog)
        generator, generator_info = _chat_generator(settings, store, catalog, reporter)
        generation_started = time.monotonic()
        results = _answer(settings, memory, questions, intermediates, reporter, generator)
        generation_seconds = time.monotonic() - generation_started
        with reporter.progress("running the final queries", len(questions)) as advance:
            rows = []
            for q, result in zip(questions, results, strict=True):
                rows.append(
                    score_question(q, result, intermediates.get(q.id), skipped.get(q.id), store, catalog,
                                   graph_iris, settings.timeout)
                )  # fmt: skip
                advance(1)
    doc: dict[str, Any] = {
        "experiment": NAME,
        "title": TITLE,
        "pgmr_version": __version__,
        "condition": settings.condition,
        "questions_file": str(settings.questions),
        "graph_file": str(settings.graph),
        "memory": str(settings.memory_dir or settings.out_dir / "memory"),
        "model": str(settings.model_dir) if settings.model_dir else generator_info.get("model"),
        "generator": generator_info,
        "min_confidence": settings.min_confidence,
        "command": settings.command,
        "started_at": started_at,
        "metrics": summary(rows),
        "generation_seconds": round(generation_seconds, 1),
        "seconds_per_question": round(generation_seconds / len(questions), 2) if questions else 0.0,
        "wall_seconds": round(time.monotonic() - started, 1),
        "settings": {
            "questions": len(questions),
            "limit": settings.limit,
            "questions_sha256": questions_sha256,
            "graph_sha256": graph_sha256,
            "keep_from": [str(p) for p in settings.keep_from],
        },
    }
    key, entry = run_entry(doc)
    doc["system"] = key
    doc["systems"] = combined(key, entry, kept)
    for row in doc["systems"].values():
        if row.get("carried_from"):
            reporter.warn(
                f"{system_label(row)}: not evaluated in this run; kept from the run of "
                f"{row['carried_from'].get('started_at')}"
            )
    write_outputs(settings.out_dir, doc, rows)
    return doc


def _sha256(path: Path) -> str:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ExperimentError(f"cannot read {path}: {exc}") from None


def _graph_iris(store: Any) -> frozenset[str]:
    """Every IRI the graph holds, in any position: an IRI of a final query outside it is invented."""
    found: set[str] = set()
    for var in ("s", "p", "o"):
        result = store.query(f"SELECT DISTINCT ?{var} WHERE {{ ?s ?p ?o FILTER(isIRI(?{var})) }}")
        found.update(row[var].value for row in result.rows)
    return frozenset(found)


def _converted(
    questions: list[GraphQuestion], catalog: GraphCatalog
) -> tuple[dict[str, tuple[str, dict[str, str]]], dict[str, str]]:
    """Per question, its gold query in SPARQL-PGMR with the gold mapping, or why it does not convert."""
    from pgmr.conversion import ConversionError, convert_sparql

    converted: dict[str, tuple[str, dict[str, str]]] = {}
    skipped: dict[str, str] = {}
    for q in questions:
        try:
            query, mapping = convert_sparql(q.sparql, catalog)
        except ConversionError as exc:
            skipped[q.id] = str(exc)
            continue
        converted[q.id] = (query.to_text(), mapping)
    return converted, skipped


def _chat_generator(
    settings: Ck25Settings, store: Any, catalog: GraphCatalog, reporter: Reporter
) -> tuple[Any, dict[str, Any]]:
    """With `--server`: the chat generator prompted with the graph's schema, read from the store, and what
    to record of it (server, model, the prompt's size); else (None, {})."""
    if settings.server is None:
        return None, {}
    from pgmr.generators.base import GeneratorError
    from pgmr.generators.chat import ChatClient, ChatGenerator
    from pgmr.generators.chat.schema import SchemaError, read_schema
    from pgmr.generators.chat.schema_prompt import schema_prompt

    try:
        with reporter.status("reading the graph's schema"):
            prompt = schema_prompt(read_schema(store, catalog, timeout=settings.timeout))
        model = settings.server_model
        if model is None:
            with ChatClient(settings.server, timeout=settings.server_timeout) as client:
                served = client.models()
            if not served:
                raise ExperimentError(f"chat server {client.root} lists no model; pass --server-model")
            model = served[0].id
        generator = ChatGenerator(
            settings.server, model, "pgmr", schema=prompt, timeout=settings.server_timeout,
            max_tokens=settings.max_new_tokens, temperature=0.0,
        )  # fmt: skip
        grammar = generator.uses_grammar()
    except (SchemaError, GeneratorError) as exc:
        raise ExperimentError(str(exc)) from None
    settings.out_dir.mkdir(parents=True, exist_ok=True)
    write_json(settings.out_dir / "prompt.json", {
        "system": prompt.system, "mapping_system": prompt.mapping_system,
        "examples": [{"question": e.source, "target": e.target} for e in prompt.examples],
        "relation_lines": list(prompt.relation_lines), "class_lines": list(prompt.class_lines),
    })  # fmt: skip
    info = {"server": generator.server, "model": model, "grammar": grammar, "two_step": generator.two_step,
            "examples": len(prompt.examples), "system_chars": len(prompt.system)}  # fmt: skip
    return generator, info


def _answer(
    settings: Ck25Settings,
    memory: Memory,
    questions: list[GraphQuestion],
    intermediates: dict[str, tuple[str, dict[str, str]]],
    reporter: Reporter,
    generator: Any = None,
) -> list[AskResult | None]:
    """Each question's result without a store (the final queries run afterwards, scored one by one); None for
    an oracle question whose gold query does not convert (nothing to write)."""
    from pgmr.generators.seq2seq.card import ModelCardError
    from pgmr.generators.trained import load_trained
    from pgmr.pipeline import Pipeline, PipelineConfig

    config = PipelineConfig(
        min_confidence=settings.min_confidence, kg_check=False, precision=settings.precision
    )
    if generator is not None:
        from pgmr.generators.base import GeneratorError

        try:
            with reporter.status(f"generating (chat) and resolving {len(questions)} questions"):
                return list(
                    Pipeline(generator, memory, config=config).ask_many(
                        [q.question for q in questions], batch_size=settings.batch_size
                    )
                )
        except GeneratorError as exc:
            raise ExperimentError(str(exc)) from None
        finally:
            generator.close()
    if settings.model_dir is None:
        pipeline = Pipeline(None, memory, config=config)
        found: list[AskResult | None] = []
        with reporter.progress("resolving the oracle's queries", len(questions)) as advance:
            for q in questions:
                text = intermediates.get(q.id)
                found.append(
                    None
                    if text is None
                    else pipeline.resolve_text(text[0], question=q.question, execute=False)
                )
                advance(1)
        return found
    try:
        with reporter.status(f"loading the generator from {settings.model_dir}"):
            generator = load_trained(settings.model_dir, settings.device, precision=settings.precision)
    except (ModelCardError, OSError) as exc:
        raise ExperimentError(f"cannot load the generator from {settings.model_dir}: {exc}") from None
    pipeline = Pipeline(generator, memory, config=config)
    with reporter.status(f"generating and resolving {len(questions)} questions"):
        return list(pipeline.ask_many([q.question for q in questions], batch_size=settings.batch_size))


__all__ = [
    "DEFAULT_GRAPH",
    "DEFAULT_QUESTIONS",
    "NAME",
    "TITLE",
    "Ck25Settings",
    "GraphQuestion",
    "graph_memory",
    "load_questions",
    "run",
    "tables",
]
