"""Errors raised while building, loading or querying a memory. Messages say what to do next."""

from __future__ import annotations


class PgmrMemoryError(Exception):
    """Base of all memory errors (named so as not to shadow the builtin MemoryError)."""


class MemoryNotFoundError(PgmrMemoryError, FileNotFoundError):
    """No memory at the given path (no directory, or no manifest.json in it)."""


class MemoryCorruptError(PgmrMemoryError):
    """A memory whose files are missing, truncated, edited or inconsistent with its manifest."""


class MemoryMismatchError(PgmrMemoryError):
    """A sound memory that does not fit this pgmr or this encoder (format version, encoder, dimension)."""


class IndexTrainingError(PgmrMemoryError, ValueError):
    """An index kind that needs training got too few rows to train on."""
