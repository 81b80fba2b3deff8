"""Shared plumbing for the bench scripts: data, memory, batched resolution, output."""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pgmr.config import default_memory_dir, resolve_data_dir
from pgmr.conversion import ConversionSummary, ConvertedRecord, convert_records
from pgmr.datasets import QARecord, load_named
from pgmr.datasets.splits import split_train_validation
from pgmr.kg.catalog import LabelCatalog
from pgmr.memory import EmbeddingCache, Memory, default_cache_dir
from pgmr.query import IntermediateQuery
from pgmr.resolver import Refusal, Resolution, Resolver
from pgmr.resolver.priors import counts_from_sparql

console = Console()
RESULTS = Path(__file__).parent / "results"


def gold_records(split: str, data_dir: Path) -> list[QARecord]:
    """`test`, or `validation` (carved from LC-QuAD 2.0 train, for tuning)."""
    if split == "test":
        return list(load_named("lcquad2-test", data_dir).records)
    if split == "validation":
        return list(split_train_validation(load_named("lcquad2-train", data_dir).records)[1])
    raise SystemExit(f"unknown split {split!r}: use test or validation")


def converted_split(split: str, data_dir: Path, catalog: LabelCatalog) -> tuple[list[ConvertedRecord], dict]:
    """`test`, or `validation` (carved from LC-QuAD 2.0 train, for tuning)."""
    records = gold_records(split, data_dir)
    summary = ConversionSummary()
    return list(convert_records(records, catalog, summary)), summary.to_json()


def prior_counts_for(split: str, data_dir: Path) -> dict[str, int]:
    """Counts from the training side only: all of train for test, train minus validation for validation."""
    train = load_named("lcquad2-train", data_dir).records
    if split == "validation":
        train = split_train_validation(train)[0]
    return counts_from_sparql([r.sparql for r in train])


def setup(data_dir: str | None, memory_dir: str | None) -> tuple[Path, LabelCatalog, Memory]:
    path = resolve_data_dir(data_dir)
    catalog = LabelCatalog.from_data_dir(path)
    memory = Memory.load(memory_dir or default_memory_dir())
    return path, catalog, memory


def embedding_cache(memory_dir: str | None, memory: Memory) -> EmbeddingCache:
    """The embedding cache beside the memory, so sub-memories are built without re-encoding."""
    return EmbeddingCache(
        default_cache_dir(memory_dir or default_memory_dir()), memory.encoder.name, memory.encoder.dimension
    )


def resolve_all(
    resolver: Resolver, queries: Sequence[IntermediateQuery], batch: int = 512
) -> list[Resolution | Refusal]:
    results: list[Resolution | Refusal] = []
    for start in range(0, len(queries), batch):
        results.extend(resolver.resolve_many(queries[start : start + batch]))
    return results


def mappings(results: Sequence[Resolution | Refusal]) -> list[dict[str, str | None]]:
    return [r.mapping_dict() if isinstance(r, Resolution) else {} for r in results]  # type: ignore[misc]


def environment() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "when": time.strftime("%Y-%m-%d %H:%M"),
    }


def write_result(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(
        json.dumps({"bench": name, **environment(), **payload}, indent=2) + "\n", encoding="utf-8"
    )
    console.print(f"wrote {path}")
    return path


def use_generate(generator: Any) -> None:
    """Decode with transformers' generate instead of pgmr's greedy loop: every seq2seq generator in `generator`
    (itself, or an ensemble's members). How the default ran before pgmr's own greedy loop replaced it."""
    from pgmr.generators.ensemble import EnsembleGenerator
    from pgmr.generators.seq2seq.generator import Seq2SeqGenerator

    members = [m for _, m in generator.members] if isinstance(generator, EnsembleGenerator) else [generator]
    for member in members:
        if isinstance(member, Seq2SeqGenerator):
            member.own_loop = False


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    t = Table(title=title)
    for i, c in enumerate(columns):
        t.add_column(c, justify="left" if i == 0 else "right")
    for row in rows:
        t.add_row(*(f"{v:.2%}" if isinstance(v, float) else str(v) for v in row))
    return t


def chosen_outputs(
    ws: Any, records: Sequence[QARecord], split: str, work: Path, predictions: Path | None
) -> list[str]:
    """The shipped generator's outputs for `split`: the ensemble's choice among its drafts is made once (it takes
    minutes) and kept in WORK/chosen-SPLIT.json, which the benches that resolve the same outputs share."""
    from pgmr.experiments.outputs import pgmr_outputs

    chosen = work / f"chosen-{split}.json"
    if chosen.is_file() and predictions is None:
        return list(json.loads(chosen.read_text()))
    outputs, _ = pgmr_outputs(ws, records, predictions)
    chosen.write_text(json.dumps(outputs))
    return list(outputs)


def em_off_and_shipped(
    ws: Any, memory: Memory, records: Sequence[QARecord], outputs: Sequence[str], label: str
) -> tuple[dict[str, float], list[str]]:
    """`outputs` resolved through `memory`, refusal off and at the shipped threshold: Query EM and the share
    refused for each (`query_em_off`, `refused_shipped`, ...), and the final queries with refusal off."""
    from pgmr.experiments.common import prediction_rows, score
    from pgmr.experiments.predict import answer_outputs
    from pgmr.resolver.support import shipped_threshold

    questions = [r.question for r in records]
    row: dict[str, float] = {}
    finals: list[str] = []
    for threshold in (0.0, shipped_threshold()):
        stages = ws.stages(min_confidence=threshold)
        answered = answer_outputs(Resolver(memory, stages.resolver), stages, questions, outputs, label=label)
        evaluation = score(prediction_rows(records, outputs, answered), records, catalog=None)
        key = "off" if threshold == 0.0 else "shipped"
        row[f"query_em_{key}"] = evaluation.overall["query_em"]
        row[f"refused_{key}"] = sum(r.outcome == "refused" for r in evaluation.records) / len(records)
        if threshold == 0.0:
            finals = [r.predicted_sparql or "" for r in evaluation.records]
    return row, finals


def reranked_em(
    memory: Memory, records: Sequence[QARecord], drafts: Sequence[Sequence[Any]], reranker: Any, config: Any
) -> tuple[float, list[str]]:
    """Each question's drafts chosen by `reranker` and resolved with `config` (a ResolverConfig) as the pipeline
    does: Query EM over `records`, and the final queries ("" where refused or unresolved)."""
    from pgmr.evaluation.metrics import query_exact_match
    from pgmr.pipeline import StageConfig
    from pgmr.pipeline.rerank import prepare_drafts
    from pgmr.pipeline.stages import finish_all

    stages = StageConfig(resolver=config)
    questions = [r.question for r in records]
    prepared = prepare_drafts(questions, drafts, "pgmr", Resolver(memory, config), stages.grounding, reranker)
    results = finish_all(prepared, stages)
    finals = [r.sparql if r.status == "resolved" and r.sparql else "" for r in results]
    right = sum(bool(s) and query_exact_match(s, rec.sparql) for s, rec in zip(finals, records, strict=True))
    return right / len(records), finals


def draft_sets(specs: Sequence[str], data_dir: Path) -> list[tuple[str, list[QARecord], list[Any]]]:
    """`SET=DRAFTS.jsonl` arguments read: each set's name, gold records and every question's drafts (as
    `pgmr generate ENSEMBLE SET` writes them)."""
    from pgmr.experiments.outputs import load_drafts

    found = []
    for spec in specs:
        name, _, path = spec.partition("=")
        records = list(load_named(name, data_dir).records)
        found.append((name, records, load_drafts(Path(path), records)))
    return found
