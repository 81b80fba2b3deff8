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
  0.5 * (1 - log10(number) / 9) (older, lower Wikidata IDs tend to be the prominent sense of a label). With a
  small weight it only decides between near-ties, such as homonyms without descriptions.
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

from pgmr.kg.ids import id_number
from pgmr.kg.labels import normalize_label as normalize_label  # re-exported: its home before pgmr.kg.labels

# Largest Wikidata ID numbers are ~1.3e8; log10 of that is under 9.
_ID_DIGITS = 9.0


class Prior:
    """Prominence of IDs, from counts (training-query occurrences, or a dump's sitelinks) and ID numbers.

    Without `age_share`: counts first, the ID number only for IDs without a count (the prior of the paper's
    experiments, counted from gold queries). With `age_share` a in [0, 1], every ID gets the blend
    (1 - a) * log1p(count) / log1p(max count) + a * (1 - log10(number) / 9): a dump's sitelink count and its
    ID's age, neither deciding alone (pgmr.resolver.priors.SITELINK_AGE_SHARE, chosen on validation).
    """

    def __init__(self, counts: Mapping[str, int] | None = None, *, age_share: float | None = None) -> None:
        if age_share is not None and not 0.0 <= age_share <= 1.0:
            raise ValueError(f"age_share must be in [0, 1], got {age_share}")
        self.counts = dict(counts or {})
        self.age_share = age_share
        self._log_max = math.log1p(max(self.counts.values(), default=0))

    def __call__(self, wikidata_id: str) -> float:
        count = self.counts.get(wikidata_id, 0)
        if self.age_share is not None:
            counted = math.log1p(count) / self._log_max if self._log_max else 0.0
            return (1.0 - self.age_share) * counted + self.age_share * _age(wikidata_id)
        if count and self._log_max:
            return 0.5 + 0.5 * math.log1p(count) / self._log_max
        return 0.5 * _age(wikidata_id)


def _age(wikidata_id: str) -> float:
    """1 for the oldest IDs, 0 for the newest: a label's prominent sense tends to have a low Wikidata number."""
    number = max(id_number(wikidata_id), 1)
    return max(0.0, 1.0 - math.log10(number) / _ID_DIGITS)
