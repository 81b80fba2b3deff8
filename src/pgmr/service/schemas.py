"""Request and response bodies of the pgmr service (they are what /openapi.json documents)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from pgmr.pipeline import MAX_CANDIDATES

MAX_QUESTION_CHARS = 1000
MAX_QUERY_CHARS = 8000
CANDIDATES_FIELD = Field(
    1,
    ge=1,
    le=MAX_CANDIDATES,
    description="How many final queries to return in `candidates`, the answer first, then the best supported "
    "alternatives (pgmr.pipeline.alternatives); 1: none besides the answer, `candidates` stays empty",
    examples=[3],
)


# "Blank" is spelt out, and the same set is in the documented pattern: Python's str.strip(), JSON Schema
# (ECMA) and pydantic (Rust) each have their own idea of \s, and with str.strip() a question of one U+001D
# (a control character Python counts as whitespace) as a /resolve query met the published schema but was
# refused (found by schemathesis).
_BLANK = " \t\n\r\f\v"
NOT_BLANK_PATTERN = "[^ \\t\\n\\r\\f\\v]"  # matches (anywhere) iff the text is not only those characters


def _whole_number(value: object) -> object:
    """A JSON number, not "3" or true (which lax coercion would take); 3.0 is one, as JSON Schema's "integer"
    says (schemathesis found the strict alternative refusing it), and 2.5 is then refused as a fraction."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a whole number")
    return value


def _not_blank(value: str) -> str:
    value = value.strip(_BLANK)
    if not value:
        raise ValueError("must not be blank")
    return value


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(
        ...,
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        examples=["Who founded Intel?"],
        json_schema_extra={"pattern": NOT_BLANK_PATTERN},
    )
    candidates: int = CANDIDATES_FIELD

    _strip = field_validator("question")(_not_blank)
    _count = field_validator("candidates", mode="before")(_whole_number)


class ResolveRequest(BaseModel):
    """An intermediate query (SPARQL-PGMR) to resolve; `execute` false stops before the store."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        ...,
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        examples=[
            "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\n"
            "entity0 = [ENT] Intel [/ENT]\nrelation0 = [REL] founded by [/REL]"
        ],
        json_schema_extra={"pattern": NOT_BLANK_PATTERN},
    )
    question: str | None = Field(None, max_length=MAX_QUESTION_CHARS)
    # Strict: JSON `0` or `"no"` is not a boolean (lax coercion would run, or not run, a query by accident).
    execute: StrictBool = True
    candidates: int = CANDIDATES_FIELD

    _strip = field_validator("query")(_not_blank)
    _count = field_validator("candidates", mode="before")(_whole_number)


class CandidateOut(BaseModel):
    id: str
    label: str
    description: str | None
    score: float
    similarity: float


class PlaceholderOut(BaseModel):
    name: str
    kind: Literal["entity", "relation"]
    label: str
    description: str
    threshold: float
    supported: bool
    candidates: list[CandidateOut]
    chosen: str | None
    # The estimated probability that the memory holds what the placeholder names (null: no support model for
    # its kind), the refusal threshold it was compared with (0: refusal off), and why it was rejected.
    confidence: float | None = None
    min_confidence: float = 0.0
    rejected: str = ""


class AnswerOut(BaseModel):
    value: str
    kind: str
    variable: str | None = None
    id: str | None = None
    label: str | None = None
    description: str | None = None
    datatype: str | None = None
    language: str | None = None


class ProbeOut(BaseModel):
    mapping: dict[str, str]
    score: float
    count: int | None
    has_result: bool
    seconds: float
    error: str | None = None


class GroundedOut(BaseModel):
    """An edit made before resolution: `placeholder` is the placeholder whose label was snapped to a question
    span, or "literal" for a number or quoted word of the query replaced by the question's closest one."""

    placeholder: str
    generated: str
    grounded: str


class DraftOut(BaseModel):
    """One draft of an ensemble generator as the reranker scored it (pgmr.pipeline.rerank); the chosen one's
    text is the response's `intermediate`."""

    source: str
    status: str
    score: float
    chosen: bool
    signals: dict[str, float]
    sparql: str | None = None  # this draft's final query, when it resolved


class PickOut(BaseModel):
    """One placeholder's ID in a candidate query, with the probability that it is what the placeholder names
    (for the resolver's own pick, its confidence) and whether that passes the refusal's gates."""

    name: str
    kind: Literal["entity", "relation"]
    id: str
    label: str
    description: str | None
    score: float
    similarity: float
    prior: float
    confidence: float
    supported: bool


class QueryCandidateOut(BaseModel):
    """One of the final queries of `candidates`: the answer (`answer` true) first, then the alternatives by
    `support`, the product of its picks' probabilities (null without placeholders: direct and RAG modes)."""

    sparql: str
    mapping: dict[str, str]
    support: float | None
    supported: bool
    answer: bool
    source: str | None  # the ensemble member whose draft it fills
    results: int | None  # result values the KG check found for it, when it ran it
    picks: list[PickOut]


class AskErrorOut(BaseModel):
    code: str
    message: str
    line: int | None = None
    column: int | None = None


class AskResponse(BaseModel):
    """One question's (or intermediate query's) way through the pipeline; see `pgmr.pipeline.AskResult`."""

    question: str | None
    status: Literal["answered", "empty", "resolved", "refused", "invalid", "error"]
    mode: str
    intermediate: str | None
    placeholders: list[PlaceholderOut]
    sparql: str | None
    mapping: dict[str, str]
    answers: list[AnswerOut]
    answer_count: int
    boolean: bool | None
    reason: str | None
    unsupported: list[str]
    error: AskErrorOut | None
    choice: str
    probes: list[ProbeOut]
    timings: dict[str, float]
    grounded: list[GroundedOut] = []
    # What the resolver changed besides filling IDs: a triple turned round by the training facts.
    notes: list[str] = []
    drafts: list[DraftOut] = []
    # With `candidates` > 1 in the request: up to that many final queries with their support (a refused
    # question: the best alternatives, each with its insufficient support); empty otherwise.
    candidates: list[QueryCandidateOut] = []


class SearchHitOut(BaseModel):
    id: str
    label: str
    description: str | None
    score: float
    matched_text: str


class SearchResponse(BaseModel):
    query: str
    kind: Literal["entity", "relation"]
    hits: list[SearchHitOut]


class Text2SparqlResponse(BaseModel):
    """The TEXT2SPARQL challenge's answer: the dataset and question as asked, and the final SPARQL query."""

    dataset: str
    question: str
    query: str


class LoadOut(BaseModel):
    """The limiter's state (pgmr.service.limits): requests at work and waiting, its bounds, and its counts."""

    in_progress: int
    queued: int
    max_concurrency: int
    max_queue: int
    deadline_seconds: float
    completed: int
    rejected: int
    deadline_exceeded: int


class WarmUpOut(BaseModel):
    """The memory's files being read into the page cache after loading (pgmr.memory.page_cache): until `done`,
    questions through a memory of millions of items may wait for the disk."""

    done: bool
    files: int
    bytes_read: int


class HealthResponse(BaseModel):
    status: Literal["ok"]
    version: str
    mode: str
    model: str | None
    memory: dict[str, int]
    store: str | None
    kg_check: bool
    load: LoadOut | None = None
    warm_up: WarmUpOut | None = None


class ErrorBody(BaseModel):
    code: str
    message: str
    details: list[str] | None = None


class ErrorResponse(BaseModel):
    """Every error the service returns: a stable code and a message, never a stack trace."""

    error: ErrorBody
