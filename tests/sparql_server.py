"""A real SPARQL 1.1 server for tests, and a fault-injecting proxy in front of it.

`OxigraphServer` runs the Oxigraph server shipped by the `oxigraph` PyPI package (its `oxigraph` command) over
an N-Triples file, read-only, on a free loopback port. `FaultProxy` forwards requests to it unchanged and
records them, or misbehaves on the next requests as told: an HTTP status (with Retry-After), a delay, a
connection reset, a body cut short, a non-JSON body under the JSON results type, or an HTML page.

    with OxigraphServer(kg_file) as server, FaultProxy(server.query_url) as proxy:
        store = HttpSparqlStore(proxy.url)
        proxy.fail(503, times=2)
"""

from __future__ import annotations

import gzip
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

import httpx


def oxigraph_command() -> str:
    """The `oxigraph` executable of the running interpreter's environment (the `oxigraph` PyPI package)."""
    beside = Path(sys.executable).with_name("oxigraph")
    found = str(beside) if beside.is_file() else shutil.which("oxigraph")
    if not found:
        raise RuntimeError(
            "the oxigraph server is not installed: pip install oxigraph (the dev extra has it)"
        )
    return found


def _die_with_parent() -> None:
    """In the child, before exec: the kernel kills the server when the test process dies (a killed or timed-out
    pytest would otherwise leave it running, busy with the last slow query). Linux only; elsewhere a no-op."""
    if sys.platform != "linux":
        return
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class OxigraphServer:
    """`oxigraph serve-read-only` over a store loaded from `data` (N-Triples) in a temporary directory.

    `query_timeout` (whole seconds) is the server's own limit per query: without it a query the client gave up
    on keeps the server busy, as on a real endpoint; the contract's slow query needs it to end.
    """

    def __init__(self, data: Path, *, query_timeout: int = 2, startup_timeout: float = 30.0) -> None:
        self.data = Path(data)
        self.query_timeout = query_timeout
        self.startup_timeout = startup_timeout
        self.port = 0
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def query_url(self) -> str:
        return f"{self.base_url}/query"

    def start(self) -> OxigraphServer:
        command = oxigraph_command()
        self._dir = tempfile.TemporaryDirectory(prefix="pgmr-oxigraph-")
        location = Path(self._dir.name) / "store"
        subprocess.run(
            [command, "load", "--location", str(location), "--file", str(self.data)],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.port = free_port()
        self._process = subprocess.Popen(
            [
                command,
                "serve-read-only",
                "--location",
                str(location),
                "--bind",
                f"127.0.0.1:{self.port}",
                "--timeout-s",
                str(self.query_timeout),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._process.poll() is not None:
                err = self._process.stderr.read().decode() if self._process.stderr else ""
                raise RuntimeError(f"the oxigraph server exited at startup: {err}")
            try:
                if httpx.get(self.query_url, params={"query": "ASK {}"}, timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("the oxigraph server did not start in time")
            time.sleep(0.05)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            if self._process.stderr:
                self._process.stderr.close()
            self._process = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> OxigraphServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    query: str | None


@dataclass(frozen=True)
class Fault:
    """What the proxy does to one request instead of forwarding it faithfully."""

    kind: str  # status | delay | reset | truncate | not_json | wrong_type | gzip (not a fault: compressed)
    status: int = 0
    retry_after: str | None = None
    body: str = ""
    seconds: float = 0.0


FAULT_KINDS = ("status", "delay", "reset", "truncate", "not_json", "wrong_type", "gzip")


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of `upstream` (a SPARQL endpoint URL); `url` is its endpoint.

    Requests to `path` go to the upstream endpoint, any other path to the same path upstream.
    """

    def __init__(self, upstream: str, *, path: str = "/sparql") -> None:
        self.upstream = upstream
        self.path = path
        self.requests: list[RecordedRequest] = []
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._client = httpx.Client(timeout=60.0)

    # -- misbehaviour ----------------------------------------------------------------------------------------

    def inject(self, fault: Fault, times: int = 1) -> None:
        if fault.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {fault.kind!r}")
        with self._lock:
            self._faults.extend([fault] * times)

    def fail(
        self, status: int, times: int = 1, *, retry_after: float | str | None = None, body: str | None = None
    ) -> None:
        """Answer the next `times` requests with `status` (and a Retry-After header when given)."""
        header = None if retry_after is None else str(retry_after)
        self.inject(
            Fault("status", status, header, body if body is not None else f"injected {status}"), times
        )

    def delay(self, seconds: float, times: int = 1) -> None:
        """Wait `seconds` before forwarding each of the next `times` requests."""
        self.inject(Fault("delay", seconds=seconds), times)

    def reset(self) -> None:
        with self._lock:
            self._faults.clear()
            self.requests.clear()

    def _next_fault(self) -> Fault | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # -- lifecycle -------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the proxy is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.path}"

    def start(self) -> FaultProxy:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.proxy = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fault-proxy", daemon=True
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
        self._client.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a reset connection is the point of some faults; nothing to print


class _Handler(BaseHTTPRequestHandler):
    server_version = "pgmr-fault-proxy/1"
    protocol_version = "HTTP/1.1"

    @property
    def proxy(self) -> FaultProxy:
        return self.server.proxy  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._handle(b"")

    def do_POST(self) -> None:
        self._handle(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _handle(self, body: bytes) -> None:
        proxy = self.proxy
        split = urlsplit(self.path)
        params = parse_qs(split.query)
        media = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if media == "application/x-www-form-urlencoded":
            params.update(parse_qs(body.decode("utf-8", "replace")))
        elif media == "application/sparql-query":
            params["query"] = [body.decode("utf-8", "replace")]
        query = (params.get("query") or [None])[0]
        proxy._record(RecordedRequest(self.command, self.path, dict(self.headers.items()), query))
        fault = proxy._next_fault()
        if fault is not None and fault.kind == "status":
            extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            return self._send(fault.status, "text/plain; charset=utf-8", fault.body.encode(), extra)
        if fault is not None and fault.kind == "reset":
            return self._reset()
        if fault is not None and fault.kind == "delay" and proxy._stopping.wait(fault.seconds):
            return None
        target = urlsplit(proxy.upstream)
        path = target.path if split.path == proxy.path else split.path
        url = f"{target.scheme}://{target.netloc}{path}" + (f"?{split.query}" if split.query else "")
        forwarded = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
        try:
            upstream = proxy._client.request(self.command, url, content=body or None, headers=forwarded)
        except httpx.HTTPError as exc:
            return self._send(502, "text/plain", f"proxy: upstream failed: {exc}".encode())
        content_type = upstream.headers.get("Content-Type", "application/octet-stream")
        content = upstream.content
        if fault is not None and fault.kind == "truncate":
            return self._send(upstream.status_code, content_type, content, cut=max(1, len(content) // 2))
        if fault is not None and fault.kind == "not_json":
            content = b"<html><body>502 Bad Gateway</body></html>"
        elif fault is not None and fault.kind == "wrong_type":
            content_type = "text/html; charset=utf-8"
            content = b"<!doctype html><title>Maintenance</title><p>Back soon.</p>"
        elif fault is not None and fault.kind == "gzip":
            extra = {"Content-Encoding": "gzip"}
            return self._send(upstream.status_code, content_type, gzip.compress(content), extra)
        return self._send(upstream.status_code, content_type, content)

    def _send(
        self,
        status: int,
        media: str,
        data: bytes,
        headers: dict[str, str] | None = None,
        *,
        cut: int | None = None,
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", media)
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if cut is None:
                self.wfile.write(data)
                return
            self.wfile.write(data[:cut])  # the declared length is not reached: the peer sees a cut body
            self.wfile.flush()
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); nothing to tell it

    def _reset(self) -> None:
        """Close the connection with a TCP RST (SO_LINGER 0), before any byte of an answer."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()
