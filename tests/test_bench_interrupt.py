"""Ctrl-C during a benchmark (`python -m bench.NAME`): one line and status 130, as the other
commands end, and nothing it started left running (it printed a KeyboardInterrupt traceback;
a server it had started could be left listening, one that was importing torch printed its own
line). The signal goes to the benchmark's process group, as a terminal's Ctrl-C does."""

from __future__ import annotations

import ast
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import make_parallel, write_lines
from tests.test_load_bench import two_free_ports

ROOT = Path(__file__).resolve().parent.parent
LOG_RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")  # the service's log lines


def session_processes(sid: int) -> dict[int, str]:
    """The live processes in session `sid` (zombies aside): their command lines by pid."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found[int(stat.parent.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def start(args: list[str]) -> subprocess.Popen:
    """A command in a session (and process group) of its own, as a shell starts a job."""
    return subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def interrupt(bench: subprocess.Popen) -> tuple[list[str], dict[int, str]]:
    """Ctrl-C to the benchmark's process group, as a terminal sends it; once it ended, the
    lines it wrote to stderr that were not read yet, and what it left running (killed)."""
    os.killpg(bench.pid, signal.SIGINT)
    try:
        bench.wait(timeout=120)
    finally:
        left = session_processes(bench.pid)
        for pid in left:  # whatever is left, so that the pipe ends
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return bench.stderr.read().splitlines(), left


def test_ctrl_c_while_a_benchmark_imports_torch_is_one_line():
    """A Ctrl-C that arrives while torch imports (seconds, before any output)."""
    script = (
        "import runpy, signal, sys\n"
        "class Torch:\n"  # the Ctrl-C arrives as torch's import begins
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch':\n"
        "            signal.raise_signal(signal.SIGINT)\n"
        "sys.meta_path.insert(0, Torch())\n"
        "sys.argv = ['engine_bench']\n"
        "runpy.run_module('bench.engine_bench', run_name='__main__', alter_sys=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "bench.engine_bench: interrupted\n"


def test_ctrl_c_while_a_benchmark_measures_is_one_line(random_checkpoint, tmp_path):
    """bench.engine_bench interrupted between its measurements."""
    src = write_lines(tmp_path / "src.txt", make_parallel(8, seed=3)[0])
    bench = start(
        [sys.executable, "-m", "bench.engine_bench", "--checkpoint", str(random_checkpoint),
         "--src", str(src), "--sentences", "8", "--reference-sentences", "2", "--batch-sizes",
         "4", "--repeats", "1000000", "--threads", "1", "--device", "cpu"]
    )  # fmt: skip
    try:
        for line in bench.stderr:  # a line per measurement
            if line.startswith("rep 1/"):
                break
        else:
            raise AssertionError(f"bench.engine_bench ended with {bench.wait()} unmeasured")
    finally:
        lines, left = interrupt(bench)
    assert bench.returncode == 130, lines
    # (measurements may have ended between the line read above and the Ctrl-C)
    assert all(line.startswith("rep ") for line in lines[:-1]), lines
    assert lines[-1] == "bench.engine_bench: interrupted"
    assert left == {}


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("when", ["starting", "listening"])
def test_ctrl_c_while_a_benchmark_starts_its_servers_stops_them(random_checkpoint, tmp_path, when):
    """bench.open_loop_bench interrupted once its servers' processes exist (importing torch:
    one used to print its own line), or once the first one listens (loading the model, the
    other one maybe not yet): both are stopped, none left listening."""
    weights = tmp_path / "weights"
    (weights / "en-de").mkdir(parents=True)
    for f in random_checkpoint.iterdir():
        (weights / "en-de" / f.name).symlink_to(f)
    src = write_lines(tmp_path / "src.txt", make_parallel(50, seed=4)[0])
    port = two_free_ports()
    bench = start(
        [sys.executable, "-m", "bench.open_loop_bench", "--weights", str(weights), "--src",
         str(src), "--loads", "0.5", "--seconds", "60", "--capacity-seconds", "60",
         "--warm-seconds", "60", "--beam-size", "1", "--threads", "1", "--port", str(port)]
    )  # fmt: skip

    def servers() -> int:
        return sum("-m app.main" in c for c in session_processes(bench.pid).values())

    try:
        deadline = time.monotonic() + 120
        while not (servers() == 2 if when == "starting" else listening(port)):
            assert bench.poll() is None, f"the benchmark ended before its servers were {when}"
            assert time.monotonic() < deadline, f"the benchmark's servers were never {when}"
            time.sleep(0.02)
    finally:
        lines, left = interrupt(bench)
    assert bench.returncode == 130, lines
    assert not any("Traceback" in line for line in lines), lines
    # the servers' own log records aside (the benchmark passes them on: a server stopped
    # while it loads may log one), one line
    own = [line for line in lines if not LOG_RECORD.match(line)]
    assert own == ["bench.open_loop_bench: interrupted"], lines
    assert left == {}
    assert not listening(port) and not listening(port + 1)


def test_ctrl_c_while_the_started_processes_are_being_stopped_stops_them_all(monkeypatch):
    """A Ctrl-C that lands while bench.launch sends the first SIGTERMs (the benchmark is
    ending): every process still gets its SIGTERM, none is left running, and the
    KeyboardInterrupt goes on (the others were left running, and forgotten)."""
    from bench import launch

    processes = [launch.start(["sleep", "60"]) for _ in range(3)]
    sent, killpg = [], os.killpg

    def interrupted(pid, signum):
        killpg(pid, signum)
        sent.append((pid, signum))
        if len(sent) == 1:  # the first SIGTERM is sent: Ctrl-C
            signal.raise_signal(signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    monkeypatch.setattr(os, "killpg", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            launch.stop_started()
        running = [p.pid for p in processes if p.poll() is None]
    finally:
        signal.signal(signal.SIGINT, previous)
        monkeypatch.undo()
        for p in processes:  # whatever is left, so that nothing lingers
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
    assert running == []
    terms = [pid for pid, signum in sent if signum == signal.SIGTERM]
    assert terms == [p.pid for p in processes]
    launch.stop_started()  # nothing left to stop: it forgets them
    assert not [p for p in launch._started if p in processes]


def test_every_benchmark_runs_through_the_launcher():
    """What the tests above show for bench.engine_bench and bench.open_loop_bench holds for
    each `python -m bench.NAME`: its module hands itself to bench.launch before it imports
    anything else."""
    for path in sorted((ROOT / "bench").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if not any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            continue
        first = next(n for n in tree.body[1:] if not isinstance(n, ast.ImportFrom) or n.level)
        launched = f"raise SystemExit(main_of('bench.{path.stem}'))"
        assert isinstance(first, ast.If) and "__main__" in ast.unparse(first.test), path.name
        assert launched in ast.unparse(first), path.name
