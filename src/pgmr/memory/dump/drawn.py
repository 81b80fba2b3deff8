"""Drawn vectors for a synthetic dump's made-up items: the one shortcut a 10M-item simulation takes.

Encoding 20M texts on a 2-core machine takes ~1 day. A synthetic item that is not a namesake of a real entity
(its label is no real label or alias) gets a vector drawn near real ones instead: a mix of two real rows'
vectors (chosen by the item's ID, so an item's rows sit together as a real item's do) plus Gaussian noise at
cosine `cosine` to that mix. Real entities and every synthetic namesake of one (the hard homonyms) are encoded
for real. Memories built this way say so in their manifest (`vectors.drawn` rows); their figures are labelled.

Only IDs above `pgmr.kg.dump.synthetic.SYNTHETIC_BASE` (synthetic dumps' made-up items) are ever drawn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pgmr.kg.dump.synthetic import SYNTHETIC_BASE
from pgmr.kg.ids import id_number
from pgmr.memory.dump.catalog_rows import shard_rows
from pgmr.memory.errors import PgmrMemoryError
from pgmr.memory.rows import MemoryRow

# Real row vectors the drawn ones mix: enough that the drawn rows spread as real ones do.
POOL_SIZE = 8192
DEFAULT_COSINE = 0.8


@dataclass(frozen=True)
class DrawnVectors:
    """What drawing needs: real row vectors to mix, and which surfaces are real (namesakes are encoded)."""

    pool: np.ndarray  # (pool size, dimension), unit rows of real texts
    real_surfaces: frozenset[str]  # casefolded real labels and aliases
    cosine: float = DEFAULT_COSINE

    def __post_init__(self) -> None:
        if self.pool.ndim != 2 or not len(self.pool):
            raise ValueError("drawn vectors need a non-empty pool of real vectors")
        if not 0.0 < self.cosine < 1.0:
            raise ValueError("cosine must be between 0 and 1")

    def describe(self) -> str:
        """How the vectors are drawn, for the build's identity and the memory's manifest."""
        return (
            f"drawn: synthetic non-namesakes, cosine {self.cosine} to a mix of {len(self.pool)} real vectors"
        )

    def drawn(self, row: MemoryRow) -> bool:
        """Whether a row gets a drawn vector: a made-up item's row that names no real entity."""
        try:
            number = id_number(row.id)
        except ValueError:
            return False
        return (
            row.id.startswith("Q")
            and number > SYNTHETIC_BASE
            and (row.surface or row.label).casefold() not in self.real_surfaces
        )

    def vectors(self, rows: Sequence[MemoryRow]) -> np.ndarray:
        """Drawn unit vectors for rows (deterministic: the same rows always get the same vectors)."""
        dimension = self.pool.shape[1]
        if not rows:
            return np.zeros((0, dimension), dtype=np.float32)
        numbers = np.array([id_number(r.id) for r in rows], dtype=np.int64)
        size = len(self.pool)
        first = self.pool[(numbers * 2654435761) % size]
        second = self.pool[(numbers * 40503 + 17) % size]
        base = first + 0.5 * second
        base /= np.linalg.norm(base, axis=1, keepdims=True)
        digest = hashlib.blake2b("\n".join(r.text for r in rows).encode("utf-8"), digest_size=8).digest()
        noise = np.random.default_rng(int.from_bytes(digest, "little")).standard_normal(
            (len(rows), dimension)
        )
        noise -= (noise * base).sum(axis=1, keepdims=True) * base
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        out = self.cosine * base + np.sqrt(1.0 - self.cosine**2) * noise
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)


def real_rows(shards: Sequence[Path]) -> list[MemoryRow]:
    """The memory rows of a catalog's real (not made-up) records, in catalog order."""
    rows: list[MemoryRow] = []
    for shard in shards:
        table = pq.read_table(shard, columns=["id", "label", "description", "aliases"])
        numbers = pc.cast(pc.utf8_slice_codeunits(table["id"], 1), pa.int64())
        real = table.filter(pc.less_equal(numbers, SYNTHETIC_BASE))
        if real.num_rows:
            rows.extend(shard_rows(real))
    return rows


def prepare_drawn(
    shards: Sequence[Path], encode: Callable[[list[str]], np.ndarray], cosine: float = DEFAULT_COSINE
) -> DrawnVectors:
    """Drawn vectors for a catalog: its real surfaces, and a pool of `POOL_SIZE` real texts spread evenly over
    the catalog's real rows, their vectors from `encode` (unit rows)."""
    rows = real_rows(shards)
    if not rows:
        raise PgmrMemoryError("drawn vectors need real entities in the catalog to draw near; it has none")
    surfaces = frozenset((row.surface or row.label).casefold() for row in rows)
    texts = list(dict.fromkeys(row.text for row in rows))
    step = max(1, len(texts) // POOL_SIZE)
    pool = np.asarray(encode(texts[::step][:POOL_SIZE]), dtype=np.float32)
    return DrawnVectors(pool, surfaces, cosine)
