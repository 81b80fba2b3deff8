"""The error of a record that cannot be converted (its own module: graph conversion and `convert` share it)."""

from __future__ import annotations


class ConversionError(ValueError):
    """A record that cannot be converted; `reason` is a short stable code for counting."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")


__all__ = ["ConversionError"]
