"""The contract suites of `pgmr.testing`, run on the real backends of the encoder, index and generator seams
(the store seam's runs are in test_stores.py), plus what is particular to one backend's persistence.

Encoder: the bundled all-MiniLM-L6-v2 (conftest's session `encoder`). Indexes: FAISS flat, HNSW and IVF-PQ.
Generators: `ScriptedGenerator`; `ChatGenerator` against a real HTTP server on 127.0.0.1 that answers like an
OpenAI-compatible one; `Seq2SeqGenerator` on the tiny pgmr and direct models test_pipeline.py trains once per
session (conftest's `parts`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import faiss
import pytest

from llm_server import scripted_server
from pgmr.generators.base import Generator
from pgmr.memory.encoder import Encoder
from pgmr.memory.index import VectorIndex, create_index, load_index
from pgmr.memory.indexes.faiss_index import FaissIndex
from pgmr.testing import (
    EncoderContract,
    GeneratorContract,
    ScriptedGenerator,
    UnscriptedQuestionError,
    VectorIndexContract,
    unit_vectors,
)

# --- encoders -----------------------------------------------------------------------------------------------


class TestSentenceTransformerEncoder(EncoderContract):
    """conftest's `encoder`: the default SentenceTransformerEncoder, loaded once per session."""

    def test_it_is_the_bundled_default_model(self, encoder: Encoder) -> None:
        assert encoder.name == "sentence-transformers/all-MiniLM-L6-v2" and encoder.dimension == 384


class TestOnnxEncoder(EncoderContract):
    """The default model through ONNX Runtime (what `load_encoder` picks on a CPU), exported into a fresh cache."""

    @pytest.fixture(scope="class")
    @classmethod
    def encoder(cls, tmp_path_factory: pytest.TempPathFactory) -> Encoder:
        from pgmr.memory.encoders import OnnxEncoder
        from pgmr.memory.encoders.sentence_transformers import resolve_model

        name, source = resolve_model(None)
        return OnnxEncoder.for_model(Path(source), name, cache=tmp_path_factory.mktemp("onnx"))

    def test_it_is_the_bundled_default_model(self, encoder: Encoder) -> None:
        assert encoder.name == "sentence-transformers/all-MiniLM-L6-v2" and encoder.dimension == 384


# --- vector indexes -----------------------------------------------------------------------------------------


class FaissContract(VectorIndexContract):
    kind = "flat"

    @pytest.fixture(scope="class")
    @classmethod
    def make_index(cls) -> Callable[[int], VectorIndex]:
        return lambda dimension: create_index(cls.kind, dimension, "faiss")

    @pytest.fixture(scope="class")
    @classmethod
    def load_index(cls) -> Callable[[Path], VectorIndex]:
        return lambda path: load_index(path, "faiss")


class TestFaissFlat(FaissContract):
    kind = "flat"


class TestFaissHnsw(FaissContract):
    kind = "hnsw"
    exact = False


class TestFaissIvfpq(FaissContract):
    kind = "ivfpq"
    exact = False
    min_rows = 256  # 2**nbits rows to train its codebooks on
    reconstruct_atol = 0.35  # product quantization keeps an approximation of each vector


class TestFaissIvfpqRerank(FaissContract):
    """IVF-PQ re-ranked from float16 vectors on disk: exact up to float16 rounding of the stored vectors."""

    kind = "ivfpq-rerank"
    exact = False
    min_rows = 256
    reconstruct_atol = 2e-3


class TestFaissIvfpqRerankFastScan(TestFaissIvfpqRerank):
    """The same with 4-bit codes, which FAISS scans with SIMD lookups (what `pgmr memory recode` writes)."""

    @pytest.fixture(scope="class")
    @classmethod
    def make_index(cls) -> Callable[[int], VectorIndex]:
        return lambda dimension: create_index(cls.kind, dimension, "faiss", nbits=4)


class TestFaissIvfpqRerankSq8(TestFaissIvfpqRerank):
    """4-bit codes re-ranked from sq8 vectors (8 bits a dimension, ranges from the training rows): how
    `pgmr memory recode --vectors sq8` stores them. Rows outside the trained ranges are clipped."""

    reconstruct_atol = 2e-2

    @pytest.fixture(scope="class")
    @classmethod
    def make_index(cls) -> Callable[[int], VectorIndex]:
        return lambda dimension: create_index(cls.kind, dimension, "faiss", nbits=4, vectors="sq8")


class TestMilvusLite(VectorIndexContract):
    """The Milvus backend against Milvus Lite (a local file served by pymilvus' own server process): the client
    path a Milvus cluster's URI takes too."""

    @pytest.fixture(scope="class")
    @classmethod
    def milvus_uri(cls, tmp_path_factory: pytest.TempPathFactory) -> str:
        pytest.importorskip("pymilvus", reason="the milvus extra (make setup installs it)")
        return str(tmp_path_factory.mktemp("milvus") / "pgmr.db")

    @pytest.fixture(scope="class")
    @classmethod
    def make_index(cls, milvus_uri: str) -> Callable[[int], VectorIndex]:
        return lambda dimension: create_index("flat", dimension, "milvus", uri=milvus_uri)

    @pytest.fixture(scope="class")
    @classmethod
    def load_index(cls) -> Callable[[Path], VectorIndex]:
        return lambda path: load_index(path, "milvus")


def _write_raw(index: Any, path: Path) -> Path:
    faiss.write_index(index, str(path))
    return path


def test_faiss_refuses_an_index_file_of_another_metric(tmp_path: Path) -> None:
    l2 = faiss.IndexFlatL2(8)
    l2.add(unit_vectors(3, 8))
    path = _write_raw(l2, tmp_path / "l2.faiss")
    with pytest.raises(ValueError, match=r"l2\.faiss: expected an inner-product index"):
        load_index(path, "faiss")


def test_faiss_refuses_an_index_type_it_does_not_build(tmp_path: Path) -> None:
    other = faiss.IndexScalarQuantizer(8, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
    other.train(unit_vectors(50, 8))
    path = _write_raw(other, tmp_path / "sq.faiss")
    with pytest.raises(ValueError, match="unsupported FAISS index type IndexScalarQuantizer"):
        load_index(path, "faiss")


def test_faiss_search_knobs_survive_a_reload(tmp_path: Path) -> None:
    hnsw = FaissIndex(8, "hnsw", ef_search=77)
    hnsw.add(unit_vectors(20, 8))
    hnsw.save(tmp_path / "hnsw.faiss")
    assert FaissIndex.load(tmp_path / "hnsw.faiss").options()["ef_search"] == 77
    ivfpq = FaissIndex(8, "ivfpq", nbits=4, nprobe=3)
    ivfpq.add(unit_vectors(80, 8))
    ivfpq.save(tmp_path / "ivfpq.faiss")
    assert FaissIndex.load(tmp_path / "ivfpq.faiss").options() == ivfpq.options()


def test_unknown_index_backends_are_named() -> None:
    with pytest.raises(ValueError, match="unknown index backend 'annoy'; known: faiss"):
        create_index("flat", 8, "annoy")
    with pytest.raises(ValueError, match="unknown index backend 'annoy'"):
        load_index("index.bin", "annoy")


# --- generators ---------------------------------------------------------------------------------------------


def _scripted_answer(question: str) -> str:
    return f"SELECT ?x WHERE {{ wd:entity0 wdt:relation0 ?x }}\nentity0 = [ENT] {question} [/ENT]\nrelation0 = [REL] r [/REL]"


class TestScriptedGenerator(GeneratorContract):
    @pytest.fixture(scope="class")
    @classmethod
    def generator(cls) -> Generator:
        return ScriptedGenerator(_scripted_answer)


class TestScriptedRagGenerator(GeneratorContract):
    @pytest.fixture(scope="class")
    @classmethod
    def generator(cls) -> Generator:
        return ScriptedGenerator({q: f"ASK {{ }} # {i}" for i, q in enumerate(cls.questions)}, "rag-pgmr")


def test_scripted_generator_records_calls_and_batches() -> None:
    generator = ScriptedGenerator({"a": "ASK {}", "b": "ASK { ?s ?p ?o }"}, "rag", default="SELECT * {}")
    assert generator.generate(["a", "b", "c"], contexts=["x", "y", "z"], batch_size=2) == [
        "ASK {}",
        "ASK { ?s ?p ?o }",
        "SELECT * {}",
    ]
    (call,) = generator.calls
    assert call.batches == (("a", "b"), ("c",)) and call.contexts == ("x", "y", "z") and call.batch_size == 2
    assert generator.questions_seen == ["a", "b", "c"]


def test_scripted_generator_names_an_unscripted_question() -> None:
    generator = ScriptedGenerator({"a": "ASK {}"})
    with pytest.raises(UnscriptedQuestionError, match="no answer for 'b' .1 scripted questions"):
        generator.generate(["a", "b"])
    assert generator.calls == []
    with pytest.raises(ValueError, match="unknown mode 'sparql'"):
        ScriptedGenerator({}, "sparql")


def _chat_server(path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
    """An OpenAI-compatible server whose answer depends on the question alone (the last message)."""
    if path == "/v1/models":
        return 200, {"object": "list", "data": [{"id": "contract", "owned_by": "openai"}]}
    assert body is not None
    question = body["messages"][-1]["content"]
    return 200, {
        "choices": [{"message": {"role": "assistant", "content": f"```\nASK {{}} # {question}\n```"}}]
    }


@pytest.fixture(scope="module")
def chat_url() -> Iterator[str]:
    with scripted_server(_chat_server) as (url, _):
        yield url


class TestChatGenerator(GeneratorContract):
    mode = "pgmr"

    @pytest.fixture(scope="class")
    @classmethod
    def generator(cls, chat_url: str) -> Iterator[Generator]:
        from pgmr.generators.chat import ChatGenerator

        with ChatGenerator(chat_url, "contract", cls.mode, max_tokens=32, timeout=10.0) as generator:
            yield generator

    def test_answers_come_from_the_server(self, outputs: list[str]) -> None:
        # The contract holds trivially for a backend that answers nothing; this one must carry the question.
        assert all(q in text for q, text in zip(self.questions, outputs, strict=True))


class TestChatRagGenerator(TestChatGenerator):
    mode = "rag"


SEQ2SEQ_TOKENS = 20


def _seq2seq(model_dir: Path) -> Generator:
    from pgmr.generators.seq2seq import Seq2SeqGenerator

    # The contract compares outputs, it does not read them: short ones keep its dozen decoding runs cheap.
    return Seq2SeqGenerator.load(model_dir, max_new_tokens=SEQ2SEQ_TOKENS)


class TestSeq2SeqPgmrGenerator(GeneratorContract):
    @pytest.fixture(scope="class")
    @classmethod
    def generator(cls, parts: Any) -> Generator:
        return _seq2seq(parts.model_dir)

    def test_it_writes_what_it_memorised(self, generator: Generator) -> None:
        from test_pipeline import PARIS, TARGETS

        (output,) = generator.generate([PARIS])
        assert len(output) >= SEQ2SEQ_TOKENS and TARGETS[PARIS].startswith(output)


class TestSeq2SeqDirectGenerator(GeneratorContract):
    @pytest.fixture(scope="class")
    @classmethod
    def generator(cls, parts: Any) -> Generator:
        return _seq2seq(parts.direct_model_dir)

    def test_it_is_a_direct_mode_model(self, generator: Generator) -> None:
        assert generator.mode == "direct"


def test_contract_questions_have_different_lengths() -> None:
    # Batches of one length would never pad, and padding is what "alone equals batched" is about.
    lengths: Sequence[int] = [len(q) for q in GeneratorContract.questions]
    assert len(set(lengths)) == len(lengths) and max(lengths) - min(lengths) >= 50


def test_a_memory_on_milvus_lite_finds_what_the_faiss_one_finds(encoder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A whole memory with its vectors in Milvus: saved (descriptors in the memory directory), loaded, and
    searched with the same results as the same memory on FAISS."""
    pytest.importorskip("pymilvus", reason="the milvus extra (make setup installs it)")
    from pgmr.kg.catalog import CatalogEntry, LabelCatalog
    from pgmr.memory import Memory, read_manifest

    catalog = LabelCatalog(
        [
            CatalogEntry(
                "Q1055", "Hamburg", "city and state in northern Germany", ("Free and Hanseatic City",)
            ),
            CatalogEntry("Q2211", "Hamburg", "borough in Berks County, Pennsylvania"),
            CatalogEntry("Q64", "Berlin", "capital and largest city of Germany"),
            CatalogEntry("Q90", "Paris", "capital city of France"),
            CatalogEntry("P112", "founded by", "founder or co-founder of this organization", ("founder",)),
            CatalogEntry("P36", "capital", "seat of government of a country"),
        ]
    )
    on_faiss = Memory.build(catalog, tmp_path / "faiss", encoder, use_cache=False)
    uri = str(tmp_path / "milvus.db")
    Memory.build(
        catalog,
        tmp_path / "milvus",
        encoder,
        use_cache=False,
        index_backend="milvus",
        index_options={"uri": uri},
    )
    manifest = read_manifest(tmp_path / "milvus")
    assert (
        manifest.index_backend == "milvus"
        and manifest.dictionaries["entity"].index_file == "entities.milvus.json"
    )
    on_milvus = Memory.load(tmp_path / "milvus", encoder)
    queries = ["Hamburg, city in Germany", "Hamburg, Pennsylvania", "capital of France", "Berlin"]
    for kind in ("entity", "relation"):
        expected = on_faiss.dictionary(kind).search(queries, k=3)  # type: ignore[arg-type]
        found = on_milvus.dictionary(kind).search(queries, k=3)  # type: ignore[arg-type]
        assert [[h.id for h in hits] for hits in found] == [[h.id for h in hits] for hits in expected]
        for a, b in zip(found, expected, strict=True):
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)
