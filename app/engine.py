"""The bridge between the batcher and model_core: load the models, tokenize, and the function
the batcher's worker thread calls for each batch."""

from __future__ import annotations

import gc
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from model_core.allocator import keep_freed_memory
from model_core.checkpoint import CheckpointError
from model_core.translator import Translator, resolve_device

from .settings import Settings

log = logging.getLogger("app.engine")


class StartupError(Exception):
    """The models could not be loaded; the message names the directory and the problem."""


@dataclass(frozen=True)
class DecodeKey:
    """Sentences share a batch only when all of these agree."""

    model: str
    beam_size: int
    n_best: int
    max_length: int


@dataclass
class SentenceResult:
    texts: list[str]  # best first; more than one when alternatives were asked for
    generated_tokens: int


def load_translators(
    weights_dir: Path, *, device: str, dtype: str, skip_bad: bool, quantize: str = "none"
) -> dict[str, Translator]:
    """Every checkpoint directory under `weights_dir`, keyed by directory name."""
    if not weights_dir.is_dir():
        raise StartupError(f"{weights_dir}: weights directory not found")
    candidates = sorted(
        p for p in weights_dir.iterdir() if p.is_dir() and not p.name.startswith(".")
    )
    try:
        dev = resolve_device(device)
    except ValueError as exc:
        raise StartupError(f"MT_DEVICE={device}: {exc}") from exc
    translators: dict[str, Translator] = {}
    for path in candidates:
        try:
            translator = Translator.load(path, device=dev, dtype=dtype)
        except CheckpointError as exc:
            if not skip_bad:
                raise StartupError(f"bad checkpoint {path}: {exc}") from exc
            log.warning("skipping bad checkpoint %s: %s", path, exc)
        else:
            if quantize == "int8":
                try:
                    translator.quantize_int8()
                except (ValueError, RuntimeError) as exc:  # a setting's mistake, not the files'
                    raise StartupError(f"MT_QUANTIZE=int8 for {path.name}: {exc}") from exc
            translators[path.name] = translator
            log.info(
                "loaded %s (%s->%s, %s parameters) on %s as %s",
                path.name,
                translator.source_language,
                translator.target_language,
                f"{translator.parameters:,}",
                translator.device,
                translator.precision,
            )
    if not translators:
        raise StartupError(
            f"{weights_dir}: no loadable checkpoint directory (config.json + model.safetensors)"
        )
    return translators


def start_engine(s: Settings) -> Engine:
    """Set the thread count, load every model, warm up: all of it on the calling thread, which
    must be the thread that then runs every batch. torch's OpenMP runtime keeps a team of
    threads per calling thread; a second thread that once ran torch work leaves more threads
    than cores, and OpenMP then stops spinning between parallel regions, which made each small
    operation several times slower on a 2-core machine (docs/BENCHMARKS.md)."""
    if s.threads:
        torch.set_num_threads(s.threads)
    if s.tune_malloc:
        log.info("allocator: freed memory kept for reuse: %s", keep_freed_memory())
    engine = Engine(
        load_translators(
            s.weights_dir,
            device=s.device,
            dtype=s.dtype,
            skip_bad=s.skip_bad_checkpoints,
            quantize=s.quantize,
        )
    )
    if s.warmup:
        engine.warm_up()
    # Everything loaded so far lives as long as the process: keep it out of the cyclic garbage
    # collector's full passes, which otherwise walk it all (~0.1 s each) in the middle of batches.
    gc.collect()
    gc.freeze()
    return engine


class Engine:
    """Holds the translators; `run` is the batcher's function (called on the worker thread)."""

    def __init__(self, translators: dict[str, Translator]):
        self.translators = translators
        self.loaded_on = threading.get_ident()  # the thread that must run every batch
        self.pairs = {  # a multi-target model serves each of its targets
            (t.source_language, target): name
            for name, t in translators.items()
            for target in t.target_languages
        }

    def run(self, key: DecodeKey, payloads: list[list[int]]) -> list[SentenceResult]:
        translator = self.translators[key.model]
        hyps = translator.translate_ids(
            payloads, beam_size=key.beam_size, n_best=key.n_best, max_length=key.max_length
        )
        decode = translator.target_tokenizer.decode
        return [
            SentenceResult([decode(h.tokens) for h in sent], len(sent[0].tokens) + 1)
            for sent in hyps
        ]

    def warm_up(self) -> None:
        for name, translator in self.translators.items():
            ids = translator.encode_source("Hello world.")
            self.run(DecodeKey(name, 2, 1, 16), [ids])
