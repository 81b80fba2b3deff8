"""The Dask cluster a dump build runs on: a local one by default, or any running scheduler by address.

Dask distributed, not Ray: the build's work is plain Python functions over bytes (parse a chunk, encode a shard),
which `Client.submit` runs anywhere with no actor or object-store model to set up; a local cluster starts in
about a second on two cores, its workers are ordinary processes (so encoding and JSON parsing run in parallel
despite the GIL), and the same code reaches a multi-node cluster started with `dask scheduler` / `dask worker`
(or dask-jobqueue, dask-kubernetes) by passing the scheduler's address.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from pgmr.memory.errors import PgmrMemoryError

Unit = TypeVar("Unit")


@dataclass(frozen=True)
class ClusterSettings:
    """`scheduler` None starts a local cluster of `workers` processes; an address joins a running cluster."""

    scheduler: str | None = None
    workers: int = 0  # 0: one per core
    threads_per_worker: int = 1

    def __post_init__(self) -> None:
        if self.workers < 0:
            raise ValueError("workers must be 0 (one per core) or positive")
        if self.threads_per_worker < 1:
            raise ValueError("threads_per_worker must be positive")

    @property
    def local_workers(self) -> int:
        return self.workers or max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def dask_client(settings: ClusterSettings) -> Iterator[Any]:
    """A connected `distributed.Client`, closed (and a local cluster shut down) on exit."""
    from distributed import Client, LocalCluster

    if settings.scheduler:
        client = Client(settings.scheduler, timeout="30s")
        try:
            yield client
        finally:
            client.close()
        return
    cluster = LocalCluster(
        n_workers=settings.local_workers,
        threads_per_worker=settings.threads_per_worker,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.ERROR,
        # Workers hold a chunk or a shard at a time; the driver bounds how many are in flight.
        memory_limit=0,
    )
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def worker_count(client: Any) -> int:
    return max(1, sum(info.get("nthreads", 1) for info in client.scheduler_info()["workers"].values()))


def run_bounded(
    client: Any,
    units: Iterable[Unit],
    submit: Callable[[Unit], Any | None],
    finish: Callable[[Unit, Any], None],
    name: Callable[[Unit], str],
) -> None:
    """Each unit's task submitted as the unit comes (`submit` returns its future, or None for a unit that
    needs no worker: it is finished at once with None), at most two tasks per worker in flight, so that the
    units waiting hold bounded memory; `finish(unit, result)` as tasks complete. A failed task is a
    PgmrMemoryError naming its unit (`name`); the tasks still in flight are then cancelled."""
    from distributed import wait

    limit = 2 * worker_count(client)
    in_flight: dict[Any, Unit] = {}

    def collect(futures: Iterable[Any]) -> None:
        for future in futures:
            unit = in_flight.pop(future)
            try:
                result = future.result()
            except Exception as exc:
                raise PgmrMemoryError(f"{name(unit)} failed: {exc}") from exc
            finish(unit, result)

    try:
        for unit in units:
            while len(in_flight) >= limit:
                collect(wait(list(in_flight), return_when="FIRST_COMPLETED")[0])
            future = submit(unit)
            if future is None:
                finish(unit, None)
            else:
                in_flight[future] = unit
        while in_flight:
            collect(wait(list(in_flight), return_when="FIRST_COMPLETED")[0])
    finally:
        for future in in_flight:
            future.cancel()
