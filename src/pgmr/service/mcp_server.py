"""`pgmr mcp`: pgmr's agent tools (service/agent_tools.py) as a Model Context Protocol server.

One loaded Pipeline serves every call; the blocking work runs in a worker thread, one call at a time (the
pipeline serialises its model anyway), so the transport stays responsive. A bad argument or a failed call is
an MCP tool error whose text says what to change; nothing an agent sends stops the server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Literal

import anyio
from pydantic import Field

from pgmr import __version__
from pgmr.pipeline import MAX_CANDIDATES
from pgmr.service.agent_tools import MAX_K, MAX_ROWS, AgentTools, ToolInputError
from pgmr.service.mcp_schemas import QueryResult, RunResult, SearchResult, Validation

INSTRUCTIONS = (
    "pgmr turns questions into SPARQL over a knowledge graph (Wikidata by default) without invented IDs: "
    "a model writes the query with placeholders and pgmr's memory resolves each to a real ID, or refuses when "
    "none is supported. Prefer question_to_sparql; to write a query yourself, write placeholders (wd:entity0, "
    "wdt:relation0) with mapping lines and call resolve, or look IDs up with search_entities/search_properties. "
    "Never write a Q- or P-ID from memory. validate_sparql checks a query; run_sparql runs it read-only."
)

Question = Annotated[str, Field(description="The question in natural language", max_length=20_000)]
StoreName = Annotated[
    str | None,
    Field(description="Name of a store this server was started with (not a URL); default: the first"),
]
Details = Annotated[bool, Field(description="Also return the intermediate query, placeholders and timings")]
SearchText = Annotated[str, Field(description="A label, or 'label, description' (e.g. 'Hamburg, city')")]
K = Annotated[int, Field(ge=1, le=MAX_K, description="How many candidates")]


def build_server(tools: AgentTools) -> Any:
    """The MCPServer with pgmr's tools registered (the `mcp` SDK is imported here: an optional extra)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import ToolAnnotations

    server = MCPServer("pgmr", version=__version__, instructions=INSTRUCTIONS)
    busy = threading.Lock()
    # Not `open_world_hint=False`: a store may be a public endpoint such as wdqs.
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False)

    async def call(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        def locked() -> dict[str, Any]:
            with busy:
                return work()

        try:
            return await anyio.to_thread.run_sync(locked)
        except ToolInputError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(annotations=read_only)
    async def question_to_sparql(
        question: Question,
        store: StoreName = None,
        details: Details = False,
        candidates: Annotated[
            int, Field(ge=1, le=MAX_CANDIDATES, description="Complete queries to return, the answer first")
        ] = 1,
    ) -> QueryResult:
        """Answer a question with a SPARQL query whose every ID exists in the knowledge graph, or refuse.

        status: answered / empty (run on the store), resolved (no store), refused (a placeholder has no
        supported ID: `refusal` names it, its best candidates and why), invalid (the model's output was not a
        query). With a store, `answers` holds the labelled results. `candidates` > 1: that many complete
        queries with their support, for a person (or the agent) to choose among."""
        return QueryResult.model_validate(
            await call(partial(tools.question_to_sparql, question, store, details, candidates))
        )

    @server.tool(annotations=read_only)
    async def search_entities(text: SearchText, k: K = 5) -> SearchResult:
        """Entities (Wikidata items: Q-IDs) of pgmr's memory for a label: id, label, description, score
        (similarity, 0-1) and prior (prominence, 0-1), best first."""
        return SearchResult.model_validate(await call(partial(tools.search, text, "entity", k)))

    @server.tool(annotations=read_only)
    async def search_properties(text: SearchText, k: K = 5) -> SearchResult:
        """Properties (relations: P-IDs) of pgmr's memory for a label, as search_entities."""
        return SearchResult.model_validate(await call(partial(tools.search, text, "relation", k)))

    @server.tool(annotations=read_only)
    async def resolve(
        intermediate_query: Annotated[
            str,
            Field(
                description="SPARQL with placeholders plus one mapping line each, e.g. 'SELECT ?x WHERE { "
                "wd:entity0 wdt:relation0 ?x }\\nentity0 = [ENT] Hamburg [/ENT] city in Germany\\n"
                "relation0 = [REL] population [/REL]'",
                max_length=20_000,
            ),
        ],
        execute: Annotated[bool, Field(description="Run the resolved query on the default store")] = False,
        details: Details = False,
    ) -> QueryResult:
        """Resolve your own placeholder query (SPARQL-PGMR) to real IDs with pgmr's memory, or get a refusal
        that names the placeholder without support. Write placeholders, never IDs."""
        return QueryResult.model_validate(
            await call(partial(tools.resolve, intermediate_query, execute, details))
        )

    @server.tool(annotations=read_only)
    async def validate_sparql(
        query: Annotated[str, Field(description="A SPARQL query", max_length=20_000)],
    ) -> Validation:
        """Check a SPARQL query without running it: valid (its form, with standard Wikidata prefixes declared)
        or why not (syntax error with line and column, an update, a SERVICE call)."""
        return Validation.model_validate(await call(partial(tools.validate_sparql, query)))

    @server.tool(annotations=read_only)
    async def run_sparql(
        query: Annotated[str, Field(description="A read-only SPARQL query", max_length=20_000)],
        store: StoreName = None,
        limit: Annotated[int, Field(ge=1, le=MAX_ROWS, description="Rows to return at most")] = 100,
    ) -> RunResult:
        """Run a read-only query on a store: status answered, empty, timeout or error (with a message), and
        the result as SPARQL JSON results (at most `limit` rows)."""
        return RunResult.model_validate(await call(partial(tools.run_sparql, query, store, limit)))

    return server


Transport = Literal["stdio", "http"]


def run_server(tools: AgentTools, transport: Transport, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve until the client closes stdin (stdio) or the process is interrupted (http: /mcp)."""
    server = build_server(tools)
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port)


__all__ = ["INSTRUCTIONS", "Transport", "build_server", "run_server"]
