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
