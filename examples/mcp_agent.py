"""An agent's way through pgmr's MCP tools, with the MCP SDK's own client: what docs/mcp.md shows.

    python examples/mcp_agent.py [QUESTION ...] [--resolve TEXT] [--server-args "--store none"] [--http URL]

Starts `pgmr mcp` over stdio (or connects to a running server with --http), lists its tools, then for each
question: question_to_sparql, then run_sparql on its query, or on a refusal search_entities for the refused
label; then each --resolve text, a placeholder query the agent wrote itself (never an ID from memory), through
resolve and validate_sparql. Prints each call and its result, shortened to 80 columns.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

QUESTIONS = ["Who is the author of Le Petit Prince?", "Who rules Atlantis?"]


def _fit(text: str) -> list[str]:
    return [line if len(line) <= 80 else line[:77] + "..." for line in text.splitlines()]


def show(tool: str, arguments: dict[str, Any], result: Any, keep: int = 24) -> None:
    print(f">>> {tool}")
    for key, value in arguments.items():
        shown = value if isinstance(value, str) else json.dumps(value)
        print("\n".join(_fit(f"    {key}: " + shown.replace("\n", "\n" + " " * (len(key) + 6)))))
    lines = _fit(json.dumps(result, indent=2, ensure_ascii=False))
    print("\n".join(lines[:keep] + (["  ..."] if len(lines) > keep else [])))
    print()


async def call(client: Client, tool: str, arguments: dict[str, Any], keep: int = 24) -> Any:
    result = await client.call_tool(tool, arguments)
    value = result.content[0].text if result.is_error else result.structured_content  # type: ignore[union-attr]
    if keep:
        show(tool + (" [tool error]" if result.is_error else ""), arguments, compact(value), keep)
    return None if result.is_error else value


def compact(value: Any) -> Any:
    """A result without its empty top-level fields (null, [], {}), so the transcript shows what it says."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v not in (None, [], {})}
    return value


async def agent(client: Client, questions: list[str], own: list[str]) -> None:
    tools = (await client.list_tools()).tools
    print(">>> list_tools()")
    for tool in tools:
        print(f"  {tool.name}: {(tool.description or '').splitlines()[0]}"[:80])
    print()
    for question in questions:
        answer = compact(await call(client, "question_to_sparql", {"question": question}, keep=40))
        if answer.get("status") == "refused":
            refused = answer["refusal"]["placeholders"][0]
            await call(client, "search_entities", {"text": refused["label"], "k": 3}, keep=20)
            continue
        if answer.get("sparql"):
            await call(client, "run_sparql", {"query": answer["sparql"], "limit": 3}, keep=30)
    for text in own:  # the agent's own placeholder query: labels and descriptions, never IDs
        resolved = await call(client, "resolve", {"intermediate_query": text, "execute": True}, keep=40)
        if resolved and resolved.get("sparql"):
            await call(client, "validate_sparql", {"query": resolved["sparql"]}, keep=8)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("questions", nargs="*", default=QUESTIONS)
    parser.add_argument(
        "--resolve",
        action="append",
        default=[],
        help="an intermediate query the agent writes itself (repeatable)",
    )
    parser.add_argument("--server-args", default="", help="arguments after `pgmr mcp` (e.g. --store FILE)")
    parser.add_argument("--http", help="a running server's URL (http://127.0.0.1:8765/mcp) instead of stdio")
    args = parser.parse_args()
    pgmr = str(Path(sys.executable).with_name("pgmr"))
    server: Any = args.http or StdioServerParameters(
        command=pgmr, args=["mcp", *shlex.split(args.server_args)]
    )

    async def run() -> None:
        async with Client(server, read_timeout_seconds=300) as client:
            await agent(client, args.questions, args.resolve)

    anyio.run(run)


if __name__ == "__main__":
    main()
