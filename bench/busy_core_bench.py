"""The service sharing its CPU: start-up time and one-sentence latency while another process
keeps a core busy, for several thread settings.

For each variant (a set of environment variables) the benchmark starts the real service
(`python -m app.main`, uvicorn on 127.0.0.1) as a subprocess, measures the time from the
process start to the first 200 from /health (models loaded and warmed up), then sends
`--requests` sequential one-sentence /translate requests and reports their median and maximum
latency. With `--busy` (the default) a spinning Python process (`while True: pass`) runs for
the whole measurement, pinned to the last CPU with `--pin`; `--no-busy` measures the idle
machine for comparison.

    python -m bench.busy_core_bench                      # default variants, one core busy
    python -m bench.busy_core_bench --no-busy
    python -m bench.busy_core_bench --variant 'MT_THREADS=1' --variant 'OMP_WAIT_POLICY=ACTIVE'

Each variant's environment starts from this process's environment with every MT_* and OMP_*
variable removed, then adds the variant's own; "default" adds nothing.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.busy_core_bench"))

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from .common import free_port, machine
from .launch import start, stop

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = [
    "The weather is nice today.",
    "Where is the train station?",
    "I would like a cup of coffee, please.",
    "She reads a book every evening.",
    "We are going to the museum tomorrow.",
]
BUSY = {
    "spin": "while True: pass",
    "torch": "import torch\ntorch.set_num_threads(1)\na = torch.randn(256, 256)\nwhile True: a @ a",
}
DEFAULT_VARIANTS = [
    "default",
    "MT_THREADS=1",
    "OMP_WAIT_POLICY=ACTIVE",
    "OMP_WAIT_POLICY=PASSIVE",
]


def parse_variant(text: str) -> dict[str, str]:
    if text == "default":
        return {}
    pairs = [p for p in text.split(",") if p]
    return dict(p.split("=", 1) for p in pairs)


@contextlib.contextmanager
def busy_core(pin: bool, kind: str = "spin"):
    """A separate process keeping one CPU busy (the last one in our mask with `pin`): a Python
    loop ("spin"), or single-threaded torch matrix products ("torch")."""
    proc = start([sys.executable, "-c", BUSY[kind]])
    if pin:
        os.sched_setaffinity(proc.pid, {max(os.sched_getaffinity(0))})
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def run_variant(env_extra: dict[str, str], weights: Path, requests: int, timeout: float) -> dict:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MT_", "OMP_", "GOMP_"))}
    env.update({"MT_WEIGHTS_DIR": str(weights), "MT_PORT": str(port), "MT_HOST": "127.0.0.1"})
    env.update({"MT_LOG_LEVEL": "warning", **env_extra})
    url = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    proc = start(
        [sys.executable, "-m", "app.main"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(timeout=timeout) as client:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"service exited with {proc.returncode}")
                if time.perf_counter() - t0 > timeout:
                    raise TimeoutError("service did not become ready")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{url}/health").status_code == 200:
                        break
                time.sleep(0.02)
            startup = time.perf_counter() - t0
            latencies = []
            for i in range(requests):
                body = {"q": SENTENCES[i % len(SENTENCES)], "source": "en", "target": "de"}
                t = time.perf_counter()
                r = client.post(f"{url}/translate", json=body)
                latencies.append(time.perf_counter() - t)
                r.raise_for_status()
    finally:
        stop([proc])
    return {
        "startup_s": startup,
        "median_ms": statistics.median(latencies) * 1000,
        "max_ms": max(latencies) * 1000,
        "latencies_ms": [round(x * 1000, 1) for x in latencies],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--weights", type=Path, default=ROOT / "weights")
    p.add_argument("--requests", type=int, default=10, help="sequential requests per variant")
    p.add_argument("--repeats", type=int, default=1, help="runs of each variant")
    p.add_argument(
        "--variant",
        action="append",
        help="NAME=VALUE[,NAME=VALUE...] or 'default'; repeatable "
        f"(default: {' / '.join(DEFAULT_VARIANTS)})",
    )
    p.add_argument("--busy", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--pin", action="store_true", help="pin the busy process to the last CPU")
    p.add_argument("--busy-kind", choices=sorted(BUSY), default="spin")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per start or request")
    p.add_argument("--json", type=Path, help="write the results here too")
    args = p.parse_args(argv)

    variants = args.variant or DEFAULT_VARIANTS
    busy = f"{args.busy_kind}{', pinned' if args.pin else ''}" if args.busy else "none"
    print(f"# {machine()}; busy core: {busy}")
    print(f"# load average before: {Path('/proc/loadavg').read_text().strip()}")
    results = []
    with busy_core(args.pin, args.busy_kind) if args.busy else contextlib.nullcontext():
        if args.busy:
            time.sleep(1.0)  # let the spinner take its core
        print(f"{'variant':<34} {'start-up s':>10} {'median ms':>10} {'max ms':>9}")
        for _ in range(args.repeats):
            for name in variants:
                r = run_variant(parse_variant(name), args.weights, args.requests, args.timeout)
                r["variant"] = name
                results.append(r)
                print(
                    f"{name:<34} {r['startup_s']:>10.2f} {r['median_ms']:>10.1f} "
                    f"{r['max_ms']:>9.1f}",
                    flush=True,
                )
    print(f"# load average after: {Path('/proc/loadavg').read_text().strip()}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"busy": args.busy, "results": results}, indent=1))
    return 0
