"""JSONL in and out; writes are atomic (temp file in the same directory, fsync, rename)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


class JsonlError(ValueError):
    pass


def read_jsonl(path: Path | str) -> Iterator[dict[str, Any]]:
    path = Path(path)
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise JsonlError(f"{path}:{line_no}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise JsonlError(f"{path}:{line_no}: expected a JSON object")
            yield record


def atomic_write_text(path: Path | str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_jsonl(path: Path | str, records: Iterable[dict[str, Any]]) -> int:
    """Write records atomically; returns how many were written."""
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(lines)


def write_json(path: Path | str, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
