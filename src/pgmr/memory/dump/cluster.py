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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


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
