"""Questions -> tensors, and model outputs -> frames -> SPARQL-PGMR text with a confidence per placeholder."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from transformers import PreTrainedTokenizerBase

from pgmr.generators.structured.frames import (
    Span,
    literal_marks,
    normalize_question,
    placeholder_counts,
    render_template,
)
from pgmr.generators.structured.model import Outputs, StructuredModel, best_spans
from pgmr.generators.structured.ranker import RelationRanker, choice_text
from pgmr.generators.structured.targets import Vocabulary
from pgmr.query.model import IntermediateQuery, Placeholder


@dataclass(frozen=True)
class Encoded:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    span_starts: torch.Tensor  # (B, L) bool: a token may begin a span (it begins a word)
    span_ends: torch.Tensor  # (B, L) bool: a token may end a span (it ends a word)
    offsets: list[list[tuple[int, int]]]  # per question, per token: character offsets ((0, 0): special)
    questions: list[str]
    relation_features: torch.Tensor | None = None  # (B, P, RELATION_FEATURES), see RelationLexicon


def encode_questions(
    tokenizer: PreTrainedTokenizerBase,
    questions: Sequence[str],
    max_length: int,
    lexicon: RelationLexicon | None = None,
) -> Encoded:
    normalized = [normalize_question(q) for q in questions]
    batch = tokenizer(
        normalized,
        padding=True,
        truncation=True,
        max_length=max_length,
        return_offsets_mapping=True,
        return_tensors="pt",
    )
    offsets = [[(int(a), int(b)) for a, b in row] for row in batch["offset_mapping"].tolist()]
    starts = torch.zeros(batch["input_ids"].shape, dtype=torch.bool)
    ends = torch.zeros_like(starts)
    for b in range(len(normalized)):
        words = batch.word_ids(b)
        for i, word in enumerate(words):
            if word is None:
                continue
            starts[b, i] = i == 0 or words[i - 1] != word
            ends[b, i] = i + 1 >= len(words) or words[i + 1] != word
    features = lexicon.features(normalized) if lexicon is not None else None
    return Encoded(batch["input_ids"], batch["attention_mask"], starts, ends, offsets, normalized, features)


def token_span(offsets: Sequence[tuple[int, int]], span: Span) -> tuple[int, int] | None:
    """(first, last) token covering the characters of `span`, or None when truncation cut it off."""
    first = last = None
    for i, (a, b) in enumerate(offsets):
        if b <= a:
            continue
        if first is None and b > span.start:
            first = i
        if a < span.end:
            last = i
    if first is None or last is None or last < first or offsets[last][1] < span.end:
        return None
    return first, last


@dataclass(frozen=True)
class SlotValue:
    label: str
    description: str
    confidence: float  # the model's probability of this value, given the template


@dataclass(frozen=True)
class Frame:
    template: str
    template_confidence: float
    entities: tuple[SlotValue, ...]
    relations: tuple[SlotValue, ...]
    literals: tuple[str, ...]
    literal_confidences: tuple[float, ...]

    def query(self) -> IntermediateQuery:
        skeleton = render_template(self.template, self.literals)
        placeholders = [
            Placeholder(f"entity{i}", "entity", v.label, v.description) for i, v in enumerate(self.entities)
        ] + [
            Placeholder(f"relation{i}", "relation", v.label, v.description)
            for i, v in enumerate(self.relations)
        ]
        return IntermediateQuery(skeleton, tuple(placeholders))

    def confidences(self) -> dict[str, float]:
        """Per placeholder, the probability of its value times the template's (what a refusal rule reads)."""
        out = {f"entity{i}": v.confidence * self.template_confidence for i, v in enumerate(self.entities)}
        out.update(
            {f"relation{i}": v.confidence * self.template_confidence for i, v in enumerate(self.relations)}
        )
        return out


def _span_text(question: str, offsets: Sequence[tuple[int, int]], first: int, last: int) -> str:
    return question[offsets[first][0] : offsets[last][1]].strip()


def rerank_relations(
    ranker: RelationRanker,
    relation_logp: torch.Tensor,
    slots: Sequence[int],
    questions: Sequence[str],
    vocab: Vocabulary,
) -> dict[tuple[int, int], list[tuple[int, float]]]:
    """Per (question, relation slot) in use, the structured model's top_k properties ordered by the ranker's
    combined score, each with its probability: the combined scores' softmax over the top_k times the share
    of the structured model's probability the top_k hold. All pairs go through the ranker in one call."""
    k = min(ranker.config.top_k, relation_logp.shape[-1])
    keys: list[tuple[int, int]] = []
    candidates: list[tuple[list[int], list[float]]] = []
    pairs: list[tuple[str, str]] = []
    for b, n in enumerate(slots):
        for r in range(min(n, relation_logp.shape[1])):
            best = torch.topk(relation_logp[b, r], k)
            indexes = [int(i) for i in best.indices]
            keys.append((b, r))
            candidates.append((indexes, [float(v) for v in best.values]))
            pairs.extend(
                (questions[b], choice_text(vocab.relations[i].label, vocab.relations[i].description))
                for i in indexes
            )
    if not pairs:
        return {}
    scores = ranker.scores(pairs)
    out = {}
    for n, (key, (indexes, logps)) in enumerate(zip(keys, candidates, strict=True)):
        combined = ranker.combine(logps, scores[n * k : (n + 1) * k])
        top = max(combined)
        weights = [math.exp(c - top) for c in combined]
        mass = sum(math.exp(lp) for lp in logps) / sum(weights)
        order = sorted(range(k), key=lambda j: -combined[j])
        out[key] = [(indexes[j], weights[j] * mass) for j in order]
    return out


def decode_frames(
    outputs: Outputs,
    templates: torch.Tensor,
    encoded: Encoded,
    vocab: Vocabulary,
    max_span_tokens: int,
    ranker: RelationRanker | None = None,
) -> list[Frame]:
    """One frame per question for the given template indexes (the argmax, or a reranker's choice); with a
    `ranker`, relation slots take the ranker's order of the structured model's top candidates."""
    template_probs = outputs.template.float().softmax(-1)
    ent_first, ent_last, ent_score = best_spans(
        outputs.entity_start.float(), outputs.entity_end.float(), max_span_tokens
    )
    lit_first, lit_last, lit_score = best_spans(
        outputs.literal_start.float(), outputs.literal_end.float(), max_span_tokens
    )
    choice_probs = outputs.entity_choice.float().softmax(-1)
    relation_logp = outputs.relation.float().log_softmax(-1)
    counts = [placeholder_counts(vocab.templates[int(templates[b])]) for b in range(len(encoded.questions))]
    reranked = (
        rerank_relations(ranker, relation_logp, [n for _, n in counts], encoded.questions, vocab)
        if ranker is not None
        else {}
    )
    frames = []
    for b, question in enumerate(encoded.questions):
        t = int(templates[b])
        template = vocab.templates[t]
        n_entities, n_relations = counts[b]
        offsets = encoded.offsets[b]
        entities = []
        for e in range(n_entities):
            probs = choice_probs[b, e]
            k = int(probs.argmax())
            if k == 0:
                label = _span_text(question, offsets, int(ent_first[b, e]), int(ent_last[b, e]))
                conf = float(probs[0]) * math.exp(float(ent_score[b, e]))
                entities.append(SlotValue(label or question, "", conf))
            else:
                c = vocab.fallbacks[k - 1]
                entities.append(SlotValue(c.label, c.description, float(probs[k])))
        relations = []
        taken: set[int] = set()
        for r in range(n_relations):
            # The same property is one placeholder: a template's relation slots are distinct properties.
            ranked = reranked.get((b, r))
            if ranked is not None and (free := [(k, p) for k, p in ranked if k not in taken]):
                k, p = free[0]
            else:
                scores = relation_logp[b, r].clone()
                if taken:
                    scores[list(taken)] = float("-inf")
                k = int(scores.argmax())
                p = math.exp(float(scores[k]))
            taken.add(k)
            c = vocab.relations[k]
            relations.append(SlotValue(c.label, c.description, p))
        literals = []
        literal_conf = []
        for index, _ in literal_marks(template):
            if index >= lit_first.shape[1]:
                literals.append("")
                literal_conf.append(0.0)
                continue
            literals.append(_span_text(question, offsets, int(lit_first[b, index]), int(lit_last[b, index])))
            literal_conf.append(math.exp(float(lit_score[b, index])))
        frames.append(
            Frame(
                template,
                float(template_probs[b, t]),
                tuple(entities),
                tuple(relations),
                tuple(literals),
                tuple(literal_conf),
            )
        )
    return frames


def _forward(
    model: StructuredModel,
    tokenizer: PreTrainedTokenizerBase,
    questions: Sequence[str],
    max_length: int,
    lexicon: RelationLexicon,
    device: str,
) -> tuple[Outputs, Encoded]:
    """One forward pass over a batch of questions, and their encoding (which decoding reads spans from)."""
    enc = encode_questions(tokenizer, questions, max_length, lexicon)
    features = enc.relation_features
    out = model(
        enc.input_ids.to(device),
        enc.attention_mask.to(device),
        enc.span_starts.to(device),
        enc.span_ends.to(device),
        relation_features=features.to(device) if features is not None else None,
    )
    return out, enc


@torch.no_grad()
def predict_frames(
    model: StructuredModel,
    tokenizer: PreTrainedTokenizerBase,
    vocab: Vocabulary,
    questions: Sequence[str],
    max_length: int,
    lexicon: RelationLexicon,
    device: str = "cpu",
    ranker: RelationRanker | None = None,
) -> list[Frame]:
    """What generation writes for a batch of questions: the argmax template and its slot values."""
    out, enc = _forward(model, tokenizer, questions, max_length, lexicon, device)
    return decode_frames(out, out.template.argmax(-1).cpu(), enc, vocab, model.heads.max_span_tokens, ranker)


@dataclass(frozen=True)
class RunnersUp:
    """What one forward pass holds besides its top frame (`top`): `second_template`, the frame of the second
    most probable template, and `swapped_relation`, the top frame with its least probable relation slot given
    its next most probable property not already in the frame (None without a relation slot)."""

    top: Frame
    second_template: Frame
    swapped_relation: Frame | None


@torch.no_grad()
def predict_runners_up(
    model: StructuredModel,
    tokenizer: PreTrainedTokenizerBase,
    vocab: Vocabulary,
    questions: Sequence[str],
    max_length: int,
    lexicon: RelationLexicon,
    device: str = "cpu",
    ranker: RelationRanker | None = None,
    *,
    candidates: int = 5,
) -> list[RunnersUp]:
    """`predict_frames` with each question's runners-up: more drafts at no generation cost (the draft
    verifier's training examples, bench/nbest_drafts.py). `candidates`: how many of a slot's most probable
    properties are tried for the swap."""
    out, enc = _forward(model, tokenizer, questions, max_length, lexicon, device)
    top = out.template.float().topk(2, -1).indices.cpu()
    span = model.heads.max_span_tokens
    first = decode_frames(out, top[:, 0], enc, vocab, span, ranker)
    second = decode_frames(out, top[:, 1], enc, vocab, span, ranker)
    relation_logp = out.relation.float().log_softmax(-1).cpu()
    result = []
    for b, frame in enumerate(first):
        swapped = None
        if frame.relations:
            j = min(range(len(frame.relations)), key=lambda r: frame.relations[r].confidence)
            used = {v.label for v in frame.relations}
            for k in relation_logp[b, j].topk(candidates).indices.tolist():
                choice = vocab.relations[k]
                if choice.label not in used:
                    value = SlotValue(
                        choice.label, choice.description, math.exp(float(relation_logp[b, j, k]))
                    )
                    swapped = replace(
                        frame, relations=(*frame.relations[:j], value, *frame.relations[j + 1 :])
                    )
                    break
        result.append(RunnersUp(frame, second[b], swapped))
    return result


_WORDS = re.compile(r"\w+")
RELATION_FEATURES = 3  # label in the question, an alias in the question, label match x its length


def _words(text: str) -> tuple[str, ...]:
    return tuple(_WORDS.findall(text.lower()))


class RelationLexicon:
    """Which properties the question names by label or alias: a copy signal for the relation scores.

    LC-QuAD 2.0 asks for thousands of properties by their label ("What is the Lingusphere code for
    Swahili?"); the table's learned rows alone miss rare ones. A property whose label (or alias) is a word
    n-gram of the question gets features the model weighs per slot; longer labels count for more.
    """

    def __init__(self, vocab: Vocabulary, max_words: int = 8) -> None:
        self.size = len(vocab.relations)
        self.max_words = max_words
        self._names: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        for index, (choice, aliases) in enumerate(zip(vocab.relations, vocab.relation_aliases, strict=True)):
            for kind, name in [(0, choice.label), *((1, a) for a in aliases)]:
                words = _words(name)
                if words and len(words) <= max_words:
                    self._names.setdefault(words, []).append((index, kind))

    def features(self, questions: Sequence[str]) -> torch.Tensor:
        out = torch.zeros((len(questions), self.size, RELATION_FEATURES))
        for b, question in enumerate(questions):
            words = _words(question)
            for i in range(len(words)):
                for j in range(i + 1, min(len(words), i + self.max_words) + 1):
                    for index, kind in self._names.get(words[i:j], ()):
                        out[b, index, kind] = 1.0
                        if kind == 0:
                            out[b, index, 2] = max(float(out[b, index, 2]), min(j - i, 4) / 4)
        return out
