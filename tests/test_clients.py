"""Real LibreTranslate client libraries from PyPI against a real server on 127.0.0.1 serving a
real checkpoint: libretranslatepy (form bodies through urllib) and deep-translator's
LibreTranslator (the parameters in the query string of a POST with an empty body, requests).
Each answer must equal what the server gives a plain JSON request."""

from __future__ import annotations

import shutil

import httpx
import pytest
from deep_translator import LibreTranslator
from deep_translator.exceptions import AuthorizationException
from libretranslatepy import LibreTranslateAPI

from app.keys import KeyStore
from tests.service_helpers import serve_in_thread

TEXTS = ["The cat is big.", "We eat bread today."]


@pytest.fixture(scope="module")
def server(random_checkpoint, tmp_path_factory, monkeypatch_module):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch_module.delenv(name, raising=False)  # loopback only
    weights = tmp_path_factory.mktemp("weights")
    shutil.copytree(random_checkpoint, weights / "en-de")
    db = tmp_path_factory.mktemp("keys") / "keys.sqlite"
    key, _ = KeyStore(db).add("clients")
    with serve_in_thread(weights, api_keys_db=db) as (url, _):
        yield url, key


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def reference(url: str, q):
    r = httpx.post(f"{url}/translate", json={"q": q, "source": "en", "target": "de"})
    assert r.status_code == 200, r.text
    return r.json()["translatedText"]


def test_libretranslatepy(server):
    url, key = server
    api = LibreTranslateAPI(url + "/")
    assert api.translate(TEXTS[0], "en", "de") == reference(url, TEXTS[0])
    assert {"code": "en", "name": "English", "targets": ["de"]} in api.languages()
    detected = api.detect("The weather is very nice today and we are going to the park.")
    assert detected[0]["language"] == "en"
    with_key = LibreTranslateAPI(url + "/", api_key=key)
    assert with_key.translate(TEXTS[1], "en", "de") == reference(url, TEXTS[1])
    wrong = LibreTranslateAPI(url + "/", api_key="not-a-key")
    with pytest.raises(Exception, match="403"):
        wrong.translate(TEXTS[0], "en", "de")


def test_deep_translator(server):
    url, key = server
    translator = LibreTranslator(source="en", target="de", api_key=key, custom_url=url + "/")
    assert translator.translate(TEXTS[0]) == reference(url, TEXTS[0])
    assert translator.translate_batch(TEXTS) == [reference(url, t) for t in TEXTS]
    wrong = LibreTranslator(source="en", target="de", api_key="nope", custom_url=url + "/")
    with pytest.raises(AuthorizationException):
        wrong.translate(TEXTS[0])
