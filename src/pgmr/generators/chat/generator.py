"""`ChatGenerator`: a `Generator` backed by any OpenAI-compatible chat server, prompted with k nearest
training examples, optionally constrained by a GBNF grammar (llama.cpp's `grammar` field, or another field
such as vLLM's `guided_grammar` through `grammar_field`).

Two-step decoding (PGMR modes with a grammar): the first request writes the skeleton under the skeleton
grammar; the second writes the mapping block under a grammar made for exactly the skeleton's placeholders.
A context-free grammar alone cannot tie the mapping block to the placeholders the skeleton used, and a small
model gets that wrong often (a line missing, an unused one): split in two, every answer has the right lines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pgmr.generators.base import PGMR_MODES, RAG_MODES, GeneratorError, check_generate_inputs, check_mode
from pgmr.generators.chat.client import ChatClient, ServerHTTPError
from pgmr.generators.chat.grammar import (
    IdStyle,
    grammar_for_mode,
    mapping_grammar,
    pgmr_grammar,
    skeleton_grammar,
)
from pgmr.generators.chat.prompts import (
    Message,
    build_mapping_messages,
    build_messages,
    split_source,
    strip_fences,
)
from pgmr.generators.chat.schema_prompt import SchemaPrompt
from pgmr.generators.chat.shots import ShotSource
from pgmr.generators.examples import Example
from pgmr.kg.ids import ID_PREFIXES
from pgmr.query.errors import IntermediateQueryError
from pgmr.query.lexer import check_brackets, tokenize
from pgmr.query.model import placeholder_kind

CONSTRAIN_CHOICES = ("auto", "gbnf", "none")
# Tokens a mapping line may take at the grammar's caps (name and tags, 20 label words, 12 description words).
MAPPING_LINE_TOKENS = 64
# Characters of one free word in a graph's mapping lines (its instances' names and descriptions).
GRAPH_WORD_CHARS = 48
# `owned_by` values of GET /v1/models that mean a llama.cpp server (C++ server; llama-cpp-python's).
_LLAMA_CPP_OWNERS = frozenset({"llamacpp", "me"})


def placeholders_in(skeleton: str) -> list[str]:
    """Placeholder names in order of first use (empty when the text does not tokenize)."""
    names: dict[str, None] = {}
    try:
        for tok in tokenize(skeleton):
            if tok.kind == "pname" and tok.prefix in ID_PREFIXES and placeholder_kind(tok.local):
                names.setdefault(tok.local, None)
    except IntermediateQueryError:
        return []
    return list(names)


class ChatGenerator:
    """`generate(questions, contexts=None, batch_size=16)` sends up to `batch_size` requests at once and
    returns the answers in question order, code fences stripped.

    `shots`: where the k few-shot examples come from (a `ShotSelector`); None prompts zero-shot.
    `constrain`: "gbnf" always sends the grammar; "none" never; "auto" sends it when the server says it is
    llama.cpp (GET /v1/models), since other servers reject or ignore the `grammar` field.
    `grammar_field`: where the grammar goes in the request body; a dotted path nests it
    ("structured_outputs.grammar" for vLLM >= 0.12, "guided_grammar" before).
    `shot_context`: RAG modes; candidate blocks for shot questions whose example carries none.
    `schema`: a graph's schema prompt (pgmr.generators.chat.schema_prompt; mode "pgmr" only): its system
    messages replace Wikidata's, its worked examples come first in every prompt (then the `shots`, if any),
    and the grammars are the graph's: `wd:entityN`/`wdt:relationN` only, each relation's mapping line one of
    the graph's properties exactly.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        mode: str,
        *,
        shots: ShotSource | None = None,
        k_shots: int = 5,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_tokens: int = 256,
        temperature: float = 0.0,
        constrain: str = "auto",
        grammar_field: str = "grammar",
        two_step: bool = True,
        extra_body: Mapping[str, Any] | None = None,
        shot_context: Callable[[Sequence[str]], Sequence[str]] | None = None,
        retries: int = 2,
        schema: SchemaPrompt | None = None,
    ) -> None:
        self.mode = check_mode(mode)
        if schema is not None and self.mode != "pgmr":
            raise ValueError(f"a graph's schema prompt writes SPARQL-PGMR: mode must be 'pgmr', not {mode!r}")
        if constrain not in CONSTRAIN_CHOICES:
            raise ValueError(f"constrain must be one of {', '.join(CONSTRAIN_CHOICES)}, not {constrain!r}")
        if k_shots < 0:
            raise ValueError("k_shots must be >= 0")
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        if not 0.0 <= temperature <= 2.0:
            raise ValueError("temperature must be within [0, 2]")
        if not grammar_field or any(not part for part in grammar_field.split(".")):
            raise ValueError(f"grammar_field must be a field name or a dotted path, not {grammar_field!r}")
        if not model:
            raise ValueError("model must name a model the server serves")
        self.client = ChatClient(base_url, api_key=api_key, timeout=timeout, retries=retries)
        self.model = model
        self.shots = shots
        self.k_shots = k_shots
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.constrain = constrain
        self.grammar_field = grammar_field
        self.two_step = two_step
        self.extra_body = dict(extra_body or {})
        self.shot_context = shot_context
        self.schema = schema
        self._use_grammar: bool | None = {"gbnf": True, "none": False}.get(constrain)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> ChatGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def server(self) -> str:
        return self.client.root

    def uses_grammar(self) -> bool:
        """Whether requests carry the grammar; "auto" asks the server once."""
        if self._use_grammar is None:
            try:
                models = self.client.models()
            except ServerHTTPError as exc:
                if exc.status != 404:
                    raise
                models = []  # a server without GET /v1/models is not llama.cpp, which has it
            self._use_grammar = any(m.owned_by in _LLAMA_CPP_OWNERS or m.id.endswith(".gguf") for m in models)
        return self._use_grammar

    def generate(
        self, questions: Sequence[str], *, contexts: Sequence[str] | None = None, batch_size: int = 16
    ) -> list[str]:
        check_generate_inputs(self.mode, questions, contexts, batch_size)
        if not questions:
            return []
        self.uses_grammar()  # probe once here, not from every worker thread
        all_messages = self.prompts(questions, contexts=contexts)
        with ThreadPoolExecutor(max_workers=min(batch_size, len(questions))) as pool:
            # map keeps the order; the first failure propagates out of the iteration.
            if not self._two_step_now():
                return list(pool.map(self._answer, all_messages))
            # All skeletons first, then all mapping blocks: consecutive requests share their system prompt and
            # shots' prefix, which llama.cpp servers keep in their KV cache instead of evaluating it again.
            skeletons = list(pool.map(self._skeleton, all_messages))
            return list(pool.map(self._with_mapping, all_messages, skeletons))

    def prompts(
        self, questions: Sequence[str], *, contexts: Sequence[str] | None = None
    ) -> list[list[Message]]:
        """The chat messages each question is sent with (the first request, in two-step decoding)."""
        shots = self._shots(questions)
        ctx: Sequence[str | None] = (
            contexts if self.mode in RAG_MODES and contexts is not None else [None] * len(questions)
        )
        # The schema's examples first (the same for every question: a prefix the server caches), then the
        # selected shots with the nearest last, right before the question.
        fixed = list(self.schema.examples) if self.schema else []
        system = self.schema.system if self.schema else None
        return [
            build_messages(self.mode, q, [*fixed, *reversed(s)], c, system=system)
            for q, s, c in zip(questions, shots, ctx, strict=True)
        ]

    def _shots(self, questions: Sequence[str]) -> list[list[Example]]:
        if self.shots is None or self.k_shots == 0:
            return [[] for _ in questions]
        selected = self.shots.select(list(questions), self.k_shots)
        if self.mode not in RAG_MODES or self.shot_context is None:
            return selected
        missing = list(
            dict.fromkeys(e.source for per in selected for e in per if split_source(e.source)[1] is None)
        )
        if not missing:
            return selected
        blocks = dict(zip(missing, self.shot_context(missing), strict=True))
        return [
            [
                Example(e.id, f"{e.source}\n{blocks[e.source]}", e.target, e.mode)
                if e.source in blocks
                else e
                for e in per
            ]
            for per in selected
        ]

    def _two_step_now(self) -> bool:
        return self.two_step and self.mode in PGMR_MODES and self.uses_grammar()

    def _answer(self, messages: list[Message]) -> str:
        grammar = None
        if self.uses_grammar():
            grammar = pgmr_grammar("graph") if self.schema else grammar_for_mode(self.mode)
        return strip_fences(self._chat(messages, grammar, None))

    def _skeleton(self, messages: list[Message]) -> str:
        ids: IdStyle = "graph" if self.schema else "placeholders"
        return self._chat(messages, skeleton_grammar(ids, newline=True), ["\n"]).strip()

    def _with_mapping(self, messages: list[Message], skeleton: str) -> str:
        names = placeholders_in(skeleton)
        if not names or not _balanced(skeleton):
            # A skeleton cut by the token budget cannot parse whatever follows it: no second request for it.
            return skeleton
        # The grammar caps each line (LABEL_WORDS + DESCRIPTION_WORDS words); a budget that fits every line at
        # its cap means no mapping block is ever cut short.
        budget = max(self.max_tokens, MAPPING_LINE_TOKENS * len(names))
        schema = self.schema
        grammar = (
            mapping_grammar(
                names,
                relation_lines=schema.relation_lines,
                class_lines=schema.class_lines,
                max_word_chars=GRAPH_WORD_CHARS,
            )
            if schema
            else mapping_grammar(names)
        )
        system = schema.mapping_system if schema else None
        mapping = self._chat(
            build_mapping_messages(messages, skeleton, system=system), grammar, None, max_tokens=budget
        )
        return f"{skeleton}\n{mapping.strip()}"

    def _chat(
        self,
        messages: list[Message],
        grammar: str | None,
        stop: list[str] | None,
        *,
        max_tokens: int | None = None,
    ) -> str:
        extra = (
            _with_field(self.extra_body, self.grammar_field, grammar)
            if grammar is not None
            else self.extra_body
        )
        try:
            return self.client.chat(
                messages,
                model=self.model,
                max_tokens=max_tokens or self.max_tokens,
                temperature=self.temperature,
                stop=stop,
                extra=extra,
            )
        except GeneratorError as exc:
            raise GeneratorError(f"{exc} (model {self.model!r}, mode {self.mode})") from None


def _balanced(skeleton: str) -> bool:
    try:
        check_brackets(skeleton, list(tokenize(skeleton)))
    except IntermediateQueryError:
        return False
    return True


def _with_field(body: Mapping[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """A copy of `body` with `value` at a dotted path: "grammar", or "structured_outputs.grammar" (vLLM >= 0.12)
    merged into whatever `structured_outputs` object `body` already has."""
    out = dict(body)
    head, _, rest = dotted.partition(".")
    if not rest:
        out[head] = value
        return out
    inner = out.get(head)
    out[head] = _with_field(inner if isinstance(inner, Mapping) else {}, rest, value)
    return out
