"""Train a Hugging Face generator of either architecture (`train_generator`: what `pgmr train` runs), and load
a generator trained by `pgmr train`, whichever backend its model card names (`load_trained`).

Imports the backends lazily: this module is imported where torch may not be wanted yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgmr.generators.base import Generator
from pgmr.generators.examples import Example
from pgmr.precision import DEFAULT_PRECISION

if TYPE_CHECKING:
    from pgmr.generators.seq2seq.config import TrainConfig, TrainResult
    from pgmr.generators.seq2seq.trainer import Architecture


def train_generator(
    train_examples: Sequence[Example],
    val_examples: Sequence[Example],
    out_dir: Path | str,
    config: TrainConfig,
    *,
    data_info: Mapping[str, Any] | None = None,
) -> TrainResult:
    """Train (or resume) an encoder-decoder or a decoder-only generator into `out_dir`, picked by the preset
    (`llama-*` presets are decoder-only) or, for a `base`, by its config; the kept model ends up in
    `out_dir/model`. `data_info` is recorded in the model card as given."""
    from pgmr.generators.causal.model import CAUSAL_PRESETS
    from pgmr.generators.seq2seq.config import check_preset
    from pgmr.generators.seq2seq.encoder_decoder import SEQ2SEQ_PRESETS
    from pgmr.generators.seq2seq.train import train_model

    check_preset(config, (*SEQ2SEQ_PRESETS, *CAUSAL_PRESETS))
    return train_model(train_examples, val_examples, out_dir, config, _architecture, data_info=data_info)


def _architecture(config: TrainConfig) -> Architecture:
    from pgmr.generators.causal.model import CAUSAL_PRESETS, is_causal_base
    from pgmr.generators.causal.train import DecoderOnly
    from pgmr.generators.seq2seq.encoder_decoder import EncoderDecoder

    causal = config.preset in CAUSAL_PRESETS if config.base is None else is_causal_base(config.base)
    return DecoderOnly() if causal else EncoderDecoder()


def load_trained(
    path: Path | str,
    device: str = "cpu",
    *,
    num_beams: int | None = None,
    max_new_tokens: int | None = None,
    copy_bias: float | None = None,
    relation_copy_bias: float | None = None,
    precision: str = DEFAULT_PRECISION,
) -> Generator:
    """A `Seq2SeqGenerator`, a `CausalGenerator`, a `StructuredGenerator` or an `EnsembleGenerator` of those
    (card `backend`: "seq2seq", the default, "causal", "structured" or "ensemble"; beams and copy bias do not
    apply to the structured backend, and go to every member of an ensemble). `precision` (pgmr.precision: the
    weights' format for inference, `auto` by default) applies to every backend and every member.

    Raises ModelCardError (a ValueError) for a directory without a readable card, OSError for missing weights.
    """
    from pgmr.generators.seq2seq.card import ModelCardError, read_model_card

    backend = read_model_card(path).get("backend", "seq2seq")
    if backend not in ("seq2seq", "causal", "structured", "ensemble"):
        raise ModelCardError(
            f"{path}: unknown generator backend {backend!r} (expected seq2seq, causal, structured or ensemble)"
        )
    if backend == "ensemble":
        from pgmr.generators.ensemble import EnsembleGenerator

        return EnsembleGenerator.load(
            path,
            device,
            load_member=load_trained,
            num_beams=num_beams,
            max_new_tokens=max_new_tokens,
            copy_bias=copy_bias,
            relation_copy_bias=relation_copy_bias,
            precision=precision,
        )
    if backend == "structured":
        from pgmr.generators.structured.generator import StructuredGenerator

        return StructuredGenerator.load(path, device, precision=precision)
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
        precision=precision,
    )
