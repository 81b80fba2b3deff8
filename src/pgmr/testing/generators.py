"""The behaviour every `Generator` backend owes its callers, as a reusable pytest class.

A backend's test class inherits `GeneratorContract` and provides one fixture, `generator`::

    class TestMyGenerator(GeneratorContract):
        @pytest.fixture(scope="class")
        @classmethod
        def generator(cls) -> Generator:
            return MyGenerator.load(...)

The checks hold for any backend whatever it writes (a barely trained model included): one string per
question, in order; the same output for a question alone, in a batch, in another order or with another
`batch_size`; `[]` for no questions; the argument checks of `pgmr.generators.base.check_generate_inputs`.
Override `questions` (texts of different lengths, so that batches pad) or `contexts_for` (the candidate
blocks of RAG modes) in the subclass where a backend needs other inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pgmr.generators.base import MODES, RAG_MODES, Generator

__all__ = ["CONTRACT_QUESTIONS", "GeneratorContract"]

CONTRACT_QUESTIONS: tuple[str, ...] = (
    "What is Paris the capital of?",
    "Is Berlin the capital of Germany?",
    "How many people live in Hamburg, the second largest city of Germany?",
    "Who?",
    "Which river flows through the capital of the country whose head of state lives in Berlin?",
)


class GeneratorContract:
    """Inherit and provide a `generator` fixture."""

    questions: tuple[str, ...] = CONTRACT_QUESTIONS

    @classmethod
    def contexts_for(cls, generator: Generator, questions: Sequence[str]) -> list[str] | None:
        """One candidate block per question in RAG modes (what the pipeline retrieves), else None."""
        if generator.mode not in RAG_MODES:
            return None
        # The shape of `CandidateRetriever.contexts` ("ID label: description" lines), from the question alone:
        # a question must get the same block alone and in a batch for its output to be comparable.
        return [
            f"Q{len(q)} {q.split()[-1].strip('?')}: a candidate\nP31 instance of" if q else ""
            for q in questions
        ]

    @classmethod
    def _generate(cls, generator: Generator, questions: Sequence[str], batch_size: int = 16) -> list[str]:
        return generator.generate(
            questions, contexts=cls.contexts_for(generator, questions), batch_size=batch_size
        )

    @pytest.fixture(scope="class")
    @classmethod
    def outputs(cls, generator: Generator) -> list[str]:
        """The contract questions generated once, together: what the other checks compare with."""
        return cls._generate(generator, cls.questions)

    def test_is_a_generator_with_a_known_mode(self, generator: Generator) -> None:
        assert isinstance(generator, Generator)
        assert generator.mode in MODES

    def test_one_string_per_question(self, outputs: list[str]) -> None:
        assert isinstance(outputs, list)
        assert len(outputs) == len(self.questions)
        assert all(isinstance(text, str) for text in outputs)

    def test_same_output_alone_as_in_a_batch(self, generator: Generator, outputs: list[str]) -> None:
        alone = [self._generate(generator, [q])[0] for q in self.questions]
        assert alone == outputs

    def test_outputs_follow_the_question_order(self, generator: Generator, outputs: list[str]) -> None:
        reordered = list(reversed(self.questions))
        assert self._generate(generator, reordered) == list(reversed(outputs))

    @pytest.mark.parametrize("batch_size", [1, 2])
    def test_batch_size_does_not_change_outputs(
        self, generator: Generator, outputs: list[str], batch_size: int
    ) -> None:
        assert self._generate(generator, self.questions, batch_size=batch_size) == outputs

    def test_repeated_questions_get_repeated_outputs(self, generator: Generator, outputs: list[str]) -> None:
        first, second = self.questions[0], self.questions[1]
        assert self._generate(generator, [first, second, first]) == [outputs[0], outputs[1], outputs[0]]

    def test_no_questions_give_no_outputs(self, generator: Generator) -> None:
        assert self._generate(generator, []) == []

    def test_one_string_is_not_a_list_of_questions(self, generator: Generator) -> None:
        # A str is a Sequence[str] of characters: generating for each letter would be a silent mistake.
        with pytest.raises(TypeError, match="not one string"):
            generator.generate(self.questions[0], contexts=self.contexts_for(generator, [self.questions[0]]))

    @pytest.mark.parametrize("batch_size", [0, -1])
    def test_batch_size_must_be_positive(self, generator: Generator, batch_size: int) -> None:
        with pytest.raises(ValueError, match="batch_size must be positive"):
            self._generate(generator, self.questions[:1], batch_size=batch_size)

    def test_rag_modes_need_one_context_per_question(self, generator: Generator) -> None:
        if generator.mode not in RAG_MODES:
            pytest.skip(f"mode {generator.mode!r} takes no contexts")
        questions = list(self.questions[:2])
        with pytest.raises(ValueError, match="needs contexts"):
            generator.generate(questions)
        with pytest.raises(ValueError, match=r"2 questions, 1 contexts"):
            generator.generate(questions, contexts=["Q1 Paris: capital of France"])
