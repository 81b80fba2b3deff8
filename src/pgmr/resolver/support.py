"""How much the memory supports a placeholder: an estimated probability that the memory holds what the placeholder
names, from several signals of the evidence, by a small logistic model per kind fitted on LC-QuAD 2.0
validation only (scripts/fit_refusal.py; the fitted model, its threshold and provenance ship as
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

A model may use a subset (its `features`); every signal is recorded whichever it uses.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from pgmr.query.model import Placeholder
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
)
CALIBRATION_FILE = "calibration.json"
EXACT = 0.999


class CalibrationError(ValueError):
    """A calibration file that does not describe the model this module computes."""


def features(placeholder: Placeholder, candidates: Sequence[Candidate]) -> dict[str, float]:
    """The signals of one placeholder's ranked candidates (the best first); all zero without candidates."""
    if not candidates:
        return dict.fromkeys(FEATURES, 0.0)
    best = candidates[0]
    runner_up = candidates[1].similarity if len(candidates) > 1 else 0.0
    key = normalize_label(placeholder.label)
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
    """The fitted models (one per kind), the shipped refusal threshold and where they came from."""

    models: Mapping[str, LogisticModel]
    threshold: float
    provenance: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise CalibrationError(f"the threshold is a probability in [0, 1], got {self.threshold}")

    def support(self, placeholder: Placeholder, candidates: Sequence[Candidate]) -> Support | None:
        """None for a kind without a model (then only the similarity thresholds can refuse it)."""
        model = self.models.get(placeholder.kind)
        if model is None:
            return None
        values = features(placeholder, candidates)
        confidence = model.probability(values) if candidates else 0.0
        return Support(round(confidence, 6), tuple((n, round(values[n], 6)) for n in FEATURES))

    def to_json(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "models": {kind: m.to_json() for kind, m in self.models.items()},
            "provenance": dict(self.provenance),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Calibration:
        try:
            models = {str(k): LogisticModel.from_json(v) for k, v in data["models"].items()}
            return cls(models, float(data["threshold"]), dict(data.get("provenance") or {}))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            if isinstance(exc, CalibrationError):
                raise
            raise CalibrationError(f"bad calibration: {exc}") from None


@lru_cache(maxsize=1)
def shipped_calibration() -> Calibration:
    """The calibration that ships in the package (read once)."""
    text = resources.files("pgmr.resolver").joinpath(CALIBRATION_FILE).read_text(encoding="utf-8")
    return Calibration.from_json(json.loads(text))


def shipped_threshold() -> float:
    """The refusal threshold chosen on validation: refuse when a placeholder's confidence is below it."""
    return shipped_calibration().threshold


__all__ = [
    "FEATURES",
    "Calibration",
    "CalibrationError",
    "LogisticModel",
    "Support",
    "features",
    "shipped_calibration",
    "shipped_threshold",
]
