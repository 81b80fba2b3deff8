"""Validation of the structured generator: component and whole-frame accuracy with predicted templates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pgmr.generators.structured.decoding import RelationLexicon, predict_frames
from pgmr.generators.structured.frames import apply_transform, literal_marks
from pgmr.generators.structured.model import StructuredModel
from pgmr.generators.structured.ranker import RelationRanker
from pgmr.generators.structured.targets import FrameTarget, Vocabulary


def _literal_texts(target: FrameTarget) -> list[str]:
    return [apply_transform(s.span.text(target.question), s.transform) for s in target.literals]


@torch.no_grad()
def evaluate(
    model: StructuredModel,
    vocab: Vocabulary,
    tokenizer: Any,
    targets: Sequence[FrameTarget],
    max_source_len: int,
    canonical: dict[str, str],
    lexicon: RelationLexicon,
    ranker: RelationRanker | None = None,
) -> dict[str, float]:
    """Component and whole-frame accuracy of what generation writes (predicted templates), on `targets`;
    with a relation `ranker`, as the generator that uses it writes."""
    model.eval()
    counts = dict.fromkeys(
        ("template", "entity", "entity_n", "relation", "relation_n", "literal", "literal_n", "frame"), 0
    )
    for start in range(0, len(targets), 64):
        chunk = list(targets[start : start + 64])
        frames = predict_frames(
            model, tokenizer, vocab, [t.question for t in chunk], max_source_len, lexicon, ranker=ranker
        )
        for t, f in zip(chunk, frames, strict=True):
            gold_template = canonical.get(t.template, t.template)
            ok_template = f.template == gold_template
            ok_entities = ok_template
            for e, (span, wid) in enumerate(zip(t.entity_spans, t.entity_ids, strict=True)):
                k = vocab.fallback(wid)
                gold = (
                    span.text(t.question)
                    if span is not None
                    else (vocab.fallbacks[k].label if k is not None else None)
                )
                hit = ok_template and e < len(f.entities) and f.entities[e].label == gold
                counts["entity"] += hit
                ok_entities &= hit
            counts["entity_n"] += len(t.entity_ids)
            ok_relations = ok_template
            for r, wid in enumerate(t.relation_ids):
                k = vocab.relation(wid)
                hit = (
                    ok_template
                    and k is not None
                    and r < len(f.relations)
                    and f.relations[r].label == vocab.relations[k].label
                )
                counts["relation"] += hit
                ok_relations &= hit
            counts["relation_n"] += len(t.relation_ids)
            gold_literals = _literal_texts(t)
            got = [
                apply_transform(x, tr)
                for x, (_, tr) in zip(f.literals, literal_marks(f.template), strict=False)
            ]
            ok_literals = ok_template and got == gold_literals
            counts["literal"] += sum(ok_template and a == b for a, b in zip(got, gold_literals, strict=False))
            counts["literal_n"] += len(gold_literals)
            counts["template"] += ok_template
            counts["frame"] += ok_template and ok_entities and ok_relations and ok_literals
    model.train()
    n = max(len(targets), 1)
    return {
        "template_accuracy": counts["template"] / n,
        "entity_accuracy": counts["entity"] / max(counts["entity_n"], 1),
        "relation_accuracy": counts["relation"] / max(counts["relation_n"], 1),
        "literal_accuracy": counts["literal"] / max(counts["literal_n"], 1),
        "frame_exact": counts["frame"] / n,
    }
