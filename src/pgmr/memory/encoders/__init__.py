"""Concrete encoders and a loader by name."""

from __future__ import annotations

from pgmr.memory.encoder import Encoder
from pgmr.memory.encoders.sentence_transformers import DEFAULT_MODEL_NAME, SentenceTransformerEncoder

__all__ = ["DEFAULT_MODEL_NAME", "SentenceTransformerEncoder", "load_encoder"]


def load_encoder(name: str | None = None, device: str = "cpu", precision: str = "fp32") -> Encoder:
    """The encoder a name (as recorded in a memory's manifest) stands for; None is the default model.

    Every name is a sentence-transformers model: the bundled all-MiniLM-L6-v2, a local directory or a hub name.
    `precision` (pgmr.precision): float32 unless asked, so that a memory built with it does not depend on the
    machine; query encoding (`Memory.load`) asks for `auto`.
    """
    return SentenceTransformerEncoder(name, device=device, precision=precision)
