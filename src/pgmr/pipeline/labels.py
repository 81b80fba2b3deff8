"""The last stage: result values -> answers, Wikidata IRIs with the label and description a catalog holds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pgmr.kg.ids import id_kind, iri_to_prefixed
from pgmr.pipeline.results import Answer

if TYPE_CHECKING:
    from pgmr.memory import Memory
    from pgmr.stores import QueryResult, Term


class LabelSource(Protocol):
    """ID -> an object with `.label` and `.description` (a CatalogEntry, a MemoryRow), or None."""

    def get(self, wikidata_id: str) -> Any: ...


class MemoryLabels:
    """Labels from the memory's own rows, for when no label catalog is given (they come from the same files)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def get(self, wikidata_id: str) -> Any:
        if ":" in wikidata_id:  # an IRI of another graph's memory: its kind is in neither form nor number
            return self.memory.entities.get(wikidata_id) or self.memory.relations.get(wikidata_id)
        return self.memory.dictionary(id_kind(wikidata_id)).get(wikidata_id)


def answers(result: QueryResult, labels: LabelSource) -> list[Answer]:
    """Every bound value of every row, in the result's variable order."""
    found: list[Answer] = []
    for row in result.rows:
        names = result.variables if result.variables else tuple(row)
        for name in names:
            term = row.get(name)
            if term is not None:
                found.append(answer(term, name, labels))
    return found


def answer(term: Term, variable: str, labels: LabelSource) -> Answer:
    wid = label = description = None
    if term.kind == "iri":
        prefixed = iri_to_prefixed(term.value)
        if prefixed is not None:
            wid = prefixed[1]
            entry = labels.get(wid)
            if entry is not None:
                label, description = entry.label, entry.description
        elif (entry := labels.get(term.value)) is not None:  # an IRI another graph's memory names
            label, description = entry.label, entry.description
    return Answer(term.value, term.kind, variable, wid, label, description, term.datatype, term.language)


__all__ = ["LabelSource", "MemoryLabels", "answer", "answers"]
