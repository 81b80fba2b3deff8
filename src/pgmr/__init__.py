"""pgmr: natural-language questions to SPARQL over Wikidata via post-generation memory retrieval."""

from __future__ import annotations

__version__ = "0.1.0"
