"""Building a chat generator's few-shot pool from a dataset, as the CLI does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pgmr.conversion import ConversionSummary, convert_records
from pgmr.datasets import load_any
from pgmr.generators.base import PGMR_MODES, GeneratorError, check_mode
from pgmr.generators.chat.client import ChatClient
from pgmr.generators.chat.generator import CONSTRAIN_CHOICES, ChatGenerator
from pgmr.generators.chat.shots import ShotSelector
from pgmr.generators.examples import Example, build_examples
from pgmr.kg.catalog import LabelCatalog
from pgmr.memory.encoder import Encoder


def shot_examples(
    source: str,
    data_dir: Path,
    mode: str,
    *,
    fmt: str = "auto",
    limit: int | None = None,
    max_description_words: int | None = 8,
) -> list[Example]:
    """Examples of `mode` from a dataset (name or file), converted with the data directory's labels.

    RAG examples come without their candidate block: retrieving candidates for a whole training set is slow,
    so `ChatGenerator(shot_context=...)` retrieves them for the few shots actually selected.
    Raises DatasetError for an unknown or unreadable dataset.
    """
    check_mode(mode)
    records = load_any(source, data_dir, fmt).records
    records = records[:limit] if limit else records
    converted = list(convert_records(records, LabelCatalog.from_data_dir(data_dir), ConversionSummary()))
    base_mode = "pgmr" if mode in PGMR_MODES else "direct"
    examples = build_examples(converted, base_mode, max_description_words=max_description_words)
    return [replace(e, mode=mode) for e in examples]


def shot_selector(
    source: str,
    data_dir: Path,
    mode: str,
    *,
    encoder: Encoder | None = None,
    fmt: str = "auto",
    limit: int | None = None,
    backend: str = "faiss",
) -> ShotSelector:
    examples = shot_examples(source, data_dir, mode, fmt=fmt, limit=limit)
    if not examples:
        raise ValueError(f"{source}: no record converts to a {mode} example; nothing to use as shots")
    return ShotSelector(examples, encoder, backend=backend)


def chat_generator_for_cli(
    server: str,
    mode: str,
    settings: Any,
    *,
    model: str | None,
    shots: str,
    shots_limit: int | None,
    k_shots: int,
    constrain: str,
    grammar_field: str,
    api_key: str | None,
    timeout: float,
    temperature: float,
    max_tokens: int,
    shot_context: Callable[[Sequence[str]], Sequence[str]] | None = None,
) -> ChatGenerator:
    """What `pgmr generate URL ...` runs. Raises ValueError, DatasetError, FileNotFoundError (no data
    directory) or GeneratorError (server unreachable), each with a message to print as it is."""
    if constrain not in CONSTRAIN_CHOICES:
        raise ValueError(f"--constrain must be one of {', '.join(CONSTRAIN_CHOICES)}, not {constrain!r}")
    if model is None:
        with ChatClient(server, api_key=api_key, timeout=timeout) as client:
            served = client.models()
        if not served:
            raise GeneratorError(f"chat server {client.root} lists no model; pass --llm-model")
        model = served[0].id
    selector = None
    if k_shots > 0:
        selector = shot_selector(shots, settings.data_dir, mode, limit=shots_limit)
    return ChatGenerator(
        server,
        model,
        mode,
        shots=selector,
        k_shots=k_shots,
        api_key=api_key,
        timeout=timeout,
        max_tokens=max_tokens,
        temperature=temperature,
        constrain=constrain,
        grammar_field=grammar_field,
        shot_context=shot_context,
    )
