"""Shared fixtures: small made-up parallel data, a real sentencepiece model trained on it, and
real (randomly initialised) checkpoints on disk. Nothing here reads ../shared/data."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from model_core.checkpoint import save_checkpoint
from model_core.config import ModelConfig
from model_core.linear_backend import batch_invariant, choose_linear_backend
from model_core.model import Transformer
from model_core.tokenizer import Tokenizer, train_sentencepiece

WORDS = {  # a toy "English" -> "German" lexicon for made-up parallel data
    "the": "der",
    "cat": "katze",
    "dog": "hund",
    "house": "haus",
    "is": "ist",
    "big": "gross",
    "small": "klein",
    "red": "rot",
    "green": "gruen",
    "i": "ich",
    "see": "sehe",
    "a": "ein",
    "tree": "baum",
    "car": "auto",
    "fast": "schnell",
    "slow": "langsam",
    "we": "wir",
    "run": "laufen",
    "eat": "essen",
    "bread": "brot",
    "water": "wasser",
    "today": "heute",
    "very": "sehr",
}


def make_parallel(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Sentences of 2-8 toy words and their word-by-word translations."""
    rng = random.Random(seed)
    keys = sorted(WORDS)
    src, tgt = [], []
    for _ in range(n):
        words = [rng.choice(keys) for _ in range(rng.randint(2, 8))]
        src.append(" ".join(words).capitalize() + ".")
        tgt.append(" ".join(WORDS[w] for w in words).capitalize() + ".")
    return src, tgt


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory) -> Path:
    """train.en/train.de (600 pairs) and dev.en/dev.de (40 pairs) of made-up data."""
    d = tmp_path_factory.mktemp("corpus")
    src, tgt = make_parallel(640)
    write_lines(d / "train.en", src[:600])
    write_lines(d / "train.de", tgt[:600])
    write_lines(d / "dev.en", src[600:])
    write_lines(d / "dev.de", tgt[600:])
    return d


@pytest.fixture(scope="session")
def spm_model(corpus_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("spm")
    return train_sentencepiece([corpus_dir / "train.en", corpus_dir / "train.de"], out / "spm", 320)


@pytest.fixture(scope="session")
def tokenizer(spm_model) -> Tokenizer:
    return Tokenizer(spm_model)


def tiny_config(vocab: int, **overrides) -> ModelConfig:
    base = dict(
        src_vocab_size=vocab,
        tgt_vocab_size=vocab,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        n_heads=4,
        d_ff=64,
        dropout=0.0,
        max_positions=256,
    )
    base.update(overrides)
    return ModelConfig(**base)


def random_model(cfg: ModelConfig, seed: int = 0) -> Transformer:
    """A random model whose logits are spread out enough that argmax ties do not occur."""
    torch.manual_seed(seed)
    model = Transformer(cfg)
    with torch.no_grad():
        model.generator.weight.mul_(3.0)
    return model.eval()


@pytest.fixture(scope="session")
def random_checkpoint(spm_model, tokenizer, tmp_path_factory) -> Path:
    """A real checkpoint directory holding a random tiny model and the real tokenizer."""
    model = random_model(tiny_config(tokenizer.vocab_size))
    out = tmp_path_factory.mktemp("ckpt") / "en-de"
    return save_checkpoint(
        out,
        model,
        source_tokenizer=spm_model,
        target_tokenizer=spm_model,
        source_language="en",
        target_language="de",
    )


def save_random_checkpoint(
    out: Path, spm: Path, source: str, target: str, seed: int, **config
) -> Path:
    """A checkpoint directory `out` holding a random model (tiny_config + `config`) that
    translates source->target with the real tokenizer `spm`."""
    vocab = Tokenizer(spm).vocab_size
    return save_checkpoint(
        out,
        random_model(tiny_config(vocab, **config), seed=seed),
        source_tokenizer=spm,
        target_tokenizer=spm,
        source_language=source,
        target_language=target,
    )


def skip_unless_batch_invariant(backend: str, shapes, cache_dir: Path) -> None:
    """oneDNN's batch invariance depends on the CPU (an Intel Xeon with AMX failed it). Where
    `backend` fails the check, `auto` must leave it out; the test that pins it then stops
    there, skipped, saying so."""
    if not batch_invariant(backend, shapes):
        chosen = choose_linear_backend("auto", shapes, cache_path=cache_dir / "backend.json")
        assert chosen != backend, f"auto chose {backend}, which is not batch-invariant here"
        pytest.skip(f"{backend} gives a row other bits in a batch on this CPU; auto leaves it out")
