"""Which backend runs the packed float32 linear layers on this CPU (model.PackedLinear).

- "panels": model_core's own GEMM (`_kernels.c`, AVX2/FMA, AVX-512 tiles where torch runs
  AVX-512, a scalar fallback elsewhere), with the LayerNorm, bias, ReLU and residual fused into
  the call; a row gets the same bits in any batch by construction. On it, pre-norm ReLU models
  also run whole stacks in one C call (fused_stack.py), which the micro-benchmark below does
  not count: it times single layer calls.
- "onednn": torch's oneDNN linear ops on a blocked weight; oneDNN picks its own kernels for
  the CPU (AVX-512 where there is one) and the shape, and whether a row gets the same bits in
  any batch depends on them: it held at the shipped models' shapes on the AMD EPYC machines
  here (AVX2 and AVX-512, torch 2.13), but not at OPUS-MT's 2,048 -> 512 layer on the AVX-512
  one, nor at the shipped shapes on an Intel Xeon with AMX (torch 2.11), where one row alone
  and in a batch differed in the last bits.

`choose_linear_backend("auto", ...)` decides once per machine:

1. only one backend built: that one;
2. otherwise panels and the backends that pass `batch_invariant` here at the model's shapes
   (each row the same bits at 1 to 1,000 rows of a 2,048-row call; `bench.linear_backend_bench`
   times it) are candidates, so that a sentence translates the same alone and in a batch; a
   backend left out is named in a warning;
3. a CPU without x86 AVX2 (arm64, old x86): the panels kernel runs its scalar code there, so
   oneDNN if it is a candidate;
4. otherwise a micro-benchmark of the model's layer shapes at 1, 4, 32 and 128 rows (about a
   second; `time_backends`): the backend with the lowest cost relative to the fastest,
   averaged over the row counts, wins, so that one sentence's latency weighs as much as a
   full batch's throughput.

The result of 2-4 is cached in a JSON file keyed by CPU model, instruction set, torch version,
thread count and shapes, so later starts skip them. A backend named by the setting is used as
named.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from . import fused

log = logging.getLogger("model_core.linear_backend")

BACKENDS = ("panels", "onednn")
CHOICES = ("auto", *BACKENDS)
BENCH_ROWS = (1, 4, 32, 128)  # one sentence greedy and beam 4; a batch of 32 of each
INVARIANCE_ROWS = (1, 3, 8, 33, 64, 257, 1000)  # decoder steps to an encoder's many tokens
INVARIANCE_BATCH = 2048  # rows of the whole call the parts are compared with
# multiply-adds of one whole call at most: a layer wider than that (the output projection of a
# large vocabulary, which sees only decoder rows, a few hundred) is checked at fewer rows
INVARIANCE_MACS = 2**32
CACHE_FORMAT = "2"  # entries of format 1 chose without the batch-invariance check


def available_backends() -> list[str]:
    """The backends built here, the by-construction batch-invariant one first."""
    ops = torch.ops.mkldnn
    onednn = (
        torch.backends.mkldnn.is_available()
        and hasattr(ops, "_linear_pointwise")
        and hasattr(ops, "_reorder_linear_weight")
    )
    return ["panels"] * fused.kernel_available() + ["onednn"] * onednn


def cpu_capability() -> str:
    """torch's name for the widest vector ISA it uses here: AVX512, AVX2, DEFAULT, SVE256,..."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):
        return "unknown"


def panels_vectorised(machine: str | None = None, capability: str | None = None) -> bool:
    """Whether the panels kernel runs vectorised code here (x86-64 with AVX2 at least)."""
    machine = (machine or platform.machine()).lower()
    capability = capability or cpu_capability()
    return machine in ("x86_64", "amd64") and capability.upper() in ("AVX2", "AVX512")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model name")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cache_key(shapes: Sequence[tuple[int, int]], threads: int) -> str:
    text = "|".join(
        [
            CACHE_FORMAT,
            _cpu_model(),
            platform.machine(),
            cpu_capability(),
            torch.__version__,
            str(threads),
            ",".join(f"{o}x{i}" for o, i in shapes),
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def default_cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mt-service" / "linear_backend.json"


def time_backends(
    backends: Sequence[str], shapes: Sequence[tuple[int, int]], rounds: int = 15
) -> dict[str, float]:
    """Each backend's cost relative to the fastest, averaged (geometrically) over BENCH_ROWS:
    1.0 = fastest at every row count. Per row count, the time of one call of each (out, in)
    shape as the model makes them (a square layer adds the residual, the others normalise
    their input first, as the pre-norm layers do), each call's fastest of `rounds`. The
    backends take turns within each round and the minimum is kept, so that other processes'
    load, which only ever adds time, weighs on neither."""
    from .model import PackedLinear  # model imports this module

    torch.manual_seed(0)
    dense = [torch.nn.Linear(i, o) for o, i in shapes]
    layers = {b: [PackedLinear(lin, backend=b) for lin in dense] for b in backends}
    norms = {i: torch.nn.LayerNorm(i) for _, i in shapes}
    calls = []  # (row count, layer index, x, residual or None)
    for rows in BENCH_ROWS:
        for j, (o, i) in enumerate(shapes):
            calls.append((rows, j, torch.randn(rows, i), torch.randn(rows, o) if o == i else None))

    def call(b: str, j: int, x: torch.Tensor, residual: torch.Tensor | None) -> None:
        layer = layers[b][j]
        if residual is not None:
            layer.add_to(x, residual)
        else:
            layer(x, norm=norms[layer.in_features])

    best = {b: [float("inf")] * len(calls) for b in backends}
    with torch.inference_mode():
        for b in backends:  # warm-up: first calls pick and cache kernels
            for _, j, x, res in calls:
                call(b, j, x, res)
        for _ in range(rounds):
            for b in backends:
                for c, (_, j, x, res) in enumerate(calls):
                    t0 = time.perf_counter()
                    call(b, j, x, res)
                    best[b][c] = min(best[b][c], time.perf_counter() - t0)
    per_rows = {
        b: [sum(t for t, c in zip(best[b], calls, strict=True) if c[0] == r) for r in BENCH_ROWS]
        for b in backends
    }
    fastest = [min(per_rows[b][n] for b in backends) for n in range(len(BENCH_ROWS))]
    return {
        b: math.prod(t / f for t, f in zip(per_rows[b], fastest, strict=True))
        ** (1 / len(BENCH_ROWS))
        for b in backends
    }


def batch_invariant(
    backend: str,
    shapes: Sequence[tuple[int, int]],
    rows: Sequence[int] = INVARIANCE_ROWS,
    batch: int = INVARIANCE_BATCH,
) -> bool:
    """Whether `backend` gives each row the same bits whatever else is in the call: at each
    (out, in) shape, as the model calls it (plain, LayerNorm and ReLU, residual add for a
    square layer), the first and the last `rows` rows of a `batch`-row call alone against the
    whole call (fewer rows for a layer of more than INVARIANCE_MACS multiply-adds a call).
    Leaves torch's random number generator as it found it."""
    from .model import PackedLinear  # model imports this module

    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(0)
        for out_features, in_features in shapes:
            total = max(batch, *rows)
            total = min(total, max(257, INVARIANCE_MACS // (out_features * in_features)))
            parts = [n for n in rows if n < total]
            layer = PackedLinear(torch.nn.Linear(in_features, out_features), backend=backend)
            norm = torch.nn.LayerNorm(in_features)
            x = torch.randn(total, in_features)
            residual = torch.randn(x.shape[0], out_features)
            kinds = ["plain", "norm_relu"] + ["residual"] * (out_features == in_features)
            for kind in kinds:
                full = _call(layer, norm, kind, x, residual)
                for part in [slice(None, n) for n in parts] + [slice(-n, None) for n in parts]:
                    if not torch.equal(
                        _call(layer, norm, kind, x[part], residual[part]), full[part]
                    ):
                        return False
    return True


def _call(layer, norm, kind: str, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    if kind == "residual":
        return layer.add_to(x, residual)
    if kind == "norm_relu":
        return layer(x, activation="relu", norm=norm)
    return layer(x)


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def choose_linear_backend(
    setting: str = "auto",
    shapes: Sequence[tuple[int, int]] = ((768, 256), (256, 256), (1024, 256), (256, 1024)),
    *,
    cache_path: Path | None = None,
    available: Sequence[str] | None = None,
    vectorised: bool | None = None,
    timer: Callable[[Sequence[str], Sequence[tuple[int, int]]], dict[str, float]] = time_backends,
    invariant: Callable[[str, Sequence[tuple[int, int]]], bool] = batch_invariant,
) -> str:
    """The backend for `setting` ("auto", "panels" or "onednn") on this machine. `shapes`: the
    model's linear layers as (out, in). A named backend that is not built raises ValueError."""
    if setting not in CHOICES:
        raise ValueError(f"linear backend {setting!r}: choose one of {', '.join(CHOICES)}")
    available = list(available_backends() if available is None else available)
    if not available:
        raise ValueError("no packed linear backend is built here (C kernels or oneDNN)")
    if setting != "auto":
        if setting not in available:
            raise ValueError(
                f"linear backend {setting!r} is not available here (available: "
                f"{', '.join(available)})"
            )
        return setting
    if len(available) == 1:
        return available[0]
    threads = torch.get_num_threads()
    key = cache_key(shapes, threads)
    path = cache_path or default_cache_path()
    cached = _read_cache(path).get(key)
    if isinstance(cached, dict) and cached.get("backend") in available:
        return cached["backend"]
    passed = {b: b == "panels" or invariant(b, shapes) for b in available}  # panels: by design
    candidates = [b for b in available if passed[b]]  # panels among them: two are built
    if len(candidates) < len(available):
        log.warning(
            "linear backend: %s left out: on this CPU it does not give a row the same bits "
            "in any batch",
            ", ".join(b for b in available if not passed[b]),
        )
    times: dict[str, float] = {}
    if len(candidates) == 1:
        choice = candidates[0]
    elif not (panels_vectorised() if vectorised is None else vectorised):
        choice = "onednn"
    else:
        times = timer(candidates, shapes)
        choice = min(candidates, key=lambda b: times[b])  # ties: the first (panels)
        log.info(
            "linear backend: %s (micro-benchmark: time relative to the fastest at each batch "
            "size, averaged over sizes: %s)",
            choice,
            ", ".join(f"{b} {t:.2f}x" for b, t in times.items()),
        )
    entry = {
        "backend": choice,
        "batch_invariant": passed,
        "relative_cost": times,
        "cpu": _cpu_model(),
        "capability": cpu_capability(),
        "torch": torch.__version__,
        "threads": threads,
    }
    try:
        data = _read_cache(path)
        data[key] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)
    except OSError as exc:  # a read-only home: decide again next time
        log.info("linear backend cache %s not written: %s", path, exc)
    return choice
