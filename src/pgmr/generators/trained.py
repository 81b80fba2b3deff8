"""Load a generator trained by `pgmr train`, whichever backend its model card names."""

from __future__ import annotations

from pathlib import Path

from pgmr.generators.base import Generator


def load_trained(
    path: Path | str,
    device: str = "cpu",
    *,
    num_beams: int | None = None,
    max_new_tokens: int | None = None,
    copy_bias: float | None = None,
    relation_copy_bias: float | None = None,
) -> Generator:
    """A `Seq2SeqGenerator`, a `CausalGenerator` or a `StructuredGenerator` (card `backend`: "seq2seq", the
    default, "causal" or "structured"; beams and copy bias do not apply to the structured backend).

    Raises ModelCardError (a ValueError) for a directory without a readable card, OSError for missing weights.
    """
    from pgmr.generators.seq2seq.card import ModelCardError, read_model_card

    backend = read_model_card(path).get("backend", "seq2seq")
    if backend not in ("seq2seq", "causal", "structured"):
        raise ModelCardError(
            f"{path}: unknown generator backend {backend!r} (expected seq2seq, causal or structured)"
        )
    if backend == "structured":
        from pgmr.generators.structured.generator import StructuredGenerator

        return StructuredGenerator.load(path, device)
    from pgmr.generators.seq2seq.generator import Seq2SeqGenerator

    loader = Seq2SeqGenerator
    if backend == "causal":
        from pgmr.generators.causal.generator import CausalGenerator

        loader = CausalGenerator
    return loader.load(
        path,
        device,
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        copy_bias=copy_bias,
        relation_copy_bias=relation_copy_bias,
    )
