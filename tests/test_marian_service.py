"""A Hugging Face Marian directory in MT_WEIGHTS_DIR, served by a real uvicorn server: the HTTP
API returns what transformers' generate returns (greedy and beam search, `max_length` as
`max_new_tokens`)."""

from __future__ import annotations

import httpx
import pytest
import torch

from tests.conftest import make_parallel
from tests.marian_helpers import make_marian_dir
from tests.service_helpers import serve_in_thread

pytest.importorskip("transformers")


def test_http_api_matches_transformers(tmp_path):
    from transformers import MarianMTModel, MarianTokenizer

    weights = tmp_path / "weights"
    d = make_marian_dir(weights / "opus-mt-en-de", seed=4)
    tok = MarianTokenizer.from_pretrained(d)
    model = MarianMTModel.from_pretrained(d).eval()
    texts = make_parallel(6, seed=11)[0]
    cases = [(1, 8), (3, 8), (2, 3)]
    expected = {}
    for beams, limit in cases:
        for text in texts:
            out = model.generate(
                torch.tensor([tok(text)["input_ids"]]), num_beams=beams, max_new_tokens=limit
            )
            expected[beams, limit, text] = tok.decode(out[0], skip_special_tokens=True)
    with serve_in_thread(weights, device="cpu") as (url, _app):
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
    from model_core.translator import Translator

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
        langs = httpx.get(f"{url}/languages").json()
        assert langs[0]["code"] == "en" and langs[0]["targets"] == ["deu", "fra"]
        for lang, want in expected.items():
            r = httpx.post(
                f"{url}/translate",
                json={"q": text, "source": "en", "target": lang, "beam_size": 1, "max_length": 8},
                timeout=60,
            )
            assert r.status_code == 200, r.text
            assert r.json()["translatedText"] == want
        r = httpx.post(f"{url}/translate", json={"q": text, "source": "en", "target": "ita"})
        assert r.status_code == 400 and "en->deu" in r.json()["error"]
