"""Greedy decoding of the warm-started encoder-decoders (a BERT encoder, MiniLM in the presets, and a BERT decoder
with cross-attention) in a loop of plain tensor operations on the model's own weights.

Why: at batch 1 one step of the shipped 2-layer decoder is about 8M multiply-adds, far under a millisecond, yet
`model.generate` takes ~3.3 ms per step on this machine: the time goes to per-call overhead (cache objects,
mask building, module dispatch: 111k module calls for 40 questions; docs/research-log.md, 2026-12-04), not
arithmetic. This loop does the same arithmetic with the key/value caches preallocated, the self-attention's
three projections fused into one, the encoder's keys and values projected once per batch and, in bfloat16,
every weight packed once for oneDNN.

It is transformers' greedy search (`num_beams=1, do_sample=False`) step for step: the same float32 scores handed
to the same logits processors (the copy bias), the same argmax, finished rows padded. Attention may add in a
different order than transformers' kernel, so a near tie can in principle break the other way; the tests compare
the two token for token on a trained model, and docs/research-log.md ("2026-12-05 — pgmr's own greedy loop")
records the agreement on validation.
`Seq2SeqGenerator` uses it whenever `supports(model)` holds and decoding is greedy; everything else (T5, beams,
decoder-only models) stays on `generate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers import LogitsProcessor


def supports(model: Any) -> bool:
    """Whether `model` is an encoder-decoder this loop can run: a BERT decoder with cross-attention, absolute
    positions and the plain GELU, reading the encoder's states directly (no projection between them)."""
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) != "encoder-decoder":
        return False
    decoder = getattr(model, "decoder", None)
    dconf = getattr(decoder, "config", None)
    return (
        getattr(dconf, "model_type", None) == "bert"
        and bool(getattr(dconf, "add_cross_attention", False))
        and getattr(dconf, "hidden_act", None) == "gelu"
        and getattr(dconf, "position_embedding_type", "absolute") == "absolute"
        and getattr(model, "enc_to_dec_proj", None) is None
        and hasattr(decoder, "bert")
        and hasattr(decoder, "cls")
    )


@dataclass(frozen=True)
class _Norm:
    weight: torch.Tensor
    bias: torch.Tensor
    eps: float

    @classmethod
    def of(cls, module: Any) -> _Norm:
        return cls(module.weight, module.bias, float(module.eps))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)


def _prepack(weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor | None:
    """The weight reordered once for oneDNN (the CPU bfloat16 matmul), or None where that does not apply.

    Why: for a bfloat16 weight, `F.linear` on CPU lays the weight out for oneDNN again on every call, which at
    a decoding step's few rows costs more than the product itself; a weight packed once makes each call ~2x
    faster on this machine (bench/greedy_loop.py). The packed call must give exactly `F.linear`'s numbers, so
    a probe checks that once per weight; anything else (another dtype or device, an op this build lacks, a
    mismatch) keeps plain `F.linear`.
    """
    if (
        weight.dtype != torch.bfloat16
        or weight.device.type != "cpu"
        or not torch.backends.mkldnn.is_available()
    ):
        return None
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, 1)
        probe = torch.randn(3, 1, weight.shape[1], generator=torch.Generator().manual_seed(0)).to(
            weight.dtype
        )
        same = torch.equal(_packed_linear(probe, packed, bias), F.linear(probe, weight, bias))
    except (RuntimeError, AttributeError):
        return None
    return packed if same else None


def _packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


@dataclass(frozen=True)
class _Linear:
    weight: torch.Tensor
    bias: torch.Tensor | None
    packed: torch.Tensor | None

    @classmethod
    def of(cls, module: Any) -> _Linear:
        with torch.inference_mode():
            return cls(module.weight, module.bias, _prepack(module.weight, module.bias))

    @classmethod
    def fused(cls, *modules: Any) -> _Linear:
        with torch.inference_mode():
            weight = torch.cat([m.weight for m in modules]).contiguous()
            bias = torch.cat([m.bias for m in modules]).contiguous()
            return cls(weight, bias, _prepack(weight, bias))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None:
            return _packed_linear(x, self.packed, self.bias)
        return F.linear(x, self.weight, self.bias)


@dataclass(frozen=True)
class _Layer:
    qkv: _Linear
    self_out: _Linear
    self_norm: _Norm
    cross_query: _Linear
    cross_key: _Linear
    cross_value: _Linear
    cross_out: _Linear
    cross_norm: _Norm
    ff_in: _Linear
    ff_out: _Linear
    ff_norm: _Norm


class GreedyDecoder:
    """The decoder of one encoder-decoder, unpacked for stepping. Build it once per model (and again after the
    model's weights change dtype or device): it holds references to the weights plus the fused projections."""

    def __init__(self, model: Any) -> None:
        if not supports(model):
            raise ValueError(
                "GreedyDecoder needs an encoder-decoder with a BERT decoder (the minilm presets)"
            )
        self.model = model
        decoder = model.decoder
        config = decoder.config
        self.heads = int(config.num_attention_heads)
        self.head_size = int(config.hidden_size) // self.heads
        embeddings = decoder.bert.embeddings
        self.word = embeddings.word_embeddings.weight
        self.position = embeddings.position_embeddings.weight
        self.token_type = embeddings.token_type_embeddings.weight[0]
        self.embed_norm = _Norm.of(embeddings.LayerNorm)
        layers = []
        for layer in decoder.bert.encoder.layer:
            attn, cross = layer.attention, layer.crossattention
            layers.append(
                _Layer(
                    qkv=_Linear.fused(attn.self.query, attn.self.key, attn.self.value),
                    self_out=_Linear.of(attn.output.dense),
                    self_norm=_Norm.of(attn.output.LayerNorm),
                    cross_query=_Linear.of(cross.self.query),
                    cross_key=_Linear.of(cross.self.key),
                    cross_value=_Linear.of(cross.self.value),
                    cross_out=_Linear.of(cross.output.dense),
                    cross_norm=_Norm.of(cross.output.LayerNorm),
                    ff_in=_Linear.of(layer.intermediate.dense),
                    ff_out=_Linear.of(layer.output.dense),
                    ff_norm=_Norm.of(layer.output.LayerNorm),
                )
            )
        self.layers = tuple(layers)
        head = decoder.cls.predictions
        self.head_transform = _Linear.of(head.transform.dense)
        self.head_norm = _Norm.of(head.transform.LayerNorm)
        self.head_out = _Linear.of(head.decoder)
        self.dtype = self.word.dtype
        self.device = self.word.device
        self.max_positions = int(self.position.shape[0])

    def matches(self, model: Any) -> bool:
        """Still valid for `model` (the same weights, dtype and device)?"""
        word = model.decoder.bert.embeddings.word_embeddings.weight
        # Module.to() swaps a parameter's data in place, so the dtype and device are compared, not just identity.
        return (
            model is self.model
            and word is self.word
            and word.dtype == self.dtype
            and word.device == self.device
        )

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, length, hidden) -> (batch, heads, length, head size)."""
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_size).transpose(1, 2)

    def generate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        *,
        max_new_tokens: int,
        start_id: int,
        eos_id: int,
        pad_id: int,
        processor: LogitsProcessor | None = None,
    ) -> torch.Tensor:
        """Token ids (batch, 1 + generated), starting with `start_id`, as `model.generate` returns them."""
        steps = min(max_new_tokens, self.max_positions)
        batch = int(input_ids.shape[0])
        with torch.inference_mode():
            encoded = self.model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
            states = encoded.last_hidden_state.to(self.dtype)
            # Padded source positions are masked out of cross-attention; a batch without padding needs no mask.
            cross_mask = None
            if not bool(attention_mask.all()):
                cross_mask = attention_mask.bool()[:, None, None, :]
            cross = [
                (self._split(layer.cross_key(states)), self._split(layer.cross_value(states)))
                for layer in self.layers
            ]
            shape = (batch, self.heads, steps, self.head_size)
            keys = [torch.empty(shape, dtype=self.dtype, device=self.device) for _ in self.layers]
            values = [torch.empty(shape, dtype=self.dtype, device=self.device) for _ in self.layers]
            tokens = torch.full((batch, steps + 1), pad_id, dtype=torch.long, device=self.device)
            tokens[:, 0] = start_id
            unfinished = torch.ones(batch, dtype=torch.bool, device=self.device)
            base = self.position + self.token_type  # every target token has token type 0
            length = 1
            for step in range(steps):
                x = self.embed_norm(self.word[tokens[:, step]] + base[step])[:, None, :]
                for i, layer in enumerate(self.layers):
                    q, k, v = layer.qkv(x).split(self.heads * self.head_size, dim=-1)
                    keys[i][:, :, step] = k[:, 0].view(batch, self.heads, self.head_size)
                    values[i][:, :, step] = v[:, 0].view(batch, self.heads, self.head_size)
                    # Only past positions are cached, so attending to all of them is the causal mask.
                    attended = F.scaled_dot_product_attention(
                        self._split(q), keys[i][:, :, : step + 1], values[i][:, :, : step + 1]
                    )
                    x = layer.self_norm(layer.self_out(attended.transpose(1, 2).reshape(x.shape)) + x)
                    attended = F.scaled_dot_product_attention(
                        self._split(layer.cross_query(x)), *cross[i], attn_mask=cross_mask
                    )
                    x = layer.cross_norm(layer.cross_out(attended.transpose(1, 2).reshape(x.shape)) + x)
                    x = layer.ff_norm(layer.ff_out(F.gelu(layer.ff_in(x))) + x)
                hidden = self.head_norm(F.gelu(self.head_transform(x[:, 0])))
                # float32 scores, as generate hands the processors (a fresh tensor they may change in place).
                scores = self.head_out(hidden).to(torch.float32, copy=True)
                if processor is not None:
                    scores = processor(tokens[:, : step + 1], scores)
                chosen = torch.where(unfinished, scores.argmax(-1), pad_id)
                tokens[:, step + 1] = chosen
                length = step + 2
                unfinished &= chosen != eos_id
                if not bool(unfinished.any()):
                    break
        return tokens[:, :length]


__all__ = ["GreedyDecoder", "supports"]
