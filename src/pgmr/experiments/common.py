"""What the experiments share: settings, the systems (trained models) they compare, generation, resolution,
scoring, sub-memories, and the files every experiment writes (report.md, metrics.json, per-system outputs).

An experiment module exposes `NAME`, `TITLE`, `run(workspace, ...) -> dict` (its metrics document, also
written to metrics.json) and `tables(doc) -> str` (markdown tables of a metrics document, reused by
`pgmr experiment results-doc`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pgmr import __version__
from pgmr.datasets import QARecord
from pgmr.generators.base import MODES, PGMR_MODES, RAG_MODES, Generator
from pgmr.jsonl import atomic_write_text, read_jsonl, write_json, write_jsonl
from pgmr.kg.ids import id_kind
from pgmr.query import IntermediateQuery, IntermediateQueryError, parse

if TYPE_CHECKING:
    from pgmr.evaluation.metrics import EvaluationResult
    from pgmr.generators.grounding import GroundingConfig, Known
    from pgmr.kg.catalog import LabelCatalog
    from pgmr.memory import Encoder, Memory
    from pgmr.resolver import Prior, Refusal, Resolution, Resolver


# Sharma et al. (EACL Findings 2026), v1 Table 1, LC-QuAD 2.0 test, in percent: Query EM / BLEU / URI EM /
# URI hallucination. The paper reports no SQM.
PAPER_TABLE1: dict[str, dict[str, float]] = {
    "T5-small direct": {"query_em": 35.08, "bleu": 81.87, "uri_em": 38.44, "hallucination": 27.75},
    "T5-small PGMR": {"query_em": 74.23, "bleu": 92.76, "uri_em": 80.15, "hallucination": 0.38},
    "Llama 3.1 8B PGMR": {"query_em": 69.48, "bleu": 89.96, "uri_em": 78.76, "hallucination": 0.01},
    "GPT-4o PGMR": {"query_em": 43.53, "bleu": 73.53, "uri_em": 69.60, "hallucination": 0.0},
}
PAPER_COUNTERPART: dict[str, str] = {"direct": "T5-small direct", "pgmr": "T5-small PGMR"}

# Default model directories, relative to the working directory (the checkout root, where `artifacts/`
# goes too): the models trained with `--preset minilm`; rag and rag-pgmr have no default run yet.
DEFAULT_MODELS: dict[str, str] = {
    "pgmr": "models/pgmr-default",
    "direct": "runs/direct-minilm/model",
    "rag": "runs/rag-minilm/model",
    "rag-pgmr": "runs/rag-pgmr-minilm/model",
}


# The recipes of the published models (their model cards record them too; docs/generators.md): the default
# pgmr model and the direct model share one; rag reads a label-only candidate block after the question (about
# 80 encoder tokens, where 64 would cut it) and trains in the same wall budget, annealed to it.
_RECIPE = (
    "--preset minilm --vocab-size 8000 --max-description-words 0 --batch-size 32 --lr 1e-3 --encoder-lr 1e-4 "
    "--warmup-steps 300 --max-eval-examples 300 --max-target-len 160"
)
_STEPS = "--max-steps 6000 --max-minutes 116 --eval-steps 500 --max-source-len 64"
_RAG = (
    "--max-steps 12000 --max-minutes 100 --anneal-to-budget --bf16 --eval-steps 1000 --max-source-len 128 "
    "--candidate-description-words 0"
)


def train_command(system: str) -> str:
    """The command that makes a system's default model."""
    if system == "pgmr":
        return (
            f"pgmr train --mode pgmr -o runs/pgmr-minilm {_RECIPE} {_STEPS} && "
            "pgmr pack runs/pgmr-minilm -o models/pgmr-default"
        )
    return f"pgmr train --mode {system} -o runs/{system}-minilm {_RECIPE} {_RAG if system in RAG_MODES else _STEPS}"


class ExperimentError(ValueError):
    """Bad experiment input (unknown system, missing model or memory, bad predictions file): the message
    says what to do."""


# --- settings ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExperimentSettings:
    """What every experiment takes, validated at the edge (the CLI)."""

    data_dir: Path
    out_dir: Path
    limit: int | None = None
    models: Mapping[str, Path] = field(default_factory=dict)  # system -> model dir overrides
    memory_dir: Path | None = None
    batch_size: int = 16
    device: str = "cpu"
    num_beams: int | None = None
    max_new_tokens: int | None = None
    copy_bias: float | None = None  # None: the generator's tuned default
    relation_copy_bias: float | None = None
    entity_threshold: float = 0.0
    relation_threshold: float = 0.0
    # pgmr systems refuse a placeholder whose support (estimated probability that the memory holds what it
    # names) is below this
    # (pgmr.resolver.support); the shipped setting by default, 0 never refuses.
    min_confidence: float = field(default_factory=lambda: _shipped_threshold())
    command: str = ""
    progress: bool = True
    # An earlier run of the same experiment (its metrics.json or directory): systems this run cannot
    # evaluate keep that run's results (`carry_over`).
    keep_from: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "data_dir": str(self.data_dir),
            "out_dir": str(self.out_dir),
            "limit": self.limit,
            "models": {k: str(v) for k, v in self.models.items()},
            "memory": str(self.memory_dir) if self.memory_dir else "default (~/.cache/pgmr/memory)",
            "batch_size": self.batch_size,
            "device": self.device,
            "num_beams": self.num_beams,
            "max_new_tokens": self.max_new_tokens,
            "copy_bias": self.copy_bias,
            "relation_copy_bias": self.relation_copy_bias,
            "entity_threshold": self.entity_threshold,
            "relation_threshold": self.relation_threshold,
            "min_confidence": self.min_confidence,
            "keep_from": str(self.keep_from) if self.keep_from else None,
        }


def _shipped_threshold() -> float:
    from pgmr.resolver.support import shipped_threshold

    return shipped_threshold()


def parse_models(text: str | None) -> dict[str, Path]:
    """`pgmr=DIR,direct=DIR` -> {system: Path}. Raises ExperimentError for bad syntax or an unknown system."""
    models: dict[str, Path] = {}
    if not text:
        return models
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, path = part.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise ExperimentError(f"--models takes SYSTEM=DIR pairs separated by commas, got {part!r}")
        if name not in MODES:
            raise ExperimentError(f"--models: unknown system {name!r}; expected one of {', '.join(MODES)}")
        if name in models:
            raise ExperimentError(f"--models names {name!r} twice")
        models[name] = Path(path).expanduser()
    return models


# --- systems ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SystemSpec:
    """One compared system: a trained model of `mode` at `model_dir`, or missing (`model_dir` None)."""

    name: str
    mode: str
    requested: Path  # the path given (or the default), reported when missing
    model_dir: Path | None
    card: Mapping[str, Any] = field(default_factory=dict)
    explicit: bool = False
    make_command: str | None = None  # how to make a missing model; default: `train_command(name)`

    @property
    def missing(self) -> bool:
        return self.model_dir is None

    @property
    def how_to_make(self) -> str:
        return self.make_command or train_command(self.name)

    def describe(self) -> dict[str, Any]:
        if self.model_dir is None:
            return {"status": "missing", "model": str(self.requested), "train_command": self.how_to_make}
        model = self.card.get("model", {})
        training = self.card.get("training", {})
        return {
            "model": str(self.model_dir),
            "mode": self.mode,
            "preset": model.get("preset") or model.get("base"),
            "parameters": model.get("parameters"),
            "train_steps": training.get("global_step"),
            "train_wall_seconds": training.get("wall_seconds"),
            "validation_exact_match": self.card.get("validation", {}).get("exact_match"),
        }


def system_spec(name: str, path: Path | None) -> SystemSpec:
    """The system `name` (a mode) with the model at `path`, else its default. A given path that holds no
    model, or a model of another mode, is an ExperimentError; a missing default is reported as missing."""
    from pgmr.generators.seq2seq.card import ModelCardError, read_model_card, resolve_model_dir

    if name not in MODES:
        raise ExperimentError(f"unknown system {name!r}; expected one of {', '.join(MODES)}")
    explicit = path is not None
    requested = path if path is not None else Path(DEFAULT_MODELS[name])
    try:
        model_dir = resolve_model_dir(requested)
        card = read_model_card(model_dir)
    except ModelCardError as exc:
        if explicit:
            raise ExperimentError(f"--models {name}={requested}: {exc}") from None
        return SystemSpec(name, name, requested, None)
    if card["mode"] != name:
        raise ExperimentError(
            f"the {name} model at {model_dir} is a {card['mode']!r} model; pass a {name!r} model"
        )
    return SystemSpec(name, name, requested, model_dir, card, explicit)


def needs_memory(specs: Sequence[SystemSpec]) -> bool:
    """Whether any present system resolves (pgmr modes) or retrieves (rag modes) against the memory."""
    return any(not s.missing and (s.mode in PGMR_MODES or s.mode in RAG_MODES) for s in specs)


def load_generator(spec: SystemSpec, settings: ExperimentSettings) -> Generator:
    from pgmr.generators.trained import load_trained

    assert spec.model_dir is not None
    return load_trained(
        spec.model_dir,
        settings.device,
        num_beams=settings.num_beams,
        max_new_tokens=settings.max_new_tokens,
        copy_bias=settings.copy_bias,
        relation_copy_bias=settings.relation_copy_bias,
    )


# --- workspace: lazily loaded shared resources ------------------------------------------------------------


@lru_cache(maxsize=2)
def shared_encoder(name: str) -> Encoder:
    """One encoder per name and process: experiments run one after another in one process (the tests,
    a notebook) need not load the same model again each time."""
    from pgmr.memory import load_encoder

    return load_encoder(name)


class Workspace:
    """Settings plus the memory and catalog, each loaded once, on first use."""

    def __init__(self, settings: ExperimentSettings) -> None:
        self.settings = settings
        self.started = time.monotonic()
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")

    @property
    def out_dir(self) -> Path:
        return self.settings.out_dir

    @cached_property
    def memory(self) -> Memory:
        from pgmr.config import default_memory_dir
        from pgmr.memory import Memory, PgmrMemoryError, read_manifest

        path = self.settings.memory_dir or default_memory_dir()
        with status(f"loading the memory from {path}"):
            try:
                return Memory.load(path, encoder=shared_encoder(read_manifest(path).encoder))
            except PgmrMemoryError as exc:
                raise ExperimentError(str(exc)) from None

    @cached_property
    def catalog(self) -> LabelCatalog:
        from pgmr.kg.catalog import CatalogError, LabelCatalog

        with status("loading the label catalog"):
            try:
                return LabelCatalog.from_data_dir(self.settings.data_dir)
            except (CatalogError, FileNotFoundError) as exc:
                raise ExperimentError(f"cannot load the label catalog: {exc}") from None

    def resolver(self, memory: Memory | None = None, *, prior: Prior | None = None) -> Resolver:
        from pgmr.resolver import Resolver, ResolverConfig

        config = ResolverConfig(
            entity_threshold=self.settings.entity_threshold,
            relation_threshold=self.settings.relation_threshold,
            min_confidence=self.settings.min_confidence,
        )
        return Resolver(memory or self.memory, config, prior=prior)

    def load_test(self, name: str) -> list[QARecord]:
        """The first `limit` records of a named dataset."""
        from pgmr.datasets import DatasetError, load_named

        try:
            records = list(load_named(name, self.settings.data_dir).records)
        except DatasetError as exc:
            raise ExperimentError(str(exc)) from None
        return records[: self.settings.limit] if self.settings.limit else records

    def wall_seconds(self) -> float:
        return round(time.monotonic() - self.started, 1)


# --- progress ---------------------------------------------------------------------------------------------


@contextmanager
def progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr; yields `advance(k)`."""
    from pgmr.cli.common import progress_bar

    with progress_bar() as bar:
        task = bar.add_task(description, total=total)
        yield lambda k: bar.advance(task, k)


@contextmanager
def status(message: str) -> Iterator[None]:
    from pgmr.cli.common import console

    with console.status(message):
        yield


def note(message: str) -> None:
    from pgmr.cli.common import console

    console.print(message)


# --- generation, parsing, resolution ----------------------------------------------------------------------


def decoding_info(generator: Generator) -> dict[str, Any]:
    """How a seq2seq generator decoded (beam width, copy bias), for the record; {} for other generators."""
    if not hasattr(generator, "num_beams"):
        return {}
    return {
        "num_beams": generator.num_beams,
        "copy_bias": getattr(generator, "copy_bias", 0.0),
        "relation_copy_bias": getattr(generator, "relation_copy_bias", 0.0),
        "copy_close": getattr(generator, "copy_close", True),
        "relation_copy_close": getattr(generator, "relation_copy_close", True),
    }


def fmt_decoding(entry: Mapping[str, Any]) -> str:
    """ "greedy, copy bias 4" from an entry that recorded decoding_info; "" when it did not."""
    if "num_beams" not in entry:
        return ""
    beams = int(entry["num_beams"])
    text = "greedy" if beams == 1 else f"beam search ({beams})"
    entity, relation = entry.get("copy_bias") or 0.0, entry.get("relation_copy_bias") or 0.0
    if not entity and not relation:
        return f"{text}, no copy bias"
    return f"{text}, copy bias {entity:g} (entities) / {relation:g} (relations)"


def generate_outputs(
    generator: Generator,
    questions: Sequence[str],
    *,
    contexts: Sequence[str] | None = None,
    batch_size: int = 16,
    label: str = "generating",
) -> list[str]:
    """Raw outputs in question order, in chunks so that the bar moves."""
    outputs: list[str] = []
    chunk = batch_size * 4
    with progress(label, len(questions)) as advance:
        for start in range(0, len(questions), chunk):
            part = list(questions[start : start + chunk])
            ctx = list(contexts[start : start + chunk]) if contexts is not None else None
            outputs.extend(generator.generate(part, contexts=ctx, batch_size=batch_size))
            advance(len(part))
    return outputs


def rag_contexts(card: Mapping[str, Any], memory: Memory, questions: Sequence[str]) -> list[str]:
    """Candidate blocks retrieved with the settings the model was trained with (as `pgmr generate`)."""
    from pgmr.generators.rag import CandidateRetriever

    retriever = CandidateRetriever.from_settings(memory, card.get("data", {}).get("retriever"))
    # In chunks, for a progress bar (minutes for a test split on 2 cores); the retriever keeps the n-grams'
    # hits across calls, so chunking repeats no work.
    contexts: list[str] = []
    with progress(f"retrieving candidates for {len(questions)} questions", len(questions)) as advance:
        for start in range(0, len(questions), 512):
            part = list(questions[start : start + 512])
            contexts.extend(retriever.contexts(part))
            advance(len(part))
    return contexts


def parse_outputs(
    outputs: Sequence[str],
    questions: Sequence[str] | None = None,
    grounding: GroundingConfig | None = None,
    known: Known | None = None,
) -> list[IntermediateQuery | IntermediateQueryError]:
    """Parsed outputs; with `questions`, labels and literals are grounded in them as `pgmr generate --resolve`
    and `pgmr ask` do (pgmr.generators.grounding, the defaults unless `grounding` says otherwise), so
    experiments measure the shipped path."""
    from pgmr.generators.grounding import ground

    parsed: list[IntermediateQuery | IntermediateQueryError] = []
    for i, text in enumerate(outputs):
        try:
            query = parse(text)
        except IntermediateQueryError as exc:
            parsed.append(exc)
            continue
        parsed.append(ground(query, questions[i], grounding, known)[0] if questions is not None else query)
    return parsed


def resolve_parsed(
    resolver: Resolver,
    parsed: Sequence[IntermediateQuery | IntermediateQueryError],
    *,
    label: str = "resolving",
    chunk: int = 256,
) -> list[Resolution | Refusal | IntermediateQueryError]:
    """Each parsed query resolved (batched); parse errors pass through."""
    queries = [(i, q) for i, q in enumerate(parsed) if isinstance(q, IntermediateQuery)]
    results: list[Any] = list(parsed)
    with progress(label, len(queries)) as advance:
        for start in range(0, len(queries), chunk):
            part = queries[start : start + chunk]
            try:
                done: list[Any] = resolver.resolve_many([q for _, q in part])
            except IntermediateQueryError:
                # One query the resolver cannot fill must not cost the chunk (or the run's generated outputs):
                # resolved one by one, it alone ends as the error it raised.
                done = []
                for _, q in part:
                    try:
                        done.append(resolver.resolve(q))
                    except IntermediateQueryError as exc:
                        done.append(exc)
            for (i, _), result in zip(part, done, strict=True):
                results[i] = result
            advance(len(part))
    return results


def resolution_fields(result: Resolution | Refusal | IntermediateQueryError) -> dict[str, Any]:
    """What a prediction row records of its resolution: status, the final query or why there is none, and
    per placeholder the best candidate and its similarity (the full evidence would dwarf the row)."""
    from pgmr.resolver import Resolution

    if isinstance(result, IntermediateQueryError):
        return {
            "status": "invalid",
            "error": {
                "code": result.code,
                "message": result.message,
                "line": result.line,
                "column": result.column,
            },
        }
    best = {
        ev.placeholder.name: (
            {"id": ev.best.id, "label": ev.best.label, "similarity": ev.best.similarity} if ev.best else None
        )
        for ev in result.evidence
    }
    if isinstance(result, Resolution):
        return {"status": "resolved", "sparql": result.sparql, "mapping": result.mapping_dict(), "best": best}
    return {
        "status": "refused",
        "reason": result.reason,
        "unsupported": list(result.unsupported),
        "best": best,
    }


def min_entity_similarity(result: Resolution | Refusal | IntermediateQueryError) -> float | None:
    """The weakest entity placeholder's best similarity (what the entity threshold gates); 1.0 for a query
    without entity placeholders; None for an unparsable output."""
    if isinstance(result, IntermediateQueryError):
        return None
    sims = [
        ev.best.similarity if ev.best else -1.0 for ev in result.evidence if ev.placeholder.kind == "entity"
    ]
    return min(sims, default=1.0)


def base_rows(records: Sequence[QARecord], outputs: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {"id": r.id, "question": r.question, "prediction": o, "gold": r.sparql}
        for r, o in zip(records, outputs, strict=True)
    ]


def load_predictions(path: Path, records: Sequence[QARecord]) -> list[str]:
    """Raw outputs for `records` from a JSONL of {id, prediction} (e.g. an experiment's generated.jsonl or
    `pgmr generate` output). Raises ExperimentError when the file lacks one of the records."""
    from pgmr.jsonl import JsonlError

    try:
        by_id = {str(row.get("id")): row.get("prediction") for row in read_jsonl(path)}
    except (OSError, JsonlError) as exc:
        raise ExperimentError(f"cannot read predictions {path}: {exc}") from None
    missing = [r.id for r in records if not isinstance(by_id.get(r.id), str)]
    if missing:
        raise ExperimentError(
            f"{path} has no 'prediction' for {len(missing)} of the {len(records)} questions "
            f"(e.g. {', '.join(missing[:3])})"
        )
    return [by_id[r.id] for r in records]  # type: ignore[misc]


def gold_entities(records: Sequence[QARecord]) -> set[str]:
    from pgmr.evaluation.metrics import query_ids

    return {wid for r in records for wid in query_ids(r.sparql) if id_kind(wid) == "entity"}


def pgmr_outputs(
    ws: Workspace, records: Sequence[Any], predictions: Path | None
) -> tuple[list[str], dict[str, Any]]:
    """The pgmr model's raw outputs for `records`: read from `predictions`, else generated (once) with the
    pgmr model; written to <out>/generated.jsonl either way, for reuse with --predictions."""
    if predictions is not None:
        outputs = load_predictions(predictions, records)
        source: dict[str, Any] = {"predictions": str(predictions)}
    else:
        spec = system_spec("pgmr", ws.settings.models.get("pgmr"))
        if spec.missing:
            raise ExperimentError(
                f"no pgmr model at {spec.requested}; make it with `{spec.how_to_make}`, or pass --models "
                "pgmr=DIR or --predictions FILE"
            )
        started = time.monotonic()
        generator = load_generator(spec, ws.settings)
        outputs = generate_outputs(
            generator,
            [r.question for r in records],
            batch_size=ws.settings.batch_size,
            label="generating (pgmr)",
        )
        source = {
            **spec.describe(),
            "generation_seconds": round(time.monotonic() - started, 1),
            **decoding_info(generator),
        }
    write_rows(
        ws.out_dir / "generated.jsonl",
        [
            {"id": r.id, "question": r.question, "prediction": o}
            for r, o in zip(records, outputs, strict=True)
        ],
    )
    return outputs, source


# --- scoring ----------------------------------------------------------------------------------------------


def score(
    rows: Sequence[Mapping[str, Any]],
    gold: Sequence[QARecord],
    *,
    catalog: Collection[str] | None,
    store: Any = None,
    timeout: float | None = None,
    label: str = "scoring",
) -> EvaluationResult:
    from pgmr.evaluation.metrics import evaluate

    with progress(label, len(rows)) as advance:
        return evaluate(rows, gold, catalog=catalog, store=store, timeout=timeout, progress=advance)


def write_system(
    out_dir: Path,
    rows: Sequence[Mapping[str, Any]],
    result: EvaluationResult,
    *,
    command: str,
    inputs: Mapping[str, Any],
    title: str,
) -> None:
    """predictions.jsonl (scored rows), metrics.json and report.md of one system, as `pgmr eval` writes."""
    from pgmr.evaluation.report import write_outputs

    write_outputs(out_dir, rows, result, command=command, inputs=inputs, title=title)


def system_result(result: EvaluationResult, **extra: Any) -> dict[str, Any]:
    return {
        "status": "ok",
        **extra,
        "overall": dict(result.overall),
        "by_outcome": {k: dict(v) for k, v in result.by_outcome.items()},
    }


def predict(
    ws: Workspace,
    generator: Generator,
    mode: str,
    records: Sequence[QARecord],
    *,
    card: Mapping[str, Any] | None = None,
    resolver: Resolver | None = None,
    label: str = "",
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Prediction rows for `records` (pgmr modes resolved) and the seconds each step took."""
    questions = [r.question for r in records]
    timings: dict[str, float] = {}
    contexts = None
    if mode in RAG_MODES:
        started = time.monotonic()
        contexts = rag_contexts(card or {}, ws.memory, questions)
        timings["retrieval_seconds"] = round(time.monotonic() - started, 1)
    started = time.monotonic()
    outputs = generate_outputs(
        generator,
        questions,
        contexts=contexts,
        batch_size=ws.settings.batch_size,
        label=f"generating ({label or mode})",
    )
    timings["generation_seconds"] = round(time.monotonic() - started, 1)
    timings.update(decoding_info(generator))
    rows = base_rows(records, outputs)
    if mode in PGMR_MODES:
        started = time.monotonic()
        resolver = resolver or ws.resolver()
        results = resolve_parsed(
            resolver,
            parse_outputs(outputs, questions, known=resolver.knows),
            label=f"resolving ({label or mode})",
        )
        for row, result in zip(rows, results, strict=True):
            row.update(resolution_fields(result))
        timings["resolution_seconds"] = round(time.monotonic() - started, 1)
    return rows, timings


def run_system(
    ws: Workspace,
    spec: SystemSpec,
    records: Sequence[QARecord],
    *,
    experiment: str,
    dataset: str,
    resolver: Resolver | None = None,
    store: Any = None,
    timeout: float | None = None,
    catalog: Collection[str] | None = None,
) -> dict[str, Any]:
    """Generate, resolve (pgmr modes), score and write one system's outputs under out_dir/<name>/; a
    missing model gives its `missing` entry (with the train command) instead."""
    if spec.missing:
        note(
            f"[yellow]{spec.name}: no model at {spec.requested}; reported as missing "
            f"(make it with: {spec.how_to_make})[/yellow]"
        )
        return spec.describe()
    generator = load_generator(spec, ws.settings)
    rows, timings = predict(
        ws, generator, spec.mode, records, card=spec.card, resolver=resolver, label=spec.name
    )
    result = score(
        rows, records, catalog=catalog, store=store, timeout=timeout, label=f"scoring ({spec.name})"
    )
    write_system(
        ws.out_dir / spec.name,
        rows,
        result,
        command=ws.settings.command,
        inputs={"experiment": experiment, "system": spec.name, "model": str(spec.model_dir), "gold": dataset},
        title=f"{experiment}: {spec.name} on {dataset}",
    )
    return system_result(result, **spec.describe(), **timings)


# --- results kept from an earlier run ----------------------------------------------------------------------


def earlier_run(ws: Workspace, experiment: str, *, same: Mapping[str, Any]) -> dict[str, Any] | None:
    """The metrics document `--keep-from` names (a metrics.json or the directory holding one); None without
    `--keep-from`. It must be a run of `experiment` that scored the same questions the same way: each of
    `same` (dataset, question count...) must equal its settings, or its rows would not be comparable. Read
    before any generation, so a bad path costs nothing."""
    path = ws.settings.keep_from
    if path is None:
        return None
    file = path / "metrics.json" if path.is_dir() else path
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExperimentError(
            f"--keep-from {path}: cannot read an experiment's metrics.json ({exc})"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("systems"), dict):
        raise ExperimentError(f"--keep-from {file}: not an experiment's metrics.json (no systems)")
    if doc.get("experiment") != experiment:
        raise ExperimentError(
            f"--keep-from {file} is a run of {doc.get('experiment')!r}, not of {experiment!r}"
        )
    before = doc.get("settings") or {}
    for key, value in same.items():
        if before.get(key) != value:
            raise ExperimentError(
                f"--keep-from: the earlier run ({doc.get('started_at')}) has {key}={before.get(key)!r}, "
                f"this run {key}={value!r}; its rows would not be comparable"
            )
    return doc


def carry_over(
    systems: Mapping[str, dict[str, Any]], earlier: Mapping[str, Any] | None, *, add_missing: bool = False
) -> dict[str, dict[str, Any]]:
    """`systems` where each one this run could not evaluate (missing model, no chat server) but the earlier
    run did keeps the earlier result, marked `carried_from` with that run's time and command (the first run's,
    when it was itself carried). What this run evaluated is never replaced. With `add_missing`, systems the
    earlier run evaluated and this run did not try at all (an experiment run for some modes only) are kept
    too, first, in the earlier run's order."""
    if earlier is None:
        return dict(systems)
    before: Mapping[str, Any] = earlier.get("systems") or {}
    source = {"started_at": earlier.get("started_at"), "command": earlier.get("command")}
    names = [*(n for n in before if add_missing and n not in systems), *systems]
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        entry = systems.get(name, {"status": "not run"})
        old = before.get(name)
        if entry.get("status") != "ok" and isinstance(old, dict) and old.get("status") == "ok":
            out[name] = {**old, "carried_from": old.get("carried_from") or source}
            note(
                f"[yellow]{name}: not evaluated in this run; kept from the run of {source['started_at']}[/yellow]"
            )
        elif name in systems:
            out[name] = entry
    return out


# --- sub-memories -----------------------------------------------------------------------------------------


def sub_memory(
    memory: Memory,
    keep_entities: Collection[str] | None,
    *,
    keep_relations: Collection[str] | None = None,
    chunk: int = 50_000,
) -> Memory:
    """`memory` with only the entities in `keep_entities` and the relations in `keep_relations` (None keeps
    all of a kind), from the memory's own stored vectors: nothing is re-encoded. A reduced index is rebuilt
    flat (exact); vectors of an ivfpq memory are its PQ approximations."""
    from pgmr.memory import Memory

    dictionaries = dict(memory.manifest.dictionaries)
    reduced = {}
    for kind, keep in (("entity", keep_entities), ("relation", keep_relations)):
        source = memory.dictionary(kind)  # type: ignore[arg-type]
        if keep is None:
            reduced[kind] = source
            continue
        reduced[kind] = _sub_dictionary(source, set(keep), memory, chunk)
        dictionaries[kind] = replace(dictionaries[kind], ids=len(reduced[kind]), rows=len(reduced[kind].rows))
    manifest = replace(memory.manifest, dictionaries=dictionaries)
    return Memory(
        reduced["entity"], reduced["relation"], memory.encoder, manifest, prior_counts=memory.prior_counts
    )


def _sub_dictionary(source: Any, keep: set[str], memory: Memory, chunk: int) -> Any:
    from pgmr.memory import MemoryDictionary, create_index

    positions = np.array([i for i, row in enumerate(source.rows) if row.id in keep], dtype=np.int64)
    index = create_index("flat", memory.encoder.dimension)
    for start in range(0, len(positions), chunk):
        index.add(source.index.reconstruct(positions[start : start + chunk]))
    return MemoryDictionary(source.kind, [source.rows[i] for i in positions.tolist()], index, memory.encoder)


# --- outputs ----------------------------------------------------------------------------------------------


def metrics_document(
    ws: Workspace, name: str, title: str, *, settings: Mapping[str, Any], **payload: Any
) -> dict[str, Any]:
    return {
        "experiment": name,
        "title": title,
        "pgmr_version": __version__,
        "command": ws.settings.command,
        "started_at": ws.started_at,
        "wall_seconds": ws.wall_seconds(),
        "settings": {**ws.settings.to_json(), **settings},
        **payload,
    }


def write_experiment(ws: Workspace, doc: Mapping[str, Any], report: str) -> None:
    ws.out_dir.mkdir(parents=True, exist_ok=True)
    write_json(ws.out_dir / "metrics.json", doc)
    atomic_write_text(ws.out_dir / "report.md", report)


def write_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    write_jsonl(path, [dict(r) for r in rows])


def report_header(doc: Mapping[str, Any]) -> list[str]:
    limit = doc.get("settings", {}).get("limit")
    lines = [
        f"# {doc['title']}",
        "",
        f"Command: `{doc.get('command') or '(not recorded)'}`",
        "",
        f"Run {doc.get('started_at', '?')}, wall time {fmt_seconds(doc.get('wall_seconds'))}"
        + (f"; quick run on the first {limit} questions (`--limit {limit}`)" if limit else ""),
        "",
    ]
    return lines


# --- markdown ---------------------------------------------------------------------------------------------


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, left: Collection[int] = (0,)) -> str:
    """A markdown table; columns in `left` (by position) are left-aligned, the others (numbers) right."""

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "|".join("---" if i in left else "---:" for i in range(len(header))) + "|")
    lines.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def pct(value: Any, digits: int = 2) -> str:
    """A rate in [0, 1] as a percentage number (the paper's scale), '-' when absent."""
    return "-" if value is None else f"{100 * float(value):.{digits}f}"


def num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"


def millions(value: Any) -> str:
    return "?" if not value else f"{value / 1e6:.1f}M"


def fmt_seconds(value: Any) -> str:
    if value is None:
        return "?"
    seconds = float(value)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


# Columns of a systems table: (key in `overall`, header, kind).
SYSTEM_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("query_em", "Query EM", "rate"),
    ("sqm", "SQM", "rate"),
    ("bleu", "BLEU", "bleu"),
    ("uri_em", "URI EM", "rate"),
    ("hallucination_rate_catalog", "halluc. (unknown IDs)", "rate"),
    ("hallucination_rate_gold", "halluc. (IDs not in gold)", "rate"),
    ("valid_rate", "valid", "rate"),
    ("invalid_rate", "invalid", "rate"),
    ("refusal_rate", "refused", "rate"),
)


def systems_table(
    systems: Mapping[str, Mapping[str, Any]],
    *,
    paper: bool = True,
    extra: Sequence[tuple[str, str, str]] = (),
) -> str:
    """One row per system (and, with `paper`, the paper's row for its counterpart right under it)."""
    columns = (*SYSTEM_COLUMNS, *extra)
    header = ["system", "n", *(h for _, h, _ in columns)]
    rows: list[list[str]] = []
    for name, entry in systems.items():
        status_ = entry.get("status")
        if status_ != "ok":
            rows.append([name, "-", f"{status_} (see below)", *("" for _ in columns[1:])])
        else:
            overall = entry.get("overall", {})
            cells = [
                num(overall.get(key)) if kind == "bleu" else pct(overall.get(key)) for key, _, kind in columns
            ]
            rows.append([f"{name} ({run_label(entry)})", str(overall.get("n", "-")), *cells])
        counterpart = PAPER_COUNTERPART.get(name)
        if paper and counterpart:
            ref = PAPER_TABLE1[counterpart]
            cells = []
            for key, _, _ in columns:
                if key == "hallucination_rate_catalog":
                    cells.append(f"{ref['hallucination']:.2f}")
                elif key in ref:
                    cells.append(f"{ref[key]:.2f}")
                else:
                    cells.append("-")
            rows.append([f"{counterpart} (paper)", "-", *cells])
    return md_table(header, rows)


def run_label(entry: Mapping[str, Any]) -> str:
    """A row's label: 'this run', or 'run <when>' for a result kept from an earlier run."""
    carried = entry.get("carried_from")
    if not carried:
        return "this run"
    return f"run {str(carried.get('started_at') or '?')[:16].replace('T', ' ')}"


def system_notes(systems: Mapping[str, Mapping[str, Any]]) -> str:
    """Why a system has no numbers (the missing model and the command that makes it, or the note), and which
    rows were kept from an earlier run."""
    lines = []
    for name, entry in systems.items():
        carried = entry.get("carried_from")
        if carried:
            lines.append(
                f"- {name}: not re-run here; kept from the run of {carried.get('started_at')} "
                f"(`{carried.get('command') or 'command not recorded'}`)"
            )
        elif entry.get("status") == "missing":
            lines.append(
                f"- {name}: no model at `{entry.get('model')}`; make it with `{entry.get('train_command')}`"
            )
        elif entry.get("status") != "ok":
            lines.append(f"- {name}: {entry.get('status')}: {entry.get('note') or 'no details'}")
    return "\n".join(lines)


SYSTEMS_NOTE = (
    "Rates in percent; BLEU 0-100. `halluc. (unknown IDs)`: predicted IDs not in the label catalog (the memory "
    "files) over all predicted IDs, the counterpart of the paper's URI hallucination; `halluc. (IDs not in "
    "gold)`: predicted IDs absent from the gold query. Definitions: docs/metrics.md."
)
