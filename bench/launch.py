"""How a benchmark runs as `python -m bench.NAME`, and the processes it starts.

`main_of` runs the module's `main` through model_core.cli's `interruptible`, importing the
module itself: a Ctrl-C, even while torch imports, ends the benchmark with one line
(`bench.NAME: interrupted`) and status 130, not a traceback. SIGTERM and SIGHUP (a closed
terminal) end it through the same clean-up, with the status of a death by that signal.

`start` starts a process (a server on a loopback port, a busy neighbour) in a process group of
its own, so that the terminal's Ctrl-C reaches the benchmark alone, and the benchmark stops it
whenever it ends, a Ctrl-C while the process starts or while they are being stopped
included: no server is left listening. (A benchmark killed by SIGKILL stops nothing: what it
started goes on in its own process groups.) Imports nothing heavy."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable

from model_core.cli import interruptible

ENDING = (signal.SIGTERM, signal.SIGHUP)  # besides SIGINT: they end a benchmark
GRACE_S = 30.0  # a server drains what it accepted, then exits; killed after this long

_started: list[subprocess.Popen] = []  # by `start`, in this process


def start(args: list[str], **popen) -> subprocess.Popen:
    """subprocess.Popen(args, **popen) in a process group of its own, stopped by `stop_started`
    (as `main_of` ends) unless stopped before. A signal that arrives meanwhile waits until the
    process is recorded, so that none starts unrecorded."""
    with signals_held():
        process = subprocess.Popen(args, process_group=0, **popen)
        _started.append(process)
    return process


def stop(processes: Iterable[subprocess.Popen], grace: float = GRACE_S) -> None:
    """Stop processes from `start` (each with its process group): SIGTERM, then SIGKILL to
    those still running after `grace` seconds, or at once on a Ctrl-C meanwhile (one while
    the SIGTERMs are sent waits until each process has its own)."""
    processes = list(processes)
    try:
        with signals_held():
            for process in processes:
                if process.poll() is None:
                    signal_group(process, signal.SIGTERM)
                    signal_group(process, signal.SIGCONT)  # one stopped (SIGSTOP) acts on it too
        deadline = time.monotonic() + grace
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(deadline - time.monotonic(), 0.0))
    finally:
        with signals_held():
            left = [p for p in processes if p.poll() is None]
            for process in left:
                signal_group(process, signal.SIGKILL)
        for process in left:
            process.wait()


def stop_started() -> None:
    """Stop every process `start` started that is still running. They are forgotten once
    stopped: where the stop was cut short, a later call stops them still."""
    processes = list(_started)
    stop(processes)
    _started[:] = [p for p in _started if p not in processes]


def signal_group(process: subprocess.Popen, signum: int) -> None:
    """Send `signum` to the process group `start` made for `process` (not yet waited for)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


@contextlib.contextmanager
def signals_held():
    """SIGINT and ENDING that arrive inside the block are delivered as it ends (main thread
    only: elsewhere Python delivers none)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    signums = (signal.SIGINT, *ENDING)
    previous = {s: signal.signal(s, lambda signum, _: caught.append(signum)) for s in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)


def exit_by_signal(signum: int, _frame) -> None:
    """End through `finally` blocks with the status of a death by `signum`."""
    raise SystemExit(128 + signum)


def main_of(module: str) -> int:
    """Import `module` and run its main(); what it started with `start` is stopped however it
    ends. A Ctrl-C prints `module: interrupted` and gives status 130."""
    for signum in ENDING:
        if signal.getsignal(signum) is signal.SIG_DFL:  # (one ignored, by nohup say, stays so)
            signal.signal(signum, exit_by_signal)

    @interruptible(module)
    def run(argv: list[str] | None) -> int:
        try:
            return importlib.import_module(module).main()
        finally:
            stop_started()

    return run(None)
