"""Conversion on the real datasets in ../shared/data (skipped when the data directory is absent)."""

from __future__ import annotations

import pytest

from pgmr.config import resolve_data_dir
from pgmr.conversion import ConversionSummary, convert_records, roundtrip_problem
from pgmr.datasets import load_named
from pgmr.kg.catalog import LabelCatalog
from pgmr.query import parse

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data_dir():
    try:
        return resolve_data_dir(None)
    except FileNotFoundError:
        pytest.skip("no ../shared/data")


@pytest.fixture(scope="module")
def catalog(data_dir) -> LabelCatalog:
    return LabelCatalog.from_data_dir(data_dir)


@pytest.mark.parametrize(("name", "limit"), [("lcquad2-test", 600), ("qald10-test", None)])
def test_real_records_convert_losslessly(data_dir, catalog, name: str, limit: int | None) -> None:
    records = load_named(name, data_dir).records[:limit]
    summary = ConversionSummary()
    converted = list(convert_records(records, catalog, summary))
    assert summary.converted >= 0.95 * len(records)
    assert set(summary.skipped) <= {"missing_label", "invalid_sparql"}
    for record in converted:
        assert parse(record.intermediate).to_text() == record.intermediate
    problems = [r.id for r in converted if roundtrip_problem(r)]
    assert len(problems) <= 0.01 * len(converted), problems[:10]
