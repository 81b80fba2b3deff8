"""Loaders for LC-QuAD 2.0 (JSONL or the original JSON list), QALD JSON and `{question, sparql}` JSONL.

Bad records are collected as `SkippedRecord`s and never raise; a missing file, or one that is not the
expected format at all, raises `DatasetError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pgmr.datasets.records import LoadResult, QARecord, SkippedRecord

FORMATS = ("auto", "lcquad2", "qald", "jsonl")

# Skip reasons.
NOT_JSON = "not_json"
NOT_OBJECT = "not_object"
BAD_FIELD = "bad_field"
NO_QUESTION = "no_question"
NO_SPARQL = "no_sparql"
UNRESOLVED_IDS = "unresolved_ids"
BAD_ANSWERS = "bad_answers"
DUPLICATE_ID = "duplicate_id"

LCQUAD2_UNRESOLVED_TIER = "D_sparql_partially_resolved"
# The rebuilt LC-QuAD train split writes IDs it could not resolve as `wd:??label`; never valid SPARQL.
_UNRESOLVED_ID = re.compile(r"\?\?[^\s?]")

# name -> (path under the data dir, format, source)
NAMED_DATASETS: dict[str, tuple[str, str, str]] = {
    "lcquad2-train": ("lcquad2/train.jsonl", "lcquad2", "lcquad2"),
    "lcquad2-test": ("lcquad2/test.jsonl", "lcquad2", "lcquad2"),
    "qald10-test": ("qald10/qald_10.json", "qald", "qald"),
    "qald10-train": ("qald10/train.jsonl", "jsonl", "qald"),
    # Carved from lcquad2-train by `split_train_validation` (8%, hash of the id): the split `pgmr train` holds
    # out by default, so generators are tuned on it and test is only reported.
    "lcquad2-validation": ("lcquad2/train.jsonl", "lcquad2", "lcquad2"),
}
VALIDATION_OF: dict[str, str] = {"lcquad2-validation": "lcquad2-train"}


class DatasetError(ValueError):
    """A dataset file that is missing or cannot be read as the requested format."""


class _Skip(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail


# --- public loaders -------------------------------------------------------------------------------------


def load_lcquad2(path: Path | str, *, other_strings_fallback: bool = True) -> LoadResult:
    """LC-QuAD 2.0 as JSONL (one object per line) or as the original single JSON list.

    The question is `question`, else `paraphrased_question`, else (with `other_strings_fallback`) the first
    of `other_question_strings`: the rebuilt train split has ~8k records whose text survives only there.
    """
    path = _existing_file(path)

    def parse(obj: dict, index: int) -> QARecord:
        return _lcquad2_record(obj, index, other_strings_fallback)

    if _first_char(path) == "[":
        data = _read_json(path)
        if not isinstance(data, list):
            raise DatasetError(f"{path}: expected a JSON list of LC-QuAD 2.0 records")
        items: Iterable[tuple[int, object]] = enumerate(data)
    else:
        items = _jsonl_items(path)
    return _collect(path, items, parse, required_key="sparql_wikidata")


def load_qald(path: Path | str, language: str = "en") -> LoadResult:
    """Official QALD JSON: `{"questions": [{"id", "question": [{"language", "string"}], "query", ...}]}`.

    Answers are the values of every binding (repeats dropped) or, for ASK, `boolean`; both None when the
    file gives none.
    """
    path = _existing_file(path)
    data = _read_json(path)
    questions = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(questions, list):
        raise DatasetError(f"{path}: not QALD JSON (expected an object with a 'questions' list)")

    def parse(obj: dict, index: int) -> QARecord:
        return _qald_record(obj, index, language)

    return _collect(path, enumerate(questions), parse, required_key=None)


def load_jsonl(
    path: Path | str,
    question_key: str = "question",
    sparql_key: str = "sparql",
    *,
    id_key: str = "id",
    source: str = "jsonl",
) -> LoadResult:
    """Generic JSONL, one `{question, sparql}` object per line with an optional id."""
    path = _existing_file(path)

    def parse(obj: dict, index: int) -> QARecord:
        record_id = _record_id(obj.get(id_key), id_key, source, index)
        question = _question(_text(obj, question_key))
        sparql = _sparql(_text(obj, sparql_key))
        return QARecord(record_id, question, sparql, source)

    return _collect(path, _jsonl_items(path), parse, required_key=sparql_key)


def load_dataset(path: Path | str, fmt: str = "auto") -> LoadResult:
    """Load any supported file; `fmt="auto"` decides from the extension and the content."""
    if fmt not in FORMATS:
        raise DatasetError(f"unknown dataset format {fmt!r}; expected one of {', '.join(FORMATS)}")
    path = _existing_file(path)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "lcquad2":
        return load_lcquad2(path)
    if fmt == "qald":
        return load_qald(path)
    return load_jsonl(path)


def detect_format(path: Path | str) -> str:
    """`.json` -> qald (an object) or lcquad2 (a list); `.jsonl` -> lcquad2 if its first record has
    `sparql_wikidata`, else jsonl."""
    path = _existing_file(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        first = _first_char(path)
        if first == "{":
            return "qald"
        if first == "[":
            return "lcquad2"
        raise DatasetError(f"{path}: a .json dataset must start with '{{' (QALD) or '[' (LC-QuAD 2.0)")
    if suffix in (".jsonl", ".ndjson"):
        first_record = next((obj for _, obj in _jsonl_items(path) if isinstance(obj, dict)), None)
        return "lcquad2" if first_record is not None and "sparql_wikidata" in first_record else "jsonl"
    raise DatasetError(
        f"{path}: cannot tell the format from the extension {suffix or '(none)'!r}; "
        "pass fmt='lcquad2', 'qald' or 'jsonl'"
    )


def load_named(name: str, data_dir: Path | str) -> LoadResult:
    """One of the benchmark files under the data dir by name (see `NAMED_DATASETS`)."""
    if name not in NAMED_DATASETS:
        raise DatasetError(f"unknown dataset {name!r}; expected one of {', '.join(NAMED_DATASETS)}")
    relative, fmt, source = NAMED_DATASETS[name]
    if name in VALIDATION_OF:
        from pgmr.datasets.splits import split_train_validation

        full = load_named(VALIDATION_OF[name], data_dir)
        return LoadResult(tuple(split_train_validation(full.records)[1]), full.skipped)
    path = Path(data_dir).expanduser() / relative
    if fmt == "lcquad2":
        return load_lcquad2(path)
    if fmt == "qald":
        return load_qald(path)
    return load_jsonl(path, source=source)


# --- record parsers -------------------------------------------------------------------------------------


def _lcquad2_record(obj: dict, index: int, other_strings_fallback: bool) -> QARecord:
    sparql = _sparql(_text(obj, "sparql_wikidata"))
    _check_resolved(obj, sparql)
    uid = obj.get("uid")
    # Merged test records carry a list of candidate uids, shared between records: not an id.
    record_id = _record_id(None if isinstance(uid, list) else uid, "uid", "lcquad2", index)
    question, question_field = _lcquad2_question(obj, other_strings_fallback)
    meta = _meta(
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
        raise _Skip(UNRESOLVED_IDS, f"tier={obj.get('tier')}, n_unresolved_ids={unresolved}")
    match = _UNRESOLVED_ID.search(sparql)
    if match:
        raise _Skip(UNRESOLVED_IDS, f"unresolved ID near {sparql[match.start() : match.start() + 40]!r}")


def _lcquad2_question(obj: dict, other_strings_fallback: bool) -> tuple[str, str]:
    """The question text and the field it came from."""
    for key in ("question", "paraphrased_question"):
        text = _clean(_text(obj, key))
        if text:
            return text, key
    others = _other_strings(obj) if other_strings_fallback else []
    if others:
        return others[0], "other_question_strings"
    tried = "question, paraphrased_question" + (
        " or other_question_strings" if other_strings_fallback else ""
    )
    raise _Skip(NO_QUESTION, f"no text in {tried}")


def _lcquad2_paraphrase(obj: dict, question: str) -> str | None:
    paraphrase = obj.get("paraphrased_question")
    candidates = [_clean(paraphrase) if isinstance(paraphrase, str) else None, *_other_strings(obj)]
    return next((text for text in candidates if text and text != question), None)


def _other_strings(obj: dict) -> list[str]:
    others = obj.get("other_question_strings")
    if not isinstance(others, list):
        return []
    return [text for text in (_clean(x) if isinstance(x, str) else None for x in others) if text]


def _qald_record(obj: dict, index: int, language: str) -> QARecord:
    record_id = _record_id(obj.get("id"), "id", "qald", index)
    question = _question(_qald_question(obj.get("question"), language))
    sparql = _sparql(_qald_sparql(obj.get("query")))
    answers, boolean = _qald_answers(obj.get("answers"))
    meta = _meta(aggregation=obj.get("aggregation"))
    return QARecord(record_id, question, sparql, "qald", answers=answers, boolean=boolean, meta=meta)


def _qald_question(field: object, language: str) -> str | None:
    if isinstance(field, str):  # some QALD derivatives keep a single plain string
        return field
    if not isinstance(field, list):
        return None
    for entry in field:
        if isinstance(entry, dict) and entry.get("language") == language:
            text = entry.get("string")
            if text is not None and not isinstance(text, str):
                raise _Skip(BAD_FIELD, f"question string is {type(text).__name__}")
            return text
    return None


def _qald_sparql(query: object) -> str | None:
    if isinstance(query, dict):
        query = query.get("sparql")
    if query is not None and not isinstance(query, str):
        raise _Skip(BAD_FIELD, f"query.sparql is {type(query).__name__}")
    return query


def _qald_answers(answers: object) -> tuple[tuple[str, ...] | None, bool | None]:
    """(values of every binding, ASK answer); (None, None) where the file has no gold answers."""
    if not answers:
        return None, None
    if not isinstance(answers, list):
        raise _Skip(BAD_ANSWERS, f"answers is {type(answers).__name__}")
    values: list[str] | None = None
    boolean: bool | None = None
    for answer in answers:
        if isinstance(answer, dict) and isinstance(answer.get("boolean"), bool):
            boolean = answer["boolean"]
        elif isinstance(answer, dict) and isinstance(answer.get("results"), dict):
            values = (values or []) + _binding_values(answer["results"].get("bindings"))
        else:
            raise _Skip(BAD_ANSWERS, "an answer has neither 'boolean' nor 'results'")
    # QALD scores answers as sets: drop repeats, keep the file's order.
    return (tuple(dict.fromkeys(values)) if values is not None else None), boolean


def _binding_values(bindings: object) -> list[str]:
    if not isinstance(bindings, list):
        raise _Skip(BAD_ANSWERS, "results.bindings is not a list")
    values = []
    for binding in bindings:
        if not isinstance(binding, dict):
            raise _Skip(BAD_ANSWERS, "a binding is not an object")
        for term in binding.values():
            if not isinstance(term, dict) or not isinstance(term.get("value"), str):
                raise _Skip(BAD_ANSWERS, "a bound term has no string 'value'")
            values.append(term["value"])
    return values


# --- field helpers --------------------------------------------------------------------------------------


def _text(obj: dict, key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _Skip(BAD_FIELD, f"{key} is {type(value).__name__}, not a string")
    return value


def _clean(text: str | None) -> str | None:
    """Whitespace runs collapsed to one space; None for missing or blank text."""
    if text is None:
        return None
    return " ".join(text.split()) or None


def _question(text: str | None) -> str:
    question = _clean(text)
    if not question:
        raise _Skip(NO_QUESTION, "missing or empty question")
    return question


def _sparql(text: str | None) -> str:
    sparql = text.strip() if text is not None else ""
    if not sparql:
        raise _Skip(NO_SPARQL, "missing or empty SPARQL")
    return sparql


def _record_id(value: object, key: str, source: str, index: int) -> str:
    if value is None or value == "":
        return f"{source}:{index}"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _Skip(BAD_FIELD, f"{key} is {type(value).__name__}, not a string or integer")
    return str(value)


def _meta(**fields: object) -> tuple[tuple[str, str], ...]:
    pairs = ((key, _meta_value(value)) for key, value in fields.items())
    return tuple((key, value) for key, value in pairs if value)


def _meta_value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_meta_value(item) for item in value)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


# --- file reading ---------------------------------------------------------------------------------------


def _existing_file(path: Path | str) -> Path:
    path = Path(path).expanduser()
    if not path.exists():
        raise DatasetError(f"dataset file {path} does not exist")
    if not path.is_file():
        raise DatasetError(f"dataset path {path} is not a file")
    return path


def _first_char(path: Path) -> str:
    """The first non-whitespace character of the file ('' if none), past a UTF-8 BOM."""
    with path.open("rb") as fh:
        head = fh.read(4096)
        while head and not head.lstrip():
            head = fh.read(4096)
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1].decode("ascii", errors="replace")


def _read_json(path: Path) -> object:
    try:
        with path.open(encoding="utf-8-sig") as fh:
            return json.load(fh)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from exc


def _jsonl_items(path: Path) -> Iterator[tuple[int, object]]:
    """(1-based line number, parsed value or a `_Skip`) for every non-blank line."""
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield line_no, json.loads(raw.decode("utf-8-sig"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                yield line_no, _Skip(NOT_JSON, str(exc))


def _collect(
    path: Path,
    items: Iterable[tuple[int, object]],
    parse: Callable[[dict, int], QARecord],
    required_key: str | None,
) -> LoadResult:
    records: list[QARecord] = []
    skipped: list[SkippedRecord] = []
    seen_ids: set[str] = set()
    n_items = 0
    has_required_key = required_key is None
    for index, obj in items:
        n_items += 1
        try:
            if isinstance(obj, _Skip):
                raise obj
            if not isinstance(obj, dict):
                raise _Skip(NOT_OBJECT, f"a JSON {type(obj).__name__}, not an object")
            has_required_key = has_required_key or required_key in obj
            record = parse(obj, index)
            if record.id in seen_ids:
                raise _Skip(DUPLICATE_ID, f"id {record.id!r} already loaded")
        except _Skip as skip:
            skipped.append(SkippedRecord(index, skip.reason, skip.detail))
            continue
        seen_ids.add(record.id)
        records.append(record)
    # Every record failing the same way means the file is something else, not a dataset with bad rows.
    if n_items and not has_required_key:
        raise DatasetError(f"{path}: no record has a {required_key!r} field; is this the right format?")
    return LoadResult(tuple(records), tuple(skipped))


def load_any(name_or_path: str | Path, data_dir: Path | str | None = None, fmt: str = "auto") -> LoadResult:
    """A named dataset (resolved in `data_dir`) or a dataset file."""
    if str(name_or_path) in NAMED_DATASETS:
        if data_dir is None:
            raise DatasetError(f"{name_or_path} is a named dataset; a data directory is needed to find it")
        return load_named(str(name_or_path), data_dir)
    return load_dataset(name_or_path, fmt)
