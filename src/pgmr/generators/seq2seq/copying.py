"""Copy bias: while the decoder writes a label, favour tokens that continue a span of the question.

Small generators trained here get the query structure right far more often than they spell the labels
("Mabh" for "Somalia", "Bruticlatic ID" for "Linguasphere code"), and post-hoc grounding
(`pgmr.resolver.grounding`) can only repair an entity label that is already close to a question span. Most
LC-QuAD 2.0 entity labels, and many relation labels (the long tail of "... ID" properties above all), are
copied from the question. So during decoding, inside `[ENT] ... [/ENT]` (and `[REL] ... [/REL]` with its own
bonus), every token that extends the label along some word span of the question gets a bonus added to its
score. It is a soft pointer: the model still decides, so a label that is not in the question ("United States
of America" for "US", "place of birth" for "born in") can still be written, and a bonus of 0 is plain
decoding. Optionally the closing marker gets the bonus too where the label so far is a whole span: the
default gives it to relation labels (without it they run on: "author of the ...") and not to entity labels
(with it, every prefix of a name is a place to stop: "Great" for "Great Pyramid of Giza"). Spans never begin
or end with a function word ("on", "of"; "the" may begin a longer span).

The spans are tokenized the way the targets were (the target tokenizer splits at spaces, each word keeping
its leading space), so a span's token ids are what the decoder would emit to copy it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import LogitsProcessor, PreTrainedTokenizerBase

from pgmr.query.question import STOP_WORDS, question_spans

ENT_OPEN, ENT_CLOSE = " [ENT]", " [/ENT]"
REL_OPEN, REL_CLOSE = " [REL]", " [/REL]"

# A trie node: child token id -> node; the key `_END` marks a node where a whole span ends.
_END = -1
Trie = dict[int, Any]


def span_variants(span: str) -> list[str]:
    """The span as written, Title Cased word by word, and lower-cased (questions vary in case)."""
    titled = " ".join(w[:1].upper() + w[1:] for w in span.split(" "))
    return list(dict.fromkeys((span, titled, span.lower())))


# Function words cannot begin or end a copied label: otherwise every "on" or "to" of a question is a
# one-word span, and a bonus on " On" is enough to start a relation label with it ("Ontario Pois").
# "the" may begin a longer one ("The Hellbound Heart").
FUNCTION_WORDS = STOP_WORDS - {"tell", "give", "name", "list", "mention"}


def copyable(span: str) -> bool:
    words = span.casefold().split()
    if not words or words[-1] in FUNCTION_WORDS:
        return False
    return words[0] not in FUNCTION_WORDS or (words[0] == "the" and len(words) > 1)


def _token_ids(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> list[list[int]]:
    """Token ids of each text without special tokens; straight from the Rust tokenizer where there is one
    (transformers' wrapper costs more per text than the tokenization)."""
    if not texts:
        return []
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]
    return list(tokenizer(texts, add_special_tokens=False)["input_ids"])


def build_trie(question: str, tokenizer: PreTrainedTokenizerBase, max_span_words: int = 8) -> Trie:
    return build_tries([question], tokenizer, max_span_words)[0]


def build_tries(
    questions: Sequence[str], tokenizer: PreTrainedTokenizerBase, max_span_words: int = 8
) -> list[Trie]:
    """One trie per question, every span variant of every question tokenized in one tokenizer call: a call per
    span cost ~4 ms per question in per-call overhead (~50 spans each)."""
    texts = [
        [
            " " + text
            for span in filter(copyable, question_spans(q, max_span_words))
            for text in span_variants(span)
        ]
        for q in questions
    ]
    flat = [t for group in texts for t in group]
    encoded = iter(_token_ids(tokenizer, flat))
    tries: list[Trie] = []
    for group in texts:
        root: Trie = {}
        for _ in group:
            node = root
            for token_id in next(encoded):
                node = node.setdefault(token_id, {})
            node[_END] = True
        tries.append(root)
    return tries


def marker_id(tokenizer: PreTrainedTokenizerBase, marker: str) -> int | None:
    """The single token id of `marker`, or None where the tokenizer splits it (then no copy bias)."""
    ids = tokenizer.encode(marker, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


@dataclass(frozen=True)
class LabelBias:
    """The bonus inside one kind of label: `bias` on tokens that extend a question span, `close_bias` on the
    closing marker where the label so far is a whole span."""

    open_id: int
    close_id: int
    bias: float
    close_bias: float


class QuestionCopyBias(LogitsProcessor):
    """Adds a bonus to the scores of tokens that continue a question span inside a label (per label kind).

    `tries[i]` belongs to the i-th question of the batch; rows of `input_ids` are questions times beams, in
    the order transformers expands them (each question's beams are adjacent)."""

    def __init__(
        self,
        tries: Sequence[Trie],
        *,
        labels: Sequence[LabelBias],
        stop_ids: Sequence[int],
        num_beams: int = 1,
    ) -> None:
        self.tries = list(tries)
        self.labels = {label.open_id: label for label in labels}
        self.stop_ids = frozenset(stop_ids) | {label.close_id for label in labels}
        self.num_beams = num_beams

    def _state(self, row: list[int], trie: Trie) -> tuple[LabelBias, Trie] | None:
        """The label kind being written and the trie node its text has reached; None outside a label or off
        every span."""
        start, label = None, None
        for pos in range(len(row) - 1, -1, -1):
            token = row[pos]
            if token in self.labels:
                start, label = pos + 1, self.labels[token]
                break
            if token in self.stop_ids:
                return None
        if start is None or label is None:
            return None
        node: Trie | None = trie
        for token in row[start:]:
            node = node.get(token) if node is not None else None
            if node is None:
                return None
        assert node is not None  # the loop returned on the first step off the trie
        return label, node

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        rows = input_ids.tolist()
        vocab = scores.shape[-1]
        for r, row in enumerate(rows):
            state = self._state(row, self.tries[r // self.num_beams])
            if state is None:
                continue
            label, node = state
            targets = [t for t in node if t != _END and t < vocab]
            if targets and label.bias:
                scores[r, targets] += label.bias
            if _END in node and label.close_bias:
                scores[r, label.close_id] += label.close_bias
        return scores


def copy_bias_processor(
    questions: Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
    *,
    bias: float,
    relation_bias: float = 0.0,
    close: bool = True,
    relation_close: bool | None = None,
    num_beams: int = 1,
) -> QuestionCopyBias | None:
    """The processor for one batch of questions, or None when there is nothing to do (no bias, or a target
    tokenizer without single-token label markers, e.g. a direct-mode model). `bias` applies inside entity
    labels, `relation_bias` inside relation labels; `close`: the closing marker gets the bonus too where the
    label is a whole span (`relation_close`: the same for relation labels; None: as `close`)."""
    labels = []
    kinds = (
        (ENT_OPEN, ENT_CLOSE, bias, close),
        (REL_OPEN, REL_CLOSE, relation_bias, close if relation_close is None else relation_close),
    )
    for opening, closing, value, closes in kinds:
        open_id, close_id = marker_id(tokenizer, opening), marker_id(tokenizer, closing)
        if value and open_id is not None and close_id is not None:
            labels.append(LabelBias(open_id, close_id, value, value if closes else 0.0))
    if not labels:
        return None
    stop_ids = [i for i in (tokenizer.eos_token_id, marker_id(tokenizer, "\n")) if i is not None]
    tries = build_tries(questions, tokenizer)
    return QuestionCopyBias(tries, labels=labels, stop_ids=stop_ids, num_beams=num_beams)
