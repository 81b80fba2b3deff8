"""Questions that arrive while the model is busy are generated and resolved together (`pgmr serve`)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from pgmr.pipeline.stages import Prepared


class PipelineError(RuntimeError):
    """A pipeline that cannot be built (missing model, memory or store); the message says what to do."""


class Batcher:
    """One worker thread runs the model stage for whatever questions are waiting, `max_batch` at a time.

    Under load the queue fills while a batch runs, so the next batch is larger and no time is spent waiting
    for one to fill; a lone question is run at once.
    """

    def __init__(self, run: Callable[[list[str]], list[Prepared]], max_batch: int) -> None:
        self._run = run
        self._max = max_batch
        self._queue: queue.SimpleQueue[tuple[str, float, Future[Prepared]] | None] = queue.SimpleQueue()
        self._closed = False
        self.batches = 0  # how many batches ran, and the largest: the service's /health reports them
        self.largest = 0
        self._thread = threading.Thread(target=self._loop, name="pgmr-model", daemon=True)
        self._thread.start()

    def submit(self, question: str) -> Future[Prepared]:
        if self._closed:
            raise PipelineError("the pipeline is closed")
        future: Future[Prepared] = Future()
        self._queue.put((question, time.perf_counter(), future))
        return future

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            while len(batch) < self._max:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(more)
            self.batches += 1
            self.largest = max(self.largest, len(batch))
            started = time.perf_counter()
            try:
                done = self._run([question for question, _, _ in batch])
            except BaseException as exc:  # handed to every waiting caller, who re-raises it
                for _, _, future in batch:
                    future.set_exception(exc)
                continue
            for (_, queued, future), prepared in zip(batch, done, strict=True):
                prepared.timer.stages.insert(0, ("wait", started - queued))
                future.set_result(prepared)

    def close(self) -> None:
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout=60)
        while True:  # callers still waiting (submitted after the stop marker) get an error, not a hang
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item[2].set_exception(PipelineError("the pipeline is closed"))


__all__ = ["Batcher", "PipelineError"]
