"""Test support for pgmr and for anyone writing a backend for one of its seams.

Contract suites: pytest classes holding the behaviour a backend owes its callers, whatever it is built on.
A backend's tests inherit one and provide the fixture it names; nothing in a suite knows which backend runs.

| seam | protocol | suite | fixtures to provide |
|---|---|---|---|
| SPARQL store | `pgmr.stores.SparqlStore` | `StoreContract` | `store` (holding `CONTRACT_NT`) |
| text encoder | `pgmr.memory.encoder.Encoder` | `EncoderContract` | `encoder` |
| vector index | `pgmr.memory.index.VectorIndex` | `VectorIndexContract` | `make_index`, `load_index` |
| generator | `pgmr.generators.base.Generator` | `GeneratorContract` | `generator` |

`ScriptedGenerator` answers questions from a mapping or a function, so that tests of what runs after the
model (resolution, execution, the service) need not train one.

The suites import pytest (a development dependency) when first used; `ScriptedGenerator` does not need it.
Pipeline code never imports this package. Pytest rewrites the asserts of test modules only: a conftest that calls
`pytest.register_assert_rewrite("pgmr.testing")` gets the detailed failure messages here too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pgmr.testing.generators import CONTRACT_QUESTIONS, GeneratorContract
    from pgmr.testing.memory import CONTRACT_TEXTS, EncoderContract, VectorIndexContract, unit_vectors
    from pgmr.testing.scripted import GenerateCall, ScriptedGenerator, UnscriptedQuestionError
    from pgmr.testing.stores import CONTRACT_NT, CONTRACT_TRIPLES, StoreContract

# Imported on first use, so that `ScriptedGenerator` works where pytest is not installed.
_HOMES = {
    "CONTRACT_NT": "stores",
    "CONTRACT_QUESTIONS": "generators",
    "CONTRACT_TEXTS": "memory",
    "CONTRACT_TRIPLES": "stores",
    "EncoderContract": "memory",
    "GenerateCall": "scripted",
    "GeneratorContract": "generators",
    "ScriptedGenerator": "scripted",
    "StoreContract": "stores",
    "UnscriptedQuestionError": "scripted",
    "VectorIndexContract": "memory",
    "unit_vectors": "memory",
}
__all__ = [
    "CONTRACT_NT",
    "CONTRACT_QUESTIONS",
    "CONTRACT_TEXTS",
    "CONTRACT_TRIPLES",
    "EncoderContract",
    "GenerateCall",
    "GeneratorContract",
    "ScriptedGenerator",
    "StoreContract",
    "UnscriptedQuestionError",
    "VectorIndexContract",
    "unit_vectors",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
