"""`pgmr memory recode`: new PQ codes, or another format for the stored vectors, of an ivfpq-rerank memory."""

from __future__ import annotations

from pathlib import Path

import typer

from pgmr.cli.common import console, print_error, progress_callback, usage_error_callback
from pgmr.memory import PgmrMemoryError, read_manifest
from pgmr.memory.indexes.vector_codec import check_vector_format


def _check_vectors(value: str | None) -> str | None:
    return None if value is None else check_vector_format(value, "--vectors")


def recode(
    memory_dir: Path = typer.Argument(..., help="Memory directory with ivfpq-rerank indexes"),
    nbits: int = typer.Option(
        4, min=4, max=8, help="Bits per code: 4 scans with SIMD (fast-scan), 8 as built"
    ),
    m: int | None = typer.Option(None, min=1, help="Sub-quantizers (default: as built)"),
    vectors: str | None = typer.Option(
        None,
        help="How the re-ranked vectors are stored: fp16, or sq8 (8 bits a dimension: half the disk and page "
        "cache, docs/scale.md) (default: as built)",
        callback=usage_error_callback(_check_vectors),
    ),
) -> None:
    """Give an ivfpq-rerank memory new PQ codes from its stored vectors (texts are not encoded again)."""
    from pgmr.memory.cache import file_sha256
    from pgmr.memory.indexes.recode import recode_file
    from pgmr.memory.manifest import swap_index_file

    try:
        manifest = read_manifest(memory_dir)
        if manifest.index_kind != "ivfpq-rerank" or manifest.index_backend != "faiss":
            raise ValueError(
                f"{memory_dir} has a {manifest.index_kind} index; only ivfpq-rerank can be re-coded"
            )
        for kind, entry in manifest.dictionaries.items():
            stem = entry.index_file.split(".")[0]
            stored = vectors or ("sq8" if ".sq8." in entry.index_file else "fp16")
            codes = f"m{m}x{nbits}" if m else f"{nbits}bit"
            name = f"{stem}.{codes}{'.sq8' if stored == 'sq8' else ''}.faiss"
            # A new name, so that the manifest switches from one whole file to the other.
            name = f"{stem}.faiss" if name == entry.index_file else name
            with progress_callback(f"re-coding the {kind} index") as progress:
                recode_file(
                    memory_dir / entry.index_file, memory_dir / name, m=m, nbits=nbits, vectors=vectors,
                    scratch_dir=str(memory_dir), progress=progress,
                )  # fmt: skip
            swap_index_file(memory_dir, kind, name, file_sha256(memory_dir / name))  # type: ignore[arg-type]
            console.print(f"{kind}: {entry.index_file} -> {name}")
    except (PgmrMemoryError, ValueError, OSError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
