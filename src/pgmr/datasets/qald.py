"""QALD records with their gold answers, from the official JSON (`{"questions": [...]}`)."""

from __future__ import annotations

from pathlib import Path

from pgmr.datasets.reading import (
    BAD_ANSWERS,
    BAD_FIELD,
    DatasetError,
    Skip,
    collect_records,
    existing_file,
    meta_fields,
    question_text,
    read_json,
    record_id_of,
    sparql_text,
)
from pgmr.datasets.records import LoadResult, QARecord


def load_qald(path: Path | str, language: str = "en") -> LoadResult:
    """Official QALD JSON: `{"questions": [{"id", "question": [{"language", "string"}], "query", ...}]}`.

    Answers are the values of every binding (repeats dropped) or, for ASK, `boolean`; both None when the
    file gives none.
    """
    path = existing_file(path)
    data = read_json(path)
    questions = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(questions, list):
        raise DatasetError(f"{path}: not QALD JSON (expected an object with a 'questions' list)")

    def parse(obj: dict, index: int) -> QARecord:
        return _qald_record(obj, index, language)

    return collect_records(path, enumerate(questions), parse, required_key=None)


def _qald_record(obj: dict, index: int, language: str) -> QARecord:
    record_id = record_id_of(obj.get("id"), "id", "qald", index)
    question = question_text(_qald_question(obj.get("question"), language))
    sparql = sparql_text(_qald_sparql(obj.get("query")))
    answers, boolean = _qald_answers(obj.get("answers"))
    meta = meta_fields(aggregation=obj.get("aggregation"))
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
                raise Skip(BAD_FIELD, f"question string is {type(text).__name__}")
            return text
    return None


def _qald_sparql(query: object) -> str | None:
    if isinstance(query, dict):
        query = query.get("sparql")
    if query is not None and not isinstance(query, str):
        raise Skip(BAD_FIELD, f"query.sparql is {type(query).__name__}")
    return query


def _qald_answers(answers: object) -> tuple[tuple[str, ...] | None, bool | None]:
    """(values of every binding, ASK answer); (None, None) where the file has no gold answers."""
    if not answers:
        return None, None
    if not isinstance(answers, list):
        raise Skip(BAD_ANSWERS, f"answers is {type(answers).__name__}")
    values: list[str] | None = None
    boolean: bool | None = None
    for answer in answers:
        if isinstance(answer, dict) and isinstance(answer.get("boolean"), bool):
            boolean = answer["boolean"]
        elif isinstance(answer, dict) and isinstance(answer.get("results"), dict):
            values = (values or []) + _binding_values(answer["results"].get("bindings"))
        else:
            raise Skip(BAD_ANSWERS, "an answer has neither 'boolean' nor 'results'")
    # QALD scores answers as sets: drop repeats, keep the file's order.
    return (tuple(dict.fromkeys(values)) if values is not None else None), boolean


def _binding_values(bindings: object) -> list[str]:
    if not isinstance(bindings, list):
        raise Skip(BAD_ANSWERS, "results.bindings is not a list")
    values = []
    for binding in bindings:
        if not isinstance(binding, dict):
            raise Skip(BAD_ANSWERS, "a binding is not an object")
        for term in binding.values():
            if not isinstance(term, dict) or not isinstance(term.get("value"), str):
                raise Skip(BAD_ANSWERS, "a bound term has no string 'value'")
            values.append(term["value"])
    return values


# --- field helpers --------------------------------------------------------------------------------------
