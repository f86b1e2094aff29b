"""The packed linear backends side by side at a model's layer shapes, as the decoder calls
them: each layer's time per call at 1, 4, 32 and 128 rows (one sentence greedy and beam 4, a
batch of 32 of each), each call's fastest of `--rounds` turns with the backends taking turns,
then the relative costs `MT_LINEAR_BACKEND=auto` compares, whether each backend gives a row
the same bits in any batch here (`batch_invariant`, and how long that check took), and the
backend auto picks.

    python -m bench.linear_backend_bench --checkpoint weights/en-de --threads 2
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.linear_backend_bench"))

import argparse
import time
from pathlib import Path

import torch

from model_core.checkpoint import read_metadata
from model_core.linear_backend import (
    BENCH_ROWS,
    available_backends,
    batch_invariant,
    cpu_capability,
    time_backends,
)
from model_core.model import PackedLinear

from .common import machine, table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--checkpoint", type=Path, default=Path("weights/en-de"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=30)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = read_metadata(args.checkpoint)["model"]
    d, ff, vocab = cfg.d_model, cfg.d_ff, cfg.tgt_vocab_size
    layers = {  # name: (out, in, how the decoder calls it)
        "q|k|v (norm first)": (3 * d, d, "norm"),
        "attention out (+ residual)": (d, d, "residual"),
        "feed-forward in (norm, ReLU)": (ff, d, "norm_relu"),
        "feed-forward out (+ residual)": (d, ff, "residual"),
        "generator (norm first)": (vocab, d, "norm"),
    }
    backends = available_backends()
    torch.manual_seed(0)
    built = {}
    for name, (o, i, _) in layers.items():
        dense = torch.nn.Linear(i, o)
        built[name] = {b: PackedLinear(dense, backend=b) for b in backends}
    norms = {i: torch.nn.LayerNorm(i) for _, i, _ in layers.values()}
    rows_out = []
    with torch.inference_mode():
        for rows in BENCH_ROWS:
            for name, (o, i, how) in layers.items():
                x, res = torch.randn(rows, i), torch.randn(rows, o)
                best = dict.fromkeys(backends, float("inf"))
                for _ in range(args.rounds + 1):
                    for b in backends:
                        layer = built[name][b]
                        t0 = time.perf_counter()
                        if how == "residual":
                            layer.add_to(x, res)
                        else:
                            layer(x, activation="relu" if how == "norm_relu" else "none",
                                  norm=norms[i])  # fmt: skip
                        best[b] = min(best[b], time.perf_counter() - t0)
                rows_out.append([rows, name, *(f"{best[b] * 1e6:.1f}" for b in backends)])
    print(f"# {machine()} ({cpu_capability()}); {args.threads} threads")
    print(f"# {args.checkpoint}: d_model {d}, d_ff {ff}, vocabulary {vocab}\n")
    print(table(["rows", "layer", *(f"{b} us" for b in backends)], rows_out))
    shapes = [(o, i) for o, i, _ in layers.values()]
    costs = time_backends(backends, shapes)
    print("\nrelative cost (1.0: the fastest at every row count): ", end="")
    print(", ".join(f"{b} {c:.2f}" for b, c in costs.items()))
    passed = {}
    for b in backends:
        start = time.perf_counter()
        passed[b] = batch_invariant(b, shapes)
        print(f"{b}: batch-invariant here: {passed[b]} (check {time.perf_counter() - start:.2f} s)")
    candidates = [b for b in backends if b == "panels" or passed[b]]
    print(f"MT_LINEAR_BACKEND=auto picks: {min(candidates, key=lambda b: costs[b])}")
    return 0
