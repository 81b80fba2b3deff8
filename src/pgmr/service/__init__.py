"""The pgmr web service (FastAPI): `create_app(config)`; run it with `pgmr serve`.

The app is imported on first use, so that `pgmr.service.limits` (the `pgmr serve` options' defaults) can be
imported without the `serve` extra (fastapi) installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pgmr.service.app import MAX_BODY_BYTES, create_app

__all__ = ["MAX_BODY_BYTES", "create_app"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from pgmr.service import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
