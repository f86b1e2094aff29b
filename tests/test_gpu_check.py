"""bench/gpu_check.sh runs only on a machine with CUDA, where time is short: every benchmark it
calls must take the options it is given, which this checks here against each benchmark's own
`--help` (a misspelt or removed option would fail its step there, after minutes of set-up)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench_calls() -> dict[str, set[str]]:
    """{benchmark module: the options gpu_check.sh passes it}, continuation lines joined."""
    script = (ROOT / "bench" / "gpu_check.sh").read_text(encoding="utf-8")
    calls: dict[str, set[str]] = {}
    for line in script.replace("\\\n", " ").splitlines():
        code = line.split("#", 1)[0]
        for module, rest in re.findall(r"-m (bench\.\w+)(.*)", code):
            calls.setdefault(module, set()).update(re.findall(r"(?<![\w-])--[a-z][\w-]*", rest))
    return calls


def test_every_benchmark_the_gpu_check_calls_takes_its_options():
    calls = bench_calls()
    # the script's benchmarks, as it stood when this was written: none may drop out unseen
    assert {"bench.cuda_graph_bench", "bench.continuous_engine_bench"} <= set(calls)
    assert {"bench.open_loop_bench", "bench.load_bench"} <= set(calls)
    for module, options in calls.items():
        helped = subprocess.run(
            [sys.executable, "-m", module, "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert helped.returncode == 0, f"{module} --help: {helped.stderr[-500:]}"
        known = set(re.findall(r"--[a-z][\w-]*", helped.stdout))
        assert options <= known, f"{module} does not take {sorted(options - known)}"
