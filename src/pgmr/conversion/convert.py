"""Gold SPARQL -> SPARQL-PGMR from the KG's own labels, and back.

`convert` replaces every Wikidata ID by a placeholder (numbered by first appearance, the same ID always
getting the same placeholder) and writes a mapping line with the ID's label and description. `fill` puts IDs
back into a skeleton. Standard PREFIX declarations are dropped from skeletons (the generator should not spend
tokens on them) and added back by `fill`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from pgmr.conversion.errors import ConversionError
from pgmr.conversion.graph import declared_prefix_map, graph_skeleton
from pgmr.datasets import QARecord
from pgmr.kg.catalog import LabelCatalog
from pgmr.kg.graph import GraphCatalog
from pgmr.kg.ids import ID_PREFIXES, WIKIDATA_PREFIXES, id_kind, iri_to_prefixed, is_wikidata_id
from pgmr.kg.iris import is_iri, usable_prefixes, write_iri
from pgmr.query.errors import IntermediateQueryError
from pgmr.query.gate import check_query
from pgmr.query.lexer import Token, tokenize
from pgmr.query.model import IntermediateQuery, Placeholder, placeholder_kind
from pgmr.query.parser import parse
from pgmr.query.sparql import with_prefixes


@dataclass(frozen=True)
class ConvertedRecord:
    id: str
    question: str
    sparql: str
    intermediate: str
    mapping: tuple[tuple[str, str], ...]  # placeholder -> Wikidata ID, in placeholder order
    source: str = ""
    meta: tuple[tuple[str, str], ...] = ()

    def mapping_dict(self) -> dict[str, str]:
        return dict(self.mapping)

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "question": self.question,
            "sparql": self.sparql,
            "intermediate": self.intermediate,
            "mapping": dict(self.mapping),
            "source": self.source,
            **({"meta": dict(self.meta)} if self.meta else {}),
        }


@dataclass
class ConversionSummary:
    records_in: int = 0
    converted: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, reason: str, detail: str) -> None:
        self.skipped[reason] += 1
        self.examples.setdefault(reason, [])
        if len(self.examples[reason]) < 5:
            self.examples[reason].append(detail if len(detail) <= 160 else detail[:157] + "...")

    def to_json(self) -> dict:
        return {
            "records_in": self.records_in,
            "converted": self.converted,
            "skipped": dict(self.skipped),
            "skipped_total": sum(self.skipped.values()),
            "examples": self.examples,
        }


def _id_of(tok: Token) -> tuple[str, str] | None:
    """(prefix, Wikidata ID) carried by a token, for prefixed names and full IRIs alike."""
    if tok.kind == "pname" and tok.prefix in ID_PREFIXES and is_wikidata_id(tok.local):
        return tok.prefix, tok.local
    if tok.kind == "iri":
        return iri_to_prefixed(tok.text[1:-1])
    return None


def _strip_standard_prefixes(tokens: list[Token]) -> set[int]:
    """Token indexes of `PREFIX name: <iri>` declarations that only restate a standard Wikidata prefix."""
    drop: set[int] = set()
    for i in range(len(tokens) - 2):
        kw, name, iri = tokens[i], tokens[i + 1], tokens[i + 2]
        if (
            kw.kind == "keyword"
            and kw.text.upper() == "PREFIX"
            and name.kind == "pname"
            and name.local == ""
            and iri.kind == "iri"
            and WIKIDATA_PREFIXES.get(name.prefix) == iri.text[1:-1]
        ):
            drop.update((i, i + 1, i + 2))
    return drop


def to_skeleton(sparql: str) -> tuple[str, dict[str, str]]:
    """Gold SPARQL -> (compact skeleton with placeholders, placeholder -> ID). Raises ConversionError."""
    try:
        tokens = [t for t in tokenize(sparql) if t.kind != "comment"]
    except IntermediateQueryError as exc:
        raise ConversionError("invalid_sparql", str(exc)) from None
    drop = _strip_standard_prefixes(tokens)
    names: dict[str, str] = {}
    counters = {"entity": 0, "relation": 0}
    pieces: list[str] = []
    last_end: int | None = None
    for i, tok in enumerate(tokens):
        if i in drop:
            continue
        text = tok.text
        hit = _id_of(tok)
        if hit:
            prefix, wid = hit
            if wid not in names:
                kind = id_kind(wid)
                names[wid] = f"{kind}{counters[kind]}"
                counters[kind] += 1
            if id_kind(wid) == "entity" and prefix != "wd":
                raise ConversionError("entity_as_relation", f"{prefix}:{wid}")
            text = f"{prefix}:{names[wid]}"
        if last_end is not None and sparql[last_end : tok.start]:
            pieces.append(" ")
        pieces.append(text)
        last_end = tok.end
    return "".join(pieces).strip(), {name: wid for wid, name in names.items()}


def convert_sparql(sparql: str, catalog: LabelCatalog) -> tuple[IntermediateQuery, dict[str, str]]:
    """Gold SPARQL -> (intermediate query, placeholder -> ID). Raises ConversionError with a reason."""
    try:
        check_query(sparql)
    except IntermediateQueryError as exc:
        raise ConversionError("invalid_sparql", exc.message) from None
    # A graph's IRIs are named by its catalog (pgmr.conversion.graph); Wikidata IDs by their form.
    skeleton, mapping = (
        graph_skeleton(sparql, catalog) if isinstance(catalog, GraphCatalog) else to_skeleton(sparql)
    )
    missing = [wid for wid in mapping.values() if not catalog.label(wid)]
    if missing:
        raise ConversionError("missing_label", ", ".join(missing))
    placeholders = []
    for name, wid in mapping.items():
        entry = catalog.get(wid)
        assert entry is not None and entry.label
        kind = placeholder_kind(name)
        assert kind is not None
        placeholders.append(Placeholder(name, kind, entry.label, entry.description or ""))
    query = IntermediateQuery(skeleton, tuple(placeholders))
    try:
        # The gate the generator's output will meet: a training target it rejects is no target.
        parse(query.to_text())
    except IntermediateQueryError as exc:
        raise ConversionError(f"not_expressible:{exc.code}", exc.message) from None
    return query, mapping


def fill(
    query: IntermediateQuery | str,
    mapping: Mapping[str, str],
    prefixes: bool = True,
    *,
    namespaces: Mapping[str, str] | None = None,
) -> str:
    """Put Wikidata IDs back in place of placeholders; with `prefixes`, declare the standard prefixes used.

    A value that is an IRI (an entry of another graph's memory) replaces the whole placeholder, written with
    one of `namespaces` (the graph's prefixes, declared in front when `prefixes`) where one fits, else `<IRI>`.
    Raises KeyError naming a placeholder the mapping lacks.
    """
    skeleton = query.skeleton if isinstance(query, IntermediateQuery) else query
    usable = usable_prefixes(namespaces, declared_prefix_map(skeleton)) if namespaces and prefixes else {}
    used: dict[str, str] = {}
    pieces: list[str] = []
    last = 0
    for tok in tokenize(skeleton):
        if tok.kind == "pname" and tok.prefix in ID_PREFIXES and placeholder_kind(tok.local):
            if tok.local not in mapping:
                raise KeyError(f"no ID for placeholder {tok.local}")
            value = mapping[tok.local]
            pieces.append(skeleton[last : tok.start])
            if is_iri(value):
                written = write_iri(value, usable)
                name = written.split(":", 1)[0]
                if not written.startswith("<"):
                    used[name] = usable[name]
                pieces.append(written)
            else:
                pieces.append(f"{tok.prefix}:{value}")
            last = tok.end
    pieces.append(skeleton[last:])
    filled = "".join(pieces)
    if used:
        declared = declared_prefix_map(skeleton)
        lines = [f"PREFIX {name}: <{iri}>" for name, iri in sorted(used.items()) if declared.get(name) != iri]
        filled = "\n".join([*lines, filled]) if lines else filled
    return with_prefixes(filled) if prefixes else filled


def convert_record(record: QARecord, catalog: LabelCatalog) -> ConvertedRecord:
    query, mapping = convert_sparql(record.sparql, catalog)
    return ConvertedRecord(
        id=record.id,
        question=record.question,
        sparql=record.sparql,
        intermediate=query.to_text(),
        mapping=tuple(mapping.items()),
        source=record.source,
        meta=record.meta,
    )


def convert_records(
    records: Iterable[QARecord], catalog: LabelCatalog, summary: ConversionSummary
) -> Iterator[ConvertedRecord]:
    for record in records:
        summary.records_in += 1
        try:
            converted = convert_record(record, catalog)
        except ConversionError as exc:
            summary.skip(exc.reason, f"{record.id}: {exc.detail}")
            continue
        summary.converted += 1
        yield converted


def roundtrip_problem(record: ConvertedRecord) -> str | None:
    """None when fill(convert(gold)) has the same algebra as the gold query, else a reason code."""
    from pgmr.query.sparql import query_algebra

    try:
        query = parse(record.intermediate)
    except IntermediateQueryError as exc:
        return f"intermediate_does_not_parse:{exc.code}"
    try:
        gold = query_algebra(record.sparql)
    except IntermediateQueryError:
        return "rdflib_cannot_parse_gold"
    try:
        filled = query_algebra(fill(query, record.mapping_dict()))
    except IntermediateQueryError:
        return "rdflib_cannot_parse_filled"
    return None if filled == gold else "algebra_differs"
