"""Unit tests of the micro-batcher with a plain Python function as the engine (no torch)."""

import asyncio
import threading
import time

import pytest

from app import batcher
from app.batcher import (
    BatchFailed,
    DeadlineExceeded,
    MicroBatcher,
    QueueFull,
    ShuttingDown,
    Worker,
)


class Recorder:
    """reverse each string; remember every batch it saw, optionally slow or failing."""

    def __init__(self, delay: float = 0.0, fail_on: str | None = None):
        self.batches: list[tuple[object, list[str]]] = []
        self.delay, self.fail_on = delay, fail_on
        self.threads: set[str] = set()

    def __call__(self, key, payloads):
        self.threads.add(threading.current_thread().name)
        self.batches.append((key, list(payloads)))
        if self.delay:
            time.sleep(self.delay)
        if self.fail_on in payloads:
            raise RuntimeError("injected fault")
        return [p[::-1] for p in payloads]

    def seen(self) -> list[str]:
        return [p for _, batch in self.batches for p in batch]


class Gated(Recorder):
    """A Recorder whose batches each block until the test lets them finish (`release`); the test
    can wait until the worker has started a number of them (`wait_started`). Nothing depends on
    how fast the machine is: the test says when a batch ends."""

    def __init__(self, fail_on: str | None = None):
        super().__init__(fail_on=fail_on)
        self._changed = threading.Condition()
        self._started = self._released = 0

    def __call__(self, key, payloads):
        with self._changed:
            self._started += 1
            self._changed.notify_all()
            number = self._started
            # bounded only so that a failing test ends
            assert self._changed.wait_for(lambda: self._released >= number, 60)
        return super().__call__(key, payloads)

    def release(self, batches: int = 1_000_000) -> None:
        """Lets the next `batches` batches (by default every one, from now on) finish."""
        with self._changed:
            self._released += batches
            self._changed.notify_all()

    def has_started(self, batches: int, timeout: float = 60.0) -> bool:
        """Whether the worker has started `batches` batches (in all) within `timeout` s; blocks
        the calling thread meanwhile."""
        with self._changed:
            return self._changed.wait_for(lambda: self._started >= batches, timeout)

    async def wait_started(self, batches: int) -> None:
        """Until the worker has started `batches` batches (in all); the event loop runs on."""
        started = await asyncio.to_thread(self.has_started, batches)
        assert started, f"the worker did not start {batches} batch(es)"


class FakeClock:
    """Stands in for the `time` module in app.batcher: its monotonic clock runs with the real
    one, and the test moves it on (`advance`) to make time pass at once."""

    def __init__(self):
        self.offset = 0.0

    def advance(self, seconds: float) -> None:
        self.offset += seconds

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def __getattr__(self, name):
        return getattr(time, name)


async def until(condition, what: str = "the condition holds", timeout: float = 60.0) -> None:
    """Polls condition() on the event loop; the timeout only bounds a test that fails."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.005)


async def started(fn, **kw) -> MicroBatcher:
    b = MicroBatcher(fn, **kw)
    await b.start()
    return b


async def concurrent(b: MicroBatcher, key: str = "k") -> None:
    """A batch of two: the batcher treats the traffic as concurrent from here on."""
    assert await b.wait(b.submit(key, ["y", "z"], [1, 1]), 30) == ["y", "z"]


async def test_results_come_back_per_request_and_in_order():
    fn = Recorder()
    b = await started(fn, max_batch_size=8, max_wait_ms=20)
    tickets = [b.submit("k", [f"s{i}a", f"s{i}bb", f"s{i}c"], [3, 4, 3]) for i in range(5)]
    results = await asyncio.gather(*(b.wait(t, 5) for t in tickets))
    assert results == [[f"a{i}s", f"bb{i}s", f"c{i}s"] for i in range(5)]
    assert max(len(batch) for _, batch in fn.batches) > 1
    assert fn.threads and all(name.startswith("mt-worker") for name in fn.threads)
    await b.stop(1)


async def test_batch_closes_at_max_batch_size():
    fn = Recorder()
    b = await started(fn, max_batch_size=4, max_wait_ms=200)
    t = b.submit("k", [str(i) for i in range(10)], [1] * 10)
    await b.wait(t, 5)
    assert [len(batch) for _, batch in fn.batches] == [4, 4, 2]
    await b.stop(1)


async def test_batch_closes_at_max_batch_tokens_and_sorts_by_length():
    fn = Recorder()
    b = await started(fn, max_batch_size=100, max_batch_tokens=20, max_wait_ms=200)
    payloads = ["aaaaa", "a", "aaa", "aaaaa", "aa", "aaaaa"]
    t = b.submit("k", payloads, [len(p) for p in payloads])
    await b.wait(t, 5)
    for _, batch in fn.batches:
        assert max(len(p) for p in batch) * len(batch) <= 20
        assert batch == sorted(batch, key=len)
    assert sorted(fn.seen()) == sorted(payloads)


async def test_batch_waits_up_to_max_wait_under_concurrent_traffic(monkeypatch):
    # a wait of 10 minutes: going at once and waiting it out differ by orders of magnitude
    # (every answer below comes within the 30 s the test waits for it), however busy the machine;
    # and the next sentences count as the last batch's clients coming back however long this
    # machine takes to send them (RETURN_S)
    monkeypatch.setattr(batcher, "RETURN_S", 60.0)
    fn = Recorder()
    b = await started(fn, max_batch_size=100, max_wait_ms=600_000)
    assert await b.wait(b.submit("k", ["ab"], [2]), 30) == ["ba"]  # a lone client: not delayed
    await concurrent(b)
    first = b.submit("k", ["c"], [1])
    await asyncio.sleep(0.05)
    assert b.depth == 1 and not first.future.done()  # "c" waits for company
    second = b.submit("k", ["d"], [1])  # arrives within the wait: joins the same batch
    # as many as the previous batch held (2) are waiting: it goes without waiting further
    assert await b.wait(first, 30) == ["c"] and await b.wait(second, 30) == ["d"]
    assert fn.batches[-1][1] == ["c", "d"]
    await b.stop(1)

    # fewer came: the sentence waits max_wait_ms out (at least that long; the upper bound is
    # only the test's own patience)
    fn = Recorder()
    b = await started(fn, max_batch_size=100, max_wait_ms=300)
    await concurrent(b)
    start = time.monotonic()
    assert await b.wait(b.submit("k", ["e"], [1]), 30) == ["e"]
    assert time.monotonic() - start >= 0.3 - 0.001  # less only by the clock's resolution
    assert fn.batches[-1][1] == ["e"]
    await b.stop(1)


async def test_a_lone_request_after_a_burst_has_passed_is_not_kept_waiting(monkeypatch):
    """The wait is for the last batch's clients, who come back soon after their answers: a
    request that comes RETURN_S or more after the worker became free goes at once. The
    batcher's clock is moved on by hand (20 minutes pass after the burst; the wait would be
    10)."""
    clock = FakeClock()
    monkeypatch.setattr(batcher, "time", clock)
    fn = Recorder()
    b = await started(fn, max_batch_size=100, max_wait_ms=600_000)
    await concurrent(b)
    clock.advance(1200)
    assert await b.wait(b.submit("k", ["g"], [1]), 30) == ["g"]  # within 30 s, not 10 minutes
    assert fn.batches[-1][1] == ["g"]
    await b.stop(1)


async def test_after_a_batch_the_wait_is_for_as_many_as_it_answered(monkeypatch):
    # closed-loop clients: the three answered together come back together, a little spread;
    # a sentence queued while the worker was busy does not start a batch without them.
    # The batcher's clock is moved on by hand: "d" has waited longer than max_wait_ms (10 min)
    # when the worker becomes free, without the test taking that long.
    clock = FakeClock()
    monkeypatch.setattr(batcher, "time", clock)
    fn = Gated()
    b = await started(fn, max_batch_size=100, max_wait_ms=600_000)
    fn.release(1)
    await concurrent(b)  # concurrent traffic from here on
    running = b.submit("k", ["a", "b", "c"], [1, 1, 1])
    await fn.wait_started(2)
    early = b.submit("k", ["d"], [1])  # queued while the batch of three runs
    clock.advance(1200)  # ... for 20 minutes
    fn.release()
    await b.wait(running, 30)
    # two of the three come back; "d" waited past its own max_wait_ms (it counts from when the
    # worker became free), and the batch went as soon as three were there, not at the end of
    # the wait (which would be 10 minutes from now: the answers come within 30 s)
    returning = [b.submit("k", ["e"], [1])]
    await asyncio.sleep(0.02)  # a little spread
    returning.append(b.submit("k", ["f"], [1]))
    results = await asyncio.gather(b.wait(early, 30), *(b.wait(t, 30) for t in returning))
    assert results == [["d"], ["e"], ["f"]]
    assert [batch for _, batch in fn.batches][-1] == ["d", "e", "f"]
    await b.stop(1)


async def test_a_stream_of_full_batches_does_not_starve_other_options():
    """While the worker computes, a full batch is handed ahead only if its key has waited
    longest: a request of other options (another model, beam size, ...) that came first goes
    when the worker is next free, however many full batches keep coming, and without waiting
    for company (10 minutes here) while a full batch is ready."""
    fn = Gated()
    b = await started(fn, max_batch_size=2, max_wait_ms=600_000)
    first = b.submit("a", ["a1", "a2"], [1, 1])
    await fn.wait_started(1)  # the worker holds the first batch
    other = b.submit("b", ["b1"], [1])
    stream = [b.submit("a", [f"a{i}", f"a{i + 1}"], [1, 1]) for i in (3, 5, 7)]
    fn.release()
    await asyncio.gather(b.wait(first, 30), b.wait(other, 30), *(b.wait(t, 30) for t in stream))
    assert [key for key, _ in fn.batches] == ["a", "b", "a", "a", "a"]
    await b.stop(1)


async def test_different_keys_never_share_a_batch():
    fn = Recorder()
    b = await started(fn, max_batch_size=16, max_wait_ms=20)
    t1, t2 = b.submit("greedy", ["a", "b"], [1, 1]), b.submit("beam", ["c", "d"], [1, 1])
    await asyncio.gather(b.wait(t1, 5), b.wait(t2, 5))
    for key, batch in fn.batches:
        assert set(batch) <= ({"a", "b"} if key == "greedy" else {"c", "d"})
    await b.stop(1)


async def test_full_queue_rejects_at_once():
    fn = Gated()
    b = await started(fn, max_batch_size=2, max_queue_size=5, max_wait_ms=0)
    first = b.submit("k", ["1", "2"], [1, 1])
    await fn.wait_started(1)  # the worker holds the first batch; the queue is empty
    assert b.depth == 0
    b.submit("k", ["3", "4", "5"], [1, 1, 1])
    with pytest.raises(QueueFull):
        b.submit("k", ["6", "7", "8"], [1, 1, 1])
    assert b.depth == 3
    fn.release()
    await b.wait(first, 30)
    await b.stop(30)


async def test_deadline_drops_waiting_work_uncomputed():
    fn = Gated()  # "busy" runs until the deadline below has passed
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    busy = b.submit("k", ["busy"], [1])
    await fn.wait_started(1)
    late = b.submit("k", ["late1", "late2"], [1, 1])  # one handed to the busy worker, one queued
    with pytest.raises(DeadlineExceeded) as info:
        await b.wait(late, 0.1)
    assert info.value.dropped == 2 and b.depth == 0
    fn.release()
    await b.wait(busy, 30)
    # the worker takes its batches in order: once a later one is computed, theirs would have been
    assert await b.wait(b.submit("k", ["after"], [1]), 30) == ["retfa"]
    assert fn.seen() == ["busy", "after"]
    await b.stop(1)


async def test_cancel_removes_only_that_request():
    fn = Gated()
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    b.submit("k", ["busy"], [1])
    await fn.wait_started(1)
    gone, kept = b.submit("k", ["gone"], [1]), b.submit("k", ["kept"], [1])
    assert b.cancel(gone) == 1
    fn.release()
    assert await b.wait(kept, 30) == ["tpek"]
    assert fn.seen() == ["busy", "kept"]
    await b.stop(1)


async def test_cancelling_the_waiting_task_drops_its_queued_sentences():
    fn = Gated()
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    busy = b.submit("k", ["busy"], [1])
    await fn.wait_started(1)
    waiter = asyncio.ensure_future(b.wait(b.submit("k", ["x", "y"], [1, 1]), 60))
    await asyncio.sleep(0.01)
    assert b.depth == 2
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert b.depth == 0
    fn.release()
    assert await b.wait(busy, 30) == ["ysub"]
    assert await b.wait(b.submit("k", ["z"], [1]), 30) == ["z"]
    assert fn.seen() == ["busy", "z"]
    assert await b.wait(b.submit("k", [], []), 5) == []  # nothing to translate: answered at once
    await b.stop(1)


async def test_a_failing_batch_fails_only_its_requests():
    fn = Recorder(fail_on="boom")
    b = await started(fn, max_batch_size=8, max_wait_ms=10)
    bad, good = b.submit("a", ["x", "boom"], [1, 1]), b.submit("b", ["ok"], [1])
    with pytest.raises(BatchFailed) as info:
        await b.wait(bad, 5)
    assert len(info.value.error_id) == 12
    assert await b.wait(good, 5) == ["ko"]
    assert await b.wait(b.submit("a", ["again"], [1]), 5) == ["niaga"]  # the worker keeps serving
    await b.stop(1)


async def test_a_failed_requests_other_sentences_are_not_computed():
    """A request one of whose batches failed has its answer (BatchFailed): its sentences still
    waiting are dropped, not computed for nobody (the batch the worker may already have
    started, handed while the failing one ran, aside); the queue is empty after it."""
    fn = Recorder(fail_on="bad")
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    ticket = b.submit("k", ["bad", "x", "y", "z"], [1, 1, 1, 1])
    with pytest.raises(BatchFailed):
        await b.wait(ticket, 5)
    assert await b.wait(b.submit("k", ["next"], [1]), 5) == ["txen"]
    assert "y" not in fn.seen() and "z" not in fn.seen()
    assert b.depth == 0
    await b.stop(1)


async def test_an_engine_raising_a_base_exception_fails_the_batch_not_the_worker():
    def engine(key, payloads):
        if "exit" in payloads:
            raise SystemExit("engine gave up")
        return [p.upper() for p in payloads]

    b = await started(engine, max_batch_size=4, max_wait_ms=0)
    with pytest.raises(BatchFailed):
        await b.wait(b.submit("k", ["exit"], [1]), 5)
    assert await b.wait(b.submit("k", ["ok"], [1]), 5) == ["OK"]
    await b.stop(1)


async def test_stop_finishes_accepted_work_and_refuses_new():
    fn = Recorder(delay=0.05)
    b = await started(fn, max_batch_size=2, max_wait_ms=0)
    tickets = [b.submit("k", [f"{i}x"], [1]) for i in range(6)]
    waits = [asyncio.ensure_future(b.wait(t, 10)) for t in tickets]
    assert await b.stop(5) == 0
    assert [w.result() for w in waits] == [[f"x{i}"] for i in range(6)]
    with pytest.raises(ShuttingDown):
        b.submit("k", ["late"], [1])


async def test_stop_timeout_fails_what_is_left():
    fn = Gated()  # "0" runs past the stop timeout
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    tickets = [b.submit("k", [str(i)], [1]) for i in range(4)]
    waits = [asyncio.ensure_future(b.wait(t, 60)) for t in tickets]
    await fn.wait_started(1)
    stopping = asyncio.ensure_future(b.stop(0.1))
    outcomes = await asyncio.gather(*waits, return_exceptions=True)  # at the stop timeout
    assert all(isinstance(o, ShuttingDown) for o in outcomes)
    fn.release()  # stop returns once the worker has finished the batch it was running
    assert await stopping == 3  # "1" (handed to the worker, not started), "2" and "3"
    assert fn.seen() == ["0"]


async def test_stop_timeout_drops_the_batch_handed_to_the_busy_worker_uncomputed():
    fn = Gated()  # "run" runs past the stop timeout
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    running = b.submit("k", ["run"], [1])
    await fn.wait_started(1)
    handed, queued = b.submit("k", ["next"], [1]), b.submit("k", ["last"], [1])
    # "next" goes on the worker's queue, "last" stays in the batcher's
    await until(lambda: len(b._handed) == 2, '"next" is handed to the worker')
    assert b.depth == 2
    waits = [asyncio.ensure_future(b.wait(t, 60)) for t in (running, handed, queued)]
    stopping = asyncio.ensure_future(b.stop(0.1))
    outcomes = await asyncio.gather(*waits, return_exceptions=True)  # at the stop timeout
    assert all(isinstance(o, ShuttingDown) for o in outcomes)
    fn.release()  # stop returns once the worker thread has ended, after every job it was given
    assert await stopping == 2  # "run" was being computed; the other two never start
    assert fn.seen() == ["run"] and b.depth == 0


async def test_a_full_batch_goes_to_the_busy_worker_which_starts_it_without_the_event_loop():
    """With a backlog, the worker goes from one batch to the next on its own: the next full
    batch is already on its queue, so a busy event loop (answering the requests of the batch
    that just ended) does not leave it idle."""
    fn = Gated()
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    first = b.submit("k", ["one"], [1])
    await fn.wait_started(1)  # "one" is being computed until the test releases it
    second = b.submit("k", ["two"], [1])
    await until(lambda: len(b._handed) == 2, '"two" is handed to the busy worker')
    # From here the event loop is blocked (no await) until "two" has started, or for a minute:
    # a worker that needed the loop to go on to "two" would not start it within that time.
    fn.release(1)
    assert fn.has_started(2), '"two" did not start while the event loop was blocked'
    fn.release()
    assert await b.wait(first, 30) == ["eno"] and await b.wait(second, 30) == ["owt"]
    await b.stop(1)


async def test_random_traffic_with_cancels_and_deadlines_loses_nothing_and_computes_no_drop():
    """Many requests, some cancelled and some with short deadlines, against a worker that
    is often busy: every request ends (results in order, or its error), each sentence is
    either dropped or computed (once), never both, and nothing is left waiting."""
    import random

    rng = random.Random(7)
    computed: list[str] = []

    def fn(key, payloads):
        computed.extend(payloads)
        time.sleep(rng.choice([0.0, 0.002, 0.005]))
        return [p[::-1] for p in payloads]

    b = await started(fn, max_batch_size=4, max_wait_ms=2, max_queue_size=10_000)
    sent: dict[str, int] = {}  # request -> sentences
    dropped: dict[str, int] = {}  # request -> sentences the batcher said it removed
    outcomes: dict[str, str] = {}

    async def request(name: str) -> None:
        await asyncio.sleep(rng.random() * 0.5)  # arrivals spread over the run
        texts = [f"{name}.{i}" for i in range(rng.randint(1, 6))]
        sent[name] = len(texts)
        ticket = b.submit(rng.choice(["a", "b"]), texts, [len(t) for t in texts])
        action = rng.random()
        if action < 0.25:  # the client goes away at some point, maybe after its answer
            await asyncio.sleep(rng.random() * 0.03)
            dropped[name], outcomes[name] = b.cancel(ticket), "cancelled"
            return
        try:
            result = await b.wait(ticket, rng.random() * 0.03 if action < 0.5 else 10)
        except DeadlineExceeded as exc:
            dropped[name], outcomes[name] = exc.dropped, "late"
        else:
            assert result == [t[::-1] for t in texts]
            dropped[name], outcomes[name] = 0, "done"

    await asyncio.gather(*(request(f"r{n}") for n in range(300)))
    assert await b.stop(5) == 0 and b.depth == 0
    assert len(computed) == len(set(computed))  # no sentence computed twice
    per_request = {name: 0 for name in sent}
    for payload in computed:
        per_request[payload.split(".")[0]] += 1
    for name, n in sent.items():  # every sentence was computed or dropped, not both
        assert per_request[name] + dropped[name] == n, (name, outcomes[name])
    kinds = set(outcomes.values())
    assert kinds == {"done", "late", "cancelled"} and sum(dropped.values()) > 0


async def test_event_loop_stays_free_while_a_batch_runs():
    fn = Gated()  # the batch runs until the event loop has ticked 10 times
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    t = b.submit("k", ["slow"], [1])
    await fn.wait_started(1)
    for _ in range(10):
        await asyncio.sleep(0.01)
        assert not t.future.done()
    fn.release()
    assert await b.wait(t, 30) == ["wols"]
    await b.stop(1)


async def test_a_given_worker_runs_every_batch_after_the_jobs_given_to_it_first():
    """The service loads its models on the worker thread, then hands that thread to the batcher:
    the models must be used from the thread that loaded them."""
    worker = Worker(name="engine-thread")
    assert await worker.run(threading.current_thread) is worker.thread
    with pytest.raises(ValueError, match="bad checkpoint"):
        await worker.run(int, "bad checkpoint")  # what the job raised reaches the awaiting task
    fn = Recorder()
    b = await started(fn, max_batch_size=2, worker=worker)
    await b.wait(b.submit("k", ["ab", "cd", "ef"], [2, 2, 2]), 5)
    assert len(fn.batches) == 2 and fn.threads == {"engine-thread"}
    await b.stop(1)
    worker.thread.join(5)
    assert not worker.thread.is_alive()  # stop ended it


async def test_a_worker_job_whose_caller_gave_up_still_runs_to_its_end_and_the_thread_goes_on():
    """Shutdown while the models load cancels the task awaiting the load: the job finishes on
    the thread (nothing is torn down under it), its result goes nowhere, and the thread takes
    the next job."""
    worker = Worker()
    running, cancelled, finished = threading.Event(), threading.Event(), threading.Event()

    def slow_load() -> str:
        running.set()
        assert cancelled.wait(60)  # it runs on after its caller gave up
        finished.set()
        return "loaded"

    task = asyncio.ensure_future(worker.run(slow_load))
    assert await asyncio.to_thread(running.wait, 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cancelled.set()
    assert await worker.run(str, 42) == "42"  # after the abandoned job, in order
    assert finished.is_set()
    worker.stop()
    worker.thread.join(5)
    assert not worker.thread.is_alive()


async def test_a_ticket_reports_the_engine_time_of_its_batches():
    fn = Recorder(delay=0.05)
    reports = []
    b = await started(fn, max_batch_size=2, on_batch=reports.append)
    one = b.submit("k", ["ab"], [2])
    three = b.submit("k", ["cd", "ef", "gh"], [2, 2, 2])  # 2 batches: shared one, then its own
    await asyncio.gather(b.wait(one, 30), b.wait(three, 30))
    await until(lambda: len(reports) == 2, "both batches are reported")
    shared, own = (report.compute_s for report in reports)
    assert shared >= 0.05 and own >= 0.05  # at least the engine function's own time
    assert one.compute_s == shared  # only the batch it was in
    assert three.compute_s == pytest.approx(shared + own)  # both of its batches, each once
    await b.stop(1)


async def test_engine_time_leaves_out_the_wait_for_the_event_loop():
    """The engine time a ticket reports is the engine function's own: a busy event loop that
    picks the results up late does not make the engine look slower."""
    fn = Recorder(delay=0.05)
    worker = Worker()
    b = await started(fn, max_batch_size=4, worker=worker)
    before = time.perf_counter()
    ticket = b.submit("k", ["ab"], [2])
    await until(lambda: b.depth == 0, "the batch is handed to the worker")
    behind = threading.Event()
    worker.put(behind.set)  # a job after the batch: set once the worker is done with it
    assert behind.wait(60)  # the loop is blocked (no await) from here...
    worker_done = time.perf_counter()
    time.sleep(0.3)  # ... until a while after the worker finished: the results wait for it
    assert await b.wait(ticket, 30) == ["ba"]
    # the engine time lies within the worker's part, none of it in the wait for the loop
    assert 0.05 <= ticket.compute_s <= worker_done - before
    await b.stop(1)


async def test_a_scheduler_that_dies_fails_what_waits_refuses_more_and_says_why():
    b = await started(Recorder(), max_batch_size=4)
    assert b.problem() is None

    def broken(keys):
        raise RuntimeError("injected scheduler fault")

    b._oldest = broken  # the scheduler raises on the next sentence it looks at
    ticket = b.submit("k", ["ab", "cd"], [2, 2])
    with pytest.raises(BatchFailed):
        await b.wait(ticket, 5)
    assert b.problem() == "the batch scheduler stopped: RuntimeError: injected scheduler fault"
    assert b.depth == 0
    with pytest.raises(ShuttingDown, match="injected scheduler fault"):
        b.submit("k", ["ef"], [2])
    assert await b.stop(1) == 0  # stopping a batcher whose scheduler died still works


async def test_problem_names_a_cancelled_scheduler_or_an_ended_worker_thread():
    b = await started(Recorder())
    b._task.cancel()
    await asyncio.wait([b._task])
    assert b.problem() == "the batch scheduler stopped"
    await b.stop(1)

    b = await started(Recorder())
    b._worker.stop()
    await b._worker.join()
    assert b.problem() == "the inference worker thread stopped"
    await b.stop(1)
    assert b.problem() is None  # a batcher stopped on purpose has no problem to report
