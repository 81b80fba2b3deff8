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

NBITS_OPTION = typer.Option(
    None,
    min=4,
    max=8,
    help="--index ivfpq-rerank or ivfpq: bits per PQ code. 4 is scanned with SIMD lookups (FAISS fast-scan), "
    "~10x faster than 8, and wants a deeper --rerank for the same recall (400 at 10M items: docs/scale.md) "
    "[default: 8]",
)
NPROBE_OPTION = typer.Option(
    None, min=1, help="--index ivfpq-rerank or ivfpq: lists searched a query [default: 128]"
)
RERANK_OPTION = typer.Option(
    None, min=1, help="--index ivfpq-rerank: candidates re-scored from the stored vectors [default: 100]"
)

MILVUS_INDEX_TYPES = {"flat": "FLAT", "hnsw": "HNSW", "ivfpq": "IVF_PQ"}
_PQ_OPTIONS = {
    "nbits": ("ivfpq", "ivfpq-rerank"),
    "nprobe": ("ivfpq", "ivfpq-rerank"),
    "rerank": ("ivfpq-rerank",),
}


def backend_options(
    backend: str,
    index: str,
    milvus_uri: str | None,
    target: Path,
    rerank_vectors: str | None = None,
    **pq: int | None,
) -> dict[str, str | int]:
    """The index options of a build's command line. `pq`: nbits, nprobe and rerank of FAISS's PQ kinds (None:
    the kind's default)."""
    if rerank_vectors is not None and (backend, index) != ("faiss", "ivfpq-rerank"):
        raise ValueError("--rerank-vectors applies to --index ivfpq-rerank (FAISS)")
    if rerank_vectors is not None:
        check_vector_format(rerank_vectors, "--rerank-vectors")
    given = {name: value for name, value in pq.items() if value is not None}
    for name in given:
        if backend != "faiss" or index not in _PQ_OPTIONS[name]:
            raise ValueError(f"--{name} applies to --index {' or '.join(_PQ_OPTIONS[name])} (FAISS)")
    if given.get("nbits") not in (None, 4, 8):
        raise ValueError(f"--nbits must be 4 or 8, got {given['nbits']}")
    if backend == "faiss":
        if milvus_uri:
            raise ValueError("--milvus-uri needs --index-backend milvus")
        return {**({"vectors": rerank_vectors} if rerank_vectors else {}), **given}
    if backend == "milvus":
        if index not in MILVUS_INDEX_TYPES:
            raise ValueError(
                f"--index {index} is a FAISS index; with milvus choose {', '.join(MILVUS_INDEX_TYPES)}"
            )
        uri = milvus_uri or str(target.with_name(f"{target.name}.milvus.db").resolve())
        return {"uri": uri, "index_type": MILVUS_INDEX_TYPES[index]}
    raise ValueError(f"unknown index backend {backend!r}; choose faiss or milvus")
