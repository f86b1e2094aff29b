"""Side-by-side engine benchmark on one checkpoint: the reference decoder (the seeds' greedy,
one sentence at a time, whole prefix each step, on plain torch linear layers; also on our packed
ones, "reference-packed", which is not the ratios' base), ours (KV cache; float32 and int8 on the
CPU (model_core.int8), float16 and bfloat16 on a GPU when there is one) and CTranslate2 on the
exported model at the same precisions, greedy and beam 4, at several batch sizes, same
sentences, same output cap, same thread count.

Each measurement runs in a fresh worker process (so peak RSS is per system); systems are
interleaved within each repetition and medians are reported, with sacreBLEU against the
references and the fraction of sentences where our output equals CTranslate2's. It also
measures this machine's float32 GEMM FLOP/s and the FLOP/s our decoder achieves.

    python -m bench.ct2_bench --checkpoint weights/en-de --sentences 1000 --repeats 2

Exits non-zero if any system's outputs are missing; never asserts a speed.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.ct2_bench"))

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import (
    DEFAULT_SRC,
    add_malloc_option,
    apply_malloc,
    freeze_gc,
    machine,
    median,
    peak_rss_bytes,
    read_sentences,
    table,
)

MAX_LEN = 256
GPU_PRECISIONS = ("float16", "bfloat16")  # run on the GPU; float32 and int8 on the CPU


def device_for(precision: str) -> str:
    return "cuda" if precision in GPU_PRECISIONS else "cpu"


def default_precisions() -> str:
    """float32 and int8 on the CPU, plus float16 and bfloat16 on the GPU when there is one."""
    import torch

    return ",".join(["float32", "int8", *(GPU_PRECISIONS if torch.cuda.is_available() else ())])


def worker(spec: dict) -> dict:
    """Translate in this process; returns timing, outputs and peak RSS."""
    import torch

    apply_malloc(spec["malloc"])  # before the model's first allocations; every system alike
    torch.set_num_threads(spec["threads"])
    sentences = read_sentences(Path(spec["src"]), spec["n"])
    if spec["system"] == "ct2":
        import ctranslate2

        from model_core.tokenizer import Tokenizer

        tok = Tokenizer(Path(spec["checkpoint"]) / "spm.model")
        ct2 = ctranslate2.Translator(
            spec["ct2_dir"],
            device=device_for(spec["precision"]),
            compute_type=spec["precision"],
            intra_threads=spec["threads"],
            inter_threads=1,
        )

        def run(texts: list[str]):
            res = ct2.translate_batch(
                [tok.encode_pieces(s) for s in texts],
                beam_size=spec["beam"],
                max_batch_size=spec["batch"],
                max_decoding_length=MAX_LEN,
                min_decoding_length=0,
            )
            ids = [[tok.sp.piece_to_id(p) for p in r.hypotheses[0]] for r in res]
            return [tok.decode(i) for i in ids], [len(i) + 1 for i in ids]
    else:
        from model_core.translator import Translator

        # the reference runs the seeds' modules as they are (plain nn.Linear); "reference-packed"
        # is the same search on our packed linear layers, to tell the algorithm from the GEMM
        packed = False if spec["system"] == "reference" else None
        precision = spec["precision"]
        tr = Translator.load(
            spec["checkpoint"],
            device=device_for(precision),
            dtype=precision if precision in GPU_PRECISIONS else "float32",
            packed=packed,
            linear_backend=None if packed is False else spec.get("linear_backend", "auto"),
        )
        if spec["precision"] == "int8":
            tr.quantize_int8()

        def run(texts: list[str]):
            res = tr.translate_batch(
                texts,
                beam_size=spec["beam"],
                max_batch_size=spec["batch"],
                max_length=MAX_LEN,
                max_length_ratio=1e6,
                reference=spec["system"].startswith("reference"),
            )
            return [r.text for r in res], [r.output_tokens + 1 for r in res]

    return timed(run, sentences)


def timed(run, sentences: list) -> dict:
    """One measurement in a worker process: `run(sentences)` returns (outputs, generated tokens
    per sentence); after a warm-up on four sentences and freeze_gc, as for every system."""
    run(sentences[:4])  # warm-up
    freeze_gc()
    start = time.perf_counter()
    texts, lengths = run(sentences)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "tokens": sum(lengths),
        "texts": texts,
        "peak_rss_mb": peak_rss_bytes() / 2**20,
    }


def tok_s(result: dict) -> float:
    return result["tokens"] / result["seconds"]


def paired_jobs(keys: list[tuple], repeats: int, systems=("ours", "ct2")) -> list[tuple]:
    """(repetition, (system, *key)) in running order for --side-by-side: each key's repetitions
    back to back, one run of each system per repetition, so that on a machine shared with other
    work the runs of a pair see about the same load."""
    return [(rep, (system, *key)) for key in keys for rep in range(repeats) for system in systems]


def run_jobs(module: str, jobs: list[tuple], args, **extra) -> tuple[dict, list]:
    """Each job (repetition, (system, precision, beam, batch)) run by `module`'s worker, in
    order, with the options common to the benchmarks and `extra`; returns the results by key,
    and the keys whose runs failed or came back short."""
    raw: dict[tuple, list[dict]] = {}
    for rep, (system, precision, beam, batch) in jobs:
        n = args.small_batch_sentences if batch == 1 else args.sentences
        spec = {
            "malloc": args.malloc,
            "system": system,
            "precision": precision,
            "beam": beam,
            "batch": batch,
            "n": n,
            "threads": args.threads,
            "linear_backend": args.linear_backend,
            "src": str(args.src),
            **extra,
        }
        result = run_worker(module, spec)
        raw.setdefault((system, precision, beam, batch), []).append(result)
        if "error" in result:
            continue
        result["n"] = n
        print(
            f"rep {rep + 1}: {system} {precision} beam {beam} batch {batch}: "
            f"{tok_s(result):.1f} tok/s",
            file=sys.stderr,
        )
    missing = [
        k for k, runs in raw.items() if any("error" in r or len(r["texts"]) != r["n"] for r in runs)
    ]
    return raw, missing


def run_worker(module: str, spec: dict) -> dict:
    """`python -m module --worker SPEC` in a fresh process (so peak RSS is per system); its
    last stdout line as JSON, or {"error": returncode} with its stderr's tail printed."""
    out = subprocess.run(
        [sys.executable, "-m", module, "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return {"error": out.returncode}
    return json.loads(out.stdout.strip().splitlines()[-1])


def paired_ratios(raw: dict[tuple, list[dict]], key: tuple) -> list[float]:
    """ours / CTranslate2 target tok/s of each repetition's pair at `key` (precision, beam,
    batch, ...); a pair with a failed run is left out."""
    ours, ct2 = raw.get(("ours", *key), []), raw.get(("ct2", *key), [])
    return [
        tok_s(o) / tok_s(c)
        for o, c in zip(ours, ct2, strict=False)
        if "texts" in o and "texts" in c
    ]


def gemm_flops(threads: int) -> float:
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return 2 * 2048**3 / median(times)


def flops_per_token(cfg: dict) -> float:
    """Decoder FLOPs per generated token (per hypothesis): projections, FFN, generator."""
    d, ff, v, n = cfg["d_model"], cfg["d_ff"], cfg["tgt_vocab_size"], cfg["decoder_layers"]
    return 2 * (n * (6 * d * d + 2 * d * ff) + d * v)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", type=Path, default=Path("weights/en-de"))
    p.add_argument("--src", type=Path, default=DEFAULT_SRC)
    p.add_argument("--ref", type=Path, help="references (default: the .de file beside --src)")
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument(
        "--small-batch-sentences", type=int, default=150, help="sentences for batch 1 runs"
    )
    p.add_argument("--batch-sizes", default="1,32,64")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument(
        "--precisions",
        help="float32 and int8 run on the CPU, float16 and bfloat16 on the GPU (default: "
        "float32,int8, and float16,bfloat16 when a GPU is available)",
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--side-by-side",
        action="store_true",
        help="run each configuration's repetitions of ours and CTranslate2 back to back, and "
        "print the paired ratios (for a machine shared with other work)",
    )
    p.add_argument(
        "--linear-backend",
        choices=["auto", "panels", "onednn"],
        default="auto",
        help="our float32 linear layers, as MT_LINEAR_BACKEND (default: auto, as the service)",
    )
    add_malloc_option(p)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    args.precisions = args.precisions or default_precisions()
    unknown = set(args.precisions.split(",")) - {"float32", "int8", *GPU_PRECISIONS}
    if unknown:
        p.error(f"unknown precision(s) {sorted(unknown)}: use float32, int8, float16, bfloat16")
    if any(device_for(x) == "cuda" for x in args.precisions.split(",")):
        import torch

        if not torch.cuda.is_available():
            p.error("float16 and bfloat16 run on a GPU, and none is available here")

    import sacrebleu

    from model_core.checkpoint import read_metadata
    from model_core.export_ct2 import export

    ref_path = args.ref or args.src.with_suffix(".de")
    refs = read_sentences(ref_path, args.sentences)
    ct2_dir = Path(tempfile.mkdtemp()) / "ct2"
    export(args.checkpoint, ct2_dir)
    batches = [int(b) for b in args.batch_sizes.split(",")]
    configs = [("reference", "float32", 1, 1), ("reference-packed", "float32", 1, 1)]
    for system in ("ours", "ct2"):
        for precision in args.precisions.split(","):
            for beam in (1, 4):
                configs += [(system, precision, beam, b) for b in batches]
    if args.side_by_side:
        # each configuration's repetitions back to back, ours then CTranslate2's: on a machine
        # shared with other work the two of a pair see about the same load
        jobs = [(rep, key) for key in configs[:2] for rep in range(args.repeats)]
        jobs += paired_jobs(
            [(p, beam, b) for p in args.precisions.split(",") for beam in (1, 4) for b in batches],
            args.repeats,
        )
    else:
        jobs = [(rep, key) for rep in range(args.repeats) for key in configs]
    raw, missing = run_jobs(
        "bench.ct2_bench", jobs, args, checkpoint=str(args.checkpoint), ct2_dir=str(ct2_dir)
    )
    ref_tok_s = median([tok_s(r) for r in raw[("reference", "float32", 1, 1)] if "texts" in r])
    cfg = read_metadata(args.checkpoint)["model"].to_dict()
    fpt = flops_per_token(cfg)
    rows = []
    for key in configs:
        runs = [r for r in raw.get(key, []) if "texts" in r]
        if not runs:
            rows.append([*key, "missing", "", "", "", "", ""])
            continue
        system, precision, beam, batch = key
        tokens_s = median([tok_s(r) for r in runs])
        sent_s = median([r["n"] / r["seconds"] for r in runs])
        texts = runs[0]["texts"]
        bleu = (
            sacrebleu.corpus_bleu(texts, [refs[: len(texts)]]).score
            if len(texts) == len(refs)
            else None
        )
        same = ""
        if system == "ours":
            other = raw.get(("ct2", precision, beam, batch))
            if other and "texts" in other[0]:
                same = f"{sum(a == b for a, b in zip(texts, other[0]['texts'], strict=True)) / len(texts):.3f}"
        rows.append(
            [
                system,
                precision,
                "greedy" if beam == 1 else f"beam {beam}",
                batch,
                runs[0]["n"],
                tokens_s,
                sent_s,
                median([r["peak_rss_mb"] for r in runs]),
                f"{bleu:.2f}" if bleu is not None else "-",
                same,
                f"{tokens_s / ref_tok_s:.1f}x",
                f"{tokens_s * fpt * beam / 1e9:.1f}",
            ]
        )
    peak = gemm_flops(args.threads)
    print(
        f"\nmachine: {machine()}; {args.threads} threads; float32 GEMM (2048^3) {peak / 1e9:.1f} GFLOP/s"
    )
    print(
        f"checkpoint: {args.checkpoint}; decoder {fpt / 1e6:.1f} MFLOP per generated token per hypothesis; "
        f"outputs capped at {MAX_LEN} tokens; medians of {args.repeats} interleaved repetitions; "
        f"float16/bfloat16 rows run on the GPU (their peak RSS is host memory)\n"
    )
    print(
        table(
            [
                "system",
                "precision",
                "search",
                "batch",
                "sentences",
                "target tok/s",
                "sentences/s",
                "peak RSS MB",
                "BLEU",
                "same as CT2",
                "vs reference",
                "decoder GFLOP/s",
            ],
            rows,
        )
    )
    pairs = []
    for precision in args.precisions.split(","):
        for beam in (1, 4):
            for b in batches:
                ratios = paired_ratios(raw, (precision, beam, b))
                if ratios:
                    search = "greedy" if beam == 1 else f"beam {beam}"
                    pairs.append(
                        [
                            precision,
                            search,
                            b,
                            f"{median(ratios):.2f}x",
                            " ".join(f"{r:.2f}" for r in ratios),
                        ]
                    )
    print("\nours / CTranslate2, target tok/s, each repetition's pair (median, then each):\n")
    print(table(["precision", "search", "batch", "ratio", "pairs"], pairs))
    if args.json:
        args.json.write_text(json.dumps({" ".join(map(str, k)): v for k, v in raw.items()}))
    if missing:
        print(f"missing outputs: {missing}", file=sys.stderr)
        return 1
    return 0
