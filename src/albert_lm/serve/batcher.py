"""Dynamic micro-batching: inputs of concurrent requests share one model call.

Each request puts its inputs in one queue and awaits a future per input. One worker task takes the
queue's inputs in arrival order: as soon as there is one, it waits up to ``max_wait_s`` for more, stops
early at ``max_batch``, and runs the batch function in a worker thread (the event loop keeps accepting
requests meanwhile). A request's inputs may span several batches; its results come back in its order.
Also after a batch: the requests it answered come back within that wait and join the next batch (taking
the queue at once instead halved the batches at 32 clients in benchmarks/bench_serve.py: the answered
clients formed a batch of their own).

A batch whose function raises is retried input by input, so one bad input fails only its own request.
`MicroBatcher.close` stops taking new inputs and finishes every queued one (graceful shutdown);
`MicroBatcher.expire_after` bounds that: inputs not started by the deadline fail with `BatcherClosed`
(their requests get a clear 503 instead of being computed after the server stopped listening). Inputs of
a request that went away (client gone, task cancelled) are dropped, not computed.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class BatcherClosed(RuntimeError):
    """Inputs submitted after `MicroBatcher.close`."""


class MicroBatcher(Generic[T, R]):
    """Groups inputs of concurrent `submit` calls into batches for ``fn`` (see the module docstring).

    Args:
        fn: a batch of inputs -> one result per input, in order; runs in a worker thread, one batch at a time.
        max_batch: most inputs per call.
        max_wait_s: how long the first input of a batch waits for others.
        executor: the one-thread executor ``fn`` runs in (the thread that loaded the model: see
            `albert_lm.serve.app.model_thread`); `close` shuts it down. None: a new one.
    """

    def __init__(
        self,
        fn: Callable[[list[T]], Sequence[R]],
        max_batch: int = 32,
        max_wait_s: float = 0.005,
        executor: concurrent.futures.ThreadPoolExecutor | None = None,
    ):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        self.fn = fn
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._queue: collections.deque[tuple[T, asyncio.Future[R]]] = collections.deque()
        self._arrived = asyncio.Event()
        self._closing = False
        self._pending = 0
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="albert-batch"
        )
        self._worker: asyncio.Task[None] | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self.batches = 0
        """Batch function calls so far."""
        self.inputs = 0
        """Inputs of those calls (``inputs / batches``: the mean batch size)."""

    @property
    def pending(self) -> int:
        """Inputs submitted and not answered yet (queued or in the running batch)."""
        return self._pending

    def start(self) -> None:
        """Start the worker task (call inside the running event loop)."""
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="albert-batcher")

    async def submit(self, items: Sequence[T]) -> list[R]:
        """Results of ``items``, in order; raises the first input's exception if any failed."""
        if self._closing:
            raise BatcherClosed("the server is shutting down")
        self.start()
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[R]] = [loop.create_future() for _ in items]
        self._queue.extend(zip(items, futures))
        self._pending += len(futures)
        self._arrived.set()
        # every input's outcome retrieved (else asyncio logs each further failure as never retrieved)
        results = await asyncio.gather(*futures, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return list(results)  # type: ignore[arg-type]  # no exceptions left: all R

    def expire_after(self, seconds: float) -> None:
        """Stop taking new inputs now, and in ``seconds`` fail every input still queued (the batch running
        then finishes). Call inside the event loop; a second call keeps the first deadline."""
        self._closing = True
        self._arrived.set()
        if self._expiry is None:
            self._expiry = asyncio.get_running_loop().call_later(seconds, self.expire, seconds)

    def expire(self, seconds: float = 0.0) -> None:
        """Fail every queued input with `BatcherClosed` now (see `expire_after`)."""
        self._closing = True
        reason = (
            f"the server is shutting down and this request was not computed within shutdown_timeout_s "
            f"({seconds:g} s); send it again to another server"
        )
        while self._queue:
            _, future = self._queue.popleft()
            self._resolve(future, error=BatcherClosed(reason))
        self._arrived.set()

    async def close(self) -> None:
        """Refuse new inputs, finish the queued ones, stop the worker and its thread."""
        self._closing = True
        self._arrived.set()
        if self._worker is not None:
            await self._worker
        self._executor.shutdown(wait=True)

    async def _run(self) -> None:
        while True:
            while not self._queue:
                if self._closing:
                    return
                self._arrived.clear()
                await self._arrived.wait()
            await self._gather()
            batch: list[tuple[T, asyncio.Future[R]]] = []
            while self._queue and len(batch) < self.max_batch:
                item = self._queue.popleft()
                if item[1].done():  # its request went away: nothing to compute it for
                    self._pending -= 1
                else:
                    batch.append(item)
            if batch:
                await self._process(batch)

    async def _gather(self) -> None:
        """Wait up to ``max_wait_s`` for the queue to fill to ``max_batch`` (or for `close`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_wait_s
        while len(self._queue) < self.max_batch and not self._closing:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                return

    async def _process(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        loop = asyncio.get_running_loop()
        self.batches += 1
        self.inputs += len(batch)
        try:
            results = list(await loop.run_in_executor(self._executor, self.fn, [item for item, _ in batch]))
            if len(results) != len(batch):
                raise RuntimeError(f"the batch function gave {len(results)} results for {len(batch)} inputs")
        except Exception as e:
            if len(batch) > 1:  # find the failing input(s): one by one
                for one in batch:
                    await self._process([one])
                return
            self._resolve(batch[0][1], error=e)
            return
        for (_, future), result in zip(batch, results):
            self._resolve(future, result)

    def _resolve(self, future: asyncio.Future[R], result: Any = None, error: Exception | None = None) -> None:
        self._pending -= 1
        if future.done():  # the request went away (its client disconnected)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
