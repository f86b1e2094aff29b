"""The continuous decoder against static batches, without HTTP: one process, one model.

Static: the sentences in batches of `--inflight`, each decoded to its end (Translator
.translate_ids). Continuous: a RunningBatch that starts with `--inflight` sentences and, after
each step, takes in as many of the next sentences as finished in it (`--join-every N`: only
every N steps, all waiting at once), until all are done. Both alternate `--repeats` times; the
table gives sentences/s and the continuous decode's step count.

    python -m bench.continuous_engine_bench --checkpoint weights/en-de --beam-size 4

`--neighbour 0.4:2.7` measures each decoder a second time, in every repeat, beside another
process that in every 2.7 ms spins on the CPU for 0.4 ms and sleeps the rest: short bursts
taking about a seventh of one core, as the service's event loop and a load generator on the
same cores take it at 64 clients (they answer and read requests between and during the
engine's steps). The table then gives each decoder's rate without and with it, and the share
of one core the neighbour got (read from /proc). On a CPU the engine's threads work in
parallel regions that end when the last thread is done: a thread that loses its core for a
burst holds the others up, so the engine loses more than the neighbour's own CPU time.

`--neighbour-thread` runs that neighbour as a thread of the benchmark's own process instead: its
spin holds Python's GIL, as the service's event loop holds it beside the engine's worker
thread, so the difference between the two says what the GIL adds to the lost cores.

`--fixed` adds a continuous decode in buffers of a fixed size, whose steps a GPU replays from
CUDA graphs (MT_CUDA_GRAPHS); with `--step-sizes` every decode timed is in them.

`--device cuda --dtype bfloat16` runs it on a GPU (device and dtype default to the server's
auto: CUDA in bfloat16 when present, else the CPU in float32).

`--step-sizes 1,4,16,64` instead times single steps and joins with that many sentences in
flight (each finished sentence replaced by the next at the next step): how a step's time grows
with its rows, which `MT_MAX_RUNNING_ROWS` bounds. With `--profile-steps N` it then runs N
more steps per size under torch's profiler and splits a step's time: on a GPU, the time its
kernels and copies kept the GPU busy, how many kernels it launched, and the host calls that
took the most time; what the GPU is not busy for is the host's share, which capturing the
step in a CUDA graph could cut.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.continuous_engine_bench"))

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from statistics import median

import torch

from model_core import fused
from model_core.continuous import RunningBatch
from model_core.translator import Translator

from .common import DEFAULT_SRC, machine, read_sentences, sync, table
from .launch import start

NEIGHBOUR = """# the neighbour of bench.continuous_engine_bench
import ctypes, os, sys, time
work, period, parent = float(sys.argv[1]) / 1e3, float(sys.argv[2]) / 1e3, int(sys.argv[3])
# killed with the benchmark, however it ends (PR_SET_PDEATHSIG: SIGKILL, even while stopped)
ctypes.CDLL(None, use_errno=True).prctl(1, 9)
print("ready", flush=True)  # the benchmark stops it only after this: set up, it cannot outlive it
while os.getppid() == parent:
    start = time.perf_counter()
    while time.perf_counter() - start < work:
        pass
    time.sleep(max(period - (time.perf_counter() - start), 0.0))
"""


class Neighbour:
    """Another process that spins for `work_ms` in every `period_ms` and sleeps the rest; held
    stopped (SIGSTOP) except inside `running()`, which returns the CPU seconds it used then."""

    def __init__(self, work_ms: float, period_ms: float):
        if not 0 < work_ms <= period_ms:
            raise ValueError(f"--neighbour {work_ms}:{period_ms}: need 0 < work <= period")
        self.process = start(
            [sys.executable, "-c", NEIGHBOUR, str(work_ms), str(period_ms), str(os.getpid())],
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline() != b"ready\n":  # its death signal is set up
            self.close()
            raise RuntimeError("the neighbour process did not start")
        os.kill(self.process.pid, signal.SIGSTOP)

    @staticmethod
    def values(spec: str) -> tuple[float, float]:
        """(work ms, period ms) from `WORK_MS:PERIOD_MS`; ValueError says what is wrong."""
        work, colon, period = spec.partition(":")
        try:
            values = float(work), float(period)
        except ValueError:
            values = None
        if not colon or values is None:
            raise ValueError(f"--neighbour {spec}: give WORK_MS:PERIOD_MS, e.g. 0.4:2.7")
        return values

    @classmethod
    def parse(cls, spec: str) -> Neighbour:
        """From `WORK_MS:PERIOD_MS`; ValueError says what is wrong."""
        return cls(*cls.values(spec))

    def cpu_seconds(self) -> float:
        """The neighbour's CPU time: from the scheduler's nanoseconds where the kernel keeps
        them (a window of a few tens of milliseconds is a few 10 ms ticks of /proc/PID/stat)."""
        try:
            with open(f"/proc/{self.process.pid}/schedstat") as f:
                return int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            with open(f"/proc/{self.process.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def running(self, measure):
        """measure() with the neighbour running: (its result, the neighbour's CPU seconds per
        second of it)."""
        cpu, start = self.cpu_seconds(), time.perf_counter()
        os.kill(self.process.pid, signal.SIGCONT)
        try:
            result = measure()
        finally:
            os.kill(self.process.pid, signal.SIGSTOP)
        share = (self.cpu_seconds() - cpu) / (time.perf_counter() - start)
        return result, share

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


class ThreadNeighbour:
    """The same neighbour as a thread of this process (its spin holds the GIL)."""

    def __init__(self, work_ms: float, period_ms: float):
        if not 0 < work_ms <= period_ms:
            raise ValueError(f"--neighbour {work_ms}:{period_ms}: need 0 < work <= period")
        self.work, self.period = work_ms / 1e3, period_ms / 1e3
        self.on, self.done = threading.Event(), False
        self.cpu = 0.0  # the thread's CPU seconds, updated after each burst
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.done:
            if not self.on.wait(0.1):
                continue
            start = time.perf_counter()
            while time.perf_counter() - start < self.work:
                pass
            self.cpu = time.thread_time()
            time.sleep(max(self.period - (time.perf_counter() - start), 0.0))

    def running(self, measure):
        cpu, start = self.cpu, time.perf_counter()
        self.on.set()
        try:
            result = measure()
        finally:
            self.on.clear()
        return result, (self.cpu - cpu) / (time.perf_counter() - start)

    def close(self) -> None:
        self.done = True
        self.thread.join()


def static_rate(tr: Translator, ids: list[list[int]], inflight: int, beam: int) -> float:
    sync(tr.device)
    start = time.perf_counter()
    for i in range(0, len(ids), inflight):
        tr.translate_ids(ids[i : i + inflight], beam_size=beam)
    sync(tr.device)
    return len(ids) / (time.perf_counter() - start)


def continuous_rate(
    tr: Translator,
    ids: list[list[int]],
    inflight: int,
    beam: int,
    join_every: int,
    step_places: int = 0,
    fixed: bool = False,
) -> tuple[float, int]:
    """`step_places`: each step steps that many sentences at most, those that stepped least
    recently (as the scheduler's MT_MAX_STEP_ROWS does for requests of one sentence); `fixed`:
    the decode in fixed buffers (MT_CUDA_GRAPHS: replayed from CUDA graphs on a GPU)."""
    opts = tr.options(beam_size=beam)
    limits = tr.output_limits(ids, [opts.max_length] * len(ids), opts)
    running = tr.running_batch(beam, fixed=fixed)
    taken = steps = pending = 0

    def join(count: int) -> None:
        nonlocal taken
        batch = list(range(taken, min(taken + count, len(ids))))
        taken += len(batch)
        if batch:
            src, mask = tr.batch_tensors([ids[i] for i in batch])
            running.join(batch, src, mask, [limits[i] for i in batch], [1] * len(batch))

    sync(tr.device)
    start = time.perf_counter()
    join(inflight)
    stepped: dict[int, int] = {}
    while len(running):
        only = None
        if step_places and len(running) > step_places:
            only = sorted(running.ids, key=lambda i: (stepped.get(i, 0), i))[:step_places]
        for i in running.ids if only is None else only:
            stepped[i] = steps + 1
        pending += len(running.step(only))
        steps += 1
        if pending and steps % join_every == 0:
            join(pending)
            pending = 0
    sync(tr.device)
    return len(ids) / (time.perf_counter() - start), steps


def refilled_batch(
    tr: Translator, ids: list[list[int]], inflight: int, beam: int, fixed: bool = False
):
    """A running decode that `inflight` of the sentences (taken in turn, round and round)
    have joined, and its join(count): the next `count` sentences join it."""
    opts = tr.options(beam_size=beam)
    limits = tr.output_limits(ids, [opts.max_length] * len(ids), opts)
    running = tr.running_batch(beam, fixed=fixed)
    taken = 0

    def join(count: int) -> None:
        nonlocal taken
        batch = [(taken + i) % len(ids) for i in range(count)]
        src, mask = tr.batch_tensors([ids[i] for i in batch])
        running.join(
            [taken + i for i in range(count)], src, mask, [limits[i] for i in batch],
            [1] * count,
        )  # fmt: skip
        taken += count

    join(inflight)
    return running, join


def step_times(
    tr: Translator, ids: list[list[int]], inflight: int, beam: int, steps: int, fixed: bool
) -> tuple[float, float]:
    """Median ms of one step with `inflight` sentences running, and of a join per sentence
    joining (the newcomers' encoder and cache rows), over `steps` steps."""
    running, join = refilled_batch(tr, ids, inflight, beam, fixed)
    step_s, join_s = [], []
    for _ in range(steps):
        sync(tr.device)
        start = time.perf_counter()
        finished = running.step()
        sync(tr.device)
        step_s.append(time.perf_counter() - start)
        if finished:
            start = time.perf_counter()
            join(len(finished))
            sync(tr.device)
            join_s.append((time.perf_counter() - start) / len(finished))
    return median(step_s) * 1e3, median(join_s) * 1e3


def step_profile(
    tr: Translator, ids: list[list[int]], inflight: int, beam: int, steps: int, fixed: bool
) -> tuple[float, float, float, str]:
    """`steps` steps with `inflight` sentences in flight (joins as in step_times, but outside
    the figures) under torch's profiler: (GPU busy ms per step, kernels and copies a step
    queued, wall ms per step under the profiler, a table of the host calls that took the most
    time)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    running, join = refilled_batch(tr, ids, inflight, beam, fixed)
    for _ in range(10):  # the fresh decode warms up before the profiled steps
        if finished := running.step():
            join(len(finished))
    activities = [ProfilerActivity.CPU]
    if tr.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    wall = 0.0
    with profile(activities=activities) as prof:
        for _ in range(steps):
            sync(tr.device)
            start = time.perf_counter()
            with torch.profiler.record_function("step"):
                finished = running.step()
            sync(tr.device)
            wall += time.perf_counter() - start
            if finished:
                join(len(finished))

    def launched(event) -> int:  # kernels and copies an operation and those inside it queued
        return len(event.kernels) + sum(launched(c) for c in event.cpu_children)

    marks = [e for e in prof.events() if e.name == "step" and e.device_type == DeviceType.CPU]
    busy = sum(e.device_time_total for e in marks) / steps / 1e3
    kernels = sum(launched(e) for e in marks) / steps
    top = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12)
    return busy, kernels, wall / steps * 1e3, top


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, default=Path("weights/en-de"))
    p.add_argument("--src", type=Path, default=DEFAULT_SRC)
    p.add_argument("--sentences", type=int, default=512)
    p.add_argument("--inflight", type=int, default=64)
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--join-every", type=int, default=1)
    p.add_argument(
        "--step-places",
        default="",
        help="comma list: also continuous decodes that step this many sentences at most",
    )
    p.add_argument(
        "--fixed",
        action="store_true",
        help="also a continuous decode in fixed buffers (MT_CUDA_GRAPHS: replayed from CUDA "
        "graphs on a GPU); with --step-sizes, every decode in them",
    )
    p.add_argument(
        "--capture-selection",
        action="store_true",
        help="with --fixed: also the fixed decode whose CUDA graph holds the beam selection "
        "(RunningBatch.capture_selection, off in the service: on an H200 its replay failed)",
    )
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--step-sizes", default="", help="comma list: time steps at these in flight")
    p.add_argument("--steps", type=int, default=300, help="steps timed per size")
    p.add_argument(
        "--profile-steps", type=int, default=0, help="with --step-sizes: profile this many"
    )
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    p.add_argument("--dtype", default="auto", help="auto (bfloat16 on a GPU), float32, ...")
    p.add_argument(
        "--neighbour",
        default="",
        help="WORK_MS:PERIOD_MS: each decoder also beside a process that spins that long in "
        "every period (see above)",
    )
    p.add_argument(
        "--neighbour-thread",
        action="store_true",
        help="with --neighbour: the neighbour is a thread of this process (it holds the GIL "
        "while it spins), not another process",
    )
    args = p.parse_args(argv)
    neighbour: Neighbour | ThreadNeighbour | None = None
    if args.neighbour_thread and not args.neighbour:
        p.error("--neighbour-thread needs --neighbour")
    if args.neighbour:
        if args.step_sizes:
            p.error("--neighbour measures the decoders' rates: it does not go with --step-sizes")
        try:
            values = Neighbour.values(args.neighbour)
            neighbour = ThreadNeighbour(*values) if args.neighbour_thread else Neighbour(*values)
        except ValueError as exc:
            p.error(str(exc))
        # a SIGTERM ends the benchmark through `finally` too (the neighbour also dies with it)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        return run(args, neighbour)
    finally:
        if neighbour is not None:
            neighbour.close()


def run(args: argparse.Namespace, neighbour: Neighbour | None) -> int:
    torch.set_num_threads(args.threads)
    tr = Translator.load(
        args.checkpoint, device=args.device, dtype=args.dtype, linear_backend="auto"
    )
    if args.fixed and fused.attention_kernels_for(torch.empty(0, dtype=tr.dtype, device=tr.device)):
        print("--fixed: fixed buffers are the gather layout's (a GPU, or --dtype bfloat16 here);"
              " float32 on this CPU decodes in the slot layout", file=sys.stderr)  # fmt: skip
        return 2
    ids = [tr.encode_source(s) for s in read_sentences(args.src, args.sentences)]
    tr.translate_ids(ids[:4], beam_size=args.beam_size)  # warm-up
    if args.step_sizes:
        rows = []
        for n in [int(x) for x in args.step_sizes.split(",")]:
            step_ms, join_ms = step_times(tr, ids, n, args.beam_size, args.steps, args.fixed)
            rows.append([n, n * args.beam_size, f"{step_ms:.2f}", f"{step_ms / n:.3f}",
                         f"{join_ms:.2f}"])  # fmt: skip
        print(machine())
        print(
            f"{args.checkpoint}: {tr.device.type} {tr.precision}, beam {args.beam_size}, "
            f"{args.threads} threads; medians over "
            f"{args.steps} steps per size"
            + ("; the decodes in fixed buffers (MT_CUDA_GRAPHS)" if args.fixed else "")
        )
        print()
        headers = ["sentences in flight", "rows", "step ms", "step ms per sentence"]
        print(table(headers + ["join ms per sentence joining"], rows))
        if args.profile_steps:
            prof_rows, tops = [], []
            for row in rows:
                busy, kernels, wall, top = step_profile(
                    tr, ids, row[0], args.beam_size, args.profile_steps, args.fixed
                )
                step_ms = float(row[2])
                prof_rows.append([row[0], row[2], f"{wall:.2f}", f"{busy:.2f}",
                                  f"{max(step_ms - busy, 0.0):.2f}", f"{kernels:.0f}"])  # fmt: skip
                tops.append((row[0], top))
            print()
            print(
                f"under torch's profiler, {args.profile_steps} steps per size "
                "(the joins between them outside the figures; step ms: the median above, "
                "without the profiler; GPU busy: the mean of the profiled steps)"
            )
            print()
            headers = ["sentences in flight", "step ms", "step ms profiled", "GPU busy ms",
                       "step ms less GPU busy", "kernels and copies per step"]  # fmt: skip
            print(table(headers, prof_rows))
            for n, top in (tops[0], tops[-1]):
                print(
                    f"\nhost calls by own time, {n} in flight, {args.profile_steps} steps "
                    "and the joins between them:"
                )
                print(top)
        return 0
    bounds = [0] + [int(x) for x in args.step_places.split(",") if x]
    decoders = {"static": lambda: (static_rate(tr, ids, args.inflight, args.beam_size), None)}
    for bound in bounds:
        decoders[bound] = lambda bound=bound: continuous_rate(
            tr, ids, args.inflight, args.beam_size, args.join_every, bound
        )
    if args.fixed:
        decoders["fixed"] = lambda: continuous_rate(
            tr, ids, args.inflight, args.beam_size, args.join_every, fixed=True
        )
    if args.fixed and args.capture_selection:

        def with_selection():
            RunningBatch.capture_selection = True
            try:
                return continuous_rate(
                    tr, ids, args.inflight, args.beam_size, args.join_every, fixed=True
                )
            finally:
                RunningBatch.capture_selection = False

        decoders["selection"] = with_selection
    rates = {name: [] for name in decoders}
    beside = {name: [] for name in decoders}  # with the neighbour: (rate, its core share)
    steps = {}
    sides = [False, True] if neighbour is not None else [False]  # True: beside it
    for repeat in range(args.repeats):
        for name, measure in decoders.items():
            # alone and beside the neighbour in turn, the other first every other repeat
            for near in sides if repeat % 2 == 0 else sides[::-1]:
                if near:
                    (rate, _), share = neighbour.running(measure)
                    beside[name].append((rate, share))
                else:
                    rate, steps[name] = measure()
                    rates[name].append(rate)
    print(machine())
    print(
        f"{args.checkpoint}: {tr.device.type} {tr.precision}, {len(ids)} sentences, "
        f"{args.inflight} in flight, beam "
        f"{args.beam_size}, {args.threads} threads; medians of {args.repeats} alternating runs"
        + (
            f"; each also beside a neighbour {'thread' if args.neighbour_thread else 'process'}"
            f" spinning {args.neighbour} ms"
            if neighbour
            else ""
        )
    )
    print()
    headers, rows = ["decoder", "sentences/s", "steps"], []
    if neighbour is not None:
        headers += ["sentences/s beside the neighbour", "ratio", "neighbour's share of a core"]
    for name in decoders:
        if name == "static":
            label = "static batches"
        elif name in ("fixed", "selection"):
            label = f"continuous (joins every {args.join_every} steps), fixed buffers"
            label += " replayed from CUDA graphs" if tr.device.type == "cuda" else ", eager"
            label += ", the selection in the graph" if name == "selection" else ""
        else:
            label = f"continuous (joins every {args.join_every} steps)"
            if name:
                label += f", {name} sentences per step at most"
        rate = median(rates[name])
        row = [label, f"{rate:.1f}", "-" if steps[name] is None else str(steps[name])]
        if neighbour is not None:
            near = median(r for r, _ in beside[name])
            share = median(c for _, c in beside[name])
            row += [f"{near:.1f}", f"{near / rate:.2f}", f"{share:.1%}"]
        rows.append(row)
    print(table(headers, rows))
    return 0
