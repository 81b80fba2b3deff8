"""Where a memory is written: the embedding cache beside it, and the check that a target may be replaced."""

from __future__ import annotations

from pathlib import Path

from pgmr.memory.errors import PgmrMemoryError
from pgmr.memory.manifest import MANIFEST_FILE


def default_cache_dir(out_dir: Path | str) -> Path:
    """`<out_dir>.cache` beside the memory directory."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f"{out_dir.name}.cache")


def check_replaceable(out_dir: Path) -> None:
    """Refuse to replace anything but a memory or an empty directory: a wrong --out must not delete data."""
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise PgmrMemoryError(f"cannot write a memory to {out_dir}: it is a file; choose another output path")
    if (out_dir / MANIFEST_FILE).is_file() or not any(out_dir.iterdir()):
        return
    raise PgmrMemoryError(
        f"refusing to replace {out_dir}: it is a non-empty directory without a pgmr manifest.json; "
        "choose another output path or remove it first"
    )


__all__ = ["check_replaceable", "default_cache_dir"]
