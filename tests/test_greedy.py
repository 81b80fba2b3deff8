"""pgmr's greedy decoding loop (pgmr.generators.seq2seq.greedy) against transformers' generate: the same tokens."""

from __future__ import annotations

import pytest
import torch
from transformers import LogitsProcessor

from pgmr.generators.seq2seq import Seq2SeqGenerator
from pgmr.generators.seq2seq.greedy import GreedyDecoder, supports
from pgmr.generators.seq2seq.model import build_encoder_decoder, build_model, source_tokenizer_for
from pgmr.generators.seq2seq.tokenizer import train_tokenizer
from test_copying import QUESTIONS as COPY_QUESTIONS
from test_copying import SEQ2SEQ

# test_copying's questions (the shipped model, the copy bias at work) and more shapes and lengths: a batch of
# them is padded.
QUESTIONS = [
    *COPY_QUESTIONS,
    "How many children did Genghis Khan have?",
    "What is the Linguasphere code of Swahili?",
    "Tell me the chemical compound which contains carbon and has the lowest melting point.",
    "When did Barack Obama receive the Nobel Peace Prize?",
]


def test_the_shipped_model_writes_the_same_text_in_both_loops() -> None:
    """The default model with its copy bias, one at a time and in a padded batch: token for token in float32."""
    own = Seq2SeqGenerator.load(SEQ2SEQ, precision="fp32")
    library = Seq2SeqGenerator.load(SEQ2SEQ, precision="fp32", own_loop=False)
    assert own._greedy_decoder() is not None and library._greedy_decoder() is None
    expected = library.generate(QUESTIONS, batch_size=1)
    assert all("[ENT]" in text for text in expected)  # real queries, not a degenerate output
    assert own.generate(QUESTIONS, batch_size=1) == expected
    assert own.generate(QUESTIONS, batch_size=8) == library.generate(QUESTIONS, batch_size=8)


class _EndAt(LogitsProcessor):
    """Forces the end token for row `row` once its output has `length` tokens: one row finishes early."""

    def __init__(self, row: int, length: int, eos: int) -> None:
        self.row, self.length, self.eos = row, length, eos

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[1] == self.length:
            scores[self.row, self.eos] = 1e4
        return scores


def _tiny_random_model():  # type: ignore[no-untyped-def]
    torch.manual_seed(3)
    source = source_tokenizer_for("minilm-tiny")
    targets = [
        "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\nentity0 = [ENT] Paris [/ENT] capital of France\n"
        "relation0 = [REL] population [/REL]",
        "ASK { wd:entity0 wdt:relation0 wd:entity1 }\nentity0 = [ENT] Berlin [/ENT]\n"
        "entity1 = [ENT] human [/ENT]\nrelation0 = [REL] instance of [/REL]",
    ]
    target = train_tokenizer(targets * 3, vocab_size=320)
    model = build_encoder_decoder("minilm-tiny", source, target).eval()
    return model, source, target


def test_a_random_decoder_gives_the_same_token_tensors_rows_ending_early_and_late() -> None:
    """A 1-layer, 2-head decoder (another shape than the shipped one): the returned tensors are equal, with
    padding after a row's end and the loop running to the length limit for rows that never end."""
    model, source, target = _tiny_random_model()
    encoded = source(QUESTIONS[:3], padding=True, return_tensors="pt")
    assert not bool(encoded["attention_mask"].all())  # the batch is padded
    eos = target.eos_token_id
    for processor in (None, _EndAt(row=1, length=4, eos=eos)):
        with torch.inference_mode():
            expected = model.generate(
                **encoded,
                max_new_tokens=12,
                num_beams=1,
                do_sample=False,
                logits_processor=[processor] if processor else [],
            )
        got = GreedyDecoder(model).generate(
            encoded["input_ids"],
            encoded["attention_mask"],
            max_new_tokens=12,
            start_id=model.config.decoder_start_token_id,
            eos_id=eos,
            pad_id=model.config.pad_token_id,
            processor=processor,
        )
        assert torch.equal(got, expected)
        if processor is not None:
            assert got[1, 4].item() == eos and (got[1, 5:] == model.config.pad_token_id).all()


def test_everything_else_stays_on_generate() -> None:
    """T5 presets, beam search and `own_loop=False` decode with transformers; a T5 is refused by the loop."""
    model, _, target = _tiny_random_model()
    assert supports(model)
    t5 = build_model("tiny", target)
    assert not supports(t5)
    with pytest.raises(ValueError, match="BERT decoder"):
        GreedyDecoder(t5)
    beams = Seq2SeqGenerator.load(SEQ2SEQ, precision="fp32", num_beams=2, max_new_tokens=8)
    assert beams._greedy_decoder() is None
    assert len(beams.generate(QUESTIONS[:2])) == 2


def test_the_loop_follows_the_model_to_another_precision() -> None:
    """A model cast after loading gets a fresh loop over its new weights (not the old ones)."""
    generator = Seq2SeqGenerator.load(SEQ2SEQ, precision="fp32", max_new_tokens=24)
    first = generator._greedy_decoder()
    assert first is not None and first.dtype == torch.float32
    generator.model.to(torch.bfloat16)
    second = generator._greedy_decoder()
    assert second is not None and second is not first and second.dtype == torch.bfloat16
    assert len(generator.generate(QUESTIONS[:2])) == 2


def test_prepacked_bfloat16_weights_change_no_number(monkeypatch: pytest.MonkeyPatch) -> None:
    """The oneDNN-packed bfloat16 weights (a speed-up) give F.linear's exact numbers, and the same text as the
    loop without packing."""
    from pgmr.generators.seq2seq import greedy

    generator = Seq2SeqGenerator.load(SEQ2SEQ, precision="bf16")
    decoder = generator._greedy_decoder()
    assert decoder is not None
    linear = decoder.layers[0].qkv
    x = torch.randn(4, 1, linear.weight.shape[1]).to(torch.bfloat16)
    assert torch.equal(linear(x), torch.nn.functional.linear(x, linear.weight, linear.bias))
    packed_text = generator.generate(QUESTIONS, batch_size=4)
    monkeypatch.setattr(greedy, "_prepack", lambda weight, bias: None)
    generator._greedy = None
    plain = generator._greedy_decoder()
    assert plain is not None and plain.layers[0].qkv.packed is None
    assert generator.generate(QUESTIONS, batch_size=4) == packed_text
