"""Loaders for LC-QuAD 2.0 (JSONL or the original JSON list), QALD JSON and `{question, sparql}` JSONL.

Bad records are collected as `SkippedRecord`s and never raise; a missing file, or one that is not the
expected format at all, raises `DatasetError`.
"""

from __future__ import annotations

from pathlib import Path

from pgmr.datasets.lcquad2 import LCQUAD2_UNRESOLVED_TIER, load_lcquad2
from pgmr.datasets.qald import load_qald
from pgmr.datasets.reading import (
    BAD_ANSWERS,
    BAD_FIELD,
    DUPLICATE_ID,
    NO_QUESTION,
    NO_SPARQL,
    NOT_JSON,
    NOT_OBJECT,
    UNRESOLVED_IDS,
    DatasetError,
    collect_records,
    existing_file,
    field_text,
    first_char,
    jsonl_items,
    meta_fields,
    question_text,
    record_id_of,
    sparql_text,
)
from pgmr.datasets.records import LoadResult, QARecord

FORMATS = ("auto", "lcquad2", "qald", "jsonl")

# name -> (path under the data dir, format, source)
PACKAGE_DATA = "pgmr:"  # a path under this package, not under the data directory
NAMED_DATASETS: dict[str, tuple[str, str, str]] = {
    "lcquad2-train": ("lcquad2/train.jsonl", "lcquad2", "lcquad2"),
    "lcquad2-test": ("lcquad2/test.jsonl", "lcquad2", "lcquad2"),
    "qald10-test": ("qald10/qald_10.json", "qald", "qald"),
    "qald10-train": ("qald10/train.jsonl", "jsonl", "qald"),
    # Carved from lcquad2-train by `split_train_validation` (8%, hash of the id): the split `pgmr train` holds
    # out by default, so generators are tuned on it and test is only reported.
    "lcquad2-validation": ("lcquad2/train.jsonl", "lcquad2", "lcquad2"),
    # lcquad2-train without that carve: what the shipped models were trained on, and what anything else learned
    # from training data (the memory's prior) must be counted from, or validation sees its own answers.
    "lcquad2-train-part": ("lcquad2/train.jsonl", "lcquad2", "lcquad2"),
    # Carved from qald10-train (a quarter, hash of the id): plain questions to choose settings on beside
    # lcquad2-validation; qald10-test is only reported.
    "qald10-validation": ("qald10/train.jsonl", "jsonl", "qald"),
    "qald10-train-part": ("qald10/train.jsonl", "jsonl", "qald"),
    # Plain one-hop questions as people type them, written for pgmr with IDs checked against the memory (ships
    # with the package, not in the data directory): a validation set beside the benchmarks' own.
    "plain-dev": (f"{PACKAGE_DATA}data/plain-dev.jsonl", "jsonl", "plain"),
}
# name -> (the dataset it is carved from, which side of `split_train_validation` it is, the validation share)
CARVED: dict[str, tuple[str, str, float]] = {
    "lcquad2-validation": ("lcquad2-train", "validation", 0.08),
    "lcquad2-train-part": ("lcquad2-train", "train", 0.08),
    "qald10-validation": ("qald10-train", "validation", 0.25),
    "qald10-train-part": ("qald10-train", "train", 0.25),
}


# --- public loaders -------------------------------------------------------------------------------------


def load_jsonl(
    path: Path | str,
    question_key: str = "question",
    sparql_key: str = "sparql",
    *,
    id_key: str = "id",
    source: str = "jsonl",
) -> LoadResult:
    """Generic JSONL, one `{question, sparql}` object per line with an optional id."""
    path = existing_file(path)

    def parse(obj: dict, index: int) -> QARecord:
        record_id = record_id_of(obj.get(id_key), id_key, source, index)
        question = question_text(field_text(obj, question_key))
        sparql = sparql_text(field_text(obj, sparql_key))
        # CK25 (the TEXT2SPARQL'25 questions) says per question whether its answers are ranked; order-aware
        # scorers read it back from the meta (pgmr.evaluation.answers.result_order_matters).
        flag = obj.get("result_order_matters")
        meta = meta_fields(result_order_matters=flag) if isinstance(flag, bool) else ()
        return QARecord(record_id, question, sparql, source, meta=meta)

    return collect_records(path, jsonl_items(path), parse, required_key=sparql_key)


def load_dataset(path: Path | str, fmt: str = "auto") -> LoadResult:
    """Load any supported file; `fmt="auto"` decides from the extension and the content."""
    if fmt not in FORMATS:
        raise DatasetError(f"unknown dataset format {fmt!r}; expected one of {', '.join(FORMATS)}")
    path = existing_file(path)
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
    path = existing_file(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        first = first_char(path)
        if first == "{":
            return "qald"
        if first == "[":
            return "lcquad2"
        raise DatasetError(f"{path}: a .json dataset must start with '{{' (QALD) or '[' (LC-QuAD 2.0)")
    if suffix in (".jsonl", ".ndjson"):
        first_record = next((obj for _, obj in jsonl_items(path) if isinstance(obj, dict)), None)
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
    if name in CARVED:
        from pgmr.datasets.splits import split_train_validation

        parent, side, share = CARVED[name]
        full = load_named(parent, data_dir)
        train, validation = split_train_validation(full.records, share)
        return LoadResult(tuple(validation if side == "validation" else train), full.skipped)
    if relative.startswith(PACKAGE_DATA):
        path = Path(__file__).parent / relative.removeprefix(PACKAGE_DATA)
    else:
        path = Path(data_dir).expanduser() / relative
    if fmt == "lcquad2":
        return load_lcquad2(path)
    if fmt == "qald":
        return load_qald(path)
    return load_jsonl(path, source=source)


# --- record parsers -------------------------------------------------------------------------------------


def load_any(name_or_path: str | Path, data_dir: Path | str | None = None, fmt: str = "auto") -> LoadResult:
    """A named dataset (resolved in `data_dir`) or a dataset file."""
    if str(name_or_path) in NAMED_DATASETS:
        if data_dir is None:
            raise DatasetError(f"{name_or_path} is a named dataset; a data directory is needed to find it")
        return load_named(str(name_or_path), data_dir)
    return load_dataset(name_or_path, fmt)


__all__ = [
    "BAD_ANSWERS",
    "BAD_FIELD",
    "DUPLICATE_ID",
    "FORMATS",
    "LCQUAD2_UNRESOLVED_TIER",
    "NAMED_DATASETS",
    "NOT_JSON",
    "NOT_OBJECT",
    "NO_QUESTION",
    "NO_SPARQL",
    "UNRESOLVED_IDS",
    "CARVED",
    "DatasetError",
    "detect_format",
    "load_any",
    "load_dataset",
    "load_jsonl",
    "load_lcquad2",
    "load_named",
    "load_qald",
]
