"""Unit tests of the micro-batcher with a plain Python function as the engine (no torch)."""

import asyncio
import threading
import time

import pytest

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


async def started(fn, **kw) -> MicroBatcher:
    b = MicroBatcher(fn, **kw)
    await b.start()
    return b


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


async def test_batch_waits_up_to_max_wait_under_concurrent_traffic():
    # the wait (1 s) is long against everything else, so that a slow or busy machine cannot
    # blur going at once and waiting it out
    fn = Recorder()
    b = await started(fn, max_batch_size=100, max_wait_ms=1000)
    start = time.monotonic()
    assert await b.wait(b.submit("k", ["ab"], [2]), 5) == ["ba"]
    assert time.monotonic() - start < 0.5  # a lone client is not delayed
    await b.wait(b.submit("k", ["x", "y"], [1, 1]), 5)  # concurrent traffic: a batch of two
    start = time.monotonic()
    first = b.submit("k", ["c"], [1])
    await asyncio.sleep(0.05)
    second = b.submit("k", ["d"], [1])  # arrives within the wait: joins the same batch
    assert await b.wait(first, 5) == ["c"] and await b.wait(second, 5) == ["d"]
    # as many as the previous batch held (2) are waiting: it goes without waiting further
    assert 0.04 <= time.monotonic() - start < 0.6
    assert fn.batches[-1][1] == ["c", "d"]
    start = time.monotonic()
    assert await b.wait(b.submit("k", ["e"], [1]), 5) == ["e"]  # fewer came: waits it out
    assert 0.95 <= time.monotonic() - start < 4.0
    await b.stop(1)


async def test_after_a_batch_the_wait_is_for_as_many_as_it_answered():
    # closed-loop clients: the three answered together come back together, a little spread;
    # a sentence queued while the worker was busy does not start a batch without them
    fn = Recorder(delay=1.0)  # the wait (0.5 s) is shorter than a batch
    b = await started(fn, max_batch_size=100, max_wait_ms=500)
    await b.wait(b.submit("k", ["w", "x"], [1, 1]), 5)  # concurrent traffic from here on
    running = b.submit("k", ["a", "b", "c"], [1, 1, 1])
    await asyncio.sleep(0.03)
    early = b.submit("k", ["d"], [1])  # queued while the batch of three runs
    await b.wait(running, 5)
    done = time.monotonic()
    returning = []
    for text in ["e", "f"]:  # two of the three come back
        await asyncio.sleep(0.02)
        returning.append(b.submit("k", [text], [1]))
    results = await asyncio.gather(b.wait(early, 5), *(b.wait(t, 5) for t in returning))
    assert results == [["d"], ["e"], ["f"]]
    # "d" waited past its own max_wait_ms (it counts from when the worker became free), and
    # the batch went as soon as three were there, not at the end of the wait
    assert [batch for _, batch in fn.batches][-1] == ["d", "e", "f"]
    # 0.04 s of arrivals + 1 s of batch, not + 0.5 s of waiting
    assert time.monotonic() - done < 1.35
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
    fn = Recorder(delay=0.2)
    b = await started(fn, max_batch_size=2, max_queue_size=5, max_wait_ms=0)
    first = b.submit("k", ["1", "2"], [1, 1])
    await asyncio.sleep(0.05)  # the worker now holds the first batch; the queue is empty
    b.submit("k", ["3", "4", "5"], [1, 1, 1])
    with pytest.raises(QueueFull):
        b.submit("k", ["6", "7", "8"], [1, 1, 1])
    assert b.depth == 3
    await b.wait(first, 5)
    await b.stop(5)


async def test_deadline_drops_waiting_work_uncomputed():
    fn = Recorder(delay=1.0)  # far longer than the deadline below, even on a busy machine
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    busy = b.submit("k", ["busy"], [1])
    await asyncio.sleep(0.05)
    late = b.submit("k", ["late1", "late2"], [1, 1])
    with pytest.raises(DeadlineExceeded) as info:
        await b.wait(late, 0.1)
    assert info.value.dropped == 2 and b.depth == 0
    await b.wait(busy, 5)
    await asyncio.sleep(0.1)
    assert "late1" not in fn.seen() and "late2" not in fn.seen()
    await b.stop(1)


async def test_cancel_removes_only_that_request():
    fn = Recorder(delay=0.2)
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    b.submit("k", ["busy"], [1])
    await asyncio.sleep(0.05)
    gone, kept = b.submit("k", ["gone"], [1]), b.submit("k", ["kept"], [1])
    assert b.cancel(gone) == 1
    assert await b.wait(kept, 5) == ["tpek"]
    assert "gone" not in fn.seen()
    await b.stop(1)


async def test_cancelling_the_waiting_task_drops_its_queued_sentences():
    fn = Recorder(delay=0.3)
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    busy = b.submit("k", ["busy"], [1])
    await asyncio.sleep(0.05)
    waiter = asyncio.ensure_future(b.wait(b.submit("k", ["x", "y"], [1, 1]), 10))
    await asyncio.sleep(0.01)
    assert b.depth == 2
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert b.depth == 0
    assert await b.wait(busy, 5) == ["ysub"]
    assert await b.wait(b.submit("k", ["z"], [1]), 5) == ["z"]
    assert "x" not in fn.seen() and "y" not in fn.seen()
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
    fn = Recorder(delay=0.3)
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    tickets = [b.submit("k", [str(i)], [1]) for i in range(4)]
    waits = [asyncio.ensure_future(b.wait(t, 10)) for t in tickets]
    await asyncio.sleep(0.05)
    assert await b.stop(0.1) >= 2
    outcomes = await asyncio.gather(*waits, return_exceptions=True)
    assert any(isinstance(o, ShuttingDown) for o in outcomes)


async def test_stop_timeout_drops_the_batch_handed_to_the_busy_worker_uncomputed():
    fn = Recorder(delay=0.5)
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    running = b.submit("k", ["run"], [1])
    await asyncio.sleep(0.05)
    handed, queued = b.submit("k", ["next"], [1]), b.submit("k", ["last"], [1])
    await asyncio.sleep(0.05)  # "next" is on the worker's queue, "last" in the batcher's
    assert b.depth == 2
    waits = [asyncio.ensure_future(b.wait(t, 10)) for t in (running, handed, queued)]
    assert await b.stop(0.1) == 2  # "run" was being computed; the other two never start
    outcomes = await asyncio.gather(*waits, return_exceptions=True)
    assert all(isinstance(o, ShuttingDown) for o in outcomes)
    await asyncio.sleep(0.6)
    assert fn.seen() == ["run"] and b.depth == 0


async def test_a_full_batch_goes_to_the_busy_worker_which_starts_it_without_the_event_loop():
    """With a backlog, the worker goes from one batch to the next on its own: the next full
    batch is already on its queue, so a busy event loop (answering the requests of the batch
    that just ended) does not leave it idle."""
    starts: dict[str, float] = {}

    def fn(key, payloads):
        starts[payloads[0]] = time.monotonic()
        time.sleep(0.2)
        return [p[::-1] for p in payloads]

    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    first = b.submit("k", ["one"], [1])
    await asyncio.sleep(0.05)  # "one" is being computed until ~0.2 s after it started
    second = b.submit("k", ["two"], [1])
    await asyncio.sleep(0.01)
    time.sleep(0.5)  # the event loop is blocked until well after "one" ends
    unblocked = time.monotonic()
    assert await b.wait(first, 5) == ["eno"] and await b.wait(second, 5) == ["owt"]
    assert starts["two"] < unblocked - 0.2  # it started while the loop was still blocked
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
    fn = Recorder(delay=1.0)  # 10 ticks of 10 ms fit ten times over, even on a busy machine
    b = await started(fn, max_batch_size=1, max_wait_ms=0)
    t = b.submit("k", ["slow"], [1])
    ticks = 0
    while not t.future.done():
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks >= 10
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
    finished = threading.Event()

    def slow_load() -> str:
        time.sleep(0.3)
        finished.set()
        return "loaded"

    task = asyncio.ensure_future(worker.run(slow_load))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await worker.run(str, 42) == "42"  # after the abandoned job, in order
    assert finished.is_set()
    worker.stop()
    worker.thread.join(5)
    assert not worker.thread.is_alive()


async def test_a_ticket_reports_the_engine_time_of_its_batches():
    fn = Recorder(delay=0.05)
    b = await started(fn, max_batch_size=2)
    one = b.submit("k", ["ab"], [2])
    three = b.submit("k", ["cd", "ef", "gh"], [2, 2, 2])  # 2 batches: shared one, then its own
    await asyncio.gather(b.wait(one, 5), b.wait(three, 5))
    assert 0.05 <= one.compute_s < 0.5
    assert 0.1 <= three.compute_s < 1.0 and three.compute_s > one.compute_s
    await b.stop(1)


async def test_engine_time_leaves_out_the_wait_for_the_event_loop():
    """The engine time a ticket reports is the engine function's own: a busy event loop that
    picks the results up late does not make the engine look slower."""
    fn = Recorder(delay=0.05)
    b = await started(fn, max_batch_size=4)
    ticket = b.submit("k", ["ab"], [2])
    await asyncio.sleep(0.01)  # the batch is on the worker now
    time.sleep(0.6)  # the loop is blocked long after the engine finished
    await b.wait(ticket, 5)
    assert 0.05 <= ticket.compute_s < 0.4
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
