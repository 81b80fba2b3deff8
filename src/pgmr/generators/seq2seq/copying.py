"""Copy bias: while the decoder writes an entity label, favour tokens that continue a span of the question.

Small generators trained here get the query structure right far more often than they spell the entities
("Mabh" for "Somalia"), and post-hoc grounding (`pgmr.generators.grounding`) can only repair a label that is
already close to a question span. Most LC-QuAD 2.0 and QALD entity labels are copied from the question, so
during decoding, inside `[ENT] ... [/ENT]`, every token that extends the label along some word span of the
question gets `bias` added to its score, and `[/ENT]` gets it where the label so far is a whole span. It is a
soft pointer: the model still decides, a label that is not in the question ("United States of America" for
"US") can still be written, and `bias=0` is plain decoding. Relation labels are left alone (questions
paraphrase relations).

The spans are tokenized the way the targets were (the target tokenizer splits at spaces, each word keeping
its leading space), so a span's token ids are what the decoder would emit to copy it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import LogitsProcessor, PreTrainedTokenizerBase

from pgmr.generators.grounding import question_spans

ENT_OPEN, ENT_CLOSE = " [ENT]", " [/ENT]"

# A trie node: child token id -> node; the key `_END` marks a node where a whole span ends.
_END = -1
Trie = dict[int, Any]


def span_variants(span: str) -> list[str]:
    """The span as written, Title Cased word by word, and lower-cased (questions vary in case)."""
    titled = " ".join(w[:1].upper() + w[1:] for w in span.split(" "))
    return list(dict.fromkeys((span, titled, span.lower())))


def build_trie(question: str, tokenizer: PreTrainedTokenizerBase, max_span_words: int = 8) -> Trie:
    root: Trie = {}
    for span in question_spans(question, max_span_words):
        for text in span_variants(span):
            node = root
            for token_id in tokenizer.encode(" " + text, add_special_tokens=False):
                node = node.setdefault(token_id, {})
            node[_END] = True
    return root


def marker_id(tokenizer: PreTrainedTokenizerBase, marker: str) -> int | None:
    """The single token id of `marker`, or None where the tokenizer splits it (then no copy bias)."""
    ids = tokenizer.encode(marker, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


class QuestionCopyBias(LogitsProcessor):
    """Adds `bias` to the scores of tokens that continue a question span inside an entity label.

    `tries[i]` belongs to the i-th question of the batch; rows of `input_ids` are questions times beams, in
    the order transformers expands them (each question's beams are adjacent)."""

    def __init__(
        self,
        tries: Sequence[Trie],
        *,
        open_id: int,
        close_id: int,
        stop_ids: Sequence[int],
        bias: float,
        num_beams: int = 1,
    ) -> None:
        self.tries = list(tries)
        self.open_id = open_id
        self.close_id = close_id
        self.stop_ids = frozenset(stop_ids) | {close_id}
        self.bias = bias
        self.num_beams = num_beams

    def _node(self, row: list[int], trie: Trie) -> Trie | None:
        """The trie node the label being written has reached, or None outside a label or off every span."""
        start = None
        for pos in range(len(row) - 1, -1, -1):
            token = row[pos]
            if token == self.open_id:
                start = pos + 1
                break
            if token in self.stop_ids:
                return None
        if start is None:
            return None
        node: Trie | None = trie
        for token in row[start:]:
            node = node.get(token) if node is not None else None
            if node is None:
                return None
        return node

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.bias == 0.0:
            return scores
        rows = input_ids.tolist()
        vocab = scores.shape[-1]
        for r, row in enumerate(rows):
            node = self._node(row, self.tries[r // self.num_beams])
            if not node:
                continue
            targets = [t for t in node if t != _END and t < vocab]
            if _END in node:
                targets.append(self.close_id)
            if targets:
                scores[r, targets] += self.bias
        return scores


def copy_bias_processor(
    questions: Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
    *,
    bias: float,
    num_beams: int = 1,
) -> QuestionCopyBias | None:
    """The processor for one batch of questions, or None when there is nothing to do (bias 0, or a target
    tokenizer without single-token entity markers, e.g. a direct-mode model)."""
    if bias == 0.0:
        return None
    open_id, close_id = marker_id(tokenizer, ENT_OPEN), marker_id(tokenizer, ENT_CLOSE)
    if open_id is None or close_id is None:
        return None
    stop_ids = [i for i in (tokenizer.eos_token_id, marker_id(tokenizer, "\n")) if i is not None]
    tries = [build_trie(q, tokenizer) for q in questions]
    return QuestionCopyBias(
        tries, open_id=open_id, close_id=close_id, stop_ids=stop_ids, bias=bias, num_beams=num_beams
    )
