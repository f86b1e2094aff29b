"""LibreTranslate compatibility against a real uvicorn server on a loopback port serving two real
checkpoints (random tiny en->de and de->en models with a real sentencepiece tokenizer): every
way a request can carry its parameters, /detect, and `source: "auto"` routing each text to the
model of its own language."""

from __future__ import annotations

import asyncio
import json
import shutil
from types import SimpleNamespace

import httpx
import pytest

from app.translate import no_route
from model_core.checkpoint import save_checkpoint
from tests.conftest import random_model, tiny_config
from tests.service_helpers import serve_in_thread
from tests.test_service import gated_server, hold_the_engine, metric, wait_for

EN = "The weather is very nice today and we are going to the park with our children."
DE = "Das Wetter ist heute sehr schön und wir gehen mit unseren Kindern in den Park."


@pytest.fixture(scope="module")
def two_models(random_checkpoint, spm_model, tokenizer, tmp_path_factory):
    weights = tmp_path_factory.mktemp("weights")
    shutil.copytree(random_checkpoint, weights / "en-de")
    save_checkpoint(
        weights / "de-en",
        random_model(tiny_config(tokenizer.vocab_size), seed=1),
        source_tokenizer=spm_model,
        target_tokenizer=spm_model,
        source_language="de",
        target_language="en",
    )
    return weights


@pytest.fixture(scope="module")
def server(two_models):
    with serve_in_thread(two_models) as (url, app):
        yield url


def post(url: str, path: str = "/translate", **kwargs) -> httpx.Response:
    return httpx.post(f"{url}{path}", timeout=60, **kwargs)


def explicit(url: str, q, source: str, target: str):
    r = post(url, json={"q": q, "source": source, "target": target})
    assert r.status_code == 200, r.text
    return r.json()["translatedText"]


# --- every way a request carries its parameters -------------------------------------------


FIELDS = {"q": "The cat is big.", "source": "en", "target": "de"}


@pytest.mark.parametrize(
    "style",
    ["json", "form", "multipart", "query", "query+json", "query+form", "query+multipart"],
)
def test_translate_takes_its_parameters_in_every_style(server, style):
    expected = explicit(server, FIELDS["q"], "en", "de")
    body_fields = {"q": FIELDS["q"]}
    query = {"source": "en", "target": "de"}
    kwargs = {
        "json": {"json": FIELDS},
        "form": {"data": FIELDS},
        "multipart": {"files": {k: (None, v) for k, v in FIELDS.items()}},
        "query": {"params": FIELDS},
        "query+json": {"params": query, "json": body_fields},
        "query+form": {"params": query, "data": body_fields},
        "query+multipart": {"params": query, "files": {"q": (None, FIELDS["q"])}},
    }[style]
    r = post(server, **kwargs)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json()["translatedText"] == expected


def test_a_query_string_with_an_empty_body_and_a_content_type(server):
    """A client that names a form content type but sends its fields in the query string."""
    r = post(
        server,
        params=FIELDS,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        content=b"",
    )
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == explicit(server, FIELDS["q"], "en", "de")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"json": {**FIELDS, "format": None}},
        {"json": {**FIELDS, "format": ""}},
        {"data": {**FIELDS, "format": ""}},
        {"params": {**FIELDS, "format": ""}},
    ],
    ids=["json-null", "json-empty", "form-empty", "query-empty"],
)
def test_an_empty_or_null_format_is_text_as_in_libretranslate(server, kwargs):
    """LibreTranslate reads a `format` that is null or empty (a form's unset field) as "text"."""
    r = post(server, **kwargs)
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == explicit(server, FIELDS["q"], "en", "de")


def test_the_body_wins_over_the_query_string(server):
    r = post(server, params={"target": "fr"}, json=FIELDS)
    assert r.status_code == 200, r.text


def test_a_repeated_q_is_a_list_in_a_form_and_in_the_query(server):
    texts = ["The cat is big.", "We eat bread."]
    expected = explicit(server, texts, "en", "de")
    params = [("q", t) for t in texts] + [("source", "en"), ("target", "de")]
    by_query = post(server, params=params)
    by_form = post(
        server,
        content=httpx.QueryParams(params).__str__().encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    by_multipart = post(server, files=[(k, (None, v)) for k, v in params])
    for r in (by_query, by_form, by_multipart):
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == expected


URLENCODED = {"Content-Type": "application/x-www-form-urlencoded"}


def test_a_repeated_field_is_read_as_its_first_value_as_in_libretranslate(server):
    """Flask's `request.values.get` gives a field's first value: `target=de&target=xx` is a
    translation into German (the last value was taken: a 400 for `xx`)."""
    expected = explicit(server, FIELDS["q"], "en", "de")
    fields = [("q", FIELDS["q"]), ("source", "en"), ("source", "xx")]
    fields += [("target", "de"), ("target", "xx"), ("format", "text"), ("format", "xml")]
    for kwargs in (
        {"params": fields},
        {"content": str(httpx.QueryParams(fields)).encode(), "headers": URLENCODED},
        {"files": [(k, (None, v)) for k, v in fields]},
    ):
        r = post(server, **kwargs)
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == expected
    r = post(
        server,
        "/translate_file",
        params=[("source", "en"), ("source", "xx")],
        files=[("target", (None, "de")), ("target", (None, "xx")), ("file", ("a.txt", b"Hi."))],
    )
    assert r.status_code == 200, r.text
    assert httpx.get(r.json()["translatedFileUrl"]).text == explicit(server, "Hi.", "en", "de")


def test_a_form_body_is_utf8_as_sent_raw_or_escaped(server):
    """`curl -d 'q=Grüße'` sends the UTF-8 bytes as they are; a browser's form escapes them.
    Both are the same text (here asked into its own language: it comes back as it is)."""
    text = "Grüße aus München, 東京 und Zürich"
    raw = post(server, content=f"q={text}&source=de&target=de".encode(), headers=URLENCODED)
    escaped = post(server, data={"q": text, "source": "de", "target": "de"})
    for r in (raw, escaped):
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == text


@pytest.mark.parametrize("path", ["/translate", "/detect"])
def test_a_multipart_field_that_is_not_utf8_is_a_400_as_in_an_urlencoded_form(server, path):
    """A multipart field is UTF-8 as an urlencoded one is: one wrong byte is a 400 (the field
    was read as Latin-1, every other letter of the text too: "GrÃ¼Ãe" was translated, 200)."""
    for value in ("Grüße aus München ".encode() + b"\xff", b"Gr\xfc\xdfe"):
        fields = {"q": value, "source": b"de", "target": b"de"}
        body = b"".join(
            b'--XyZ\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (k.encode(), v)
            for k, v in fields.items()
        )
        r = post(
            server,
            path,
            content=body + b"--XyZ--\r\n",
            headers={"content-type": "multipart/form-data; boundary=XyZ"},
        )
        assert r.status_code == 400, r.text
        assert "not valid UTF-8" in r.json()["error"], r.text
    text = "Grüße aus München, 東京 und Zürich"
    r = post(server, files={"q": (None, text), "source": (None, "de"), "target": (None, "de")})
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == text
    # a body that names its charset is read in it (it was refused, as not UTF-8)
    body = b"".join(
        b'--XyZ\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (k, v)
        for k, v in ((b"q", "Grüße aus Zürich".encode("latin-1")), (b"source", b"de"))
    )
    r = post(
        server,
        path,
        content=body + b'--XyZ\r\nContent-Disposition: form-data; name="target"\r\n\r\nde\r\n'
        b"--XyZ--\r\n",
        headers={"content-type": "multipart/form-data; charset=ISO-8859-1; boundary=XyZ"},
    )
    assert r.status_code == 200, r.text
    if path == "/translate":
        assert r.json()["translatedText"] == "Grüße aus Zürich"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/translate", {"q": "Tom & Mary are here.", "source": "en", "target": "de"}),
        ("/translate", {"q": ["I like tea."], "source": "en", "target": "de"}),
        ("/detect", {"q": "Wo ist der Bahnhof?"}),
        ("/frontend/settings", {"api_key": "mt-not-a-key"}),
    ],
)
def test_json_sent_as_a_form_is_a_400_that_names_the_content_type(server, path, body):
    """`curl -d '{"q": ...}'` sends JSON as a form (its default Content-Type): the answer
    says so (it was "q: Field required; source: Field required; target: Field required" for
    a body that holds them, and POST /frontend/settings answered the server's settings, 200,
    as if no key had been sent)."""
    r = post(server, path, content=json.dumps(body).encode(), headers=URLENCODED)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert "JSON" in error and "Content-Type: application/json" in error, error


def test_an_empty_json_body_sent_as_a_form_leaves_the_query_string_to_say(server):
    """`curl -X POST '/translate?q=...&source=..&target=..' -d '{}'`: an empty JSON body asks
    nothing, and the query string's fields are taken (it was refused as JSON sent as a form)."""
    for empty in (b"{}", b"[]"):
        r = post(
            server,
            params={"q": "Guten Tag.", "source": "de", "target": "de"},
            content=empty,
            headers=URLENCODED,
        )
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == "Guten Tag."


def test_a_form_or_query_string_holds_as_many_texts_as_a_json_list(server):
    """`batchLimit` (/frontend/settings) texts in a repeated `q`, in every style; one more is a
    413 that says why."""
    limit = httpx.get(f"{server}/frontend/settings").json()["batchLimit"]
    texts = [f"Satz {i}." for i in range(limit)]
    fields = [("q", t) for t in texts] + [("source", "de"), ("target", "de")]
    for kwargs in (
        {"data": {"q": texts, "source": "de", "target": "de"}},
        {"params": fields},
        {"files": [(k, (None, v)) for k, v in fields]},
    ):
        r = post(server, **kwargs)
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == texts
    r = post(server, data={"q": [*texts, "Noch einer."], "source": "de", "target": "de"})
    assert r.status_code == 413, r.text
    assert f"exceeds text limit ({limit} per request)" in r.json()["error"]


def test_a_long_list_of_wrong_values_gets_a_short_answer(server):
    """Each wrong element is not listed: the answer names a few, and a list longer than the
    limit is a 413 before its elements are checked."""
    r = post(server, json={"q": [1] * 100, "source": "en", "target": "de"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error.count("should be a valid string") == 5 and "and 95 more" in error, error
    r = post(server, json={"q": [1] * 100_000, "source": "en", "target": "de"})
    assert r.status_code == 413, r.text
    assert "100000 texts" in r.json()["error"] and len(r.content) < 1000


def test_auto_detects_an_html_text_by_its_words_not_its_markup(server):
    """English attribute values and class names must not outvote a German sentence."""
    html = (
        '<div class="navigation container header wrapper main content" '
        'title="the main page of this website"><p>Wo ist der Bahnhof? Ich habe mich '
        'verlaufen.</p><a href="/where-is-the-station-and-the-main-road">Hier</a></div>'
    )
    r = post(server, json={"q": html, "source": "auto", "target": "en", "format": "html"})
    assert r.status_code == 200, r.text
    assert r.json()["detectedLanguage"]["language"] == "de"
    assert r.json()["model"] == "de-en"


def test_auto_routes_each_unit_of_an_html_page_from_its_own_language(server):
    """An HTML page was detected as a whole: into German, the German paragraph and title of an
    English page went through the English model; into English, the page, detected as English,
    came back untranslated, its German paragraph and title too. A unit of a few words
    ("Urlaub") takes the page's language, as a file's does."""
    page = f'<h1>Urlaub</h1><p>{EN}</p><p title="{DE}">{DE}</p><p>I like tea.</p>'
    for target, kept, translated in (("de", DE, EN), ("en", EN, DE)):
        body = {"q": page, "source": "auto", "target": target, "format": "html"}
        r = post(server, json=body)
        assert r.status_code == 200, r.text
        out = r.json()["translatedText"]
        assert r.json()["detectedLanguage"]["language"] == "en"  # the page's, as a whole
        assert r.json()["model"] == ("en-de" if target == "de" else "de-en")
        assert out.count(kept) == (2 if target == "de" else 1), out
        assert translated not in out, out
        assert ("I like tea." in out) == (target == "en"), out
        assert ("Urlaub" in out) == (target == "en"), out  # the page's language: English


def test_auto_routes_each_paragraph_of_a_text_from_its_own_language(server):
    """A plain text was detected as a whole, as an HTML page was: into German, the German
    paragraph of an English text went through the English model; into English, the text came
    back untranslated, its German paragraph too. A paragraph of a few words ("Urlaub") takes
    the text's language; the breaks between them stay as written."""
    text = f"Urlaub\n\n{EN}\r\n \r\n{DE}\n\n\nI like tea."
    for target, kept, translated in (("de", DE, EN), ("en", EN, DE)):
        r = post(server, json={"q": [text, "\n\n"], "source": "auto", "target": target})
        assert r.status_code == 200, r.text
        out = r.json()["translatedText"][0]
        assert r.json()["detectedLanguage"][0]["language"] == "en"  # the text's, as a whole
        assert r.json()["model"] == ("en-de" if target == "de" else "de-en")
        assert kept in out and translated not in out, out
        assert ("I like tea." in out) == (target == "en"), out
        assert ("Urlaub" in out) == (target == "en"), out  # the text's language: English
        assert out.count("\n\n") == 2 and "\n\n\n" in out and "\r\n \r\n" in out, out
        assert r.json()["translatedText"][1] == "\n\n"


@pytest.mark.parametrize(
    "style", ["json", "form", "multipart", "query", "query+json", "query+form", "query+multipart"]
)
def test_detect_takes_its_parameters_in_every_style(server, style):
    fields = {"q": DE}
    kwargs = {
        "json": {"json": fields},
        "form": {"data": fields},
        "multipart": {"files": {"q": (None, DE)}},
        "query": {"params": fields},
        "query+json": {"params": fields, "json": {}},
        "query+form": {"params": fields, "data": {"api_key": ""}},
        "query+multipart": {"params": fields, "files": {"api_key": (None, "")}},
    }[style]
    r = post(server, "/detect", **kwargs)
    assert r.status_code == 200, r.text
    assert r.json()[0]["language"] == "de"


@pytest.mark.parametrize(
    "kwargs, status, needle",
    [
        ({"content": b""}, 400, "JSON object"),
        ({"params": {"q": "x", "source": "en"}}, 400, "target"),
        ({"params": {"q": "x", "source": "en", "target": "xx"}}, 400, "no model"),
        ({"data": {"q": "x", "source": "en", "target": "de", "beam_size": "many"}}, 400, "beam"),
        (
            {
                "content": b"--b\r\nContent-Disposition: form-data; name=q\r\n\r\nx",
                "headers": {"Content-Type": "multipart/form-data; boundary=b"},
            },
            400,
            "",
        ),
        ({"params": [(f"p{i}", "1") for i in range(300)]}, 413, "parameters"),
        (
            {
                "content": "&".join(f"p{i}=1" for i in range(300)).encode(),
                "headers": {"Content-Type": "application/x-www-form-urlencoded"},
            },
            413,
            "parameters",
        ),
        ({"files": [(f"p{i}", (None, "1")) for i in range(300)]}, 413, "parameters"),
        (
            {"content": b"q=%ff", "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
            400,
            "not valid UTF-8",
        ),
        (
            {
                "content": b"q=caf\xe9&source=en&target=de",
                "headers": {"Content-Type": "application/x-www-form-urlencoded"},
            },
            400,
            "not valid UTF-8",
        ),
    ],
)
def test_bad_requests_in_any_style_are_4xx(server, kwargs, status, needle):
    r = post(server, **kwargs)
    assert r.status_code == status, r.text
    assert needle in r.json()["error"]
    assert httpx.get(f"{server}/health").status_code == 200


# --- /detect ---------------------------------------------------------------------------------


def test_detect_names_the_language_among_those_served(server):
    for text, lang in ((EN, "en"), (DE, "de")):
        r = post(server, "/detect", json={"q": text})
        assert r.status_code == 200, r.text
        found = r.json()
        assert found[0]["language"] == lang
        assert found[0]["confidence"] > 50.0
        assert {d["language"] for d in found} <= {"en", "de"}
        assert sum(d["confidence"] for d in found) == pytest.approx(100.0, abs=0.2)


def test_detect_a_list_answers_for_the_texts_together(server):
    r = post(server, "/detect", json={"q": [DE, DE, EN]})
    assert r.status_code == 200, r.text
    assert r.json()[0]["language"] == "de"


def test_detect_a_list_leaves_its_empty_texts_out(server):
    """Empty and blank texts of a list have no language: the ranking is the other texts' alone
    (each blank text counted as every language equally likely, lowering the confidence)."""
    alone = post(server, "/detect", json={"q": [DE]})
    r = post(server, "/detect", json={"q": ["", " \n\t", DE, ""]})
    assert r.status_code == 200, r.text
    assert r.json() == alone.json()
    assert r.json()[0]["language"] == "de" and r.json()[0]["confidence"] > 90.0


@pytest.mark.parametrize(
    "body, status",
    [
        ({}, 400),
        ({"q": ""}, 400),
        ({"q": 5}, 400),
        ({"q": [1, 2]}, 400),
        ({"q": []}, 400),
        ({"q": ["", " "]}, 400),
        ({"q": "x" * 30_000}, 413),
        ({"q": ["x"] * 500}, 413),
        (b'{"q": "\\ud800"}', 400),
        ({"q": "x", "api_key": 5}, 400),
    ],
)
def test_bad_detect_requests_are_4xx(server, body, status):
    sent = {"content": body} if isinstance(body, bytes) else {"json": body}
    r = post(server, "/detect", **sent)
    assert r.status_code == status, r.text
    assert r.json()["error"]
    assert httpx.get(f"{server}/health").status_code == 200


# --- source: auto ----------------------------------------------------------------------------


def test_auto_routes_each_text_to_the_model_of_its_language(server):
    to_de = post(server, json={"q": [EN, DE], "source": "auto", "target": "de"})
    assert to_de.status_code == 200, to_de.text
    body = to_de.json()
    assert body["translatedText"] == [explicit(server, EN, "en", "de"), DE]  # DE comes back as is
    assert [d["language"] for d in body["detectedLanguage"]] == ["en", "de"]
    assert all(0 < d["confidence"] <= 100 for d in body["detectedLanguage"])
    to_en = post(server, json={"q": [EN, DE], "source": "auto", "target": "en"}).json()
    assert to_en["translatedText"] == [EN, explicit(server, DE, "de", "en")]


@pytest.mark.parametrize(
    ("source", "target", "q"),
    [("en", "en", EN), ("de", "de", DE), ("deu", "de", DE), ("de", "deu", [DE, EN])],
)
def test_a_text_asked_into_its_own_language_comes_back_as_it_is(server, source, target, q):
    """Explicit source = target (also as a two- and a three-letter code): nothing is translated,
    whether or not a route through the pivot language exists (en->en has none, de->de one)."""
    r = post(server, json={"q": q, "source": source, "target": target})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["translatedText"] == q
    assert body["models"] == [] and body["model"] == "none (no text needed a model)"


def test_alternatives_are_distinct_and_none_for_a_text_left_as_it_is(server):
    """As LibreTranslate gives them (`filter_unique`): never the translation itself, never twice,
    and none for a text into its own language (each was the text again)."""
    for fields in (
        {"q": DE, "source": "de", "target": "de"},
        {"q": DE, "source": "deu", "target": "de"},
        {"q": DE, "source": "auto", "target": "de"},
    ):
        r = post(server, json={**fields, "alternatives": 3})
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == DE and r.json()["alternatives"] == [], fields
    r = post(server, data={"q": [DE, EN], "source": "de", "target": "de", "alternatives": "2"})
    assert r.status_code == 200, r.text
    assert r.json()["alternatives"] == [[], []]
    texts = [EN, "The cat.", "Yes.", "A house, a tree and a car."]
    r = post(server, json={"q": texts, "source": "en", "target": "de", "alternatives": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    for best, alternatives in zip(body["translatedText"], body["alternatives"], strict=True):
        assert best not in alternatives and "" not in alternatives
        assert len(set(alternatives)) == len(alternatives)


def test_a_language_no_model_serves_is_a_400_even_into_itself(server):
    r = post(server, json={"q": EN, "source": "fr", "target": "fr"})
    assert r.status_code == 400
    # "xx is not supported": LibreTranslate's words, by which its clients (Dialect) tell a
    # language code the server does not know
    assert "'fr' is not supported: no model translates from or into it" in r.json()["error"]
    assert "en->de" in r.json()["error"]


@pytest.mark.parametrize(
    ("source", "target", "said"),
    [("en", "fr", "into it"), ("fr", "en-US", "from it"), ("de", "fr", "into it")],
)
def test_a_language_no_model_knows_is_named_as_libretranslate_names_it(
    server, source, target, said
):
    """ "xx is not supported", LibreTranslate's words, which its clients look for (Dialect
    tells a wrong language code by them), then which way no model translates."""
    r = post(server, json={"q": EN, "source": source, "target": target})
    assert r.status_code == 400
    assert r.json()["error"] == (
        f"'fr' is not supported: no model translates {said}; available pairs: de->en, en->de"
    )


def test_a_pair_of_known_languages_without_a_route_names_the_pivot_only_where_it_could_be():
    """Both languages known, no route: the target is not supported from the source; the
    message names the pivot language (en) only where a route could go through it (it said
    "'en' to 'fr', directly or through 'en'")."""
    registry = SimpleNamespace(pairs={("en", "de"): "en-de", ("fr", "en"): "fr-en"}, pivot="en")
    state = SimpleNamespace(engine=SimpleNamespace(registry=registry, pairs=registry.pairs))
    pairs = "; available pairs: en->de, fr->en"
    assert no_route(state, "de", "fr") == (
        "'fr' is not supported from 'de': no model translates 'de' to 'fr', directly or "
        f"through 'en'{pairs}"
    )
    assert no_route(state, "en", "fr") == (
        f"'fr' is not supported from 'en': no model translates 'en' to 'fr'{pairs}"
    )


@pytest.mark.parametrize(
    ("source", "target"),
    [("EN", "DE"), ("En", "de"), ("en-US", "de-AT"), ("en_GB", "de-CH"), ("eng", "DEU")],
)
def test_language_codes_in_any_case_or_with_a_region_are_the_served_ones(server, source, target):
    """`EN` was a 400 ("no model translates 'EN' to 'DE'", listing en->de); a region-tagged
    code with no model of its own is its base language; the answer names the served codes."""
    r = post(server, json={"q": EN, "source": source, "target": target})
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == explicit(server, EN, "en", "de")
    assert r.json()["models"] == ["en-de"]
    r = post(server, data={"q": [EN, DE], "source": "AUTO", "target": target})
    assert r.status_code == 200, r.text
    assert [d["language"] for d in r.json()["detectedLanguage"]] == ["en", "de"]
    r = post(server, json={"q": DE, "source": target, "target": target.upper()})
    assert r.status_code == 200 and r.json()["translatedText"] == DE  # into itself: as sent


def test_a_script_tag_is_no_target_its_base_language_model_can_write(server):
    """zh-Hant asks for a script; a model of the base language writes its own: a 400, while
    as the source, a script-tagged code is read as its base language."""
    r = post(server, json={"q": EN, "source": "en", "target": "de-Latf"})
    assert r.status_code == 400
    assert "'de-Latf'" in r.json()["error"] and "en->de" in r.json()["error"]
    r = post(server, json={"q": EN, "source": "en-Latn", "target": "de"})
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == explicit(server, EN, "en", "de")


def test_auto_on_a_tie_translates_rather_than_returning_the_text(server):
    """A text without evidence either way ("ok", "Hi": the detector gives each language 50%)
    is translated from the other language, not returned as if already in the target."""
    from app.detect import Detector

    tied = [t for t in ("ok", "Hi", "No", "Hi!") if Detector(["en", "de"]).rank(t)[0][1] == 50.0]
    assert tied, "no tied text to test with"
    for target, other in (("de", "en"), ("en", "de")):
        r = post(server, json={"q": tied, "source": "auto", "target": target})
        assert r.status_code == 200, r.text
        body = r.json()
        assert [d["language"] for d in body["detectedLanguage"]] == [other] * len(tied)
        assert body["translatedText"] == [explicit(server, t, other, target) for t in tied]


def test_detect_and_auto_break_a_tie_by_one_rule(server):
    """ "Tom" (50% each): /detect named German first while `source: auto` into German took it
    as English. Both follow app/detect.py `Detector.order`: the pivot language (en) first,
    and for `source: auto` the target last among the tied."""
    for q in ("Tom", ["Tom", "ok"]):
        r = post(server, "/detect", json={"q": q})
        assert r.status_code == 200, r.text
        assert r.json() == [
            {"language": "en", "confidence": 50.0},
            {"language": "de", "confidence": 50.0},
        ]
    into_de = post(server, json={"q": "Tom", "source": "auto", "target": "de"})
    assert into_de.json()["detectedLanguage"] == {"language": "en", "confidence": 50.0}
    into_en = post(server, json={"q": "Tom", "source": "auto", "target": "en"})
    assert into_en.json()["detectedLanguage"] == {"language": "de", "confidence": 50.0}


@pytest.mark.parametrize(
    "q",
    ['<p><a href="https://example.com/a">https://example.com/a</a></p>', "https://example.com/a"],
)
def test_auto_on_html_with_no_text_to_translate_names_the_route_of_its_language(server, q):
    """An HTML text whose only text is an address (copied as written) answered `model: "none
    (the text is in the target language)"` beside a `detectedLanguage` of the other language;
    it names the route from that language, as a plain text of an address alone does."""
    plain = post(server, json={"q": "https://example.com/a", "source": "auto", "target": "de"})
    assert plain.json()["detectedLanguage"]["language"] == "en"
    assert plain.json()["model"] == "en-de"
    for target, other in (("de", "en"), ("en", "de")):
        body = {"q": q, "source": "auto", "target": target, "format": "html"}
        r = post(server, json=body)
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == q
        assert r.json()["detectedLanguage"]["language"] == other
        assert r.json()["model"] == f"{other}-{target}"
        assert r.json()["models"] == [f"{other}-{target}"]
    # in a list beside a text in the target language, kept: its language's route alone
    body = {"q": [f"<p>{DE}</p>", q], "source": "auto", "target": "de", "format": "html"}
    r = post(server, json=body)
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == body["q"]
    assert [d["language"] for d in r.json()["detectedLanguage"]] == ["de", "en"]
    assert r.json()["model"] == "en-de"


def test_auto_on_one_text_reports_the_detected_language(server):
    r = post(server, data={"q": DE, "source": "auto", "target": "en"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["detectedLanguage"]["language"] == "de"
    assert body["detectedLanguage"]["confidence"] > 50.0
    assert body["translatedText"] == explicit(server, DE, "de", "en")
    assert body["model"] == "de-en"


def test_auto_with_alternatives_and_html_keeps_the_order(server):
    q = [f"<p>{DE}</p>", f"<b>{EN}</b>"]
    r = post(
        server, json={"q": q, "source": "auto", "target": "en", "format": "html", "alternatives": 1}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["translatedText"][1] == q[1]
    assert body["alternatives"][1] == []  # already in English: nothing else to offer
    assert body["translatedText"][0].startswith("<p>")


@pytest.mark.parametrize(("source", "target"), [("auto", "en"), ("Auto", "EN"), ("AUTO", "en-GB")])
def test_translate_file_with_auto_and_the_query_string(server, source, target):
    """(`source: "AUTO"` was taken for a language, and `target: "EN"` was a 400.)"""
    data = f"{DE}\n\n{EN}\n".encode()
    r = post(
        server,
        "/translate_file",
        params={"source": source, "target": target},
        files={"file": ("mixed.txt", data)},
    )
    assert r.status_code == 200, r.text
    got = httpx.get(r.json()["translatedFileUrl"]).content.decode()
    assert got == f"{explicit(server, DE, 'de', 'en')}\n\n{EN}\n"


def test_translate_file_with_auto_in_capitals_detects_the_document_as_a_whole(server):
    """A word alone ("Kind", German to the detector) takes its document's language with
    `source: "AUTO"` as with `auto` (each text was detected on its own: it came back as is)."""
    data = f"Kind\n\n{EN}\n".encode()
    files = {"file": ("short.txt", data)}
    r = post(server, "/translate_file", data={"source": "AUTO", "target": "DE"}, files=files)
    assert r.status_code == 200, r.text
    got = httpx.get(r.json()["translatedFileUrl"]).content.decode()
    assert got == f"{explicit(server, 'Kind', 'en', 'de')}\n\n{explicit(server, EN, 'en', 'de')}\n"


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"data": {"q": "Hello", "s": "Hallo", "source": "en", "target": "de"}}],
    ids=["empty", "form"],
)
def test_suggest_is_refused_as_libretranslate_refuses_it_when_disabled(server, kwargs):
    """/frontend/settings says `suggestions: false`; a client that suggests anyway gets
    LibreTranslate's answer for that (403), not a 404 that reads as a wrong server URL."""
    r = post(server, "/suggest", **kwargs)
    assert r.status_code == 403, r.text
    assert r.json() == {"error": "Suggestions are disabled on this server."}


def test_spec_is_the_openapi_schema_as_libretranslate_serves_its_own(server):
    r = httpx.get(f"{server}/spec")
    assert r.status_code == 200, r.text
    schema = httpx.get(f"{server}/openapi.json").json()
    # titled "LibreTranslate", as LibreTranslate's own: Dialect adds a server only if it is
    assert r.json()["info"]["title"] == "LibreTranslate"
    assert r.json()["info"]["description"].startswith("mt-serve 0.1.0: Machine translation")
    assert {**r.json(), "info": schema["info"]} == schema
    assert "/translate" in r.json()["paths"]
    # each counted under its own path ("/openapi.json" was "other", an unknown path's)
    metrics = httpx.get(f"{server}/metrics").text
    assert 'mt_requests_total{route="/openapi.json",status="200"}' in metrics
    assert 'mt_requests_total{route="/spec",status="200"}' in metrics
    assert httpx.options(f"{server}/openapi.json").headers["allow"] == "GET, HEAD, OPTIONS"


def test_the_schema_lists_the_errors_the_routes_answer(server):
    """Each error as it is sent (`{"error": ...}`); not FastAPI's 422, which is never sent (a
    request it cannot validate is a 400): a client generated from the schema typed errors
    from it."""
    spec = httpx.get(f"{server}/openapi.json").json()
    assert "422" not in json.dumps(spec) and "ValidationError" not in json.dumps(spec)

    def errors(path: str, method: str) -> set[str]:
        responses = spec["paths"][path][method]["responses"]
        return {code for code in responses if code >= "400"}

    assert errors("/translate", "post") == {
        "400", "403", "408", "413", "415", "429", "500", "503", "504"
    }  # fmt: skip
    assert errors("/detect", "post") == {"400", "403", "408", "413", "415", "429", "503"}
    assert errors("/download_file/{file_id}/{name}", "get") == {"404"}
    assert errors("/languages", "get") == {"503"}
    error = spec["paths"]["/translate"]["post"]["responses"]["429"]["content"]
    assert error["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorResponse"}
    assert spec["components"]["schemas"]["ErrorResponse"]["required"] == ["error"]
    # and a 404 for a file as the schema says it
    gone = httpx.get(f"{server}/download_file/nothing/x.txt")
    assert gone.status_code == 404 and set(gone.json()) == {"error"}


def test_the_schema_describes_the_answers_as_they_are_sent(server):
    """Each 200 the schema describes names the fields an answer has (a client generated from
    it lacked /translate's `models`, and /translate_file's and /frontend/settings' answers
    were untyped); a downloaded file is no JSON."""
    spec = httpx.get(f"{server}/openapi.json").json()
    schemas = spec["components"]["schemas"]

    def fields(path: str, method: str) -> set[str]:
        content = spec["paths"][path][method]["responses"]["200"]["content"]
        name = content["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        return set(schemas[name]["properties"])

    answer = post(server, json={"q": EN, "source": "en", "target": "de", "alternatives": 1})
    assert set(answer.json()) <= fields("/translate", "post")
    assert "models" in answer.json()
    settings = httpx.get(f"{server}/frontend/settings").json()
    assert set(settings) == fields("/frontend/settings", "get")
    assert fields("/frontend/settings", "post") == fields("/frontend/settings", "get")
    assert set(settings["language"]["source"]) == {"code", "name"}
    uploaded = httpx.post(
        f"{server}/translate_file",
        files={"file": ("a.txt", b"The cat.")},
        data={"source": "en", "target": "de"},
        timeout=60,
    )
    assert set(uploaded.json()) == fields("/translate_file", "post") == {"translatedFileUrl"}
    download = spec["paths"]["/download_file/{file_id}/{name}"]["get"]["responses"]["200"]
    assert list(download["content"]) == ["application/octet-stream"]


def test_detect_is_counted_under_its_own_path(server):
    assert post(server, "/detect", json={"q": EN}).status_code == 200
    metrics = httpx.get(f"{server}/metrics").text
    assert 'mt_requests_total{route="/detect",status="200"}' in metrics


FR = "Le temps est très beau aujourd'hui et nous allons au parc avec nos enfants."


def test_a_client_gone_from_texts_of_two_languages_is_one_cancelled_request(
    two_models, spm_model, tokenizer, tmp_path_factory
):
    """With `auto`, texts of two languages wait on two models at once; a client that goes away
    is one cancelled request, as it is one 499 (each model's share counted one)."""
    weights = tmp_path_factory.mktemp("three-languages")
    shutil.copytree(two_models / "en-de", weights / "en-de")
    save_checkpoint(
        weights / "fr-de",
        random_model(tiny_config(tokenizer.vocab_size), seed=2),
        source_tokenizer=spm_model,
        target_tokenizer=spm_model,
        source_language="fr",
        target_language="de",
    )
    with gated_server(weights, max_batch_size=1, max_wait_ms=0) as (url, _, engine):

        async def scenario():
            async with httpx.AsyncClient(timeout=60) as c:
                busy = await hold_the_engine(c, url, engine)
                body = {"q": [EN, FR], "source": "auto", "target": "de"}
                gone = asyncio.ensure_future(c.post(f"{url}/translate", json=body))
                await asyncio.to_thread(
                    wait_for, lambda: metric(url, "mt_queue_depth") >= 2, "both models' texts wait"
                )
                gone.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await gone
                await asyncio.to_thread(
                    wait_for,
                    lambda: metric(url, "mt_requests_total", GONE) == 1,
                    "the server has answered the client that went away",
                )
                engine.release()
                return await busy

        assert asyncio.run(scenario()).status_code == 200
        assert metric(url, "mt_cancelled_requests_total") == 1


GONE = 'route="/translate",status="499"'


def test_a_path_with_repeated_slashes_is_served_as_with_one(server):
    """A client that joins a base URL ending in '/' with '/translate' (LibreTranslate's Flask
    merges the slashes: its redirect is followed)."""
    r = httpx.post(f"{server}//translate", json=FIELDS, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == explicit(server, FIELDS["q"], "en", "de")
    assert httpx.get(f"{server}//languages").status_code == 200
    r = httpx.post(f"{server}///detect", data={"q": EN}, timeout=60)
    assert r.status_code == 200 and r.json()[0]["language"] == "en"
    assert 'route="//translate"' not in httpx.get(f"{server}/metrics").text


def test_a_post_to_a_path_with_a_trailing_slash_is_served_as_without(server):
    """It was redirected (307) to an absolute URL built from the connection's scheme (behind a
    proxy that ends TLS, http://, where the client would send its body and key again)."""
    r = httpx.post(f"{server}/translate/", json=FIELDS, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == explicit(server, FIELDS["q"], "en", "de")
    r = httpx.post(f"{server}/detect/", data={"q": EN}, timeout=60)
    assert r.status_code == 200 and r.json()[0]["language"] == "en"
    # a page is still redirected (its relative links are resolved from its URL)
    assert httpx.get(f"{server}/docs/").status_code == 307


@pytest.mark.parametrize("files", [1, 2], ids=["one-file", "two-files"])
@pytest.mark.parametrize("path", ["/translate", "/detect"])
def test_a_text_field_sent_as_a_file_is_a_400_that_says_so(server, path, files):
    """`curl -F q=@notes.txt` uploads the file; its text as a field is `-F q=<notes.txt` (the
    answer was "q: Field required", though q was sent; for two files, "the multipart body is
    malformed (Too many files. Maximum number of files is 1.)")."""
    r = post(
        server,
        path,
        data={"source": "en", "target": "de"},
        files=[("q", ("notes.txt", EN.encode(), "text/plain"))] * files,
    )
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert "`q` was sent as a file" in error and "q=<notes.txt" in error, error
    assert "/translate_file" in error


@pytest.mark.parametrize("field", ["source", "target"])
@pytest.mark.parametrize("how", ["json", "data"])
def test_an_empty_language_is_a_400_that_names_the_field(server, field, how):
    """A form's unset language field (LibreTranslate: "missing source parameter"); the answer
    was "no model translates '' to 'de'"."""
    r = post(server, **{how: {**FIELDS, field: ""}})
    assert r.status_code == 400, r.text
    assert f"`{field}` is empty" in r.json()["error"], r.text


@pytest.mark.parametrize("source", ["en", "auto"])
@pytest.mark.parametrize("path", ["/translate", "/translate_file"])
def test_a_target_of_auto_is_a_400_that_says_so(server, source, path):
    """`target: auto` was "no model translates 'en' to 'auto'" (or "no model translates to
    'auto'" with `source: auto`), as if a model were missing."""
    fields = {"source": source, "target": "Auto"}
    if path == "/translate":
        r = post(server, json={**fields, "q": "The cat is big."})
    else:
        r = post(server, path, data=fields, files={"file": ("a.txt", b"The cat is big.\n")})
    assert r.status_code == 400, r.text
    assert "`target` cannot be 'auto'" in r.json()["error"], r.text


@pytest.mark.parametrize("target, suffix", [("DE", "_de.txt"), ("de_at", "_de-AT.txt")])
def test_a_translated_file_is_named_with_the_language_tag_it_was_translated_into(
    server, target, suffix
):
    """The download was named after the target as sent (`short_DE.txt`, `short_de_at.txt`)."""
    files = {"file": ("short.txt", f"{EN}\n".encode())}
    r = post(server, "/translate_file", data={"source": "en", "target": target}, files=files)
    assert r.status_code == 200, r.text
    assert r.json()["translatedFileUrl"].endswith(f"/short{suffix}"), r.text


@pytest.mark.parametrize(
    ("path", "allow"),
    [
        ("/translate", "OPTIONS, POST"),
        ("/detect", "OPTIONS, POST"),
        ("/translate_file", "OPTIONS, POST"),
        ("/languages", "GET, HEAD, OPTIONS, POST"),  # POST as LibreTranslate before 1.3
        ("/frontend/settings", "GET, HEAD, OPTIONS, POST"),
    ],
)
def test_options_is_answered_with_the_methods_as_flask_answers_it(server, path, allow):
    """An OPTIONS that is not a CORS preflight (no Access-Control-Request-Method) was a 405;
    Flask answers it on every route with 200 and an `Allow` header. A 405 names them too."""
    options = 'route="options",status="200"'
    before = metric(server, "mt_requests_total", options)
    r = httpx.options(f"{server}{path}")
    assert r.status_code == 200, r.text
    assert r.headers["allow"] == allow and r.content == b""
    wrong = httpx.put(f"{server}{path}")
    assert wrong.status_code == 405 and wrong.headers["allow"] == allow
    assert httpx.options(f"{server}/nope").status_code == 404
    # counted apart: not as a request to the path
    assert metric(server, "mt_requests_total", options) == before + 1


@pytest.mark.parametrize(
    ("marked", "plain"),
    [
        ("Kin\u00adder\u00adgar\u00adten", "Kindergarten"),  # soft hyphens
        ("inf\u00ador\u00admat\u00adion", "information"),
        ("infor\u200bmation", "information"),  # a zero-width space
        ("Kinder\u200dgarten", "Kindergarten"),  # a zero-width joiner
        ("\ufeffin\u2060for\u2060ma\u2060tion", "information"),  # a byte order mark, word joiners
    ],
)
def test_invisible_characters_are_not_read_as_part_of_a_word(server, marked, plain):
    """A soft hyphen (U+00AD), a zero-width space or joiner inside a word cut it, for the
    language detector, into pieces of another language (Kindergarten with soft hyphens was 69%
    German, 96% without them; information with soft hyphens German): /detect and `source:
    "auto"` read the text as /translate sends it to the model, without them."""
    detect = post(server, "/detect", json={"q": marked})
    assert detect.status_code == 200, detect.text
    assert detect.json() == post(server, "/detect", json={"q": plain}).json()
    auto = post(server, json={"q": marked, "source": "auto", "target": "de"})
    assert auto.status_code == 200, auto.text
    expected = post(server, json={"q": plain, "source": "auto", "target": "de"}).json()
    assert auto.json()["detectedLanguage"] == expected["detectedLanguage"]


def test_a_text_of_invisible_characters_alone_has_no_language_to_detect(server):
    r = post(server, "/detect", json={"q": ["\u00ad\u200b", " "]})
    assert r.status_code == 400, r.text
    assert "`q` is empty" in r.json()["error"]


@pytest.mark.parametrize("q", ["\u200b\u200b", "\u00ad", " \u2060\ufeff "])
def test_a_text_of_invisible_characters_alone_is_empty_to_translate(server, q):
    """As a text of spaces is (it was translated, and answered as it came)."""
    r = post(server, json={"q": q, "source": "en", "target": "de"})
    assert r.status_code == 400, r.text
    assert r.json() == {"error": "`q` is empty: give the text to translate"}


def form_ways(fields: dict) -> list[dict]:
    """The ways to send `fields` other than JSON (post's keywords): urlencoded, multipart, a
    query string."""
    return [
        {"data": fields},
        {"files": {k: (None, v) for k, v in fields.items()}},
        {"params": fields},
    ]


def test_a_line_break_in_a_form_counts_one_character_as_in_libretranslate(two_models):
    """A browser's form sends a text area's line breaks as CRLF (so does multipart, RFC 2046);
    LibreTranslate reads them as LF, one character against its limit: they counted two, and
    a text the page counted within the limit was a 413."""
    lines = ["Erste Zeile.", "Zweite Zeile.", "Dritte Zeile."]
    sent, read = "\r\n".join(lines), "\n".join(lines)
    fields = {"q": sent, "source": "de", "target": "de"}
    with serve_in_thread(two_models, max_request_chars=len(read)) as (url, _):
        for kwargs in form_ways(fields):
            r = post(url, **kwargs)
            assert r.status_code == 200, r.text
            assert r.json()["translatedText"] == read
        r = post(url, "/detect", data={"q": sent})
        assert r.status_code == 200, r.text
        # JSON's texts are read as sent, as LibreTranslate reads them
        r = post(url, json=fields)
        assert r.status_code == 413, r.text
        assert f"{len(sent)} characters" in r.json()["error"]


def test_every_line_break_in_a_form_is_read_as_lf_as_in_libretranslate(two_models):
    """LibreTranslate reads a form's `q` by `str.splitlines`: a lone CR (an old Mac file's line
    break), a vertical tab, U+0085, U+2028 and U+2029 are line breaks, read as LF, one
    character each (they stayed as sent: a CR was no line break at all). A final line break is
    kept (LibreTranslate drops it), and JSON's texts are read as sent."""
    lines = ["Erste Zeile.", "Zweite Zeile.", "Dritte Zeile.", "Vierte.", "Fünfte.", "Ende."]
    sent = "\r".join(lines[:2]) + "\v" + "\x85".join(lines[2:4]) + "\u2028" + lines[4]
    sent += "\u2029" + lines[5] + "\r"
    read = "\n".join(lines) + "\n"
    fields = {"q": sent, "source": "de", "target": "de"}
    with serve_in_thread(two_models, max_request_chars=len(read)) as (url, _):
        for kwargs in [*form_ways(fields), {"data": {**fields, "q": ["A.\rB.", "C.\u2028"]}}]:
            r = post(url, **kwargs)
            assert r.status_code == 200, r.text
            got = r.json()["translatedText"]
            assert got == (read if isinstance(got, str) else ["A.\nB.", "C.\n"])
        r = post(url, json={**fields, "q": "Erste Zeile.\rZweite Zeile."})
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == "Erste Zeile.\rZweite Zeile."


def test_a_list_qs_texts_count_together_against_the_character_limit(two_models):
    """MT_MAX_REQUEST_CHARS bounds a list `q`'s texts together, where LibreTranslate's current
    release checks each alone against --char-limit: the 413 says they were counted together
    (it read as if one text were over the limit), on /translate and /detect alike."""
    texts = ["Erste Zeile.", "Zweite Zeile."]
    with serve_in_thread(two_models, max_request_chars=20) as (url, _):
        for path in ("/translate", "/detect"):
            body = {"q": texts, "source": "de", "target": "de"}
            for kwargs in ({"json": body}, {"data": body}):
                r = post(url, path, **kwargs)
                assert r.status_code == 413, r.text
                assert r.json()["error"] == (
                    "request (25 characters in `q`, its 2 texts together) exceeds character "
                    "limit (20 per request)"
                )
            r = post(url, path, json={**body, "q": "Eine viel zu lange Zeile."})
            assert r.status_code == 413, r.text
            assert r.json()["error"] == (
                "request (25 characters in `q`) exceeds character limit (20 per request)"
            )
        r = post(url, json={"q": texts[:1], "source": "de", "target": "de"})
        assert r.status_code == 200, r.text


def test_a_multipart_field_is_held_to_the_body_limit_alone(two_models):
    """With MT_MAX_BODY_BYTES and MT_MAX_REQUEST_CHARS raised, a text over 1 MiB is taken as
    multipart as it is as JSON or urlencoded (multipart refused it as "malformed (Part
    exceeded maximum size of 1024KB.)", Starlette's own limit); over the characters, a 413."""
    text = "Guten Morgen. " * 80_000  # 1,120,000 characters
    fields = {"q": text, "source": "de", "target": "de"}
    multipart = {"files": {k: (None, v) for k, v in fields.items()}}
    with serve_in_thread(two_models, max_body_bytes=3_000_000, max_request_chars=2_000_000) as (
        url,
        _,
    ):
        for kwargs in ({"json": fields}, {"data": fields}, multipart):
            r = post(url, "/detect", **kwargs)
            assert r.status_code == 200, r.text
            assert r.json()[0]["language"] == "de"
    with serve_in_thread(two_models, max_body_bytes=3_000_000) as (url, _):
        r = post(url, "/detect", **multipart)
        assert r.status_code == 413, r.text
        assert "characters in `q`" in r.json()["error"]
