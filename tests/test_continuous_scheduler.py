"""The continuous scheduler (app/continuous.py) with a fake engine: no torch, no HTTP.

The fake engine decodes a sentence ("name", steps) in `steps` steps and returns the name
reversed. Each step records its sentences as it starts, then waits for the test to allow it, so
the tests see exactly which sentences ran in which step: they wait for events, never for time.
Where several requests must wait together, the worker thread is held by a job of the test's
until all are submitted.
"""

import asyncio
import threading
import time
import types

import pytest

from app.batcher import BatchFailed, DeadlineExceeded, QueueFull, ShuttingDown
from app.continuous import ContinuousBatcher, NewcomersFailed


class FakeGroup:
    partial_steps = True

    def __init__(self, engine, group):
        self.engine, self.group = engine, group
        self.members: dict[int, list] = {}  # id -> [name, steps left]

    def join(self, entries):
        self.engine.between(self.group)
        if any(name == "no-room" for _, _, (name, _) in entries):  # before anything changed
            raise NewcomersFailed("injected: the newcomers' encoder ran out of memory")
        too_large = [sid for sid, _, (name, _) in entries if name == "too-large"]
        if too_large:  # the others join
            entries = [e for e in entries if e[0] not in too_large]
            self.join(entries)
            raise NewcomersFailed("injected: one newcomer's encoder ran out of memory", too_large)
        for sid, _key, (name, steps) in entries:
            if name == "bad-join":
                raise RuntimeError("injected fault in join")
            self.members[sid] = [name, steps]
            self.engine.joined[name] = len(self.engine.steps)

    def leave(self, ids):
        self.engine.between(self.group)
        for sid in ids:
            self.members.pop(sid)

    def step(self, only=None):
        engine = self.engine
        stepping = {sid: m for sid, m in self.members.items() if only is None or sid in only}
        names = sorted(name for name, _ in stepping.values())
        with engine.changed:
            engine.steps.append((self.group, names))
            engine.changed.notify_all()
        assert engine.gate.acquire(timeout=10), "the test never allowed this step"
        if engine.delay:
            time.sleep(engine.delay)
        if "bad-step" in names:
            raise RuntimeError("injected fault in step")
        if "no-room-step" in names:  # an engine that raises it out of place
            raise NewcomersFailed("injected: NewcomersFailed from a step")
        done = []
        for sid, member in stepping.items():
            member[1] -= 1
            if member[1] == 0:
                done.append((sid, member[0][::-1]))
                del self.members[sid]
        return done


class FakeEngine:
    def __init__(self, free_steps: bool = False, delay: float = 0.0, between=None):
        self.gate = threading.Semaphore(10_000 if free_steps else 0)
        self.delay = delay  # seconds each step takes
        self.between = between or (lambda group: None)  # called by each join and leave
        self.changed = threading.Condition()
        self.steps: list[tuple[object, list[str]]] = []
        self.opened: list[object] = []
        self.joined: dict[str, int] = {}  # name -> the steps started (in all) when it joined

    def open(self, group):
        self.opened.append(group)
        return FakeGroup(self, group)

    def allow(self, n: int = 1) -> None:
        self.gate.release(n)

    def wait_started(self, n: int) -> None:
        """Until n steps have started in all."""
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.steps) >= n, timeout=10)

    def names_in(self, step: int) -> list[str]:
        return self.steps[step][1]


def envelope(group, members):
    """A sentence costs its cost; a group the sum."""
    return sum(cost for _, cost in members)


async def failed_with_the_loop(b: ContinuousBatcher, *tickets) -> None:
    """The scheduler's loop failed: each ticket failed, nothing is left to drop or counted, and
    the scheduler stops."""
    for t in tickets:
        with pytest.raises(BatchFailed):
            await b.wait(t, 5)
    assert "injected fault in the loop" in b.problem()
    assert all(b.cancel(t) == 0 for t in tickets)
    assert b.depth == 0 and b.running == 0
    await b.stop(1)


def envelope_with_a_bug(group, members):
    """`envelope`, but it raises once a group would hold a second sentence (a bug in
    admission)."""
    if len(members) > 1:
        raise RuntimeError("injected fault in the loop")
    return envelope(group, members)


async def started(engine: FakeEngine, **kw) -> ContinuousBatcher:
    options = dict(envelope=envelope, budget=1000, max_batch_size=8, max_queue_size=100)
    options.update(kw)
    b = ContinuousBatcher(engine.open, lambda key: key[0], **options)
    await b.start()
    return b


def hold(b: ContinuousBatcher) -> threading.Event:
    """The worker thread waits until the returned event is set: what is submitted meanwhile
    waits together."""
    release = threading.Event()
    b._worker.put(release.wait, 10)
    return release


async def until(condition, timeout: float = 10.0) -> None:
    """Let the event loop run until condition() holds."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.001)


async def step_until(engine: FakeEngine, condition) -> None:
    """Allow one step at a time until condition() holds. A step's results are posted to the
    event loop before the next step starts: once it has, yielding once lets them arrive."""
    async with asyncio.timeout(10):
        while not condition():
            before = len(engine.steps)
            engine.allow()
            while len(engine.steps) == before and not condition():
                await asyncio.sleep(0.001)
            await asyncio.sleep(0)


async def test_a_short_request_joins_a_running_decode_and_is_answered_first():
    engine = FakeEngine()
    b = await started(engine)
    long = b.submit(("m", 1), [("long", 10)], [1])
    engine.allow(1)
    await asyncio.to_thread(engine.wait_started, 2)  # the second step is under way
    short = b.submit(("m", 1), [("short", 2)], [1])
    await step_until(engine, short.future.done)
    assert await b.wait(short) == ["trohs"]
    assert not long.future.done()
    assert engine.names_in(0) == engine.names_in(1) == ["long"]
    assert engine.names_in(2) == engine.names_in(3) == ["long", "short"]
    assert len(engine.steps) == 5  # answered right after the step that finished it
    await step_until(engine, long.future.done)
    assert await b.wait(long) == ["gnol"]
    assert engine.opened == ["m"]  # both in one running decode
    engine.allow(100)
    await b.stop(5)


async def test_newcomers_join_a_running_decode_together_every_join_every_steps():
    """MT_JOIN_EVERY_STEPS: sentences that arrive while a decode runs join it together, at
    most every N steps (a join costs about as much for one as for many); a decode with no
    sentence running takes a newcomer at once."""
    engine = FakeEngine()
    b = await started(engine, join_every=3)
    long = b.submit(("m", 1), [("long", 10)], [1])
    await asyncio.to_thread(engine.wait_started, 1)  # at once: step 0 is under way
    first = b.submit(("m", 1), [("a", 1)], [1])
    engine.allow(1)
    await asyncio.to_thread(engine.wait_started, 2)  # step 1 under way
    second = b.submit(("m", 1), [("c", 1)], [1])
    await step_until(engine, lambda: first.future.done() and second.future.done())
    assert await b.wait(first) == ["a"] and await b.wait(second) == ["c"]
    assert [engine.names_in(i) for i in range(4)] == [["long"]] * 3 + [["a", "c", "long"]]
    late = b.submit(("m", 1), [("late", 1)], [1])
    await step_until(engine, late.future.done)
    # step 4 had started: it and step 5 go without, and the third step after a joined has it
    assert [engine.names_in(i) for i in (4, 5, 6)] == [["long"], ["long"], ["late", "long"]]
    await step_until(engine, long.future.done)
    assert await b.wait(long) == ["gnol"]
    with pytest.raises(ValueError, match="join_every"):
        ContinuousBatcher(
            engine.open, lambda key: key[0], envelope=envelope, budget=1, join_every=0
        )


async def test_a_sentence_waiting_for_the_next_join_does_not_lift_the_step_bound():
    """MT_STEP_BOUND_WAIT_MS lifts MT_MAX_STEP_ROWS while a sentence waits for a place; one
    that waits only for the next join (MT_JOIN_EVERY_STEPS) is not behind: the bound holds."""
    engine = FakeEngine()
    b = await started(engine, step_places=lambda group: 1, step_wait=1e-9, join_every=4)
    first = b.submit(("m", 1), [("a", 8), ("b", 8)], [1, 1])
    await asyncio.to_thread(engine.wait_started, 1)  # both joined; step 0 takes one
    late = b.submit(("m", 1), [("c", 1)], [1])
    await step_until(engine, late.future.done)
    stepped = next(i for i, (_, names) in enumerate(engine.steps) if "c" in names)
    assert stepped >= 4 and all(len(engine.names_in(i)) == 1 for i in range(stepped))
    await step_until(engine, first.future.done)
    assert await b.wait(first) == ["a", "b"] and await b.wait(late) == ["c"]


async def test_the_event_loop_is_woken_when_a_request_completes_not_per_sentence():
    """A finished sentence whose request has more to come waits on the worker thread; the
    answers go to the event loop, all held ones together, in the step a request completes."""
    engine = FakeEngine()
    b = await started(engine)
    calls = []
    deliver = b._deliver

    def counted(finished, failed, error_id, reports=()):
        if finished:
            calls.append(sorted(result for _, result in finished))
        deliver(finished, failed, error_id, reports)

    b._deliver = counted
    release = hold(b)
    long = b.submit(("m", 1), [("x0", 1), ("x1", 2), ("x2", 3)], [1] * 3)
    short = b.submit(("m", 1), [("s", 2)], [1])
    release.set()
    await step_until(engine, lambda: long.future.done())
    # step 0 finished x0 (held), step 1 x1 and s (s completes its request), step 2 x2
    assert calls == [["0x", "1x", "s"], ["2x"]]
    assert await b.wait(long) == ["0x", "1x", "2x"] and await b.wait(short) == ["s"]
    await b.stop(5)


async def test_results_come_back_per_request_in_order_across_groups():
    engine = FakeEngine(free_steps=True)
    b = await started(engine)
    tickets = [
        b.submit(
            (model, 1), [(f"{model}{i}a", 3), (f"{model}{i}bb", 1), (f"{model}{i}c", 2)], [1] * 3
        )
        for i in range(4)
        for model in ("x", "y")
    ]
    results = await asyncio.gather(*(b.wait(t, 10) for t in tickets))
    expected = [
        [f"a{i}{model}", f"bb{i}{model}", f"c{i}{model}"] for i in range(4) for model in ("x", "y")
    ]
    assert results == expected
    assert all(len({n[0] for n in names}) == 1 for _, names in engine.steps)  # groups apart
    await b.stop(5)


async def test_waiting_requests_take_turns_one_sentence_each():
    engine = FakeEngine()
    b = await started(engine, max_batch_size=3)
    release = hold(b)
    big = b.submit(("m", 1), [(f"big{i}", 1) for i in range(6)], [1] * 6)
    small = b.submit(("m", 1), [("small0", 1), ("small1", 1)], [1, 1])
    release.set()
    await step_until(engine, lambda: small.future.done())
    # round-robin by request: the small request's two sentences run in the first two steps
    # although the big one's six were queued before them
    assert engine.names_in(0) == ["big0", "big1", "small0"]
    assert engine.names_in(1) == ["big2", "big3", "small1"]
    await step_until(engine, lambda: big.future.done())
    assert await b.wait(big) == [f"{i}gib" for i in range(6)]
    await b.stop(5)


async def test_the_tickets_of_one_owner_in_one_group_take_one_turn():
    """One client request whose texts go to one model by two routes (a text translated
    directly, another's second leg through the pivot language) is two tickets of one owner:
    beside a request of one ticket it takes one turn per round, not two."""
    engine = FakeEngine()
    b = await started(engine, max_batch_size=1)
    release = hold(b)
    owner = object()
    direct = b.submit(("m", 1), [(f"a{i}", 1) for i in range(3)], [1] * 3, owner)
    pivot = b.submit(("m", 2), [(f"c{i}", 1) for i in range(3)], [1] * 3, owner)
    other = b.submit(("m", 1), [(f"b{i}", 1) for i in range(3)], [1] * 3)
    release.set()
    await step_until(engine, lambda: all(t.future.done() for t in (direct, pivot, other)))
    order = [engine.names_in(i)[0] for i in range(len(engine.steps))]
    assert order == ["a0", "b0", "a1", "b1", "a2", "b2", "c0", "c1", "c2"]
    # each ticket is answered once its own sentences are: the first before the second
    assert [await b.wait(t) for t in (direct, pivot)] == [
        [f"{i}a" for i in range(3)],
        [f"{i}c" for i in range(3)],
    ]
    assert not b._owned  # nothing kept of an owner with nothing waiting or running
    await b.stop(5)


async def test_an_owners_ticket_is_answered_without_waiting_for_its_other_ticket():
    engine = FakeEngine()
    b = await started(engine, max_batch_size=2)
    release = hold(b)
    owner = object()
    short = b.submit(("m", 1), [("s", 1)], [1], owner)
    long = b.submit(("m", 1), [("l", 5)], [1], owner)
    release.set()
    await step_until(engine, short.future.done)
    assert await b.wait(short) == ["s"] and not long.future.done()
    # a ticket of the owner submitted after the others ran takes turns as theirs did
    later = b.submit(("m", 1), [("t", 1)], [1], owner)
    await step_until(engine, lambda: long.future.done() and later.future.done())
    assert await b.wait(later) == ["t"] and await b.wait(long) == ["l"]
    assert not b._owned
    await b.stop(5)


async def test_a_request_that_just_arrived_goes_before_the_rest_of_one_that_had_turns():
    """Turns go by the sentences a request has running, fewest first: a short request that
    arrives while a long one runs takes the next free place, not the long one's next sentence
    (it waits for no round of every request queued before it)."""
    engine = FakeEngine()
    b = await started(engine, max_batch_size=2)
    big = b.submit(("m", 1), [("big0", 1), ("big1", 3), ("big2", 1), ("big3", 1)], [1] * 4)
    await asyncio.to_thread(engine.wait_started, 1)  # step 0 runs big0 and big1
    small = b.submit(("m", 1), [("small", 1)], [1])
    await step_until(engine, small.future.done)
    assert await b.wait(small) == ["llams"]
    assert engine.names_in(0) == ["big0", "big1"]
    assert engine.names_in(1) == ["big1", "small"]  # big0's place went to the newcomer
    await step_until(engine, big.future.done)
    assert await b.wait(big) == ["0gib", "1gib", "2gib", "3gib"]
    assert engine.names_in(2) == ["big1", "big2"]
    await b.stop(5)


async def test_a_long_request_with_nothing_running_is_not_starved_by_newer_ones():
    """The turns count the sentences running now, not those served so far: once a long
    request's running sentences have finished it is the oldest with none running, and takes
    the next place before requests that came after it."""
    engine = FakeEngine()
    b = await started(engine, max_batch_size=2)
    big = b.submit(("m", 1), [("big0", 1), ("big1", 1), ("big2", 1), ("big3", 1)], [1] * 4)
    await asyncio.to_thread(engine.wait_started, 1)  # step 0 runs big0 and big1
    first = b.submit(("m", 1), [("first", 1)], [1])
    second = b.submit(("m", 1), [("second", 1)], [1])
    await step_until(engine, lambda: big.future.done() and second.future.done())
    assert engine.names_in(0) == ["big0", "big1"]
    assert engine.names_in(1) == ["big2", "first"]
    assert engine.names_in(2) == ["big3", "second"]
    assert [await b.wait(t) for t in (first, second)] == [["tsrif"], ["dnoces"]]
    await b.stop(5)


async def test_a_newcomer_waits_one_round_not_for_older_requests_to_finish():
    """Round-robin by request: a request that had a turn goes behind every request waiting
    since before that turn, so a newcomer waits for one round of the requests before it, even
    where their sentences finish at every step and leave them with none running, as the
    newcomer has."""
    engine = FakeEngine()
    b = await started(engine, max_batch_size=1)
    release = hold(b)
    first = b.submit(("m", 1), [(f"a{i}", 1) for i in range(4)], [1] * 4)
    second = b.submit(("m", 1), [(f"b{i}", 1) for i in range(4)], [1] * 4)
    release.set()
    await step_until(engine, lambda: len(engine.steps) >= 3)  # a0, b0, a1 (waiting to run)
    late = b.submit(("m", 1), [("late", 1)], [1])
    await step_until(engine, lambda: all(t.future.done() for t in (first, second, late)))
    order = [engine.names_in(i)[0] for i in range(len(engine.steps))]
    # after a1: b (its turn came before a1's), a (a1's), then the newcomer
    assert order == ["a0", "b0", "a1", "b1", "a2", "late", "b2", "a3", "b3"]
    assert await b.wait(late) == ["etal"]
    await b.stop(5)


async def test_turns_follow_the_running_counts_as_they_are_when_a_place_frees():
    """A request's turn moves as its running sentences finish: the older request had more
    running until the step that finished one of its sentences, and then the place that
    freed goes to the other."""
    engine = FakeEngine()
    b = await started(engine, max_batch_size=4)
    release = hold(b)
    older = b.submit(("m", 1), [("b0", 9), ("b1", 9), ("b2", 9)], [1] * 3)
    newer = b.submit(("m", 1), [("a0", 1), ("a1", 9), ("a2", 9)], [1] * 3)
    release.set()
    await step_until(engine, lambda: len(engine.steps) >= 2)
    assert engine.names_in(0) == ["a0", "a1", "b0", "b1"]  # two each, by turns
    # a0 finished: the newer request has one running, the older two; the place goes to a2
    assert engine.names_in(1) == ["a1", "a2", "b0", "b1"]
    await step_until(engine, lambda: older.future.done() and newer.future.done())
    await b.stop(5)


async def test_each_group_runs_at_most_its_places_and_never_more_than_max_batch_size():
    """`places(group)` bounds a group's running sentences (the service derives it from a
    bound on decoder rows, so a wider beam gets fewer places); max_batch_size still caps it."""
    engine = FakeEngine(free_steps=True)
    b = await started(engine, max_batch_size=3, places={"one": 1, "two": 2, "many": 9}.get)
    release = hold(b)
    tickets = {
        g: b.submit((g, 1), [(f"{g}{i}", 2) for i in range(4)], [1] * 4)
        for g in ("one", "two", "many")
    }
    release.set()
    answers = {g: await b.wait(t) for g, t in tickets.items()}
    assert answers["two"] == [f"{i}owt" for i in range(4)]
    most = {g: max(len(names) for group, names in engine.steps if group == g) for g in tickets}
    assert most == {"one": 1, "two": 2, "many": 3}
    await b.stop(5)


async def test_the_budget_bounds_what_runs_and_a_lone_sentence_always_runs():
    engine = FakeEngine()
    b = await started(engine, budget=10)
    huge = b.submit(("m", 1), [("huge", 2)], [50])  # over the budget alone: runs, alone
    rest = b.submit(("m", 1), [("a", 1), ("b", 1), ("c", 1)], [4, 4, 4])
    await step_until(engine, lambda: rest.future.done())
    assert engine.names_in(0) == engine.names_in(1) == ["huge"]
    assert engine.names_in(2) == ["a", "b"]  # 4 + 4 <= 10, + 4 > 10
    assert engine.names_in(3) == ["c"]
    assert huge.future.done()
    await b.stop(5)


async def test_a_sentence_the_budget_keeps_out_is_not_overtaken_by_another_groups_newcomers():
    """The budget is shared by the groups (models, beam sizes): a sentence that does not fit
    beside a busy group's running ones waits for that group to drain, and the group's
    newcomers that came after it do not take the room its finished sentences free (they
    would, for as long as they kept coming)."""
    engine = FakeEngine()
    b = await started(engine, budget=10)
    running = b.submit(("a", 1), [("a1", 3), ("a2", 6)], [4, 4])  # 8 of 10, one ends first
    engine.wait_started(1)
    other = b.submit(("b", 1), [("b1", 1)], [7])  # 8 + 7 > 10: waits
    later = b.submit(("a", 1), [("a3", 3), ("a4", 3)], [4, 4])  # would fit beside a2
    await step_until(engine, lambda: later.future.done())
    assert other.future.done() and running.future.done()
    first = {name: i for i, (_, names) in reversed(list(enumerate(engine.steps))) for name in names}
    assert first["b1"] < first["a3"], engine.steps
    assert all(not ({"b1"} & set(names) and {"a2"} & set(names)) for _, names in engine.steps)
    await b.stop(5)


async def test_a_request_of_another_group_takes_its_turn_beside_a_long_request():
    """The groups (models, beam sizes) share the budget and their waiting requests take turns in
    one order: a request of one sentence for another model joins where the first places free,
    beside the long request's next sentence, not after its every sentence."""
    engine = FakeEngine()
    b = await started(engine, budget=4, max_batch_size=8)  # 4 sentences of cost 1 at once
    release = hold(b)
    long = b.submit(("b", 1), [(f"b{i}", 2) for i in range(12)], [1] * 12)
    release.set()
    await asyncio.to_thread(engine.wait_started, 1)  # b0..b3 run, the budget is full
    short = b.submit(("a", 1), [("short", 1)], [1])
    await step_until(engine, short.future.done)
    assert await b.wait(short) == ["trohs"]
    # b0..b3 end with step 1; the four places go to b4 (its request's turn came before the
    # short one arrived), the short request, b5 and b6; b7 waits for a place
    assert [engine.joined[n] for n in ("b4", "short", "b5", "b6")] == [2, 2, 2, 2]
    await step_until(engine, long.future.done)
    assert await b.wait(long) == [f"b{i}"[::-1] for i in range(12)]
    assert engine.joined["b7"] > engine.joined["short"]
    await b.stop(5)


async def test_a_later_request_of_another_group_does_not_join_before_a_sentence_kept_out():
    """A sentence the budget keeps out is not overtaken: a request that comes after it joins
    no earlier, even in the group whose finished sentences free the budget."""
    engine = FakeEngine()
    b = await started(engine, budget=4, max_batch_size=8)
    release = hold(b)
    old = b.submit(("b", 1), [(f"old{i}", 3) for i in range(10)], [1] * 10)  # 4 run, 6 wait
    release.set()
    await asyncio.to_thread(engine.wait_started, 1)
    kept_out = b.submit(("a", 1), [("kept", 1)], [1])  # waits: the budget is full
    later = b.submit(("b", 1), [("later", 1)], [1])  # after it, for the busy group
    await step_until(engine, lambda: kept_out.future.done() and later.future.done())
    assert engine.joined["kept"] <= engine.joined["later"]
    await step_until(engine, old.future.done)
    await b.stop(5)


async def test_a_group_full_or_between_joins_keeps_no_other_groups_sentence_out():
    """A request whose group takes no newcomer now (its places are full, or its next join is
    steps away) does not hold back the requests of other groups whose turns come after it."""
    engine = FakeEngine()
    b = await started(engine, join_every=3, places={"full": 1, "m": 8, "n": 8}.get)
    release = hold(b)
    running = b.submit(("full", 1), [("f0", 4)], [1])
    full = b.submit(("full", 1), [("f1", 1)], [1])  # no place: it waits for f0 to end
    long = b.submit(("m", 1), [("long", 6)], [1])
    release.set()
    await asyncio.to_thread(engine.wait_started, 1)
    between = b.submit(("m", 1), [("m1", 1)], [1])  # waits for the next join of "m"
    other = b.submit(("n", 1), [("n1", 1)], [1])  # its turn comes after f1's and m1's
    await step_until(engine, other.future.done)
    assert engine.joined["n1"] == 1  # at the first admission after it came
    await step_until(engine, lambda: all(t.future.done() for t in (running, full, long, between)))
    assert engine.joined["m1"] > 1 and engine.joined["f1"] > 1
    await b.stop(5)


async def test_a_request_waiting_for_its_decodes_next_join_keeps_its_budget():
    """A request whose decode takes newcomers only every few steps (MT_JOIN_EVERY_STEPS) keeps
    the budget its sentence needs until that join: a request of another group whose turn
    comes after it does not take it meanwhile (it did, and the first waited for the budget to
    free again, while later ones of other groups could take it each time)."""
    engine = FakeEngine()
    b = await started(engine, join_every=4, budget=2)
    first = b.submit(("x", 1), [("long", 12)], [1])
    await asyncio.to_thread(engine.wait_started, 1)  # x runs, its next join 4 steps away
    waiting = b.submit(("x", 1), [("x2", 1)], [1])
    later = b.submit(("y", 1), [("y1", 1)], [1])  # room for one more sentence: x2's turn
    await step_until(engine, lambda: waiting.future.done() and later.future.done())
    assert engine.joined["x2"] < engine.joined["y1"]
    assert engine.joined["x2"] == 4  # at its decode's next join
    await step_until(engine, first.future.done)
    await b.stop(5)


async def test_the_running_count_is_reported_every_step_not_only_when_a_request_ends():
    """mt_running_sentences follows a long request's decode as it runs (it read 0 for seconds
    while a request of many sentences decoded, when it was set only as requests ended)."""
    engine = FakeEngine()
    counts: list[int] = []
    b = await started(engine, on_running=counts.append)
    ticket = b.submit(("m", 1), [("x", 9), ("y", 9), ("z", 9)], [1, 1, 1])
    engine.allow(3)
    engine.wait_started(4)  # three steps done, the fourth waits
    await until(lambda: counts and counts[-1] == 3)
    assert not ticket.future.done()
    engine.allow(100)
    await b.wait(ticket)
    await until(lambda: counts[-1] == 0)
    await b.stop(5)


async def test_kept_memory_counts_and_is_released_for_another_group():
    """What the engine keeps of a group between its decodes (MT_CUDA_GRAPHS) counts against
    the budget: the group's own sentences reuse it; another group's sentence that would not
    fit beside it gets it released first, never while that group runs on it; with nothing
    kept, nothing is released."""
    engine = FakeEngine(free_steps=True)
    kept = {"a": 8}  # groups are the keys' first items here
    released = []
    b = None

    def release(group):
        released.append((group, group in b._running))  # (under the lock, on the worker)
        kept.pop(group)

    def held(group, members):  # as the engine's: at least what the group's buffers hold
        return max(envelope(group, members), kept.get(group, 0))

    b = await started(engine, budget=10, envelope=held, kept=lambda: dict(kept), release=release)
    own = b.submit(("a", 1), [("x", 1)], [8])  # 8, in place of the 8 kept: fits
    await asyncio.wait_for(own.future, 10)
    assert released == []
    other = b.submit(("b", 1), [("y", 1)], [3])  # 8 kept + 3 > 10: the kept 8 go first
    await asyncio.wait_for(other.future, 10)
    assert released == [("a", False)]
    small = b.submit(("c", 1), [("z", 1)], [2])  # nothing kept now: fits as is
    await asyncio.wait_for(small.future, 10)
    assert released == [("a", False)]
    kept["a"] = 6
    release_hold = hold(b)
    again = b.submit(("a", 1), [("u", 3)], [6])  # runs on its 6 kept
    blocked = b.submit(("b", 1), [("v", 1)], [5])  # 6 + 5 > 10: not while "a" runs on them
    release_hold.set()
    await asyncio.wait_for(asyncio.gather(again.future, blocked.future), 10)
    assert released == [("a", False), ("a", False)]  # once "a" ended
    with pytest.raises(ValueError, match="together"):
        ContinuousBatcher(engine.open, lambda key: key[0], envelope=envelope, budget=10, kept=dict)
    await b.stop(5)


async def test_kept_memory_is_released_only_where_that_lets_a_sentence_in():
    """A sentence that would not fit even with every kept decode released (a running group
    holds the rest) releases nothing; a lone sentence over the budget, with only kept decodes
    in its way, releases them all and runs alone."""
    engine = FakeEngine()
    kept = {"k1": 3, "k2": 3}
    released = []

    def release(group):
        released.append(group)
        kept.pop(group)

    b = await started(engine, budget=10, kept=lambda: dict(kept), release=release)
    release_hold = hold(b)
    long = b.submit(("r", 1), [("long", 3)], [6])  # 6 running + 3 + 3 kept = 12 > 10: fits alone
    blocked = b.submit(("x", 1), [("x", 1)], [5])  # 6 + 5 > 10 even with nothing kept
    release_hold.set()
    await step_until(engine, lambda: long.future.done())
    assert released == ["k1"]  # "long" needed 2 of the 6 kept: one released
    await step_until(engine, lambda: blocked.future.done())
    assert released == ["k1"]  # "x" waited for "long", then fitted beside the 3 still kept
    huge = b.submit(("h", 1), [("huge", 1)], [20])  # over the budget alone
    await step_until(engine, lambda: huge.future.done())
    assert released == ["k1", "k2"]
    await b.stop(5)


async def test_kept_memory_released_for_another_group_is_not_counted_off_twice():
    """A group whose kept buffers were released for another group's sentence, earlier in the
    same admission, has nothing kept any more: its own sentence counts in full, and waits
    where it does not fit beside the other's."""
    engine = FakeEngine()
    kept = {"a": 6}
    released = []

    def release(group):
        released.append(group)
        kept.pop(group)

    def held(group, members):  # as the engine's: at least what the group's buffers hold
        return max(envelope(group, members), kept.get(group, 0))

    b = await started(engine, budget=10, envelope=held, kept=lambda: dict(kept), release=release)
    release_hold = hold(b)
    first = b.submit(("b", 1), [("y", 1)], [5])  # 6 kept + 5 > 10: the kept 6 go
    second = b.submit(("a", 1), [("x", 1)], [6])  # 5 + 6 > 10: waits for "y"
    release_hold.set()
    await step_until(engine, lambda: first.future.done() and second.future.done())
    assert released == ["a"]
    assert engine.joined["x"] > engine.joined["y"]
    assert all(names in (["x"], ["y"]) for _, names in engine.steps)
    await b.stop(5)


async def test_a_deadline_removes_a_running_sentence_at_the_next_step():
    engine = FakeEngine()
    b = await started(engine)
    release = hold(b)
    slow = b.submit(("m", 1), [("slow", 100), ("slow2", 100)], [1, 1])
    other = b.submit(("m", 1), [("other", 3)], [1])
    release.set()
    await asyncio.to_thread(engine.wait_started, 1)
    with pytest.raises(DeadlineExceeded) as caught:
        await b.wait(slow, timeout=0.01)
    assert caught.value.dropped == 2  # its two sentences, both running
    assert str(caught.value) == "deadline exceeded; 2 unfinished sentence(s) dropped"
    await step_until(engine, other.future.done)
    assert engine.names_in(0) == ["other", "slow", "slow2"]
    assert engine.names_in(1) == engine.names_in(2) == ["other"]
    assert await b.wait(other) == ["rehto"]
    await b.stop(5)


@pytest.mark.parametrize("newcomer_group", ["m", "n"])
async def test_a_sentence_removed_while_newcomers_join_takes_no_step_more(newcomer_group):
    """A client that goes away while newcomers join (their encoder runs between two steps):
    its sentence takes no step after that, whether the newcomers join its decode or another
    (where it ran alone, its decode then ends without a step)."""
    joining, go = threading.Event(), threading.Event()
    calls = {"n": 0}

    def between(group):  # each join and leave
        calls["n"] += 1
        if calls["n"] == 2:  # the second join: the newcomer's
            joining.set()
            assert go.wait(10)

    engine = FakeEngine(between=between)
    b = await started(engine)
    gone = b.submit(("m", 1), [("gone", 20)], [1])
    await asyncio.to_thread(engine.wait_started, 1)  # step 0 under way
    newcomer = b.submit((newcomer_group, 1), [("new", 2)], [1])
    engine.allow(1)  # step 0 ends; the newcomer's join starts and is held
    assert await asyncio.to_thread(joining.wait, 10)
    assert b.cancel(gone) == 1  # the client goes away during the join
    go.set()
    await step_until(engine, newcomer.future.done)
    assert await b.wait(newcomer) == ["wen"]
    assert [names for _, names in engine.steps[1:]] == [["new"], ["new"]]
    assert b.running == 0
    await b.stop(5)


def fake_clock(monkeypatch, seconds: dict):
    """The scheduler's perf_counter becomes a clock that only the fake engine's joins and
    leaves move, by `seconds[group]` each: ([the time], the FakeEngine `between` that moves it)."""
    clock = [0.0]
    monkeypatch.setattr(
        "app.continuous.time",
        types.SimpleNamespace(perf_counter=lambda: clock[0], monotonic=time.monotonic),
    )

    def between(group):
        clock[0] += seconds[group]

    return clock, between


async def test_a_steps_reported_time_counts_the_joins_and_leaves_before_it(monkeypatch):
    """mt_batch_compute_seconds under continuous scheduling: the newcomers' encoder (a join)
    and a leave are the engine's work too, counted in the report of that group's next step,
    so that the compute seconds over wall time give how busy the engine was. The scheduler's
    clock is a fake one that only joins and leaves move (group "m" by 1 s, "n" by 10 s): the
    steps themselves take no time on it."""
    _, between = fake_clock(monkeypatch, {"m": 1.0, "n": 10.0})
    engine = FakeEngine(between=between)
    reports = []
    b = await started(engine, on_batch=reports.append)
    release = hold(b)
    gone = b.submit(("m", 1), [("gone", 100)], [1])
    stays = b.submit(("m", 1), [("stays", 3)], [1])
    other = b.submit(("n", 1), [("other", 1)], [1])
    release.set()
    await asyncio.to_thread(engine.wait_started, 1)  # each group joined, "m" steps first
    b.cancel(gone)  # leaves "m" before its second step
    await step_until(engine, lambda: stays.future.done() and other.future.done())
    assert await b.wait(stays) == ["syats"] and await b.wait(other) == ["rehto"]
    await until(lambda: len(reports) == 4)
    times = [(r.key, r.size, r.compute_s) for r in reports]
    assert times == [("m", 2, 1.0), ("n", 1, 10.0), ("m", 1, 1.0), ("m", 1, 0.0)]
    await b.stop(5)


async def test_the_time_of_a_leave_that_ends_a_group_is_reported_at_once(monkeypatch):
    """A leave that empties its group has no step of that group after it: its time is reported
    on its own (a report of size 0) when the group ends, before the scheduler goes idle. The
    fake clock moves only in joins and leaves ("m" 1 s, "n" 10 s)."""
    _, between = fake_clock(monkeypatch, {"m": 1.0, "n": 10.0})
    engine = FakeEngine(between=between)
    reports = []
    b = await started(engine, on_batch=reports.append)
    gone = b.submit(("m", 1), [("gone", 100)], [1])
    await asyncio.to_thread(engine.wait_started, 1)  # "m" joined and started its first step
    assert b.cancel(gone) == 1
    engine.allow()  # the step ends; the leave then empties "m", and nothing is left to do
    await until(lambda: len(reports) == 2)
    assert [(r.key, r.size, r.compute_s) for r in reports] == [("m", 1, 1.0), ("m", 0, 1.0)]
    other = b.submit(("n", 1), [("other", 1)], [1])
    await step_until(engine, other.future.done)
    assert await b.wait(other) == ["rehto"]
    await until(lambda: len(reports) == 3)
    assert (reports[2].key, reports[2].size, reports[2].compute_s) == ("n", 1, 10.0)
    await b.stop(5)


async def test_a_failed_steps_report_counts_the_joins_before_it(monkeypatch):
    """A step that raises fails its group; its report still counts the engine's joins before
    it (here 1 s on a fake clock that only joins and leaves move)."""
    _, between = fake_clock(monkeypatch, {"x": 1.0})
    engine = FakeEngine(free_steps=True, between=between)
    reports = []
    b = await started(engine, on_batch=reports.append)
    bad = b.submit(("x", 1), [("bad-step", 3)], [1])
    with pytest.raises(BatchFailed):
        await b.wait(bad, 10)
    await until(lambda: len(reports) == 1)
    assert (reports[0].size, reports[0].compute_s, reports[0].failed) == (1, 1.0, True)
    await b.stop(5)


async def test_the_queue_wait_of_a_sentence_that_joined_is_reported_with_no_step_after():
    """mt_queue_wait_seconds counts every sentence that left the queue: those of a join that
    raised, with the failure's report, and those that left their decode before its first step,
    with the report of the decode's end (both were reported with a next step only: lost)."""
    engine = FakeEngine(free_steps=True)
    reports = []
    b = await started(engine, on_batch=reports.append)
    release = hold(b)
    failed = b.submit(("m", 1), [("bad-join", 1), ("ok", 1)], [1, 1])
    release.set()
    with pytest.raises(BatchFailed):
        await b.wait(failed, 5)
    await until(lambda: any(r.failed for r in reports))
    assert [(r.size, r.failed, len(r.queue_waits_s)) for r in reports] == [(2, True, 2)]
    await b.stop(5)

    engine = FakeEngine()
    reports = []
    b = await started(engine, on_batch=reports.append)
    release = hold(b)
    y = b.submit(("y", 1), [("y", 3)], [1])
    x = b.submit(("x", 1), [("x", 3)], [1])  # joins decode x, which steps after y's
    release.set()
    await asyncio.to_thread(engine.wait_started, 1)  # y's step: x has joined, not stepped
    assert engine.steps[0][0] == "y"
    assert b.cancel(x) == 1  # x leaves before its decode's first step: the decode ends
    await step_until(engine, y.future.done)
    await until(lambda: sum(len(r.queue_waits_s) for r in reports) == 2)
    assert sorted((r.key, r.size, len(r.queue_waits_s)) for r in reports) == [
        ("x", 0, 1),
        ("y", 1, 0),
        ("y", 1, 0),
        ("y", 1, 1),
    ]
    await b.stop(5)


async def test_cancel_drops_running_and_waiting_sentences():
    engine = FakeEngine()
    b = await started(engine, max_batch_size=1)
    release = hold(b)
    first = b.submit(("m", 1), [("first", 50)], [1])
    second = b.submit(("m", 1), [("second", 1)], [1])
    release.set()
    await asyncio.to_thread(engine.wait_started, 1)
    assert b.depth == 1  # the second waits: the group is full
    assert b.cancel(first) == 1
    await step_until(engine, second.future.done)
    assert engine.names_in(1) == ["second"]
    assert b.depth == 0 and b.running == 0
    await b.stop(5)


async def test_a_full_queue_rejects_at_once():
    engine = FakeEngine()
    b = await started(engine, max_batch_size=1, max_queue_size=3)
    b.submit(("m", 1), [("a", 5)], [1])
    b.submit(("m", 1), [("b", 5), ("c", 5)], [1, 1])
    with pytest.raises(QueueFull):
        b.submit(("m", 1), [("d", 1), ("e", 1)], [1, 1])
    engine.allow(100)
    await b.stop(5)


async def test_an_engine_failure_fails_its_group_only():
    engine = FakeEngine(free_steps=True)
    b = await started(engine)
    bad = b.submit(("x", 1), [("bad-step", 3)], [1])
    good = b.submit(("y", 1), [("fine", 3)], [1])
    with pytest.raises(BatchFailed):
        await b.wait(bad, 10)
    assert await b.wait(good, 10) == ["enif"]
    bad_join = b.submit(("x", 1), [("bad-join", 1)], [1])
    with pytest.raises(BatchFailed):
        await b.wait(bad_join, 10)
    again = b.submit(("x", 1), [("again", 2)], [1])
    assert await b.wait(again, 10) == ["niaga"]
    assert b.problem() is None
    await b.stop(5)


async def test_newcomers_that_cannot_join_fail_alone_and_the_decode_goes_on():
    """A join whose newcomers failed before it changed the decode (their encoder out of memory,
    NewcomersFailed): those newcomers' requests fail, with their queue waits reported; the
    sentences already decoding finish as if the join had not been tried, and later newcomers
    join the same decode."""
    engine = FakeEngine()
    reports = []
    b = await started(engine, on_batch=reports.append)
    running = b.submit(("x", 1), [("long", 4)], [1])
    await asyncio.to_thread(engine.wait_started, 1)
    refused = b.submit(("x", 1), [("no-room", 1), ("with-it", 1)], [1, 1])
    engine.allow()  # the first step ends; the join of the two fails before the next
    with pytest.raises(BatchFailed):
        await b.wait(refused, 10)
    later = b.submit(("x", 1), [("later", 1)], [1])
    await step_until(engine, lambda: running.future.done() and later.future.done())
    assert await b.wait(running) == ["gnol"] and await b.wait(later) == ["retal"]
    assert engine.opened == ["x"]  # one decode all along
    assert [name for _, names in engine.steps for name in names].count("long") == 4
    failed = [r for r in reports if r.failed]
    assert [(r.size, len(r.queue_waits_s)) for r in failed] == [(2, 2)]
    assert b.problem() is None and b.running == 0 and b.depth == 0
    await b.stop(5)


async def test_a_request_whose_newcomers_failed_has_its_other_sentences_dropped():
    """A request answered with a failure (a sentence of it could not join, NewcomersFailed)
    decodes nothing more: its sentence running leaves the decode before the next step, and
    its sentence still waiting never joins (both went on, for an answer nobody reads); a
    later request is decoded as usual, and every count is back at zero."""
    engine = FakeEngine()
    b = await started(engine, max_batch_size=2)
    release = hold(b)
    t = b.submit(("x", 1), [("a", 6), ("b", 1), ("no-room", 1), ("c", 4)], [1] * 4, "p")
    release.set()
    await step_until(engine, t.future.done)  # a and b step; no-room's join fails after
    with pytest.raises(BatchFailed):
        await b.wait(t, 10)
    later = b.submit(("x", 1), [("later", 2)], [1])
    await step_until(engine, later.future.done)
    assert await b.wait(later) == ["retal"]
    stepped = [name for _, names in engine.steps for name in names]
    assert stepped.count("a") == 1 and "c" not in engine.joined
    await until(b._idle.is_set)
    assert b.depth == 0 and b.running == 0 and not b._waiting and not b._owned
    assert all(s.state in ("done", "dropped") for s in t.items)
    await b.stop(5)


async def test_a_request_whose_decode_failed_has_its_waiting_sentences_dropped():
    """A decode whose step raised fails its requests; their sentences still waiting for a
    place never join (they were decoded after the request's 500)."""
    engine = FakeEngine(free_steps=True)
    b = await started(engine, max_batch_size=1)
    release = hold(b)
    t = b.submit(("x", 1), [("bad-step", 3), ("w", 1)], [1, 1])
    release.set()
    with pytest.raises(BatchFailed):
        await b.wait(t, 10)
    after = b.submit(("x", 1), [("after", 1)], [1])
    assert await b.wait(after, 10) == ["retfa"]
    assert "w" not in engine.joined
    assert b.depth == 0 and b.running == 0 and b.problem() is None
    await b.stop(5)


async def test_a_newcomer_that_cannot_join_fails_alone_beside_those_that_joined_with_it():
    """A join of which some newcomers joined and some did not (NewcomersFailed naming those):
    only their requests fail; the others of the join decode, and their waits are reported
    with the step as usual, the failed ones' with the failure."""
    engine = FakeEngine()
    reports = []
    b = await started(engine, on_batch=reports.append)
    release = hold(b)
    fine = b.submit(("x", 1), [("fine", 2)], [1])
    large = b.submit(("x", 1), [("too-large", 2)], [1])
    release.set()
    with pytest.raises(BatchFailed):
        await b.wait(large, 10)
    await step_until(engine, fine.future.done)
    assert await b.wait(fine) == ["enif"]
    assert [names for _, names in engine.steps] == [["fine"], ["fine"]]
    await until(lambda: sum(len(r.queue_waits_s) for r in reports) == 2)
    assert [(r.size, len(r.queue_waits_s)) for r in reports if r.failed] == [(1, 1)]
    assert b.running == 0 and b.depth == 0 and b.problem() is None
    await b.stop(5)


async def test_a_group_opened_again_after_a_failure_takes_one_turn_per_round():
    """A decode whose step raised is gone from the groups' turns: the next decode of its group
    steps once per round beside the others (it stepped twice per round)."""
    engine = FakeEngine()
    b = await started(engine)
    release = hold(b)
    bad = b.submit(("x", 1), [("bad-step", 3)], [1])
    other = b.submit(("y", 1), [("y-long", 100)], [1])
    release.set()
    await asyncio.to_thread(engine.wait_started, 1)  # x's first step: it raises
    assert engine.steps[0][0] == "x"
    again = b.submit(("x", 1), [("x-long", 100)], [1])  # waits meanwhile, for group x
    await step_until(engine, bad.future.done)
    with pytest.raises(BatchFailed):
        await b.wait(bad)
    start = len(engine.steps)
    await step_until(engine, lambda: len(engine.steps) >= start + 13)
    order = "".join(group for group, _ in engine.steps[start + 1 : start + 13])
    assert order in ("xy" * 6, "yx" * 6), order
    b.cancel(again)
    b.cancel(other)
    engine.allow(1000)
    await b.stop(5)


async def test_stop_finishes_what_was_accepted_and_refuses_more():
    engine = FakeEngine(free_steps=True)
    b = await started(engine)
    t = b.submit(("m", 1), [("a", 3), ("b", 5)], [1, 1])
    await b.stop(10)
    assert t.future.result() == ["a", "b"]
    with pytest.raises(ShuttingDown):
        b.submit(("m", 1), [("c", 1)], [1])


async def test_stop_timeout_fails_what_is_left():
    engine = FakeEngine()
    b = await started(engine, max_batch_size=1)
    release = hold(b)
    running = b.submit(("m", 1), [("r", 1000)], [1])
    waiting = b.submit(("m", 1), [("w", 1)], [1])
    release.set()
    await asyncio.to_thread(engine.wait_started, 1)
    stopping = asyncio.create_task(b.stop(0.05))
    await until(running.future.done)
    engine.allow(10)  # the worker finishes the step it may be in, then sees it must stop
    assert await stopping == 2
    for t in (running, waiting):
        with pytest.raises(ShuttingDown):
            t.future.result()


async def test_a_scheduler_failure_fails_everything_and_says_why():
    engine = FakeEngine(free_steps=True)

    def broken_envelope(group, members):
        raise ValueError("broken envelope")

    b = await started(engine, envelope=broken_envelope)
    t = b.submit(("m", 1), [("a", 1)], [1])
    with pytest.raises(BatchFailed):
        await b.wait(t, 10)
    assert "broken envelope" in b.problem()
    assert b.cancel(t) == 0 and b.depth == 0  # its sentence failed with the rest: nothing left
    with pytest.raises(ShuttingDown):
        b.submit(("m", 1), [("b", 1)], [1])
    await b.stop(1)


async def test_a_ticket_removed_after_a_scheduler_failure_has_nothing_left_to_drop():
    """After the scheduler's loop failed, a client that goes away (or whose deadline passes)
    has its ticket removed like any other: nothing is left to drop, running or waiting (the
    removal of a ticket whose sentence was running raised KeyError)."""
    engine = FakeEngine()

    b = await started(engine, envelope=envelope_with_a_bug)
    first = b.submit(("m", 1), [("long", 50)], [1])
    await asyncio.to_thread(engine.wait_started, 1)  # it runs
    second = b.submit(("m", 1), [("short", 1)], [1])
    engine.allow(1)
    await failed_with_the_loop(b, first, second)


@pytest.mark.parametrize("fault", ["envelope", "open_group"])
async def test_a_scheduler_failure_in_admission_fails_the_sentences_it_had_admitted(fault):
    """The loop fails in the middle of an admission, after a sentence was admitted and before
    it was in a decode (the envelope of the next sentence, or opening its decode, raised): its
    request fails with the others (it was in neither the queue nor a decode, so it was never
    answered, its deadline could not remove it and a removal raised KeyError)."""
    engine = FakeEngine(free_steps=True)
    options = {}
    if fault == "envelope":
        options["envelope"] = envelope_with_a_bug
    b = await started(engine, **options)
    if fault == "open_group":

        def open_group(group):
            raise RuntimeError("injected fault in the loop")

        b.open_group = open_group
    release = hold(b)
    first = b.submit(("m", 1), [("one", 1)], [1])
    second = b.submit(("m", 1), [("two", 1)], [1])  # in the same admission
    release.set()
    await until(lambda: first.future.done() and second.future.done())
    await failed_with_the_loop(b, first, second)


async def test_newcomers_failed_raised_by_a_step_fails_that_decode_only():
    """NewcomersFailed out of a step (not a join) fails the decode as any other error of its
    step: the scheduler goes on (it stopped, every request failing)."""
    engine = FakeEngine(free_steps=True)
    b = await started(engine)
    bad = b.submit(("x", 1), [("no-room-step", 2)], [1])
    with pytest.raises(BatchFailed):
        await b.wait(bad, 10)
    assert b.problem() is None
    again = b.submit(("x", 1), [("again", 2)], [1])
    assert await b.wait(again, 10) == ["niaga"]
    await b.stop(5)


@pytest.mark.parametrize("bounded", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_any_mix_of_requests_and_cancels_ends_with_every_count_back_at_zero(seed, bounded):
    """Requests of 1-6 sentences in two groups, a third of them cancelled at random moments
    (waiting, running or done), some of them tickets of one owner: every request not
    cancelled gets its results in order, and at the end nothing waits, runs or is held back,
    and every request's count of running sentences is 0. Also with bounded steps that give
    way to sentences waiting 3 ms."""
    import random

    rng = random.Random(seed)
    engine = FakeEngine(free_steps=True, delay=0.001)
    bound = dict(step_places=lambda group: 2, step_wait=0.003) if bounded else {}
    b = await started(engine, max_batch_size=5, max_queue_size=1000, **bound)
    tickets, cancelled = [], set()
    for n in range(60):
        group = rng.choice(("x", "y"))
        items = [(f"{group}{n}s{i}", rng.randint(1, 5)) for i in range(rng.randint(1, 6))]
        owner = rng.choice((None, None, "p", "q"))
        tickets.append((b.submit((group, 1), items, [1] * len(items), owner), items))
        if rng.random() < 0.5:
            await asyncio.sleep(rng.choice((0, 0.001, 0.002, 0.005)))
        if rng.random() < 0.3:
            victim = rng.randrange(len(tickets))
            b.cancel(tickets[victim][0])
            cancelled.add(victim)
    for i, (ticket, items) in enumerate(tickets):
        if i not in cancelled:
            assert await b.wait(ticket, 10) == [name[::-1] for name, _ in items]
    await until(b._idle.is_set)  # the worker's loop has seen the last step and ended
    assert b.depth == 0 and b.running == 0 and not b._waiting and not b._running
    assert not b._owned
    assert all(s.request.running == 0 for ticket, _ in tickets for s in ticket.items)
    # every request not cancelled has all its sentences finished, and no answer is held back
    for i, (ticket, _) in enumerate(tickets):
        assert i in cancelled or ticket.items[0].request.left == 0
    assert b._held == []
    if bounded:  # the bound gave way while sentences had waited (the queue held dozens)
        assert max(len(names) for _, names in engine.steps) > 2
    await b.stop(5)


async def test_a_bounded_step_goes_to_the_request_with_fewest_sentences_left():
    """step_places(group) = 2: a request of one sentence steps in every step beside a long
    request of four, whose sentences take the other place in turn (the least recently stepped
    first); all finish, each after its own number of steps."""
    engine = FakeEngine(free_steps=True)
    b = await started(engine, step_places=lambda group: 2)
    release = hold(b)
    long = b.submit(("m", 1), [(f"l{i}", 3) for i in range(4)], [1] * 4)
    short = b.submit(("m", 1), [("s", 2)], [1])  # after the long one, ahead in each step
    release.set()
    assert await b.wait(short) == ["s"]
    assert await b.wait(long) == [f"{i}l" for i in range(4)]
    steps = [names for _, names in engine.steps]
    assert steps[:2] == [["l0", "s"], ["l1", "s"]]
    assert steps[2:] == [["l2", "l3"], ["l0", "l1"], ["l2", "l3"], ["l0", "l1"], ["l2", "l3"]]
    await b.stop(5)


async def test_in_a_bounded_step_a_sentence_that_sat_out_long_enough_goes_first():
    """Two places, a short request beside a long one of 8 sentences: the short one steps in
    every step and the long one's take the other place in turn, until those that sat out more
    than STEP_PATIENCE steps go first, ahead of the short one; no sentence is starved."""
    from app.continuous import STEP_PATIENCE

    assert STEP_PATIENCE == 5  # the steps below
    engine = FakeEngine(free_steps=True)
    b = await started(engine, step_places=lambda group: 2, max_batch_size=16)
    release = hold(b)
    long = b.submit(("m", 1), [(f"a{i}", 3) for i in range(8)], [1] * 8)
    short = b.submit(("m", 1), [("b", 12)], [1])
    release.set()
    await b.wait(short)
    await b.wait(long)
    steps = [names for _, names in engine.steps]
    assert steps[:5] == [[f"a{i}", "b"] for i in range(5)]
    assert steps[5] == ["a5", "a6"]  # they sat out steps 1-5: ahead of the short request
    assert steps[6] == ["a0", "a7"]  # a0 last stepped in step 1
    assert steps[7] == ["a1", "b"]
    # nobody waits long: at most 6 steps in a row sat out here (STEP_PATIENCE + 1), where the
    # overdue ones do not always fit in the two places and so take turns
    for name in [f"a{i}" for i in range(8)] + ["b"]:
        mine = [-1] + [i for i, names in enumerate(steps) if name in names]
        assert max(y - x - 1 for x, y in zip(mine, mine[1:], strict=False)) <= 6, (name, mine)
    await b.stop(5)


async def test_in_a_bounded_step_the_least_recently_stepped_go_first():
    """Five requests of one sentence, two places per step: they take turns, none waits more
    than two steps for its next."""
    engine = FakeEngine(free_steps=True)
    b = await started(engine, step_places=lambda group: 2)
    release = hold(b)
    tickets = [b.submit(("m", 1), [(name, 4)], [1]) for name in "abcde"]
    release.set()
    assert [await b.wait(t) for t in tickets] == [[name] for name in "abcde"]
    steps = [names for _, names in engine.steps]
    assert steps[:3] == [["a", "b"], ["c", "d"], ["a", "e"]]
    for name in "abcde":
        mine = [i for i, names in enumerate(steps) if name in names]
        assert len(mine) == 4 and max(b - a for a, b in zip(mine, mine[1:], strict=False)) <= 3, (
            name
        )
    await b.stop(5)


async def test_an_engine_that_cannot_step_a_subset_steps_every_sentence():
    """(A GPU's gather layout.) step_places is then not applied."""
    engine = FakeEngine(free_steps=True)
    opened = engine.open

    def whole_steps_only(group):
        running = opened(group)
        running.partial_steps = False
        return running

    engine.open = whole_steps_only
    b = await started(engine, step_places=lambda group: 1)
    release = hold(b)
    ticket = b.submit(("m", 1), [("x", 2), ("y", 2), ("z", 2)], [1] * 3)
    release.set()
    assert await b.wait(ticket) == ["x", "y", "z"]
    assert [names for _, names in engine.steps] == [["x", "y", "z"]] * 2
    await b.stop(5)


async def test_in_a_bounded_step_a_newcomer_counts_its_wait_from_when_it_joined():
    """A request that joins a group past its STEP_PATIENCE-th step is not overdue (it sat out
    no step of the group): among requests with as many sentences left, those that stepped
    least recently go first, the newcomers counting from when they joined."""
    engine = FakeEngine()
    b = await started(engine, step_places=lambda group: 1)
    first = b.submit(("m", 1), [("x", 9), ("y", 9)], [1, 1])
    await step_until(engine, lambda: len(engine.steps) >= 7)  # x and y took turns
    late = b.submit(("m", 1), [("z", 1), ("w", 1)], [1, 1])  # as many left as x and y's
    await step_until(engine, late.future.done)
    steps = [names for _, names in engine.steps]
    assert steps[:7] == [["x"], ["y"]] * 3 + [["x"]]
    # z and w joined before step 7 (index 7) and are not overdue: the step goes to y, which
    # stepped least recently, then x, which stepped when they joined, then z and w
    assert steps[7:11] == [["y"], ["x"], ["z"], ["w"]]
    engine.allow(100)
    assert await b.wait(first) == ["x", "y"]
    await b.stop(5)


@pytest.mark.parametrize("step_wait", [0.0, 0.05])
async def test_bounded_steps_take_every_sentence_while_one_has_waited_too_long_to_join(step_wait):
    """Two places, one per step: a sentence that has waited more than `step_wait` to join the
    full decode makes the next steps take every running sentence (so places free sooner);
    once nothing waits, the bound applies again. With step_wait 0 the bound always applies."""
    engine = FakeEngine()
    b = await started(engine, max_batch_size=2, step_places=lambda group: 1, step_wait=step_wait)
    running = b.submit(("m", 1), [("x", 6), ("y", 2)], [1, 1])
    await until(lambda: len(engine.steps) >= 1)  # step 0 decided before anything waited
    assert engine.names_in(0) == ["x"]
    waiting = b.submit(("m", 1), [("z", 1)], [1])
    await asyncio.sleep(0.1)  # z waits, longer than step_wait
    await step_until(engine, lambda: len(engine.steps) >= 2)
    if step_wait:
        assert engine.names_in(1) == ["x", "y"]  # z waited too long: every sentence steps
        await step_until(engine, lambda: len(engine.steps) >= 4)
        assert engine.names_in(2) == ["x", "y"]  # y finished: z joins
        assert len(engine.names_in(3)) == 1  # nothing waits: bounded again
    else:
        assert engine.names_in(1) == ["y"]
    engine.allow(100)
    assert await b.wait(waiting) == ["z"]
    assert await b.wait(running) == ["x", "y"]
    await b.stop(5)


def test_a_report_of_size_0_adds_engine_time_but_no_batch():
    """Metrics: the last leaves of a group that ended (a report of size 0) count in the engine's
    compute seconds, not as a batch in the batch-size and padded-token histograms."""
    from prometheus_client import generate_latest

    from app.batcher import BatchReport
    from app.metrics import Metrics

    metrics = Metrics()
    metrics.observe_batch(BatchReport(("m", 1), 3, 30, 0.5, [0.1], False))
    metrics.observe_batch(BatchReport(("m", 1), 0, 0, 0.25, [], False))
    text = generate_latest(metrics.registry).decode()

    def value(name):
        return float(
            next(line for line in text.splitlines() if line.startswith(name + " ")).split()[1]
        )

    assert value("mt_batch_compute_seconds_sum") == 0.75
    assert value("mt_batch_compute_seconds_count") == 2
    assert value("mt_batch_size_count") == 1 and value("mt_batch_size_sum") == 3
    assert value("mt_batch_padded_tokens_count") == 1
