"""A byte-level BPE tokenizer trained on the training texts, wrapped for transformers.

Byte-level: every string (SPARQL punctuation, non-ASCII labels, newlines of the mapping block) encodes and
decodes back exactly, with no unknown tokens and no whitespace normalization.

Pre-tokenization splits only at spaces and newlines (each chunk keeps its leading space), not at punctuation
as GPT-2's rule does: then frequent SPARQL atoms such as ` wdt:relation0`, ` [/ENT]` or ` ?answer` become
single tokens. With GPT-2's rule (`wd`, `:`, `entity`, `0`) pgmr targets averaged 74 tokens; targets that
long are what makes training on CPU slow.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

# Ids 0, 1, 2 as in T5: pad doubles as the decoder start token.
PAD, EOS, UNK = "<pad>", "</s>", "<unk>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, EOS, UNK)


def train_tokenizer(
    texts: Iterable[str], vocab_size: int = 4000, min_frequency: int = 2
) -> PreTrainedTokenizerFast:
    """Train on `texts` (sources and targets). Every encoding ends with `</s>`, as T5 expects."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab_size must be at least {len(alphabet) + len(SPECIAL_TOKENS)} for byte-level BPE"
        )
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r" ?[^ \n]+|\n| +"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    eos_id = tokenizer.token_to_id(EOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS}", pair=f"$A {EOS} $B {EOS}", special_tokens=[(EOS, eos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        # The default clean-up would turn SPARQL's "?x ." into "?x." and change the text.
        clean_up_tokenization_spaces=False,
    )


def keeps_newlines(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether "\\n" survives encode/decode (the mapping block of SPARQL-PGMR is line-based)."""
    probe = "SELECT ?x\nentity0 = [ENT] a [/ENT] b"
    ids = tokenizer(probe)["input_ids"]
    return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False) == probe
