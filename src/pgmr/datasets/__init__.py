"""Benchmark dataset loaders: LC-QuAD 2.0, QALD and generic `{question, sparql}` JSONL."""

from __future__ import annotations

from pgmr.datasets.loaders import (
    FORMATS,
    NAMED_DATASETS,
    DatasetError,
    detect_format,
    load_any,
    load_dataset,
    load_jsonl,
    load_lcquad2,
    load_named,
    load_qald,
)
from pgmr.datasets.records import LoadResult, QARecord, SkippedRecord, meta_dict

__all__ = [
    "load_any",
    "FORMATS",
    "NAMED_DATASETS",
    "DatasetError",
    "LoadResult",
    "QARecord",
    "SkippedRecord",
    "detect_format",
    "load_dataset",
    "load_jsonl",
    "load_lcquad2",
    "load_named",
    "load_qald",
    "meta_dict",
]
