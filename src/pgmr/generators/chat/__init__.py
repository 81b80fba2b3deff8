"""Chat-LLM generator backend: any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp) prompted with
the nearest training examples, optionally grammar-constrained (GBNF). See docs/llm-backend.md."""

from __future__ import annotations

from pgmr.generators.chat.client import ChatClient, ServerHTTPError, ServerModel, api_root
from pgmr.generators.chat.generator import CONSTRAIN_CHOICES, ChatGenerator, placeholders_in
from pgmr.generators.chat.grammar import grammar_for_mode, mapping_grammar, pgmr_grammar, skeleton_grammar
from pgmr.generators.chat.prompts import build_mapping_messages, build_messages, strip_fences, system_prompt
from pgmr.generators.chat.shots import SHOT_BACKENDS, ShotSelector, ShotSource

__all__ = [
    "CONSTRAIN_CHOICES",
    "SHOT_BACKENDS",
    "ChatClient",
    "ChatGenerator",
    "ServerHTTPError",
    "ServerModel",
    "ShotSelector",
    "ShotSource",
    "api_root",
    "build_mapping_messages",
    "build_messages",
    "grammar_for_mode",
    "mapping_grammar",
    "pgmr_grammar",
    "placeholders_in",
    "skeleton_grammar",
    "strip_fences",
    "system_prompt",
]
