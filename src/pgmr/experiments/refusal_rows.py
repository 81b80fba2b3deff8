"""What the refusal's support models are fitted on (pgmr.experiments.refusal_fit, `pgmr experiment
fit-refusal --predictions`): every draft of a predictions file resolved, without refusal, against the full
memory and against the entity-removed and relation-removed memories (pgmr.experiments.unanswerable), one row per
draft and memory with each placeholder's signals and whether its best candidate is a gold ID; and the names the
shipped generator was trained to write (the `named_absent` signal, `--write-names`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgmr.experiments.common import ExperimentError

DATASET = "lcquad2-validation"


def collect(
    predictions: Path,
    data_dir: Path,
    memory_dir: Path | None,
    seed: int,
    verifier_dir: Path | None = None,
    *,
    note: Callable[[str], None] = lambda _: None,
) -> list[dict[str, Any]]:
    """Every draft of `predictions` (each member's, for an ensemble's drafts file; else the one prediction)
    resolved against the full and the two reduced memories: one row per draft and memory, with its source.
    With `verifier_dir` (a draft verifier, pgmr.generators.verifier), each row also has the verifier's logit
    for the resolved draft (`verifier`; None when it did not resolve): a question-level signal to measure.
    `note` hears what each reduced memory removed."""
    from pgmr.config import default_memory_dir
    from pgmr.datasets import load_named
    from pgmr.evaluation.metrics import query_exact_match
    from pgmr.experiments.common import load_drafts, parse_outputs, resolve_parsed, shared_encoder
    from pgmr.experiments.unanswerable import VARIANTS, build_set, placeholder_rows
    from pgmr.memory import Memory, read_manifest
    from pgmr.query import IntermediateQueryError
    from pgmr.resolver import Resolution, Resolver

    records = list(load_named(DATASET, data_dir).records)
    drafts = {
        r.id: {d.source: d.text for d in ds}
        for r, ds in zip(records, load_drafts(predictions, records), strict=True)
    }
    sources = list(dict.fromkeys(source for texts in drafts.values() for source in texts))
    lacking = [qid for qid, texts in drafts.items() if set(texts) != set(sources)]
    if lacking:
        raise ExperimentError(
            f"{predictions}: not every question has a draft of each of {sources} (e.g. {lacking[0]})"
        )
    path = memory_dir or default_memory_dir()
    full = Memory.load(path, encoder=shared_encoder(read_manifest(path).encoder))
    sets: list[tuple[str, Any, list[Any], list[bool] | None]] = [("full", full, records, None)]
    for variant in VARIANTS:
        s = build_set(variant, records, full, seed)
        note(f"{variant}: {s.summary()}")
        sets.append((variant, s.memory, list(s.records), list(s.answerable)))
    verifier = verbalize = None
    if verifier_dir is not None:
        from pgmr.generators.verifier import Verifier, memory_describer

        verifier = Verifier.load(verifier_dir)
        # The full memory's labels: a reduced memory resolves to a subset of its rows, labelled the same.
        verbalize = verifier.describe_with(memory_describer(full))
    rows: list[dict[str, Any]] = []
    for source in sources:
        for name, memory, recs, answerable in sets:
            resolver = Resolver(memory)
            questions = [r.question for r in recs]
            outputs = [drafts[r.id][source] for r in recs]
            parsed = parse_outputs(outputs, questions, known=resolver.knows)
            results = resolve_parsed(resolver, parsed, questions, label=f"resolving {source} ({name})")
            placeholders = placeholder_rows(results, recs, answerable)
            logits: dict[int, float] = {}
            if verifier is not None and verbalize is not None:
                texts = {
                    i: verbalize(res.sparql) for i, res in enumerate(results) if isinstance(res, Resolution)
                }
                scored = [i for i, t in texts.items() if t is not None]
                found = verifier.score([questions[i] for i in scored], [texts[i] or "" for i in scored])
                logits = dict(zip(scored, found, strict=True))
            for i, (result, record) in enumerate(zip(results, recs, strict=True)):
                em = isinstance(result, Resolution) and query_exact_match(result.sparql, record.sparql)
                mine = [p for p in placeholders if p["question"] == i]
                rows.append(
                    {
                        "set": name,
                        "id": record.id,
                        "source": source,
                        "parsed": not isinstance(result, IntermediateQueryError),
                        "answerable": True if answerable is None else answerable[i],
                        "query_em": bool(em),
                        "placeholders": [{k: p[k] for k in ("kind", "correct", "features")} for p in mine],
                        **({"verifier": logits.get(i)} if verifier is not None else {}),
                    }
                )
    return rows


def training_names(data_dir: Path) -> tuple[dict[str, frozenset[str]], dict[str, Any]]:
    """The names the shipped generator was trained to write: every placeholder label of its training targets
    (LC-QuAD 2.0 train without the validation carve, converted as `pgmr train` converts it), normalized; and
    their provenance (without the command, which the caller knows)."""
    from pgmr.conversion import ConversionSummary, convert_records
    from pgmr.datasets import load_named
    from pgmr.datasets.splits import split_train_validation
    from pgmr.kg.catalog import LabelCatalog
    from pgmr.query import parse
    from pgmr.resolver.ranking import normalize_label

    train, _ = split_train_validation(load_named("lcquad2-train", data_dir).records)
    names: dict[str, set[str]] = {"entity": set(), "relation": set()}
    summary = ConversionSummary()
    for record in convert_records(train, LabelCatalog.from_data_dir(data_dir), summary):
        for placeholder in parse(record.intermediate).placeholders:
            names[placeholder.kind].add(normalize_label(placeholder.label))
    provenance = {
        "what": "normalized placeholder labels of the training targets of the shipped generator",
        "dataset": "lcquad2-train without the validation carve (pgmr.datasets.splits)",
        "records": summary.converted,
    }
    return {kind: frozenset(v) for kind, v in names.items()}, provenance


__all__ = ["DATASET", "collect", "training_names"]
