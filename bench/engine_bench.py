"""Engine benchmark: generated tokens/s of the fast (KV-cache) decoder, greedy and beam 4, at
batch sizes 1 / 16 / 64, against the reference decoder (whole prefix each step), with peak
resident memory. Systems are interleaved within each repetition; medians are reported.

    python -m bench.engine_bench --checkpoint weights/en-de --sentences 256 --repeats 3

It measures; it asserts nothing about speed.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.engine_bench"))

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from model_core.translator import Translator

from .common import (
    DEFAULT_SRC,
    PeakRSS,
    add_malloc_option,
    apply_malloc,
    freeze_gc,
    machine,
    median,
    read_sentences,
    table,
)


def run_once(
    tr: Translator, sentences: list[str], *, beam: int, batch: int, reference: bool
) -> dict:
    start = time.perf_counter()
    with PeakRSS() as mem:
        results = tr.translate_batch(
            sentences, beam_size=beam, max_batch_size=batch, reference=reference
        )
    seconds = time.perf_counter() - start
    tokens = sum(r.output_tokens + 1 for r in results)  # generated tokens incl. EOS
    return {
        "seconds": seconds,
        "tokens": tokens,
        "tok_s": tokens / seconds,
        "sent_s": len(sentences) / seconds,
        "peak_rss_mb": mem.peak / 2**20,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, default=Path("weights/en-de"))
    p.add_argument("--src", type=Path, default=DEFAULT_SRC)
    p.add_argument("--sentences", type=int, default=256)
    p.add_argument(
        "--reference-sentences", type=int, default=48, help="the slow reference runs fewer"
    )
    p.add_argument("--batch-sizes", default="1,16,64")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0)
    add_malloc_option(p)
    p.add_argument("--device", default="auto")
    p.add_argument("--json", type=Path, help="write raw results here")
    args = p.parse_args(argv)
    apply_malloc(args.malloc)
    if args.threads:
        torch.set_num_threads(args.threads)
    tr = Translator.load(args.checkpoint, device=args.device)
    # the reference decoder runs the seeds' modules as they are: plain torch linear layers
    reference_tr = Translator.load(args.checkpoint, device=args.device, packed=False)
    sentences = read_sentences(args.src, args.sentences)
    batches = [int(b) for b in args.batch_sizes.split(",")]
    systems = [("reference", 1, 1, True)]
    systems += [("fast", beam, b, False) for beam in (1, 4) for b in batches]
    tr.translate_batch(sentences[:8], beam_size=4)  # warm-up
    reference_tr.translate_batch(sentences[:2], beam_size=1, reference=True)
    freeze_gc()
    raw: dict[str, list[dict]] = {}
    for rep in range(args.repeats):
        for name, beam, batch, reference in systems:
            subset = sentences[: args.reference_sentences] if reference else sentences
            key = f"{name} beam={beam} batch={batch}"
            raw.setdefault(key, []).append(
                run_once(
                    reference_tr if reference else tr,
                    subset,
                    beam=beam,
                    batch=batch,
                    reference=reference,
                )
            )
            print(
                f"rep {rep + 1}/{args.repeats} {key}: {raw[key][-1]['tok_s']:.1f} tok/s",
                file=sys.stderr,
            )
    ref = median([r["tok_s"] for r in raw["reference beam=1 batch=1"]])
    rows = []
    for name, beam, batch, _ in systems:
        runs = raw[f"{name} beam={beam} batch={batch}"]
        tok_s = median([r["tok_s"] for r in runs])
        rows.append(
            [
                name,
                "greedy" if beam == 1 else f"beam {beam}",
                batch,
                tok_s,
                median([r["sent_s"] for r in runs]),
                median([r["peak_rss_mb"] for r in runs]),
                f"{tok_s / ref:.1f}x",
            ]
        )
    print(
        f"\nmachine: {machine()}; {torch.get_num_threads()} threads, "
        f"device {tr.device}, dtype {str(tr.dtype).replace('torch.', '')}"
    )
    print(
        f"checkpoint: {args.checkpoint} ({tr.parameters:,} parameters); {len(sentences)} sentences "
        f"({args.reference_sentences} for the reference); medians of {args.repeats} interleaved runs\n"
    )
    print(
        table(
            [
                "decoder",
                "search",
                "batch",
                "generated tok/s",
                "sentences/s",
                "peak RSS MB",
                "vs reference",
            ],
            rows,
        )
    )
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))
    return 0
