from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def encoder():
    """The real default encoder (bundled all-MiniLM-L6-v2), loaded once per test session."""
    from pgmr.memory.encoders import SentenceTransformerEncoder

    return SentenceTransformerEncoder()
