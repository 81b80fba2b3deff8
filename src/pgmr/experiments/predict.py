"""Prediction rows: the systems' outputs generated, then (pgmr modes) checked, parsed, grounded and resolved
by the pipeline's stages (pgmr.pipeline.stages) with `pgmr ask`'s settings, so an experiment measures what a
user gets. Direct and RAG outputs are the query itself: their rows keep the raw output, which `pgmr eval`
scores through the same SPARQL gate.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pgmr.datasets import QARecord
from pgmr.experiments.reporting import QUIET, Reporter
from pgmr.experiments.systems import decoding_info
from pgmr.generators.base import PGMR_MODES, RAG_MODES, Generator
from pgmr.generators.ensemble import Draft, generate_drafts
from pgmr.kg.ids import id_kind
from pgmr.pipeline import AskResult, StageConfig
from pgmr.pipeline.rerank import Reranker, prepare_drafts, reranker_of
from pgmr.pipeline.stages import finish_all, parse_output
from pgmr.pipeline.stages import resolve as resolve_stage
from pgmr.query import IntermediateQuery, IntermediateQueryError
from pgmr.resolver.grounding import GroundingConfig, Known, ground

if TYPE_CHECKING:
    from pgmr.experiments.workspace import Workspace
    from pgmr.memory import Memory
    from pgmr.resolver import Refusal, Resolution, Resolver

# Queries resolved per batch (and per step of the progress bar).
RESOLVE_CHUNK = 256


def generate_draft_lists(
    generator: Generator,
    questions: Sequence[str],
    *,
    contexts: Sequence[str] | None = None,
    batch_size: int = 16,
    label: str = "generating",
    reporter: Reporter = QUIET,
) -> list[tuple[Draft, ...]]:
    """Every question's drafts (one, or an ensemble's members'), in chunks so that the bar moves."""
    drafts: list[tuple[Draft, ...]] = []
    chunk = batch_size * 4
    with reporter.progress(label, len(questions)) as advance:
        for start in range(0, len(questions), chunk):
            part = list(questions[start : start + chunk])
            ctx = list(contexts[start : start + chunk]) if contexts is not None else None
            drafts.extend(generate_drafts(generator, part, contexts=ctx, batch_size=batch_size))
            advance(len(part))
    return drafts


def rag_contexts(
    card: Mapping[str, Any], memory: Memory, questions: Sequence[str], reporter: Reporter = QUIET
) -> list[str]:
    """Candidate blocks retrieved with the settings the model was trained with (as `pgmr generate`)."""
    from pgmr.generators.rag import CandidateRetriever

    retriever = CandidateRetriever.from_settings(memory, card.get("data", {}).get("retriever"))
    # In chunks, for a progress bar (minutes for a test split on 2 cores); the retriever keeps the n-grams'
    # hits across calls, so chunking repeats no work.
    contexts: list[str] = []
    with reporter.progress(
        f"retrieving candidates for {len(questions)} questions", len(questions)
    ) as advance:
        for start in range(0, len(questions), 512):
            part = list(questions[start : start + 512])
            contexts.extend(retriever.contexts(part))
            advance(len(part))
    return contexts


def answer_outputs(
    resolver: Resolver,
    stages: StageConfig,
    questions: Sequence[str | None],
    outputs: Sequence[str],
    *,
    mode: str = "pgmr",
    label: str = "resolving",
    reporter: Reporter = QUIET,
) -> list[AskResult]:
    """Model outputs through the pipeline's stages, without a store (the scorer executes the final queries
    itself): one AskResult per output, status resolved, refused or invalid."""
    return answer_drafts(
        resolver,
        stages,
        questions,
        [(Draft("model", o),) for o in outputs],
        None,
        mode=mode,
        label=label,
        reporter=reporter,
    )


def answer_drafts(
    resolver: Resolver,
    stages: StageConfig,
    questions: Sequence[str | None],
    drafts: Sequence[Sequence[Draft]],
    reranker: Reranker | None,
    *,
    mode: str = "pgmr",
    label: str = "resolving",
    reporter: Reporter = QUIET,
) -> list[AskResult]:
    """`answer_outputs` for drafts: each question's drafts resolved and the reranker's choice kept (its text is
    the result's `intermediate`)."""
    total = sum(len(d) for d in drafts)
    with reporter.progress(label, total) as advance:
        done = [0]

        def counted(n: int) -> None:
            done[0] += n
            advance(n)

        prepared = prepare_drafts(
            questions,
            drafts,
            mode,
            resolver,
            stages.grounding,
            reranker,
            chunk=RESOLVE_CHUNK,
            advance=counted,
        )
        advance(total - done[0])  # drafts that did not parse were never resolved: the bar still ends full
    return finish_all(prepared, stages)


def prediction_rows(
    records: Sequence[QARecord], outputs: Sequence[str], results: Sequence[AskResult] | None = None
) -> list[dict[str, Any]]:
    """{id, question, prediction, gold} per record, with the verdict's fields (`AskResult.to_row`)."""
    rows = base_rows(records, outputs)
    for row, result in zip(rows, results or (), strict=results is not None):
        row.update(result.to_row())
    return rows


def base_rows(records: Sequence[QARecord], outputs: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {"id": r.id, "question": r.question, "prediction": o, "gold": r.sparql}
        for r, o in zip(records, outputs, strict=True)
    ]


def verdicts(results: Sequence[AskResult]) -> list[Resolution | Refusal | None]:
    """The resolver's verdict of each result (None: the output did not parse)."""
    return [r.verdict for r in results]


def parses(output: str) -> bool:
    try:
        parse_output(output, "pgmr")
    except IntermediateQueryError:
        return False
    return True


# -- the stages one at a time, for scripts and benches that study one of them ----------------------------------


def parse_outputs(
    outputs: Sequence[str],
    questions: Sequence[str] | None = None,
    grounding: GroundingConfig | None = None,
    known: Known | None = None,
) -> list[IntermediateQuery | IntermediateQueryError]:
    """Parsed outputs (the check and parse stages); with `questions`, labels and literals grounded in them
    (the defaults unless `grounding` says otherwise)."""
    parsed: list[IntermediateQuery | IntermediateQueryError] = []
    for i, text in enumerate(outputs):
        try:
            query = parse_output(text, "pgmr")
        except IntermediateQueryError as exc:
            parsed.append(exc)
            continue
        assert isinstance(query, IntermediateQuery)
        parsed.append(ground(query, questions[i], grounding, known)[0] if questions is not None else query)
    return parsed


def resolve_parsed(
    resolver: Resolver,
    parsed: Sequence[IntermediateQuery | IntermediateQueryError],
    questions: Sequence[str | None] | None = None,
    *,
    label: str = "resolving",
    chunk: int = RESOLVE_CHUNK,
    reporter: Reporter = QUIET,
) -> list[Resolution | Refusal | IntermediateQueryError]:
    """Each parsed query resolved (the resolve stage), with its question where given (as the pipeline
    resolves them); parse errors pass through."""
    queries = [(i, q) for i, q in enumerate(parsed) if isinstance(q, IntermediateQuery)]
    results: list[Any] = list(parsed)
    with reporter.progress(label, len(queries)) as advance:
        done = resolve_stage(
            resolver,
            [q for _, q in queries],
            questions=[questions[i] for i, _ in queries] if questions is not None else None,
            chunk=chunk,
            advance=advance,
        )
    for (i, _), result in zip(queries, done, strict=True):
        results[i] = result
    return results


def resolution_fields(result: Resolution | Refusal | IntermediateQueryError) -> dict[str, Any]:
    """A verdict as the fields of a prediction row (the same as `AskResult.to_row`)."""
    from pgmr.pipeline import AskError, PlaceholderView
    from pgmr.resolver import Resolution

    if isinstance(result, IntermediateQueryError):
        return AskResult(None, "invalid", "pgmr", None, error=AskError.of(result)).to_row()
    if isinstance(result, Resolution):
        views = tuple(
            PlaceholderView.of(e, result.mapping_dict().get(e.placeholder.name)) for e in result.evidence
        )
        return AskResult(
            None, "resolved", "pgmr", None, placeholders=views, sparql=result.sparql, mapping=result.mapping
        ).to_row()
    views = tuple(PlaceholderView.of(e, None) for e in result.evidence)
    return AskResult(
        None,
        "refused",
        "pgmr",
        None,
        placeholders=views,
        reason=result.reason,
        unsupported=result.unsupported,
    ).to_row()


def min_entity_similarity(result: Resolution | Refusal | IntermediateQueryError) -> float | None:
    """The weakest entity placeholder's best similarity (what the entity threshold gates); 1.0 for a query
    without entity placeholders; None for an unparsable output."""
    if isinstance(result, IntermediateQueryError):
        return None
    sims = [
        ev.best.similarity if ev.best else -1.0 for ev in result.evidence if ev.placeholder.kind == "entity"
    ]
    return min(sims, default=1.0)


def gold_entities(records: Sequence[QARecord]) -> set[str]:
    from pgmr.evaluation.metrics import query_ids

    return {wid for r in records for wid in query_ids(r.sparql) if id_kind(wid) == "entity"}


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
        contexts = rag_contexts(card or {}, ws.memory, questions, ws.reporter)
        timings["retrieval_seconds"] = round(time.monotonic() - started, 1)
    started = time.monotonic()
    drafts = generate_draft_lists(
        generator,
        questions,
        contexts=contexts,
        batch_size=ws.settings.batch_size,
        label=f"generating ({label or mode})",
        reporter=ws.reporter,
    )
    timings["generation_seconds"] = round(time.monotonic() - started, 1)
    timings.update(decoding_info(generator))
    if mode not in PGMR_MODES:
        return base_rows(records, [d[0].text for d in drafts]), timings
    started = time.monotonic()
    results = answer_drafts(
        resolver or ws.resolver(),
        ws.stages(),
        questions,
        drafts,
        reranker_of(generator),
        mode=mode,
        label=f"resolving ({label or mode})",
        reporter=ws.reporter,
    )
    timings["resolution_seconds"] = round(time.monotonic() - started, 1)
    return prediction_rows(records, chosen_texts(results, drafts), results), timings


def chosen_texts(results: Sequence[AskResult], drafts: Sequence[Sequence[Draft]]) -> list[str]:
    """The model output behind each result: the chosen draft's (one draft: the model's output itself)."""
    return [
        r.intermediate if r.drafts and r.intermediate is not None else d[0].text
        for r, d in zip(results, drafts, strict=True)
    ]


__all__ = [
    "RESOLVE_CHUNK",
    "answer_drafts",
    "answer_outputs",
    "base_rows",
    "generate_draft_lists",
    "gold_entities",
    "min_entity_similarity",
    "parse_outputs",
    "parses",
    "predict",
    "prediction_rows",
    "rag_contexts",
    "resolution_fields",
    "resolve_parsed",
    "verdicts",
]
