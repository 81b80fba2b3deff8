from __future__ import annotations

import pytest

# The contract suites of pgmr.testing live outside tests/: their asserts explain a failure only if rewritten.
pytest.register_assert_rewrite("pgmr.testing")


@pytest.fixture(scope="session")
def encoder():
    """The real default encoder (bundled all-MiniLM-L6-v2), loaded once per test session."""
    from pgmr.memory.encoders import SentenceTransformerEncoder

    return SentenceTransformerEncoder()


@pytest.fixture(scope="session")
def parts(tmp_path_factory: pytest.TempPathFactory, encoder: object):  # type: ignore[no-untyped-def]
    """The small real pipeline parts of test_pipeline.py (data, memory, KG, tiny trained models), built once
    per session for every module that serves or asks with them."""
    from test_pipeline import build_parts

    return build_parts(tmp_path_factory, encoder)


@pytest.fixture(scope="session")
def tiny_structured(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A tiny structured model trained on 40 real records (test_structured.build_tiny_run), once per session."""
    from test_structured import build_tiny_run

    return build_tiny_run(tmp_path_factory)
