"""Options of `pgmr memory build` that choose how vectors are made and where they live."""

from __future__ import annotations

from pathlib import Path

import typer

from pgmr.cli.common import usage_error_callback
from pgmr.memory.indexes.vector_codec import DEFAULT_VECTOR_FORMAT, VECTOR_FORMATS, check_vector_format
from pgmr.precision import ENCODER_PRECISIONS, check_encoder_precision

BUILD_PRECISION_OPTION = typer.Option(
    "auto",
    "--precision",
    callback=usage_error_callback(lambda value: check_encoder_precision(value, "build precision")),
    help=f"Number format the rows are encoded in ({', '.join(ENCODER_PRECISIONS)}): auto is bfloat16 where the "
    "CPU computes it natively, else int8 weights in ONNX Runtime where it runs, else float32 (1.5x and 1.6x "
    "faster than float32, the same validation Query EM); fp32 gives vectors that do not depend on the machine "
    "(--from-dump builds encode in float32)",
)


RERANK_VECTORS_OPTION = typer.Option(
    None,
    help=f"--index ivfpq-rerank: how the re-ranked vectors are stored ({', '.join(VECTOR_FORMATS)}): sq8 takes 8 "
    "bits a dimension, half of fp16, so that the page cache holds them at 10M items (docs/scale.md) "
    f"[default: {DEFAULT_VECTOR_FORMAT}]",
)

MILVUS_INDEX_TYPES = {"flat": "FLAT", "hnsw": "HNSW", "ivfpq": "IVF_PQ"}


def backend_options(
    backend: str, index: str, milvus_uri: str | None, target: Path, rerank_vectors: str | None = None
) -> dict[str, str]:
    if rerank_vectors is not None and (backend, index) != ("faiss", "ivfpq-rerank"):
        raise ValueError("--rerank-vectors applies to --index ivfpq-rerank (FAISS)")
    if rerank_vectors is not None:
        check_vector_format(rerank_vectors, "--rerank-vectors")
    if backend == "faiss":
        if milvus_uri:
            raise ValueError("--milvus-uri needs --index-backend milvus")
        return {"vectors": rerank_vectors} if rerank_vectors else {}
    if backend == "milvus":
        if index not in MILVUS_INDEX_TYPES:
            raise ValueError(
                f"--index {index} is a FAISS index; with milvus choose {', '.join(MILVUS_INDEX_TYPES)}"
            )
        uri = milvus_uri or str(target.with_name(f"{target.name}.milvus.db").resolve())
        return {"uri": uri, "index_type": MILVUS_INDEX_TYPES[index]}
    raise ValueError(f"unknown index backend {backend!r}; choose faiss or milvus")
