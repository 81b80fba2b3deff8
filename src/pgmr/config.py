"""Where pgmr finds its data. Resolved once at the edge (CLI, service) and passed down as plain paths."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "PGMR_DATA_DIR"


def default_data_dir() -> Path:
    """`$PGMR_DATA_DIR`, else `../shared/data` beside the checkout, else beside the working directory."""
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    # The checkout layout is <root>/src/pgmr/config.py with shared/ beside <root>.
    checkout_root = Path(__file__).resolve().parents[2]
    for candidate in (checkout_root.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    return checkout_root.parent / "shared" / "data"


def resolve_data_dir(path: Path | str | None) -> Path:
    data_dir = Path(path).expanduser() if path else default_data_dir()
    if not data_dir.is_dir():
        raise FileNotFoundError(
            f"data directory {data_dir} does not exist; pass --data-dir or set ${DATA_DIR_ENV}"
        )
    return data_dir


MEMORY_DIR_ENV = "PGMR_MEMORY_DIR"


def default_memory_dir() -> Path:
    """`$PGMR_MEMORY_DIR`, else `~/.cache/pgmr/memory` (built by `pgmr memory build`)."""
    env = os.environ.get(MEMORY_DIR_ENV)
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pgmr" / "memory"
