"""Fitting the support model (pgmr.resolver.support): an L2-regularized logistic regression by Newton's method,
in numpy, deterministic (no random start, no sampling), small enough to read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from pgmr.resolver.support import LogisticModel


def fit_logistic(
    rows: Sequence[Mapping[str, float]],
    labels: Sequence[bool],
    names: Sequence[str],
    *,
    l2: float = 1.0,
    iterations: int = 50,
) -> LogisticModel:
    """P(label) from the support signals `names` of `rows` (see `logistic_coefficients`)."""
    coef, intercept, mean, scale = logistic_coefficients(rows, labels, names, l2=l2, iterations=iterations)
    return LogisticModel(tuple(names), coef, intercept, mean, scale)


def logistic_coefficients(
    rows: Sequence[Mapping[str, float]],
    labels: Sequence[bool],
    names: Sequence[str],
    *,
    l2: float = 1.0,
    iterations: int = 50,
) -> tuple[tuple[float, ...], float, tuple[float, ...], tuple[float, ...]]:
    """(coefficients, intercept, means, scales) of P(label) = sigmoid(intercept + sum(coef * (x - mean) /
    scale)) over the features `names` of `rows`. Features are standardized first (a constant one keeps scale
    1), so `l2` weighs every coefficient alike; the intercept is not penalized."""
    if len(rows) != len(labels) or not rows:
        raise ValueError("need as many labels as rows, and at least one row")
    if l2 < 0:
        raise ValueError("l2 must be >= 0")
    x = np.array([[float(r[n]) for n in names] for r in rows], dtype=np.float64)
    y = np.array([1.0 if v else 0.0 for v in labels], dtype=np.float64)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    penalty = np.full(z.shape[1], l2)
    penalty[0] = 0.0
    w = np.zeros(z.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -50, 50)))
        gradient = z.T @ (p - y) + penalty * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(z.shape[1])
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return (
        tuple(round(float(c), 6) for c in w[1:]),
        round(float(w[0]), 6),
        tuple(round(float(m), 6) for m in mean),
        tuple(round(float(s), 6) for s in scale),
    )


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve (ties count half); None when one class is absent."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return None
    order = np.argsort(np.array(list(scores), dtype=np.float64), kind="mergesort")
    ranks = np.empty(len(order))
    values = np.array(list(scores), dtype=np.float64)[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    positive = np.array([bool(v) for v in labels])
    return float((ranks[positive].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


__all__ = ["auc", "fit_logistic", "logistic_coefficients"]
