"""`Pipeline`: the loaded parts (generator, memory, store, labels) behind their locks, composing the stages
(pgmr.pipeline.stages) for `pgmr ask` and `pgmr serve`.

`Pipeline.ask` never raises for bad model output or a failing store: every outcome is an `AskResult` with a
status. Bad settings raise `ValueError` when the config is built; missing files raise `PipelineError` from
`Pipeline.load`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pgmr.generators.base import RAG_MODES, Generator
from pgmr.generators.ensemble import generate_drafts
from pgmr.pipeline.alternatives import check_candidates, ranked_queries
from pgmr.pipeline.batcher import Batcher, PipelineError
from pgmr.pipeline.config import PipelineConfig
from pgmr.pipeline.labels import LabelSource, MemoryLabels
from pgmr.pipeline.rerank import RerankerError, prepare_drafts, reranker_of
from pgmr.pipeline.results import AskResult
from pgmr.pipeline.stages import Prepared, Timer, finish, prepare
from pgmr.resolver import Resolver

if TYPE_CHECKING:
    from pgmr.memory import Memory, MemoryHit
    from pgmr.stores import SparqlStore


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
        self.stages = self.config.stage_config()
        self.generator = generator
        self.memory = memory
        self.store = store
        self.labels: LabelSource = labels or MemoryLabels(memory)
        self.resolver = Resolver(memory, self.stages.resolver)
        self.model_dir: Path | None = None  # set by `load`
        self._lock = threading.RLock()
        self._batcher: Batcher | None = None
        self._closed = False
        self.owns_store = False  # `load` opened the store, so `close` closes it
        self._retriever = None
        # An ensemble's drafts are resolved and reranked; a bad reranker file fails here, not per question.
        self.reranker = reranker_of(generator) if generator is not None else None
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
                    precision=config.precision,
                )
            except (ModelCardError, OSError) as exc:
                raise PipelineError(f"cannot load the generator from {model_dir}: {exc}") from None
            try:
                memory = Memory.load(memory_dir, verify=config.verify_memory, precision=config.precision)
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
        try:
            pipeline = cls(generator, memory, store=store, labels=labels, config=config)
        except RerankerError as exc:
            if store is not None:
                store.close()
            raise PipelineError(f"cannot use the generator in {model_dir}: {exc}") from None
        pipeline.model_dir = model_dir
        pipeline.owns_store = store is not None
        # The resolver builds its label lexicons on first use (~2 s for the full memory): not on a first request.
        for kind in ("entity", "relation"):
            pipeline.resolver.lexicon(kind)
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

    def ask(self, question: str, *, candidates: int = 1) -> AskResult:
        """One question. Safe to call from many threads at once: questions that arrive while the model is busy
        are generated and resolved together in the next batch (up to `config.max_batch`), then each runs on
        the store in its caller's thread. `candidates` > 1: the result also lists up to that many final
        queries with their support, the answer first (pgmr.pipeline.alternatives)."""
        check_candidates(candidates)
        if self.generator is None:
            raise PipelineError("this pipeline has no generator; use resolve_text")
        batcher = self._batcher
        if batcher is None:
            with self._lock:
                if self._closed:
                    raise PipelineError("the pipeline is closed")
                if self._batcher is None:
                    self._batcher = Batcher(self._model_stage, self.config.max_batch)
                batcher = self._batcher
        return self._finish(batcher.submit(question).result(), candidates=candidates)

    def ask_many(
        self, questions: Sequence[str], *, batch_size: int = 16, candidates: int = 1
    ) -> list[AskResult]:
        """Generation and resolution batched over all the questions; execution one by one."""
        check_candidates(candidates)
        if isinstance(questions, str):
            raise TypeError("ask_many takes a sequence of questions, not one string")
        if self.generator is None:
            raise PipelineError("this pipeline has no generator; use resolve_text")
        prepared = self._model_stage(questions, batch_size=batch_size)
        return [self._finish(p, candidates=candidates) for p in prepared]

    def resolve_text(
        self, text: str, *, question: str | None = None, execute: bool = True, candidates: int = 1
    ) -> AskResult:
        """From an intermediate query written by hand (or by a model elsewhere): the same steps as `ask`."""
        check_candidates(candidates)
        prepared = prepare(
            [question],
            [text],
            "pgmr",
            self.resolver,
            self.stages.grounding,
            timers=[Timer()],
            lock=self._lock,
        )
        return self._finish(prepared[0], execute=execute, candidates=candidates)

    def search(self, text: str, kind: str, k: int = 5) -> list[MemoryHit]:
        if kind not in ("entity", "relation"):
            raise ValueError("kind must be entity or relation")
        with self._lock:
            return self.memory.dictionary(kind).search([text], k=k)[0]  # type: ignore[arg-type]

    # -- steps -------------------------------------------------------------------------------------------------

    def _model_stage(self, questions: Sequence[str], *, batch_size: int = 16) -> list[Prepared]:
        """Generate, parse, ground and resolve (everything that needs the model or the encoder), behind the lock."""
        assert self.generator is not None
        questions = [" ".join(q.split()) for q in questions]
        with self._lock:
            started = time.perf_counter()
            contexts = self._retriever.contexts(questions) if self._retriever is not None else None
            drafts = generate_drafts(self.generator, questions, contexts=contexts, batch_size=batch_size)
            # Each question spent the whole batch's time in generation.
            seconds = time.perf_counter() - started
            timers = [Timer([("generate", seconds)]) for _ in questions]
            return prepare_drafts(
                questions,
                drafts,
                self.mode,
                self.resolver,
                self.stages.grounding,
                self.reranker,
                timers=timers,
                lock=self._lock,
            )

    def _finish(self, item: Prepared, *, execute: bool = True, candidates: int = 1) -> AskResult:
        """The store part (outside the lock): probes or one query, then labels; then, for `candidates` > 1,
        the other final queries (from the evidence already found: no model, no store)."""
        result = finish(item, self.stages, store=self.store, labels=self.labels, run=execute)
        if candidates > 1:
            result = replace(result, candidates=ranked_queries(item, result, candidates, self.resolver))
        return result


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


__all__ = ["Pipeline", "open_configured_store"]
