"""The continuous scheduler: sentences join a running decode between its steps and leave it the
step they finish, so a short request never waits for a batch of long ones to end.

It knows no HTTP and no torch, like the micro-batcher (app/batcher.py), and offers the same
calls (`submit`, `wait`, `cancel`, `depth`, `problem`, `stop`), so the service uses either. The
engine is reached through `open_group(group) -> Group`: a running decode of sentences that can
share one (same model and beam size; `group_of(key)` says which), with `join(entries)` (each a
sentence id, its key and its payload), `step() -> [(id, result), ...]` for the sentences that
finished in that step, and `leave(ids)`. Sentences of other keys in one group keep their own
options (output limit, number of alternatives): the engine's group handles them per sentence.
A call that raises fails every sentence of its group, which is dropped; but a `join` that
raises NewcomersFailed (the newcomers' encoder ran out of memory, say, before the decode
changed) fails only its newcomers, and the group's other sentences go on. A request that
fails so is answered with the failure, and its sentences that have not failed are dropped as
those of a request that went away: those waiting leave the queue, those running leave their
decode at its next step boundary (nobody would read their results).

One loop on the worker thread runs everything, between steps in this order: sentences whose
request went away (deadline, disconnect) leave their group; waiting sentences are admitted;
then one group takes one step (groups take turns), once those of its sentences removed while
the newcomers joined have left too (a removal is honoured at the next step boundary).
Finished sentences go to their requests right after the step that finished them, in one call
into the event loop, once one of them completes its request: a finished sentence whose request
still has others to come waits on the worker thread for the next call (each call wakes the
event loop, which then takes a core from the engine's threads in the middle of a step: the
answers of a long request's first sentences would wake it for nothing, as nobody can read them
yet).

Admission:
- a group holds at most `places(group)` sentences, and never more than `max_batch_size` (the
  service derives `places` from MT_MAX_RUNNING_ROWS, a bound on a step's decoder rows,
  sentences x beam size, where it is set);
- `budget` bounds what the running groups may allocate: `envelope(group, members)` gives a
  group's footprint for the (key, cost) pairs of its sentences, and a sentence is admitted only
  while the sum over groups, with it, stays within the budget (a lone sentence always runs).
  What the engine keeps of a group between its decodes (`kept()`: MT_CUDA_GRAPHS keeps each
  group's fixed buffers and CUDA graph) counts too, as the group's footprint when it runs
  again; a group's kept buffers are released (`release(group)`) when a sentence of another
  group would not fit beside them and releasing lets it in (never while the group runs on them);
  once the budget keeps a sentence out, no sentence whose turn (below) comes after it joins
  any group in that admission (a busy group's newcomers would otherwise take every bit of
  budget its finished sentences free, and a sentence of another model or beam size would wait
  for good);
- waiting requests take turns, one sentence each (round-robin by request, not first come by
  sentence), in one order across the groups, which share the budget, so a request of many
  sentences does not hold back the requests behind it, of its group or of another. The
  tickets submitted with the same `owner` (the service's one client request, whose texts go
  to several models, a route through the pivot language's second leg on the model of
  another route) are one request where they are in the same group: they take one turn, not
  one each; in different groups they are one request in each, as two requests would be. The
  turn goes to the request with the fewest sentences running now (in its group's decode),
  then to the one that has waited longest since its last turn (or its arrival). A request
  that just arrived takes the next free place ahead of the next sentence of one already
  running, and waits for at most one round of those with none running, never for them to
  finish; a long request whose sentences have finished is back at the front (it is not
  starved by a stream of short ones): each request gets an equal share of the running
  places, as far as it can use them. A group whose places are full is passed over: its
  requests keep no other out. A group whose next join is steps away keeps, at its request's
  turn, the budget that request's sentence needs for that join (others whose turns come
  after it take only the rest), or, where it does not fit, keeps out those after it as a
  request that could join now would;
- a running group takes newcomers at most every `join_every` steps (MT_JOIN_EVERY_STEPS; a
  group with no sentence running takes them at once): each join runs the newcomers' encoder
  and writes their state in one call, whose cost on a GPU is mostly the host's, whatever the
  number of newcomers, so joining them together costs less than one at a time, for a wait of
  at most that many steps where the budget lets them in then (the budget their turn kept for
  them, above; the step bound below does not give way for that wait);
- at most `max_queue_size` sentences wait; `submit` beyond that raises QueueFull.

Stepping: a step computes every sentence of its group, unless they are more than
`step_places(group)` (the service derives it from MT_MAX_STEP_ROWS) and the engine can step a
subset (`Group.partial_steps`, `step(only)`): then the sentences that sat out the last
STEP_PATIENCE steps in a row go first, and the rest of the step goes to the
requests with the fewest sentences left (see `_stepping`). Where a step's time grows with its
sentences (a CPU), a short request then decodes at the pace of a bounded step beside a burst
of long ones, the long ones still step at least every STEP_PATIENCE + 1 steps while they fit,
and unlike a bound on admission (`places`) no sentence waits to join for it. With `step_wait`
(seconds; MT_STEP_BOUND_WAIT_MS), the bound gives way while a sentence of the group has waited
longer than that to join: every running sentence steps until none has (see `_backlogged`).

The loop leaves the worker thread whenever another job is waiting for it (the service loads
models there) and comes back after it. A failure inside the engine fails the sentences of that
group only, with an error id that is also logged; a failure of the loop itself fails everything
waiting or running and makes `problem` say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .batcher import (
    BatchFailed,
    BatchReport,
    QueueFull,
    ShuttingDown,
    Ticket,
    Tickets,
    Worker,
)

log = logging.getLogger("app.continuous")

# bounded steps (step_places): a sentence that sat out this many steps of its group in a row
# (since its last step, or since it joined) goes first
STEP_PATIENCE = 5


class NewcomersFailed(Exception):
    """Raised by `Group.join` when newcomers did not join but the group's other sentences go on
    as they were (the newcomers' encoder ran out of memory, say): only they fail. `ids`: the
    newcomers that did not join, where the others did (None: none of them joined)."""

    def __init__(self, message: str, ids: list[int] | None = None):
        super().__init__(message)
        self.ids = ids


class Group(Protocol):
    partial_steps: bool  # whether step(only) can step a subset of the sentences

    def join(self, entries: list[tuple[int, Hashable, Any]]) -> None: ...
    def step(self, only: list[int] | None = None) -> Sequence[tuple[int, Any]]: ...
    def leave(self, ids: list[int]) -> None: ...


@dataclass(eq=False)
class _Sentence:
    id: int
    key: Hashable
    group: Hashable
    payload: Any
    cost: int
    ticket: Ticket
    index: int
    enqueued: float
    state: str = "waiting"  # waiting, running, done, dropped
    wait_s: float = 0.0  # from submit until it joined a running decode
    stepped: int = 0  # its group's step count when it last took a step, or when it joined
    batch: int = -1  # (no batch of the static batcher: Ticket.compute_s counts `step_s`)
    request: _Request | None = None  # the request it belongs to (set by submit)


@dataclass(eq=False)
class _Request:
    """The sentences of one group still waiting of a ticket (or of the tickets of one owner),
    in order; requests wait in a heap, the one with the fewest sentences running first, then
    the one whose last turn (or arrival) came first."""

    sentences: deque[_Sentence]
    seq: int  # renewed at each turn
    running: int = 0  # its sentences in the running decode now
    left: int = 0  # its sentences not finished yet (the worker's count)
    owner: Hashable | None = None  # the tickets' owner, None: one ticket of its own

    def __lt__(self, other: _Request) -> bool:
        return (self.running, self.seq) < (other.running, other.seq)


@dataclass(eq=False)
class _Running:
    group: Hashable
    engine: Group
    members: dict[int, _Sentence] = field(default_factory=dict)
    leaving: set[int] = field(default_factory=set)
    footprint: int = 0
    steps: int = 0  # steps taken
    joined_at: int = 0  # `steps` when newcomers last joined
    # the queue waits of those that joined since its last step, and the engine's joins and
    # leaves since then (seconds), reported with its next step; where none follows, with the
    # failure, or (its leaves emptied it) in a report of their own (size 0)
    joined_waits: list[float] = field(default_factory=list)
    between_s: float = 0.0


class ContinuousBatcher(Tickets):
    def __init__(
        self,
        open_group: Callable[[Hashable], Group],
        group_of: Callable[[Hashable], Hashable],
        *,
        envelope: Callable[[Hashable, list[tuple[Hashable, int]]], int],
        budget: int,
        max_batch_size: int = 64,
        places: Callable[[Hashable], int] | None = None,
        step_places: Callable[[Hashable], int] | None = None,
        step_wait: float = 0.0,
        join_every: int = 1,
        max_queue_size: int = 1024,
        on_batch: Callable[[BatchReport], None] | None = None,
        on_depth: Callable[[int], None] | None = None,
        on_running: Callable[[int], None] | None = None,
        worker: Worker | None = None,
        kept: Callable[[], dict[Hashable, int]] | None = None,
        release: Callable[[Hashable], None] | None = None,
    ):
        if (kept is None) != (release is None):
            raise ValueError("kept and release go together")
        self.open_group, self.group_of, self.envelope = open_group, group_of, envelope
        self.kept, self.release = kept, release
        self.budget, self.max_batch_size, self.max_queue_size = (
            budget,
            max_batch_size,
            max_queue_size,
        )
        self.places = places or (lambda group: max_batch_size)
        self.step_places, self.step_wait = step_places, step_wait
        if join_every < 1:
            raise ValueError(
                f"join_every={join_every}: a running decode takes newcomers every 1 step or more"
            )
        self.join_every = join_every
        self.on_batch, self.on_depth, self.on_running = on_batch, on_depth, on_running
        self._worker = worker
        self._lock = threading.Lock()  # everything below is shared by the loop and the worker
        self._waiting: dict[Hashable, list[_Request]] = {}  # heaps
        # (owner, group) -> its request, while it has sentences waiting or running
        self._owned: dict[tuple[Hashable, Hashable], _Request] = {}
        self._running: dict[Hashable, _Running] = {}
        self._turns: deque[Hashable] = deque()  # running groups, the next to step first
        # admitted (running) in the admission under way, and not yet in their decode: a
        # failure of the loop before they are (the envelope or open_group raised) fails them
        self._admitting: list[_Sentence] = []
        self._depth = 0
        self._ids = itertools.count()
        self._driving = False  # the loop job is on the worker's queue or running
        self._closing = False
        self._failure: BaseException | None = None
        self._idle: asyncio.Event | None = None  # set while nothing waits or runs
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._reports: list[BatchReport] = []  # steps not reported yet (worker thread)
        self._held: list[tuple[_Sentence, Any]] = []  # finished, their request not (worker)

    # -- the event loop's side -------------------------------------------------------------

    @property
    def depth(self) -> int:
        """Sentences waiting to join a running decode."""
        return self._depth

    @property
    def running(self) -> int:
        """Sentences in running decodes."""
        return sum(len(r.members) for r in self._running.values())

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._idle = asyncio.Event()
        self._idle.set()
        if self._worker is None:
            self._worker = Worker()
        self._started = True

    def problem(self) -> str | None:
        """Why no more sentences can be decoded, or None."""
        if self._closing or not self._started:
            return None
        if self._failure is not None:
            return f"the batch scheduler stopped: {type(self._failure).__name__}: {self._failure}"
        if self._worker is not None and not self._worker.thread.is_alive():
            return "the inference worker thread stopped"
        return None

    def submit(
        self,
        key: Hashable,
        payloads: Sequence[Any],
        costs: Sequence[int],
        owner: Hashable | None = None,
    ) -> Ticket:
        """Queue one request's sentences; raises QueueFull or ShuttingDown at once. Tickets of
        one `owner` in one group take their turns as one request."""
        if self._closing or not self._started or self._failure is not None:
            raise ShuttingDown(self.problem() or "the server is shutting down")
        assert self._loop is not None and self._idle is not None
        ticket = Ticket(self._loop.create_future())
        if not payloads:
            ticket.future.set_result([])
            return ticket
        group = self.group_of(key)
        now = time.monotonic()
        with self._lock:
            if self._depth + len(payloads) > self.max_queue_size:
                raise QueueFull(
                    f"{self._depth} sentences are waiting (limit {self.max_queue_size})"
                )
            ticket.results, ticket.pending = [None] * len(payloads), len(payloads)
            ticket.left = len(payloads)
            request = self._owned.get((owner, group)) if owner is not None else None
            if request is None:
                request = _Request(deque(), next(self._ids), owner=owner)
                if owner is not None:
                    self._owned[owner, group] = request
            queued = bool(request.sentences)  # in the group's heap already
            request.left += len(payloads)
            for i, (payload, cost) in enumerate(zip(payloads, costs, strict=True)):
                s = _Sentence(
                    next(self._ids),
                    key,
                    group,
                    payload,
                    max(int(cost), 1),
                    ticket,
                    i,
                    now,
                    request=request,
                )
                ticket.items.append(s)
                request.sentences.append(s)
            if not queued:
                heapq.heappush(self._waiting.setdefault(group, []), request)
            self._set_depth(len(payloads))
            self._idle.clear()
            self._drive_soon()
        return ticket

    def _remove(self, ticket: Ticket) -> int:
        with self._lock:
            removed = self._drop(ticket)
            if removed:
                self._drive_soon()
        return removed

    def _drop(self, ticket: Ticket) -> int:
        """(Under the lock.) The ticket's sentences not finished are dropped: those waiting
        leave the queue, those running leave their decode at its next step boundary; returns
        how many."""
        removed = 0
        for s in ticket.items:
            if s.state == "waiting":
                requests = self._waiting[s.group]
                s.request.sentences.remove(s)
                if not s.request.sentences:  # (admission re-orders the heap first)
                    requests.remove(s.request)
                    if not requests:
                        del self._waiting[s.group]
                self._set_depth(-1)
            elif s.state == "running":
                running = self._running.get(s.group)
                if running is not None:  # (else its decode is gone, and it with it)
                    running.leaving.add(s.id)
            else:
                continue
            s.state = "dropped"
            s.request.left -= 1  # it will not finish
            self._settled(s.request, s.group)
            removed += 1
        return removed

    def _drop_rest(self, failed: list[_Sentence]) -> None:
        """(Under the lock.) The other sentences of the tickets of `failed` (failed now,
        their requests answered with the error) are dropped: nobody reads their results."""
        for ticket in dict.fromkeys(s.ticket for s in failed):
            self._drop(ticket)

    def _deliver(self, finished, failed: list[_Sentence], error_id, reports=()) -> None:
        """On the event loop: results to their requests, then the steps' metrics (after the
        requests they answered have run: metrics are on no request's path)."""
        for s, result in finished:
            s.ticket._deliver(s.index, result)
        for s in failed:
            s.ticket._fail(
                BatchFailed(error_id) if error_id else ShuttingDown("shutdown timeout passed")
            )
        self._check_idle()
        assert self._loop is not None
        on_batch = self.on_batch
        for report in reports:
            assert on_batch is not None  # reports are made only for it (_report)
            self._loop.call_soon(on_batch, report)

    def _check_idle(self) -> None:
        assert self._idle is not None
        with self._lock:
            idle = not self._waiting and not self._running
        if idle:
            self._idle.set()

    async def stop(self, timeout: float) -> int:
        """Refuse new work, finish what was accepted within `timeout` s; returns the sentences
        dropped unfinished."""
        self._closing = True
        dropped = 0
        if self._idle is not None:
            try:
                await asyncio.wait_for(self._idle.wait(), timeout)
            except TimeoutError:
                with self._lock:
                    left = [s for reqs in self._waiting.values() for r in reqs for s in r.sentences]
                    for running in self._running.values():
                        left += [s for s in running.members.values() if s.state == "running"]
                        running.leaving.update(running.members)
                    self._waiting.clear()
                    self._owned.clear()
                    self._set_depth(-self._depth)
                    for s in left:
                        s.state = "dropped"
                dropped = len(left)
                for s in left:
                    s.ticket._fail(ShuttingDown("shutdown timeout passed"))
        if self._worker is not None:
            self._worker.stop()  # it ends after the step it may still be running
            await self._worker.join()
        return dropped

    # -- shared ---------------------------------------------------------------------------

    def _set_depth(self, delta: int) -> None:
        self._depth += delta
        if self.on_depth:
            self.on_depth(self._depth)

    def _drive_soon(self) -> None:
        """(Under the lock.) The loop job is queued, unless it is already."""
        if not self._driving and self._worker is not None:
            self._driving = True
            self._worker.put(self._drive)

    # -- the worker thread's side ---------------------------------------------------------

    def _drive(self) -> None:
        """Steps until nothing waits or runs, or another job waits for the worker thread."""
        try:
            while True:
                if self._worker is not None:  # a pass done: the thread is not hung
                    self._worker.beat()
                self._leave(None)
                joins = self._admit()
                for running, entries in joins:
                    started = time.perf_counter()
                    newcomers = [i for i, _, _ in entries]
                    self._guarded(running, lambda r, e=entries: r.engine.join(e), newcomers)
                    spent = time.perf_counter() - started  # the newcomers' encoder, mostly
                    running.between_s += spent
                    with self._lock:
                        members = running.members
                        for ticket in {members[i].ticket for i, _, _ in entries if i in members}:
                            ticket.step_s += spent
                with self._lock:
                    empty = [g for g, r in self._running.items() if not r.members]
                    ended = [self._running.pop(g) for g in empty]
                    for r in ended:  # their last leaves: engine work with no step after it
                        if r.between_s or r.joined_waits:
                            self._report(r, 0, 0, r.between_s, r.joined_waits, failed=False)
                    self._turns = deque(g for g in self._turns if g in self._running)
                    if not self._turns:
                        if self._waiting:  # submitted since the admission above
                            continue
                        self._driving = False
                        self._notify_loop([], [], None)
                        return
                    group = self._turns[0]
                    self._turns.rotate(-1)
                    running = self._running[group]
                # removals made while the newcomers joined: they take no step more
                self._leave(running)
                with self._lock:
                    if not running.members or self._running.get(group) is not running:
                        continue  # all left (it ends on the next pass), or the leave failed
                self._step(running)
                if self._worker is not None and self._worker.pending():
                    self._worker.put(self._drive)  # let the job waiting go first
                    return
        except BaseException as exc:  # a bug in this loop: nothing more can run
            self._fail_all(exc)

    def _leave(self, running: _Running | None) -> None:
        """The sentences whose request went away (deadline, disconnect) leave their decode:
        that of `running`, or every running decode's (None)."""
        with self._lock:
            leaves = []  # those still in their decode (not finished since)
            for r in self._running.values() if running is None else [running]:
                if r.leaving:
                    ids = [i for i in r.leaving if i in r.members]
                    r.leaving.clear()
                    for i in ids:
                        self._stopped(r.members.pop(i))
                    if ids:
                        leaves.append((r, ids))
        for r, ids in leaves:
            started = time.perf_counter()
            self._guarded(r, lambda decode, ids=ids: decode.engine.leave(ids))
            r.between_s += time.perf_counter() - started

    def _admit(self) -> list[tuple[_Running, list[tuple[int, Hashable, Any]]]]:
        """Waiting sentences that may join now, by group; the requests take turns."""
        now = time.monotonic()
        joins: list[tuple[_Running, list[tuple[int, Hashable, Any]]]] = []
        running: _Running | None
        with self._lock:
            if not self._waiting:
                return joins
            for running in self._running.values():  # some may have left since their step
                running.footprint = self._footprint(running)
            used = sum(r.footprint for r in self._running.values())
            # what the engine keeps of groups between their decodes, for their next one: it
            # counts, and is released where that lets a sentence of another group in
            kept = self.kept() if self.kept else {}
            idle = {g: size for g, size in kept.items() if g not in self._running and size}
            used += sum(idle.values())
            # the waiting requests of every group open to newcomers take turns in one order
            # (the budget is shared); once the budget keeps a sentence out, no sentence whose
            # turn comes after it joins any group: a busy group's newcomers would otherwise take
            # every bit of budget its finished sentences free, and a sentence of another model
            # or beam size wait for good. A heap of each group's next request gives the order.
            # of the groups open to newcomers
            members: dict[Hashable, list[tuple[Hashable, int]]] = {}
            places: dict[Hashable, int] = {}
            # the footprint of those that took newcomers, with them
            before: dict[Hashable, int] = {}
            heads = []  # (running, seq, group): each open group's next request
            between = set()  # groups whose next join is steps away: their turn holds its place
            for group, requests in self._waiting.items():
                running = self._running.get(group)
                members[group] = (
                    [(s.key, s.cost) for s in running.members.values()] if running else []
                )
                places[group] = max(1, min(self.max_batch_size, self.places(group)))
                if len(members[group]) >= places[group]:
                    continue  # full: its requests wait for a place, and keep out no other
                if (
                    running
                    and running.members
                    and running.steps - running.joined_at < self.join_every
                ):
                    between.add(group)  # newcomers join a running decode together, every
                    # join_every steps: until then, the budget its next sentence needs is kept
                heapq.heapify(requests)  # sentences have finished since: the turns moved
                heads.append((requests[0].running, requests[0].seq, group))
            heapq.heapify(heads)
            admitted: dict[Hashable, list[_Sentence]] = {}  # by group, the first to join first
            while heads:
                group = heads[0][2]
                requests = self._waiting[group]
                request = requests[0]
                s = request.sentences[0]
                mine, was = members[group], before.get(group)
                if was is None:  # (what it keeps may have been released for another group)
                    running = self._running.get(group)
                    was = running.footprint if running else idle.get(group, 0)
                footprint = self.envelope(group, mine + [(s.key, s.cost)])
                if group in between:  # its turn: the budget it needs is kept for its join
                    if used - was + footprint > self.budget:
                        break  # it waits, and so does every sentence whose turn comes after it
                    used += footprint - was
                    heapq.heappop(heads)
                    continue
                others = [g for g in idle if g != group]
                if others and used - was + footprint > self.budget:
                    rest = used - was - sum(idle[g] for g in others)  # running groups'
                    # release only what lets it in: enough to fit, or all, for a lone
                    # sentence over the budget with no other group running
                    if rest + footprint <= self.budget or not (mine or rest):
                        assert self.release is not None  # it goes with `kept` (__init__)
                        for other in others:
                            if used - was + footprint <= self.budget:
                                break
                            used -= idle.pop(other)
                            self.release(other)
                if used - was + footprint > self.budget and (mine or used - was):
                    break  # it waits, and so does every sentence whose turn comes after it
                idle.pop(group, None)  # running now: counted as its footprint
                request.sentences.popleft()
                request.running += 1
                request.seq = next(self._ids)  # its next turn after the others' turns
                if request.sentences:
                    heapq.heapreplace(requests, request)
                else:
                    heapq.heappop(requests)
                mine.append((s.key, s.cost))
                used, before[group] = used - was + footprint, footprint
                s.state = "running"
                admitted.setdefault(group, []).append(s)
                self._admitting.append(s)
                if requests and len(mine) < places[group]:
                    heapq.heapreplace(heads, (requests[0].running, requests[0].seq, group))
                else:
                    heapq.heappop(heads)
                    if not requests:
                        del self._waiting[group]
            for group, sentences in admitted.items():
                running = self._running.get(group)
                if running is None:
                    running = self._running[group] = _Running(group, self.open_group(group))
                    self._turns.append(group)
                running.footprint, running.joined_at = before[group], running.steps
                for s in sentences:
                    running.members[s.id] = s
                    s.stepped = running.steps  # it sits out no step before it joined
                    s.wait_s = now - s.enqueued
                    running.joined_waits.append(s.wait_s)
                self._set_depth(-len(sentences))
                joins.append((running, [(s.id, s.key, s.payload) for s in sentences]))
            self._admitting.clear()  # each in its decode now
        return joins

    def _guarded(
        self, running: _Running, call: Callable[..., Any], newcomers: list[int] | None = None
    ) -> Any:
        """An engine call; if it raises, every sentence of the group fails (error id logged)
        and the group is discarded; but for a join (`newcomers`: its sentences) that raised
        NewcomersFailed, only the newcomers fail and the others go on."""
        try:
            return call(running)
        except Exception as exc:
            if isinstance(exc, NewcomersFailed) and newcomers is not None:
                self._newcomers_failed(running, newcomers if exc.ids is None else exc.ids, exc)
                return None
            # (NewcomersFailed from a step or a leave: a failure of the decode as any other)
            error_id = uuid.uuid4().hex[:12]
            with self._lock:
                failed = [s for s in running.members.values() if s.state == "running"]
                for s in failed:
                    s.state = "done"
                for s in running.members.values():
                    self._stopped(s)
                running.members.clear()
                self._drop_rest(failed)  # (those waiting: a ticket's sentences share a group)
                waits, running.joined_waits = running.joined_waits, []  # they joined, and failed
                if self._running.get(running.group) is running:
                    del self._running[running.group]
                    # out of the turns too: a decode of the group opened later takes its own
                    self._turns = deque(g for g in self._turns if g != running.group)
            log.error(
                "decoding %d sentence(s) failed, error id %s", len(failed), error_id, exc_info=exc
            )
            self._notify_loop([], failed, error_id)
            # the joins and leaves before the failed call (whose own time is not counted)
            between, running.between_s = running.between_s, 0.0
            self._report(running, len(failed), running.footprint, between, waits, failed=True)
            return None

    def _newcomers_failed(self, running: _Running, newcomers: list[int], exc: Exception) -> None:
        """A join's newcomers did not join (see NewcomersFailed): they fail, with their
        waits; the group's other sentences go on."""
        error_id = uuid.uuid4().hex[:12]
        with self._lock:
            failed = [running.members.pop(i) for i in newcomers if i in running.members]
            for s in failed:
                self._stopped(s)
            failed = [s for s in failed if s.state == "running"]
            for s in failed:
                s.state = "done"
            self._drop_rest(failed)  # their tickets' sentences running or waiting
            waits = [s.wait_s for s in failed]  # (the others' go with the next step)
            for wait in waits:
                with contextlib.suppress(ValueError):
                    running.joined_waits.remove(wait)
        log.error(
            "%d sentence(s) could not join their decode, error id %s (the %d decoding go on)",
            len(failed),
            error_id,
            len(running.members),
            exc_info=exc,
        )
        self._notify_loop([], failed, error_id)
        self._report(running, len(failed), running.footprint, 0.0, waits, failed=True)

    def _stopped(self, s: _Sentence | None) -> None:
        """(Under the lock.) The sentence has left its running decode: one fewer of its
        request's."""
        if s is not None and s.request is not None:
            s.request.running -= 1
            self._settled(s.request, s.group)

    def _settled(self, request: _Request, group: Hashable) -> None:
        """(Under the lock.) An owner's request with nothing waiting or running is forgotten:
        a later ticket of the owner starts a new one."""
        if request.owner is not None and not request.sentences and not request.running:
            key = (request.owner, group)
            if self._owned.get(key) is request:
                del self._owned[key]

    def _footprint(self, running: _Running) -> int:
        """What a running group holds now (an emptied one: its buffers, until it is dropped)."""
        return self.envelope(running.group, [(s.key, s.cost) for s in running.members.values()])

    def _step(self, running: _Running) -> None:
        with self._lock:
            only = self._stepping(running)
            members = running.members
            stepping = list(members.values()) if only is None else [members[i] for i in only]
        started = time.perf_counter()
        results = self._guarded(running, lambda r: r.engine.step(only))
        if results is None:
            return
        compute_s = time.perf_counter() - started
        running.steps += 1
        count = running.steps
        complete = False
        with self._lock:
            for s in stepping:
                s.stepped = count
            for ticket in {s.ticket for s in stepping}:
                ticket.step_s += compute_s
            for sid, result in results:
                member = running.members.pop(sid, None)
                self._stopped(member)
                if member is not None and member.state == "running":
                    member.state = "done"
                    self._held.append((member, result))
                    member.ticket.left -= 1
                    complete = complete or member.ticket.left == 0
                    if member.request is not None:
                        member.request.left -= 1
            waits, running.joined_waits = running.joined_waits, []
        size = len(stepping)
        # the engine's time: the step, and the joins (the newcomers' encoder) and leaves since
        # the last one; the footprint admission last counted for it
        between, running.between_s = running.between_s, 0.0
        self._report(running, size, running.footprint, compute_s + between, waits, failed=False)
        if complete:  # a request has all its answers: they go now, with those held so far
            self._notify_loop([], [], None)
        elif self.on_running:  # (a gauge: set from this thread, without waking the event loop)
            self.on_running(self.running)

    def _stepping(self, running: _Running) -> list[int] | None:
        """(Under the lock.) The sentences that take the group's next step, None: all. Where
        they are more than `step_places(group)` and the engine can step a subset, first those
        that sat out the last STEP_PATIENCE steps in a row, the least recently stepped first,
        then the sentences of the requests with the fewest sentences left, each request's in
        the order they last stepped (or joined). A step's time grows with its sentences on a
        CPU: a short request then steps at the pace of a bounded step beside a burst of long
        ones, and every sentence still steps at least once in STEP_PATIENCE + 1 steps while the
        overdue ones fit in a step (beyond, they take turns, the longest waiting first)."""
        if self.step_places is None or not running.engine.partial_steps:
            return None
        places = max(1, self.step_places(running.group))
        if len(running.members) <= places or self._backlogged(running.group):
            return None
        steps = running.steps

        def key(s: _Sentence) -> tuple:
            overdue = steps - s.stepped >= STEP_PATIENCE  # the steps it sat out
            left = s.request.left if s.request is not None else 1
            return (not overdue, 0 if overdue else left, s.stepped, s.id)

        return [s.id for s in heapq.nsmallest(places, running.members.values(), key=key)]

    def _backlogged(self, group: Hashable) -> bool:
        """(Under the lock.) Whether a sentence of the group has waited more than `step_wait`
        seconds to join (its places are full: admission has just run): the decode is behind
        its arrivals, and bounded steps, which finish fewer sentences per second, would let
        the queue grow."""
        if not self.step_wait:
            return False
        running = self._running.get(group)
        if running and running.members and running.steps - running.joined_at < self.join_every:
            return False  # they wait for the next join, not for a place
        requests = self._waiting.get(group)
        if not requests:
            return False
        oldest = min(r.sentences[0].enqueued for r in requests)
        return time.monotonic() - oldest > self.step_wait

    def _notify_loop(self, finished, failed, error_id) -> None:
        """One call into the event loop: the results (with those held), then the steps'
        reports since the last."""
        if self.on_running:
            self.on_running(self.running)
        reports, self._reports = self._reports, []
        if self._held:
            finished, self._held = self._held + list(finished), []
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._deliver, finished, failed, error_id, reports)

    def _report(
        self, running: _Running, size: int, footprint: int, compute_s: float, waits, failed: bool
    ) -> None:
        """One step as a BatchReport: its sentences, its footprint as padded tokens, its
        engine time (with the joins and leaves before it), the waits of the sentences that
        joined for it. Size 0: the last leaves of a group that ended (and the waits of
        those that joined it since its last step), no step."""
        if self.on_batch is None:
            return
        self._reports.append(BatchReport(running.group, size, footprint, compute_s, waits, failed))
        if len(self._reports) >= 32:  # else they go with the next results
            self._notify_loop([], [], None)

    def _fail_all(self, exc: BaseException) -> None:
        self._failure = exc
        error_id = uuid.uuid4().hex[:12]
        with self._lock:
            failed = [s for reqs in self._waiting.values() for r in reqs for s in r.sentences]
            for running in self._running.values():
                failed += [s for s in running.members.values() if s.state == "running"]
            # admitted in the admission the failure ended, and not yet in their decode
            failed += [s for s in self._admitting if s.state == "running"]
            failed = list(dict.fromkeys(failed))  # (some may be in their decode already)
            self._admitting.clear()
            for s in failed:  # nothing holds them any more: removing their ticket finds none
                s.state = "done"
            self._waiting.clear()
            self._owned.clear()
            self._running.clear()
            self._turns.clear()
            self._set_depth(-self._depth)
            self._driving = False
        log.error(
            "the batch scheduler stopped, error id %s; %d sentence(s) fail",
            error_id,
            len(failed),
            exc_info=exc,
        )
        self._notify_loop([], failed, error_id)
