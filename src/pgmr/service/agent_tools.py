"""What pgmr offers an LLM agent, as plain functions over a loaded Pipeline and the stores it was given.

The MCP server (service/mcp_server.py) publishes these as tools; they take and return JSON-able values and
raise `ToolInputError` with a message an agent can act on. `store` arguments name one of the stores the
server was started with: a tool call can never make pgmr open a URL (an agent must not turn it into a proxy),
and every query passes the read-only gate, which refuses SERVICE calls, before it reaches a store.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pgmr.pipeline import MAX_CANDIDATES, AskResult, Pipeline, PipelineError
from pgmr.query import IntermediateQueryError
from pgmr.query.errors import InvalidSparqlError, ReadOnlyQueryError
from pgmr.query.gate import detail_of, prepare_query
from pgmr.stores import SparqlStore
from pgmr.stores.base import StoreError, StoreTimeout, refuse_service_calls

DEFAULT_STORE = "default"
MAX_K = 50
MAX_ROWS = 1000
MAX_TEXT_CHARS = 20_000
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


class ToolInputError(ValueError):
    """A tool call that cannot be done as asked; the message says what to change."""


@dataclass(frozen=True)
class AgentTools:
    """The tools over `pipeline` (its own store is `stores[DEFAULT_STORE]` when it has one) and named stores."""

    pipeline: Pipeline
    stores: Mapping[str, SparqlStore] = field(default_factory=dict)
    timeout: float = 30.0

    # -- helpers ---------------------------------------------------------------------------------------------

    def _store(self, name: str | None) -> tuple[str, SparqlStore]:
        if not self.stores:
            raise ToolInputError(
                "this server was started without a store: start it with --store to run queries"
            )
        if name is None or name == "":
            name = DEFAULT_STORE if DEFAULT_STORE in self.stores else next(iter(self.stores))
        if name in self.stores:
            return name, self.stores[name]
        known = ", ".join(sorted(self.stores))
        if _URL.match(name) or "/" in name:
            raise ToolInputError(
                f"store {name!r} looks like a location; tools only take the name of a store this server was "
                f"started with ({known}), so that no tool call reaches a network address"
            )
        raise ToolInputError(f"unknown store {name!r}: this server has {known}")

    @staticmethod
    def _text(value: str, what: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ToolInputError(f"{what} is empty")
        if len(value) > MAX_TEXT_CHARS:
            raise ToolInputError(f"{what} is {len(value)} characters; at most {MAX_TEXT_CHARS}")
        return value.strip()

    @staticmethod
    def _result(result: AskResult, details: bool) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": result.status,
            "sparql": result.sparql,
            "mapping": dict(result.mapping),
        }
        if result.status == "refused":
            data["refusal"] = {
                "reason": result.reason,
                "placeholders": [
                    {
                        "name": p.name,
                        "kind": p.kind,
                        "label": p.label,
                        "description": p.description,
                        "why": p.rejected,
                        "confidence": p.confidence,
                        "best_candidates": [asdict(c) for c in p.candidates[:5]],
                    }
                    for p in result.placeholders
                    if not p.supported
                ],
            }
        if result.error is not None:
            data["error"] = asdict(result.error)
        if result.status in ("answered", "empty"):
            data["answers"] = [asdict(a) for a in result.answers[:MAX_ROWS]]
            data["answer_count"] = result.answer_count
            if result.boolean is not None:
                data["boolean"] = result.boolean
        if details:
            data["intermediate"] = result.intermediate
            data["timings_ms"] = {stage: round(1000 * s, 2) for stage, s in result.timings}
            data["placeholders"] = [p.to_json() for p in result.placeholders]
        return data

    # -- the tools -------------------------------------------------------------------------------------------

    def question_to_sparql(
        self, question: str, store: str | None = None, details: bool = False, candidates: int = 1
    ) -> dict[str, Any]:
        """The final query for a question, or a refusal with the placeholder, its best candidates and why;
        `candidates` > 1 adds up to that many complete queries with their support, the answer first."""
        question = self._text(question, "question")
        if not isinstance(candidates, int) or not 1 <= candidates <= MAX_CANDIDATES:
            raise ToolInputError(
                f"candidates must be an integer from 1 to {MAX_CANDIDATES}, got {candidates!r}"
            )
        name = None
        if store is not None:
            name, target = self._store(store)
        try:
            result = self.pipeline.ask(question, candidates=candidates)
        except PipelineError as exc:
            raise ToolInputError(str(exc)) from None
        data = self._result(result, details)
        if result.candidates:
            data["candidates"] = [c.to_json() for c in result.candidates]
        if name is not None and target is not self.pipeline.store and result.sparql is not None:
            data.pop("answers", None)
            data["execution"] = self.run_sparql(result.sparql, name)
        return data

    def search(self, text: str, kind: str, k: int = 5) -> dict[str, Any]:
        """Memory candidates for a label (or "label, description"), best first."""
        text = self._text(text, "text")
        if not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ToolInputError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
        # The resolver's own prior (built once with the pipeline): the prominence the resolver ranks with.
        prior = self.pipeline.resolver.prior
        hits = self.pipeline.search(text, kind, k)
        return {
            "query": text,
            "kind": kind,
            "candidates": [
                {
                    "id": h.id,
                    "label": h.label,
                    "description": h.description,
                    "score": round(float(h.score), 6),
                    "prior": round(prior.value(h.id), 6),
                }
                for h in hits
            ],
        }

    def resolve(
        self, intermediate_query: str, execute: bool = False, details: bool = False
    ) -> dict[str, Any]:
        """An agent's own SPARQL-PGMR text (placeholders plus mapping lines) resolved by the memory."""
        text = self._text(intermediate_query, "intermediate_query")
        result = self.pipeline.resolve_text(text, execute=execute and self.pipeline.store is not None)
        data = self._result(result, details)
        if result.status == "invalid" and result.error is not None:
            data["hint"] = (
                "write SPARQL with placeholders (wd:entity0, wdt:relation0) and one mapping line per "
                "placeholder after it, e.g. 'entity0 = [ENT] Hamburg [/ENT] city in Germany' and "
                "'relation0 = [REL] population [/REL]'"
            )
        return data

    def validate_sparql(self, query: str) -> dict[str, Any]:
        """The read-only gate's verdict: valid (with the query's form and prefixes declared) or why not."""
        query = self._text(query, "query")
        try:
            prepared = prepare_query(query)
            refuse_service_calls(prepared.text, "a query run through pgmr")
        except ReadOnlyQueryError as exc:
            return {"valid": False, "code": "read_only", "message": exc.message}
        except InvalidSparqlError as exc:
            where = {"line": exc.line, "column": exc.column} if exc.line else {}
            return {"valid": False, "code": exc.code, "message": f"invalid SPARQL: {detail_of(exc)}", **where}
        except StoreError as exc:  # a SERVICE clause: pgmr never calls other endpoints
            return {"valid": False, "code": getattr(exc, "code", "refused"), "message": str(exc)}
        except IntermediateQueryError as exc:
            return {"valid": False, "code": exc.code, "message": exc.message}
        return {"valid": True, "form": prepared.form, "query": prepared.text}

    def run_sparql(self, query: str, store: str | None = None, limit: int = 100) -> dict[str, Any]:
        """Run a read-only query: status `answered`, `empty`, `timeout` or `error`, never an exception."""
        if not isinstance(limit, int) or not 1 <= limit <= MAX_ROWS:
            raise ToolInputError(f"limit must be an integer from 1 to {MAX_ROWS}, got {limit!r}")
        name, target = self._store(store)
        verdict = self.validate_sparql(query)
        if not verdict["valid"]:
            return {"status": "error", "store": name, **{k: v for k, v in verdict.items() if k != "valid"}}
        began = time.monotonic()
        try:
            result = target.query(verdict["query"], timeout=self.timeout)
        except StoreTimeout as exc:
            return {"status": "timeout", "store": name, "message": f"{exc}; narrow the query or add a LIMIT"}
        except StoreError as exc:
            return {
                "status": "error",
                "store": name,
                "code": getattr(exc, "code", "store"),
                "message": str(exc),
            }
        seconds = time.monotonic() - began
        body = result.to_json()
        rows = len(result)
        if result.kind != "boolean":
            body["results"]["bindings"] = body["results"]["bindings"][:limit]
        empty = result.kind != "boolean" and rows == 0
        return {
            "status": "empty" if empty else "answered",
            "store": name,
            "rows": rows,
            "truncated": rows > limit,
            "seconds": round(seconds, 3),
            "result": body,
        }


__all__ = ["DEFAULT_STORE", "MAX_K", "MAX_ROWS", "AgentTools", "ToolInputError"]
