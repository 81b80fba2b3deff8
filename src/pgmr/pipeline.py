"""The ask pipeline: question -> intermediate query -> resolved SPARQL -> answers, keeping each step's evidence.

    generate (Generator seam) -> parse (the gate) -> resolve (memory, thresholds, refusal)
        -> KG-aware choice among the top candidates (optional) -> execute (read-only, with a timeout)
        -> answers with labels

`Pipeline.ask` never raises for bad model output or a failing store: every outcome is an `AskResult` with a
status (see `STATUSES`). Bad settings raise `ValueError` when the config is built; missing files raise
`PipelineError` from `Pipeline.load`.

KG-aware resolution (beyond the paper): the resolver ranks candidates by their support in the memory alone, so
a homonym with a stronger prior can win although the KG holds no fact about it. With a store and `kg_check` on,
the combinations of the top-k supported candidates are tried best total score first, and the first one whose
query has a result is kept (within `max_probes` queries). What counts as a result (`has_result`):

- SELECT: at least one bound value, except one row holding a single zero (what COUNT gives over nothing);
- CONSTRUCT/DESCRIBE: at least one triple;
- ASK queries are NOT probed: `false` is a legitimate answer to a yes/no question, and keeping the first
  combination that makes it `true` would bias every such question towards "yes". The top combination is used.

When no probe has a result, the top combination is kept (its result, empty or an error, is the answer).
"""

from __future__ import annotations

import heapq
import math
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pgmr.conversion import fill
from pgmr.generators.base import PGMR_MODES, RAG_MODES, Generator
from pgmr.generators.grounding import GroundingConfig, ground
from pgmr.kg.ids import iri_to_prefixed
from pgmr.query import IntermediateQuery, IntermediateQueryError, parse
from pgmr.query.gate import check_query
from pgmr.query.lexer import tokenize
from pgmr.query.sparql import with_prefixes
from pgmr.resolver import PlaceholderEvidence, Refusal, Resolution, Resolver, ResolverConfig
from pgmr.resolver.support import shipped_threshold

if TYPE_CHECKING:
    from pgmr.memory import Memory, MemoryHit
    from pgmr.stores import QueryResult, SparqlStore, Term

# answered: executed, with a result (ASK: either value); empty: executed, no result; resolved: every ID found
# but no store to run it on; refused: a placeholder lacks support in the memory; invalid: the model output is
# not a (read-only) query; error: the store failed (timeout, unreachable).
STATUSES: tuple[str, ...] = ("answered", "empty", "resolved", "refused", "invalid", "error")

# Where the mapping block of an intermediate query starts (as in the parser): the first `name =` line.
_MAPPING_START = re.compile(r"^\s*[A-Za-z_]\w*\s*=(?!=)", re.MULTILINE)
_FORMS = frozenset({"SELECT", "ASK", "CONSTRUCT", "DESCRIBE"})


class PipelineError(RuntimeError):
    """A pipeline that cannot be built (missing model, memory or store); the message says what to do."""


class LabelSource(Protocol):
    """ID -> an object with `.label` and `.description` (a CatalogEntry, a MemoryRow), or None."""

    def get(self, wikidata_id: str) -> Any: ...


class MemoryLabels:
    """Labels from the memory's own rows, for when no label catalog is given (they come from the same files)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def get(self, wikidata_id: str) -> Any:
        from pgmr.kg.ids import id_kind

        return self.memory.dictionary(id_kind(wikidata_id)).get(wikidata_id)


@dataclass(frozen=True)
class PipelineConfig:
    """Settings of one pipeline; validated here, at construction.

    `model_dir` None: `pgmr.generators.default_model_dir()`; `memory_dir` None: `pgmr.config.default_memory_dir()`;
    `store` None: nothing is executed (status "resolved"); `data_dir`: where the label catalog for answers is
    read (None: the memory's labels).
    """

    model_dir: Path | None = None
    memory_dir: Path | None = None
    store: str | None = None
    data_dir: Path | None = None
    k: int = 5
    # Similarity gates (off by default): a best candidate less similar than this is refused.
    entity_threshold: float = 0.0
    relation_threshold: float = 0.0
    # The refusal threshold: a placeholder whose support (pgmr.resolver.support: the estimated probability that
    # the memory holds what it names) is below it is refused. Default: the threshold chosen on LC-QuAD 2.0 validation
    # (src/pgmr/resolver/calibration.json); 0 turns refusal off.
    min_confidence: float = field(default_factory=shipped_threshold)
    kg_check: bool = True
    max_probes: int = 8
    timeout: float = 10.0
    max_answers: int = 100
    # Questions generated together when several wait for the model (the service under load).
    max_batch: int = 16
    device: str = "cpu"
    # Check every memory file's sha256 at load (~10 s for the full memory): on for the service, off for one-shot asks.
    verify_memory: bool = True
    num_beams: int | None = None
    max_new_tokens: int | None = None
    # Entity labels are snapped to the question span at least this similar before resolution
    # (pgmr.generators.grounding; 1 turns it off). 0.5 was chosen on LC-QuAD 2.0 validation.
    grounding: float = 0.5
    # Numbers and quoted words of the skeleton that are not in the question snap to its closest one
    # (pgmr.generators.grounding.ground_literals).
    literal_grounding: bool = True
    # Score bonus for copying question spans into entity labels while decoding
    # (pgmr.generators.seq2seq.copying); None: the generator's default, 0 turns it off.
    copy_bias: float | None = None
    relation_copy_bias: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.grounding <= 1.0:
            raise ValueError(f"grounding must be in [0, 1], got {self.grounding}")
        for name in ("copy_bias", "relation_copy_bias"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 100.0:
                raise ValueError(f"{name} must be in [0, 100], got {value}")
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        for name in ("entity_threshold", "relation_threshold"):
            value = getattr(self, name)
            if not -1.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a similarity in [-1, 1], got {value}")
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be a probability in [0, 1], got {self.min_confidence}")
        if self.max_probes < 1:
            raise ValueError(f"max_probes must be at least 1, got {self.max_probes}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        if self.max_answers < 1:
            raise ValueError(f"max_answers must be at least 1, got {self.max_answers}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {self.max_batch}")

    def resolver_config(self) -> ResolverConfig:
        return ResolverConfig(
            k=self.k,
            entity_threshold=self.entity_threshold,
            relation_threshold=self.relation_threshold,
            search_k=max(50, self.k),
            min_confidence=self.min_confidence,
        )

    def to_json(self) -> dict[str, Any]:
        return {key: str(value) if isinstance(value, Path) else value for key, value in asdict(self).items()}


# -- what an answer looks like ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CandidateView:
    id: str
    label: str
    description: str | None
    score: float
    similarity: float


@dataclass(frozen=True)
class PlaceholderView:
    """One placeholder: what the generator wrote, the memory's candidates, and the ID chosen (None: refused)."""

    name: str
    kind: str
    label: str
    description: str
    threshold: float
    supported: bool
    candidates: tuple[CandidateView, ...]
    chosen: str | None
    # The estimated probability that the memory holds what the placeholder names (None: no support model for the kind), the
    # refusal threshold it is compared with, and why it was rejected ("" when it was not).
    confidence: float | None = None
    min_confidence: float = 0.0
    rejected: str = ""

    @classmethod
    def of(cls, evidence: PlaceholderEvidence, chosen: str | None) -> PlaceholderView:
        p = evidence.placeholder
        return cls(
            name=p.name,
            kind=p.kind,
            label=p.label,
            description=p.description,
            threshold=evidence.threshold,
            supported=evidence.supported,
            candidates=tuple(
                CandidateView(c.id, c.label, c.description, c.score, c.similarity)
                for c in evidence.candidates
            ),
            chosen=chosen,
            confidence=evidence.confidence,
            min_confidence=evidence.min_confidence,
            rejected="" if evidence.supported else evidence.why_unsupported(),
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["candidates"] = [asdict(c) for c in self.candidates]
        return data


@dataclass(frozen=True)
class Answer:
    """One bound value of a result row. `id`/`label`/`description` for Wikidata IRIs the catalog knows."""

    value: str
    kind: str
    variable: str | None = None
    id: str | None = None
    label: str | None = None
    description: str | None = None
    datatype: str | None = None
    language: str | None = None


@dataclass(frozen=True)
class Probe:
    """One query run while choosing among candidate combinations: `count` of result values, or `error`."""

    mapping: tuple[tuple[str, str], ...]
    score: float
    count: int | None
    has_result: bool
    seconds: float
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "mapping": dict(self.mapping),
            "score": self.score,
            "count": self.count,
            "has_result": self.has_result,
            "seconds": self.seconds,
            "error": self.error,
        }


@dataclass(frozen=True)
class AskError:
    """Why a result has no answer: `code` is stable (a parser error code, read_only, timeout, unavailable...)."""

    code: str
    message: str
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True)
class AskResult:
    question: str | None
    status: str
    mode: str
    intermediate: str | None
    placeholders: tuple[PlaceholderView, ...] = ()
    sparql: str | None = None
    mapping: tuple[tuple[str, str], ...] = ()
    answers: tuple[Answer, ...] = ()
    answer_count: int = 0
    boolean: bool | None = None
    reason: str | None = None
    unsupported: tuple[str, ...] = ()
    error: AskError | None = None
    # How the mapping was chosen: "top" (the resolver's best), "kg" (a lower-ranked combination with results),
    # "fallback" (no probe had a result: the top one), "" when nothing was resolved.
    choice: str = ""
    probes: tuple[Probe, ...] = ()
    timings: tuple[tuple[str, float], ...] = ()
    # Labels and literals snapped to the question before resolution: (placeholder or "literal", generated,
    # grounded).
    grounded: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "status": self.status,
            "mode": self.mode,
            "intermediate": self.intermediate,
            "placeholders": [p.to_json() for p in self.placeholders],
            "sparql": self.sparql,
            "mapping": dict(self.mapping),
            "answers": [asdict(a) for a in self.answers],
            "answer_count": self.answer_count,
            "boolean": self.boolean,
            "reason": self.reason,
            "unsupported": list(self.unsupported),
            "error": asdict(self.error) if self.error else None,
            "choice": self.choice,
            "probes": [p.to_json() for p in self.probes],
            "timings": {stage: round(seconds, 6) for stage, seconds in self.timings},
            "grounded": [{"placeholder": p, "generated": g, "grounded": t} for p, g, t in self.grounded],
        }


# -- pieces ----------------------------------------------------------------------------------------------------


def query_form(sparql: str) -> str:
    """SELECT, ASK, CONSTRUCT or DESCRIBE: the first query-form keyword (after any PREFIX/BASE)."""
    for tok in tokenize(sparql):
        if tok.kind == "keyword" and tok.text.upper() in _FORMS:
            return tok.text.upper()
    return "SELECT"


def _is_zero(term: Term) -> bool:
    try:
        return term.kind == "literal" and float(term.value) == 0.0
    except ValueError:
        return False


def has_result(result: QueryResult) -> bool:
    """The module docstring's rule: ASK true; a triple; a bound value that is not COUNT's lone zero."""
    if result.kind == "boolean":
        return bool(result.boolean)
    values = result.values()
    if not values:
        return False
    return not (len(result.rows) == 1 and len(values) == 1 and _is_zero(values[0]))


def _result_count(result: QueryResult) -> int:
    return int(bool(result.boolean)) if result.kind == "boolean" else len(result.values())


def ranked_combinations(scores: Sequence[Sequence[float]]) -> Iterator[tuple[int, ...]]:
    """Index tuples into per-slot candidate lists (each sorted best first), by decreasing total score.

    Lazy best-first search over the product (a heap of frontier tuples), so asking for the first few of
    5^6 combinations costs a few heap operations, not the whole product. Ties go to the lower index tuple.
    """
    if any(not s for s in scores):
        return
    start = tuple(0 for _ in scores)

    def total(index: tuple[int, ...]) -> float:
        return math.fsum(s[i] for s, i in zip(scores, index, strict=True))

    heap = [(-total(start), start)]
    seen = {start}
    while heap:
        _, index = heapq.heappop(heap)
        yield index
        for slot in range(len(index)):
            if index[slot] + 1 < len(scores[slot]):
                nxt = (*index[:slot], index[slot] + 1, *index[slot + 1 :])
                if nxt not in seen:
                    seen.add(nxt)
                    heapq.heappush(heap, (-total(nxt), nxt))


def _read_only_violation(text: str) -> str | None:
    """The refusal message when the SPARQL part of a text is an UPDATE (checked before anything parses it)."""
    from pgmr.stores import ReadOnlyError, StoreError, ensure_read_only

    match = _MAPPING_START.search(text)
    body = text[: match.start()] if match else text
    try:
        ensure_read_only(with_prefixes(body))
    except ReadOnlyError as exc:
        return str(exc)
    except (StoreError, IntermediateQueryError, ValueError):
        return None  # not parsable: the parser's message is the better one
    return None


def _error_of(exc: IntermediateQueryError) -> AskError:
    return AskError(exc.code, exc.message, exc.line, exc.column)


@dataclass
class _Timer:
    stages: list[tuple[str, float]] = field(default_factory=list)

    def add(self, stage: str, started: float) -> float:
        now = time.perf_counter()
        self.stages.append((stage, now - started))
        return now


@dataclass
class _Pending:
    """A question between the model stage and the store stage: a final result, a resolution, or direct SPARQL."""

    question: str | None
    text: str
    mode: str
    timer: _Timer
    result: AskResult | None = None
    resolution: Resolution | None = None
    sparql: str | None = None
    grounded: tuple[tuple[str, str, str], ...] = ()


class _Batcher:
    """One worker thread runs the model stage for whatever questions are waiting, `max_batch` at a time.

    Under load the queue fills while a batch runs, so the next batch is larger and no time is spent waiting
    for one to fill; a lone question is run at once.
    """

    def __init__(self, run: Callable[[list[str]], list[_Pending]], max_batch: int) -> None:
        self._run = run
        self._max = max_batch
        self._queue: queue.SimpleQueue[tuple[str, float, Future[_Pending]] | None] = queue.SimpleQueue()
        self._closed = False
        self.batches = 0  # how many batches ran, and the largest: the service's /health reports them
        self.largest = 0
        self._thread = threading.Thread(target=self._loop, name="pgmr-model", daemon=True)
        self._thread.start()

    def submit(self, question: str) -> Future[_Pending]:
        if self._closed:
            raise PipelineError("the pipeline is closed")
        future: Future[_Pending] = Future()
        self._queue.put((question, time.perf_counter(), future))
        return future

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            while len(batch) < self._max:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(more)
            self.batches += 1
            self.largest = max(self.largest, len(batch))
            started = time.perf_counter()
            try:
                done = self._run([question for question, _, _ in batch])
            except BaseException as exc:  # handed to every waiting caller, who re-raises it
                for _, _, future in batch:
                    future.set_exception(exc)
                continue
            for (_, queued, future), pending in zip(batch, done, strict=True):
                pending.timer.stages.insert(0, ("wait", started - queued))
                future.set_result(pending)

    def close(self) -> None:
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout=60)
        while True:  # callers still waiting (submitted after the stop marker) get an error, not a hang
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item[2].set_exception(PipelineError("the pipeline is closed"))


# -- the pipeline ----------------------------------------------------------------------------------------------


class Pipeline:
    """Generator + memory (+ store) with their locks. Thread safe: the generator and the resolver (encoder,
    lazily built lexicons) run behind one lock; store queries run outside it (stores are thread safe)."""

    def __init__(
        self,
        generator: Generator | None,
        memory: Memory,
        *,
        store: SparqlStore | None = None,
        labels: LabelSource | None = None,
        config: PipelineConfig | None = None,
    ) -> None:
        self.config = config or PipelineConfig()
        self.generator = generator
        self.memory = memory
        self.store = store
        self.labels: LabelSource = labels or MemoryLabels(memory)
        self.resolver = Resolver(memory, self.config.resolver_config())
        self.model_dir: Path | None = None  # set by `load`
        self._lock = threading.RLock()
        self._batcher: _Batcher | None = None
        self._closed = False
        self.owns_store = False  # `load` opened the store, so `close` closes it
        self._retriever = None
        if generator is not None and generator.mode in RAG_MODES:
            from pgmr.generators.rag import CandidateRetriever

            self._retriever = CandidateRetriever.from_settings(
                memory, getattr(generator, "card", {}).get("data", {}).get("retriever")
            )

    @property
    def mode(self) -> str:
        return self.generator.mode if self.generator is not None else "pgmr"

    @classmethod
    def load(cls, config: PipelineConfig) -> Pipeline:
        """Load the generator, memory, label catalog and store named by the config (each once).

        Every path is checked before anything slow is loaded, so a missing piece fails at once.
        """
        from pgmr.generators import default_model_dir
        from pgmr.generators.seq2seq.card import ModelCardError, resolve_model_dir
        from pgmr.memory import Memory, PgmrMemoryError

        try:
            model_dir = resolve_model_dir(config.model_dir or default_model_dir())
        except (FileNotFoundError, ModelCardError) as exc:
            raise PipelineError(str(exc)) from None
        memory_dir = _memory_dir(config.memory_dir)
        store = open_configured_store(config)
        try:
            from pgmr.generators.trained import load_trained

            try:
                generator = load_trained(
                    model_dir,
                    config.device,
                    num_beams=config.num_beams,
                    max_new_tokens=config.max_new_tokens,
                    copy_bias=config.copy_bias,
                    relation_copy_bias=config.relation_copy_bias,
                )
            except (ModelCardError, OSError) as exc:
                raise PipelineError(f"cannot load the generator from {model_dir}: {exc}") from None
            try:
                memory = Memory.load(memory_dir, verify=config.verify_memory)
            except PgmrMemoryError as exc:
                raise PipelineError(str(exc)) from None
            labels: LabelSource | None = None
            if config.data_dir is not None:
                from pgmr.kg.catalog import CatalogError, LabelCatalog

                try:
                    labels = LabelCatalog.from_data_dir(config.data_dir)
                except CatalogError as exc:
                    raise PipelineError(f"cannot read the label catalog: {exc}") from None
        except BaseException:
            if store is not None:
                store.close()
            raise
        pipeline = cls(generator, memory, store=store, labels=labels, config=config)
        pipeline.model_dir = model_dir
        pipeline.owns_store = store is not None
        # The resolver builds its label lexicons on first use (~2 s for the full memory): not on a first request.
        for kind in ("entity", "relation"):
            pipeline.resolver.lexicon(kind)  # type: ignore[arg-type]
        return pipeline

    def close(self) -> None:
        with self._lock:
            self._closed = True
            batcher, self._batcher = self._batcher, None
        if batcher is not None:
            batcher.close()
        if self.store is not None and self.owns_store:
            self.store.close()

    # -- entry points ------------------------------------------------------------------------------------------

    def ask(self, question: str) -> AskResult:
        """One question. Safe to call from many threads at once: questions that arrive while the model is busy
        are generated and resolved together in the next batch (up to `config.max_batch`), then each runs on
        the store in its caller's thread."""
        if self.generator is None:
            raise PipelineError("this pipeline has no generator; use resolve_text")
        batcher = self._batcher
        if batcher is None:
            with self._lock:
                if self._closed:
                    raise PipelineError("the pipeline is closed")
                if self._batcher is None:
                    self._batcher = _Batcher(self._model_stage, self.config.max_batch)
                batcher = self._batcher
        return self._complete(batcher.submit(question).result())

    def ask_many(self, questions: Sequence[str], *, batch_size: int = 16) -> list[AskResult]:
        """Generation and resolution batched over all the questions; execution one by one."""
        if isinstance(questions, str):
            raise TypeError("ask_many takes a sequence of questions, not one string")
        if self.generator is None:
            raise PipelineError("this pipeline has no generator; use resolve_text")
        return [self._complete(p) for p in self._model_stage(questions, batch_size=batch_size)]

    def resolve_text(self, text: str, *, question: str | None = None, execute: bool = True) -> AskResult:
        """From an intermediate query written by hand (or by a model elsewhere): the same steps as `ask`."""
        return self._complete(self._prepare([question], [text], [_Timer()], "pgmr")[0], execute=execute)

    def search(self, text: str, kind: str, k: int = 5) -> list[MemoryHit]:
        if kind not in ("entity", "relation"):
            raise ValueError("kind must be entity or relation")
        with self._lock:
            return self.memory.dictionary(kind).search([text], k=k)[0]  # type: ignore[arg-type]

    # -- steps -------------------------------------------------------------------------------------------------

    def _model_stage(self, questions: Sequence[str], *, batch_size: int = 16) -> list[_Pending]:
        """Generate, parse and resolve (everything that needs the model or the encoder), behind the lock."""
        assert self.generator is not None
        questions = [" ".join(q.split()) for q in questions]
        with self._lock:
            started = time.perf_counter()
            contexts = self._retriever.contexts(questions) if self._retriever is not None else None
            texts = self.generator.generate(questions, contexts=contexts, batch_size=batch_size)
            # Each question spent the whole batch's time in generation.
            seconds = time.perf_counter() - started
            timers = [_Timer([("generate", seconds)]) for _ in questions]
            return self._prepare(questions, texts, timers, self.mode)

    def _prepare(
        self, questions: Sequence[str | None], texts: Sequence[str], timers: Sequence[_Timer], mode: str
    ) -> list[_Pending]:
        pending = [_Pending(q, t, mode, timer) for q, t, timer in zip(questions, texts, timers, strict=True)]
        grounding = GroundingConfig(self.config.grounding, literals=self.config.literal_grounding)
        parsed: list[tuple[_Pending, IntermediateQuery]] = []
        for item in pending:
            started = time.perf_counter()
            violation = _read_only_violation(item.text)
            if violation is not None:
                item.timer.add("parse", started)
                item.result = self._invalid(item, AskError("read_only", violation))
                continue
            if mode not in PGMR_MODES:  # direct and RAG modes: the model output is the query, IDs and all
                try:
                    check_query(item.text)
                except IntermediateQueryError as exc:
                    item.timer.add("parse", started)
                    item.result = self._invalid(item, _error_of(exc))
                    continue
                item.sparql = with_prefixes(item.text)
                item.timer.add("parse", started)
                continue
            try:
                query = parse(item.text)
            except IntermediateQueryError as exc:
                item.timer.add("parse", started)
                item.result = self._invalid(item, _error_of(exc))
                continue
            if item.question:
                query, snaps = ground(query, item.question, grounding, self.resolver.knows)
                item.grounded = tuple((s.placeholder, s.generated, s.grounded) for s in snaps)
            item.timer.add("parse", started)
            parsed.append((item, query))
        if parsed:
            started = time.perf_counter()
            with self._lock:
                resolutions = self.resolver.resolve_many([q for _, q in parsed])
            seconds = time.perf_counter() - started
            for (item, _), resolution in zip(parsed, resolutions, strict=True):
                item.timer.stages.append(("resolve", seconds))
                if isinstance(resolution, Refusal):
                    item.result = AskResult(
                        item.question,
                        "refused",
                        mode,
                        item.text,
                        placeholders=tuple(PlaceholderView.of(e, None) for e in resolution.evidence),
                        reason=resolution.reason,
                        unsupported=resolution.unsupported,
                        timings=tuple(item.timer.stages),
                    )
                else:
                    item.resolution = resolution
        return pending

    def _complete(self, item: _Pending, *, execute: bool = True) -> AskResult:
        """The store part (outside the lock): probes or one query, then labels."""
        result = self._complete_item(item, execute=execute)
        return replace(result, grounded=item.grounded) if item.grounded else result

    def _complete_item(self, item: _Pending, *, execute: bool = True) -> AskResult:
        if item.result is not None:  # the batcher may have added its wait since the result was made
            return replace(item.result, timings=tuple(item.timer.stages))
        if item.resolution is not None:
            return self._after_resolution(item, item.resolution, execute)
        assert item.sparql is not None
        started = time.perf_counter()
        outcome = None
        if self.store is not None and execute:
            outcome = self._execute(item.sparql)
            item.timer.add("execute", started)
        result = AskResult(item.question, "resolved", item.mode, item.text, sparql=item.sparql, choice="top")
        return self._with_outcome(result, outcome, item.timer)

    def _invalid(self, item: _Pending, error: AskError) -> AskResult:
        return AskResult(
            item.question,
            "invalid",
            item.mode,
            item.text,
            error=error,
            reason=error.message,
            timings=tuple(item.timer.stages),
        )

    def _after_resolution(self, item: _Pending, resolution: Resolution, execute: bool) -> AskResult:
        timer = item.timer
        mapping, sparql, choice = resolution.mapping_dict(), resolution.sparql, "top"
        probes: tuple[Probe, ...] = ()
        outcome: QueryResult | AskError | None = None
        if self.store is not None and execute:
            started = time.perf_counter()
            if self.config.kg_check and query_form(resolution.query.skeleton) != "ASK":
                mapping, choice, probes, outcome = self._kg_choice(resolution)
                sparql = fill(resolution.query, mapping)
                timer.add("kg_check", started)
            else:
                outcome = self._execute(sparql)
                timer.add("execute", started)
        placeholders = tuple(
            PlaceholderView.of(e, mapping.get(e.placeholder.name)) for e in resolution.evidence
        )
        return self._with_outcome(
            AskResult(
                item.question,
                "resolved",
                item.mode,
                item.text,
                placeholders=placeholders,
                sparql=sparql,
                mapping=tuple(mapping.items()),
                choice=choice,
                probes=probes,
            ),
            outcome,
            timer,
        )

    def _kg_choice(
        self, resolution: Resolution
    ) -> tuple[dict[str, str], str, tuple[Probe, ...], QueryResult | AskError]:
        """Probe combinations of supported candidates, best total score first (see the module docstring)."""
        options = [[c for c in e.candidates if c.similarity >= e.threshold] for e in resolution.evidence]
        names = [e.placeholder.name for e in resolution.evidence]
        probes: list[Probe] = []
        top: tuple[dict[str, str], QueryResult | AskError] | None = None
        combos = ranked_combinations([[c.score for c in slot] for slot in options])
        for n, index in enumerate(combos):
            if n >= self.config.max_probes:
                break
            chosen = [slot[i] for slot, i in zip(options, index, strict=True)]
            mapping = {name: c.id for name, c in zip(names, chosen, strict=True)}
            started = time.perf_counter()
            outcome = self._execute(fill(resolution.query, mapping))
            seconds = time.perf_counter() - started
            score = round(math.fsum(c.score for c in chosen), 6)
            if isinstance(outcome, AskError):
                probes.append(Probe(tuple(mapping.items()), score, None, False, seconds, outcome.message))
            else:
                found = has_result(outcome)
                probes.append(Probe(tuple(mapping.items()), score, _result_count(outcome), found, seconds))
                if found:
                    return mapping, "top" if n == 0 else "kg", tuple(probes), outcome
            if top is None:
                top = (mapping, outcome)
        assert top is not None  # a Resolution has a supported best candidate for every placeholder
        return top[0], "fallback", tuple(probes), top[1]

    def _execute(self, sparql: str) -> QueryResult | AskError:
        from pgmr.stores import (
            QuerySyntaxError,
            ReadOnlyError,
            StoreBadResponse,
            StoreError,
            StoreTimeout,
            StoreUnavailable,
        )

        assert self.store is not None
        try:
            return self.store.query(sparql, timeout=self.config.timeout)
        except ReadOnlyError as exc:
            return AskError("read_only", str(exc))
        except StoreTimeout as exc:
            return AskError("timeout", str(exc))
        except (StoreUnavailable, StoreBadResponse) as exc:
            return AskError(exc.code, str(exc))
        except QuerySyntaxError as exc:
            return AskError("store_syntax", str(exc))
        except StoreError as exc:
            return AskError("store", str(exc))

    def _with_outcome(
        self, result: AskResult, outcome: QueryResult | AskError | None, timer: _Timer
    ) -> AskResult:
        if outcome is None:
            return replace(result, timings=tuple(timer.stages))
        if isinstance(outcome, AskError):
            status = "invalid" if outcome.code == "read_only" else "error"
            return replace(
                result, status=status, error=outcome, reason=outcome.message, timings=tuple(timer.stages)
            )
        started = time.perf_counter()
        answers = self._answers(outcome)
        timer.add("labels", started)
        return replace(
            result,
            status="answered" if has_result(outcome) or outcome.kind == "boolean" else "empty",
            answers=tuple(answers[: self.config.max_answers]),
            answer_count=len(answers),
            boolean=outcome.boolean if outcome.kind == "boolean" else None,
            timings=tuple(timer.stages),
        )

    def _answers(self, result: QueryResult) -> list[Answer]:
        answers: list[Answer] = []
        for row in result.rows:
            names = result.variables if result.variables else tuple(row)
            for name in names:
                term = row.get(name)
                if term is not None:
                    answers.append(self._answer(term, name))
        return answers

    def _answer(self, term: Term, variable: str) -> Answer:
        wid = label = description = None
        if term.kind == "iri":
            prefixed = iri_to_prefixed(term.value)
            if prefixed is not None:
                wid = prefixed[1]
                entry = self.labels.get(wid)
                if entry is not None:
                    label, description = entry.label, entry.description
        return Answer(term.value, term.kind, variable, wid, label, description, term.datatype, term.language)


def _memory_dir(memory_dir: Path | None) -> Path:
    from pgmr.config import default_memory_dir

    path = Path(memory_dir) if memory_dir else default_memory_dir()
    if not (path / "manifest.json").is_file():
        raise PipelineError(f"no memory at {path}; build it with `pgmr memory build` (or pass --memory DIR)")
    return path


def open_configured_store(config: PipelineConfig) -> SparqlStore | None:
    if config.store is None:
        return None
    from pgmr.stores import StoreError, open_store

    try:
        return open_store(config.store, timeout=config.timeout)
    except (StoreError, OSError, ValueError) as exc:
        raise PipelineError(f"cannot open the store {config.store}: {exc}") from None


__all__ = [
    "STATUSES",
    "Answer",
    "AskError",
    "AskResult",
    "CandidateView",
    "LabelSource",
    "MemoryLabels",
    "Pipeline",
    "PipelineConfig",
    "PipelineError",
    "PlaceholderView",
    "Probe",
    "has_result",
    "query_form",
    "ranked_combinations",
]
