"""Synthetic Wikidata dumps in the real dump's format, for tests and for measuring pgmr at scale offline.

A synthetic dump holds the real catalog's entities and properties (`../shared/data/memory/*.jsonl`) plus N
synthetic items, interleaved, one entity per line of a JSON array, as `latest-all.json` is. Every entity
looks like a real one on disk: labels in several languages, descriptions, aliases, sitelinks, and statements
with qualifiers and references of the real value types (items, external IDs, times, quantities, text).

- Synthetic items take IDs from `SYNTHETIC_BASE` + 1 up (Q900000001, ...), far above today's Q-ids.
- Their labels recombine the real labels' words (so their length and vocabulary match real ones); their
  descriptions are real descriptions of other entities.
- A share of them (`homonym_rate`) are **hard homonyms**: the exact label (or an alias) of a real entity, with
  another entity's description and 0-2 sitelinks, the obscure namesakes that crowd real Wikidata.
- Sitelink counts are drawn, not known (the real catalog has none): real entities from a heavy-tailed
  distribution with median 6, synthetic ones mostly 0. A prior measured on a synthetic dump is only as good as
  this assumption; docs/scale.md says so beside every such figure.

Each item is generated from its own seeded random stream, so the output depends only on (catalog, n, seed).
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import math
import os
import random
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pgmr.jsonl import read_jsonl
from pgmr.kg.dump.reader import compression_of
from pgmr.kg.dump.records import DEFAULT_LANGUAGES, DumpRecord, record_from_entity

SYNTHETIC_BASE = 900_000_000
LANGUAGES = ("en", "de", "fr", "es", "it", "nl", "pl", "pt", "ru", "sv", "ja", "zh", "ar", "uk", "ca", "cs",
             "fi", "hu", "ko", "tr", "da", "nb", "ro", "he", "id", "vi", "fa", "el", "eo", "sr")  # fmt: skip
_BLOCK_LINES = 2000


@dataclass(frozen=True)
class RealEntity:
    id: str
    label: str
    description: str | None
    aliases: tuple[str, ...]
    datatype: str | None = None


def load_real(data_dir: Path) -> tuple[list[RealEntity], list[RealEntity]]:
    """(entities, properties) of a data directory's memory files, those with a label."""
    out: dict[str, list[RealEntity]] = {"entities": [], "properties": []}
    for stem in out:
        for record in read_jsonl(data_dir / "memory" / f"{stem}.jsonl"):
            label = record.get("label")
            if isinstance(label, str) and label.strip():
                out[stem].append(
                    RealEntity(
                        str(record["id"]),
                        label,
                        record.get("description") or None,
                        tuple(a for a in record.get("aliases") or () if isinstance(a, str) and a),
                        record.get("datatype"),
                    )
                )
    return out["entities"], out["properties"]


def _hash(rng: random.Random) -> str:
    return f"{rng.getrandbits(160):040x}"


def _snak(rng: random.Random, prop: RealEntity, world: _World) -> dict[str, Any]:
    datatype = prop.datatype or "wikibase-item"
    value: Any
    if datatype == "wikibase-item":
        number = world.random_item_number(rng)
        value = {"value": {"entity-type": "item", "numeric-id": number, "id": f"Q{number}"},
                 "type": "wikibase-entityid"}  # fmt: skip
    elif datatype == "time":
        year = rng.randint(1500, 2025)
        value = {"value": {"time": f"+{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T00:00:00Z",
                           "timezone": 0, "before": 0, "after": 0, "precision": rng.choice((9, 11)),
                           "calendarmodel": "http://www.wikidata.org/entity/Q1985727"}, "type": "time"}  # fmt: skip
    elif datatype == "quantity":
        value = {"value": {"amount": f"+{rng.randint(1, 10**7)}", "unit": "1"}, "type": "quantity"}
    elif datatype == "monolingualtext":
        value = {"value": {"text": world.random_label(rng), "language": "en"}, "type": "monolingualtext"}
    else:
        value = {"value": f"{rng.getrandbits(40):x}", "type": "string"}
    return {"snaktype": "value", "property": prop.id, "hash": _hash(rng), "datavalue": value,
            "datatype": datatype}  # fmt: skip


def _statement(rng: random.Random, wid: str, prop: RealEntity, world: _World) -> dict[str, Any]:
    statement: dict[str, Any] = {"mainsnak": _snak(rng, prop, world), "type": "statement",
                                 "id": f"{wid}${rng.getrandbits(128):032x}", "rank": "normal"}  # fmt: skip
    if rng.random() < 0.2:
        qualifier = world.property(rng, "time")
        statement["qualifiers"] = {qualifier.id: [_snak(rng, qualifier, world)]}
        statement["qualifiers-order"] = [qualifier.id]
    if rng.random() < 0.7:
        stated, retrieved = world.property(rng, "wikibase-item"), world.property(rng, "time")
        statement["references"] = [{"hash": _hash(rng),
                                    "snaks": {stated.id: [_snak(rng, stated, world)],
                                              retrieved.id: [_snak(rng, retrieved, world)]},
                                    "snaks-order": [stated.id, retrieved.id]}]  # fmt: skip
    return statement


class _World:
    """What entity generation draws from: the real entities, their words, their descriptions, properties."""

    def __init__(self, entities: Sequence[RealEntity], properties: Sequence[RealEntity], n: int) -> None:
        self.entities = list(entities)
        self.properties = list(properties)
        self.n = n
        self.words = [w for e in self.entities[:20000] for w in e.label.split()]
        self.label_lengths = [len(e.label.split()) for e in self.entities[:20000]]
        self.descriptions = [e.description for e in self.entities if e.description]
        self.real_labels = {x.casefold() for e in self.entities for x in (e.label, *e.aliases)}
        self.real_numbers = [int(e.id[1:]) for e in self.entities if e.id.startswith("Q")]
        by_type: dict[str, list[RealEntity]] = {}
        for prop in self.properties:
            by_type.setdefault(prop.datatype or "", []).append(prop)
        self.by_type = by_type
        self.claim_properties = [
            p for p in self.properties
            if p.datatype in ("wikibase-item", "external-id", "time", "quantity", "string", "monolingualtext")
        ]  # fmt: skip

    def property(self, rng: random.Random, datatype: str) -> RealEntity:
        pool = self.by_type.get(datatype) or self.properties
        return pool[rng.randrange(min(len(pool), 200))]

    def random_item_number(self, rng: random.Random) -> int:
        if self.n and rng.random() < 0.5:
            return SYNTHETIC_BASE + 1 + rng.randrange(self.n)
        return self.real_numbers[rng.randrange(len(self.real_numbers))]

    def random_label(self, rng: random.Random) -> str:
        length = self.label_lengths[rng.randrange(len(self.label_lengths))]
        return " ".join(self.words[rng.randrange(len(self.words))] for _ in range(max(1, length)))


def _entity_body(wid: str, entity: RealEntity, *, kind: str, sitelinks: int,
                 languages: Sequence[str]) -> dict[str, Any]:  # fmt: skip
    """An entity's labels, descriptions, aliases and sitelinks, as the dump writes them (no statements)."""
    body: dict[str, Any] = {"type": kind, "id": wid}
    if kind == "property":
        body["datatype"] = entity.datatype or "string"
    body["labels"] = {lang: {"language": lang, "value": entity.label} for lang in languages}
    if entity.description:
        body["descriptions"] = {lang: {"language": lang, "value": entity.description}
                                for lang in languages[: max(1, len(languages) // 3)]}  # fmt: skip
    body["aliases"] = (
        {"en": [{"language": "en", "value": a} for a in entity.aliases]} if entity.aliases else {}
    )
    if kind == "item":
        body["sitelinks"] = {f"{lang}wiki": {"site": f"{lang}wiki", "title": entity.label, "badges": []}
                             for lang in LANGUAGES[:sitelinks]}  # fmt: skip
        if sitelinks > len(LANGUAGES):
            body["sitelinks"].update({f"x{i}wiki": {"site": f"x{i}wiki", "title": entity.label, "badges": []}
                                      for i in range(sitelinks - len(LANGUAGES))})  # fmt: skip
    return body


def _entity_json(rng: random.Random, world: _World, wid: str, entity: RealEntity, *, kind: str,
                 sitelinks: int, label_languages: int, statements: int) -> bytes:  # fmt: skip
    languages = LANGUAGES[: max(1, min(label_languages, len(LANGUAGES)))]
    body = _entity_body(wid, entity, kind=kind, sitelinks=sitelinks, languages=languages)
    sitelink_part = body.pop("sitelinks", None)
    claims: dict[str, list[dict[str, Any]]] = {}
    for _ in range(statements):
        prop = world.claim_properties[rng.randrange(len(world.claim_properties))]
        claims.setdefault(prop.id, []).append(_statement(rng, wid, prop, world))
    body["claims"] = claims
    if sitelink_part is not None:
        body["sitelinks"] = sitelink_part
    body["lastrevid"] = rng.randrange(10**9, 2 * 10**9)
    body["modified"] = "2026-11-01T00:00:00Z"
    return orjson.dumps(body)


def _rng(seed: int, key: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()))


def _heavy_tail(rng: random.Random, median: float, sigma: float = 1.2) -> int:
    return int(math.exp(math.log(median) + sigma * rng.gauss(0.0, 1.0)))


class SyntheticDump:
    """The lines of a synthetic dump: `lines(start, stop)` renders entities [start, stop) of the sequence."""

    def __init__(self, entities: Sequence[RealEntity], properties: Sequence[RealEntity], n: int, seed: int = 0,
                 homonym_rate: float = 0.05) -> None:  # fmt: skip
        self.world = _World(entities, properties, n)
        self.n, self.seed, self.homonym_rate = n, seed, homonym_rate
        self.real = len(self.world.entities) + len(self.world.properties)
        self.total = self.real + n

    def _reals_before(self, position: int) -> int:
        """Real entities sit at positions j * total // real: how many come before `position`."""
        return min(self.real, (position * self.real + self.total - 1) // self.total)

    def line(self, position: int) -> bytes:
        before = self._reals_before(position)
        if before < self.real and before * self.total // self.real == position:
            return self._real_line(before)
        return self._synthetic_line(position - before)

    def _real_entity(self, index: int) -> tuple[RealEntity, str, int, random.Random]:
        world = self.world
        if index < len(world.entities):
            entity, kind = world.entities[index], "item"
        else:
            entity, kind = world.properties[index - len(world.entities)], "property"
        rng = _rng(self.seed, entity.id)
        sitelinks = min(300, _heavy_tail(rng, 6.0)) if kind == "item" else 0
        return entity, kind, sitelinks, rng

    def _real_line(self, index: int) -> bytes:
        entity, kind, sitelinks, rng = self._real_entity(index)
        return _entity_json(rng, self.world, entity.id, entity, kind=kind, sitelinks=sitelinks,
                            label_languages=rng.randint(8, 30), statements=max(1, min(400, _heavy_tail(rng, 13.0, 0.9))))  # fmt: skip

    def _synthetic_entity(self, index: int) -> tuple[RealEntity, int, random.Random]:
        world = self.world
        wid = f"Q{SYNTHETIC_BASE + 1 + index}"
        rng = _rng(self.seed, wid)
        description = (
            world.descriptions[rng.randrange(len(world.descriptions))] if world.descriptions else None
        )
        if rng.random() < self.homonym_rate:
            target = world.entities[rng.randrange(len(world.entities))]
            label = target.label if not target.aliases or rng.random() < 0.7 else rng.choice(target.aliases)
            sitelinks = rng.randint(0, 2)
        else:
            # Not a homonym: a fresh label, so that the homonym rate is what was asked for.
            label = world.random_label(rng)
            for _ in range(8):
                if label.casefold() not in world.real_labels:
                    break
                label = world.random_label(rng) + " " + world.random_label(rng)
            sitelinks = 0 if rng.random() < 0.7 else _heavy_tail(rng, 2.0)
        return RealEntity(wid, label, description, ()), min(sitelinks, 300), rng

    def _synthetic_line(self, index: int) -> bytes:
        entity, sitelinks, rng = self._synthetic_entity(index)
        return _entity_json(rng, self.world, entity.id, entity, kind="item", sitelinks=sitelinks,
                            label_languages=rng.randint(1, 12), statements=max(1, min(300, _heavy_tail(rng, 8.0, 0.9))))  # fmt: skip

    def record(self, position: int) -> DumpRecord:
        """The catalog record that parsing `line(position)` gives, without rendering the line (its statements
        are most of the cost): how a 10M-item catalog is written without a 100 GB dump."""
        before = self._reals_before(position)
        if before < self.real and before * self.total // self.real == position:
            entity, kind, sitelinks, _ = self._real_entity(before)
        else:
            (entity, sitelinks, _), kind = self._synthetic_entity(position - before), "item"
        body = _entity_body(entity.id, entity, kind=kind, sitelinks=sitelinks, languages=LANGUAGES[:1])
        result = record_from_entity(body, DEFAULT_LANGUAGES)
        if result.record is None:
            raise ValueError(f"synthetic entity {entity.id} gave no record: {result.reason}")
        return result.record

    def lines(self, start: int, stop: int) -> Iterator[bytes]:
        for position in range(start, min(stop, self.total)):
            yield self.line(position)


def _render_block(args: tuple[SyntheticDump, int, int, str]) -> bytes:
    dump, start, stop, compression = args
    body = b"".join(line + (b",\n" if position < dump.total - 1 else b"\n")
                    for position, line in zip(range(start, stop), dump.lines(start, stop), strict=True))  # fmt: skip
    if start == 0:
        body = b"[\n" + body
    if stop >= dump.total:
        body += b"]\n"
    if compression == "bz2":
        return bz2.compress(body, 9)
    if compression == "gz":
        return gzip.compress(body, 6, mtime=0)
    return body


def write_synthetic_dump(path: Path | str, dump: SyntheticDump, workers: int = 1) -> int:
    """Write the dump (compressed by the name's suffix: multi-stream `.bz2` as lbzip2 writes, multi-member
    `.gz`), atomically; returns the bytes written."""
    path = Path(path)
    compression = compression_of(path)
    blocks = [(dump, start, min(start + _BLOCK_LINES, dump.total), compression)
              for start in range(0, dump.total, _BLOCK_LINES)]  # fmt: skip
    tmp = path.with_name(f".{path.name}.tmp")
    written = 0
    with tmp.open("wb") as handle:
        if workers > 1:
            with ProcessPoolExecutor(workers) as pool:
                for data in pool.map(_render_block, blocks, chunksize=1):
                    handle.write(data)
                    written += len(data)
        else:
            for block in blocks:
                data = _render_block(block)
                handle.write(data)
                written += len(data)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
    return written
