"""Backends of the SPARQL store seam (`pgmr.kg.store`): embedded oxigraph and SPARQL-over-HTTP."""

from __future__ import annotations

from pgmr.kg.stores.http_store import HttpSparqlStore
from pgmr.kg.stores.oxigraph_store import LoadProgress, OxigraphStore

__all__ = ["HttpSparqlStore", "LoadProgress", "OxigraphStore"]
