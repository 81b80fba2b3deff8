"""Wikidata identifiers, the prefixes that carry them, and their full IRIs."""

from __future__ import annotations

import re
from typing import Literal

Kind = Literal["entity", "relation"]

ENTITY_BASE = "http://www.wikidata.org/entity/"

# Prefixes whose local name is a Wikidata ID. `wd:` holds items (Q) and properties-as-items (P, L);
# the others only ever hold property IDs.
ID_PREFIXES: dict[str, str] = {
    "wd": "http://www.wikidata.org/entity/",
    "wdt": "http://www.wikidata.org/prop/direct/",
    "wdtn": "http://www.wikidata.org/prop/direct-normalized/",
    "p": "http://www.wikidata.org/prop/",
    "ps": "http://www.wikidata.org/prop/statement/",
    "psv": "http://www.wikidata.org/prop/statement/value/",
    "psn": "http://www.wikidata.org/prop/statement/value-normalized/",
    "pq": "http://www.wikidata.org/prop/qualifier/",
    "pqv": "http://www.wikidata.org/prop/qualifier/value/",
    "pqn": "http://www.wikidata.org/prop/qualifier/value-normalized/",
    "pr": "http://www.wikidata.org/prop/reference/",
    "prv": "http://www.wikidata.org/prop/reference/value/",
    "prn": "http://www.wikidata.org/prop/reference/value-normalized/",
    "wdno": "http://www.wikidata.org/prop/novalue/",
}

# Other prefixes that Wikidata queries use without declaring them (the Wikidata Query Service predeclares them).
OTHER_PREFIXES: dict[str, str] = {
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
    "owl": "http://www.w3.org/2002/07/owl#",
    "skos": "http://www.w3.org/2004/02/skos/core#",
    "schema": "http://schema.org/",
    "wikibase": "http://wikiba.se/ontology#",
    "bd": "http://www.bigdata.com/rdf#",
    "wds": "http://www.wikidata.org/entity/statement/",
    "wdv": "http://www.wikidata.org/value/",
    "wdref": "http://www.wikidata.org/reference/",
    "geo": "http://www.opengis.net/ont/geosparql#",
    "dct": "http://purl.org/dc/terms/",
    "prov": "http://www.w3.org/ns/prov#",
    "hint": "http://www.bigdata.com/queryHints#",
}

WIKIDATA_PREFIXES: dict[str, str] = {**ID_PREFIXES, **OTHER_PREFIXES}

ID_RE = re.compile(r"^[QPL][1-9][0-9]*$")


def prefix_block(prefixes: dict[str, str] | None = None) -> str:
    """PREFIX declarations, one per line, for the given (default: all Wikidata) prefixes."""
    items = (prefixes or WIKIDATA_PREFIXES).items()
    return "\n".join(f"PREFIX {name}: <{iri}>" for name, iri in items)


def is_wikidata_id(text: str) -> bool:
    return bool(ID_RE.match(text))


def id_kind(wikidata_id: str) -> Kind:
    """Properties (P...) are relations; items and lexemes are entities."""
    return "relation" if wikidata_id.startswith("P") else "entity"


def id_number(wikidata_id: str) -> int:
    return int(wikidata_id[1:])


def id_order(identifier: str) -> tuple[int, str]:
    """Sort key of memory IDs: Wikidata IDs by number, then text (as always); an IRI of another graph's memory
    (no number) by its text, before them."""
    # An IRI always has a scheme; a Wikidata ID never has a colon.
    return (-1, identifier) if ":" in identifier else (id_number(identifier), identifier)


def id_number_order(identifier: str) -> tuple[int, str]:
    """The ID number alone for Wikidata IDs (ties keep their order, as a plain number key does); an IRI by text."""
    return (-1, identifier) if ":" in identifier else (id_number(identifier), "")


def iri_to_prefixed(iri: str) -> tuple[str, str] | None:
    """`http://www.wikidata.org/prop/direct/P31` -> ("wdt", "P31") when the local name is a Wikidata ID."""
    best: tuple[str, str] | None = None
    for name, base in ID_PREFIXES.items():
        if iri.startswith(base):
            local = iri[len(base) :]
            # The longest matching base wins: prop/ is a prefix of prop/direct/.
            if is_wikidata_id(local) and (best is None or len(base) > len(ID_PREFIXES[best[0]])):
                best = (name, local)
    return best
