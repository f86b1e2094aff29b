"""The dynamic micro-batcher: sentences from many requests, grouped into batches for one worker.

It knows no HTTP and no torch. The engine is a plain function `fn(key, payloads) -> results`
run on one dedicated worker thread, so the event loop never blocks. Sentences with different
`key`s (model and decoding options) never share a batch.

A batch closes when it holds `max_batch_size` sentences, or when adding the next one would pass
`max_batch_tokens` padded tokens (longest cost x count), or `max_wait_ms` after its first
sentence arrived or the worker became free (whichever is later), or as soon as as many
sentences wait as the previous batch held. The wait only happens while traffic is concurrent
(the previous batch held more than one sentence) and for a first sentence that came within
RETURN_S of the worker becoming free: a lone client is never delayed, nor the first request
after a burst has passed. Under load,
the clients of a batch get their answers together and come back together, spread over the
time the server takes to read them; waiting for as many as just left keeps them in one full
batch (starting with the first few would split the load into two half-full batches for good),
and a few steady clients are not kept waiting for anyone else. Within a batch, sentences are
sorted by cost to reduce padding.

The worker thread (`Worker`) takes batches from a queue and hands each one back with one call
into the event loop, which gives every sentence's result to its request's single future
(`Ticket`), so callers get them per request and in order; the batch's metrics are reported
after that, off the requests' path. While the worker computes a batch, a full batch waiting
(a backlog) is put on its queue at once, so the worker goes on to it without waiting for the
event loop, which is busy answering the batch that just ended; smaller batches wait for the
worker to be free, and may grow meanwhile.

Backpressure: at most `max_queue_size` sentences wait; `submit` beyond that raises QueueFull at
once. `cancel` removes a request's waiting sentences (deadline passed, client gone) so they are
never computed, including those of a batch on the worker's queue that it has not started. An
exception in `fn` fails only that batch's sentences, with an error id that is also logged.
Should the scheduler task itself end (a bug), every waiting sentence fails the same way and
`submit` refuses new work; `problem` says why (also when the worker thread has ended), for the
service's readiness check.
`stop` refuses new work, finishes what was accepted within a timeout, fails what is left, and
returns once the worker thread has ended (after the batch it may still be running).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Hashable, Sequence
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
    """The request's deadline passed; `dropped` of its sentences were removed unfinished
    (waiting ones, and with the continuous scheduler running ones too)."""

    def __init__(self, dropped: int):
        super().__init__(f"deadline exceeded; {dropped} unfinished sentence(s) dropped")
        self.dropped = dropped


@dataclass(eq=False)
class _Item:
    key: Hashable
    payload: Any
    cost: int
    ticket: Ticket
    index: int  # position in the ticket
    enqueued: float
    queued: bool = True  # waiting in its key's queue
    handed: _Done | None = None  # the batch it was handed to the worker in
    dropped: bool = False  # removed from that batch before the worker started it
    batch: int = -1  # number of the batch that computed it
    compute_s: float = 0.0  # that batch's time in the engine function, on the worker


@dataclass(eq=False)
class Ticket:
    """A submitted request: its sentences, in order, and one future for all their results (a
    list in order, or the first failure)."""

    future: asyncio.Future
    # its sentences: _Item here, continuous._Sentence in the continuous scheduler
    items: list[Any] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)
    pending: int = 0  # sentences without a result yet
    step_s: float = 0.0  # continuous scheduler: engine time of the joins and steps it was in
    left: int = 0  # continuous scheduler: sentences not finished yet (the worker's count)

    @property
    def compute_s(self) -> float:
        """Engine time of the batches (or decoder steps) that computed this request's
        sentences (they may have shared them with other requests)."""
        batches = {item.batch: item.compute_s for item in self.items if item.batch >= 0}
        return sum(batches.values()) + self.step_s

    def _deliver(self, index: int, result: Any) -> None:
        self.results[index] = result
        self.pending -= 1
        if self.pending == 0 and not self.future.done():
            self.future.set_result(self.results)

    def _fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


@dataclass(eq=False)
class _Done:
    """A batch handed to the worker, and what came of it. Until the worker starts it, the
    event loop may still drop sentences from it (`_Item.dropped`); `lock` makes starting and
    dropping exclusive, so a sentence is either dropped or computed, never both."""

    key: Hashable
    batch: list[_Item]
    number: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: bool = False
    waiting: bool = False  # handed while the worker was busy: its sentences count as waiting
    live: list[_Item] = field(default_factory=list)  # the sentences it computed
    waits: list[float] = field(default_factory=list)  # theirs, from arrival until the start
    results: Sequence[Any] = ()
    error: BaseException | None = None
    compute_s: float = 0.0


#: a first sentence that comes this long after the worker became free is no returning client
#: of the last batch (those come back within milliseconds of their answers): it is not kept
#: waiting for company
RETURN_S = 0.1


class Worker:
    """One thread that runs jobs one after another: every batch, and whatever must run on the
    same thread before them (the service loads its models there). A job is one put on a queue
    the thread blocks on. The thread is a daemon, so a process that never stopped its batcher
    still exits; but a process must not exit while a job runs (torch, torn down under a
    running computation, aborts the process): after `stop`, await `join`."""

    def __init__(self, name: str = "mt-worker"):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.busy_since: float | None = None  # when the job running began (time.monotonic)
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args = job
            self.busy_since = time.monotonic()
            try:
                fn(*args)
            finally:
                self.busy_since = None

    def beat(self) -> None:
        """(On the thread.) The job running made progress: a job that runs as long as there
        is work (the continuous scheduler's loop of decoder steps) calls it after each piece,
        so that `busy_for` is the time since the last piece, not the job's whole time (a busy
        server was taken for a hung one after MT_STALL_TIMEOUT_S of steady load)."""
        if self.busy_since is not None:
            self.busy_since = time.monotonic()

    def busy_for(self) -> float:
        """Seconds since the job running now began or last made progress (`beat`): a batch,
        a decoder step, a model's load; 0 when the thread waits for one."""
        since = self.busy_since
        return 0.0 if since is None else time.monotonic() - since

    def pending(self) -> bool:
        """Whether jobs wait for the thread."""
        return not self._jobs.empty()

    def put(self, fn: Callable[..., None], *args: Any) -> None:
        """Run fn(*args) on the thread after the jobs before it; nothing comes back."""
        self._jobs.put((fn, args))

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) on the thread, awaited: its result, or what it raised."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(result: Any, error: BaseException | None) -> None:
            if future.done():  # the awaiting task was cancelled
                return
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

        def job() -> None:
            outcome: tuple[Any, BaseException | None]
            try:
                outcome = (fn(*args), None)
            except BaseException as exc:
                outcome = (None, exc)
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(settle, *outcome)

        self.put(job)
        return await future

    def stop(self) -> None:
        """The thread ends after the jobs already put."""
        self._jobs.put(None)

    async def join(self) -> None:
        """Until the thread has ended (after `stop`), without blocking the event loop."""
        await asyncio.to_thread(self.thread.join)


@dataclass
class BatchReport:
    """What a finished batch looked like (for metrics)."""

    key: Hashable
    size: int
    padded_tokens: int
    compute_s: float
    queue_waits_s: list[float]
    failed: bool


class Tickets(abc.ABC):
    """What both schedulers (this one and app/continuous.py) do with a submitted request: wait
    for its results under a deadline, or cancel it. `_remove` drops the ticket's sentences
    that are not computed yet and says how many."""

    @abc.abstractmethod
    def _remove(self, ticket: Ticket) -> int: ...

    async def wait(self, ticket: Ticket, timeout: float | None = None) -> list[Any]:
        """Results of a ticket in submission order; on timeout its unfinished work is dropped
        (DeadlineExceeded), and so it is when the waiting task is cancelled. Raises
        asyncio.CancelledError when the ticket was cancelled (`cancel`)."""
        expiry = None
        if timeout is not None and not ticket.future.done():
            expiry = asyncio.get_running_loop().call_later(timeout, self._expire, ticket)
        try:
            return await ticket.future
        except asyncio.CancelledError:
            self._remove(ticket)  # the waiting task was cancelled (or the ticket was)
            raise
        finally:
            if expiry is not None:
                expiry.cancel()

    def _expire(self, ticket: Ticket) -> None:
        if not ticket.future.done():
            ticket._fail(DeadlineExceeded(self._remove(ticket)))

    def cancel(self, ticket: Ticket) -> int:
        """Drop the ticket's sentences not computed yet and cancel it; returns how many."""
        removed = self._remove(ticket)
        ticket.future.cancel()
        return removed


class MicroBatcher(Tickets):
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
        worker: Worker | None = None,
    ):
        """`worker`: the thread to run `fn` on (the batcher stops it on stop); by default the
        batcher starts its own."""
        self.fn = fn
        self.max_batch_size, self.max_batch_tokens = max_batch_size, max_batch_tokens
        self.max_wait_s, self.max_queue_size = max_wait_ms / 1000.0, max_queue_size
        self.on_batch, self.on_depth = on_batch, on_depth
        self._queues: dict[Hashable, deque[_Item]] = {}
        self._depth = 0
        self._closing = False
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._worker: Worker | None = worker
        # batches handed to the worker and not finished, oldest first: the one it runs, and
        # at most one more (a full batch, handed over while the worker was busy)
        self._handed: deque[_Done] = deque()
        self._last_batch_size = 0
        self._free_since = 0.0  # when the worker finished its last batch
        self._batches = 0  # batches started so far

    @property
    def depth(self) -> int:
        """Sentences waiting: in a queue, or in a batch handed to the worker while it was busy
        (until the batch before it finishes); not counting the batch being computed."""
        return self._depth

    def _set_depth(self, delta: int) -> None:
        self._depth += delta
        if self.on_depth:
            self.on_depth(self._depth)

    async def start(self) -> None:
        self._wakeup = asyncio.Event()
        if self._worker is None:
            self._worker = Worker()
        self._task = asyncio.create_task(self._run(), name="micro-batcher")
        self._task.add_done_callback(self._scheduler_ended)

    def problem(self) -> str | None:
        """Why no more batches can be computed (the scheduler task or the worker thread has
        ended while the batcher was not stopping), or None."""
        if self._closing or self._task is None:
            return None
        if self._task.done():
            error = None if self._task.cancelled() else self._task.exception()
            return "the batch scheduler stopped" + (
                f": {type(error).__name__}: {error}" if error else ""
            )
        if self._worker is not None and not self._worker.thread.is_alive():
            return "the inference worker thread stopped"
        return None

    def _scheduler_ended(self, task: asyncio.Task) -> None:
        """The scheduler task ended: expected after `stop`; otherwise every waiting sentence
        fails (a batch already handed to the worker still finishes)."""
        if self._closing:
            return
        waiting = [item for queue in self._queues.values() for item in queue]
        if task.cancelled():  # the event loop is ending (a forced quit): not a failure
            log.warning(
                "the event loop ended before the batcher stopped: %d waiting sentence(s) dropped",
                len(waiting),
            )
            for item in waiting:
                item.queued = False
                item.ticket._fail(ShuttingDown("the server stopped"))
            self._queues.clear()
            self._set_depth(-len(waiting))
            return
        error = task.exception()
        error_id = uuid.uuid4().hex[:12]
        log.error(
            "the batch scheduler stopped, error id %s; %d waiting sentence(s) fail",
            error_id,
            len(waiting),
            exc_info=error,
        )
        for item in waiting:
            item.queued = False
            item.ticket._fail(BatchFailed(error_id))
        self._queues.clear()
        self._set_depth(-len(waiting))

    def submit(
        self,
        key: Hashable,
        payloads: Sequence[Any],
        costs: Sequence[int],
        owner: Hashable | None = None,
    ) -> Ticket:
        """Queue one request's sentences; raises QueueFull or ShuttingDown at once. (`owner`:
        the continuous scheduler's; here each key's sentences go first come, first served.)"""
        if self._closing or self._task is None or self._task.done():
            raise ShuttingDown(self.problem() or "the server is shutting down")
        if self._depth + len(payloads) > self.max_queue_size:
            raise QueueFull(f"{self._depth} sentences are waiting (limit {self.max_queue_size})")
        ticket = Ticket(asyncio.get_running_loop().create_future())
        if not payloads:
            ticket.future.set_result([])
            return ticket
        now = time.monotonic()
        queue = self._queues.setdefault(key, deque())
        ticket.results, ticket.pending = [None] * len(payloads), len(payloads)
        for i, (payload, cost) in enumerate(zip(payloads, costs, strict=True)):
            item = _Item(key, payload, max(int(cost), 1), ticket, i, now)
            queue.append(item)
            ticket.items.append(item)
        self._set_depth(len(payloads))
        assert self._wakeup is not None
        self._wakeup.set()
        return ticket

    def _remove(self, ticket: Ticket) -> int:
        """Removes the ticket's sentences that are not computed yet nor being computed: waiting
        in a queue, or in a batch handed to the worker that it has not started. Returns how
        many."""
        removed = waiting = 0  # waiting: those counted in `depth`
        for item in ticket.items:
            if item.queued:
                queue = self._queues.get(item.key)
                if queue is not None:
                    queue.remove(item)
                    if not queue:
                        del self._queues[item.key]
                item.queued = False
                removed += 1
                waiting += 1
            elif item.handed is not None and not item.dropped:
                with item.handed.lock:
                    if not item.handed.started:
                        item.dropped = True
                        removed += 1
                        waiting += item.handed.waiting
        if waiting:
            self._set_depth(-waiting)
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
        return batch

    async def _idle(self) -> None:
        """Until something is submitted or the worker finishes a batch."""
        assert self._wakeup is not None
        self._wakeup.clear()
        await self._wakeup.wait()

    def _oldest(self, keys) -> Hashable:
        return min(keys, key=lambda k: self._queues[k][0].enqueued)

    async def _run(self) -> None:
        assert self._wakeup is not None
        while True:
            if not self._queues or len(self._handed) > 1:
                if self._closing and not self._queues and not self._handed:
                    return
                await self._idle()
                continue
            if self._handed:
                # The worker is busy. A full batch goes to it now, so that it starts at once
                # when the current one ends, without waiting for this loop (which may be busy
                # answering requests then); anything less waits, and may still grow. Only the
                # batch of the key that has waited longest goes ahead: a stream of full batches
                # of one key (model and options) would otherwise keep the worker busy for good,
                # and a request of other options never reach it.
                key = self._oldest(self._queues)
                if self._full(self._queues[key]):
                    self._hand(key, self._take(key))
                else:
                    await self._idle()
                continue
            key = self._oldest(self._queues)
            first = self._queues[key][0].enqueued
            # The wait is for the clients the last batch answered, and ends early once as many
            # sentences wait as it held: those clients tend to come back together, and a batch
            # that starts with only the first of them splits the load into two half-full
            # batches for good. It counts from when the worker became free or the first
            # sentence came, whichever is later. None for a sentence that came RETURN_S or
            # more after the worker became free (the burst has passed: a lone request after it
            # is not kept waiting), nor while another key has a full batch ready for the worker.
            concurrent = self._last_batch_size > 1 and first - self._free_since < RETURN_S
            ready = any(self._full(q) for k, q in self._queues.items() if k != key)
            wait = self.max_wait_s if concurrent and not ready else 0.0
            deadline = max(first, self._free_since) + wait
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
                self._hand(key, self._take(key))

    def _hand(self, key: Hashable, batch: list[_Item]) -> None:
        """Puts the batch on the worker's queue."""
        batch.sort(key=lambda item: item.cost)
        self._last_batch_size = len(batch)
        self._batches += 1
        done = _Done(key, batch, self._batches, waiting=bool(self._handed))
        for item in batch:
            item.handed = done
        if not done.waiting:  # the worker starts it now
            self._set_depth(-len(batch))
        self._handed.append(done)
        assert self._worker is not None
        self._worker.put(self._work, asyncio.get_running_loop(), done)

    def _work(self, loop: asyncio.AbstractEventLoop, done: _Done) -> None:
        """Runs on the worker thread: the engine on the batch's sentences not dropped by then,
        timed there (the hand-offs between the threads are not engine time), then one call
        back into the event loop."""
        with done.lock:
            done.started = True
            done.live = [item for item in done.batch if not item.dropped]
        now = time.monotonic()
        done.waits = [now - item.enqueued for item in done.live]
        started = time.perf_counter()
        try:
            if done.live:
                results = self.fn(done.key, [item.payload for item in done.live])
                if len(results) != len(done.live):
                    raise RuntimeError(
                        f"engine returned {len(results)} results for {len(done.live)} inputs"
                    )
                done.results = results
        except BaseException as exc:  # whatever the engine raised fails this batch only
            done.error = exc
        done.compute_s = time.perf_counter() - started
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(self._finish, done)

    def _finish(self, done: _Done) -> None:
        """On the event loop: the scheduler hears first that the worker has room (the next
        batch can go first), then every sentence's result, or the batch's failure, goes to its
        request."""
        assert self._handed[0] is done
        self._handed.popleft()
        if not self._handed:
            self._free_since = time.monotonic()
        elif self._handed[0].waiting:  # the worker has gone on to the batch handed next
            following = self._handed[0]
            following.waiting = False
            self._set_depth(-sum(not item.dropped for item in following.batch))
        assert self._wakeup is not None
        if self._queues or self._closing:  # else the scheduler has nothing to do: let it sleep
            self._wakeup.set()
        if not done.live:  # every sentence was dropped before the worker started it
            return
        if done.error is None:
            for item, result in zip(done.live, done.results, strict=True):
                item.batch, item.compute_s = done.number, done.compute_s
                item.ticket._deliver(item.index, result)
        else:
            error_id = uuid.uuid4().hex[:12]
            log.error(
                "batch of %d sentence(s) failed, error id %s",
                len(done.live),
                error_id,
                exc_info=done.error,
            )
            for item in done.live:
                item.ticket._fail(BatchFailed(error_id))
            # their requests' other sentences are not computed: nobody would read them
            for ticket in {id(item.ticket): item.ticket for item in done.live}.values():
                self._remove(ticket)
        if self.on_batch:
            padded = max(item.cost for item in done.live) * len(done.live)
            report = BatchReport(
                done.key,
                len(done.live),
                padded,
                done.compute_s,
                done.waits,
                done.error is not None,
            )
            # after the requests it answered have run: metrics are on no request's path
            asyncio.get_running_loop().call_soon(self.on_batch, report)

    async def stop(self, timeout: float) -> int:
        """Refuse new work, finish what was accepted within `timeout` s; returns sentences dropped."""
        self._closing = True
        dropped = 0
        if self._task is not None and not self._task.done():  # done: it failed what waited
            assert self._wakeup is not None
            self._wakeup.set()
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            except TimeoutError:
                waiting = [item for queue in self._queues.values() for item in queue]
                handed = [item for done in self._handed for item in done.batch]
                for done in self._handed:  # a batch the worker has not started is dropped
                    with done.lock:
                        if not done.started:
                            for item in done.batch:
                                dropped += not item.dropped
                                item.dropped = True
                for item in waiting + handed:
                    item.queued = False
                    item.ticket._fail(ShuttingDown("shutdown timeout passed"))
                dropped += len(waiting)
                self._queues.clear()
                self._set_depth(-self._depth)
                self._task.cancel()
        if self._worker is not None:
            self._worker.stop()  # it ends after the batch it may still be running
            await self._worker.join()
        return dropped
