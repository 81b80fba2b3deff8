"""What every loader shares: skip reasons, field checks, file reading, and the loop that turns a file's items
into records and `SkippedRecord`s (a bad record never raises; a file that is not a dataset raises
`DatasetError`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pgmr.datasets.records import LoadResult, QARecord, SkippedRecord

# Skip reasons.
NOT_JSON = "not_json"
NOT_OBJECT = "not_object"
BAD_FIELD = "bad_field"
NO_QUESTION = "no_question"
NO_SPARQL = "no_sparql"
UNRESOLVED_IDS = "unresolved_ids"
BAD_ANSWERS = "bad_answers"
DUPLICATE_ID = "duplicate_id"


class DatasetError(ValueError):
    """A dataset file that is missing or cannot be read as the requested format."""


class Skip(Exception):
    """Why a record is left out: raised while parsing it, collected as a `SkippedRecord`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail


def field_text(obj: dict, key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise Skip(BAD_FIELD, f"{key} is {type(value).__name__}, not a string")
    return value


def clean_text(text: str | None) -> str | None:
    """Whitespace runs collapsed to one space; None for missing or blank text."""
    if text is None:
        return None
    return " ".join(text.split()) or None


def question_text(text: str | None) -> str:
    question = clean_text(text)
    if not question:
        raise Skip(NO_QUESTION, "missing or empty question")
    return question


def sparql_text(text: str | None) -> str:
    sparql = text.strip() if text is not None else ""
    if not sparql:
        raise Skip(NO_SPARQL, "missing or empty SPARQL")
    return sparql


def record_id_of(value: object, key: str, source: str, index: int) -> str:
    if value is None or value == "":
        return f"{source}:{index}"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise Skip(BAD_FIELD, f"{key} is {type(value).__name__}, not a string or integer")
    return str(value)


def meta_fields(**fields: object) -> tuple[tuple[str, str], ...]:
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


def existing_file(path: Path | str) -> Path:
    path = Path(path).expanduser()
    if not path.exists():
        raise DatasetError(f"dataset file {path} does not exist")
    if not path.is_file():
        raise DatasetError(f"dataset path {path} is not a file")
    return path


def first_char(path: Path) -> str:
    """The first non-whitespace character of the file ('' if none), past a UTF-8 BOM."""
    with path.open("rb") as fh:
        head = fh.read(4096)
        while head and not head.lstrip():
            head = fh.read(4096)
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1].decode("ascii", errors="replace")


def read_json(path: Path) -> object:
    try:
        with path.open(encoding="utf-8-sig") as fh:
            return json.load(fh)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from exc


def jsonl_items(path: Path) -> Iterator[tuple[int, object]]:
    """(1-based line number, parsed value or a `Skip`) for every non-blank line."""
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield line_no, json.loads(raw.decode("utf-8-sig"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                yield line_no, Skip(NOT_JSON, str(exc))


def collect_records(
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
            if isinstance(obj, Skip):
                raise obj
            if not isinstance(obj, dict):
                raise Skip(NOT_OBJECT, f"a JSON {type(obj).__name__}, not an object")
            has_required_key = has_required_key or required_key in obj
            record = parse(obj, index)
            if record.id in seen_ids:
                raise Skip(DUPLICATE_ID, f"id {record.id!r} already loaded")
        except Skip as skip:
            skipped.append(SkippedRecord(index, skip.reason, skip.detail))
            continue
        seen_ids.add(record.id)
        records.append(record)
    # Every record failing the same way means the file is something else, not a dataset with bad rows.
    if n_items and not has_required_key:
        raise DatasetError(f"{path}: no record has a {required_key!r} field; is this the right format?")
    return LoadResult(tuple(records), tuple(skipped))
