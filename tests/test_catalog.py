from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import pytest

from pgmr.kg.catalog import CatalogError, LabelCatalog, iter_dump


def _entity(wid: str, label: str, description: str | None = None, aliases: tuple[str, ...] = ()) -> dict:
    entity: dict = {
        "type": "item" if wid[0] == "Q" else "property",
        "id": wid,
        "labels": {
            "en": {"language": "en", "value": label},
            "de": {"language": "de", "value": label + " (de)"},
        },
    }
    if description:
        entity["descriptions"] = {"en": {"language": "en", "value": description}}
    entity["aliases"] = {"en": [{"language": "en", "value": a} for a in aliases]}
    entity["claims"] = {"P31": [{"mainsnak": {"snaktype": "value"}}]}
    return entity


def _write_dump(path: Path, entities: list[dict]) -> Path:
    # Wikidata's layout: a JSON array, one entity per line, each line but the last ending in a comma.
    body = "[\n" + ",\n".join(json.dumps(e) for e in entities) + "\n]\n"
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(body)
    elif path.suffix == ".bz2":
        with bz2.open(path, "wt", encoding="utf-8") as handle:
            handle.write(body)
    else:
        path.write_text(body, encoding="utf-8")
    return path


ENTITIES = [
    _entity(
        "Q1055", "Hamburg", "city and state in northern Germany", ("Free and Hanseatic City of Hamburg",)
    ),
    _entity("Q64", "Berlin", "capital of Germany"),
    _entity("P1082", "population", "number of people inhabiting the place", ("inhabitants",)),
]


@pytest.mark.parametrize("name", ["dump.json", "dump.json.gz", "dump.json.bz2"])
def test_dump_is_streamed_in_every_compression(tmp_path: Path, name: str) -> None:
    catalog = LabelCatalog.from_dump(_write_dump(tmp_path / name, ENTITIES))
    assert len(catalog) == 3
    hamburg = catalog.get("Q1055")
    assert hamburg is not None
    assert hamburg.label == "Hamburg"
    assert hamburg.description == "city and state in northern Germany"
    assert hamburg.aliases == ("Free and Hanseatic City of Hamburg",)
    assert catalog.get("P1082").kind == "relation"  # type: ignore[union-attr]


def test_dump_language_and_id_filter(tmp_path: Path) -> None:
    path = _write_dump(tmp_path / "dump.json", ENTITIES)
    german = list(iter_dump(path, language="de", ids={"Q64"}))
    assert [(e.id, e.label, e.description) for e in german] == [("Q64", "Berlin (de)", None)]


def test_dump_progress_counts_compressed_bytes(tmp_path: Path) -> None:
    path = _write_dump(tmp_path / "dump.json.gz", ENTITIES)
    calls: list[tuple[int, int]] = []
    assert len(list(iter_dump(path, progress=lambda d, t: calls.append((d, t))))) == 3
    # Fewer than 1000 lines: only the final report, all of the compressed file read.
    assert calls == [(path.stat().st_size, path.stat().st_size)]


def test_dump_streaming_is_lazy(tmp_path: Path) -> None:
    # A corrupt line far into the file only surfaces when reached: entries before it stream out first.
    path = tmp_path / "dump.json"
    path.write_text("[\n" + json.dumps(ENTITIES[0]) + ",\n{not json\n]\n", encoding="utf-8")
    stream = iter_dump(path)
    assert next(stream).id == "Q1055"
    with pytest.raises(CatalogError, match="line 3"):
        next(stream)


def test_memory_files_and_bad_lines(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "entities.jsonl").write_text(
        json.dumps({"id": "Q2", "label": "Earth", "description": "third  planet", "aliases": ["the world"]})
        + "\n"
        + json.dumps({"id": "Q404", "label": None})
        + "\n"
        + json.dumps({"id": "not-an-id", "label": "x"})
        + "\n",
        encoding="utf-8",
    )
    catalog = LabelCatalog.from_data_dir(tmp_path)
    assert catalog.get("Q2").description == "third planet"  # type: ignore[union-attr]
    assert "Q404" in catalog and catalog.label("Q404") is None
    assert "not-an-id" not in catalog
    (memory / "broken.jsonl").write_text("{oops\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="broken.jsonl:1"):
        LabelCatalog.from_data_dir(tmp_path)


def test_empty_data_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="no memory"):
        LabelCatalog.from_data_dir(tmp_path)
