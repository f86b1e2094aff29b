"""Hugging Face Marian directories served as they are: token-exact equality with transformers'
`generate` (greedy and beam search) on small random MarianMTModel models of several shapes,
through model_core's fast path and reference path; int8 runs; loading errors name the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from model_core.checkpoint import CheckpointError
from model_core.marian import marian_languages
from model_core.translator import Translator
from tests.conftest import make_parallel
from tests.marian_helpers import make_marian_dir

transformers = pytest.importorskip("transformers")

SHAPES = {
    "tied-bias": {},
    "untied-nobias": {"tied": False, "logits_bias": False, "seed": 3, "scale": 4.0},
    "deep-4heads": {"layers": (3, 1), "heads": 4, "d_model": 32, "seed": 2},
}
SOURCES = make_parallel(12, seed=7)[0]


@pytest.fixture(scope="module", params=sorted(SHAPES))
def marian_dir(request, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("marian")
    return make_marian_dir(root / "opus-mt-en-de", **SHAPES[request.param])


def reference(directory: Path, texts: list[str], beams: int, max_new: int, alpha: float = 1.0):
    """transformers' generate, one sentence at a time: generated ids incl. EOS, no padding."""
    from transformers import MarianMTModel, MarianTokenizer

    tok = MarianTokenizer.from_pretrained(directory)
    model = MarianMTModel.from_pretrained(directory).eval()
    pad = model.config.pad_token_id
    out = []
    for text in texts:
        ids = torch.tensor([tok(text)["input_ids"]])
        seq = model.generate(ids, num_beams=beams, max_new_tokens=max_new, length_penalty=alpha)[
            0
        ].tolist()[1:]
        while seq and seq[-1] == pad:
            seq.pop()
        out.append(seq)
    return out


def ours(translator: Translator, texts: list[str], **options) -> list[list[int]]:
    sources = [translator.encode_source(t) for t in texts]
    hyps = translator.translate_ids(sources, max_length_ratio=100.0, **options)
    eos = translator.config.eos_id
    return [h[0].tokens + [eos] * h[0].finished for h in hyps]


@pytest.mark.parametrize("beams", [1, 4])
def test_same_tokens_as_transformers(marian_dir, beams):
    expected = reference(marian_dir, SOURCES, beams, 12)
    fast = Translator.load(marian_dir, device="cpu", dtype="float32")
    assert ours(fast, SOURCES, beam_size=beams, max_length=12) == expected
    plain = Translator.load(marian_dir, device="cpu", dtype="float32", packed=False)
    assert ours(plain, SOURCES, beam_size=beams, max_length=12) == expected
    if beams == 1:
        assert ours(plain, SOURCES, beam_size=1, max_length=12, reference=True) == expected


def test_tokenizer_and_length_limit(marian_dir):
    from transformers import MarianTokenizer

    tok = MarianTokenizer.from_pretrained(marian_dir)
    t = Translator.load(marian_dir, device="cpu", dtype="float32")
    for text in SOURCES:
        assert t.encode_source(text) + [t.config.eos_id] == tok(text)["input_ids"]
    for limit in (1, 3, 5):  # max_length caps generated tokens as max_new_tokens does
        got = ours(t, SOURCES[:4], beam_size=2, max_length=limit)
        assert got == reference(marian_dir, SOURCES[:4], 2, limit)
        assert all(len(ids) <= limit for ids in got)
    pad = t.config.pad_id
    assert pad in t.config.suppress_ids and t.config.bos_id == pad
    result = t.translate_batch(SOURCES[:3], beam_size=1, max_length=12)
    decoded = [
        tok.decode(ids, skip_special_tokens=True)
        for ids in reference(marian_dir, SOURCES[:3], 1, 12)
    ]
    assert [r.text for r in result] == decoded


def test_int8_runs_and_mostly_agrees(marian_dir):
    expected = reference(marian_dir, SOURCES, 1, 12)
    t = Translator.load(marian_dir, device="cpu", dtype="float32", packed=False).quantize_int8()
    got = ours(t, SOURCES, beam_size=1, max_length=12)
    same = sum(a == b for a, b in zip(got, expected, strict=True))
    assert same >= len(SOURCES) // 2


def test_languages_and_errors(tmp_path, marian_dir):
    info = marian_languages(marian_dir)
    assert (info.source_language, info.target_languages, info.multi_target) == ("en", ["de"], False)
    other = tmp_path / "my-model"
    shutil.copytree(marian_dir, other)
    with pytest.raises(CheckpointError, match="mt.json"):
        Translator.load(other, device="cpu")
    (other / "mt.json").write_text(json.dumps({"source_language": "fr", "target_language": "es"}))
    assert Translator.load(other, device="cpu").source_language == "fr"
    (other / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        Translator.load(other, device="cpu")
    (other / "model.safetensors").unlink()
    (other / "pytorch_model.bin").write_bytes(b"\x80\x04cos\nsystem\n.")  # a pickle calling code
    with pytest.raises(CheckpointError, match="pytorch_model.bin"):
        Translator.load(other, device="cpu")


def test_pytorch_bin_and_multi_target(tmp_path):
    from safetensors.torch import load_file

    d = make_marian_dir(tmp_path / "opus-mt-en-mul", lang_tokens=(">>deu<<", ">>fra<<"))
    assert marian_languages(d).target_tokens == {"deu": ">>deu<<", "fra": ">>fra<<"}
    torch.save(load_file(str(d / "model.safetensors")), d / "pytorch_model.bin")
    expected = {}
    for lang in ("deu", "fra"):
        t = Translator.load(d, device="cpu", dtype="float32")
        ids = t.encode_source(SOURCES[0], lang)
        assert ids[0] == t.source_tokenizer.vocab[f">>{lang}<<"]
        expected[lang] = t.translate_ids([ids], beam_size=1, max_length=8)[0][0].tokens
    (d / "model.safetensors").unlink()
    t = Translator.load(d, device="cpu", dtype="float32")
    for lang, tokens in expected.items():
        ids = t.encode_source(SOURCES[0], lang)
        assert t.translate_ids([ids], beam_size=1, max_length=8)[0][0].tokens == tokens
    with pytest.raises(ValueError, match="deu"):
        t.encode_source(SOURCES[0], "ita")
