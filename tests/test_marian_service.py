"""A Hugging Face Marian directory in MT_WEIGHTS_DIR, served by a real uvicorn server: the HTTP
API returns what transformers' generate returns (greedy and beam search, `max_length` as
`max_new_tokens`)."""

from __future__ import annotations

import json

import httpx
import pytest
import torch

from model_core.translator import Translator
from tests.conftest import make_parallel
from tests.marian_helpers import make_marian_dir, one_thread
from tests.service_helpers import serve_in_thread

pytest.importorskip("transformers")


@pytest.mark.parametrize("scheduler", ["static", "continuous"])
def test_http_api_matches_transformers(tmp_path, scheduler):
    from transformers import MarianMTModel, MarianTokenizer

    weights = tmp_path / "weights"
    d = make_marian_dir(weights / "opus-mt-en-de", seed=4)
    tok = MarianTokenizer.from_pretrained(d)
    model = MarianMTModel.from_pretrained(d).eval()
    texts = make_parallel(6, seed=11)[0]
    cases = [(1, 8), (3, 8), (2, 3)]
    expected = {}
    with one_thread():
        for beams, limit in cases:
            for text in texts:
                out = model.generate(
                    torch.tensor([tok(text)["input_ids"]]), num_beams=beams, max_new_tokens=limit
                )
                expected[beams, limit, text] = tok.decode(out[0], skip_special_tokens=True)
    with serve_in_thread(weights, device="cpu", scheduler=scheduler) as (url, _app):
        pairs = httpx.get(f"{url}/languages").json()
        assert [p["code"] for p in pairs] == ["en"] and pairs[0]["targets"] == ["de"]
        for beams, limit in cases:
            for text in texts:
                r = httpx.post(
                    f"{url}/translate",
                    json={
                        "q": text,
                        "source": "en",
                        "target": "de",
                        "beam_size": beams,
                        "max_length": limit,
                    },
                    timeout=60,
                )
                assert r.status_code == 200, r.text
                assert r.json()["translatedText"] == expected[beams, limit, text]


def test_multi_target_model_takes_the_token_of_the_requested_target(tmp_path):
    weights = tmp_path / "weights"
    d = make_marian_dir(weights / "opus-mt-en-mul", lang_tokens=(">>deu<<", ">>fra<<"), seed=14)
    local = Translator.load(d, device="cpu")
    text = make_parallel(3, seed=2)[0][1]
    expected = {}
    for lang in ("deu", "fra"):
        ids = local.encode_source(text, lang)
        hyp = local.translate_ids([ids], beam_size=1, max_length=8, max_length_ratio=9.0)
        expected[lang] = local.target_tokenizer.decode(hyp[0][0].tokens)
    assert expected["deu"] != expected["fra"]  # the token steers the output
    with serve_in_thread(weights, device="cpu") as (url, _app):
        langs = httpx.get(f"{url}/languages").json()  # two-letter codes, as clients send them
        assert langs[0]["code"] == "en" and langs[0]["targets"] == ["de", "fr"]
        for lang, want in expected.items():
            for code in (lang[:2], lang):  # "de" and "deu" both take >>deu<<
                r = httpx.post(
                    f"{url}/translate",
                    json={
                        "q": text,
                        "source": "en",
                        "target": code,
                        "beam_size": 1,
                        "max_length": 8,
                    },
                    timeout=60,
                )
                assert r.status_code == 200, r.text
                assert r.json()["translatedText"] == want
        r = httpx.post(f"{url}/translate", json={"q": text, "source": "en", "target": "it"})
        assert r.status_code == 400 and "en->de" in r.json()["error"]


def test_http_decodes_with_the_models_generation_config(tmp_path):
    """Requests without beam_size: each model's num_beams (capped by MT_MAX_BEAM_SIZE) and its
    length_penalty, as transformers' generate uses them; a short sentence is not cut before
    the request's max_length (transformers' max_new_tokens). A shape other than the first
    test's: separate encoder/decoder tables, a smaller vocabulary."""
    import json
    import shutil

    from safetensors.torch import load_file, save_file
    from transformers import MarianMTModel, MarianTokenizer

    weights = tmp_path / "weights"
    shape = {"seed": 4, "spm_vocab": 50, "share": False, "piece_bias": {"</s>": 10.0}}
    de = make_marian_dir(weights / "opus-mt-en-de", length_penalty=0.6, num_beams=3, **shape)
    fr, es = weights / "opus-mt-en-fr", weights / "opus-mt-en-es"
    shutil.copytree(de, fr)
    shutil.copytree(de, es)
    for d, target, gen in ((fr, "fr", {"length_penalty": 1.3, "num_beams": 6}), (es, "es", {})):
        (d / "tokenizer_config.json").write_text(
            json.dumps({"source_lang": "en", "target_lang": target})
        )
        path = d / "generation_config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **gen}))
    state = load_file(str(es / "model.safetensors"))  # es: EOS never chosen before the limit
    state["final_logits_bias"][0, 0] = -30.0
    save_file(state, str(es / "model.safetensors"), metadata={"format": "pt"})

    texts = make_parallel(6, seed=11)[0]
    expected = {}
    with one_thread():
        for d, target in ((de, "de"), (fr, "fr")):
            tok = MarianTokenizer.from_pretrained(d)
            model = MarianMTModel.from_pretrained(d).eval()
            beams = min(model.generation_config.num_beams, 4)  # MT_MAX_BEAM_SIZE=4 below
            local = Translator.load(d, device="cpu")
            changed = 0  # outputs the model's length penalty changes (vs 1.0)
            for text in texts:
                ids = torch.tensor([tok(text)["input_ids"]])  # its length penalty, our beam cap
                out = model.generate(ids, num_beams=beams, max_new_tokens=12)
                expected[target, text] = tok.decode(out[0], skip_special_tokens=True)
                hyp = local.translate_ids(
                    [local.encode_source(text)], beam_size=beams, length_penalty=1.0, max_length=12
                )[0][0]
                changed += local.target_tokenizer.decode(hyp.tokens) != expected[target, text]
            assert changed, target
        tok = MarianTokenizer.from_pretrained(es)
        model = MarianMTModel.from_pretrained(es).eval()
        short = "Tom"
        out = model.generate(
            torch.tensor([tok(short)["input_ids"]]), num_beams=1, max_new_tokens=30
        )
        assert out.shape[1] == 31  # the start token and 30 generated
        expected["es", short] = tok.decode(out[0], skip_special_tokens=True)

    for scheduler in ("static", "continuous"):
        with serve_in_thread(weights, device="cpu", max_beam_size=4, scheduler=scheduler) as (
            url,
            _app,
        ):
            for (target, text), want in expected.items():
                body = {"q": text, "source": "en", "target": target, "max_length": 12}
                if target == "es":
                    body.update(max_length=30, beam_size=1)
                r = httpx.post(f"{url}/translate", json=body, timeout=60)
                assert r.status_code == 200, r.text
                assert r.json()["translatedText"] == want, (scheduler, target, text)


def test_every_code_of_a_served_target_takes_its_token(tmp_path):
    """`cmn` is Chinese as `zh` and `zho` are: a model with >>zho<< serves all three the same
    (a code the service routes to a model is one the model can take; it was a 500)."""
    weights = tmp_path / "weights"
    make_marian_dir(weights / "opus-mt-en-mul", lang_tokens=(">>zho<<", ">>est<<"), seed=15)
    text = make_parallel(3, seed=3)[0][1]
    with serve_in_thread(weights, device="cpu") as (url, _app):
        for codes in (("zh", "zho", "cmn"), ("et", "est", "ekk")):
            answers = set()
            for code in codes:
                body = {"q": text, "source": "en", "target": code, "beam_size": 1, "max_length": 8}
                r = httpx.post(f"{url}/translate", json=body, timeout=60)
                assert r.status_code == 200, r.text
                answers.add(r.json()["translatedText"])
            assert len(answers) == 1, (codes, answers)


def test_the_models_max_length_applies_when_a_request_gives_none(tmp_path):
    """generation_config.json's max_length (here 9: 8 generated tokens, as transformers counts
    it) bounds a request without `max_length`, as it bounds Translator and transformers; a
    request's own max_length still goes up to MT_MAX_OUTPUT_LENGTH."""
    weights = tmp_path / "weights"
    d = make_marian_dir(weights / "opus-mt-en-de", seed=1, piece_bias={"</s>": -30.0})
    path = d / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "max_length": 9}))
    local = Translator.load(d, device="cpu")
    text = make_parallel(3, seed=2)[0][0]
    (hyp,) = local.translate_ids([local.encode_source(text)], beam_size=1)
    assert len(hyp[0].tokens) + 1 == 8  # the model never picks EOS: it runs to its limit
    want = local.target_tokenizer.decode(hyp[0].tokens)
    with serve_in_thread(weights, device="cpu") as (url, _app):
        body = {"q": text, "source": "en", "target": "de", "beam_size": 1}
        r = httpx.post(f"{url}/translate", json=body, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == want
        r = httpx.post(f"{url}/translate", json={**body, "max_length": 20}, timeout=60)
        assert len(r.json()["translatedText"]) > len(want)
