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
from tests.marian_helpers import make_marian_dir, one_thread

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
    with one_thread():
        for text in texts:
            ids = torch.tensor([tok(text)["input_ids"]])
            seq = model.generate(
                ids, num_beams=beams, max_new_tokens=max_new, length_penalty=alpha
            )[0].tolist()[1:]
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


INT8_SOURCES = make_parallel(40, seed=13)[0]


def test_int8_agrees_with_float32_on_most_sentences(marian_dir):
    """int8 (model_core/int8.py) against float32 on 40 sentences, greedy: identical outputs on
    more than half of them. Measured here (AVX2): 24, 25 and 31 of 40 on the three shapes.
    The threshold holds on any x86-64 CPU: the int8 products are summed exactly in int32
    (inputs of 7 bits, so neither AVX2's saturating u8 x s8 pair sums nor AVX-512 VNNI's round
    anything), so a CPU changes only the float32 rounding around them (LayerNorm, softmax,
    the float32 reference's own GEMMs), which flips a token only at a near tie. These random
    models have small top-2 margins (a tenth of the steps under 0.25 logits), so int8's own
    rounding changes some sentences; trained models have far larger margins."""
    f = Translator.load(marian_dir, device="cpu", dtype="float32", packed=False)
    q = Translator.load(marian_dir, device="cpu", dtype="float32", packed=False).quantize_int8()
    assert q.precision == "int8"
    want = ours(f, INT8_SOURCES, beam_size=1, max_length=12)
    got = ours(q, INT8_SOURCES, beam_size=1, max_length=12)
    assert len({tuple(x) for x in want}) >= 5  # the outputs depend on the source
    same = sum(a == b for a, b in zip(got, want, strict=True))
    assert same > len(INT8_SOURCES) // 2, f"{same} of {len(INT8_SOURCES)}"


def test_languages_and_errors(tmp_path, marian_dir):
    info = marian_languages(marian_dir)
    assert (info.source_language, info.target_languages, info.multi_target) == ("en", ["de"], False)
    other = tmp_path / "my-model"
    shutil.copytree(marian_dir, other)
    t = Translator.load(other, device="cpu")  # the pair from tokenizer_config.json, as OPUS-MT's
    assert (t.source_language, t.target_language) == ("en", "de")
    (other / "tokenizer_config.json").unlink()
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
    info = marian_languages(d)
    assert info.target_languages == ["de", "fr"]  # listed by their two-letter codes
    assert info.target_tokens == {
        "de": ">>deu<<",
        "fr": ">>fra<<",
        "deu": ">>deu<<",
        "fra": ">>fra<<",
    }
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
        assert t.encode_source(SOURCES[0], lang[:2]) == t.encode_source(SOURCES[0], lang)
    with pytest.raises(ValueError, match="de, fr"):
        t.encode_source(SOURCES[0], "ita")


# --- more shapes: vocabulary sizes, separate encoder/decoder embedding tables ---------------

MORE_SHAPES = {
    "vocab40-unshared-tied": {"spm_vocab": 40, "share": False, "seed": 8, "scale": 2.5},
    "vocab86-unshared-untied": {
        "spm_vocab": 86,
        "share": False,
        "tied": False,
        "layers": (1, 2),
        "seed": 9,
    },
}


@pytest.mark.parametrize("shape", sorted(MORE_SHAPES))
def test_more_shapes_same_tokens_as_transformers(tmp_path, shape):
    d = make_marian_dir(tmp_path / "opus-mt-en-de", **MORE_SHAPES[shape])
    t = Translator.load(d, device="cpu", dtype="float32")
    assert not t.config.share_embeddings  # two tables, as transformers keeps them
    assert t.config.tie_output == MORE_SHAPES[shape].get("tied", True)
    texts = SOURCES[:4]
    for beams in (1, 4):
        assert ours(t, texts, beam_size=beams, max_length=10) == reference(d, texts, beams, 10)


# --- generation defaults: length penalty, beam size, length limits --------------------------

#: EOS with a raised logit: hypotheses end at different lengths, so the length penalty decides
#: between them (with EOS as likely as any piece, every beam runs to the length limit)
LENGTH_SHAPE = {"seed": 4, "piece_bias": {"</s>": 4.0}, "length_penalty": 0.6}


def set_generation(directory: Path, **values) -> None:
    path = directory / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}))


def test_length_penalty_from_the_generation_config(tmp_path):
    d = make_marian_dir(tmp_path / "opus-mt-en-de", **LENGTH_SHAPE)
    texts = SOURCES[:6]
    by_alpha = {alpha: reference(d, texts, 4, 12, alpha) for alpha in (0.6, 1.0, 1.3)}
    assert by_alpha[0.6] != by_alpha[1.0] != by_alpha[1.3]  # the penalty changes outputs here
    t = Translator.load(d, device="cpu", dtype="float32")
    assert t.checkpoint.generation["length_penalty"] == 0.6
    # no beam size, no length penalty given: the generation config's (num_beams 4, 0.6)
    assert ours(t, texts, max_length=12) == by_alpha[0.6]
    for alpha in (0.6, 1.3):
        assert ours(t, texts, beam_size=4, max_length=12, length_penalty=alpha) == by_alpha[alpha]
    set_generation(d, length_penalty=1.3)
    t = Translator.load(d, device="cpu", dtype="float32", packed=False)
    assert ours(t, texts, max_length=12) == by_alpha[1.3]


def test_output_not_cut_before_max_new_tokens(tmp_path):
    """No limit relative to the source: a short sentence may have as many output tokens as
    transformers gives it (here the model never chooses EOS, so every output is as long as
    allowed); generation_config.json's max_length counts the start token, as transformers'."""
    from transformers import MarianMTModel, MarianTokenizer

    d = make_marian_dir(tmp_path / "opus-mt-en-de", seed=1, piece_bias={"</s>": -30.0})
    t = Translator.load(d, device="cpu", dtype="float32")
    texts = ["Tom", SOURCES[0]]
    ids = [t.encode_source(x) for x in texts]
    limit = 2 * (len(ids[0]) + 1) + 10 + 5  # beyond the 2 x source + 10 of our own models
    for beams in (1, 2):
        got = [
            h[0].tokens + [0] * h[0].finished
            for h in t.translate_ids(ids, beam_size=beams, max_length=limit)
        ]
        assert got == reference(d, texts, beams, limit)
        assert [len(x) for x in got] == [limit, limit]
    set_generation(d, max_length=9)  # transformers: 8 generated tokens
    tok = MarianTokenizer.from_pretrained(d)
    model = MarianMTModel.from_pretrained(d).eval()
    with one_thread():
        want = model.generate(torch.tensor([tok(texts[1])["input_ids"]]), num_beams=1)[0].tolist()
    t = Translator.load(d, device="cpu", dtype="float32")
    hyp = t.translate_ids(ids[1:], beam_size=1)[0][0]
    assert [t.config.pad_id, *hyp.tokens, 0] == want and len(hyp.tokens) + 1 == 8


def test_pad_is_never_generated(tmp_path):
    """A model whose pad logit is far above every other: pad would win every step, yet no
    output holds it (bad_words_ids = [[pad]] in OPUS-MT's generation configs)."""
    from transformers import MarianMTModel, MarianTokenizer

    d = make_marian_dir(tmp_path / "opus-mt-en-de", seed=2, piece_bias={"<pad>": 50.0})
    tok = MarianTokenizer.from_pretrained(d)
    model = MarianMTModel.from_pretrained(d).eval()
    pad = model.config.pad_token_id
    texts = SOURCES[:3]
    with torch.no_grad(), one_thread():  # without the suppression, pad would come first
        for text in texts:
            enc = torch.tensor([tok(text)["input_ids"]])
            logits = model(input_ids=enc, decoder_input_ids=torch.tensor([[pad]])).logits
            assert int(logits[0, -1].argmax()) == pad
    translators = [
        Translator.load(d, device="cpu", dtype="float32"),
        Translator.load(d, device="cpu", dtype="float32", packed=False),
        Translator.load(d, device="cpu", dtype="float32", packed=False).quantize_int8(),
    ]
    for beams in (1, 3):
        expected = reference(d, texts, beams, 10)
        for t in translators:
            hyps = t.translate_ids(
                [t.encode_source(x) for x in texts], beam_size=beams, n_best=beams, max_length=10
            )
            assert all(pad not in h.tokens for sent in hyps for h in sent)
            if not t.quantized:
                assert [s[0].tokens + [0] * s[0].finished for s in hyps] == expected
    greedy = translators[1].translate_ids(
        [translators[1].encode_source(texts[0])], beam_size=1, max_length=10, reference=True
    )
    assert pad not in greedy[0][0].tokens


# --- malformed files: one error naming the file ----------------------------------------------


@pytest.fixture(scope="module")
def plain_dir(tmp_path_factory) -> Path:
    return make_marian_dir(tmp_path_factory.mktemp("plain") / "opus-mt-en-de", seed=6)


def _rewrite_json(name: str, change):
    def apply(d: Path) -> None:
        path = d / name
        path.write_text(json.dumps(change(json.loads(path.read_text()))))

    return apply


def _wrong_shape(d: Path) -> None:
    from safetensors.torch import load_file, save_file

    state = load_file(str(d / "model.safetensors"))
    key = next(k for k in state if k.endswith("layers.0.fc1.weight"))
    state[key] = state[key][:, :-1].contiguous()
    save_file(state, str(d / "model.safetensors"), metadata={"format": "pt"})


MALFORMED = {
    "config-not-json": ("config.json", lambda d: (d / "config.json").write_text("{not json")),
    "config-missing-key": (
        "config.json",
        _rewrite_json("config.json", lambda c: c.pop("d_model") and c),
    ),
    "config-bad-value": (
        "config.json",
        _rewrite_json("config.json", lambda c: {**c, "encoder_layers": "six"}),
    ),
    "vocab-not-json": ("vocab.json", lambda d: (d / "vocab.json").write_text("[1, 2")),
    "vocab-a-list": ("vocab.json", lambda d: (d / "vocab.json").write_text("[1, 2]")),
    "vocab-bad-id": ("vocab.json", _rewrite_json("vocab.json", lambda v: {**v, "x": "one"})),
    "vocab-too-large": ("source.spm", _rewrite_json("vocab.json", lambda v: {**v, "x": 10_000})),
    "source-spm-missing": ("source.spm", lambda d: (d / "source.spm").unlink()),
    "source-spm-corrupt": ("source.spm", lambda d: (d / "source.spm").write_bytes(b"\x00garbage")),
    "generation-config-a-list": (
        "generation_config.json",
        lambda d: (d / "generation_config.json").write_text("[]"),
    ),
    "generation-config-bad-value": (
        "generation_config.json",
        _rewrite_json("generation_config.json", lambda g: {**g, "num_beams": "four"}),
    ),
    "tokenizer-config-not-json": (
        "tokenizer_config.json",
        lambda d: (d / "tokenizer_config.json").write_text("{"),
    ),
    "tokenizer-config-bad-language": (
        "tokenizer_config.json",
        _rewrite_json("tokenizer_config.json", lambda t: {**t, "target_lang": ["de"]}),
    ),
    "wrong-tensor-shape": ("model.safetensors", _wrong_shape),
    "no-positions": (
        "config.json",
        _rewrite_json("config.json", lambda c: {**c, "max_position_embeddings": 0}),
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_file_is_one_error_naming_it(plain_dir, tmp_path, case):
    from app.engine import StartupError, start_engine
    from app.settings import Settings

    name, damage = MALFORMED[case]
    d = tmp_path / "weights" / "opus-mt-en-de"
    shutil.copytree(plain_dir, d)
    damage(d)
    with pytest.raises(CheckpointError) as caught:
        Translator.load(d, device="cpu")
    assert str(d / name) in str(caught.value)
    # the service refuses to start with the same message (one log line, no traceback)
    with pytest.raises(StartupError) as refused:
        start_engine(Settings(weights_dir=d.parent, device="cpu", warmup=False))
    assert str(d / name) in str(refused.value)


def own_reference(directory: Path, texts: list[str]) -> list[list[int]]:
    """transformers' generate with nothing but the model's own generation settings."""
    from transformers import MarianMTModel, MarianTokenizer

    tok = MarianTokenizer.from_pretrained(directory)
    model = MarianMTModel.from_pretrained(directory).eval()
    out = []
    with one_thread():
        for text in texts:
            seq = model.generate(torch.tensor([tok(text)["input_ids"]]))[0].tolist()[1:]
            while seq and seq[-1] == model.config.pad_token_id:
                seq.pop()
            out.append(seq)
    return out


def test_the_generation_settings_are_read_as_transformers_reads_them(tmp_path, caplog):
    """generation_config.json alone when there is one (config.json's generation keys are
    not mixed in: a length_penalty there changed our outputs, not transformers'),
    early_stopping (its beam search stops at num_beams finished hypotheses) and
    max_new_tokens; a setting this engine does not implement is named in a warning."""
    base = make_marian_dir(tmp_path / "base" / "opus-mt-en-de", seed=6, scale=2.0,
                           piece_bias={"</s>": 1.5})  # fmt: skip
    texts = SOURCES[:8]
    cases = {
        "early_stopping": ({"early_stopping": True}, {}),
        "max_new_tokens": ({"max_new_tokens": 7}, {}),
        "config_json": ({}, {"length_penalty": 2.0}),
    }
    for name, (generation, config) in cases.items():
        d = tmp_path / name / "opus-mt-en-de"
        shutil.copytree(base, d)
        set_generation(d, max_length=30, **generation)
        c = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**c, **config}))
        t = Translator.load(d, device="cpu", dtype="float32")
        assert ours(t, texts) == own_reference(d, texts), name
    # the cases differ from the base model's outputs, so each setting was needed
    plain = tmp_path / "plain" / "opus-mt-en-de"
    shutil.copytree(base, plain)
    set_generation(plain, max_length=30)
    assert ours(Translator.load(plain, device="cpu", dtype="float32"), texts) != ours(
        Translator.load(tmp_path / "early_stopping" / "opus-mt-en-de", device="cpu"), texts
    )
    # early_stopping's alternatives too: the best K of those finished by the step that
    # brought K (a first-K rule kept the first to finish, not the best)
    from transformers import MarianMTModel, MarianTokenizer

    d = tmp_path / "early_stopping" / "opus-mt-en-de"
    tok, model = MarianTokenizer.from_pretrained(d), MarianMTModel.from_pretrained(d).eval()
    t = Translator.load(d, device="cpu", dtype="float32")
    for text in texts:
        with one_thread():
            seqs = model.generate(
                torch.tensor([tok(text)["input_ids"]]), num_return_sequences=4
            ).tolist()
        want = []
        for seq in seqs:
            seq = seq[1:]
            while seq and seq[-1] == model.config.pad_token_id:
                seq.pop()
            want.append(seq)
        hyps = t.translate_ids([t.encode_source(text)], n_best=4)[0]
        assert [h.tokens + [0] * h.finished for h in hyps] == want, text
    set_generation(plain, no_repeat_ngram_size=2, repetition_penalty=1.0)
    with caplog.at_level("WARNING", logger="model_core.marian"):
        Translator.load(plain, device="cpu", dtype="float32")
    assert "no_repeat_ngram_size=2 not applied" in caplog.text
    assert "repetition_penalty" not in caplog.text  # its neutral value


def test_clean_up_tokenization_spaces_as_the_tokenizer_config_says(tmp_path):
    """tokenizer_config.json's clean_up_tokenization_spaces: transformers then removes the
    space before punctuation in what it decodes; so does the service."""
    from transformers import MarianTokenizer

    d = make_marian_dir(tmp_path / "opus-mt-en-de", seed=1)
    vocab = json.loads((d / "vocab.json").read_text())
    spaced = [p for p in ("▁.", "▁,", ".", ",") if p in vocab]
    assert spaced, "the test vocabulary holds no punctuation piece"
    words = [p for p in vocab if p.startswith("▁") and p[1:].isalpha()][:2]
    gap = ["▁"] if "▁" in vocab and not spaced[0].startswith("▁") else []
    ids = [vocab[p] for p in [words[0], *gap, spaced[0], words[1]]]
    for flag in (True, False):
        config = json.loads((d / "tokenizer_config.json").read_text())
        config["clean_up_tokenization_spaces"] = flag
        (d / "tokenizer_config.json").write_text(json.dumps(config))
        want = MarianTokenizer.from_pretrained(d).decode(ids, skip_special_tokens=True)
        t = Translator.load(d, device="cpu", dtype="float32")
        assert t.checkpoint.target_tokenizer.decode(ids) == want, flag
        if flag:
            assert " ." not in want and " ," not in want


@pytest.mark.parametrize(
    "change",
    [
        {"bad_words_ids": [[5000]]},
        {"bad_words_ids": [[-1]]},
        {"suppress_tokens": [5000]},
    ],
    ids=["bad-word-beyond-vocab", "bad-word-negative", "suppressed-beyond-vocab"],
)
def test_never_generated_id_outside_the_vocabulary_is_one_error_naming_the_file(
    plain_dir, tmp_path, change
):
    """An id in bad_words_ids or suppress_tokens outside the target vocabulary: one error
    naming generation_config.json, and the service refuses to start with it (it was a bare
    ValueError from ModelConfig, a traceback at start-up)."""
    from app.engine import StartupError, start_engine
    from app.settings import Settings

    d = tmp_path / "weights" / "opus-mt-en-de"
    shutil.copytree(plain_dir, d)
    set_generation(d, **change)
    with pytest.raises(CheckpointError, match="generation_config.json") as caught:
        Translator.load(d, device="cpu")
    assert "outside the target vocabulary" in str(caught.value)
    with pytest.raises(StartupError, match="generation_config.json"):
        start_engine(Settings(weights_dir=d.parent, device="cpu", warmup=False))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"num_beams": 2.7}, "num_beams 2.7 is not a whole number"),
        ({"num_beams": "4"}, "num_beams '4' is not a whole number"),
        ({"max_length": True}, "max_length True is not a whole number"),
        ({"length_penalty": float("nan")}, "length_penalty nan is not finite"),
    ],
    ids=["fraction", "text", "bool", "nan"],
)
def test_a_generation_setting_of_the_wrong_kind_is_one_error(plain_dir, tmp_path, change, message):
    """num_beams 2.7 was read as 2 and a NaN length penalty accepted, without a word."""
    d = tmp_path / "opus-mt-en-de"
    shutil.copytree(plain_dir, d)
    set_generation(d, **change)
    with pytest.raises(CheckpointError, match="generation_config.json") as caught:
        Translator.load(d, device="cpu")
    assert message in str(caught.value)


def test_a_null_decoder_start_token_in_config_json_is_pad(plain_dir, tmp_path):
    """null is JSON's "not set": the decoder starts from <pad>, as with no value (it was a
    TypeError message)."""
    d = tmp_path / "opus-mt-en-de"
    shutil.copytree(plain_dir, d)
    config = json.loads((d / "config.json").read_text())
    config["decoder_start_token_id"] = None
    (d / "config.json").write_text(json.dumps(config))
    t = Translator.load(d, device="cpu", dtype="float32")
    assert t.config.bos_id == config["pad_token_id"]


def test_decoder_start_token_of_the_generation_config(plain_dir, tmp_path):
    """transformers starts the decoder from generation_config.json's decoder_start_token_id;
    where it differs from config.json's, the service started from config.json's (other
    outputs). A token that cannot start the decoder is one error naming the file."""
    d = tmp_path / "opus-mt-en-de"
    shutil.copytree(plain_dir, d)
    set_generation(d, decoder_start_token_id=5, max_length=12)
    texts = SOURCES[:6]
    t = Translator.load(d, device="cpu", dtype="float32")
    assert t.config.bos_id == 5
    assert ours(t, texts) == own_reference(d, texts)
    assert 5 not in t.target_tokenizer.skip  # an ordinary piece, decoded as transformers does
    set_generation(d, decoder_start_token_id=0)  # the end of sentence
    with pytest.raises(CheckpointError, match="generation_config.json.*decoder_start_token_id"):
        Translator.load(d, device="cpu")


def test_forced_eos_given_as_a_list(plain_dir, tmp_path, caplog):
    """forced_eos_token_id may be a list in transformers ([0] forces the end of sentence at
    the length limit as 0 does); the service compared the list with config.json's id and did
    not force it, so its outputs at the limit had one token more than transformers'. Ids it
    cannot apply (other forced ids, other end-of-sentence ids) are named in a warning."""
    d = tmp_path / "opus-mt-en-de"
    shutil.copytree(plain_dir, d)
    set_generation(d, forced_eos_token_id=[0], max_length=6, num_beams=2)
    texts = SOURCES[:6]
    t = Translator.load(d, device="cpu", dtype="float32")
    assert t.config.force_eos_at_limit
    assert ours(t, texts) == own_reference(d, texts)
    set_generation(d, forced_eos_token_id=[0, 5], eos_token_id=[0, 7])
    with caplog.at_level("WARNING", logger="model_core.marian"):
        Translator.load(d, device="cpu", dtype="float32")
    assert "forced_eos_token_id=[0, 5] not applied" in caplog.text
    assert "eos_token_id=[0, 7] not applied" in caplog.text


def test_an_output_ended_by_the_forced_eos_counts_as_at_the_length_limit(plain_dir, tmp_path):
    """mt-evaluate's `at_length_limit`: an OPUS-MT model's decoding forces the end of sentence
    at the limit, so an output that ran to it ends as one the model ended; it is counted as
    at the limit all the same (a looping OPUS-MT model showed 0 there)."""
    d = tmp_path / "opus-mt-en-de"
    shutil.copytree(plain_dir, d)
    set_generation(d, forced_eos_token_id=0, max_length=6)
    t = Translator.load(d, device="cpu", dtype="float32")
    assert t.config.force_eos_at_limit
    for beam in (1, 3):
        best = [r.hypotheses[0] for r in t.translate_batch(SOURCES, beam_size=beam)]
        # (transformers' max_length 6 counts the decoder's start: 4 tokens and the EOS)
        assert [h.at_limit for h in best] == [len(h.ids) == 4 for h in best]
        assert any(h.at_limit for h in best), [h.ids for h in best]
