"""What a decode path's first call costs over its later ones, right after a model loads: the
one-time work (on a GPU, loading each kernel at its first use; the libraries' handles) that the
service's warm-up (app/engine.py `warm_up`) takes before it reports ready.

    python -m bench.first_call_bench --checkpoint weights/en-de --device cuda

Each path runs three times, in the order of the table, in one fresh process, then once on
three other sentences (other lengths and count: on a GPU, a kernel library that builds a plan
per input shape pays again there); the table gives each call's milliseconds.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.first_call_bench"))

import argparse
import time
from pathlib import Path

from app.engine import decode_continuously
from model_core.translator import Translator

from .common import machine, sync, table


def timed(tr: Translator, fn, ids: list[list[int]]) -> float:
    sync(tr.device)
    start = time.perf_counter()
    fn(ids)
    sync(tr.device)
    return (time.perf_counter() - start) * 1e3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, default=Path("weights/en-de"))
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto")
    args = p.parse_args(argv)
    load_start = time.perf_counter()
    tr = Translator.load(args.checkpoint, device=args.device, dtype=args.dtype)
    load_ms = (time.perf_counter() - load_start) * 1e3
    first = [tr.encode_source(t) for t in ("Hello world.", "Good morning, how are you?")]
    other = [
        tr.encode_source(t)
        for t in ("Thanks.", "The train leaves at nine tomorrow.", "Where is the old library?")
    ]
    paths = {
        "static beam 2": lambda ids: tr.translate_ids(ids, beam_size=2, max_length=16),
        "static greedy": lambda ids: tr.translate_ids(ids, beam_size=1, max_length=16),
        "continuous beam 2": lambda ids: decode_continuously(tr, ids, 2, max_length=16),
        "continuous greedy": lambda ids: decode_continuously(tr, ids, 1, max_length=16),
    }
    rows = [
        [name] + [f"{timed(tr, fn, first):.1f}" for _ in range(3)] + [f"{timed(tr, fn, other):.1f}"]
        for name, fn in paths.items()
    ]
    print(machine())
    print(f"{args.checkpoint}: {tr.device.type} {tr.precision}, loaded in {load_ms:.0f} ms")
    print()
    headers = ["path (in this order)", "1st call ms", "2nd ms", "3rd ms", "other sentences ms"]
    print(table(headers, rows))
    return 0
