"""KG-aware choice among the resolver's top candidates (beyond the paper).

The resolver ranks candidates by their support in the memory alone, so a homonym with a stronger prior can
win although the KG holds no fact about it. With a store, the combinations of the top-k supported candidates
are tried best total score first, and the first one whose query has a result is kept (within `max_probes`
queries). What counts as a result (`has_result`):

- SELECT: at least one bound value, except one row holding a single zero (what COUNT gives over nothing);
- CONSTRUCT/DESCRIBE: at least one triple;
- ASK queries are NOT probed: `false` is a legitimate answer to a yes/no question, and keeping the first
  combination that makes it `true` would bias every such question towards "yes". The top combination is used.

When no probe has a result, the top combination is kept (its result, empty or an error, is the answer).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pgmr.conversion import fill
from pgmr.query.lexer import tokenize
from pgmr.resolver.model import Resolution

if TYPE_CHECKING:
    from pgmr.stores import QueryResult, Term

_FORMS = frozenset({"SELECT", "ASK", "CONSTRUCT", "DESCRIBE"})


class Failure(Protocol):
    """What running a query gives instead of a result (the pipeline's AskError): it says why."""

    @property
    def message(self) -> str: ...


F = TypeVar("F", bound=Failure)


@dataclass(frozen=True)
class KgChoiceConfig:
    """Whether the KG decides among the top candidates, and how many queries it may run for one question."""

    enabled: bool = True
    max_probes: int = 8

    def __post_init__(self) -> None:
        if self.max_probes < 1:
            raise ValueError(f"max_probes must be at least 1, got {self.max_probes}")


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
class KgChoice:
    """The mapping kept and how: "top" (the resolver's best had a result), "kg" (a lower-ranked combination
    had one), "fallback" (none had: the top one); with every probe and the kept query's outcome."""

    mapping: dict[str, str]
    choice: str
    probes: tuple[Probe, ...]
    outcome: Any  # QueryResult | the failure `execute` returned


def query_form(sparql: str) -> str:
    """SELECT, ASK, CONSTRUCT or DESCRIBE: the first query-form keyword (after any PREFIX/BASE)."""
    for tok in tokenize(sparql):
        if tok.kind == "keyword" and tok.text.upper() in _FORMS:
            return tok.text.upper()
    return "SELECT"


def should_probe(resolution: Resolution, config: KgChoiceConfig) -> bool:
    """Whether the KG check runs for this resolution (on, and not an ASK query: see the module docstring)."""
    return config.enabled and query_form(resolution.query.skeleton) != "ASK"


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


def result_count(result: QueryResult) -> int:
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


def choose(
    resolution: Resolution, execute: Callable[[str], QueryResult | F], config: KgChoiceConfig
) -> KgChoice:
    """Probe combinations of supported candidates, best total score first (see the module docstring);
    `execute` runs one query and returns its result or a failure (it never raises for a failing store)."""
    from pgmr.stores import QueryResult

    options = [[c for c in e.candidates if c.similarity >= e.threshold] for e in resolution.evidence]
    names = [e.placeholder.name for e in resolution.evidence]
    found: list[Probe] = []
    top: tuple[dict[str, str], Any] | None = None
    combos = ranked_combinations([[c.score for c in slot] for slot in options])
    for n, index in enumerate(combos):
        if n >= config.max_probes:
            break
        chosen = [slot[i] for slot, i in zip(options, index, strict=True)]
        mapping = {name: c.id for name, c in zip(names, chosen, strict=True)}
        started = time.perf_counter()
        outcome = execute(fill(resolution.query, mapping, namespaces=dict(resolution.prefixes)))
        seconds = time.perf_counter() - started
        score = round(math.fsum(c.score for c in chosen), 6)
        if not isinstance(outcome, QueryResult):
            found.append(Probe(tuple(mapping.items()), score, None, False, seconds, outcome.message))
        else:
            hit = has_result(outcome)
            found.append(Probe(tuple(mapping.items()), score, result_count(outcome), hit, seconds))
            if hit:
                return KgChoice(mapping, "top" if n == 0 else "kg", tuple(found), outcome)
        if top is None:
            top = (mapping, outcome)
    assert top is not None  # a Resolution has a supported best candidate for every placeholder
    return KgChoice(top[0], "fallback", tuple(found), top[1])


__all__ = [
    "KgChoice",
    "KgChoiceConfig",
    "Probe",
    "choose",
    "has_result",
    "should_probe",
    "query_form",
    "ranked_combinations",
    "result_count",
]
