"""The lcquad2-unknown-uri experiment's data: its options (the split and the training recipe, one for every
mode), the split built from converted LC-QuAD 2.0 train and test, and the resolver's prior and role facts,
counted from the split's training part only (the docstring of `pgmr.experiments.lcquad2_unknown_uri` says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgmr.experiments.common import ExperimentError, Workspace

NAME = "lcquad2-unknown-uri"
MODES_DEFAULT: tuple[str, ...] = ("pgmr", "direct")


@dataclass(frozen=True)
class UnknownUriOptions:
    """The split and the training recipe (one for every mode; the defaults are the lead's minilm runs)."""

    modes: tuple[str, ...] = MODES_DEFAULT
    test_share: float = 0.1
    test_size: int | None = None
    seed: int = 0
    train: bool = True
    train_limit: int | None = None  # first N records of the split's training part (quick runs)
    validation_share: float = 0.08
    max_description_words: int | None = 0
    preset: str = "minilm"
    vocab_size: int = 8000
    max_source_len: int = 64
    max_target_len: int = 160
    batch_size: int = 32
    learning_rate: float = 1e-3
    encoder_learning_rate: float | None = 1e-4
    warmup_steps: int = 300
    epochs: float = 5.0
    max_steps: int | None = None
    max_minutes: float | None = 60.0
    eval_steps: int = 400
    max_eval_examples: int = 300
    k_entities: int = 5
    k_relations: int = 5
    candidate_description_words: int | None = 8
    # RAG inputs carry the candidate block beside the question: at 64 tokens it would be cut to a few lines.
    rag_max_source_len: int = 256
    # Each training record's paraphrased question as a second example (pgmr.generators.examples.with_paraphrases)
    paraphrases: bool = False
    train_seed: int = 42
    bf16: bool = False
    anneal_to_budget: bool = False
    # A structured model trained on this split's training part (scripts/train_unknown_uri_structured.py): with
    # it, the row `pgmr-ensemble` is the shipped default's recipe on this split (the pgmr run's seq2seq model and
    # this model, a reranker fitted on the split's validation part).
    structured: Path | None = None
    # Further members of that ensemble, after the two (name, model dir), each trained on this split's training
    # part (e.g. scripts/train_unknown_uri_seq2seq.py), as the shipped default's members beyond the two are.
    extra_members: tuple[tuple[str, Path], ...] = ()
    # The ensemble's draft verifier, trained on drafts of this split's training part
    # (scripts/unknown_uri_verifier_drafts.py, then `pgmr train-verifier`): its run or model directory, copied
    # into the ensemble as the shipped default's `verifier/`. None: the ensemble has none.
    verifier: Path | None = None

    def __post_init__(self) -> None:
        if not self.modes:
            raise ValueError("at least one mode to train")
        unknown = [m for m in self.modes if m not in ("pgmr", "direct", "rag", "rag-pgmr")]
        if unknown:
            raise ValueError(f"unknown modes {unknown}")
        if not 0.0 < self.validation_share < 1.0:
            raise ValueError("validation_share must be in (0, 1)")
        names = [name for name, _ in self.extra_members]
        if self.extra_members and self.structured is None:
            raise ValueError("further ensemble members need the structured one (--structured) too")
        if self.verifier is not None and self.structured is None:
            raise ValueError(
                "the ensemble's verifier (--verifier) needs its structured member (--structured)"
            )
        taken = [n for n in names if n in ("seq2seq", "structured") or names.count(n) > 1 or not n.strip()]
        if taken:
            raise ValueError(
                f"member names must differ from each other and from seq2seq, structured: {taken}"
            )


def _convert(ws: Workspace, name: str) -> tuple[list[Any], dict[str, Any]]:
    from pgmr.conversion import ConversionSummary, convert_records
    from pgmr.datasets import DatasetError, load_named

    try:
        records = load_named(name, ws.settings.data_dir).records
    except DatasetError as exc:
        raise ExperimentError(str(exc)) from None
    summary = ConversionSummary()
    converted = []
    with ws.reporter.progress(f"converting {name}", len(records)) as advance:
        done = 0
        for record in convert_records(records, ws.catalog, summary):
            converted.append(record)
            if summary.records_in - done >= 500:
                advance(summary.records_in - done)
                done = summary.records_in
        advance(len(records) - done)
    info = summary.to_json()
    return converted, {k: info[k] for k in ("records_in", "converted", "skipped_total")}


def qa_record(record: Any) -> Any:
    from pgmr.datasets import QARecord

    return QARecord(record.id, record.question, record.sparql, record.source, meta=record.meta)


def unknown_uri_split(
    ws: Workspace, options: UnknownUriOptions
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The split (`pgmr.conversion.unknown_uri.build_split` over converted LC-QuAD 2.0 train and test, as
    `options` sets it) and the two conversion summaries; what `run` and scripts that train on the split share."""
    from pgmr.conversion.unknown_uri import build_split

    train_conv, train_info = _convert(ws, "lcquad2-train")
    test_conv, test_info = _convert(ws, "lcquad2-test")
    with ws.reporter.status("building the unknown-URI split"):
        try:
            split = build_split(
                train_conv,
                test_conv,
                test_size=options.test_size,
                test_share=options.test_share,
                seed=options.seed,
            )
        except ValueError as exc:
            raise ExperimentError(f"cannot build the unknown-URI split: {exc}") from None
    return split, train_info, test_info


def split_prior_and_facts(train_part: Sequence[Any], seed: int) -> tuple[Any, Any]:
    """The resolver's prominence prior and role facts of the split, from its training part only (the docstring of
    `pgmr.experiments.lcquad2_unknown_uri` says why); what `run` and scripts that resolve drafts of the split share."""
    from pgmr.resolver import Prior
    from pgmr.resolver.facts import TrainingFacts
    from pgmr.resolver.priors import counts_from_sparql

    prior = Prior(counts_from_sparql([r.sparql for r in train_part]))
    facts = TrainingFacts.from_sparql(
        (r.sparql for r in train_part), {"dataset": f"{NAME} split (seed {seed}), training part"}
    )
    return prior, facts


__all__ = [
    "MODES_DEFAULT",
    "NAME",
    "UnknownUriOptions",
    "qa_record",
    "split_prior_and_facts",
    "unknown_uri_split",
]
