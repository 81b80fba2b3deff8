"""LC-QuAD 2.0 records, from JSONL (one object per line) or the original single JSON list."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from pgmr.datasets.reading import (
    NO_QUESTION,
    UNRESOLVED_IDS,
    DatasetError,
    Skip,
    clean_text,
    collect_records,
    existing_file,
    field_text,
    first_char,
    jsonl_items,
    meta_fields,
    read_json,
    record_id_of,
    sparql_text,
)
from pgmr.datasets.records import LoadResult, QARecord

LCQUAD2_UNRESOLVED_TIER = "D_sparql_partially_resolved"
# The rebuilt LC-QuAD train split writes IDs it could not resolve as `wd:??label`; never valid SPARQL.
_UNRESOLVED_ID = re.compile(r"\?\?[^\s?]")


def load_lcquad2(path: Path | str, *, other_strings_fallback: bool = True) -> LoadResult:
    """LC-QuAD 2.0 as JSONL (one object per line) or as the original single JSON list.

    The question is `question`, else `paraphrased_question`, else (with `other_strings_fallback`) the first
    of `other_question_strings`: the rebuilt train split has ~8k records whose text survives only there.
    """
    path = existing_file(path)

    def parse(obj: dict, index: int) -> QARecord:
        return _lcquad2_record(obj, index, other_strings_fallback)

    if first_char(path) == "[":
        data = read_json(path)
        if not isinstance(data, list):
            raise DatasetError(f"{path}: expected a JSON list of LC-QuAD 2.0 records")
        items: Iterable[tuple[int, object]] = enumerate(data)
    else:
        items = jsonl_items(path)
    return collect_records(path, items, parse, required_key="sparql_wikidata")


def _lcquad2_record(obj: dict, index: int, other_strings_fallback: bool) -> QARecord:
    sparql = sparql_text(field_text(obj, "sparql_wikidata"))
    _check_resolved(obj, sparql)
    uid = obj.get("uid")
    # Merged test records carry a list of candidate uids, shared between records: not an id.
    record_id = record_id_of(None if isinstance(uid, list) else uid, "uid", "lcquad2", index)
    question, question_field = _lcquad2_question(obj, other_strings_fallback)
    meta = meta_fields(
        tier=obj.get("tier"),
        template_id=obj.get("template_id"),
        subgraph=obj.get("subgraph"),
        paraphrase=_lcquad2_paraphrase(obj, question),
        question_field=question_field if question_field != "question" else None,
        uids=uid if isinstance(uid, list) else None,
    )
    return QARecord(record_id, question, sparql, "lcquad2", meta=meta)


def _check_resolved(obj: dict, sparql: str) -> None:
    unresolved = obj.get("n_unresolved_ids")
    if obj.get("tier") == LCQUAD2_UNRESOLVED_TIER or (
        isinstance(unresolved, int) and not isinstance(unresolved, bool) and unresolved > 0
    ):
        raise Skip(UNRESOLVED_IDS, f"tier={obj.get('tier')}, n_unresolved_ids={unresolved}")
    match = _UNRESOLVED_ID.search(sparql)
    if match:
        raise Skip(UNRESOLVED_IDS, f"unresolved ID near {sparql[match.start() : match.start() + 40]!r}")


def _lcquad2_question(obj: dict, other_strings_fallback: bool) -> tuple[str, str]:
    """The question text and the field it came from."""
    for key in ("question", "paraphrased_question"):
        text = clean_text(field_text(obj, key))
        if text:
            return text, key
    others = _other_strings(obj) if other_strings_fallback else []
    if others:
        return others[0], "other_question_strings"
    tried = "question, paraphrased_question" + (
        " or other_question_strings" if other_strings_fallback else ""
    )
    raise Skip(NO_QUESTION, f"no text in {tried}")


def _lcquad2_paraphrase(obj: dict, question: str) -> str | None:
    paraphrase = obj.get("paraphrased_question")
    candidates = [clean_text(paraphrase) if isinstance(paraphrase, str) else None, *_other_strings(obj)]
    return next((text for text in candidates if text and text != question), None)


def _other_strings(obj: dict) -> list[str]:
    others = obj.get("other_question_strings")
    if not isinstance(others, list):
        return []
    return [text for text in (clean_text(x) if isinstance(x, str) else None for x in others) if text]
