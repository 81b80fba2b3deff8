"""BLEU over normalized SPARQL tokens, with sacrebleu (imported on first use: it is slow to import)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any


def corpus_bleu(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> float:
    """Corpus BLEU (0-100) of token lists, with sacrebleu's defaults (4-grams, exponential smoothing off for
    the corpus score) and no tokenization of its own: tokens are joined by spaces and split back."""
    import sacrebleu

    if not hypotheses:
        return 0.0
    hyps = [" ".join(h) for h in hypotheses]
    refs = [" ".join(r) for r in references]
    return float(sacrebleu.corpus_bleu(hyps, [refs], tokenize="none").score)


@lru_cache(maxsize=1)
def _sentence_scorer() -> Any:
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize="none", effective_order=True)


def sentence_bleu(hypothesis: Sequence[str], reference: Sequence[str]) -> float:
    """Sentence BLEU (0-100; sacrebleu's sentence defaults: exponential smoothing, effective n-gram order),
    for per-record inspection only."""
    return float(_sentence_scorer().sentence_score(" ".join(hypothesis), [" ".join(reference)]).score)
