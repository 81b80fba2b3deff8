"""One line of a Wikidata JSON dump -> one catalog record, or the reason it yields none.

The dump (`latest-all.json.bz2`) is a JSON array with one entity per line: `[`, `{...},` ..., `{...}`, `]`.
Items (Q) and properties (P) are kept; lexemes, media info and other entity types are skipped. Everything a
memory and its prior need is kept, and nothing else: the label in the first configured language that has one
(English, then `mul`, the language-neutral labels Wikidata has had since 2024), the description the same way,
the aliases of those languages, the sitelink count and a property's datatype.

Lines are parsed with simdjson, lazily: only the fields above become Python objects. A real entity is ~10 KB of
JSON, mostly statements and labels in other languages; building all of it as Python objects (orjson) parsed
~10x slower than reading the few fields the memory needs (bench/dump_parse.py measures the stage).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import simdjson

from pgmr.kg.ids import is_wikidata_id

DEFAULT_LANGUAGES: tuple[str, ...] = ("en", "mul")

# Why a line gave no record; the build report counts each.
SKIPPED_TYPE = "skipped_type"  # a lexeme, media info or other entity type (not an error)
MALFORMED = "malformed"  # not JSON, not an object, or no Wikidata ID
UNLABELLED = "unlabelled"  # an item or property with no label in any configured language
REASONS: tuple[str, ...] = (SKIPPED_TYPE, MALFORMED, UNLABELLED)

_KINDS = {"item": "entity", "property": "relation"}


@dataclass(frozen=True)
class DumpRecord:
    id: str
    kind: str  # "entity" | "relation" (pgmr.kg.ids.Kind)
    label: str
    label_language: str
    description: str | None = None
    aliases: tuple[str, ...] = ()
    sitelinks: int = 0
    datatype: str | None = None


@dataclass(frozen=True)
class LineResult:
    record: DumpRecord | None
    reason: str | None = None
    detail: str = ""


def strip_line(line: bytes) -> bytes:
    """A dump line without its framing (whitespace, the trailing comma); b"" for the array's brackets."""
    line = line.strip()
    if line.endswith(b","):
        line = line[:-1].rstrip()
    return b"" if line in (b"[", b"]") else line


def _clean(text: object) -> str | None:
    if not isinstance(text, str):
        return None
    text = " ".join(text.split())
    return text or None


_ARRAYS = (list, tuple, simdjson.Array)


def _is_object(value: object) -> bool:
    # A dict, or simdjson's lazy Object (which is no Mapping subclass but has get/keys/[]).
    return isinstance(value, dict | simdjson.Object)


def _first_value(values: Any, languages: Sequence[str]) -> tuple[str | None, str]:
    if not _is_object(values):
        return None, ""
    for language in languages:
        entry = values.get(language)
        if _is_object(entry):
            text = _clean(entry.get("value"))
            if text:
                return text, language
    return None, ""


def _aliases(values: Any, languages: Sequence[str], label: str) -> tuple[str, ...]:
    if not _is_object(values):
        return ()
    seen = {label}
    out: list[str] = []
    for language in languages:
        entries = values.get(language)
        if not isinstance(entries, _ARRAYS):
            continue
        entry: Any
        for entry in entries:
            text = _clean(entry.get("value")) if _is_object(entry) else None
            if text and text not in seen:
                seen.add(text)
                out.append(text)
    return tuple(out)


def record_from_entity(entity: Any, languages: Sequence[str] = DEFAULT_LANGUAGES) -> LineResult:
    """A parsed dump entity (a dict, or a simdjson Object) -> its record, or why there is none."""
    if not _is_object(entity):
        return LineResult(None, MALFORMED, "not a JSON object")
    entity_type = entity.get("type")
    kind = _KINDS.get(entity_type) if isinstance(entity_type, str) else None
    wid = entity.get("id")
    if kind is None:
        if isinstance(entity_type, str):
            return LineResult(None, SKIPPED_TYPE, entity_type)
        return LineResult(None, MALFORMED, "no entity type")
    if not isinstance(wid, str) or not is_wikidata_id(wid) or wid[0] != ("Q" if kind == "entity" else "P"):
        return LineResult(None, MALFORMED, f"not a Wikidata {kind} ID: {str(wid)[:40]!r}")
    label, label_language = _first_value(entity.get("labels"), languages)
    if label is None:
        return LineResult(None, UNLABELLED, wid)
    description, _ = _first_value(entity.get("descriptions"), languages)
    sitelinks = entity.get("sitelinks")
    datatype = entity.get("datatype") if kind == "relation" else None
    return LineResult(
        DumpRecord(
            id=wid,
            kind=kind,
            label=label,
            label_language=label_language,
            description=description,
            aliases=_aliases(entity.get("aliases"), languages, label),
            sitelinks=len(sitelinks) if _is_object(sitelinks) else 0,
            datatype=datatype if isinstance(datatype, str) else None,
        )
    )


_LOCAL = threading.local()


def _parser() -> simdjson.Parser:
    parser = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = simdjson.Parser()
    return parser


def record_from_line(line: bytes, languages: Sequence[str] = DEFAULT_LANGUAGES) -> LineResult | None:
    """One raw dump line -> its result; None for a line that holds no entity (blank, `[` or `]`)."""
    body = strip_line(line)
    if not body:
        return None
    try:
        entity = _parser().parse(body)
    except ValueError as exc:
        return LineResult(None, MALFORMED, f"not JSON ({str(exc).split(':')[0].strip()[:80]})")
    except RuntimeError:
        # A lazy object of an earlier line is still referenced (say, by a caught exception's frame): a
        # parser may not be reused until it is gone, so this line gets a new one.
        _LOCAL.parser = None
        try:
            entity = _parser().parse(body)
        except ValueError as exc:
            return LineResult(None, MALFORMED, f"not JSON ({str(exc).split(':')[0].strip()[:80]})")
    try:
        return record_from_entity(entity, languages)
    finally:
        del entity
