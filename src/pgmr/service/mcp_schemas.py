"""The MCP tools' results as pydantic models, so that each tool publishes an output JSON schema an agent (or
its framework) can rely on; the values are service/agent_tools.py's dictionaries, validated on the way out."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class Candidate(BaseModel):
    """A memory candidate as the search tools return it."""

    id: str = Field(description="Wikidata ID (Q... or P...)")
    label: str
    description: str | None = None
    score: float = Field(description="Similarity to the searched text, 0-1")
    prior: float = Field(description="Prominence of the ID, 0-1")


class RankedCandidate(BaseModel):
    """A candidate as the resolver ranked it for a placeholder."""

    id: str
    label: str
    description: str | None = None
    score: float = Field(description="The resolver's score: similarity with the prior and the question")
    similarity: float


class RefusedPlaceholder(BaseModel):
    name: str = Field(description="The placeholder, e.g. entity0")
    kind: Literal["entity", "relation"]
    label: str = Field(description="What the generator named")
    description: str = ""
    why: str = Field(description="Why no candidate is supported")
    confidence: float | None = None
    best_candidates: list[RankedCandidate]


class Refusal(BaseModel):
    reason: str | None = Field(description="The same reason `pgmr ask` gives")
    placeholders: list[RefusedPlaceholder]


class RunResult(BaseModel):
    status: Literal["answered", "empty", "timeout", "error"]
    store: str
    rows: int | None = None
    truncated: bool | None = None
    seconds: float | None = None
    result: dict[str, Any] | None = Field(default=None, description="SPARQL 1.1 JSON results")
    code: str | None = None
    message: str | None = None
    line: int | None = None
    column: int | None = None


class QueryCandidate(BaseModel):
    sparql: str
    mapping: dict[str, str]
    support: float | None = Field(
        description="Probability that every ID is right (product over placeholders)"
    )
    supported: bool = Field(description="Every ID passes the refusal's gates")
    answer: bool = Field(description="The pipeline's answer (always first)")
    source: str | None = None
    results: int | None = Field(default=None, description="Result values the KG check found, when it ran it")
    picks: list[dict[str, Any]]


class QueryResult(BaseModel):
    status: Literal["answered", "empty", "resolved", "refused", "invalid", "error"] = Field(
        description="answered/empty: run on the store; resolved: every ID found, no store; refused: a "
        "placeholder lacks support; invalid: not a (read-only) query; error: the store failed"
    )
    sparql: str | None = Field(description="The final query (real IDs only); null when refused or invalid")
    mapping: dict[str, str] = Field(description="Placeholder -> the ID it resolved to")
    refusal: Refusal | None = None
    error: dict[str, Any] | None = None
    answers: list[dict[str, Any]] | None = None
    answer_count: int | None = None
    boolean: bool | None = None
    execution: RunResult | None = Field(default=None, description="The query run on the store named")
    candidates: list[QueryCandidate] | None = Field(
        default=None, description="With candidates > 1: complete queries by support, the answer first"
    )
    intermediate: str | None = None
    timings_ms: dict[str, float] | None = None
    placeholders: list[dict[str, Any]] | None = None
    hint: str | None = None


class SearchResult(BaseModel):
    query: str
    kind: Literal["entity", "relation"]
    candidates: list[Candidate]


class Validation(BaseModel):
    valid: bool
    form: Literal["select", "ask", "construct", "describe"] | None = None
    query: str | None = Field(default=None, description="The query with its standard prefixes declared")
    code: str | None = None
    message: str | None = None
    line: int | None = None
    column: int | None = None


__all__ = ["QueryResult", "RunResult", "SearchResult", "Validation"]
