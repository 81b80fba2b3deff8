"""The pgmr web service: the ask pipeline over HTTP, with a web page at `/`.

Models are loaded once, at startup (lifespan). The work of each request runs in a worker thread of the
`Limiter` (service/limits.py: a bounded number at work, a bounded queue answered with 503 when full, a
deadline answered with 504); the pipeline serialises the generator and the resolver behind its own lock and
queries the store outside it. Every error is JSON `{"error": {"code", "message"}}`; a stack trace never
reaches a client.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from pgmr import __version__
from pgmr.pipeline import AskResult, Pipeline, PipelineConfig
from pgmr.service.limits import DeadlineExceeded, Limiter, Overloaded, ServiceLimits
from pgmr.service.schemas import (
    MAX_QUERY_CHARS,
    MAX_QUESTION_CHARS,
    AskRequest,
    AskResponse,
    ErrorResponse,
    HealthResponse,
    ResolveRequest,
    SearchResponse,
)
from pgmr.service.text2sparql import add_text2sparql

log = logging.getLogger("pgmr.service")

STATIC_DIR = Path(__file__).resolve().parent / "static"
# Over the largest valid body, so no valid request is refused for its size: a query of MAX_QUERY_CHARS and
# a question of MAX_QUESTION_CHARS characters, each character up to 12 bytes when JSON-escaped (a surrogate
# pair, "\ud83d\ude00"), plus the keys: about 106 KiB. (16 KiB, the first limit, refused long non-ASCII
# queries that the schema accepts.)
MAX_BODY_BYTES = 128 * 1024
# The page loads nothing from elsewhere (no CDN: the service may run offline).
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


# What the limited endpoints (those that run pipeline work) may answer besides the app-wide errors.
LIMITED_RESPONSES: dict[int | str, dict[str, Any]] = {
    503: {
        "model": ErrorResponse,
        "description": "overloaded: every worker is busy and the wait queue is full; retry after Retry-After",
        "headers": {
            "Retry-After": {
                "description": "seconds to wait before retrying (an estimate from the queue and recent work)",
                "schema": {"type": "integer", "minimum": 1},
            }
        },
    },
    504: {"model": ErrorResponse, "description": "deadline: no answer within the service's deadline"},
}


def error_json(
    status: int,
    code: str,
    message: str,
    details: list[str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if details:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


class BodyLimit:
    """Reject request bodies over `limit` bytes with 413, before any handler reads them.

    A declared Content-Length is checked up front; a chunked body is read up to the limit and replayed.
    """

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await error_json(400, "bad_request", "invalid Content-Length header")(scope, receive, send)
                return
            if size > self.limit:
                await self._too_large(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        received = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.limit:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_json(
            413,
            "too_large",
            f"request body over {self.limit} bytes; questions are at most {MAX_QUESTION_CHARS} characters, "
            f"queries at most {MAX_QUERY_CHARS}",
        )
        await response(scope, receive, send)


def _validation_details(exc: RequestValidationError) -> list[str]:
    details = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err.get("loc", ()) if part != "body")
        details.append(f"{where}: {err.get('msg', 'invalid')}" if where else str(err.get("msg", "invalid")))
    return details


def _swagger_assets() -> Path | None:
    """Swagger UI's files from the swagger-ui-py package, so that /docs works without internet."""
    try:
        import swagger_ui
    except ImportError:
        return None
    path = Path(swagger_ui.__file__).resolve().parent / "static"
    return path if (path / "swagger-ui-bundle.js").is_file() else None


def create_app(
    config: PipelineConfig | None = None,
    *,
    pipeline: Pipeline | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    limits: ServiceLimits | None = None,
    datasets: Mapping[str, Pipeline] | None = None,
) -> FastAPI:
    """The app. `pipeline` serves a pipeline built by the caller; else one is loaded from `config` at startup.

    `limits` bound the work in progress, the wait queue and each request's time (default `ServiceLimits()`).
    `datasets`: dataset name -> the caller's pipeline over that graph, for GET /text2sparql (service/text2sparql.py).
    """
    if pipeline is None and config is None:
        raise ValueError("create_app needs a PipelineConfig or a Pipeline")
    limiter = Limiter(limits or ServiceLimits())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = pipeline is None
        app.state.pipeline = pipeline if pipeline is not None else Pipeline.load(config)  # type: ignore[arg-type]
        limiter.start()
        try:
            yield
        finally:
            # Running work ends first (it uses the pipeline); then the pipeline's worker and store close.
            limiter.close()
            if owned:
                app.state.pipeline.close()

    app = FastAPI(
        title="pgmr",
        version=__version__,
        description=(
            "Questions to SPARQL over Wikidata without hallucinated identifiers: a generator writes an "
            "intermediate query with placeholders, the memory resolves them to real IDs (or refuses), and "
            "the query runs read-only on the configured store."
        ),
        lifespan=lifespan,
        docs_url=None,  # served below, from local assets when swagger-ui-py is installed
        redoc_url=None,
        responses={
            400: {
                "model": ErrorResponse,
                "description": "refused (a SPARQL UPDATE), or a body that is not UTF-8",
            },
            413: {"model": ErrorResponse, "description": "request body too large"},
            422: {"model": ErrorResponse, "description": "invalid request"},
        },
    )
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.state.limiter = limiter

    @app.exception_handler(Overloaded)
    async def overloaded(request: Request, exc: Overloaded) -> JSONResponse:
        return error_json(503, "overloaded", str(exc), headers={"Retry-After": str(exc.retry_after)})

    @app.exception_handler(DeadlineExceeded)
    async def deadline(request: Request, exc: DeadlineExceeded) -> JSONResponse:
        return error_json(504, "deadline", str(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = _validation_details(exc)
        return error_json(422, "invalid_request", "; ".join(details) or "invalid request", details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Keep the exception's headers: a 405 must say which methods the path has (Allow, RFC 9110).
        return error_json(exc.status_code, f"http_{exc.status_code}", str(exc.detail), headers=exc.headers)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_json(500, "internal", f"internal error ({type(exc).__name__}); see the server log")

    def current(request: Request) -> Pipeline:
        return request.app.state.pipeline

    def answer(result: AskResult) -> JSONResponse | dict[str, Any]:
        # Queries refused by policy (an update, a federated SERVICE call) are the caller's to fix: 400.
        if result.error is not None and result.error.code in ("read_only", "service_refused"):
            return error_json(400, result.error.code, result.error.message)
        return result.to_json()

    # The handlers below are coroutines only to await the limiter; the pipeline work runs in its workers.
    @app.post("/ask", response_model=AskResponse, summary="Answer a question", responses=LIMITED_RESPONSES)
    async def ask(body: AskRequest, request: Request) -> Any:
        """Generate an intermediate query, resolve its placeholders, run it read-only, label the answers."""
        work = partial(current(request).ask, body.question, candidates=body.candidates)
        return answer(await limiter.run(work))

    @app.post(
        "/resolve",
        response_model=AskResponse,
        summary="Resolve (and run) an intermediate query",
        responses=LIMITED_RESPONSES,
    )
    async def resolve(body: ResolveRequest, request: Request) -> Any:
        """Resolve a SPARQL-PGMR text written elsewhere; an UPDATE is refused with 400 and never executed."""
        p = current(request)
        work = partial(
            p.resolve_text,
            body.query,
            question=body.question,
            execute=body.execute,
            candidates=body.candidates,
        )
        return answer(await limiter.run(work))

    @app.get(
        "/memory/search",
        response_model=SearchResponse,
        summary="Search the memory",
        responses=LIMITED_RESPONSES,
    )
    async def memory_search(
        request: Request,
        q: str = Query(
            ..., min_length=1, max_length=MAX_QUESTION_CHARS, description="label, or 'label, description'"
        ),
        kind: Literal["entity", "relation"] = Query("entity"),
        k: int = Query(5, ge=1, le=50),
    ) -> Any:
        hits = await limiter.run(current(request).search, q, kind, k)
        return {
            "query": q,
            "kind": kind,
            "hits": [
                {
                    "id": h.id,
                    "label": h.label,
                    "description": h.description,
                    "score": h.score,
                    "matched_text": h.matched_text,
                }
                for h in hits
            ],
        }

    # A coroutine on purpose: it needs no worker, so it answers even when every worker is busy.
    @app.get("/health", response_model=HealthResponse, summary="Liveness, what is loaded, and the load")
    async def health(request: Request) -> Any:
        p = current(request)
        return {
            "status": "ok",
            "version": __version__,
            "mode": p.mode,
            "model": str(p.model_dir) if p.model_dir else None,
            "memory": {"entities": len(p.memory.entities), "relations": len(p.memory.relations)},
            "store": p.config.store,
            "kg_check": p.config.kg_check and p.store is not None,
            "load": {**limiter.snapshot(), "deadline_seconds": limiter.limits.deadline},
            # None where nothing is read ahead (a memory whose rows are held in RAM).
            "warm_up": asdict(p.memory.warming.status()) if p.memory.warming is not None else None,
        }

    add_text2sparql(app, limiter, dict(datasets or {}), LIMITED_RESPONSES)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html", headers=PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    assets = _swagger_assets()
    if assets is not None:
        app.mount("/docs-assets", StaticFiles(directory=assets), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        if assets is None:  # FastAPI's default page, which loads Swagger UI from a CDN
            return get_swagger_ui_html(openapi_url="/openapi.json", title="pgmr API")
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="pgmr API",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon-32x32.png",
        )

    return app


__all__ = ["LIMITED_RESPONSES", "MAX_BODY_BYTES", "BodyLimit", "create_app"]
