"""Backpressure for the service: a bounded number of requests at work, a bounded wait queue, a deadline.

The pipeline's work (generation, resolution, store queries) is slow and CPU bound, so an unbounded server
would accept every request, queue it invisibly (threads waiting on the pipeline's lock) and answer each one
later and later until clients time out. Instead:

- at most `max_concurrency` requests run at once, each in a worker thread of the limiter's own pool (so the
  ASGI server's thread pool and event loop stay free for /health and for rejecting requests);
- at most `max_queue` more wait for a free worker, first come first served;
- a request that finds the queue full is refused at once (`Overloaded`: HTTP 503 with Retry-After);
- a request not answered within `deadline` seconds of its arrival, queue time included, gets
  `DeadlineExceeded` (HTTP 504) on time. Python cannot stop a running thread: the work finishes in the
  background and keeps its worker until then, so abandoned work still counts against `max_concurrency` and
  cannot pile up behind the client's back.

All the limiter's counters are touched on the event loop thread only (workers hand their slot back through
`call_soon_threadsafe`), so they need no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

T = TypeVar("T")

# The pipeline generates up to 16 waiting questions in one batch (PipelineConfig.max_batch): 16 requests at
# work keep those batches full; more would only wait inside the pipeline, where no bound or deadline applies.
DEFAULT_MAX_CONCURRENCY = 16
# Room for a burst as large as bench/serve_load.py's 200 concurrent questions (about 12 s of work on 2 cores).
DEFAULT_MAX_QUEUE = 256
DEFAULT_DEADLINE = 60.0
MAX_RETRY_AFTER = 60


@dataclass(frozen=True)
class ServiceLimits:
    """The service's bounds; validated here, once, where they are built (the `pgmr serve` options)."""

    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    max_queue: int = DEFAULT_MAX_QUEUE
    deadline: float = DEFAULT_DEADLINE

    def __post_init__(self) -> None:
        if isinstance(self.max_concurrency, bool) or not 1 <= self.max_concurrency <= 256:
            raise ValueError(f"max_concurrency must be between 1 and 256, got {self.max_concurrency}")
        if isinstance(self.max_queue, bool) or not 0 <= self.max_queue <= 100_000:
            raise ValueError(f"max_queue must be between 0 and 100000, got {self.max_queue}")
        if not (isinstance(self.deadline, int | float) and 0 < self.deadline <= 3600):
            raise ValueError(f"deadline must be more than 0 and at most 3600 seconds, got {self.deadline}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Overloaded(Exception):
    """Every worker is busy and the queue is full; `retry_after` is a whole number of seconds (1-60)."""

    def __init__(self, retry_after: int, limits: ServiceLimits) -> None:
        self.retry_after = retry_after
        super().__init__(
            f"the service is at capacity ({limits.max_concurrency} requests at work, {limits.max_queue} "
            f"waiting); retry in {retry_after} s"
        )


class DeadlineExceeded(Exception):
    """The request was not answered within the deadline (it may still finish in the background)."""

    def __init__(self, deadline: float, queued: bool) -> None:
        self.deadline = deadline
        where = "waiting for a worker" if queued else "at work"
        super().__init__(f"no answer within the {deadline:g} s deadline (the request was {where})")


class Limiter:
    """Runs blocking functions under `ServiceLimits` (see the module docstring); one per app, one event loop."""

    def __init__(self, limits: ServiceLimits) -> None:
        self.limits = limits
        self._executor: ThreadPoolExecutor | None = None
        self._active = 0  # slots held: running work, including work whose client already got its 504
        self._waiters: deque[asyncio.Future[None]] = deque()
        # Seconds one piece of work takes (moving average): the Retry-After estimate.
        self._work_seconds = 1.0
        self.completed = 0
        self.rejected = 0
        self.deadline_exceeded = 0
        self._closing = threading.Event()

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._closing.clear()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.limits.max_concurrency, thread_name_prefix="pgmr-work")

    def close(self) -> None:
        """Wait for running work (bounded by the store timeout and generation), drop what never started."""
        self._closing.set()
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    # -- state -------------------------------------------------------------------------------------------------

    @property
    def in_progress(self) -> int:
        return self._active

    @property
    def queued(self) -> int:
        return sum(1 for w in self._waiters if not w.done())

    def snapshot(self) -> dict[str, int]:
        return {
            "in_progress": self.in_progress,
            "queued": self.queued,
            "max_concurrency": self.limits.max_concurrency,
            "max_queue": self.limits.max_queue,
            "completed": self.completed,
            "rejected": self.rejected,
            "deadline_exceeded": self.deadline_exceeded,
        }

    def retry_after(self) -> int:
        """Seconds until a slot is likely free: the queue ahead drained at `max_concurrency` per work time."""
        rounds = self.queued / self.limits.max_concurrency + 1
        return max(1, min(MAX_RETRY_AFTER, math.ceil(self._work_seconds * rounds)))

    # -- running work ------------------------------------------------------------------------------------------

    async def run(self, func: Callable[..., T], *args: Any) -> T:
        """`func(*args)` in a worker thread, within the limits; raises Overloaded or DeadlineExceeded."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.deadline
        await self._acquire(loop, deadline)
        if self._executor is None and not self._closing.is_set():
            self.start()  # an app driven without its lifespan (e.g. a test client): start on first use
        executor = self._executor
        if executor is None or self._closing.is_set():
            self._release()
            raise RuntimeError("the service is shutting down")
        started = time.perf_counter()
        try:
            work = executor.submit(func, *args)
        except RuntimeError:  # the executor shut down between the check and here
            self._release()
            raise
        # The slot goes back when the thread is really done, not when the client stops waiting for it.
        work.add_done_callback(lambda _: self._release_from_thread(loop, started))
        try:
            async with asyncio.timeout_at(deadline):
                # shield: a timeout (or a client gone away) must not cancel the wrapper, whose callbacks
                # are the only way the result (or exception) is collected.
                return await asyncio.shield(asyncio.wrap_future(work, loop=loop))
        except TimeoutError:
            self.deadline_exceeded += 1
            raise DeadlineExceeded(self.limits.deadline, queued=False) from None

    async def _acquire(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self._active < self.limits.max_concurrency and not self.queued:
            self._active += 1
            return
        if self.queued >= self.limits.max_queue:
            self.rejected += 1
            raise Overloaded(self.retry_after(), self.limits)
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except TimeoutError:
            self.deadline_exceeded += 1
            self._forget(waiter)
            raise DeadlineExceeded(self.limits.deadline, queued=True) from None
        except BaseException:  # cancelled (shutdown): give the slot on, if it had been handed over already
            self._forget(waiter)
            raise

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        """A waiter that leaves: out of the queue, and if a slot had just been handed to it, pass it on."""
        if waiter.done() and not waiter.cancelled():
            self._release()
        else:
            waiter.cancel()
        with contextlib.suppress(ValueError):  # already handed a slot and popped by _release
            self._waiters.remove(waiter)

    def _release_from_thread(self, loop: asyncio.AbstractEventLoop, started: float) -> None:
        seconds = time.perf_counter() - started
        # RuntimeError: the loop is closed (shutdown), and nobody is left to hand the slot to.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._finished, seconds)

    def _finished(self, seconds: float) -> None:
        self.completed += 1
        self._work_seconds = 0.8 * self._work_seconds + 0.2 * seconds
        self._release()

    def _release(self) -> None:
        """Hand the slot to the first waiter still waiting, or free it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot moves to it: _active is unchanged
                return
        self._active -= 1


__all__ = [
    "DEFAULT_DEADLINE",
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_MAX_QUEUE",
    "DeadlineExceeded",
    "Limiter",
    "Overloaded",
    "ServiceLimits",
]
