"""How candidates are ranked: similarity, an exact label/alias match bonus and a prominence prior.

score = similarity + exact_weight * [placeholder label equals a label or alias of the candidate]
                   + prior_weight * prior(candidate)

- similarity: cosine between the placeholder text and the candidate's best row ("label, description" or
  "alias, description"). When the placeholder has no description, a candidate whose label or alias equals
  the placeholder label matches everything the placeholder says, so its similarity is 1.0: without this,
  homonyms that lack a description in memory ("Paris") would beat described ones ("Paris, capital of France")
  only because their text is shorter.
- prior in [0, 1]: how prominent an ID is. With training counts (how often the ID occurs in training gold
  queries) it is log1p(count) / log1p(max count); IDs never seen fall back to the ID-number prior scaled to
  [0, 0.5) (older, lower Wikidata IDs tend to be the prominent sense of a label).
The threshold for refusal applies to similarity, which stays interpretable (a cosine), not to score.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping

from pgmr.kg.ids import id_number

# Largest Wikidata ID numbers are ~1.3e8; log10 of that is under 9.
_ID_DIGITS = 9.0


def normalize_label(text: str) -> str:
    """Case-, accent- and whitespace-insensitive form used for exact label/alias matching."""
    text = unicodedata.normalize("NFKD", text.casefold())
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return " ".join(text.split())


class Prior:
    """Prominence of IDs, from training-query counts when given, else from ID numbers alone."""

    def __init__(self, counts: Mapping[str, int] | None = None) -> None:
        self.counts = dict(counts or {})
        self._log_max = math.log1p(max(self.counts.values(), default=0))

    def __call__(self, wikidata_id: str) -> float:
        count = self.counts.get(wikidata_id, 0)
        if count and self._log_max:
            return 0.5 + 0.5 * math.log1p(count) / self._log_max
        number = max(id_number(wikidata_id), 1)
        return 0.5 * max(0.0, 1.0 - math.log10(number) / _ID_DIGITS)
