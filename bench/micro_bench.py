"""Micro-benchmarks behind the decoder's design choices (docs/BENCHMARKS.md, section 3):

1. one decoder step's matmuls with `F.linear` vs oneDNN-packed weights, the cache flushed
   between steps as real decoding does (other work evicts the weights);
2. the cost of one call: `F.linear` vs a packed call on small shapes (fixed overhead);
3. the decoding kernels (model_core/_kernels.c) against the torch operations they replace:
   cross-attention of a sentence's beams, self-attention over the cache, beam selection, and
   whole beam-4 translations with every kernel off vs on;
4. per-step overhead: a decoder step of a tiny model with the same structure (plain / packed);
5. one sentence translated on the main thread vs on a second thread after the main thread ran
   torch work (per-thread OpenMP teams; the reason the service keeps all torch work on one);
6. the searches' per-row top-k + logsumexp: torch ops vs the fused C kernel;
7. the encoder on batches of mixed lengths: the seeds' padded `encode` vs `encode_tokens`.

    python -m bench.micro_bench --checkpoint weights/en-de
    python -m bench.micro_bench --checkpoint weights/en-de --profile   # torch profiler table
    python -m bench.micro_bench --checkpoint weights/en-de --breakdown # time per part of a run

Medians of repeated timings; it measures and asserts nothing.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.micro_bench"))

import argparse
import statistics
import threading
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

from model_core import decoding, fused
from model_core.config import ModelConfig
from model_core.decoding import greedy_search
from model_core.model import (
    PackedLinear,
    Transformer,
    packed_linear_available,
    packed_linear_backends,
)
from model_core.translator import Translator

from .common import DEFAULT_SRC, machine, read_sentences, table

_TOPK, _SELECT = decoding.topk_logsumexp, decoding.beam_select


def timed(fn, repeats: int = 30, inner: int = 1) -> float:
    """Median seconds per call of fn over `repeats` timings of `inner` calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def step_matmuls(cfg: ModelConfig) -> list[list]:
    """The decoder's per-step matmuls (all layers + generator), cold cache: plain torch layers
    and oneDNN-packed ones (A), each against model_core's panels kernel (B)."""
    d, ff, vocab = cfg.d_model, cfg.d_ff, cfg.tgt_vocab_size
    shapes = [(3 * d, d), (d, d), (d, d), (d, d), (ff, d), (d, ff)] * cfg.decoder_layers
    shapes.append((vocab, d))
    systems = {"plain": [torch.nn.Linear(i, o) for o, i in shapes]}
    for backend in packed_linear_backends():
        systems[backend] = [PackedLinear(layer, backend) for layer in systems["plain"]]
    if "panels" not in systems:
        return []
    flush = torch.randn(8 * 1024 * 1024)  # 32 MB: as much as this machine's L3 cache
    rows = []
    with torch.inference_mode():
        for m in (1, 4, 32, 128):
            x = torch.randn(m, max(d, ff))
            results = {name: [] for name in systems}
            for _ in range(30):
                for name, layers in systems.items():
                    flush.add_(1.0)
                    start = time.perf_counter()
                    for layer in layers:
                        layer(x[:, : layer.in_features])
                    results[name].append(time.perf_counter() - start)
            b = statistics.median(results["panels"]) * 1e3
            for name in ("plain", "onednn"):
                if name in results:
                    a = statistics.median(results[name]) * 1e3
                    rows.append(
                        [
                            f"step matmuls, {m} rows, cold: {name}",
                            f"{a:.2f} ms",
                            f"{b:.2f} ms",
                            a / b,
                        ]
                    )
    return rows


def call_overhead() -> list[list]:
    """One warm linear layer: plain torch and oneDNN-packed (A) against the panels kernel (B)."""
    if "panels" not in packed_linear_backends():
        return []
    rows = []
    with torch.inference_mode():
        for m, k, n in ((1, 256, 256), (32, 256, 256), (32, 256, 1024), (128, 256, 8000)):
            layers = {"plain": torch.nn.Linear(k, n)}
            for backend in packed_linear_backends():
                layers[backend] = PackedLinear(layers["plain"], backend)
            x = torch.randn(m, k)
            inner = max(1, 200 * 32 * 256 // (m * n))
            b = timed(lambda f=layers["panels"], x=x: f(x), inner=inner) * 1e6
            for name in ("plain", "onednn"):
                if name in layers:
                    a = timed(lambda f=layers[name], x=x: f(x), inner=inner) * 1e6
                    rows.append(
                        [
                            f"one linear {m}x{k} -> {n}, warm: {name}",
                            f"{a:.1f} us",
                            f"{b:.1f} us",
                            a / b,
                        ]
                    )
    return rows


def cross_attention() -> list[list]:
    n, h, g, s, hd = 32, 4, 4, 12, 64  # 32 sentences x 4 beams, 12 source tokens
    q, k, v = torch.randn(n, h, g, hd), torch.randn(n, h, s, hd), torch.randn(n, h, s, hd)
    mask = torch.ones(n, 1, 1, s, dtype=torch.bool)
    mask[:8, :, :, 9:] = False
    bias = torch.zeros(n, 1, 1, s).masked_fill(~mask, float("-inf"))
    keys_t = (k / hd**0.5).transpose(2, 3).contiguous()

    def matmuls():  # the torch path (gather mode) of DecoderLayer.step
        return torch.matmul(torch.matmul(q, keys_t).add_(bias).softmax(-1), v)

    rows_q = q.transpose(1, 2).reshape(n * g, h * hd).contiguous()
    keys, sentence, bias2 = (k / hd**0.5).contiguous(), torch.arange(n * g) // g, bias.view(n, s)

    def kernel():
        return fused.attend_cross(rows_q, keys, v, bias2, sentence)

    with torch.inference_mode():
        want = matmuls().transpose(1, 2).reshape(n * g, h * hd)
        if not fused.kernel_available():
            return []
        torch.testing.assert_close(kernel(), want, atol=1e-5, rtol=1e-5)
        a, b = timed(matmuls, inner=100) * 1e6, timed(kernel, inner=100) * 1e6
    return [["cross-attention 32 sent. x 4 beams", f"{a:.0f} us", f"{b:.0f} us", a / b]]


def cached_attention(t: int = 16) -> list[list]:
    """Self-attention of one step at 128 rows over t cached positions: the torch path's cache
    write + fused attention vs the slot-cache kernel (no reordering copies in either timing)."""
    if not fused.kernel_available():
        return []
    n, h, hd, layers = 128, 4, 64, 3
    d = h * hd
    qkv = torch.randn(n, 3 * d)
    gather_kv = torch.randn(n, 32, layers, 2, h, hd)
    slot_kv = torch.randn(layers, n, 32, 2, h, hd)
    history = torch.arange(n)[:, None].expand(-1, 32).contiguous()
    slots = torch.arange(n)

    def torch_path():
        gather_kv[:, t, 1] = qkv[:, d:].view(n, 2, h, hd)
        prefix = gather_kv[:, : t + 1, 1]
        q = qkv[:, :d].reshape(n, h, 1, hd)
        keys, values = prefix[:, :, 0].transpose(1, 2), prefix[:, :, 1].transpose(1, 2)
        return F.scaled_dot_product_attention(q, keys, values).view(n, d)

    def kernel():
        return fused.attend_cached(qkv, slot_kv, history, slots, t, 1)

    with torch.inference_mode():
        a, b = timed(torch_path, inner=50) * 1e6, timed(kernel, inner=50) * 1e6
    return [[f"self-attention 128 rows, {t + 1} positions", f"{a:.0f} us", f"{b:.0f} us", a / b]]


def beam_selection() -> list[list]:
    if not fused.kernel_available():
        return []
    logits = torch.randn(128, 8000) * 3
    values, words, lse = fused.topk_logsumexp(logits, 8)
    scores = -torch.rand(32, 4) * 5
    at_limit = torch.zeros(32, dtype=torch.bool)
    sel = (values, words, lse, scores, at_limit, 4, 3)
    with torch.inference_mode():
        a = timed(lambda: fused.beam_select(*sel, use_kernel=False), inner=100) * 1e6
        b = timed(lambda: fused.beam_select(*sel), inner=100) * 1e6
    return [["beam selection, 32 sent. x 4 beams", f"{a:.0f} us", f"{b:.0f} us", a / b]]


def search_with_and_without_kernels(checkpoint: Path, sentences: list[str]) -> list[list]:
    """Whole beam-4 translations: every decoding kernel off (torch operations, gather cache)
    vs on. Outputs are compared; only the time differs."""
    if not fused.kernel_available():
        return []
    tr = Translator.load(checkpoint, device="cpu")
    rows = []
    for batch in (sentences[:1], sentences[:32]):
        results, times = {}, {}
        for use in (False, True, False, True):
            fused.ATTENTION_KERNELS = use
            decoding.topk_logsumexp = partial(fused.topk_logsumexp, use_kernel=use)
            decoding.beam_select = partial(fused.beam_select, use_kernel=use)
            try:
                results[use] = [r.text for r in tr.translate_batch(batch, beam_size=4)]
                times.setdefault(use, []).append(
                    timed(lambda b=batch: tr.translate_batch(b, beam_size=4), repeats=5) * 1e3
                )
            finally:
                fused.ATTENTION_KERNELS = True
                decoding.topk_logsumexp, decoding.beam_select = _TOPK, _SELECT
        assert results[False] == results[True], "the kernels changed an output"
        a, b = statistics.median(times[False]), statistics.median(times[True])
        rows.append([f"beam 4, {len(batch)} sentence(s): torch ops vs kernels", f"{a:.1f} ms",
                     f"{b:.1f} ms", a / b])  # fmt: skip
    return rows


def tiny_step_overhead() -> list[list]:
    cfg = ModelConfig(
        src_vocab_size=64, tgt_vocab_size=64, d_model=16, n_heads=4, d_ff=32,
        encoder_layers=3, decoder_layers=3,
    )  # fmt: skip
    src = torch.randint(4, 64, (32, 10))
    mask = (src != 0)[:, None, None, :]
    limits = torch.full((32,), 12)
    per_step = []
    for packed in (False, True):
        model = Transformer(cfg).eval()
        with torch.no_grad():
            model.generator.weight[cfg.eos_id] = -10.0  # no early EOS: 12 steps every time
        model.prepare_for_inference(packed=packed)
        per_step.append(timed(lambda m=model: greedy_search(m, src, mask, limits)) / 12 * 1e3)
    return [["tiny-model decoder step, 32 rows", f"{per_step[0]:.2f} ms", f"{per_step[1]:.2f} ms",
             per_step[0] / per_step[1]]]  # fmt: skip


def thread_effect(checkpoint: Path, sentences: list[str]) -> list[list]:
    tr = Translator.load(checkpoint, device="cpu")

    def run() -> float:
        times = []
        for s in sentences:
            start = time.perf_counter()
            tr.translate_batch([s], beam_size=4)
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3

    run()
    main = run()
    box: list[float] = []
    worker = threading.Thread(target=lambda: (run(), box.append(run())))
    worker.start()
    worker.join()
    return [["one sentence, beam 4: main thread vs a 2nd thread", f"{main:.1f} ms",
             f"{box[0]:.1f} ms", main / box[0]]]  # fmt: skip


def topk_logsumexp_rows() -> list[list]:
    logits = torch.randn(128, 8000) * 3  # 32 sentences x 4 beams, an 8,000-word vocabulary
    a = timed(lambda: fused.topk_logsumexp(logits, 8, use_kernel=False), inner=20) * 1e3
    if not fused.kernel_available():
        return [["top-8 + logsumexp, 128 x 8000: torch vs kernel", f"{a:.2f} ms", "not built", ""]]
    b = timed(lambda: fused.topk_logsumexp(logits, 8), inner=20) * 1e3
    return [["top-8 + logsumexp, 128 x 8000: torch vs kernel", f"{a:.2f} ms", f"{b:.2f} ms", a / b]]


def encoder_padding(checkpoint: Path, sentences: list[str]) -> list[list]:
    """8 batches of 64 consecutive sentences (as requests arrive: mixed lengths)."""
    tr = Translator.load(checkpoint, device="cpu")
    batches = [
        tr.batch_tensors([tr.encode_source(s) for s in sentences[i : i + 64]])
        for i in range(0, len(sentences), 64)
    ]
    model = tr.model
    with torch.inference_mode():
        a = timed(lambda: [model.encode(src, mask) for src, mask in batches], repeats=5) * 1e3
        b = timed(lambda: [model.encode_tokens(src, mask) for src, mask in batches], repeats=5)
    real = sum(int(mask.sum()) for _, mask in batches)
    padded = sum(src.numel() for src, _ in batches)
    return [[f"encoder, {len(batches)} x 64 sent. ({1 - real / padded:.0%} padding)",
             f"{a:.0f} ms", f"{b * 1e3:.0f} ms", a / (b * 1e3)]]  # fmt: skip


def breakdown(checkpoint: Path, sentences: list[str]) -> None:
    """Where a beam-4, batch-32 run over `sentences` spends its time: each part timed by a
    wrapper around its function (matmuls: every PackedLinear call; the encoder includes its own
    matmuls). Three runs: every kernel off (torch operations, gather cache), kernels on, and
    kernels on after gc.freeze() as the service runs. The wrappers add a little to the total."""
    import gc
    from collections import defaultdict

    from model_core import model as model_module

    tr = Translator.load(checkpoint, device="cpu")
    spent: dict[str, float] = defaultdict(float)
    restore = []

    def wrap(owner, name: str, part: str) -> None:
        original = getattr(owner, name)

        def timed_call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[part] += time.perf_counter() - start

        setattr(owner, name, timed_call)
        restore.append((owner, name, original))

    gc_start: list[float] = []

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_start.append(time.perf_counter())
        elif gc_start:
            spent[f"garbage collection (generation {info['generation']})"] += (
                time.perf_counter() - gc_start.pop()
            )

    kw = dict(max_batch_size=32, beam_size=4, max_length=256, max_length_ratio=1e6)
    tr.translate_batch(sentences[:64], **kw)
    for owner, name, part in (
        (model_module.PackedLinear, "forward", "matmuls"),
        (model_module.PackedLinear, "add_to", "matmuls"),
        (model_module.Transformer, "encode_tokens", "encoder (all of it)"),
        (fused, "attend_cached", "attention kernels"),
        (fused, "attend_cross", "attention kernels"),
        (decoding, "topk_logsumexp", "top-k + logsumexp"),
        (decoding, "beam_select", "beam selection"),
        (model_module.DecoderCache, "select", "cache reorder (select)"),
        (model_module.Transformer, "decode_step", "decoder steps (all of it)"),
    ):
        wrap(owner, name, part)
    gc.callbacks.append(on_gc)
    columns = []
    try:
        for label, kernels, freeze in (
            ("kernels off", False, False),
            ("kernels on", True, False),
            ("kernels on, gc frozen", True, True),
        ):
            if freeze:
                gc.collect()
                gc.freeze()
            fused.ATTENTION_KERNELS = kernels
            topk, select = decoding.topk_logsumexp, decoding.beam_select
            decoding.topk_logsumexp = partial(topk, use_kernel=kernels)
            decoding.beam_select = partial(select, use_kernel=kernels)
            spent.clear()
            start = time.perf_counter()
            try:
                tr.translate_batch(sentences, **kw)
            finally:
                decoding.topk_logsumexp, decoding.beam_select = topk, select
                fused.ATTENTION_KERNELS = True
            spent["total"] = time.perf_counter() - start
            columns.append((label, dict(spent)))
    finally:
        gc.callbacks.remove(on_gc)
        gc.unfreeze()
        for owner, name, original in reversed(restore):
            setattr(owner, name, original)
    parts = sorted({p for _, col in columns for p in col}, key=lambda p: (p == "total", p))
    rows = [[p] + [f"{col.get(p, 0.0):.3f} s" for _, col in columns] for p in parts]
    print(f"\nbreakdown: {len(sentences)} sentences, beam 4, batches of 32 (seconds per part)")
    print(table(["part", *(label for label, _ in columns)], rows))


def profile_batch(checkpoint: Path, sentences: list[str], beam: int) -> None:
    """torch profiler over one batch of 32 sentences: where a decoding step's time goes."""
    from torch.profiler import ProfilerActivity, profile

    tr = Translator.load(checkpoint, device="cpu")
    tr.translate_batch(sentences, beam_size=beam)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            tr.translate_batch(sentences, beam_size=beam)
    print(f"\nprofile: 5 x one batch of {len(sentences)} sentences, beam {beam}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, default=Path("weights/en-de"))
    p.add_argument("--src", type=Path, default=DEFAULT_SRC)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    p.add_argument("--profile", action="store_true", help="only: profile one batch of 32 at beam 4")
    p.add_argument(
        "--breakdown", action="store_true", help="only: time split of a beam-4 run, kernels off/on"
    )
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if not packed_linear_available():
        print("no packed linear backend here (C kernels or oneDNN); nothing to compare")
        return 1
    if args.breakdown:
        breakdown(args.checkpoint, read_sentences(args.src, 1000))
        return 0
    if args.profile:  # 32 mid-length sentences of the set
        by_length = sorted(read_sentences(args.src, 1000), key=len)
        profile_batch(args.checkpoint, by_length[500:532], beam=4)
        return 0
    cfg = Translator.load(args.checkpoint, device="cpu", packed=False).config
    rows = cross_attention() + step_matmuls(cfg) + call_overhead() + tiny_step_overhead()
    rows += thread_effect(args.checkpoint, read_sentences(args.src, 40))
    rows += topk_logsumexp_rows() + encoder_padding(args.checkpoint, read_sentences(args.src, 512))
    rows += cached_attention() + beam_selection()
    by_length = sorted(read_sentences(args.src, 1000), key=len)
    rows += search_with_and_without_kernels(args.checkpoint, by_length[500:532])
    print(f"\nmachine: {machine()}; {torch.get_num_threads()} threads; model {args.checkpoint}\n")
    print(table(["measurement", "A", "B", "A / B"], rows))
    print(
        "\nA vs B: attention, beam selection and whole beam-4 translations: torch "
        "operations vs model_core's C kernels; step matmul and linear rows: plain torch layers or "
        "oneDNN-packed ones (named in the row) vs the panels GEMM kernel; tiny-model rows: plain "
        "weights vs packed (the default backend); one sentence: main thread vs a second "
        "thread (below 1: the second thread is slower); top-8: torch ops vs the fused kernel; "
        "encoder: padded encode vs encode_tokens"
    )
    return 0
