"""Training mixtures: `NAME_OR_FILE*K` names a dataset and how many times its records are repeated."""

from __future__ import annotations

import re

from pgmr.datasets.reading import DatasetError

_WEIGHTED = re.compile(r"^(?P<source>[^*].*?)(?:\*(?P<times>\d+))?$")


def parse_weighted(spec: str) -> tuple[str, int]:
    """`"qald10-train-part*4"` -> ("qald10-train-part", 4); a spec without `*K` counts once."""
    match = _WEIGHTED.match(spec.strip())
    if not match or not match.group("source"):
        raise DatasetError(f"bad dataset spec {spec!r}: expected NAME_OR_FILE or NAME_OR_FILE*K")
    times = int(match.group("times") or 1)
    if times < 1:
        raise DatasetError(f"bad dataset spec {spec!r}: K must be at least 1")
    return match.group("source"), times
