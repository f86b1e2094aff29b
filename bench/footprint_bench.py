"""What a continuous decode holds at its peak against what admission counts for it
(model_core.continuous.footprint), with a real checkpoint: three mixes of 24 sentences (short
sentences; sources of 200 tokens with outputs of 2; outputs of 20-200), each layout the host
can run (the slot layout of the CPU's attention kernels, the gather layout, the fixed buffers
of MT_CUDA_GRAPHS), beams 1 and 4. The peak of every join and step is measured as
tests/test_continuous_decoding.py's footprint test measures it (torch's profiler on the CPU,
the caching allocator's peak on CUDA). A ratio above 1 would be memory past the budget.

    python -m bench.footprint_bench --checkpoint weights/en-de

It measures; it asserts nothing.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.footprint_bench"))

import argparse
import itertools
from pathlib import Path

import torch

from model_core import fused
from model_core.masks import pad_mask
from model_core.translator import Translator, resolve_device

from .common import machine, table


def peaks(calls, device: str = "cpu") -> list[int]:
    """Runs each call in turn; for each, the most bytes torch's allocator held during it,
    counted from before the first. On the CPU from the profiler's record of every allocation
    and free (one profile per call: inside a marked span of one profile, the frees are not
    recorded with their times); on CUDA from the caching allocator's peak."""
    from torch.profiler import ProfilerActivity, profile  # (imported when measuring)

    found, held = [], 0
    if device == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        for call in calls:
            torch.cuda.reset_peak_memory_stats()
            call()
            torch.cuda.synchronize()
            found.append(torch.cuda.max_memory_allocated() - base)
        return found
    for call in calls:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            call()
        changes = sorted((e.time_range.start, e.self_cpu_memory_usage) for e in prof.events())
        levels = list(itertools.accumulate((c for _, c in changes), initial=held))
        found.append(max(levels))
        held = levels[-1]
    return found


def padded(srcs: list[torch.Tensor]) -> torch.Tensor:
    """Sources (1, n_i) as one batch (count, max n_i), padded with 0."""
    src = torch.zeros((len(srcs), max(x.shape[1] for x in srcs)), dtype=torch.long)
    for i, x in enumerate(srcs):
        src[i, : x.shape[1]] = x[0]
    return src


def staggered(
    running, srcs: list[torch.Tensor], limits: list[int], plan, device: str
) -> tuple[list[int], list[int], list[int]]:
    """Runs a decode in which each (ids, steps) of `plan` joins, then that many steps run;
    returns, for each join and step, the most bytes held during it (`peaks`) and the
    positions admission counted for it (RunningBatch.footprint before the join, with the
    sentences it leaves: a step counts its join's, as the decode only shrinks since), and the
    self-attention positions the buffers hold after each step."""
    counted: list[int] = []
    allocated: list[int] = []

    def join(ids):
        def call():
            everyone = [s.id for s in running.sentences] + ids
            longest = max(limits[i] for i in everyone)
            width = max(srcs[i].shape[1] for i in everyone)
            counted.append(running.footprint(len(everyone), longest, width, len(ids)))
            src = padded([srcs[i] for i in ids]).to(device)
            with torch.inference_mode():
                running.join(ids, src, pad_mask(src, 0), [limits[i] for i in ids], [1] * len(ids))

        return call

    def step():
        counted.append(counted[-1])
        with torch.inference_mode():
            if len(running):
                running.step()
        allocated.append(running.allocated())

    calls = [call for ids, steps in plan for call in [join(ids)] + [step] * steps]
    return peaks(calls, device), counted, allocated


def mixes(vocab: int, count: int, seed: int) -> dict[str, tuple[list[torch.Tensor], list[int]]]:
    """name: (sources (1, n) each, output limits)."""
    g = torch.Generator().manual_seed(seed)
    short = [int(x) for x in torch.randint(8, 20, (count,), generator=g)]
    varied = [int(x) for x in torch.randint(5, 40, (count,), generator=g)]
    out = {
        "short sentences": (short, [n + 10 for n in short]),
        "sources of 200, outputs of 2": ([200] * count, [2] * count),
        "outputs of 20-200": (
            varied,
            [int(x) for x in torch.randint(20, 200, (count,), generator=g)],
        ),
    }
    return {
        name: ([torch.randint(4, vocab, (1, n), generator=g) for n in lens], limits)
        for name, (lens, limits) in out.items()
    }


def run(tr: Translator, layout: str, beam: int, srcs, limits) -> float:
    """The highest peak / counted over the joins and steps of a staggered decode."""
    fused.ATTENTION_KERNELS = layout == "slots"
    cfg = tr.model.cfg
    position = cfg.decoder_layers * 2 * cfg.d_model * tr.model.src_embed.weight.element_size()
    running = tr.running_batch(beam, fixed=layout == "fixed")
    if running.layout != layout:
        raise SystemExit(f"{layout}: not on this host")
    third = len(srcs) // 3
    plan = [(list(range(0, third)), 1), (list(range(third, 2 * third)), 1)]
    plan.append((list(range(2 * third, len(srcs))), 3))
    held, counted, _ = staggered(running, srcs, limits, plan, tr.device.type)
    ratios = [h / (c * position) for h, c in zip(held, counted, strict=True)]
    running.reset()
    return max(ratios)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, default=Path("weights/en-de"))
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto", help="auto (bfloat16 on a GPU), float32, ...")
    p.add_argument("--sentences", type=int, default=24)
    args = p.parse_args(argv)
    device = resolve_device(args.device)
    tr = Translator.load(args.checkpoint, device=device, dtype=args.dtype)
    layouts = ["gather", "fixed"]
    if device.type == "cpu" and fused.attention_kernels_for(torch.zeros(1)):
        layouts.insert(0, "slots")  # the attention kernels' (built here)
    rows = []
    for name, (srcs, limits) in mixes(tr.model.cfg.tgt_vocab_size, args.sentences, 0).items():
        for layout in layouts:
            for beam in (1, 4):
                rows.append([name, layout, beam, f"{run(tr, layout, beam, srcs, limits):.2f}"])
                print(*rows[-1], sep=" | ", flush=True)
    print(machine())
    print(table(["mix", "layout", "beam", "highest peak / counted"], rows))
    return 0
