"""Deterministic train/validation carving: every tuned choice uses validation; test only reports."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def _bucket(record_id: str, salt: str) -> float:
    digest = hashlib.sha256(f"{salt}:{record_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_train_validation(
    records: Sequence[T], validation_share: float = 0.08, salt: str = "pgmr-validation"
) -> tuple[list[T], list[T]]:
    """Hash-based on each record's `id`, so a record stays on its side whatever else is added or removed."""
    if not 0.0 < validation_share < 1.0:
        raise ValueError("validation_share must be in (0, 1)")
    train: list[T] = []
    validation: list[T] = []
    for record in records:
        (validation if _bucket(str(record.id), salt) < validation_share else train).append(record)  # type: ignore[attr-defined]
    return train, validation
