"""The load benchmark runs end to end on a tiny checkpoint: it starts its servers on a loopback
port, sends bounded traffic, and prints its table and summary lines. Nothing here asserts a
speed; the numbers of a random model on a shared machine mean nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bench.common import free_port
from model_core.fused import attention_kernels_for
from tests.conftest import make_parallel, write_lines

ROOT = Path(__file__).resolve().parent.parent


def two_free_ports() -> int:
    """A port p with p + 1 free too (the benchmark's servers take both)."""
    return free_port(2)


def run_bench(module: str, *args: str, timeout: float = 300) -> list[str]:
    """python -m bench.MODULE ARGS in the repository; its output lines, once it exited 0."""
    out = subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


def test_load_bench_runs_both_modes_and_reports_the_overhead(random_checkpoint, tmp_path):
    weights = tmp_path / "weights"
    shutil.copytree(random_checkpoint, weights / "en-de")
    src = write_lines(tmp_path / "src.txt", make_parallel(12, seed=3)[0])
    lines = run_bench(
        "load_bench",
        "--weights",
        str(weights),
        "--src",
        str(src),
        "--sentences",
        "12",
        "--concurrency",
        "1,3",
        "--max-requests",
        "6",
        "--max-seconds",
        "20",
        "--beam-size",
        "1",
        "--batch-size",
        "4",
        "--port",
        str(two_free_ports()),
    )
    rows = [line for line in lines if line.startswith("| o")]
    assert len(rows) == 4  # batching on and off, two concurrencies each
    # every request answered: 6 requests, 0 errors on each row
    assert all(
        row.split("|")[3].strip() == "6"
        and row.split("|")[4].strip() == "0"
        and float(row.split("|")[7]) > 0
        for row in rows
    )
    # where the CPU went, per request: numbers for every level (the kernel counts in 10 ms
    # ticks, so a level of six requests to a tiny model may show 0)
    assert all(float(row.split("|")[c]) >= 0 for row in rows for c in (11, 12, 13))
    assert sum(float(row.split("|")[c]) for row in rows for c in (11, 12)) > 0
    assert any("HTTP + batcher overhead at concurrency 1" in line for line in lines)
    # the overhead in three parts, from the server's own timings in each answer
    parts = next(line for line in lines if line.startswith("the overhead at concurrency 1"))
    numbers = re.findall(r"\) (-?[0-9.]+)", parts)
    assert len(numbers) == 3 and all(float(n) >= 0 for n in numbers), parts
    # and the same path without the engine, back to back and with pauses: every request
    # answered, its parts reported
    bare = [line for line in lines if line.startswith("the same requests with a text")]
    assert len(bare) == 2 and "back to back" in bare[0] and "after a pause of" in bare[1]
    for line in bare:
        assert ", 300 one at a time, " in line and "failures" not in line, line
        assert float(line.split("p50 ")[1].split(" ms")[0]) > 0
    assert sum("batching on / off" in line for line in lines) == 2
    # the ceiling: the engine alone in batches, three timed passes after an untimed one,
    # three between the two levels and three after them; the service's share at concurrency
    # 3 is against the passes on either side of that level
    engine = next(line for line in lines if line.startswith("engine alone"))
    assert "(median of 9 passes, 3 before the first level" in engine
    assert engine.count(" | ") == 2
    assert any(
        line.startswith("batching on, concurrency 3: ")
        and "of the engine alone in batches just before / after the level" in line
        for line in lines
    )


def test_http_floor_bench_times_a_bare_server_with_the_same_client(tmp_path):
    """bench.http_floor_bench: its own bare server on a loopback port answers every request
    (the bench stops at the first that is not a 200) and the round trip is reported."""
    src = write_lines(tmp_path / "src.txt", make_parallel(12, seed=3)[0])
    lines = run_bench(
        "http_floor_bench", "--src", str(src), "--requests", "30", "--warm", "5", "--port",
        str(two_free_ports()), timeout=120,
    )  # fmt: skip
    line = next(x for x in lines if x.startswith("bare uvicorn round trip"))
    assert "30 requests one at a time" in line
    p50 = float(line.split("p50 ")[1].split(" ms")[0])
    assert 0 < p50 < 1000


def test_open_loop_bench_runs_both_schedulers_and_reports_steady_throughput(
    random_checkpoint, tmp_path
):
    """bench.open_loop_bench end to end on a tiny checkpoint: a static and a continuous server
    on loopback ports, a short closed loop for their capacities in two turns each (with their
    engines' figures from the servers' metrics), then one open-loop level on each; every
    request answered."""
    weights = tmp_path / "weights"
    shutil.copytree(random_checkpoint, weights / "en-de")
    src = write_lines(tmp_path / "src.txt", make_parallel(300, seed=4)[0])
    lines = run_bench(
        "open_loop_bench", "--weights", str(weights), "--src", str(src), "--loads", "0.5",
        "--seconds", "3", "--capacity-seconds", "2", "--capacity-rounds", "2",
        "--capacity-clients", "4",
        "--warm-seconds", "1", "--warm-clients", "2", "--beam-size", "1", "--port",
        str(two_free_ports()),
    )  # fmt: skip
    rows = {row.split("|")[2].strip(): row.split("|") for row in lines if row.startswith("| 50%")}
    assert set(rows) == {"static", "continuous"}
    for row in rows.values():
        assert int(row[3]) > 0 and row[4].strip() == "0"  # answered, none failed
        steady_requests, steady_words = float(row[5]), float(row[6].replace(",", ""))
        assert steady_requests > 0 and steady_words > steady_requests  # several words each
    capacity = next(line for line in lines if line.startswith("capacity ("))
    assert "static " in capacity and "continuous " in capacity and "nan" not in capacity
    engine = next(line for line in lines if line.startswith("engine meanwhile"))
    assert "static " in engine and "continuous " in engine and "nan" not in engine
    assert any(line.startswith("50%: continuous / static: short p99 ") for line in lines)


def neighbours_of(pid: int) -> list[str]:
    """The pids of bench.continuous_engine_bench's neighbour processes started by `pid`."""
    marker, found = b"the neighbour of bench.continuous_engine_bench", []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:  # it ended meanwhile
            continue
        if any(marker in a for a in args) and str(pid).encode() in args:
            found.append(cmdline.parent.name)
    return found


@pytest.mark.parametrize("as_thread", [False, True], ids=["process", "thread"])
def test_continuous_engine_bench_measures_each_decoder_beside_a_neighbour(
    random_checkpoint, tmp_path, as_thread
):
    """bench.continuous_engine_bench --neighbour: every decoder measured alone and beside a
    process (or, with --neighbour-thread, a thread of its own that holds the GIL) that spins
    in short bursts, which gets a measured share of a core while it runs, and is gone after
    the benchmark."""
    src = write_lines(tmp_path / "src.txt", make_parallel(24, seed=5)[0])
    bench = subprocess.Popen(
        [sys.executable, "-m", "bench.continuous_engine_bench", "--checkpoint",
         str(random_checkpoint), "--src", str(src), "--sentences", "24", "--inflight", "8",
         "--beam-size", "2", "--repeats", "2", "--step-places", "4", "--neighbour", "1:2",
         "--device", "cpu", *(["--neighbour-thread"] if as_thread else [])],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out, err = bench.communicate(timeout=180)
    assert bench.returncode == 0, err[-3000:]
    lines = out.splitlines()
    kind = "thread" if as_thread else "process"
    assert any(f"beside a neighbour {kind} spinning 1:2 ms" in line for line in lines), out
    header = next(line for line in lines if line.startswith("| decoder"))
    assert "sentences/s beside the neighbour" in header and "neighbour's share of a core" in header
    rows = [line.split("|") for line in lines if line.startswith(("| static", "| continuous"))]
    assert len(rows) == 3  # static, continuous, continuous with 4 sentences per step
    for row in rows:
        alone, beside, ratio = float(row[2]), float(row[4]), float(row[5])
        # the rates are printed to 0.1 sentence/s, the ratio to 0.01
        assert alone > 0 and beside > 0
        # (each rate within 0.05 of its printed value, the ratio within 0.005)
        slack = 0.005 + 0.05 * (alone + beside) / (alone - 0.05) ** 2
        assert abs(ratio - beside / alone) <= slack, row
        # spinning 1 ms in every 2: it ran and was measured (how much of a core it got depends
        # on what else the machine runs)
        assert 0 < float(row[6].strip().rstrip("%")) / 100 <= 1.1, row
    assert neighbours_of(bench.pid) == []  # the neighbour does not outlive the benchmark


def test_continuous_engine_bench_also_measures_the_fixed_buffers(random_checkpoint, tmp_path):
    """bench.continuous_engine_bench --fixed: a continuous decode in the fixed buffers that a
    GPU replays from CUDA graphs (here bfloat16 on the CPU, the gather layout, eagerly); in
    float32 on this CPU (the slot layout) the option is refused."""
    src = write_lines(tmp_path / "src.txt", make_parallel(24, seed=6)[0])
    common = ["--checkpoint", str(random_checkpoint), "--src", str(src), "--sentences", "24",
              "--inflight", "8", "--beam-size", "2", "--repeats", "1", "--device", "cpu",
              "--fixed"]  # fmt: skip
    lines = run_bench("continuous_engine_bench", *common, "--dtype", "bfloat16")
    rows = {line.split("|")[1].strip(): line.split("|") for line in lines if line.startswith("| ")}
    fixed = rows["continuous (joins every 1 steps), fixed buffers, eager"]
    assert float(fixed[2]) > 0 and int(fixed[3]) > 0
    refused = subprocess.run(
        [sys.executable, "-m", "bench.continuous_engine_bench", *common, "--dtype", "float32"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 2 and "gather layout" in refused.stderr


def test_footprint_bench_finds_no_decode_past_its_count(random_checkpoint):
    """bench.footprint_bench with a real (tiny) checkpoint: a row per mix, layout and beam,
    each decode's highest peak below what admission counted for it."""
    lines = run_bench("footprint_bench", "--checkpoint", str(random_checkpoint), "--sentences", "6")
    rows = [line.split("|") for line in lines if line.startswith("| ") and "---" not in line]
    ratios = [float(row[4]) for row in rows[1:]]
    layouts = {"gather", "fixed"} | ({"slots"} if attention_kernels_for(torch.zeros(1)) else set())
    assert {row[2].strip() for row in rows[1:]} == layouts
    assert len(ratios) == 3 * len(layouts) * 2 and all(0 < r <= 1 for r in ratios), ratios


def test_the_neighbour_dies_with_a_benchmark_that_is_killed(random_checkpoint, tmp_path):
    """Killed outright (SIGKILL: no cleanup of its own runs), the benchmark takes its
    neighbour with it, stopped or running."""
    src = write_lines(tmp_path / "src.txt", make_parallel(24, seed=6)[0])
    bench = subprocess.Popen(
        [sys.executable, "-m", "bench.continuous_engine_bench", "--checkpoint",
         str(random_checkpoint), "--src", str(src), "--sentences", "24", "--inflight", "8",
         "--repeats", "1000", "--neighbour", "1:2", "--device", "cpu"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not neighbours_of(bench.pid):
            assert bench.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(1.0)  # into the measurements
    finally:
        bench.kill()
        bench.wait()
    deadline = time.monotonic() + 10
    while neighbours_of(bench.pid):
        assert time.monotonic() < deadline, "the neighbour outlived the killed benchmark"
        time.sleep(0.05)


def gpu_check_calls() -> dict[str, set[str]]:
    """{benchmark module: the options bench/gpu_check.sh passes it}, continuation lines joined."""
    script = (ROOT / "bench" / "gpu_check.sh").read_text(encoding="utf-8")
    calls: dict[str, set[str]] = {}
    for line in script.replace("\\\n", " ").splitlines():
        code = line.split("#", 1)[0]
        for module, rest in re.findall(r"-m bench\.(\w+)(.*)", code):
            calls.setdefault(module, set()).update(re.findall(r"(?<![\w-])--[a-z][\w-]*", rest))
    return calls


def test_every_benchmark_the_gpu_check_calls_takes_its_options():
    """bench/gpu_check.sh runs only where there is CUDA, and time there is short: a misspelt or
    removed option would fail its step after minutes of set-up. Each benchmark it calls must
    list every option the script gives it in its own --help."""
    calls = gpu_check_calls()
    # the benchmarks the script calls: a change to its layout must not hide them from the parse
    assert {"cuda_graph_bench", "continuous_engine_bench", "open_loop_bench"} <= set(calls)
    assert "load_bench" in calls
    helps = all_help(sorted(calls))
    for module, options in calls.items():
        known = set(re.findall(r"--[a-z][\w-]*", helps[module]))
        assert options <= known, f"bench.{module} does not take {sorted(options - known)}"


#: runs `python -m bench.MODULE --help` for each module named in its arguments, in one process
#: (torch imported once, not once for each), each help after a line "==== MODULE"
_ALL_HELP = """
import contextlib, io, runpy, sys
for module in sys.argv[1:]:
    out = io.StringIO()
    sys.argv = [module, "--help"]
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_module(f"bench.{module}", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            assert exc.code in (0, None), (module, exc.code)
    print(f"==== {module}")
    print(out.getvalue())
"""


def all_help(modules: list[str]) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-c", _ALL_HELP, *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    parts = re.split(r"^==== (\S+)\n", out.stdout, flags=re.MULTILINE)[1:]
    helps = dict(zip(parts[::2], parts[1::2], strict=True))
    assert set(helps) == set(modules) and all("usage:" in h for h in helps.values())
    return helps
