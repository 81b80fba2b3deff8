"""IRIs of any graph: their namespaces, the prefixed names a SPARQL query can write for them, and prefix names
for namespaces a graph does not name itself.

A memory built from a user's graph holds IRIs where a Wikidata memory holds IDs; an IRI always has a scheme
(`http:`, `urn:`), a Wikidata ID never has a colon, which is how the two are told apart everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from pgmr.kg.ids import WIKIDATA_PREFIXES

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
# The local names written as `prefix:local`: a subset of SPARQL's PN_LOCAL that pgmr's lexer reads whole
# (no `%xx` escapes, no `:`, no trailing '.'); any other IRI is written `<...>` in full.
_LOCAL = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_\-.]*[A-Za-z0-9_\-])?$")
_PREFIX_NAME = re.compile(r"^[A-Za-z](?:[A-Za-z0-9_\-]*[A-Za-z0-9_])?$")
# Conventional names of common vocabularies, for graphs that do not declare them (N-Triples, endpoints).
KNOWN_NAMESPACES: dict[str, str] = {
    **{iri: name for name, iri in WIKIDATA_PREFIXES.items()},
    "https://schema.org/": "schema",
    "http://xmlns.com/foaf/0.1/": "foaf",
    "http://purl.org/dc/elements/1.1/": "dc",
    "http://www.w3.org/ns/dcat#": "dcat",
    "http://www.w3.org/ns/org#": "org",
    "http://www.w3.org/2003/01/geo/wgs84_pos#": "wgs",
    "http://dbpedia.org/ontology/": "dbo",
    "http://dbpedia.org/resource/": "dbr",
}


def is_iri(text: str) -> bool:
    """An absolute IRI (it has a scheme), as opposed to a Wikidata ID (`Q42`), which never has a colon."""
    return bool(_SCHEME.match(text))


def namespace_of(iri: str) -> str:
    """The IRI up to its last '#' or '/' (or ':' for URNs): what a prefix names."""
    for mark in ("#", "/", ":"):
        # Not the last character: a namespace IRI itself (`.../prod-vocab/`) lies in its parent's namespace.
        cut = iri.rfind(mark, 0, len(iri) - 1)
        if cut >= 0:
            return iri[: cut + 1]
    return iri


def compact(iri: str, prefixes: Mapping[str, str]) -> tuple[str, str] | None:
    """(prefix, local name) for the longest namespace of `prefixes` (name -> namespace) that leaves a local
    name pgmr can write, or None."""
    best: tuple[str, str] | None = None
    for name, base in prefixes.items():
        if not name or not iri.startswith(base) or not _PREFIX_NAME.match(name):
            continue
        local = iri[len(base) :]
        if _LOCAL.match(local) and (best is None or len(base) > len(prefixes[best[0]])):
            best = (name, local)
    return best


def write_iri(iri: str, prefixes: Mapping[str, str]) -> str:
    """`prefix:local` where a prefix of `prefixes` fits, else `<iri>`."""
    hit = compact(iri, prefixes)
    return f"{hit[0]}:{hit[1]}" if hit else f"<{iri}>"


def usable_prefixes(prefixes: Mapping[str, str], declared: Mapping[str, str] | None = None) -> dict[str, str]:
    """The prefixes a final query may be written with: a graph's own, less those whose name a standard
    Wikidata prefix or the query's own declarations (`declared`) bind to another namespace (the gate
    predeclares the standard ones, and a query's declaration must keep its meaning)."""
    taken = {**WIKIDATA_PREFIXES, **(declared or {})}
    return {
        name: iri
        for name, iri in prefixes.items()
        if name and _PREFIX_NAME.match(name) and taken.get(name, iri) == iri
    }


def generated_prefixes(namespaces: Iterable[str], declared: Mapping[str, str]) -> dict[str, str]:
    """Prefix names for the namespaces `declared` (name -> namespace) does not name: a vocabulary's
    conventional name, else one made from the namespace's last path segment (`.../prod-vocab/` -> `prodvocab`),
    numbered when taken; never a standard Wikidata prefix name."""
    named = set(declared.values())
    taken = set(declared) | set(WIKIDATA_PREFIXES)
    made: dict[str, str] = {}
    for namespace in sorted(set(namespaces) - named):
        base = KNOWN_NAMESPACES.get(namespace) or _name_from(namespace)
        name, n = base, 1
        while name in taken and not (WIKIDATA_PREFIXES.get(name) == namespace and name not in declared):
            n += 1
            name = f"{base}{n}"
        taken.add(name)
        made[name] = namespace
    return made


_GENERIC = re.compile(r"v?\d*|www|ns|org|com|net|edu|gov|io|de|uk|fr|data|id|resource|ontology|vocab")


def _name_from(namespace: str) -> str:
    """The last meaningful path segment, or the host's main label (`https://ns.example.com/` -> `example`)."""
    words = [w for w in re.split(r"[/#:]", namespace) if w and w.lower() not in ("http", "https", "urn")]
    for word in reversed(words):
        # A host's longest label is its name (`ld.company.org` -> `company`); a path segment is taken whole.
        parts = sorted(word.split("."), key=len, reverse=True) if "." in word else [word]
        for part in parts:
            name = re.sub(r"[^A-Za-z0-9]", "", part).lower().lstrip("0123456789")
            if name and not _GENERIC.fullmatch(name):
                return name[:12]
    return "ns"


__all__ = [
    "KNOWN_NAMESPACES",
    "compact",
    "generated_prefixes",
    "is_iri",
    "namespace_of",
    "usable_prefixes",
    "write_iri",
]
