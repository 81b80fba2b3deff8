"""The pgmr web service (FastAPI): `create_app(config)`; run it with `pgmr serve`."""

from __future__ import annotations

from pgmr.service.app import MAX_BODY_BYTES, create_app

__all__ = ["MAX_BODY_BYTES", "create_app"]
