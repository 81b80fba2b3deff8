"""Plain records that every dataset loader produces, whatever the source format."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class QARecord:
    """One question with its gold SPARQL (and, for QALD, its gold answers)."""

    id: str  # the dataset's own id when it has one, else f"{source}:{line_or_index}"
    question: str
    sparql: str
    source: str  # "lcquad2", "qald", "jsonl"
    answers: tuple[str, ...] | None = None  # gold answer values (URIs, literals); None if unknown
    boolean: bool | None = None  # gold answer of an ASK question
    meta: tuple[tuple[str, str], ...] = ()  # a few extra fields as strings (template_id, tier, ...)


@dataclass(frozen=True)
class SkippedRecord:
    """A record a loader left out: `index` is the 1-based line of a JSONL file, or the 0-based position
    in a JSON list (LC-QuAD 2.0 list, QALD `questions`)."""

    index: int
    reason: str
    detail: str


@dataclass(frozen=True)
class LoadResult:
    records: tuple[QARecord, ...]
    skipped: tuple[SkippedRecord, ...]

    def skipped_by_reason(self) -> dict[str, int]:
        counts = Counter(skip.reason for skip in self.skipped)
        return dict(sorted(counts.items()))


def meta_dict(record: QARecord) -> dict[str, str]:
    return dict(record.meta)
