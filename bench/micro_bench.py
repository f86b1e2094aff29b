"""Micro-benchmarks behind the decoder's design choices (docs/BENCHMARKS.md, section 3):

1. one decoder step's matmuls with `F.linear` vs oneDNN-packed weights, the cache flushed
   between steps as real decoding does (other work evicts the weights);
2. the cost of one call: `F.linear` vs a packed call on small shapes (fixed overhead);
3. cross-attention for a sentence's beams: PyTorch's fused attention vs two small matmuls;
4. per-step overhead: a decoder step of a tiny model with the same structure (plain / packed);
5. one sentence translated on the main thread vs on a second thread after the main thread ran
   torch work (per-thread OpenMP teams; the reason the service keeps all torch work on one);
6. the searches' per-row top-k + logsumexp: torch ops vs the fused C kernel;
7. the encoder on batches of mixed lengths: the seeds' padded `encode` vs `encode_tokens`.

    python -m bench.micro_bench --checkpoint weights/en-de
    python -m bench.micro_bench --checkpoint weights/en-de --profile   # torch profiler table

Medians of repeated timings; it measures and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from model_core import fused
from model_core.config import ModelConfig
from model_core.decoding import greedy_search
from model_core.model import PackedLinear, Transformer, packed_linear_available
from model_core.translator import Translator

from .common import DEFAULT_SRC, machine, read_sentences, table


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
    """The decoder's per-step matmuls (all layers + generator), plain vs packed, cold cache."""
    d, ff, vocab = cfg.d_model, cfg.d_ff, cfg.tgt_vocab_size
    shapes = [(3 * d, d), (d, d), (d, d), (d, d), (ff, d), (d, ff)] * cfg.decoder_layers
    shapes.append((vocab, d))
    layers = [torch.nn.Linear(i, o) for o, i in shapes]
    packed = [PackedLinear(layer) for layer in layers]
    flush = torch.randn(8 * 1024 * 1024)  # 32 MB: as much as this machine's L3 cache
    rows = []
    with torch.inference_mode():
        for m in (1, 32, 128):
            x = torch.randn(m, max(d, ff))

            def plain(x: torch.Tensor = x) -> None:
                for layer in layers:
                    layer(x[:, : layer.in_features])

            def with_packed(x: torch.Tensor = x) -> None:
                for layer in packed:
                    layer(x[:, : layer.in_features])

            results = {"plain": [], "packed": []}
            for _ in range(30):
                for name, fn in (("plain", plain), ("packed", with_packed)):
                    flush.add_(1.0)
                    start = time.perf_counter()
                    fn()
                    results[name].append(time.perf_counter() - start)
            a, b = (statistics.median(results[k]) * 1e3 for k in ("plain", "packed"))
            rows.append([f"step matmuls, {m} rows, cold", f"{a:.2f} ms", f"{b:.2f} ms", a / b])
    return rows


def call_overhead() -> list[list]:
    rows = []
    with torch.inference_mode():
        for m, k, n in ((1, 256, 256), (32, 256, 256), (32, 256, 1024)):
            layer = torch.nn.Linear(k, n)
            packed = PackedLinear(layer)
            x = torch.randn(m, k)
            a = timed(lambda f=layer, x=x: f(x), inner=200) * 1e6
            b = timed(lambda f=packed, x=x: f(x), inner=200) * 1e6
            rows.append([f"one linear {m}x{k} -> {n}, warm", f"{a:.1f} us", f"{b:.1f} us", a / b])
    return rows


def cross_attention() -> list[list]:
    n, h, g, s, hd = 32, 4, 4, 12, 64  # 32 sentences x 4 beams, 12 source tokens
    q, k, v = torch.randn(n, h, g, hd), torch.randn(n, h, s, hd), torch.randn(n, h, s, hd)
    mask = torch.ones(n, 1, 1, s, dtype=torch.bool)
    mask[:8, :, :, 9:] = False
    bias = torch.zeros(n, 1, 1, s).masked_fill(~mask, float("-inf"))
    keys_t = (k / hd**0.5).transpose(2, 3).contiguous()

    def fused():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def matmuls():
        return torch.matmul(torch.matmul(q, keys_t).add_(bias).softmax(-1), v)

    with torch.inference_mode():
        torch.testing.assert_close(fused(), matmuls(), atol=1e-5, rtol=1e-5)
        a, b = timed(fused, inner=100) * 1e6, timed(matmuls, inner=100) * 1e6
    return [["cross-attention 32 sent. x 4 beams", f"{a:.0f} us", f"{b:.0f} us", a / b]]


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
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if not packed_linear_available():
        print("this torch build has no oneDNN linear ops; nothing to compare")
        return 1
    if args.profile:  # 32 mid-length sentences of the set
        by_length = sorted(read_sentences(args.src, 1000), key=len)
        profile_batch(args.checkpoint, by_length[500:532], beam=4)
        return 0
    cfg = Translator.load(args.checkpoint, device="cpu", packed=False).config
    rows = cross_attention() + step_matmuls(cfg) + call_overhead() + tiny_step_overhead()
    rows += thread_effect(args.checkpoint, read_sentences(args.src, 40))
    rows += topk_logsumexp_rows() + encoder_padding(args.checkpoint, read_sentences(args.src, 512))
    print(f"\nmachine: {machine()}; {torch.get_num_threads()} threads; model {args.checkpoint}\n")
    print(table(["measurement", "A", "B", "A / B"], rows))
    print(
        "\nA vs B: cross-attention: fused attention kernel vs two matmuls; matmul, linear and "
        "tiny-model rows: plain weights vs oneDNN-packed; one sentence: main thread vs a second "
        "thread (below 1: the second thread is slower); top-8: torch ops vs the fused kernel; "
        "encoder: padded encode vs encode_tokens"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
