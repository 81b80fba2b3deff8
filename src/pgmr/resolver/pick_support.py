"""How likely each candidate of a placeholder is to be what the placeholder names, as one distribution.

The resolver estimates one probability per placeholder (pgmr.resolver.support): that its pick, the best
candidate, is what the placeholder names (`confidence`, what the refusal compares with its threshold). Several
answers for one question (`pgmr ask --candidates N`, pgmr.pipeline.alternatives) need a probability for the
other candidates too. With q the softmax of the candidates' resolver scores at slope b,

    q_j = exp(b * score_j) / sum over the kept candidates of exp(b * score_i)

the probability that the right ID is among the kept candidates is R = min(1, confidence / q_1), and

    P(best)          = confidence
    P(j-th, j > 1)   = R * q_j                                 when confidence <= q_1
                     = (1 - confidence) * q_j / (1 - q_1)      when confidence >  q_1

The pick keeps its calibrated confidence; q says how the candidates compare (pgmr.resolver.ranking: the
scores are similarity plus the prior's and the label bonuses), the confidence says how much there is to
share. A confident pick leaves 1 - confidence to the others, shared by q. An unsure one says that the memory
may not hold the thing at all ("Atlantis"): the others then keep their odds against the pick, q_j / q_1,
and all of them together get R, not 1 - confidence. Either way no other candidate is more likely than the
pick, as the resolver ranks them, and the two cases meet at confidence = q_1 (where P = q).

The slope b is not chosen here: it is the kind's support model's own weight on similarity, in log-odds per
unit (coefficient / scale in calibration.json: 5.3 for entities, 2.7 for relations as shipped), so a
candidate 0.1 less similar than another gets the odds the support model gives a best candidate 0.1 less
similar. A homonym then takes most of what a confident pick leaves, and a candidate that merely came back
from the search takes little. A kind without a support model (or one that does not weigh similarity) has
no confidence and no slope: all its candidates share 1 equally.

Set aside, each tried on the tests' small memory: the support model itself, given the list with another
candidate first. It was fitted on best candidates only, and on a lower one it extrapolates: for "Berlin" it
rated "Paris, son of Priam" (similarity 0.59) at 0.89, because its weight on `exact` is negative and only
makes sense beside `own_label`. Shares in proportion to the scores (no slope): the kept candidates' scores
all lie within 0.3-1.05, so the shares come out nearly equal, and for "How many people live in Hamburg?" the
relation "country" (score 0.37) outranked the homonym Hamburg, New York (1.03). Sharing 1 - confidence
whatever the confidence (no R): for "Who rules Atlantis?" every other candidate outranked the pick, whose
confidence was 0.03, as if a memory without Atlantis held it under another name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pgmr.resolver.model import PlaceholderEvidence
from pgmr.resolver.support import Calibration


def similarity_slope(calibration: Calibration, kind: str) -> float:
    """The kind's support model's weight on similarity in log-odds per unit (0 without one, or when its weight
    is negative: a softmax that preferred the less similar would invert the resolver's order)."""
    model = calibration.models.get(kind)
    if model is None or "similarity" not in model.names:
        return 0.0
    i = model.names.index("similarity")
    return max(model.coef[i] / model.scale[i], 0.0)


def pick_confidences(evidence: PlaceholderEvidence, slope: float) -> tuple[float, ...]:
    """Per candidate of `evidence` (in its order, best first), the probability that it is what the placeholder
    names, by the module docstring's rule with `slope` (`similarity_slope` of its kind); they sum to R."""
    scores = [c.score for c in evidence.candidates]
    if not scores:
        return ()
    confidence = evidence.confidence
    if confidence is None:
        return _softmax(scores, 0.0)
    q = _softmax(scores, slope)
    if confidence <= q[0] or len(q) == 1:
        return (confidence, *(confidence * qj / q[0] for qj in q[1:]))
    return (confidence, *((1.0 - confidence) * qj / (1.0 - q[0]) for qj in q[1:]))


def _softmax(scores: Sequence[float], slope: float) -> tuple[float, ...]:
    top = max(scores)
    weights = [math.exp(slope * (s - top)) for s in scores]
    total = math.fsum(weights)
    return tuple(w / total for w in weights)


def pick_supported(evidence: PlaceholderEvidence, index: int, confidence: float) -> bool:
    """Whether candidate `index` as the pick passes the gates the refusal applies to the best one: the
    similarity threshold, and the refusal threshold on its probability (for a kind without a support model,
    the similarity threshold alone, as for the best)."""
    similar = evidence.candidates[index].similarity >= evidence.threshold
    return similar and (evidence.support is None or confidence >= evidence.min_confidence)


__all__ = ["pick_confidences", "pick_supported", "similarity_slope"]
