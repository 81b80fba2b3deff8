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
from pgmr.generators.chat.schema import SchemaError, read_schema
from pgmr.generators.chat.schema_prompt import SchemaPrompt, schema_prompt
from pgmr.generators.chat.shots import ShotSelector
from pgmr.generators.examples import Example, build_examples
from pgmr.kg.catalog import LabelCatalog
from pgmr.kg.graph import GraphCatalog
from pgmr.memory import Memory
from pgmr.memory.encoder import Encoder
from pgmr.memory.graph_file import graph_catalog
from pgmr.stores import OxigraphStore, SparqlStore, StoreError, open_store


def shot_examples(
    source: str,
    data_dir: Path,
    mode: str,
    *,
    fmt: str = "auto",
    limit: int | None = None,
    max_description_words: int | None = 8,
    catalog: LabelCatalog | None = None,
) -> list[Example]:
    """Examples of `mode` from a dataset (name or file), converted with `catalog`'s labels (default: the data
    directory's, Wikidata's; a graph memory's catalog for pairs over that graph).

    RAG examples come without their candidate block: retrieving candidates for a whole training set is slow,
    so `ChatGenerator(shot_context=...)` retrieves them for the few shots actually selected.
    Raises DatasetError for an unknown or unreadable dataset.
    """
    check_mode(mode)
    records = load_any(source, data_dir, fmt).records
    records = records[:limit] if limit else records
    catalog = catalog if catalog is not None else LabelCatalog.from_data_dir(data_dir)
    converted = list(convert_records(records, catalog, ConversionSummary()))
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
    catalog: LabelCatalog | None = None,
) -> ShotSelector:
    examples = shot_examples(source, data_dir, mode, fmt=fmt, limit=limit, catalog=catalog)
    if not examples:
        raise ValueError(f"{source}: no record converts to a {mode} example; nothing to use as shots")
    return ShotSelector(examples, encoder, backend=backend)


def graph_store(sources: Sequence[str], *, timeout: float = 30.0) -> SparqlStore:
    """A store of the graph a memory was built from: its endpoint, its one file, or its files loaded into one
    in-memory store. Raises SchemaError naming what cannot be opened."""
    try:
        if len(sources) == 1:
            return open_store(sources[0], timeout=timeout)
        store = OxigraphStore.in_memory(timeout=timeout)
        for source in sources:
            store.load(source)
        return store
    except (StoreError, OSError) as exc:
        raise SchemaError(
            f"cannot open the graph the memory was built from ({', '.join(sources)}): {exc}"
        ) from None


def memory_catalog(memory: Memory) -> LabelCatalog:
    """The catalog a graph memory was built from (Wikidata memories: SchemaError)."""
    if memory.graph is None:
        raise SchemaError("a Wikidata memory has no graph schema to prompt with; give a graph's memory")
    return graph_catalog(memory.entities.rows, memory.relations.rows, memory.graph)


def graph_prompt(memory: Memory, *, timeout: float = 30.0) -> SchemaPrompt:
    """The schema prompt of a graph memory: labels from the memory, structure from the graph it was built
    from (its `graph.json` sources). Raises SchemaError."""
    catalog = memory_catalog(memory)
    assert memory.graph is not None and isinstance(catalog, GraphCatalog)
    store = graph_store(memory.graph.sources, timeout=timeout)
    try:
        return schema_prompt(read_schema(store, catalog, timeout=timeout))
    finally:
        store.close()


def chat_generator_for_cli(
    server: str,
    mode: str,
    settings: Any,
    *,
    model: str | None,
    shots: str | None,
    shots_limit: int | None,
    k_shots: int,
    constrain: str,
    grammar_field: str,
    api_key: str | None,
    timeout: float,
    temperature: float,
    max_tokens: int,
    shot_context: Callable[[Sequence[str]], Sequence[str]] | None = None,
    schema: SchemaPrompt | None = None,
    catalog: LabelCatalog | None = None,
) -> ChatGenerator:
    """What `pgmr generate URL ...` runs. Raises ValueError, DatasetError, FileNotFoundError (no data
    directory) or GeneratorError (server unreachable), each with a message to print as it is.
    `schema`: a graph's schema prompt; `catalog`: what `shots` are converted with (default Wikidata's)."""
    if constrain not in CONSTRAIN_CHOICES:
        raise ValueError(f"--constrain must be one of {', '.join(CONSTRAIN_CHOICES)}, not {constrain!r}")
    if model is None:
        with ChatClient(server, api_key=api_key, timeout=timeout) as client:
            served = client.models()
        if not served:
            raise GeneratorError(f"chat server {client.root} lists no model; pass --llm-model")
        model = served[0].id
    selector = None
    if k_shots > 0 and shots:
        selector = shot_selector(shots, settings.data_dir, mode, limit=shots_limit, catalog=catalog)
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
        schema=schema,
    )
