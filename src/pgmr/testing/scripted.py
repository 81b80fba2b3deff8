"""`ScriptedGenerator`: a `Generator` whose outputs are given, for testing what runs after the model.

Pipelines, services and experiments need a generator; a trained one costs a training run and says nothing
about the code under test. This one answers from a mapping or a function and records how it was called::

    generator = ScriptedGenerator({"What is Paris the capital of?": "SELECT ?x WHERE { ... }\\n..."})
    pipeline = Pipeline(generator, memory, store=store)

It honours the protocol like any backend (same argument checks, one output per question in order, batches of
`batch_size`), so `GeneratorContract` runs on it too. It does not import pytest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pgmr.generators.base import check_generate_inputs, check_mode

Script = Mapping[str, str] | Callable[[str], str]


class UnscriptedQuestionError(LookupError):
    """A question the script has no answer for (and there is no default): a mistake in the test."""


@dataclass(frozen=True)
class GenerateCall:
    """One call of `generate`: what it was given and the batches it was split into."""

    questions: tuple[str, ...]
    contexts: tuple[str, ...] | None
    batch_size: int
    batches: tuple[tuple[str, ...], ...]


class ScriptedGenerator:
    """A `Generator` answering each question from `script`: a mapping (question -> output text) or a function.

    `default` answers questions a mapping lacks; without one they raise `UnscriptedQuestionError`. Every
    call is recorded in `calls` (thread safe: the pipeline generates from its batching thread). Outputs depend
    on the question alone, never on the batch it came in, as the protocol asks of every backend.
    """

    def __init__(self, script: Script, mode: str = "pgmr", *, default: str | None = None) -> None:
        self.mode = check_mode(mode)
        self.script = script
        self.default = default
        self.calls: list[GenerateCall] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ScriptedGenerator(mode={self.mode!r}, calls={len(self.calls)})"

    def answer(self, question: str) -> str:
        if callable(self.script):
            return self.script(question)
        if question in self.script:
            return self.script[question]
        if self.default is not None:
            return self.default
        raise UnscriptedQuestionError(
            f"the script has no answer for {question!r} ({len(self.script)} scripted questions, no default)"
        )

    def generate(
        self, questions: Sequence[str], *, contexts: Sequence[str] | None = None, batch_size: int = 16
    ) -> list[str]:
        check_generate_inputs(self.mode, questions, contexts, batch_size)
        items = tuple(questions)
        batches = tuple(items[i : i + batch_size] for i in range(0, len(items), batch_size))
        outputs = [self.answer(q) for q in items]
        for question, output in zip(items, outputs, strict=True):
            if not isinstance(output, str):
                raise TypeError(f"the script answered {question!r} with {type(output).__name__}, not str")
        with self._lock:
            self.calls.append(
                GenerateCall(items, None if contexts is None else tuple(contexts), batch_size, batches)
            )
        return outputs

    @property
    def questions_seen(self) -> list[str]:
        """Every question generated for, in call order."""
        with self._lock:
            return [q for call in self.calls for q in call.questions]
