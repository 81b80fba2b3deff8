"""`StructuredGenerator`: the `Generator` seam over a structured model directory."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pgmr.generators.base import check_generate_inputs, generate_in_length_order
from pgmr.generators.structured.decoding import (
    Frame,
    RelationLexicon,
    RunnersUp,
    predict_frames,
    predict_runners_up,
)
from pgmr.generators.structured.ranker import RelationRanker
from pgmr.generators.structured.store import load_model
from pgmr.precision import DEFAULT_PRECISION, inference_dtype

T = TypeVar("T")


class StructuredGenerator:
    """Writes SPARQL-PGMR from a predicted template and slot values; `frames` also gives the confidences."""

    mode = "pgmr"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        vocab: Any,
        card: dict[str, Any],
        device: str = "cpu",
        ranker: RelationRanker | None = None,
    ) -> None:
        self.model = model.to(device)
        self.ranker = ranker
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.card = card
        self.device = device
        self.max_source_len = int(card.get("config", {}).get("max_source_len", 64))
        self.lexicon = RelationLexicon(vocab)

    @classmethod
    def load(
        cls, path: Path | str, device: str = "cpu", *, precision: str = DEFAULT_PRECISION, **_decoding: Any
    ) -> StructuredGenerator:
        """Decoding options of the seq2seq backends (beams, copy bias) do not apply and are ignored.
        `precision`: the weights' format for inference (pgmr.precision); probabilities are computed in float32
        whatever it is. A card naming a `relation_ranker` directory (relative to the model's) loads it too."""
        from pgmr.generators.seq2seq.card import resolve_model_dir

        dtype = inference_dtype(precision, device)
        directory = resolve_model_dir(path)
        model, tokenizer, vocab, card = load_model(directory)
        ranker = None
        if card.get("relation_ranker"):
            ranker = RelationRanker.load((directory / str(card["relation_ranker"])).resolve(), device, dtype)
        return cls(model.to(dtype=dtype), tokenizer, vocab, card, device, ranker)

    def frames(self, questions: Sequence[str], *, batch_size: int = 16) -> list[Frame]:
        return self._in_batches(predict_frames, questions, batch_size)

    def runners_up(self, questions: Sequence[str], *, batch_size: int = 32) -> list[RunnersUp]:
        """Per question, the top frame and the runners-up of the same forward pass (decoding.RunnersUp). Batched
        as `frames` batches, so with the same `batch_size` the top frames are the ones `frames` gives."""
        return self._in_batches(predict_runners_up, questions, batch_size)

    def _in_batches(
        self, predict: Callable[..., list[T]], questions: Sequence[str], batch_size: int
    ) -> list[T]:
        """`predict` (predict_frames or predict_runners_up) over batches of questions of similar length."""
        check_generate_inputs(self.mode, questions, None, batch_size)
        items = list(questions)

        def run(batch: list[int]) -> list[T]:
            return predict(
                self.model,
                self.tokenizer,
                self.vocab,
                [items[i] for i in batch],
                self.max_source_len,
                self.lexicon,
                self.device,
                self.ranker,
            )

        return generate_in_length_order(items, batch_size, run, len)

    def generate(
        self, questions: Sequence[str], *, contexts: Sequence[str] | None = None, batch_size: int = 16
    ) -> list[str]:
        return [frame.query().to_text() for frame in self.frames(questions, batch_size=batch_size)]

    def generate_with_confidence(
        self, questions: Sequence[str], *, contexts: Sequence[str] | None = None, batch_size: int = 16
    ) -> list[tuple[str, dict[str, float]]]:
        """`generate`, with how sure the model is of each output: the template's probability and the least
        probable slot value's (given the template); an ensemble's reranker reads them."""
        out = []
        for frame in self.frames(questions, batch_size=batch_size):
            slots = [v.confidence for v in (*frame.entities, *frame.relations)]
            confidence = {"template": frame.template_confidence, "slots": min(slots, default=1.0)}
            out.append((frame.query().to_text(), confidence))
        return out

    def confidences(self, questions: Sequence[str], *, batch_size: int = 16) -> list[dict[str, float]]:
        """Per question, each placeholder's probability under the model (its value's times the template's)."""
        return [frame.confidences() for frame in self.frames(questions, batch_size=batch_size)]
