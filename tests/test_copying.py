"""Copy bias in decoding (pgmr.generators.seq2seq.copying), with the shipped model and its real tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from pgmr.generators.seq2seq import Seq2SeqGenerator
from pgmr.generators.seq2seq.copying import (
    ENT_CLOSE,
    ENT_OPEN,
    REL_CLOSE,
    QuestionCopyBias,
    build_trie,
    copy_bias_processor,
    copyable,
    marker_id,
    span_variants,
)
from pgmr.query import parse
from pgmr.query.question import question_spans

# The shipped seq2seq model (a member of the default ensemble).
SEQ2SEQ = Path(__file__).resolve().parents[1] / "models" / "pgmr-default"

QUESTIONS = [
    "What was the population of Somalia in 2009?",
    "Was Roman Polanski born in Paris?",
    "Which female actress is the voice over on South Park and is employed as a singer?",
    "who is the mayor of new york city?",
]


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    return AutoTokenizer.from_pretrained(SEQ2SEQ)


@pytest.fixture(scope="module")
def plain() -> Seq2SeqGenerator:
    return Seq2SeqGenerator.load(SEQ2SEQ, copy_bias=0.0)


def test_function_words_neither_begin_nor_end_a_copyable_span() -> None:
    assert copyable("author") and copyable("The Hellbound Heart") and copyable("Somalia in 2009")
    assert not copyable("on") and not copyable("On") and not copyable("the") and not copyable("author of")
    assert not copyable("of The Hellbound Heart") and copyable("birth name")


def test_span_variants_cover_case() -> None:
    assert span_variants("new york city") == ["new york city", "New York City"]
    assert span_variants("Somalia") == ["Somalia", "somalia"]


def _scores_after(tokenizer, processor: QuestionCopyBias, text: str) -> torch.Tensor:  # type: ignore[no-untyped-def]
    ids = tokenizer.encode(text, add_special_tokens=False)
    scores = torch.zeros(1, len(tokenizer))
    return processor(torch.tensor([ids]), scores)[0]


def test_bias_only_inside_entity_labels_and_only_along_spans(tokenizer) -> None:  # type: ignore[no-untyped-def]
    processor = copy_bias_processor([QUESTIONS[0]], tokenizer, bias=3.0)
    assert processor is not None
    som, alia = tokenizer.encode(" Somalia", add_special_tokens=False)
    close = marker_id(tokenizer, ENT_CLOSE)

    # Right after [ENT]: the first token of every question word (as written and case variants) is favoured.
    scores = _scores_after(tokenizer, processor, "SELECT ?x WHERE { wd:entity0 ?p ?x }\nentity0 = [ENT]")
    assert scores[som] == 3.0
    assert scores[tokenizer.encode(" population", add_special_tokens=False)[0]] == 3.0
    assert scores[close] == 0.0  # an empty label is not a span
    assert int((scores > 0).sum()) < 60  # a handful of tokens, not the vocabulary

    # Half-way through "Somalia" only its continuation is favoured; once complete, [/ENT] is.
    scores = _scores_after(tokenizer, processor, "entity0 = [ENT] Som")
    assert scores[alia] == 3.0 and int((scores > 0).sum()) == 1
    scores = _scores_after(tokenizer, processor, "entity0 = [ENT] Somalia")
    assert scores[close] == 3.0
    # "Somalia in 2009" is a span, "Somalia in" is not (a label does not end with a function word).
    assert scores[tokenizer.encode(" in", add_special_tokens=False)[0]] == 3.0
    scores = _scores_after(tokenizer, processor, "entity0 = [ENT] Somalia in")
    assert scores[close] == 0.0

    # Off every span, after [/ENT], in a relation label, or before any [ENT]: nothing changes.
    for text in (
        "entity0 = [ENT] Mabh",
        "entity0 = [ENT] Somalia [/ENT]",
        "entity0 = [ENT] Somalia [/ENT]\nrelation0 = [REL]",
        "SELECT ?x WHERE {",
    ):
        assert not _scores_after(tokenizer, processor, text).any(), text


def test_relation_bias_and_no_close_bonus(tokenizer) -> None:  # type: ignore[no-untyped-def]
    question = "What is the Lingusphere code for Swahili?"
    lingu = tokenizer.encode(" Lingusphere", add_special_tokens=False)[0]
    rel_close, ent_close = marker_id(tokenizer, REL_CLOSE), marker_id(tokenizer, ENT_CLOSE)
    # Entities only (the default): relation labels are left alone.
    entities_only = copy_bias_processor([question], tokenizer, bias=4.0)
    assert entities_only is not None
    assert not _scores_after(tokenizer, entities_only, "relation0 = [REL]").any()
    # With a relation bias, relation labels get their own bonus; without the close bonus, the closing markers
    # get nothing even after a whole span.
    both = copy_bias_processor([question], tokenizer, bias=4.0, relation_bias=1.5, close=False)
    assert both is not None
    assert _scores_after(tokenizer, both, "relation0 = [REL]")[lingu] == 1.5
    assert _scores_after(tokenizer, both, "entity0 = [ENT]")[lingu] == 4.0
    assert _scores_after(tokenizer, both, "relation0 = [REL] code")[rel_close] == 0.0
    assert _scores_after(tokenizer, both, "entity0 = [ENT] Swahili")[ent_close] == 0.0
    with_close = copy_bias_processor([question], tokenizer, bias=4.0, relation_bias=1.5)
    assert with_close is not None
    assert _scores_after(tokenizer, with_close, "relation0 = [REL] code")[rel_close] == 1.5
    assert _scores_after(tokenizer, with_close, "entity0 = [ENT] Swahili")[ent_close] == 4.0


def test_rows_map_to_their_question_across_beams(tokenizer) -> None:  # type: ignore[no-untyped-def]
    processor = copy_bias_processor(QUESTIONS[:2], tokenizer, bias=1.0, num_beams=2)
    assert processor is not None
    ids = tokenizer.encode("entity0 = [ENT]", add_special_tokens=False)
    scores = processor(torch.tensor([ids] * 4), torch.zeros(4, len(tokenizer)))
    som = tokenizer.encode(" Somalia", add_special_tokens=False)[0]
    roman = tokenizer.encode(" Roman", add_special_tokens=False)[0]
    assert scores[0, som] == scores[1, som] == 1.0 and scores[0, roman] == scores[1, roman] == 0.0
    assert scores[2, roman] == scores[3, roman] == 1.0 and scores[2, som] == scores[3, som] == 0.0


def test_no_processor_without_bias_or_markers(tokenizer) -> None:  # type: ignore[no-untyped-def]
    assert copy_bias_processor(QUESTIONS, tokenizer, bias=0.0) is None
    assert marker_id(tokenizer, ENT_OPEN) is not None
    assert marker_id(tokenizer, " [NO SUCH MARKER]") is None


def test_trie_paths_are_the_tokens_of_question_spans(tokenizer) -> None:  # type: ignore[no-untyped-def]
    trie = build_trie(QUESTIONS[1], tokenizer)
    node = trie
    for token in tokenizer.encode(" Roman Polanski", add_special_tokens=False):
        node = node[token]
    assert node.get(-1) is True


def test_large_bias_makes_every_entity_label_a_question_span() -> None:
    # With the closing bonus a label can only end where a span ends, so every label is a span.
    forced = Seq2SeqGenerator.load(SEQ2SEQ, copy_bias=100.0, copy_close=True)
    outputs = forced.generate(QUESTIONS, batch_size=4)
    labels = 0
    for question, text in zip(QUESTIONS, outputs, strict=True):
        spans = {v for s in question_spans(question) for v in span_variants(s)}
        for p in parse(text).placeholders:
            if p.kind == "entity":
                labels += 1
                assert p.label in spans, (question, text)
    assert labels >= len(QUESTIONS)


def test_copy_bias_is_validated_and_ignored_by_direct_modes(plain: Seq2SeqGenerator) -> None:
    with pytest.raises(ValueError, match="copy_bias"):
        Seq2SeqGenerator(plain.model, plain.tokenizer, "pgmr", copy_bias=-1.0)
    with pytest.raises(ValueError, match="relation_copy_bias"):
        Seq2SeqGenerator(plain.model, plain.tokenizer, "pgmr", relation_copy_bias=101.0)
    direct = Seq2SeqGenerator(plain.model, plain.tokenizer, "direct", copy_bias=5.0)
    assert direct.copy_bias == 0.0
    assert (
        Seq2SeqGenerator(plain.model, plain.tokenizer, "direct", relation_copy_bias=5.0).relation_copy_bias
        == 0.0
    )
