"""How much the memory supports a placeholder: an estimated probability that the memory holds what the placeholder
names, from several signals of the evidence, by a small logistic model per kind fitted on LC-QuAD 2.0
validation only (`pgmr experiment fit-refusal`; the fitted model, its threshold and provenance ship as
calibration.json beside this module).

What it estimates: a placeholder counts as supported when its best candidate is a gold ID, or the memory still
holds the IDs its question needs (answerable questions of the entity-removed and relation-removed validation
sets, pgmr.experiments.unanswerable). Fitting on "best candidate is right" alone was tried and ships not: the
default generator garbles many labels of entities the memory does hold, so refusing on that estimate refuses
answerable questions before it refuses unanswerable ones (docs/resolver.md, Refusal).

Why not the best similarity alone: a generated label for an entity the memory lacks still lands on some
neighbour with a cosine of ~0.8, as high as many right matches. What tells them apart is mostly whether the
label is the candidate's own label or one of its aliases, how far ahead of the runner-up the best candidate
is, and how prominent it is (an obscure entry reached by a near miss is rarely meant).

The signals, each recorded per placeholder (`Support.features`):
    similarity    the best candidate's combined similarity (what the similarity thresholds gate)
    margin        similarity of the best minus that of the runner-up (the best's own when alone)
    lexical       edit similarity of the label with the best's label and aliases
    exact         1 when the label is, up to case and accents, a label or alias of the best
    own_label     1 when the label is the best's own label
    label_cosine  cosine of the label alone with the best's rows
    desc_cosine   cosine of "label, description" with the best's rows (0 without a description)
    described     1 when the placeholder has a description
    prior         the best's prominence prior in [0, 1]
    rivals        other top-k candidates whose label or alias is also an exact match (homonyms)
    in_question   1 when the label is, up to case and accents, a word span of the question
    unknown_span  1 when the label is a span of the question and no label or alias of the memory (of its kind):
                  the question names something the memory does not know by that name, which is what a
                  removed entity looks like ("Walter Cronkite", whose nearest row is Walter Scott). Without
                  the question (`pgmr resolve` on bare queries) both are 0.
    word_match    how well the words of one side are all found in the other, for the best's label or alias that
                  fits best: for each content word, its closest word on the other side (edit similarity); the
                  weakest of them; the better of the two directions. A respelling keeps every word close
                  ("Anthony Vivaldi" / "Antonio Vivaldi" 0.71), a name the memory lacks usually has a word that
                  nothing matches ("Tim Burton" / "Richard Burton" 0.22), and a containment scores 1 ("Padma
                  Bhushan award" / "Padma Bhushan"). Edit similarity of the whole label cannot tell these apart.
    named_absent  1 when the label is one of the names the generator was trained to write (`Calibration.names`:
                  the labels of its training targets, shipped beside the calibration fitted on its outputs) and no
                  label or alias of the memory: the generator means something precise that the memory does not
                  hold ("place of birth" against a memory without P19), where a garbled label ("Bruticlatic ID")
                  is neither. 0 without names.
    named_identifier  1 when the label is a span of the question, a label or alias of the best, and the name of an
                  identifier-like property ("LocFDD ID", an alias of P3266 "Library of Congress Format Description
                  Document ID"; pgmr.query.question.names_identifier). A question that names an identifier
                  exactly means that property; without this signal the models read the alias match as a near
                  miss and refused such placeholders (2026-12-05). The same signal for every label (the
                  question names the best by any label or alias) was tried and helped less: "country" or
                  "member" name many properties loosely.

A model may use a subset (its `features`); every signal is recorded whichever it uses.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from rapidfuzz import fuzz

from pgmr.query.model import Placeholder
from pgmr.query.question import STOP_WORDS, names_identifier, question_spans
from pgmr.resolver.model import Candidate, Support
from pgmr.resolver.ranking import normalize_label

FEATURES: tuple[str, ...] = (
    "similarity",
    "margin",
    "lexical",
    "exact",
    "own_label",
    "label_cosine",
    "desc_cosine",
    "described",
    "prior",
    "rivals",
    "in_question",
    "unknown_span",
    "word_match",
    "named_absent",
    "named_identifier",
)
CALIBRATION_FILE = "calibration.json"
NAMES_FILE = "names.json"
EXACT = 0.999


class CalibrationError(ValueError):
    """A calibration file that does not describe the model this module computes."""


def question_keys(question: str | None, max_words: int = 12) -> frozenset[str]:
    """Every word span of a question as `normalize_label` writes labels (what `in_question` looks up)."""
    if not question:
        return frozenset()
    return frozenset(normalize_label(span) for span in question_spans(question, max_words))


_SPLIT = re.compile(r"[\W_]+")


def _content_words(text: str) -> list[str]:
    words = [w for w in _SPLIT.split(normalize_label(text)) if w]
    content = [w for w in words if w not in STOP_WORDS]
    return content or words


def _cover(words: Sequence[str], others: Sequence[str]) -> float:
    """The weakest of `words`' closest matches among `others` (edit similarity, 0-1)."""
    if not words or not others:
        return 0.0
    return min(max(fuzz.ratio(w, o) for o in others) / 100.0 for w in words)


def word_match(label: str, surfaces: Sequence[str]) -> float:
    """The `word_match` signal of `label` against a candidate's label and aliases (see the module docstring)."""
    mine = _content_words(label)
    best = 0.0
    for surface in surfaces:
        theirs = _content_words(surface)
        best = max(best, _cover(mine, theirs), _cover(theirs, mine))
        if best >= 1.0:
            break
    return best


def features(
    placeholder: Placeholder,
    candidates: Sequence[Candidate],
    *,
    question: frozenset[str] = frozenset(),
    known: bool | None = None,
    surfaces: Sequence[str] | None = None,
    names: frozenset[str] = frozenset(),
) -> dict[str, float]:
    """The signals of one placeholder's ranked candidates (the best first); all zero without candidates.
    `question`: the question's spans (`question_keys`); `known`: whether the label is a label or alias of the
    memory (the resolver's lexicon says; without it, whether it is one of the best candidate's); `surfaces`:
    the best candidate's label and aliases (without them, its label alone); `names`: the generator's names of
    the placeholder's kind, normalized (`Calibration.names`)."""
    if not candidates:
        return dict.fromkeys(FEATURES, 0.0)
    best = candidates[0]
    runner_up = candidates[1].similarity if len(candidates) > 1 else 0.0
    key = normalize_label(placeholder.label)
    in_question = key in question
    if known is None:
        known = best.lexical >= EXACT
    return {
        "similarity": best.similarity,
        "margin": best.similarity - runner_up,
        "lexical": best.lexical,
        "exact": float(best.lexical >= EXACT),
        "own_label": float(normalize_label(best.label) == key),
        "label_cosine": best.label_similarity,
        "desc_cosine": best.description_similarity or 0.0,
        "described": float(bool(placeholder.description)),
        "prior": best.prior,
        "rivals": float(sum(c.lexical >= EXACT for c in candidates[1:])),
        "in_question": float(in_question),
        "unknown_span": float(in_question and not known),
        "word_match": word_match(placeholder.label, surfaces or (best.label,)),
        "named_absent": float(key in names and not known),
        "named_identifier": float(
            in_question and best.lexical >= EXACT and names_identifier(placeholder.label)
        ),
    }


@dataclass(frozen=True)
class LogisticModel:
    """P(right) = sigmoid(intercept + sum(coef * (x - mean) / scale)) over `names`."""

    names: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]

    def __post_init__(self) -> None:
        n = len(self.names)
        if not (len(self.coef) == len(self.mean) == len(self.scale) == n):
            raise CalibrationError("coef, mean and scale must have one entry per feature")
        unknown = [name for name in self.names if name not in FEATURES]
        if unknown:
            raise CalibrationError(f"unknown features {unknown}; known: {', '.join(FEATURES)}")
        if any(not s > 0 for s in self.scale):
            raise CalibrationError("every scale must be positive")

    def probability(self, values: Mapping[str, float]) -> float:
        z = self.intercept + math.fsum(
            c * (values[n] - m) / s
            for n, c, m, s in zip(self.names, self.coef, self.mean, self.scale, strict=True)
        )
        # Clamped so that exp cannot overflow on absurd inputs.
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(self.names),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "mean": list(self.mean),
            "scale": list(self.scale),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LogisticModel:
        try:
            return cls(
                tuple(str(n) for n in data["features"]),
                tuple(float(c) for c in data["coef"]),
                float(data["intercept"]),
                tuple(float(m) for m in data["mean"]),
                tuple(float(s) for s in data["scale"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(f"bad logistic model: {exc}") from None


@dataclass(frozen=True)
class Calibration:
    """The fitted models (one per kind), the shipped refusal threshold, where they came from, and the names
    (normalized labels, per kind) the generator they were fitted for was trained to write."""

    models: Mapping[str, LogisticModel]
    threshold: float
    provenance: Mapping[str, Any]
    names: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise CalibrationError(f"the threshold is a probability in [0, 1], got {self.threshold}")

    def support(
        self,
        placeholder: Placeholder,
        candidates: Sequence[Candidate],
        *,
        question: frozenset[str] = frozenset(),
        known: bool | None = None,
        surfaces: Sequence[str] | None = None,
        unknown: frozenset[str] = frozenset(),
    ) -> Support | None:
        """None for a kind without a model (then only the similarity thresholds can refuse it); `question`,
        `known` and `surfaces` as for `features`. `unknown`: signals the memory cannot give (the `prior` of a
        memory of another graph, which has no prominence counts), taken at the model's mean, so that they count
        neither for nor against (a zero would read as "obscure" and refuse everything)."""
        model = self.models.get(placeholder.kind)
        if model is None:
            return None
        values = features(
            placeholder,
            candidates,
            question=question,
            known=known,
            surfaces=surfaces,
            names=self.names.get(placeholder.kind, frozenset()),
        )
        for name, mean in zip(model.names, model.mean, strict=True):
            if name in unknown and candidates:
                values[name] = mean
        confidence = model.probability(values) if candidates else 0.0
        return Support(round(confidence, 6), tuple((n, round(values[n], 6)) for n in FEATURES))

    def to_json(self) -> dict[str, Any]:
        """The calibration file; the names, when there are any, live in their own file (NAMES_FILE), which this
        one names."""
        return {
            "threshold": self.threshold,
            "models": {kind: m.to_json() for kind, m in self.models.items()},
            **({"names": NAMES_FILE} if self.names else {}),
            "provenance": dict(self.provenance),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], names: Mapping[str, Any] | None = None) -> Calibration:
        """`names`: the content of the names file (`names_to_json`), where the calibration names one."""
        try:
            models = {str(k): LogisticModel.from_json(v) for k, v in data["models"].items()}
            return cls(
                models,
                float(data["threshold"]),
                dict(data.get("provenance") or {}),
                names_from_json(names) if names is not None else {},
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            if isinstance(exc, CalibrationError):
                raise
            raise CalibrationError(f"bad calibration: {exc}") from None


def names_to_json(names: Mapping[str, frozenset[str]], provenance: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "provenance": dict(provenance),
        **{kind: sorted(names.get(kind, ())) for kind in ("entity", "relation")},
    }


def names_from_json(data: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    names: dict[str, frozenset[str]] = {}
    for kind in ("entity", "relation"):
        values = data.get(kind) if isinstance(data, Mapping) else None
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise CalibrationError(f"bad names file: {kind!r} must be a list of strings")
        # Normalized again, so a hand-edited file cannot hold a name that never matches.
        names[kind] = frozenset(normalize_label(v) for v in values)
    return names


@lru_cache(maxsize=1)
def shipped_calibration() -> Calibration:
    """The calibration that ships in the package, with the names file it names (read once)."""
    package = resources.files("pgmr.resolver")
    data = json.loads(package.joinpath(CALIBRATION_FILE).read_text(encoding="utf-8"))
    names = None
    if data.get("names"):
        try:
            names = json.loads(package.joinpath(str(data["names"])).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CalibrationError(
                f"cannot read the calibration's names file {data['names']!r}: {exc}"
            ) from None
    return Calibration.from_json(data, names)


def shipped_threshold() -> float:
    """The refusal threshold chosen on validation: refuse when a placeholder's confidence is below it."""
    return shipped_calibration().threshold


__all__ = [
    "FEATURES",
    "Calibration",
    "CalibrationError",
    "LogisticModel",
    "NAMES_FILE",
    "Support",
    "features",
    "names_from_json",
    "names_to_json",
    "question_keys",
    "shipped_calibration",
    "word_match",
    "shipped_threshold",
]
