"""An agent's way through pgmr's MCP tools, with the MCP SDK's own client: what docs/mcp.md shows.

    python examples/mcp_agent.py [QUESTION ...] [--server-args "--store none"] [--http URL]

Starts `pgmr mcp` over stdio (or connects to a running server with --http), lists its tools, then for each
question: question_to_sparql; on a refusal, what an agent does next (search_entities for the refused label,
its own placeholder query through resolve, never an ID from memory); then validate_sparql and run_sparql on the
final query. Prints each call and its result, shortened to 80 columns.
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


def show(tool: str, arguments: dict[str, Any], result: Any, keep: int = 24) -> None:
    print(f">>> {tool}({json.dumps(arguments, ensure_ascii=False)})")
    text = json.dumps(result, indent=2, ensure_ascii=False)
    lines = [line if len(line) <= 80 else line[:77] + "..." for line in text.splitlines()]
    print("\n".join(lines[:keep] + (["  ..."] if len(lines) > keep else [])))
    print()


async def call(client: Client, tool: str, arguments: dict[str, Any], keep: int = 24) -> Any:
    result = await client.call_tool(tool, arguments)
    value = result.content[0].text if result.is_error else result.structured_content  # type: ignore[union-attr]
    if keep:
        show(tool + (" [tool error]" if result.is_error else ""), arguments, compact(value), keep)
    return None if result.is_error else value


def compact(value: Any) -> Any:
    """Drop empty fields (null, [], {}) so the transcript shows what each result says."""
    if isinstance(value, dict):
        return {k: compact(v) for k, v in value.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [compact(v) for v in value]
    return value


async def agent(client: Client, questions: list[str]) -> None:
    tools = (await client.list_tools()).tools
    print(">>> list_tools()")
    for tool in tools:
        print(f"  {tool.name}: {(tool.description or '').splitlines()[0][:60]}")
    print()
    for question in questions:
        answer = compact(await call(client, "question_to_sparql", {"question": question}, keep=40))
        if answer.get("status") == "refused":
            refused = answer["refusal"]["placeholders"][0]
            await call(client, "search_entities", {"text": refused["label"], "k": 3}, keep=20)
            continue
        if answer.get("sparql"):
            await call(client, "validate_sparql", {"query": answer["sparql"]}, keep=6)
            await call(client, "run_sparql", {"query": answer["sparql"], "limit": 3}, keep=16)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("questions", nargs="*", default=QUESTIONS)
    parser.add_argument("--server-args", default="", help="arguments after `pgmr mcp` (e.g. --store FILE)")
    parser.add_argument("--http", help="a running server's URL (http://127.0.0.1:8765/mcp) instead of stdio")
    args = parser.parse_args()
    pgmr = str(Path(sys.executable).with_name("pgmr"))
    server: Any = args.http or StdioServerParameters(
        command=pgmr, args=["mcp", *shlex.split(args.server_args)]
    )

    async def run() -> None:
        async with Client(server, read_timeout_seconds=300) as client:
            await agent(client, args.questions)

    anyio.run(run)


if __name__ == "__main__":
    main()
