"""The structured generator's network: one pretrained encoder read once, small heads for every part.

- **template**: mean-pooled question -> one of the templates seen in training;
- **slots**: learned slot queries (entity0.., relation0.., lit0..) plus the template's embedding attend
  over the question's tokens (two small transformer decoder layers), so "entity0" means the template's first
  entity whatever the question's word order;
- **entity** slot: a pointer to the span's first and last token, and a choice between "a span" and a few
  frequent entities that questions only imply ("human" for "who");
- **relation** slot: a cosine score against a table of every property of the memory, whose rows start as
  the pretrained encoder's embeddings of the property labels (an unseen property can still win on meaning),
  plus a per-property bias;
- **literal** slot: a pointer, as for entities.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn
from transformers import BertConfig, BertModel

NEG = -1e4


@dataclass(frozen=True)
class HeadConfig:
    templates: int
    relations: int
    fallbacks: int  # frequent implied entities; class 0 of an entity slot's choice is "a span"
    entity_slots: int
    relation_slots: int
    literal_slots: int
    slot_layers: int = 2
    max_span_tokens: int = 16
    # Lexical relation features (RelationLexicon); models written before they existed load without them.
    lexical_features: bool = False

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Outputs:
    template: torch.Tensor  # (B, T) logits
    entity_start: torch.Tensor  # (B, E, L)
    entity_end: torch.Tensor  # (B, E, L)
    entity_choice: torch.Tensor  # (B, E, 1 + F)
    relation: torch.Tensor  # (B, R, P)
    literal_start: torch.Tensor  # (B, K, L)
    literal_end: torch.Tensor  # (B, K, L)


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average of the token states under the mask (sentence-transformers' pooling for MiniLM)."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


class StructuredModel(nn.Module):
    def __init__(self, encoder_config: BertConfig, heads: HeadConfig) -> None:
        super().__init__()
        self.heads = heads
        self.encoder = BertModel(encoder_config, add_pooling_layer=False)
        d = encoder_config.hidden_size
        slots = heads.entity_slots + heads.relation_slots + heads.literal_slots
        self.template_head = nn.Sequential(nn.Dropout(0.1), nn.Linear(d, heads.templates))
        self.template_embedding = nn.Embedding(heads.templates, d)
        self.slot_embedding = nn.Embedding(slots, d)
        layer = nn.TransformerDecoderLayer(
            d, nhead=encoder_config.num_attention_heads, dim_feedforward=4 * d, dropout=0.1, batch_first=True
        )
        self.slot_decoder = nn.TransformerDecoder(layer, heads.slot_layers)
        self.start_query = nn.Linear(d, d)
        self.end_query = nn.Linear(d, d)
        self.literal_start_query = nn.Linear(d, d)
        self.literal_end_query = nn.Linear(d, d)
        self.token_keys = nn.Linear(d, d)
        self.entity_choice = nn.Linear(d, 1 + heads.fallbacks)
        self.relation_query = nn.Linear(d, d)
        self.relation_table = nn.Parameter(torch.zeros(heads.relations, d))
        self.relation_bias = nn.Parameter(torch.zeros(heads.relations))
        self.relation_scale = nn.Parameter(torch.tensor(20.0))
        # Weights of the lexical features (label / alias / label length in the question) per relation slot.
        self.relation_feature_weight: nn.Parameter | None = None
        if heads.lexical_features:
            self.relation_feature_weight = nn.Parameter(
                torch.tensor([[3.0, 1.5, 1.0]]).repeat(heads.relation_slots, 1)
            )

    def init_relation_table(self, embeddings: torch.Tensor) -> None:
        """Rows from (already normalised) label embeddings of the encoder's own space."""
        if embeddings.shape != self.relation_table.shape:
            raise ValueError(
                f"relation table {tuple(self.relation_table.shape)} != {tuple(embeddings.shape)}"
            )
        with torch.no_grad():
            self.relation_table.copy_(embeddings)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def template_logits(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.template_head(mean_pool(hidden, attention_mask))

    def slot_outputs(
        self,
        hidden: torch.Tensor,
        attention_mask: torch.Tensor,
        templates: torch.Tensor,
        span_mask: tuple[torch.Tensor, torch.Tensor],
        relation_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, ...]:
        """Slot logits for the given templates (gold ones in training, predicted ones in generation)."""
        h = self.heads
        batch = hidden.shape[0]
        queries = self.slot_embedding.weight.unsqueeze(0).expand(batch, -1, -1)
        queries = queries + self.template_embedding(templates).unsqueeze(1)
        slots = self.slot_decoder(queries, hidden, memory_key_padding_mask=attention_mask == 0)
        entity = slots[:, : h.entity_slots]
        relation = slots[:, h.entity_slots : h.entity_slots + h.relation_slots]
        literal = slots[:, h.entity_slots + h.relation_slots :]
        keys = self.token_keys(hidden)  # (B, L, d)
        starts, ends = span_mask

        def point(query: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
            scores = torch.einsum("bsd,bld->bsl", query, keys) / keys.shape[-1] ** 0.5
            return scores.masked_fill(~allowed.unsqueeze(1), NEG)

        table = nn.functional.normalize(self.relation_table, dim=-1)
        rel_query = nn.functional.normalize(self.relation_query(relation), dim=-1)
        relation_logits = self.relation_scale * rel_query @ table.T + self.relation_bias
        if relation_features is not None and self.relation_feature_weight is not None:
            weight = self.relation_feature_weight.to(relation_features.dtype)
            relation_logits = relation_logits + torch.einsum("bpf,rf->brp", relation_features, weight)
        return (
            point(self.start_query(entity), starts),
            point(self.end_query(entity), ends),
            self.entity_choice(entity),
            relation_logits,
            point(self.literal_start_query(literal), starts),
            point(self.literal_end_query(literal), ends),
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        span_starts: torch.Tensor,
        span_ends: torch.Tensor,
        templates: torch.Tensor | None = None,
        relation_features: torch.Tensor | None = None,
    ) -> Outputs:
        hidden = self.encode(input_ids, attention_mask)
        template = self.template_logits(hidden, attention_mask)
        chosen = template.argmax(-1) if templates is None else templates
        slots = self.slot_outputs(hidden, attention_mask, chosen, (span_starts, span_ends), relation_features)
        return Outputs(template, *slots)


def best_spans(
    start: torch.Tensor, end: torch.Tensor, max_tokens: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per slot, the (first, last) token pair with the highest start + end log-probability, first <= last.

    start, end: (..., L) logits. Returns first, last (..., ) and the pair's log-probability.
    """
    log_start = start.log_softmax(-1)
    log_end = end.log_softmax(-1)
    length = start.shape[-1]
    pair = log_start.unsqueeze(-1) + log_end.unsqueeze(-2)  # (..., L, L): [first, last]
    offsets = torch.arange(length)
    gap = offsets.view(1, -1) - offsets.view(-1, 1)
    allowed = (gap >= 0) & (gap < max_tokens)
    pair = pair.masked_fill(~allowed, float("-inf"))
    flat = pair.flatten(-2)
    score, index = flat.max(-1)
    return index // length, index % length, score
