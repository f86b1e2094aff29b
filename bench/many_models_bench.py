"""Many Marian-sized models behind one server under a memory budget: load times, unloads and
the server's resident memory.

Builds `--models` checkpoint directories of OPUS-MT's shape (d_model 512, 6+6 layers, 8 heads,
d_ff 2048, a ~58k-piece sentencepiece vocabulary, shared and tied embeddings: ~74M parameters,
~300 MB of float32 weights each; random weights, which is all that memory and load time depend
on), starts the real server (`python -m app.main`) with MT_PRELOAD=none and
MT_MODEL_MEMORY_BUDGET_MB, then asks every model for one short greedy translation, `--rounds`
times in turn (the worst case for least-recently-used: every request past the budget loads a
model and unloads another). Reports per-request time, the server's load seconds, loads and
unloads (its /metrics), and its resident memory (VmRSS after each request, VmHWM at the end).

    python -m bench.many_models_bench --models 20 --budget-mb 3000 --work /tmp/many-models

It measures; it asserts nothing. The work folder takes --models x ~300 MB of disk.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.many_models_bench"))

import argparse
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import torch

from model_core.checkpoint import save_checkpoint, weights_bytes
from model_core.config import ModelConfig
from model_core.model import Transformer
from model_core.tokenizer import Tokenizer, train_sentencepiece

from .common import machine, median, table
from .launch import start, stop

ROOT = Path(__file__).resolve().parent.parent
VOCAB = 58_101  # opus-mt-en-de's vocabulary size


def build_tokenizer(work: Path, vocab: int) -> Path:
    """A real sentencepiece model with `vocab` pieces: a word model over made-up words."""
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = sorted(
        {"".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(vocab + 8000)}
    )
    lines = []
    for _ in range(3):
        rng.shuffle(words)
        lines += [" ".join(words[i : i + 16]) for i in range(0, len(words), 16)]
    corpus = work / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    return train_sentencepiece([corpus], work / "spm", vocab, model_type="word")


def build_models(work: Path, n: int) -> Path:
    weights = work / "weights"
    if weights.is_dir() and len(list(weights.iterdir())) == n:
        return weights
    spm = build_tokenizer(work, VOCAB)
    vocab = Tokenizer(spm).vocab_size
    cfg = ModelConfig(
        src_vocab_size=vocab,
        tgt_vocab_size=vocab,
        d_model=512,
        encoder_layers=6,
        decoder_layers=6,
        n_heads=8,
        d_ff=2048,
        dropout=0.0,
        max_positions=512,
    )
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    for i in range(n):
        save_checkpoint(
            weights / f"en-x{i:02d}",
            model,
            source_tokenizer=spm,
            target_tokenizer=spm,
            source_language="en",
            target_language=f"x{i:02d}",
        )
    return weights


def proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    pattern = re.compile(rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", re.M)
    return sum(float(m.group(2)) for m in pattern.finditer(text))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--budget-mb", type=float, default=3000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path("/tmp/many-models"))
    ap.add_argument("--port", type=int, default=8931)
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    weights = build_models(args.work, args.models)
    size = weights_bytes(weights / "en-x00")
    print(
        f"built {args.models} directories of {size / 1e6:.1f} MB in "
        f"{time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    words = Tokenizer(weights / "en-x00" / "spm.model").id_to_piece(list(range(300, 306)))
    sentence = " ".join(w.lstrip("\u2581") for w in words)
    env = {
        **os.environ,
        "MT_WEIGHTS_DIR": str(weights),
        "MT_PORT": str(args.port),
        "MT_PRELOAD": "none",
        "MT_MODEL_MEMORY_BUDGET_MB": str(args.budget_mb),
        "MT_THREADS": str(args.threads),
        "MT_ACCESS_LOG": "false",
    }
    log = open(args.work / "server.log", "w")  # noqa: SIM115 (closed below)
    proc = start(
        [sys.executable, "-m", "app.main"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{args.port}"
    rows, times = [], {True: [], False: []}
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the server did not become ready; see server.log")
            time.sleep(0.2)
        idle_rss = proc_kb(proc.pid, "VmRSS") / 1024
        rss_after = []
        for _ in range(args.rounds):
            for i in range(args.models):
                loads = metric(url, "mt_model_loads_total")
                t0 = time.perf_counter()
                r = httpx.post(
                    f"{url}/translate",
                    json={
                        "q": sentence,
                        "source": "en",
                        "target": f"x{i:02d}",
                        "beam_size": 1,
                        "max_length": 8,
                    },
                    timeout=300,
                )
                elapsed = time.perf_counter() - t0
                r.raise_for_status()
                times[metric(url, "mt_model_loads_total") > loads].append(elapsed)
                rss_after.append(proc_kb(proc.pid, "VmRSS") / 1024)
        peak = proc_kb(proc.pid, "VmHWM") / 1024
        loaded = sum(m["loaded"] for m in httpx.get(f"{url}/models", timeout=30).json())
        load_count = metric(url, "mt_model_load_seconds_count")
        load_sum = metric(url, "mt_model_load_seconds_sum")
        rows.append(
            [
                args.models,
                f"{size / 1e6:.1f}",
                f"{args.budget_mb:,.0f}",
                args.models * args.rounds,
                int(metric(url, "mt_model_loads_total")),
                int(metric(url, "mt_model_unloads_total")),
                loaded,
                f"{load_sum / load_count:.2f}" if load_count else "-",
                f"{median(times[True]):.2f}" if times[True] else "-",
                f"{median(times[False]):.3f}" if times[False] else "-",
                f"{idle_rss:,.0f}",
                f"{max(rss_after):,.0f}",
                f"{peak:,.0f}",
            ]
        )
    finally:
        stop([proc])
        log.close()
    print(
        f"machine: {machine()}; {args.threads} threads; "
        f"sentence of {len(words)} words, greedy, max_length 8"
    )
    print(
        table(
            [
                "models",
                "weights MB each",
                "budget MB",
                "requests",
                "loads",
                "unloads",
                "loaded at end",
                "mean load s",
                "median request s (with a load)",
                "median request s (loaded)",
                "RSS idle MB",
                "max RSS after a request MB",
                "peak RSS (VmHWM) MB",
            ],
            rows,
        )
    )
    return 0
