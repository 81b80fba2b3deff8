"""An on-disk embedding cache keyed by (encoder name, sha256 of the text).

A rebuild after adding a few catalog entries then encodes only the new texts. Per encoder the cache is two
files in the cache directory: `<slug>.npy` (float32 vectors, one row per text) and `<slug>.keys` (a header line
with the sha256 of the `.npy` file, then the 32-byte sha256 digests of the texts, row-aligned). The header ties
the two together: each is replaced atomically, and a pair from different writes is detected and ignored. The
cache is advisory: anything unreadable is treated as empty, never as an error.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pgmr.jsonl import atomic_write_bytes
from pgmr.memory.encoder import EncodeProgress, Encoder, normalize_rows
from pgmr.memory.errors import PgmrMemoryError

_DIGEST = 32
_MAGIC = b"pgmr-embedding-cache 1 "


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _slug(encoder_name: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", encoder_name).strip("._")[-60:]
    # Different names can share a readable form (a/b vs a_b); the hash keeps their caches apart.
    return f"{readable}-{hashlib.sha256(encoder_name.encode()).hexdigest()[:12]}"


class EmbeddingCache:
    """Vectors of one encoder, looked up by text. `put` collects new vectors; `save` writes all of them."""

    def __init__(
        self, directory: Path | str, encoder_name: str, dimension: int, precision: str = "fp32"
    ) -> None:
        self.directory = Path(directory)
        self.encoder_name = encoder_name
        self.dimension = dimension
        self.precision = precision
        # Vectors of another number format are another encoder's: a float32 build must not take bfloat16 or
        # int8 vectors from the cache (float32 keeps the bare name, so existing caches stay valid).
        slug = _slug(encoder_name if precision == "fp32" else f"{encoder_name}@{precision}")
        self._vectors_path = self.directory / f"{slug}.npy"
        self._keys_path = self.directory / f"{slug}.keys"
        self._rows: dict[bytes, int] = {}
        self._vectors = np.empty((0, dimension), dtype=np.float32)
        self._dirty = False
        self._load()

    def __len__(self) -> int:
        return len(self._rows)

    def _load(self) -> None:
        try:
            raw = self._keys_path.read_bytes()
            header, _, keys = raw.partition(b"\n")
            if not header.startswith(_MAGIC) or len(keys) % _DIGEST:
                return
            if header[len(_MAGIC) :].decode() != file_sha256(self._vectors_path):
                return
            vectors = np.load(self._vectors_path, allow_pickle=False)
        except (OSError, ValueError, UnicodeDecodeError):
            return
        count = len(keys) // _DIGEST
        if vectors.dtype != np.float32 or vectors.shape != (count, self.dimension):
            return
        self._vectors = vectors
        self._rows = {keys[i * _DIGEST : (i + 1) * _DIGEST]: i for i in range(count)}

    def lookup(self, texts: Sequence[str]) -> tuple[np.ndarray, list[int]]:
        """(vectors, positions of the texts that missed); rows of missed texts are left zero."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        missing: list[int] = []
        hits: list[int] = []
        rows: list[int] = []
        for position, text in enumerate(texts):
            row = self._rows.get(text_key(text))
            if row is None:
                missing.append(position)
            else:
                hits.append(position)
                rows.append(row)
        if hits:
            out[hits] = self._vectors[rows]
        return out, missing

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        fresh: list[int] = []
        for position, text in enumerate(texts):
            key = text_key(text)
            if key not in self._rows:
                self._rows[key] = len(self._rows)
                fresh.append(position)
        if fresh:
            self._vectors = np.concatenate([self._vectors, np.asarray(vectors, dtype=np.float32)[fresh]])
            self._dirty = True

    def save(self) -> None:
        """Write the cache if `put` added anything. Vectors first: the keys file's header names their hash."""
        if not self._dirty:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        keys = sorted(self._rows, key=self._rows.__getitem__)
        buffer = io.BytesIO()
        np.save(buffer, self._vectors, allow_pickle=False)
        data = buffer.getvalue()
        atomic_write_bytes(self._vectors_path, data)
        header = _MAGIC + hashlib.sha256(data).hexdigest().encode()
        atomic_write_bytes(self._keys_path, header + b"\n" + b"".join(keys))
        self._dirty = False


def embed_texts(
    texts: list[str],
    encoder: Encoder,
    batch_size: int,
    progress: EncodeProgress | None,
    cache: EmbeddingCache | None,
    *,
    record: bool = True,
) -> tuple[np.ndarray, int]:
    """(unit vectors for all texts, how many texts were encoded rather than taken from the cache). `record`:
    add the newly encoded texts to the cache (False reads a cache that belongs to another memory)."""
    if cache is None:
        vectors, missing = (
            np.zeros((len(texts), encoder.dimension), dtype=np.float32),
            list(range(len(texts))),
        )
    else:
        vectors, missing = cache.lookup(texts)
    if missing:
        new_texts = [texts[i] for i in missing]
        new = encoder.encode(new_texts, batch_size=batch_size, progress=progress or None)
        if new.shape != (len(missing), encoder.dimension):
            raise PgmrMemoryError(
                f"encoder {encoder.name!r} returned shape {new.shape} for {len(missing)} texts, expected "
                f"({len(missing)}, {encoder.dimension})"
            )
        if not np.isfinite(new).all():
            raise PgmrMemoryError(f"encoder {encoder.name!r} returned non-finite vectors")
        new = normalize_rows(new)
        vectors[missing] = new
        if cache is not None and record:
            cache.put(new_texts, new)
            cache.save()
    return vectors, len(missing)
