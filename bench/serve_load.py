"""Load test of `pgmr serve`: N concurrent POST /ask requests on loopback; errors, latency and throughput.

    python bench/serve_load.py [--url http://127.0.0.1:8000] [--requests 200] [--model DIR] [--store SPEC]

Without --url it starts `pgmr serve` on a free 127.0.0.1 port (with the given --model/--memory/--store/
--data-dir), waits for /health, fires the requests all at once (httpx, asyncio), stops the server and writes
bench/results/serve_load.json. Traffic only ever goes to the loopback address given or started here. An
"error" is a transport failure or an HTTP status other than 200; refusals and invalid model output are
answers (counted per status).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from rich.table import Table

from _common import console, write_result

QUESTIONS = [
    "Who founded Intel?",
    "What is the capital of Germany?",
    "How many people live in Hamburg?",
    "Is Berlin the capital of Germany?",
    "Which language is spoken in Andorra?",
    "Who is the author of The Hobbit?",
    "When was the University of Oxford founded?",
    "What is the official language of Brazil?",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, server: subprocess.Popen | None, log: Path | None, limit: float) -> dict:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if server is not None and server.poll() is not None:
            tail = log.read_text()[-2000:] if log else ""
            raise SystemExit(f"pgmr serve exited with code {server.returncode} before it was ready:\n{tail}")
        try:
            response = httpx.get(f"{url}/health", timeout=5.0)
            if response.status_code == 200:
                return response.json()
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url}/health did not answer within {limit:.0f} s")


# `pgmr serve` options a bench may pass on (attribute of its argparse namespace, flag); absent ones are skipped.
SERVE_OPTIONS = (
    ("model", "--model"),
    ("memory", "--memory"),
    ("store", "--store"),
    ("max_concurrency", "--max-concurrency"),
    ("max_queue", "--max-queue"),
    ("deadline", "--deadline"),
)


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a bench that starts `pgmr serve` itself."""
    parser.add_argument("--startup-timeout", type=float, default=300.0)
    parser.add_argument("--data-dir")
    parser.add_argument("--model")
    parser.add_argument("--memory")
    parser.add_argument("--store")


def start_server(args: argparse.Namespace, port: int, log: Path) -> subprocess.Popen:
    command = [str(Path(sys.executable).with_name("pgmr"))]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    command += ["serve", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    for attribute, flag in SERVE_OPTIONS:
        value = getattr(args, attribute, None)
        if value is not None:
            command += [flag, str(value)]
    console.print(f"starting: {' '.join(command)} (log: {log})")
    handle = log.open("w")
    return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)


def stop_server(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGINT)  # uvicorn shuts down cleanly on SIGINT
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


@dataclass(frozen=True)
class Service:
    url: str
    server: subprocess.Popen | None  # None: a service given by --url, not started here
    log: Path | None
    health: dict


@contextmanager
def running_service(args: argparse.Namespace, name: str) -> Iterator[Service]:
    """`args.url` (loopback only: these benches send traffic to this machine alone) or a `pgmr serve` started
    on a free 127.0.0.1 port and stopped at the end; yields it once /health answers."""
    server = None
    log = None
    if getattr(args, "url", None):
        url = args.url.rstrip("/")
        host = urlsplit(url).hostname or ""
        if host not in ("127.0.0.1", "localhost", "::1") and not host.startswith("127."):
            raise SystemExit(
                "--url must be a loopback address: this bench only sends traffic to this machine"
            )
    else:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"pgmr-{name}-{port}.log"
        server = start_server(args, port, log)
    try:
        yield Service(url, server, log, wait_healthy(url, server, log, args.startup_timeout))
    finally:
        if server is not None:
            stop_server(server)


async def fire(url: str, questions: list[str], timeout: float) -> tuple[list[dict], float]:
    limits = httpx.Limits(max_connections=len(questions), max_keepalive_connections=len(questions))

    async def one(client: httpx.AsyncClient, question: str) -> dict:
        started = time.perf_counter()
        try:
            response = await client.post("/ask", json={"question": question})
            seconds = time.perf_counter() - started
            status = response.json().get("status") if response.status_code == 200 else None
            return {"http": response.status_code, "status": status, "seconds": seconds, "error": None}
        except (httpx.HTTPError, ValueError) as exc:
            return {
                "http": None,
                "status": None,
                "seconds": time.perf_counter() - started,
                "error": repr(exc),
            }

    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:
        started = time.perf_counter()
        results = await asyncio.gather(*(one(client, q) for q in questions))
        return list(results), time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="a running pgmr service on loopback (default: start one)")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    add_server_arguments(parser)
    args = parser.parse_args()
    if not 1 <= args.requests <= 1000:
        raise SystemExit("--requests must be between 1 and 1000")

    started = time.perf_counter()
    with running_service(args, "serve-load") as service:
        startup = time.perf_counter() - started
        console.print(f"service ready ({startup:.1f} s): {service.health}")
        questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(args.requests)]
        results, wall = asyncio.run(fire(service.url, questions, args.timeout))

    latencies = [r["seconds"] for r in results]
    errors = [r for r in results if r["http"] != 200]
    statuses = Counter(r["status"] for r in results if r["http"] == 200)
    summary = {
        "requests": len(results),
        "concurrency": len(results),
        "errors": len(errors),
        "error_examples": [r["error"] or f"HTTP {r['http']}" for r in errors[:5]],
        "statuses": dict(statuses),
        "latency_seconds": {
            "p50": percentile(latencies, 0.50),
            "p95": percentile(latencies, 0.95),
            "max": max(latencies),
            "mean": statistics.fmean(latencies),
        },
        "wall_seconds": wall,
        "throughput_rps": len(results) / wall,
        "server_startup_seconds": None if args.url else startup,
        "service": service.health,
        "cpus": os.cpu_count(),
    }
    table = Table(title=f"pgmr serve: {len(results)} concurrent POST /ask")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("errors (expected 0)", f"[{'green' if not errors else 'red'}]{len(errors)}[/]")
    for status, count in sorted(statuses.items()):
        table.add_row(f"status {status}", str(count))
    for name in ("p50", "p95", "max"):
        table.add_row(f"latency {name}", f"{summary['latency_seconds'][name]:.2f} s")
    table.add_row("wall time", f"{wall:.1f} s")
    table.add_row("throughput", f"{summary['throughput_rps']:.2f} req/s")
    console.print(table)
    write_result("serve_load", summary)
    if errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
