"""Reading a memory's files into the page cache in the background (pgmr.memory.page_cache)."""

from __future__ import annotations

from pathlib import Path

from pgmr.memory.page_cache import warm_up


def test_a_warm_up_reads_every_file_and_reports_where_it_is(tmp_path: Path) -> None:
    sizes = {"a.arrow": 3 << 20, "lexical/seg/one": 10_000, "lexical/seg/two": 0}
    for name, size in sizes.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * size)
    warming = warm_up([tmp_path / "a.arrow", tmp_path / "lexical", tmp_path / "gone.arrow"])
    assert warming is not None
    assert warming.wait(timeout=30)
    status = warming.status()
    # The directory's files, not the directory; a missing path is skipped, not an error.
    assert status.done and status.files == 3 and status.bytes_read == sum(sizes.values())
    assert warm_up([tmp_path / "gone.arrow"]) is None
