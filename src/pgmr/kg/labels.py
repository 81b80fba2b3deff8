"""The normal form of a label for exact matching: the same for the memory's lexical tier and the resolver."""

from __future__ import annotations

import functools
import unicodedata


# Ranking normalizes each candidate's label, and the same labels come back across placeholders and batches.
@functools.lru_cache(maxsize=1 << 16)
def normalize_label(text: str) -> str:
    """Case-, accent- and whitespace-insensitive form used for exact label/alias matching."""
    text = unicodedata.normalize("NFKD", text.casefold())
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return " ".join(text.split())
