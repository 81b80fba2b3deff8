"""The stages of one question's way, as functions every entry point calls (`Pipeline` composes them for
`pgmr ask` and `pgmr serve`; `pgmr generate --resolve`, `pgmr resolve`, the demo and the experiments call
`prepare` and `finish` directly), so the final SPARQL does not depend on the way in:

    check (read-only) -> parse (the gate) -> ground (labels and literals in the question)
        -> resolve (memory, thresholds, refusal) -> KG choice among the top candidates (with a store)
        -> execute (read-only, with a timeout) -> answers with labels

Generation is not a stage here: each entry point batches it its own way (the service's batcher, the
experiments' chunks with a progress bar). Bad model output and failing stores never raise: every outcome is
an `AskResult` with a status.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pgmr.conversion import fill
from pgmr.generators.base import PGMR_MODES
from pgmr.pipeline.config import StageConfig
from pgmr.pipeline.labels import LabelSource, answers
from pgmr.pipeline.results import AskError, AskResult, DraftScore, PlaceholderView
from pgmr.query import IntermediateQuery, IntermediateQueryError, parse
from pgmr.query.errors import ReadOnlyQueryError
from pgmr.query.gate import check_query
from pgmr.query.sparql import with_prefixes
from pgmr.resolver import Refusal, Resolution, Resolver
from pgmr.resolver.grounding import GroundingConfig, ground
from pgmr.resolver.kg_choice import Probe, choose, has_result, should_probe

if TYPE_CHECKING:
    from pgmr.stores import QueryResult, SparqlStore

# Where the mapping block of an intermediate query starts (as in the parser): the first `name =` line.
_MAPPING_START = re.compile(r"^\s*[A-Za-z_]\w*\s*=(?!=)", re.MULTILINE)
# Progress of a long stage: called with how many more items are done.
Advance = Callable[[int], None]


@dataclass
class Timer:
    """One question's time per stage, in the order the stages first ran. A stage that runs again for the
    question (once per draft of an ensemble) adds to its entry, so each stage is listed once."""

    stages: list[tuple[str, float]] = field(default_factory=list)

    def add(self, stage: str, started: float) -> float:
        now = time.perf_counter()
        self.add_seconds(stage, now - started)
        return now

    def add_seconds(self, stage: str, seconds: float) -> None:
        for n, (name, earlier) in enumerate(self.stages):
            if name == stage:
                self.stages[n] = (stage, earlier + seconds)
                return
        self.stages.append((stage, seconds))


@dataclass
class Prepared:
    """A question between the model's stages and the store's: a final result (invalid, refused), a
    resolution, or direct SPARQL (direct and RAG modes)."""

    question: str | None
    text: str
    mode: str
    timer: Timer
    result: AskResult | None = None
    query: IntermediateQuery | None = None  # parsed and grounded (pgmr modes)
    resolution: Resolution | None = None
    sparql: str | None = None
    grounded: tuple[tuple[str, str, str], ...] = ()
    drafts: tuple[DraftScore, ...] = ()  # set by pgmr.pipeline.rerank when this was chosen among drafts
    # The other resolved drafts, best scored first, by source: tried in turn when this one's query finds
    # nothing on the store (see `finish`).
    alternatives: tuple[tuple[str, Prepared], ...] = ()
    # Every other draft that parsed, refused ones too, in the same order: where more candidate queries come
    # from (pgmr.pipeline.alternatives).
    others: tuple[tuple[str, Prepared], ...] = ()


# -- check and parse -------------------------------------------------------------------------------------------


def check(text: str) -> None:
    """Raise ReadOnlyQueryError when the SPARQL part of a text is an UPDATE (checked before anything parses
    it); a text that does not parse passes, since the parser's message is the better one."""
    from pgmr.stores import ReadOnlyError, StoreError, ensure_read_only

    if not isinstance(text, str):  # not text at all (a JSONL field of another type): the parser says so
        return
    match = _MAPPING_START.search(text)
    body = text[: match.start()] if match else text
    try:
        ensure_read_only(with_prefixes(body))
    except ReadOnlyError as exc:
        raise ReadOnlyQueryError(str(exc)) from None
    except (StoreError, IntermediateQueryError, ValueError):
        return


def parse_output(text: str, mode: str) -> IntermediateQuery | str:
    """A model output checked and parsed: the intermediate query (pgmr modes), or the SPARQL with its prefixes
    declared (direct and RAG modes: the output is the query, IDs and all). Raises IntermediateQueryError."""
    check(text)
    if mode in PGMR_MODES:
        return parse(text)
    check_query(text)
    return with_prefixes(text)


# -- resolve ---------------------------------------------------------------------------------------------------


def resolve(
    resolver: Resolver,
    queries: Sequence[IntermediateQuery],
    *,
    questions: Sequence[str | None] | None = None,
    chunk: int | None = None,
    advance: Advance | None = None,
    lock: AbstractContextManager[Any] | None = None,
) -> list[Resolution | Refusal | IntermediateQueryError]:
    """Each query resolved (with its question, where given: support reads it), `chunk` at a time (None: all in
    one batch). A query the resolver cannot fill must not cost its batch: the batch is then resolved one by one
    and that query alone ends as its error."""
    results: list[Resolution | Refusal | IntermediateQueryError] = []
    asked = list(questions) if questions is not None else [None] * len(queries)
    if len(asked) != len(queries):
        raise ValueError(f"{len(queries)} queries but {len(asked)} questions")
    size = chunk or max(1, len(queries))
    for start in range(0, len(queries), size):
        part = queries[start : start + size]
        part_questions = asked[start : start + size]
        with lock or nullcontext():
            try:
                results.extend(resolver.resolve_many(part, part_questions))
            except IntermediateQueryError:
                for query, question in zip(part, part_questions, strict=True):
                    try:
                        results.append(resolver.resolve(query, question))
                    except IntermediateQueryError as exc:
                        results.append(exc)
        if advance is not None:
            advance(len(part))
    return results


def prepare(
    questions: Sequence[str | None],
    texts: Sequence[str],
    mode: str,
    resolver: Resolver,
    grounding: GroundingConfig,
    *,
    timers: Sequence[Timer] | None = None,
    chunk: int | None = None,
    advance: Advance | None = None,
    lock: AbstractContextManager[Any] | None = None,
) -> list[Prepared]:
    """Check, parse, ground (where there is a question) and resolve model outputs; `lock` is held while the
    resolver works (its encoder and lazily built lexicons are not thread safe)."""
    items = [
        Prepared(q, t, mode, timer)
        for q, t, timer in zip(questions, texts, timers or [Timer() for _ in texts], strict=True)
    ]
    parsed: list[Prepared] = []
    for item in items:
        started = time.perf_counter()
        try:
            outcome = parse_output(item.text, mode)
        except IntermediateQueryError as exc:
            item.timer.add("parse", started)
            item.result = invalid(item, AskError.of(exc))
            continue
        if isinstance(outcome, str):
            item.sparql = outcome
            item.timer.add("parse", started)
            continue
        query = outcome
        if item.question:
            query, snaps = ground(query, item.question, grounding, resolver.knows)
            item.grounded = tuple((s.placeholder, s.generated, s.grounded) for s in snaps)
        item.query = query
        item.timer.add("parse", started)
        parsed.append(item)
    if parsed:
        started = time.perf_counter()
        verdicts = resolve(
            resolver,
            [i.query for i in parsed],  # type: ignore[misc]
            questions=[i.question for i in parsed],
            chunk=chunk,
            advance=advance,
            lock=lock,
        )
        seconds = time.perf_counter() - started
        # One call for the batch: each question spent its whole time once, however many of its drafts were in it.
        for timer in {id(i.timer): i.timer for i in parsed}.values():
            timer.add_seconds("resolve", seconds)
        for item, verdict in zip(parsed, verdicts, strict=True):
            if isinstance(verdict, IntermediateQueryError):
                item.result = invalid(item, AskError.of(verdict))
            elif isinstance(verdict, Refusal):
                item.result = AskResult(
                    item.question,
                    "refused",
                    mode,
                    item.text,
                    placeholders=tuple(PlaceholderView.of(e, None) for e in verdict.evidence),
                    reason=verdict.reason,
                    unsupported=verdict.unsupported,
                    timings=tuple(item.timer.stages),
                    verdict=verdict,
                )
            else:
                item.resolution = verdict
    return items


def invalid(item: Prepared, error: AskError) -> AskResult:
    return AskResult(
        item.question,
        "invalid",
        item.mode,
        item.text,
        error=error,
        reason=error.message,
        timings=tuple(item.timer.stages),
    )


# -- KG choice, execution, labels ------------------------------------------------------------------------------


def execute(store: SparqlStore, sparql: str, timeout: float) -> QueryResult | AskError:
    """One query on the store; every store failure is a named error, never an exception."""
    from pgmr.stores import (
        QuerySyntaxError,
        ReadOnlyError,
        ServiceRefusedError,
        StoreBadResponse,
        StoreError,
        StoreTimeout,
        StoreUnavailable,
    )

    try:
        return store.query(sparql, timeout=timeout)
    except ReadOnlyError as exc:
        return AskError("read_only", str(exc))
    except StoreTimeout as exc:
        return AskError("timeout", str(exc))
    except (StoreUnavailable, StoreBadResponse, ServiceRefusedError) as exc:
        return AskError(exc.code, str(exc))
    except QuerySyntaxError as exc:
        return AskError("store_syntax", str(exc))
    except StoreError as exc:
        return AskError("store", str(exc))


def finish(
    item: Prepared,
    config: StageConfig,
    *,
    store: SparqlStore | None = None,
    labels: LabelSource | None = None,
    run: bool = True,
) -> AskResult:
    """The store part (with a store and `run`): the KG choice or one query, then labels. Without a store the
    result of a resolved query has status "resolved"."""
    result = _finish(item, config, store if run else None, labels)
    if item.grounded:
        result = replace(result, grounded=item.grounded)
    if item.drafts:
        result = replace(result, drafts=item.drafts)
    if result.status == "empty" and store is not None and run and config.kg.enabled:
        # The KG check across drafts, as across candidates within one: a query that finds nothing on the store
        # is evidence against its draft, so the next best draft with an answer takes its place.
        for source, other in item.alternatives:
            found = _finish(other, config, store, labels)
            if found.status == "answered":
                drafts = tuple(replace(d, chosen=d.source == source) for d in item.drafts)
                return replace(found, drafts=drafts, grounded=other.grounded or found.grounded)
    return result


def finish_all(items: Sequence[Prepared], config: StageConfig) -> list[AskResult]:
    """Results without a store (what `pgmr generate --resolve`, `pgmr resolve` and the experiments record)."""
    return [finish(item, config) for item in items]


def _finish(
    item: Prepared, config: StageConfig, store: SparqlStore | None, labels: LabelSource | None
) -> AskResult:
    if item.result is not None:  # a batcher may have added its wait since the result was made
        return replace(item.result, timings=tuple(item.timer.stages))
    if item.resolution is not None:
        return _after_resolution(item, item.resolution, config, store, labels)
    assert item.sparql is not None
    started = time.perf_counter()
    outcome = None
    if store is not None:
        outcome = execute(store, item.sparql, config.timeout)
        item.timer.add("execute", started)
    result = AskResult(item.question, "resolved", item.mode, item.text, sparql=item.sparql, choice="top")
    return _with_outcome(result, outcome, item.timer, labels, config.max_answers)


def _after_resolution(
    item: Prepared,
    resolution: Resolution,
    config: StageConfig,
    store: SparqlStore | None,
    labels: LabelSource | None,
) -> AskResult:
    timer = item.timer
    mapping, sparql, choice = resolution.mapping_dict(), resolution.sparql, "top"
    probes: tuple[Probe, ...] = ()
    outcome: QueryResult | AskError | None = None
    if store is not None:
        started = time.perf_counter()
        if should_probe(resolution, config.kg):
            picked = choose(resolution, lambda q: execute(store, q, config.timeout), config.kg)
            mapping, choice, probes, outcome = picked.mapping, picked.choice, picked.probes, picked.outcome
            sparql = fill(resolution.query, mapping, namespaces=dict(resolution.prefixes))
            timer.add("kg_check", started)
        else:
            outcome = execute(store, sparql, config.timeout)
            timer.add("execute", started)
    placeholders = tuple(PlaceholderView.of(e, mapping.get(e.placeholder.name)) for e in resolution.evidence)
    result = AskResult(
        item.question,
        "resolved",
        item.mode,
        item.text,
        placeholders=placeholders,
        sparql=sparql,
        mapping=tuple(mapping.items()),
        choice=choice,
        probes=probes,
        notes=resolution.notes,
        verdict=resolution,
    )
    return _with_outcome(result, outcome, timer, labels, config.max_answers)


def _with_outcome(
    result: AskResult,
    outcome: QueryResult | AskError | None,
    timer: Timer,
    labels: LabelSource | None,
    max_answers: int,
) -> AskResult:
    if outcome is None:
        return replace(result, timings=tuple(timer.stages))
    if isinstance(outcome, AskError):
        # The query itself is refused (an update, a federated call): the model's fault, not the store's.
        status = "invalid" if outcome.code in ("read_only", "service_refused") else "error"
        return replace(
            result, status=status, error=outcome, reason=outcome.message, timings=tuple(timer.stages)
        )
    assert labels is not None, "a store's answers need a label source"
    started = time.perf_counter()
    found = answers(outcome, labels)
    timer.add("labels", started)
    return replace(
        result,
        status="answered" if has_result(outcome) or outcome.kind == "boolean" else "empty",
        answers=tuple(found[:max_answers]),
        answer_count=len(found),
        boolean=outcome.boolean if outcome.kind == "boolean" else None,
        timings=tuple(timer.stages),
    )


__all__ = [
    "Advance",
    "Prepared",
    "Timer",
    "check",
    "execute",
    "finish",
    "finish_all",
    "invalid",
    "parse_output",
    "prepare",
    "resolve",
]
