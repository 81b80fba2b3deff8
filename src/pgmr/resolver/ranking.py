"""How candidates are ranked: label similarity, description similarity and a prominence prior.

    label_sim  = max(cosine(label, candidate rows), edit_similarity(label, candidate label/aliases))
    similarity = label_sim                                       (placeholder without description)
               = (label_sim + cosine("label, description", candidate rows)) / 2     (with description)
    score      = similarity + prior_weight * prior + agreement_weight * [description agreement]
                            + canonical_weight * [the label is the candidate's own label, not an alias]

- The memory holds, for every label and alias, a row with the description and one without, so the label alone
  meets label-only rows and "label, description" meets rows of its own shape.
- Edit similarity is rapidfuzz's normalized ratio after case, accent and whitespace normalization. Subword
  embeddings are fragile under typos ("dorqier" is nearer "Dollar" than "Dornier" for all-MiniLM-L6-v2); the
  edit similarity is not, while the cosine catches paraphrases ("birthplace" for "place of birth"). Taking the
  larger of the two keeps whichever evidence is stronger.
- The description half separates homonyms, whose labels score the same.
- Candidates come from both searches plus every exact label/alias match or, when there is none, the closest
  fuzzy matches; scores a search did not return are computed from the stored vectors.
- prior in [0, 1]: how prominent an ID is. With training counts (how often the ID occurs in training gold
  queries) it is 0.5 + 0.5 * log1p(count) / log1p(max count); IDs never seen fall back to the ID number,
  0.5 * (1 - log10(number) / 9) (older, lower Wikidata IDs tend to be the prominent sense of a label). A
  memory built from a dump blends its sitelink counts with that ID age for every ID instead (`prior_for`).
  With a small weight it only decides between near-ties, such as homonyms without descriptions.
- description agreement: whether the placeholder and the candidate both have a description, or both lack one.
  The training transformation writes an empty description exactly for IDs that have none, so a generator
  trained on it does the same; the bonus applies only to queries with a description somewhere (their writer
  describes), never to label-only writers, for whom an empty description says nothing.
- own label: among exact matches, the candidate whose label (not only an alias) is the placeholder's label
  wins; the training transformation names IDs by their own labels. Its weight exceeds the prior's range.
Thresholds for refusal apply to similarity (in [0, 1] for normalized embeddings), never to the prior.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pgmr.kg.ids import id_number
from pgmr.kg.iris import is_iri
from pgmr.kg.labels import normalize_label as normalize_label  # re-exported: its home before pgmr.kg.labels

# Largest Wikidata ID numbers are ~1.3e8; log10 of that is under 9.
_ID_DIGITS = 9.0
# A dump-built memory's prior: its sitelink counts blended with ID age, this share of age, scaled so that its
# weight in the score is this times the resolver's prior_weight. Chosen on LC-QuAD 2.0 validation against a
# memory of 10M synthetic items (bench/grown_prior.py, docs/scale.md: "The prior").
SITELINK_AGE_SHARE = 0.5
SITELINK_PRIOR_SCALE = 1.0


class Prior:
    """Prominence of IDs, from counts (training-query occurrences, or a dump's sitelinks) and ID numbers.

    Without `age_share`: counts first, the ID number only for IDs without a count (the prior of the paper's
    experiments, counted from gold queries). With `age_share` a in [0, 1], every ID gets the blend
    (1 - a) * log1p(count) / log1p(max count) + a * (1 - log10(number) / 9): a dump's sitelink count and its
    ID's age, neither deciding alone (SITELINK_AGE_SHARE below, chosen on validation).
    """

    def __init__(
        self, counts: Mapping[str, int] | None = None, *, age_share: float | None = None, scale: float = 1.0
    ) -> None:
        if age_share is not None and not 0.0 <= age_share <= 1.0:
            raise ValueError(f"age_share must be in [0, 1], got {age_share}")
        if scale < 0:
            raise ValueError(f"scale must be >= 0, got {scale}")
        self.counts = dict(counts or {})
        self.age_share = age_share
        # Values lie in [0, scale]: how much this prior weighs against the resolver's prior_weight.
        self.scale = scale
        self._log_max = math.log1p(max(self.counts.values(), default=0))

    def __repr__(self) -> str:
        if self.age_share is None:
            return f"Prior(counts first, ID age without a count; scale {self.scale:g})"
        return f"Prior(counts blended with ID age, age share {self.age_share:g}; scale {self.scale:g})"

    def __call__(self, wikidata_id: str) -> float:
        """The prior as the score weighs it: `value` times `scale`."""
        return self.scale * self.value(wikidata_id)

    def value(self, wikidata_id: str) -> float:
        """The prominence in [0, 1] (what the refusal model reads as its `prior` signal)."""
        count = self.counts.get(wikidata_id, 0)
        if self.age_share is not None:
            counted = math.log1p(count) / self._log_max if self._log_max else 0.0
            return (1.0 - self.age_share) * counted + self.age_share * self.age(wikidata_id)
        if count and self._log_max:
            return 0.5 + 0.5 * math.log1p(count) / self._log_max
        return 0.5 * self.age(wikidata_id)

    def age(self, wikidata_id: str) -> float:
        """1 for the oldest IDs, 0 for the newest: a label's prominent sense tends to have a low number."""
        return _age(wikidata_id)


def prior_for(source: str, counts: Mapping[str, int], tuned: Mapping[str, Any] | None = None) -> Prior:
    """The prior a memory ranks with: a dump's sitelinks blended with ID age (`tuned`: the age_share and scale
    a memory's manifest carries, set by `pgmr memory tune` after fitting them on validation; else the defaults
    above), gold-query counts (and no counts) as the paper's experiments rank them."""
    if source == "sitelinks":
        tuned = tuned or {}
        share = float(tuned.get("age_share", SITELINK_AGE_SHARE))
        return Prior(counts, age_share=share, scale=float(tuned.get("scale", SITELINK_PRIOR_SCALE)))
    return Prior(counts)


def _age(wikidata_id: str) -> float:
    if is_iri(wikidata_id):
        return 0.0  # an IRI of another graph has no number, and so no age
    number = max(id_number(wikidata_id), 1)
    return max(0.0, 1.0 - math.log10(number) / _ID_DIGITS)
