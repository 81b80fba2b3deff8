"""Soak test of `pgmr serve`: sustained load for minutes, the server's resident memory over time, then overload.

    python bench/serve_soak.py [--minutes 10] [--concurrency 8] [--model DIR] [--memory DIR] [--store SPEC]

Starts `pgmr serve` on a free 127.0.0.1 port (as bench/serve_load.py does; --max-concurrency, --max-queue and
--deadline are passed on) and then:

1. soak: `--concurrency` clients, each sending its next request as soon as the last one is answered (mostly
   POST /ask, some POST /resolve and GET /memory/search), for `--minutes`; the server process's resident
   memory (psutil, the process and its children) is sampled every `--sample-seconds`;
2. overload: `--overload-requests` requests at once (by default twice what the service admits: its
   max_concurrency + max_queue, read from /health), counting 503 answers with Retry-After against client
   timeouts: a full queue must be refused at once, not left to time out; once /health shows the queue full,
   `--probes` more requests are sent one by one and timed alone (the burst's own times include the client
   opening hundreds of connections at once);
3. recovery: one more /ask must be answered normally.

Reports per-minute requests, errors, p50/p95 latency and RSS, the RSS growth from minute 2 (or half-way on
runs shorter than 4 minutes) to the end, and the overload counts; writes bench/results/serve_soak.json. An
"error" in the soak phase is a transport failure or any HTTP status other than 200. Exit code 1 when the
soak had errors, RSS grew 10% or more, or the overload phase had a timeout, no 503, or a probe not refused
with 503 and Retry-After.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import threading
import time
from collections import Counter
from typing import Any

import httpx
import psutil
from rich.table import Table

from _common import console, write_result
from serve_load import QUESTIONS, add_server_arguments, percentile, running_service

# A hand-written intermediate query (no generation) and memory searches: the other endpoints that do work.
RESOLVE_QUERY = (
    "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\n"
    "entity0 = [ENT] Germany [/ENT]\nrelation0 = [REL] capital [/REL]"
)
SEARCHES = ["Hamburg", "capital"]


def request_plan() -> itertools.cycle[tuple[str, str, dict[str, Any]]]:
    """(method, path, keyword arguments) in a fixed rotation: the 8 questions, and after every 4 of them a
    resolve and a memory search."""
    plan: list[tuple[str, str, dict[str, Any]]] = []
    for i, question in enumerate(QUESTIONS):
        plan.append(("POST", "/ask", {"json": {"question": question}}))
        if i % 4 == 3:
            plan.append(("POST", "/resolve", {"json": {"query": RESOLVE_QUERY}}))
            plan.append(("GET", "/memory/search", {"params": {"q": SEARCHES[i // 4 % 2], "k": 5}}))
    return itertools.cycle(plan)


class RssSampler:
    """The resident memory of a process and its children, every `interval` seconds, in a thread."""

    def __init__(self, pid: int, interval: float) -> None:
        self.process = psutil.Process(pid)
        self.interval = interval
        self.samples: list[tuple[float, int]] = []  # (seconds since start, bytes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._started = 0.0

    def rss(self) -> int:
        total = self.process.memory_info().rss
        for child in self.process.children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):  # a child that just ended
                total += child.memory_info().rss
        return total

    def start(self, started: float) -> None:
        self._started = started
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.perf_counter() - self._started, self.rss()))
            except psutil.NoSuchProcess:
                return
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def at(self, seconds: float) -> int:
        """The sample closest to `seconds` after the start."""
        return min(self.samples, key=lambda sample: abs(sample[0] - seconds))[1]


async def soak(url: str, seconds: float, concurrency: int, timeout: float) -> tuple[list[dict], float]:
    """Closed-loop clients for `seconds`; one record per request: start offset, latency, HTTP status, error."""
    plan = request_plan()
    records: list[dict] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:
        started = time.perf_counter()
        stop_at = started + seconds

        async def client_loop() -> None:
            while time.perf_counter() < stop_at:
                method, path, kwargs = next(plan)
                sent = time.perf_counter()
                record: dict[str, Any] = {"t": sent - started, "path": path, "http": None, "error": None}
                try:
                    response = await client.request(method, path, **kwargs)
                    record["http"] = response.status_code
                    if response.status_code != 200:
                        record["error"] = f"HTTP {response.status_code}: {response.text[:200]}"
                except httpx.HTTPError as exc:
                    record["error"] = repr(exc)
                record["seconds"] = time.perf_counter() - sent
                records.append(record)

        await asyncio.gather(*(client_loop() for _ in range(concurrency)))
        return records, time.perf_counter() - started


async def overload(url: str, count: int, timeout: float, probes: int) -> tuple[list[dict], list[dict], float]:
    """`count` POST /ask at once, each on its own connection; once /health shows the queue full, `probes` more
    POST /ask one after the other on a fresh connection, timed alone.

    The burst's own latencies include the client's time to open hundreds of connections at once on a busy
    machine; a probe's latency is what one request arriving at a full service waits for its 503.
    """
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)

    async def one(client: httpx.AsyncClient, question: str) -> dict:
        sent = time.perf_counter()
        try:
            response = await client.post("/ask", json={"question": question})
            return {
                "http": response.status_code,
                "retry_after": response.headers.get("retry-after"),
                "code": response.json().get("error", {}).get("code") if response.status_code != 200 else None,
                "seconds": time.perf_counter() - sent,
                "error": None,
            }
        except httpx.TimeoutException as exc:
            return {"http": None, "timeout": True, "seconds": time.perf_counter() - sent, "error": repr(exc)}
        except (httpx.HTTPError, ValueError) as exc:
            return {"http": None, "seconds": time.perf_counter() - sent, "error": repr(exc)}

    def probe_when_full() -> list[dict]:
        """In its own thread with its own connections: the burst's coroutines keep the client's event loop
        too busy to time anything on it (and to reuse a keep-alive connection before the server drops it)."""
        fresh = httpx.Limits(max_keepalive_connections=0)  # each request on a new connection, as a new client
        with httpx.Client(base_url=url, timeout=timeout, limits=fresh) as own:
            give_up = time.perf_counter() + 60
            health_seconds = None
            while time.perf_counter() < give_up:
                sent = time.perf_counter()
                try:
                    load = own.get("/health").json()["load"]
                except (httpx.HTTPError, ValueError, KeyError):
                    time.sleep(0.1)
                    continue
                if load["queued"] >= load["max_queue"]:
                    health_seconds = time.perf_counter() - sent
                    break
                time.sleep(0.1)
            if health_seconds is None:
                return []  # the burst never filled the queue: nothing to probe
            results = []
            for _ in range(probes):
                sent = time.perf_counter()
                try:
                    response = own.post("/ask", json={"question": QUESTIONS[0]})
                    results.append(
                        {
                            "http": response.status_code,
                            "retry_after": response.headers.get("retry-after"),
                            "seconds": time.perf_counter() - sent,
                            "health_seconds": health_seconds,
                            "error": None,
                        }
                    )
                except httpx.TimeoutException as exc:
                    results.append({"http": None, "timeout": True, "seconds": timeout, "error": repr(exc)})
                except httpx.HTTPError as exc:
                    results.append({"http": None, "seconds": time.perf_counter() - sent, "error": repr(exc)})
            return results

    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:
        started = time.perf_counter()
        questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(count)]
        burst = asyncio.gather(*(one(client, q) for q in questions))
        probed = await asyncio.to_thread(probe_when_full)
        results = await burst
        return list(results), probed, time.perf_counter() - started


def per_minute(records: list[dict], sampler: RssSampler, minutes: float) -> list[dict]:
    rows = []
    for minute in range(1, int(-(-minutes // 1)) + 1):
        inside = [r for r in records if minute - 1 <= r["t"] / 60 < minute]
        latencies = [r["seconds"] for r in inside if r["error"] is None]
        rows.append(
            {
                "minute": minute,
                "requests": len(inside),
                "errors": sum(1 for r in inside if r["error"] is not None),
                "p50": percentile(latencies, 0.50) if latencies else None,
                "p95": percentile(latencies, 0.95) if latencies else None,
                "rss_mb": sampler.at(min(minute, minutes) * 60) / 2**20 if sampler.samples else None,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the soak phase")
    parser.add_argument("--concurrency", type=int, default=8, help="clients in the soak phase")
    parser.add_argument("--sample-seconds", type=float, default=5.0, help="RSS sampling interval")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request (soak)")
    parser.add_argument(
        "--overload-requests",
        type=int,
        help="requests at once in the overload phase (default: 2 x (max_concurrency + max_queue))",
    )
    parser.add_argument("--overload-timeout", type=float, default=120.0, help="seconds per overload request")
    parser.add_argument("--probes", type=int, default=5, help="requests timed alone while the queue is full")
    parser.add_argument("--max-concurrency", type=int, help="passed to pgmr serve")
    parser.add_argument("--max-queue", type=int, help="passed to pgmr serve")
    parser.add_argument("--deadline", type=float, help="passed to pgmr serve")
    add_server_arguments(parser)
    args = parser.parse_args()
    if not 0 < args.minutes <= 24 * 60:
        raise SystemExit("--minutes must be more than 0 and at most 1440")
    if not 1 <= args.concurrency <= 256:
        raise SystemExit("--concurrency must be between 1 and 256")

    with running_service(args, "serve-soak") as service:
        url, server, health, log = service.url, service.server, service.health, service.log
        assert server is not None  # started here: its memory is what the soak measures
        console.print(f"service ready: {health}")
        load = health.get("load") or {}
        admitted = int(load.get("max_concurrency", 16)) + int(load.get("max_queue", 256))
        overload_count = args.overload_requests or 2 * admitted
        sampler = RssSampler(server.pid, args.sample_seconds)
        started = time.perf_counter()
        sampler.start(started)
        console.print(f"soak: {args.concurrency} clients for {args.minutes:g} min")
        records, soak_wall = asyncio.run(soak(url, args.minutes * 60, args.concurrency, args.timeout))
        sampler.stop()
        console.print(f"overload: {overload_count} requests at once (the service admits {admitted})")
        burst, probes, burst_wall = asyncio.run(
            overload(url, overload_count, args.overload_timeout, args.probes)
        )
        after = httpx.post(f"{url}/ask", json={"question": QUESTIONS[0]}, timeout=args.timeout)
        final_health = httpx.get(f"{url}/health", timeout=10).json()

    soak_seconds = args.minutes * 60
    baseline_minute = 2.0 if args.minutes >= 4 else args.minutes / 2
    rss_base = sampler.at(baseline_minute * 60)
    rss_end = sampler.at(soak_seconds)
    growth = (rss_end - rss_base) / rss_base
    errors = [r for r in records if r["error"] is not None]
    latencies = [r["seconds"] for r in records if r["error"] is None]
    minutes = per_minute(records, sampler, args.minutes)

    codes = Counter(r["http"] for r in burst)
    refused = [r for r in burst if r["http"] == 503]
    refused_with_retry = [r for r in refused if (r.get("retry_after") or "").isdigit()]
    timeouts = [r for r in burst + probes if r.get("timeout")]
    transport = [r for r in burst + probes if r["http"] is None and not r.get("timeout")]
    probes_refused = [r for r in probes if r["http"] == 503 and (r.get("retry_after") or "").isdigit()]
    summary = {
        "minutes": args.minutes,
        "concurrency": args.concurrency,
        "soak": {
            "requests": len(records),
            "errors": len(errors),
            "error_examples": [r["error"] for r in errors[:5]],
            "by_endpoint": dict(Counter(r["path"] for r in records)),
            "latency_seconds": {
                "p50": percentile(latencies, 0.50) if latencies else None,
                "p95": percentile(latencies, 0.95) if latencies else None,
                "max": max(latencies) if latencies else None,
            },
            "throughput_rps": len(records) / soak_wall,
            "per_minute": minutes,
        },
        "rss": {
            "baseline_minute": baseline_minute,
            "baseline_mb": rss_base / 2**20,
            "end_mb": rss_end / 2**20,
            "growth_percent": 100 * growth,
            "samples": [(round(t, 1), round(b / 2**20, 1)) for t, b in sampler.samples],
        },
        "overload": {
            "requests": len(burst),
            "admitted_by_service": admitted,
            "status_counts": {str(k): v for k, v in codes.items()},
            "refused_503": len(refused),
            "refused_503_with_retry_after": len(refused_with_retry),
            "refusal_seconds_max": max((r["seconds"] for r in refused), default=None),
            "refusal_seconds_p95": percentile([r["seconds"] for r in refused], 0.95) if refused else None,
            "probes": len(probes),
            "probes_refused_503_with_retry_after": len(probes_refused),
            "probe_seconds_max": max((r["seconds"] for r in probes), default=None),
            "health_seconds_when_full": probes[0]["health_seconds"] if probes else None,
            "timeouts": len(timeouts),
            "transport_errors": len(transport),
            "wall_seconds": burst_wall,
        },
        "recovery_status": after.status_code,
        "service": health,
        "final_load": final_health.get("load"),
        "server_log": str(log),
        "cpus": os.cpu_count(),
    }

    table = Table(title=f"pgmr serve soak: {args.concurrency} clients, {args.minutes:g} min")
    for column in ("minute", "requests", "errors", "p50", "p95", "RSS"):
        table.add_column(column, justify="right")
    for row in minutes:
        table.add_row(
            str(row["minute"]),
            str(row["requests"]),
            f"[{'green' if not row['errors'] else 'red'}]{row['errors']}[/]",
            f"{row['p50']:.2f} s" if row["p50"] is not None else "-",
            f"{row['p95']:.2f} s" if row["p95"] is not None else "-",
            f"{row['rss_mb']:.0f} MB" if row["rss_mb"] is not None else "-",
        )
    console.print(table)
    verdict = Table(title="soak and overload")
    verdict.add_column("measure")
    verdict.add_column("value", justify="right")
    ok = "green"
    verdict.add_row("soak requests", str(len(records)))
    verdict.add_row("soak errors (expected 0)", f"[{ok if not errors else 'red'}]{len(errors)}[/]")
    verdict.add_row(
        "soak latency p50 / p95",
        f"{summary['soak']['latency_seconds']['p50'] or 0:.2f} / "
        f"{summary['soak']['latency_seconds']['p95'] or 0:.2f} s",
    )
    verdict.add_row(
        f"RSS minute {baseline_minute:g} -> end",
        f"{rss_base / 2**20:.0f} -> {rss_end / 2**20:.0f} MB "
        f"[{ok if growth < 0.10 else 'red'}]({100 * growth:+.1f}%)[/]",
    )
    verdict.add_row("overload requests (admitted)", f"{len(burst)} ({admitted})")
    verdict.add_row(
        "overload 200 / 503 / 504", f"{codes.get(200, 0)} / {codes.get(503, 0)} / {codes.get(504, 0)}"
    )
    verdict.add_row(
        "503 with Retry-After",
        f"[{ok if refused and len(refused_with_retry) == len(refused) else 'red'}]"
        f"{len(refused_with_retry)}[/]",
    )
    if refused:
        verdict.add_row(
            "burst 503 latency (max, client included)", f"{summary['overload']['refusal_seconds_max']:.2f} s"
        )
    verdict.add_row(
        "probes at a full queue: 503 + Retry-After",
        f"[{ok if probes and len(probes_refused) == len(probes) else 'red'}]{len(probes_refused)}/{len(probes)}[/]",
    )
    if probes:
        verdict.add_row(
            "probe 503 latency (max)", f"{1000 * summary['overload']['probe_seconds_max']:.0f} ms"
        )
        verdict.add_row(
            "/health latency when full", f"{1000 * summary['overload']['health_seconds_when_full']:.0f} ms"
        )
    verdict.add_row("overload timeouts (expected 0)", f"[{ok if not timeouts else 'red'}]{len(timeouts)}[/]")
    verdict.add_row("overload transport errors", str(len(transport)))
    verdict.add_row("recovery /ask", str(after.status_code))
    console.print(verdict)
    write_result("serve_soak", summary)
    failed_probes = not probes or len(probes_refused) != len(probes)
    if (
        errors
        or growth >= 0.10
        or timeouts
        or transport
        or not refused
        or failed_probes
        or after.status_code != 200
    ):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
