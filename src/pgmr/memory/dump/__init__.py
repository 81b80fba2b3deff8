"""Memories built from a Wikidata JSON dump: parse, encode and index stages on a Dask cluster, resumable."""

from __future__ import annotations

from pgmr.memory.dump.build import DumpBuildReport, DumpBuildSettings, build_from_dump, work_dir_for
from pgmr.memory.dump.cluster import ClusterSettings

__all__ = ["ClusterSettings", "DumpBuildReport", "DumpBuildSettings", "build_from_dump", "work_dir_for"]
