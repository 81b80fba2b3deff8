"""Few-shot chat prompts per generator mode: a system message saying what to write, k worked examples as
user/assistant turns, then the question (with its candidate block in the RAG modes)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pgmr.generators.base import PGMR_MODES, RAG_MODES, check_mode
from pgmr.generators.examples import Example

Message = dict[str, str]

_PGMR_SYSTEM = """You translate English questions into SPARQL-PGMR: a SPARQL query over Wikidata in which every \
Wikidata ID is replaced by a placeholder, followed by one mapping line per placeholder.
Rules:
- Write the query on one line. The standard Wikidata prefixes (wd, wdt, p, ps, pq, rdfs, ...) are predeclared.
- Items are wd:entity0, wd:entity1, ...; properties are wdt:relation0, p:relation0, ps:relation0, \
pq:relation1, ... Number each kind by first appearance; the same ID keeps the same placeholder. Never write a \
real ID such as wd:Q42 or wdt:P31.
- After the query, one line per placeholder: `entityN = [ENT] label [/ENT] description` or \
`relationN = [REL] label [/REL] description`, with the English Wikidata label and a short description.
- Answer with the query and its mapping lines only: no explanation, no code fences."""

_DIRECT_SYSTEM = """You translate English questions into SPARQL queries over Wikidata.
Rules:
- Write the query on one line. The standard Wikidata prefixes (wd, wdt, p, ps, pq, rdfs, ...) are predeclared; \
do not declare them.
- Use real Wikidata IDs: items as wd:Q..., properties as wdt:P..., p:P..., ps:P..., pq:P...
- Answer with the query only: no explanation, no code fences."""

_RAG_NOTE = """
- The question is followed by candidate Wikidata items and properties retrieved for it, one per line as \
`ID label: description`. They may be incomplete or wrong."""
_RAG_PGMR_NOTE = " Use them to choose labels and descriptions for the mapping lines; never write their IDs."
_RAG_DIRECT_NOTE = " Use their IDs where they fit."


def system_prompt(mode: str) -> str:
    check_mode(mode)
    text = _PGMR_SYSTEM if mode in PGMR_MODES else _DIRECT_SYSTEM
    if mode in RAG_MODES:
        text += _RAG_NOTE + (_RAG_PGMR_NOTE if mode in PGMR_MODES else _RAG_DIRECT_NOTE)
    return text


def split_source(source: str) -> tuple[str, str | None]:
    """An Example's source (`pgmr.generators.examples.source_text`) -> (question, candidate block or None)."""
    question, newline, context = source.partition("\n")
    return question, (context if newline else None)


def user_message(question: str, context: str | None = None) -> str:
    text = f"Question: {' '.join(question.split())}"
    if context is not None:
        text += "\nCandidates:\n" + (context.strip() or "(none found)")
    return text


def build_messages(
    mode: str,
    question: str,
    shots: Sequence[Example] = (),
    context: str | None = None,
    *,
    system: str | None = None,
) -> list[Message]:
    """System, then the shots in the given order, then the question. Callers pass the nearest shot last, so
    that it sits right before the question. `system`: another system message than the mode's (a graph's
    schema prompt, pgmr.generators.chat.schema_prompt)."""
    check_mode(mode)
    if mode in RAG_MODES and context is None:
        raise ValueError(f"mode {mode!r} needs the candidate block (contexts) of each question")
    messages: list[Message] = [{"role": "system", "content": system or system_prompt(mode)}]
    for shot in shots:
        shot_question, shot_context = split_source(shot.source)
        if mode not in RAG_MODES:
            shot_context = None
        elif shot_context is None:
            shot_context = ""
        messages.append({"role": "user", "content": user_message(shot_question, shot_context)})
        messages.append({"role": "assistant", "content": shot.target})
    messages.append({"role": "user", "content": user_message(question, context)})
    return messages


_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)


def strip_fences(text: str) -> str:
    """The content of the first ``` fenced block when the answer has one, else the answer; stripped."""
    m = _FENCE.search(text)
    return (m.group(1) if m else text).strip()


_MAPPING_SYSTEM = """You write the mapping block of a SPARQL-PGMR query: for each placeholder of the given \
query, in order of first use, one line `entityN = [ENT] label [/ENT] description` or \
`relationN = [REL] label [/REL] description`, with the English Wikidata label and a short description of the \
item or property the placeholder stands for in the question. Answer with the mapping lines only."""

_MAPPING_LINE_START = re.compile(r"^\s*[A-Za-z_]\w*\s*=(?!=)")


def split_target(target: str) -> tuple[str, str]:
    """A SPARQL-PGMR text -> (skeleton, mapping block), split where `pgmr.query.parse` splits it."""
    lines = target.split("\n")
    start = next((i for i, line in enumerate(lines) if _MAPPING_LINE_START.match(line)), len(lines))
    return "\n".join(lines[:start]).strip(), "\n".join(lines[start:]).strip()


def build_mapping_messages(
    messages: Sequence[Message], skeleton: str, *, system: str | None = None
) -> list[Message]:
    """The second request of two-step decoding, from the first one's messages: every shot now shows its
    question with its skeleton and answers with its mapping block; the question comes with `skeleton`.
    `system`: another system message than Wikidata's (a graph's, with its schema)."""
    out: list[Message] = [{"role": "system", "content": system or _MAPPING_SYSTEM}]
    body = [m for m in messages if m["role"] != "system"]
    if not body or body[-1]["role"] != "user":
        raise ValueError("messages must end with the user's question")
    for user, assistant in zip(body[:-1:2], body[1:-1:2], strict=True):
        shot_skeleton, shot_mapping = split_target(assistant["content"])
        out.append({"role": "user", "content": f"{user['content']}\nQuery: {shot_skeleton}"})
        out.append({"role": "assistant", "content": shot_mapping})
    out.append({"role": "user", "content": f"{body[-1]['content']}\nQuery: {skeleton}"})
    return out
