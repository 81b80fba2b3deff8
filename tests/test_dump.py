"""Wikidata JSON dumps: records from entity lines, chunked reading (plain, gz, bz2, truncated), synthetic dumps,
and the staged build of a memory from a dump on a real local Dask cluster."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import orjson
import pytest

from pgmr.kg.dump import iter_chunks, parse_chunk, read_shard, record_from_entity, record_from_line
from pgmr.kg.dump.synthetic import SYNTHETIC_BASE, RealEntity, SyntheticDump, load_real, write_synthetic_dump

DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"


def _entity(wid: str = "Q64", **extra: object) -> dict:
    entity: dict = {
        "type": "item",
        "id": wid,
        "labels": {"de": {"language": "de", "value": "Berlin"}, "en": {"language": "en", "value": "Berlin"}},
        "descriptions": {"en": {"language": "en", "value": "capital and  largest city of Germany"}},
        "aliases": {"en": [{"language": "en", "value": "Berlin, Germany"}, {"language": "en", "value": "Berlin"}]},
        "claims": {
            "P31": [
                {"mainsnak": {"snaktype": "value", "property": "P31", "datatype": "wikibase-item",
                              "datavalue": {"type": "wikibase-entityid",
                                            "value": {"entity-type": "item", "numeric-id": 515, "id": "Q515"}}},
                 "type": "statement", "rank": "normal"},
                {"mainsnak": {"snaktype": "somevalue", "property": "P31"}, "type": "statement"},
            ],
            "P1082": [
                {"mainsnak": {"snaktype": "value", "property": "P1082", "datatype": "quantity",
                              "datavalue": {"type": "quantity", "value": {"amount": "+3664088"}}},
                 "type": "statement"}
            ],
        },
        "sitelinks": {"enwiki": {"site": "enwiki", "title": "Berlin"}, "dewiki": {"site": "dewiki", "title": "Berlin"}},
    }  # fmt: skip
    entity.update(extra)
    return entity


# -- records ---------------------------------------------------------------------------------------------------


def test_an_item_gives_its_english_label_description_aliases_sitelinks_and_links() -> None:
    result = record_from_line(orjson.dumps(_entity()) + b",\n")
    assert result is not None and result.record is not None
    record = result.record
    assert (record.id, record.kind, record.label, record.label_language) == ("Q64", "entity", "Berlin", "en")
    assert record.description == "capital and largest city of Germany"  # whitespace folded
    assert record.aliases == ("Berlin, Germany",)  # the label itself is not an alias
    assert record.sitelinks == 2


def test_label_languages_fall_back_in_order_and_mul_is_the_default_fallback() -> None:
    entity = _entity(
        labels={"mul": {"language": "mul", "value": "Q-Berlin"}, "fr": {"language": "fr", "value": "X"}}
    )
    record = record_from_entity(entity).record
    assert record is not None and (record.label, record.label_language) == ("Q-Berlin", "mul")
    french = record_from_entity(entity, ("fr", "en")).record
    assert french is not None and (french.label, french.label_language) == ("X", "fr")


def test_properties_keep_their_datatype() -> None:
    prop = {"type": "property", "id": "P112", "datatype": "wikibase-item",
            "labels": {"en": {"language": "en", "value": "founded by"}}}  # fmt: skip
    record = record_from_entity(prop).record
    assert record is not None and (record.kind, record.datatype, record.sitelinks) == (
        "relation",
        "wikibase-item",
        0,
    )


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"type": "lexeme", "id": "L7", "lemmas": {}},', "skipped_type"),
        (b'{"type": "item", "id": "Q1", "labels": {"ja": {"language": "ja", "value": "x"}}},', "unlabelled"),
        (b'{"type": "item", "id": "Q1", "labels": {"en": ', "malformed"),
        (b'{"type": "item", "id": "P12", "labels": {}}', "malformed"),
        (b"[1, 2]", "malformed"),
        (b'{"id": "Q5"}', "malformed"),
    ],
)
def test_lines_without_a_record_say_why(line: bytes, reason: str) -> None:
    result = record_from_line(line)
    assert result is not None and result.record is None and result.reason == reason and result.detail


def test_array_brackets_and_blank_lines_are_not_entities() -> None:
    assert [record_from_line(x) for x in (b"[\n", b"]", b"  \n", b"")] == [None] * 4


def test_a_chunk_becomes_a_parquet_shard_with_counts_and_samples(tmp_path: Path) -> None:
    data = (
        b"[\n" + orjson.dumps(_entity()) + b",\nnot json,\n" + b'{"type": "lexeme", "id": "L1"},\n' + b"]\n"
    )
    parsed = parse_chunk(data)
    assert (parsed.records, parsed.lines) == (1, 3)
    assert parsed.counts == {"skipped_type": 1, "malformed": 1, "unlabelled": 0}
    assert len(parsed.samples["malformed"]) == 1 and parsed.samples["malformed"][0].startswith(
        "line 3: not JSON"
    )
    path = tmp_path / "shard.parquet"
    path.write_bytes(parsed.parquet)
    row = read_shard(path).to_pylist()[0]
    assert row["id"] == "Q64" and row["aliases"] == ["Berlin, Germany"] and row["sitelinks"] == 2


# -- reading dumps ---------------------------------------------------------------------------------------------


def _dump_bytes(n: int) -> bytes:
    lines = [orjson.dumps(_entity(f"Q{i + 1}")) for i in range(n)]
    return b"[\n" + b",\n".join(lines) + b"\n]\n"


@pytest.mark.parametrize("suffix", [".json", ".json.gz", ".json.bz2"])
def test_chunks_cover_the_dump_the_same_way_whatever_the_compression(tmp_path: Path, suffix: str) -> None:
    raw = _dump_bytes(25)
    path = tmp_path / f"dump{suffix}"
    path.write_bytes({".json": raw, ".json.gz": gzip.compress(raw), ".json.bz2": bz2.compress(raw)}[suffix])
    chunks = list(iter_chunks(path, 10, threads=2))
    assert [c.lines for c in chunks] == [10, 10, 7]  # the brackets are lines too
    assert b"".join(c.data for c in chunks) == raw
    assert [(c.start, c.end) for c in chunks] == [(0, chunks[0].end), (chunks[0].end, chunks[1].end),
                                                   (chunks[1].end, len(raw))]  # fmt: skip
    assert not any(c.truncated for c in chunks)
    resumed = list(iter_chunks(path, 10, start_index=1, start_offset=chunks[0].end, threads=2))
    assert [(c.index, c.start, c.data) for c in resumed] == [(c.index, c.start, c.data) for c in chunks[1:]]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_truncated_bz2_dump_reads_up_to_the_cut_and_says_so(tmp_path: Path, threads: int) -> None:
    data = bz2.compress(_dump_bytes(2000))
    path = tmp_path / "cut.json.bz2"
    path.write_bytes(data[: len(data) * 2 // 3])
    chunks = list(iter_chunks(path, 500, threads=threads))
    assert chunks and chunks[-1].truncated and not any(c.truncated for c in chunks[:-1])
    assert sum(c.lines for c in chunks) < 2002


# -- synthetic dumps -------------------------------------------------------------------------------------------


def _small_world(n_entities: int = 150, n_properties: int = 120) -> tuple[list[RealEntity], list[RealEntity]]:
    entities, properties = load_real(DATA_DIR)
    return entities[:n_entities], properties[:n_properties]


@pytest.mark.slow
def test_synthetic_dumps_are_seeded_realistic_and_hold_homonyms(tmp_path: Path) -> None:
    entities, properties = _small_world()
    dump = SyntheticDump(entities, properties, 400, seed=3, homonym_rate=0.25)
    lines = list(dump.lines(0, dump.total))
    assert lines == list(
        SyntheticDump(entities, properties, 400, seed=3, homonym_rate=0.25).lines(0, dump.total)
    )
    assert lines != list(
        SyntheticDump(entities, properties, 400, seed=4, homonym_rate=0.25).lines(0, dump.total)
    )
    parsed = [json.loads(line) for line in lines]
    ids = [e["id"] for e in parsed]
    assert len(set(ids)) == dump.total == 150 + 120 + 400
    assert {e.id for e in entities + properties} <= set(ids)
    assert sum(i.startswith("Q") and int(i[1:]) > SYNTHETIC_BASE for i in ids) == 400
    # Entities as big as the real dump's (~10 KB mean), with statements, references and sitelinks.
    mean = sum(map(len, lines)) / len(lines)
    assert 5_000 <= mean <= 20_000, mean
    assert all(e["claims"] for e in parsed if e["type"] == "item")
    real_labels = {e.label for e in entities} | {a for e in entities for a in e.aliases}
    synthetic = [e for e in parsed if int(e["id"][1:]) > SYNTHETIC_BASE]
    homonyms = [e for e in synthetic if e["labels"]["en"]["value"] in real_labels]
    assert 0.15 <= len(homonyms) / len(synthetic) <= 0.4
    assert all(len(e["sitelinks"]) <= 2 for e in homonyms)
    path = tmp_path / "synthetic.json.bz2"
    write_synthetic_dump(path, dump, workers=2)
    assert b"".join(c.data for c in iter_chunks(path, 100)).splitlines()[1:-1] == [
        line + b"," if i < len(lines) - 1 else line for i, line in enumerate(lines)
    ]
