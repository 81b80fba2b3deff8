"""A real, small SPARQL 1.1 protocol endpoint on 127.0.0.1 over an OxigraphStore, for tests.

It answers GET `?query=`, form-encoded POST and `application/sparql-query` POST with SPARQL JSON results
(N-Triples for CONSTRUCT/DESCRIBE), refuses `update=` with 403, answers unparsable queries with 400, and can
be told to misbehave for the next requests: `fail(503, times=2)`, `fail(429, retry_after=1)`,
`delay(2.0)`. Its own query timeout answers like Blazegraph does: 500 with `TimeoutException` in the body.

    with SparqlTestEndpoint(OxigraphStore.from_file("kg.nt")) as endpoint:
        store = HttpSparqlStore(endpoint.url)
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

from pgmr.kg.store import QuerySyntaxError, ReadOnlyError, StoreError, StoreTimeout
from pgmr.kg.stores.oxigraph_store import OxigraphStore


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    query: str | None


@dataclass(frozen=True)
class _Failure:
    status: int
    retry_after: str | None
    body: str


@dataclass(frozen=True)
class _Delay:
    seconds: float


class SparqlTestEndpoint:
    def __init__(self, store: OxigraphStore, *, query_timeout: float = 5.0, path: str = "/sparql") -> None:
        self.store = store
        self.query_timeout = query_timeout
        self.path = path
        self.requests: list[RecordedRequest] = []
        self._actions: deque[_Failure | _Delay] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- misbehaviour ----------------------------------------------------------------------------------------

    def fail(
        self, status: int, times: int = 1, *, retry_after: float | str | None = None, body: str | None = None
    ) -> None:
        """Answer the next `times` requests with `status` (and a Retry-After header when given)."""
        header = None if retry_after is None else str(retry_after)
        failure = _Failure(status, header, body if body is not None else f"injected failure {status}")
        with self._lock:
            self._actions.extend([failure] * times)

    def delay(self, seconds: float, times: int = 1) -> None:
        """Sleep `seconds` before answering each of the next `times` requests (normally, afterwards)."""
        with self._lock:
            self._actions.extend([_Delay(seconds)] * times)

    def reset(self) -> None:
        with self._lock:
            self._actions.clear()
            self.requests.clear()

    def _next_action(self) -> _Failure | _Delay | None:
        with self._lock:
            return self._actions.popleft() if self._actions else None

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # -- lifecycle -------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the endpoint is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.path}"

    def start(self) -> SparqlTestEndpoint:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.endpoint = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="pgmr-sparql-endpoint",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> SparqlTestEndpoint:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    server_version = "pgmr-test-sparql/1"
    protocol_version = "HTTP/1.1"

    @property
    def endpoint(self) -> SparqlTestEndpoint:
        return self.server.endpoint  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        params = parse_qs(urlsplit(self.path).query)
        self._handle(params)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace")
        media = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if media == "application/sparql-query":
            params = {"query": [body]}
        elif media == "application/sparql-update":
            params = {"update": [body]}
        else:
            params = parse_qs(body)
        params.update({k: v for k, v in parse_qs(urlsplit(self.path).query).items() if k not in params})
        self._handle(params)

    def _handle(self, params: dict[str, list[str]]) -> None:
        endpoint = self.endpoint
        query = (params.get("query") or [None])[0]
        endpoint._record(RecordedRequest(self.command, self.path, dict(self.headers.items()), query))
        if urlsplit(self.path).path != endpoint.path:
            return self._send(404, "text/plain", f"no SPARQL endpoint at {self.path}")
        action = endpoint._next_action()
        if isinstance(action, _Failure):
            extra = {"Retry-After": action.retry_after} if action.retry_after is not None else {}
            return self._send(action.status, "text/plain", action.body, extra)
        if isinstance(action, _Delay) and endpoint._stopping.wait(action.seconds):
            return None
        if "update" in params:
            return self._send(403, "text/plain", "this endpoint is read-only: SPARQL UPDATE is not accepted")
        if not query:
            return self._send(400, "text/plain", "missing 'query' parameter")
        try:
            result = endpoint.store.query(query, timeout=endpoint.query_timeout)
        except (QuerySyntaxError, ReadOnlyError) as exc:
            return self._send(400, "text/plain", f"MalformedQueryException: {exc}")
        except StoreTimeout as exc:
            return self._send(500, "text/plain", f"java.util.concurrent.TimeoutException: {exc}")
        except StoreError as exc:
            return self._send(500, "text/plain", f"query failed: {exc}")
        if result.kind == "graph":
            lines = "".join(
                f"{r['s'].to_sparql()} {r['p'].to_sparql()} {r['o'].to_sparql()} .\n" for r in result.rows
            )
            return self._send(200, "application/n-triples", lines)
        import json

        return self._send(200, "application/sparql-results+json", json.dumps(result.to_json()))

    def _send(self, status: int, media: str, body: str, headers: dict[str, str] | None = None) -> None:
        data = body.encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", f"{media}; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); nothing to tell it
