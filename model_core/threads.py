"""How many CPUs this process may really use, for "threads = 0" settings.

`os.cpu_count()` is the host's core count: a container limited to 2 CPUs on a 64-core host sees
64, and 64 threads sharing 2 CPUs' worth of time wait on each other at every parallel region.
Two limits apply, and the smaller one wins:

- the CPU affinity mask (`taskset`, `docker --cpuset-cpus`): `os.sched_getaffinity`;
- the cgroup CPU quota (`docker --cpus`, Kubernetes CPU limits): cgroup v2 `cpu.max`
  ("max 100000" or "200000 100000"), cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`
  (-1: no limit). A quota of 1.5 CPUs counts as 2 (rounded up; never less than 1).

The quota is read for the process's own cgroup (from /proc/self/cgroup) and every ancestor
up to the root, since a parent's limit also applies; inside a container the cgroup namespace
makes the root itself the container's cgroup.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def affinity_cpus() -> int:
    """CPUs in this process's affinity mask (the host's count where the OS has no masks)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _own_paths(proc_cgroup: Path) -> tuple[str | None, str | None]:
    """This process's cgroup path in the v2 hierarchy and in the v1 `cpu` controller's."""
    v2 = v1 = None
    for line in (_read(proc_cgroup) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _dirs(base: Path, own: str | None) -> list[Path]:
    """`base` joined with `own` and each of its ancestors, existing ones only, deepest first."""
    rel = Path((own or "/").lstrip("/"))
    chain = [base / rel, *(base / p for p in rel.parents)]
    return [d for d in chain if d.is_dir()]


def _v2_limit(directory: Path) -> float | None:
    text = _read(directory / "cpu.max")
    if not text:
        return None
    fields = text.split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _v1_limit(directory: Path) -> float | None:
    quota, period = _read(directory / "cpu.cfs_quota_us"), _read(directory / "cpu.cfs_period_us")
    try:
        q, p = int(quota or ""), int(period or "")
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> float | None:
    """The tightest cgroup CPU quota over this process's cgroup and its ancestors, in CPUs
    (1.5 = one and a half CPUs' time per period); None when no quota is set or readable."""
    root, proc_cgroup = Path(root), Path(proc_cgroup)
    v2_own, v1_own = _own_paths(proc_cgroup)
    limits: list[float] = []
    if (root / "cgroup.controllers").exists():  # the v2 (unified) hierarchy is mounted here
        limits += [lim for d in _dirs(root, v2_own) if (lim := _v2_limit(d)) is not None]
    else:
        for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
            base = root / name
            if base.is_dir():
                dirs = _dirs(base, v1_own)
                limits += [lim for d in dirs if (lim := _v1_limit(d)) is not None]
                break
    return min(limits) if limits else None


def available_cpus(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int:
    """The CPUs this process may use: the affinity mask, capped by the cgroup quota rounded up;
    at least 1."""
    cpus = affinity_cpus()
    limit = cgroup_cpu_limit(root, proc_cgroup)
    if limit is not None:
        cpus = min(cpus, math.ceil(limit))
    return max(1, cpus)


def involuntary_switches() -> int:
    """How often the kernel has taken a CPU away from one of this process's threads (all
    threads together) because another task wanted it; 0 where the OS does not count them."""
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
    except (ImportError, OSError):
        return 0


class SharedCpuThreads:
    """The thread count for each batch, fewer while other processes compete for the CPUs.

    Threads that meet at a barrier after every small parallel region (a decoding step is
    dozens of them) run well only while each has a CPU of its own: when another process takes
    one of the CPUs, the others spin or sleep until the preempted thread gets it back, every
    region, and a request that takes 10 ms on an idle machine can take seconds. One thread
    per CPU is the fastest choice on an idle machine, fewer when CPUs are taken.

    The sign of competition is cheap and local to this process: the kernel preempting its
    threads (involuntary context switches, counted per process, so a container sees only
    competition for its own CPUs). Measured on a 2-core machine (one-sentence batches of
    ~7 ms): 0-3 per batch and ~10 per second of batches when idle, ~140 per second with
    the other core kept busy. Batches are judged together once `window_s` seconds of them have
    run: at more than `rate` switches per second (and at least `least`), the next batches run
    on half the threads (at least one); `hold_s` seconds after the last such judgement, a
    batch runs on all of them again to see whether the competition is over.

    Preemptions alone do not tell a neighbour that spins (fewer threads win) from neighbours
    that yield often: a load generator, or this process's own event loop answering requests,
    preempt as often, yet two threads then served 1.6x the sentences/s of one
    (docs/BENCHMARKS.md, section 4). So where the caller says how much work each batch did
    (`after_batch(work)`, e.g. decoder rows x steps), halving is a trial of three windows:
    the one before on the old count, one on half of it, and one more on the old count; the
    half must beat both of the others' work per second by the factor `margin`, else the count
    stays and the next trial waits `backoff_s`, doubling after each failed one up to
    `max_backoff_s`. The work per second of a window also depends on the batches that ran in
    it (a decoding step of many rows does more per second than one of a few; traffic ramps up
    and down), so one window on each side and the margin keep a change of traffic from
    passing for a verdict; where fewer threads do help (a neighbour that spins), one thread
    took 11-12 ms per request at the median against 16 ms for two, and at most 16 ms against
    up to 149 (docs/BENCHMARKS.md, section 4). A count that
    proved faster holds for `hold_s`, doubling while trials keep passing up to `max_hold_s`,
    then all threads run again and are judged anew (preemptions alone no longer extend the
    hold: they continue under a yielding neighbour too). A trial whose window has not filled
    within `stale_s` (the traffic stopped) is dropped, the count going back. A batch that
    failed is not reported (not counted). `counter` and `clock` are parameters for the
    tests."""

    def __init__(
        self,
        most: int,
        *,
        rate: float = 50.0,
        least: int = 5,
        window_s: float = 0.1,
        hold_s: float = 2.0,
        backoff_s: float = 5.0,
        max_backoff_s: float = 60.0,
        max_hold_s: float = 30.0,
        stale_s: float = 1.0,
        margin: float = 1.25,
        counter=involuntary_switches,
        clock=None,
    ):
        import time

        self.most, self.rate, self.least = max(1, most), rate, least
        self.window_s, self.hold_s = max(window_s, 1e-6), hold_s
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.max_hold_s, self.stale_s, self.margin = max_hold_s, stale_s, margin
        self._hold = hold_s  # the next hold after a trial passes
        self.counter, self.clock = counter, clock or time.monotonic
        self.current, self.until = self.most, 0.0
        self._start: tuple[float, int] = (0.0, 0)
        self._seconds, self._switches = 0.0, 0  # of the batches not judged yet
        self._work: float | None = 0.0  # their work, None once a batch did not say
        # a trial of fewer threads: (the count before it, that window's work per second, when
        # its current window began, the fewer threads, their window's work per second once it
        # is known)
        self._trial: tuple[int, float, float, int, float | None] | None = None
        self._backoff, self.no_trial_until = 0.0, 0.0

    def before_batch(self) -> int:
        """The threads for the batch about to run."""
        now = self.clock()
        if self._trial is not None and now - self._trial[2] > self.stale_s:
            self.current, self._trial = self._trial[0], None  # the traffic stopped: no verdict
            self._new_window()
        if self.current < self.most and now >= self.until and self._trial is None:
            self.current = self.most  # see whether the CPUs are free again
            self._new_window()
        self._start = (now, self.counter())
        return self.current

    def _new_window(self) -> None:
        self._seconds, self._switches, self._work = 0.0, 0, 0.0

    def after_batch(self, work: float | None = None) -> None:
        """Called when the batch ended, with the work it did if known (any unit proportional
        to its compute, the same for every batch): fewer threads from now on if the batches of
        the last window were preempted often (and, with `work`, if fewer proved faster)."""
        now, switches = self.clock(), self.counter()
        self._seconds += now - self._start[0]
        self._switches += switches - self._start[1]
        self._work = None if work is None or self._work is None else self._work + work
        if self._seconds < self.window_s:
            return
        speed = None if self._work is None else self._work / self._seconds
        if self._trial is not None:
            before, before_speed, _, fewer, fewer_speed = self._trial
            if fewer_speed is None and speed is not None:  # the window on fewer threads:
                self._trial = (before, before_speed, now, fewer, speed)  # one more before's
                self.current = before
                self._new_window()
                return
            self._trial, self.current = None, before
            self._new_window()
            if (
                speed is None
                or fewer_speed is None
                or fewer_speed <= self.margin * max(before_speed, speed)
            ):  # not faster: the count stays, and the next trial waits
                self._hold = self.hold_s
                self._backoff = min(2 * self._backoff or self.backoff_s, self.max_backoff_s)
                self.no_trial_until = now + self._backoff
                return
            self.current, self._backoff = fewer, 0.0
            self.until = now + self._hold  # it proved faster: hold it, longer each time
            self._hold = min(2 * self._hold, self.max_hold_s)
            return
        preempted = self._switches >= self.least and self._switches > self.rate * self._seconds
        if preempted and self.current > 1 and now >= self.no_trial_until:
            if speed is not None:
                self._trial = (self.current, speed, now, max(1, self.current // 2), None)
            self.current = max(1, self.current // 2)
            self.until = max(self.until, now + self.hold_s)
        elif preempted and self.current < self.most and speed is None:
            self.until = now + self.hold_s  # without work to judge by: stay while preempted
        self._new_window()
