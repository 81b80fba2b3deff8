"""The question side of grounding and retrieval: its word spans and the stop words no label is made of.

Below the generators and the resolver so that both read a question the same way: label grounding
(pgmr.resolver.grounding) snaps labels to these spans, copy-biased decoding (pgmr.generators.seq2seq.copying)
copies them, and candidate retrieval (pgmr.generators.rag) skips n-grams of stop words only.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\s?!,;:\"()\[\]{}]+")
_TRIM = "'’`.\""

_STOP_WORDS_TEXT = """a about above after all also am an and any are as at be been being before below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers
    him his how i if in into is it its itself let me more most my no nor not of off on once only or other
    our ours out over own same she should so some such than that the their theirs them then there these
    they this those through to too under until up very was we were what when where which while who whom
    whose why will with would you your yours tell give name list mention"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def question_words(text: str) -> list[str]:
    """The words of a question or label, as grounding splits them (punctuation but not quotes ends a word)."""
    return _WORD.findall(text)


def question_spans(question: str, max_words: int = 8) -> list[str]:
    """Every run of up to `max_words` words, as written in the question (possessive 's and quotes trimmed)."""
    words = question_words(question)
    spans: list[str] = []
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + max_words) + 1):
            text = " ".join(words[i:j])
            if text.endswith(("'s", "’s")):
                text = text[:-2]
            text = text.strip(_TRIM)
            if text:
                spans.append(text)
    return list(dict.fromkeys(spans))


# Words of the names of identifier-like properties ("IMDb ID", "Belarus Globe URL", "ITU letter code", "serial
# number", "Skype username"): Wikidata names nearly every external-identifier property with "ID". Chosen on
# LC-QuAD 2.0 validation; relations named otherwise are paraphrased too often to be swapped for a question span.
IDENTIFIER_WORDS = frozenset({"id", "identifier", "url", "code", "number", "username"})
_IDENTIFIER = re.compile(rf"(?<![\w-])(?:{'|'.join(sorted(IDENTIFIER_WORDS))})(?![\w-])", re.IGNORECASE)


def names_identifier(label: str) -> bool:
    """Whether a relation label names an identifier-like property ("IMDb ID", "ITU letter code"; not "Idaho"
    or "ID-card")."""
    return bool(_IDENTIFIER.search(label))


__all__ = ["IDENTIFIER_WORDS", "STOP_WORDS", "names_identifier", "question_spans", "question_words"]
