"""The training-data transformation: gold SPARQL -> SPARQL-PGMR from the KG's own labels, and back
(`pgmr.conversion.convert`), and the unknown-URI re-split of converted LC-QuAD 2.0 records
(`pgmr.conversion.unknown_uri`).
"""

from __future__ import annotations

from pgmr.conversion.convert import (
    ConversionError,
    ConversionSummary,
    ConvertedRecord,
    convert_record,
    convert_records,
    convert_sparql,
    fill,
    roundtrip_problem,
    to_skeleton,
)

__all__ = [
    "ConversionError",
    "ConversionSummary",
    "ConvertedRecord",
    "convert_record",
    "convert_records",
    "convert_sparql",
    "fill",
    "roundtrip_problem",
    "to_skeleton",
]
