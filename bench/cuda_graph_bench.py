"""What a CUDA graph of the decoder step would save: the step over a key/value buffer of fixed
size, eager and replayed from a graph, against the step as the decoders run it now.

A graph replays its kernels with the shapes and addresses they were captured with, and a
decode step's shapes change at every step (its keys grow by a position). A step over the
whole buffer of `--positions` positions, each row masked beyond its own step (the way
`RunningBatch` already decodes sentences at different steps), has one shape for as long as the
rows stay. This benchmark builds such a state (real sentences' cross-attention state, beams of
random earlier keys and values) and times, per row count:

- `now`: `Transformer._decode_rows` over the positions written so far (`--written`), as the
  decoders run it today;
- `full`: the same step over the whole buffer, eager: what the fixed shape costs in compute;
- `graph`: the full step captured in a CUDA graph and replayed (CUDA only).

It checks that the full step gives the logits of the step over the written positions (the
masked positions change nothing) and that the replay gives the eager full step's logits.
Only the decoder's layers and output projection are timed: the beam search's selection and
bookkeeping around them stay eager either way.

    python -m bench.cuda_graph_bench --device cuda --dtype bfloat16 --rows 4,64,256,1024
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.cuda_graph_bench"))

import argparse
import time
from pathlib import Path
from statistics import median

import torch

from model_core.continuous import capture
from model_core.model import DecoderCache, Transformer
from model_core.translator import Translator

from .common import DEFAULT_SRC, machine, read_sentences, sync, table


def fixed_state(
    tr: Translator, ids: list[list[int]], sentences: int, beams: int, positions: int, written: int
) -> tuple[torch.Tensor, DecoderCache]:
    """(tokens, cache): `sentences` x `beams` rows in the gather layout with a buffer of
    `positions` positions, each sentence at a step below `written` (at least one at written - 1),
    the positions before each step holding random keys and values."""
    model = tr.model
    chosen = [ids[i % len(ids)] for i in range(sentences)]
    src, mask = tr.batch_tensors(chosen)
    with torch.inference_mode():
        memory = model.encode_tokens(src, mask)
        cache = model.init_cache(memory, mask, positions, beams=1, gather=True)
    rows = sentences * beams
    gen = torch.Generator().manual_seed(0)
    kv = torch.randn((rows, positions, *cache.kv.shape[2:]), generator=gen) * 0.5
    cache.kv = kv.to(device=tr.device, dtype=cache.kv.dtype)
    cache.group = beams
    steps = torch.randint(0, written, (sentences,), generator=gen)
    steps[0] = written - 1
    cache.steps = steps.to(tr.device)
    cache.row_steps = cache.steps.repeat_interleave(beams)
    tokens = torch.randint(4, model.cfg.tgt_vocab_size, (rows,), generator=gen)
    return tokens.to(tr.device), cache


def step_logits(model: Transformer, tokens: torch.Tensor, cache: DecoderCache, length: int):
    """One decoder step reading positions 0..length (cache.length set to it; the step
    advances it, and it is set back, so that the call can be repeated)."""
    cache.length = length
    try:
        with torch.inference_mode():
            return model._decode_rows(tokens, cache)
    finally:
        cache.length = length


def timed(call, device: torch.device, repeats: int) -> float:
    """Median ms of `call()`, the device synchronised before and after each."""
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        call()
        sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return median(times)


def measure(tr: Translator, ids, rows: int, beams: int, positions: int, written: int, repeats: int):
    """A table row for `rows` decoder rows: ms now / full / graph, and the largest differences
    of the full step's logits from now's and of the replay's from the eager full step's."""
    model, device = tr.model, tr.device
    sentences = max(1, rows // beams)
    tokens, cache = fixed_state(tr, ids, sentences, beams, positions, written)
    now_logits = step_logits(model, tokens, cache, written - 1)
    full_logits = step_logits(model, tokens, cache, positions - 1)
    masked = (now_logits - full_logits).abs().max().item()
    now_ms = timed(lambda: step_logits(model, tokens, cache, written - 1), device, repeats)
    full_ms = timed(lambda: step_logits(model, tokens, cache, positions - 1), device, repeats)
    graph_ms = replay_diff = None
    if device.type == "cuda":
        graph, out = capture(lambda: step_logits(model, tokens, cache, positions - 1), device)
        graph.replay()
        sync(device)
        replay_diff = (out - full_logits).abs().max().item()
        graph_ms = timed(graph.replay, device, repeats)
    return [
        sentences * beams,
        f"{now_ms:.3f}",
        f"{full_ms:.3f}",
        "-" if graph_ms is None else f"{graph_ms:.3f}",
        "-" if graph_ms is None else f"{now_ms / graph_ms:.2f}x",
        f"{masked:.2e}",
        "-" if replay_diff is None else f"{replay_diff:.2e}",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, default=Path("weights/en-de"))
    p.add_argument("--src", type=Path, default=DEFAULT_SRC)
    p.add_argument(
        "--rows", default="4,64,256", help="comma list: decoder rows (sentences x beams)"
    )
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--positions", type=int, default=256, help="the fixed buffer's positions")
    p.add_argument("--written", type=int, default=24, help="positions the rows reach now")
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto")
    args = p.parse_args(argv)
    if not 1 <= args.written <= args.positions:
        p.error("need 1 <= --written <= --positions")
    tr = Translator.load(args.checkpoint, device=args.device, dtype=args.dtype)
    ids = [tr.encode_source(s) for s in read_sentences(args.src, 256)]
    rows = [
        measure(tr, ids, int(n), args.beam_size, args.positions, args.written, args.repeats)
        for n in args.rows.split(",")
    ]
    print(machine())
    print(
        f"{args.checkpoint}: {tr.device} {tr.precision}, beam {args.beam_size}, buffer of "
        f"{args.positions} positions, rows at steps below {args.written}; medians of "
        f"{args.repeats} calls (ms per decoder step)\n"
    )
    headers = ["rows", "now", "full buffer", "graph", "now / graph",
               "full vs now, max |diff|", "graph vs full, max |diff|"]  # fmt: skip
    print(table(headers, rows))
    return 0
