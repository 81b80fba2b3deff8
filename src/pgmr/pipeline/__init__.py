"""The ask pipeline: question -> intermediate query -> resolved SPARQL -> answers, keeping each step's evidence.

    generate (Generator seam) -> check and parse (the gate) -> ground (the question) -> resolve (memory,
        thresholds, refusal) -> KG-aware choice among the top candidates (optional) -> execute (read-only,
        with a timeout) -> answers with labels

Modules: `stages` (each step as a function, what every entry point calls), `results` (`AskResult`, the one
result type, and its JSON), `config` (`StageConfig`, the one set of defaults; `PipelineConfig` for ask and
serve), `labels` (answers with labels), `batcher` (questions batched under load), `alternatives` (several
final queries with their support, for a person to choose) and `core` (`Pipeline`, the parts loaded once and
composed). Grounding and the KG choice are resolver steps: pgmr.resolver.grounding,
pgmr.resolver.kg_choice.
"""

from __future__ import annotations

from pgmr.pipeline.alternatives import MAX_CANDIDATES, ranked_queries
from pgmr.pipeline.batcher import PipelineError
from pgmr.pipeline.config import PipelineConfig, StageConfig, shipped_resolver
from pgmr.pipeline.core import Pipeline, open_configured_store
from pgmr.pipeline.labels import LabelSource, MemoryLabels
from pgmr.pipeline.results import (
    STATUSES,
    Answer,
    AskError,
    AskResult,
    CandidateView,
    Pick,
    PlaceholderView,
    QueryCandidate,
)
from pgmr.resolver.kg_choice import Probe, has_result, query_form, ranked_combinations

__all__ = [
    "MAX_CANDIDATES",
    "STATUSES",
    "Answer",
    "AskError",
    "AskResult",
    "CandidateView",
    "LabelSource",
    "MemoryLabels",
    "Pick",
    "Pipeline",
    "PipelineConfig",
    "PipelineError",
    "PlaceholderView",
    "Probe",
    "QueryCandidate",
    "StageConfig",
    "has_result",
    "open_configured_store",
    "query_form",
    "ranked_combinations",
    "ranked_queries",
    "shipped_resolver",
]
