"""The dynamic micro-batcher: sentences from many requests, grouped into batches for one worker.

It knows no HTTP and no torch. The engine is a plain function `fn(key, payloads) -> results`
run on one dedicated worker thread, so the event loop never blocks. Sentences with different
`key`s (model and decoding options) never share a batch.

A batch closes when it holds `max_batch_size` sentences, or when adding the next one would pass
`max_batch_tokens` padded tokens (longest cost x count), or `max_wait_ms` after its first
sentence arrived or the worker became free (whichever is later), or as soon as as many
sentences wait as the previous batch held. The wait only happens while traffic is concurrent
(the previous batch held more than one sentence): a lone client is never delayed. Under load,
the clients of a batch get their answers together and come back together, spread over the
time the server takes to read them; waiting for as many as just left keeps them in one full
batch (starting with the first few would split the load into two half-full batches for good),
and a few steady clients are not kept waiting for anyone else. Within a batch, sentences are
sorted by cost to reduce padding; results go back to each sentence's future, so callers get
them per request and in order.

Backpressure: at most `max_queue_size` sentences wait; `submit` beyond that raises QueueFull at
once. `cancel` removes a request's waiting sentences (deadline passed, client gone) so they are
never computed. An exception in `fn` fails only that batch's sentences, with an error id that is
also logged. `stop` refuses new work, finishes what was accepted within a timeout, then ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("app.batcher")


class QueueFull(Exception):
    """The queue cannot take this many more sentences now."""


class ShuttingDown(Exception):
    """The batcher is draining and accepts no new work."""


class BatchFailed(Exception):
    """The batch holding this sentence raised; `error_id` is in the log with the traceback."""

    def __init__(self, error_id: str):
        super().__init__(f"batch failed (error id {error_id})")
        self.error_id = error_id


class DeadlineExceeded(Exception):
    """The request's deadline passed; `dropped` waiting sentences were removed uncomputed."""

    def __init__(self, dropped: int):
        super().__init__(f"deadline exceeded; {dropped} waiting sentence(s) dropped")
        self.dropped = dropped


@dataclass(eq=False)
class _Item:
    key: Hashable
    payload: Any
    cost: int
    future: asyncio.Future
    enqueued: float
    queued: bool = True
    batch: int = -1  # number of the batch that computed it
    compute_s: float = 0.0  # that batch's time in the engine function, on the worker


@dataclass(eq=False)
class Ticket:
    """A submitted request: its sentences, in order."""

    items: list[_Item] = field(default_factory=list)

    @property
    def compute_s(self) -> float:
        """Engine time of the batches that computed this request's sentences (they may have
        shared them with other requests)."""
        return sum({item.batch: item.compute_s for item in self.items if item.batch >= 0}.values())


@dataclass
class BatchReport:
    """What a finished batch looked like (for metrics)."""

    key: Hashable
    size: int
    padded_tokens: int
    compute_s: float
    queue_waits_s: list[float]
    failed: bool


class MicroBatcher:
    def __init__(
        self,
        fn: Callable[[Hashable, list[Any]], Sequence[Any]],
        *,
        max_batch_size: int = 32,
        max_batch_tokens: int = 4096,
        max_wait_ms: float = 20.0,
        max_queue_size: int = 1024,
        on_batch: Callable[[BatchReport], None] | None = None,
        on_depth: Callable[[int], None] | None = None,
        executor: ThreadPoolExecutor | None = None,
    ):
        """`executor`: the single-thread executor to run `fn` on (the batcher shuts it down on
        stop); by default the batcher starts its own worker thread."""
        if executor is not None and executor._max_workers != 1:
            raise ValueError("the batcher's executor must have exactly one worker thread")
        self.fn = fn
        self.max_batch_size, self.max_batch_tokens = max_batch_size, max_batch_tokens
        self.max_wait_s, self.max_queue_size = max_wait_ms / 1000.0, max_queue_size
        self.on_batch, self.on_depth = on_batch, on_depth
        self._queues: dict[Hashable, deque[_Item]] = {}
        self._depth = 0
        self._closing = False
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = executor
        self._running: list[_Item] = []  # the batch on the worker now
        self._last_batch_size = 0
        self._free_since = 0.0  # when the worker finished its last batch
        self._batches = 0  # batches started so far

    @property
    def depth(self) -> int:
        """Sentences waiting (not counting the batch being computed)."""
        return self._depth

    def _set_depth(self, delta: int) -> None:
        self._depth += delta
        if self.on_depth:
            self.on_depth(self._depth)

    async def start(self) -> None:
        self._wakeup = asyncio.Event()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mt-worker")
        self._task = asyncio.create_task(self._run(), name="micro-batcher")

    def submit(self, key: Hashable, payloads: Sequence[Any], costs: Sequence[int]) -> Ticket:
        """Queue one request's sentences; raises QueueFull or ShuttingDown at once."""
        if self._closing or self._task is None:
            raise ShuttingDown("the server is shutting down")
        if self._depth + len(payloads) > self.max_queue_size:
            raise QueueFull(f"{self._depth} sentences are waiting (limit {self.max_queue_size})")
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        queue = self._queues.setdefault(key, deque())
        ticket = Ticket()
        for payload, cost in zip(payloads, costs, strict=True):
            item = _Item(key, payload, max(int(cost), 1), loop.create_future(), now)
            queue.append(item)
            ticket.items.append(item)
        self._set_depth(len(payloads))
        assert self._wakeup is not None
        self._wakeup.set()
        return ticket

    async def wait(self, ticket: Ticket, timeout: float | None = None) -> list[Any]:
        """Results of a ticket in submission order; on timeout its waiting work is dropped."""
        gathered = asyncio.gather(*(item.future for item in ticket.items))
        try:
            return await asyncio.wait_for(gathered, timeout)
        except TimeoutError:
            raise DeadlineExceeded(self.cancel(ticket)) from None
        except asyncio.CancelledError:
            self.cancel(ticket)
            raise

    def cancel(self, ticket: Ticket) -> int:
        """Remove the ticket's sentences that are still waiting; returns how many."""
        removed = 0
        for item in ticket.items:
            if item.queued:
                queue = self._queues.get(item.key)
                if queue is not None:
                    queue.remove(item)
                    if not queue:
                        del self._queues[item.key]
                item.queued = False
                removed += 1
            if not item.future.done():
                item.future.cancel()
        if removed:
            self._set_depth(-removed)
        return removed

    def _full(self, queue: deque[_Item]) -> bool:
        if len(queue) >= self.max_batch_size:
            return True
        widest = max(item.cost for item in queue)
        return widest * (len(queue) + 1) > self.max_batch_tokens

    def _take(self, key: Hashable) -> list[_Item]:
        queue = self._queues[key]
        batch: list[_Item] = []
        widest = 0
        while queue and len(batch) < self.max_batch_size:
            w = max(widest, queue[0].cost)
            if batch and w * (len(batch) + 1) > self.max_batch_tokens:
                break
            item = queue.popleft()
            item.queued = False
            batch.append(item)
            widest = w
        if not queue:
            del self._queues[key]
        self._set_depth(-len(batch))
        return batch

    async def _run(self) -> None:
        assert self._wakeup is not None
        while True:
            if not self._queues:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            key = min(self._queues, key=lambda k: self._queues[k][0].enqueued)
            wait = self.max_wait_s if self._last_batch_size > 1 else 0.0
            # The wait counts from when the worker became free, and ends early once as many
            # sentences wait as the last batch answered: those clients tend to come back
            # together, and a batch that starts with only the first of them splits the load
            # into two half-full batches for good.
            deadline = max(self._queues[key][0].enqueued, self._free_since) + wait
            expected = self._last_batch_size
            while not self._closing and key in self._queues and not self._full(self._queues[key]):
                if len(self._queues[key]) >= expected:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), remaining)
                except TimeoutError:
                    break
            if key in self._queues:
                await self._execute(key, self._take(key))

    async def _execute(self, key: Hashable, batch: list[_Item]) -> None:
        batch.sort(key=lambda item: item.cost)
        start = time.monotonic()
        waits = [start - item.enqueued for item in batch]
        loop = asyncio.get_running_loop()
        failed = False
        self._running, self._last_batch_size = batch, len(batch)
        self._batches += 1
        compute_s = 0.0
        try:
            results, compute_s = await loop.run_in_executor(
                self._executor, self._timed, key, [i.payload for i in batch]
            )
            for item in batch:
                item.batch, item.compute_s = self._batches, compute_s
            if len(results) != len(batch):
                raise RuntimeError(
                    f"engine returned {len(results)} results for {len(batch)} inputs"
                )
        except Exception as exc:
            failed = True
            error_id = uuid.uuid4().hex[:12]
            log.error(
                "batch of %d sentence(s) failed, error id %s", len(batch), error_id, exc_info=exc
            )
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(BatchFailed(error_id))
        else:
            for item, result in zip(batch, results, strict=True):
                if not item.future.done():
                    item.future.set_result(result)
        finally:
            self._running = []
            self._free_since = time.monotonic()
        if self.on_batch:
            padded = max(item.cost for item in batch) * len(batch)
            elapsed = compute_s or time.monotonic() - start  # a failed batch: its whole time
            self.on_batch(BatchReport(key, len(batch), padded, elapsed, waits, failed))

    def _timed(self, key: Hashable, payloads: list[Any]) -> tuple[Sequence[Any], float]:
        """Runs on the worker: the engine's own time, without the hand-offs between threads."""
        started = time.perf_counter()
        results = self.fn(key, payloads)
        return results, time.perf_counter() - started

    async def stop(self, timeout: float) -> int:
        """Refuse new work, finish what was accepted within `timeout` s; returns sentences dropped."""
        self._closing = True
        dropped = 0
        if self._task is not None:
            assert self._wakeup is not None
            self._wakeup.set()
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            except TimeoutError:
                waiting = [item for queue in self._queues.values() for item in queue]
                for item in waiting + self._running:
                    item.queued = False
                    if not item.future.done():
                        item.future.set_exception(ShuttingDown("shutdown timeout passed"))
                dropped = len(waiting)
                self._queues.clear()
                self._set_depth(-self._depth)
                self._task.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        return dropped
