"""Property-based fuzzing of /translate and /detect on a real server (with a keys database, so
that every `api_key` is looked up): whatever a client sends, in the body or the query string,
the answer is never a 500, always JSON, and either a result or an {"error": ...} with a 4xx
status.

Bodies are generated as bytes, not through a JSON library, so that they can hold what a client
may send and a library would refuse to write: numbers of thousands of digits, NaN and Infinity,
unpaired surrogates (escaped, or in UTF-8's form), control characters and NUL, nesting far past
the parser's limit, UTF-16; each is sent under every kind of content type (JSON, form,
multipart, text, none, bogus, with charset parameters). The number of examples is fixed and
every example is one request to a tiny model, so the whole file runs in seconds.
"""

from __future__ import annotations

import json
import shutil
from urllib.parse import quote_from_bytes

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.keys import KeyStore
from tests.service_helpers import serve_in_thread

BOUNDARY = "XyZ"
CONTENT_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=latin-1",
    "APPLICATION/JSON",
    "application/x-www-form-urlencoded",
    "application/x-www-form-urlencoded; charset=utf-16",
    f"multipart/form-data; boundary={BOUNDARY}",
    "multipart/form-data",
    "multipart/form-data; boundary=",
    "text/plain",
    "text/plain; charset=utf-16",
    None,  # no Content-Type header at all
    "",
    "bogus",
    "application/bogus+json; q=0.5",
    ";;;",
]
FIELDS = ["q", "source", "target", "format", "alternatives", "beam_size", "max_length", "api_key"]
FUZZ = settings(
    deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def url(random_checkpoint, tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-weights")
    shutil.copytree(random_checkpoint, d / "en-de")
    keys = tmp_path_factory.mktemp("fuzz-keys") / "keys.sqlite"
    KeyStore(keys).add("fuzz")
    with serve_in_thread(
        d, max_request_chars=400, max_texts=8, max_output_length=24, api_keys_db=keys
    ) as (base, _):
        yield base


@pytest.fixture(scope="module")
def client(url):
    """One client for every example (a new one per request costs more than the request)."""
    with httpx.Client(base_url=url, timeout=60) as c:
        yield c


def check(response: httpx.Response) -> None:
    assert response.status_code < 500 or (
        response.status_code == 503 and "Retry-After" in response.headers
    ), response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    if response.status_code == 200:
        if response.url.path == "/detect":
            assert all(set(d) == {"language", "confidence"} for d in body)
        else:
            assert "translatedText" in body
    else:
        assert response.status_code >= 400 and isinstance(body["error"], str) and body["error"]


def send(
    client: httpx.Client, raw: bytes, content_type: str | None, path: str = "/translate"
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    check(client.post(path, content=raw, headers=headers))


# --- pieces of text: surrogates, controls and NUL far more often than chance would pick them
odd_chars = st.sampled_from(
    ["\ud800", "\udbff", "\udc00", "\udfff", "\x00", "\x01", "\x1b", "\x7f", "\x85", "\u2028"]
    + ["\ufeff", "\ufffe", "\U0010ffff", "\u200b", "\r", "\n", "\t", '"', "\\", " ", "."]
)
# (a list joined, not st.text: st.text would merge the two alphabets and lose the weighting)
any_text = st.lists(st.one_of(st.characters(), odd_chars), max_size=40).map("".join)
sensible = {
    "q": st.sampled_from(['"The cat."', '["The dog.", "We eat."]', '"A. B! C?\\n\\nD"']),
    "source": st.sampled_from(['"en"', '"auto"', '"de"']),
    "target": st.sampled_from(['"de"', '"en"']),
    "format": st.just('"text"'),
    "alternatives": st.sampled_from(["0", "1", "3"]),
    "beam_size": st.sampled_from(["1", "2", "8", "null"]),
    "max_length": st.sampled_from(["1", "24", "null"]),
    "api_key": st.sampled_from(['""', '"key"', "null"]),
}

# --- JSON written by hand
json_numbers = st.one_of(
    st.integers().map(str),
    st.builds(
        lambda sign, digit, n: sign + digit * n,
        st.sampled_from(["", "-"]),
        st.sampled_from("19"),
        st.sampled_from([20, 400, 4300, 4301, 5000, 20_000]),
    ),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "1e308"]),
    st.sampled_from(["4.0", "2.5", "-0", "0e0", "1E2", "01", "+1", ".5", "0x10"]),
    st.floats().map(json.dumps),
)
json_strings = st.one_of(
    any_text.map(json.dumps),  # escaped: \ud800, \u0000
    any_text.map(lambda s: json.dumps(s, ensure_ascii=False)),  # raw: sent in UTF-8's form
)
deep_nesting = st.builds(
    lambda n, kind: kind[0] * n + kind[1] + kind[2] * n,
    st.sampled_from([2, 30, 999, 1001, 5000, 100_000]),
    st.sampled_from([("[", "", "]"), ('{"a":', "1", "}"), ("[", '"x"', "]")]),
)
json_scalars = st.one_of(json_numbers, json_strings, st.sampled_from(["true", "false", "null"]))
json_fragments = st.recursive(
    st.one_of(json_scalars, deep_nesting),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(json_strings, inner), max_size=3).map(
            lambda kvs: "{" + ",".join(f"{k}:{v}" for k, v in kvs) + "}"
        ),
    ),
    max_leaves=8,
)


COUNTS = {"alternatives", "beam_size", "max_length"}


def fuzzed(name: str) -> st.SearchStrategy[str]:
    """A wrong value for a field: mostly of the field's own kind (a number for a count, a
    string for a text), so that odd values of the right type are tried often."""
    own = json_numbers if name in COUNTS else json_strings
    return st.one_of(own, own, json_fragments)


@st.composite
def json_bodies(draw) -> bytes:
    members = []
    for name in FIELDS:
        choice = draw(st.sampled_from(["sensible", "sensible", "fuzzed", "absent"]))
        if choice != "absent":
            value = draw(sensible[name] if choice == "sensible" else fuzzed(name))
            members.append(f'"{name}":{value}')
    if draw(st.booleans()):  # a key no one asked for, or a field given twice
        members.append(f"{draw(json_strings)}:{draw(json_fragments)}")
    members = draw(st.permutations(members))
    text = "{" + ",".join(members) + "}"
    shape = draw(st.sampled_from(["object", "object", "object", "cut", "top-level value"]))
    if shape == "cut":
        text = text[: draw(st.integers(0, max(len(text) - 1, 0)))]
    elif shape == "top-level value":
        text = draw(json_fragments)
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-16", "utf-32"]))
    return text.encode(encoding, "surrogatepass")


@settings(FUZZ, max_examples=150)
@given(raw=json_bodies(), content_type=st.sampled_from(CONTENT_TYPES))
def test_hand_written_json_bodies_never_cause_a_server_error(client, raw, content_type):
    send(client, raw, content_type)


@settings(FUZZ, max_examples=60)
@given(raw=json_bodies())
def test_hand_written_json_bodies_as_json_never_cause_a_server_error(client, raw):
    send(client, raw, "application/json")


# --- form bodies: values as bytes, surrogates in UTF-8's form, huge digit strings
def utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


form_values = st.one_of(
    any_text.map(utf8),
    st.binary(max_size=20),
    st.sampled_from([b"9" * 5000, b"-" + b"9" * 5000, b"9" * 4000, b"1e400", b"nan", b"inf"]),
    st.sampled_from([b"The cat.", b"en", b"de", b"auto", b"text", b"1", b"0", b"8", b""]),
)
form_fields = st.lists(
    st.tuples(st.one_of(st.sampled_from(FIELDS), any_text).map(utf8), form_values), max_size=9
)


def urlencoded(fields: list[tuple[bytes, bytes]], escape: bool) -> bytes:
    quote = (lambda b: quote_from_bytes(b).encode()) if escape else (lambda b: b)
    return b"&".join(quote(k) + b"=" + quote(v) for k, v in fields)


def multipart(fields: list[tuple[bytes, bytes]]) -> bytes:
    parts = [
        b'--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n'
        % (BOUNDARY.encode(), k.replace(b'"', b"").replace(b"\r", b""), v)
        for k, v in fields
    ]
    return b"".join(parts) + b"--%s--\r\n" % BOUNDARY.encode()


@settings(FUZZ, max_examples=120)
@given(
    fields=form_fields,
    base=st.booleans(),
    how=st.sampled_from(["urlencoded", "urlencoded raw", "multipart"]),
    content_type=st.one_of(st.none(), st.sampled_from(CONTENT_TYPES)),
)
def test_form_bodies_never_cause_a_server_error(client, fields, base, how, content_type):
    if base:  # reach past the first check: a request that is valid but for the fuzzed fields
        fields = [(b"q", b"The cat."), (b"source", b"en"), (b"target", b"de"), *fields]
    if how == "multipart":
        raw, matching = multipart(fields), f"multipart/form-data; boundary={BOUNDARY}"
    else:
        raw, matching = urlencoded(fields, how == "urlencoded"), "application/x-www-form-urlencoded"
    send(client, raw, content_type or matching)  # None here: the content type that matches


@settings(FUZZ, max_examples=60)
@given(raw=st.binary(max_size=200), content_type=st.sampled_from(CONTENT_TYPES))
def test_raw_bodies_never_cause_a_server_error(client, raw, content_type):
    send(client, raw, content_type)


# --- bodies a JSON library writes: types and values a client may mix up
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)
bodies = st.fixed_dictionaries(
    {"q": st.one_of(texts, st.lists(texts, max_size=10), json_values)},
    optional={
        "source": st.one_of(st.sampled_from(["en", "de", "auto", "xx", ""]), json_values),
        "target": st.one_of(st.sampled_from(["de", "en", "fr"]), json_values),
        "format": st.one_of(st.sampled_from(["text", "html"]), json_values),
        "alternatives": st.one_of(st.integers(-3, 6), json_values),
        "beam_size": st.one_of(st.integers(-2, 12), json_values),
        "max_length": st.one_of(st.integers(-2, 40), json_values),
    },
)


@settings(FUZZ, max_examples=100)
@given(body=bodies)
def test_json_bodies_never_cause_a_server_error(client, body):
    check(client.post("/translate", json=body))


@settings(FUZZ, max_examples=40)
@given(
    form=st.dictionaries(
        st.sampled_from(["q", "source", "target", "alternatives", "beam_size", "format"]),
        st.text(max_size=30),
        max_size=6,
    )
)
def test_form_dictionaries_never_cause_a_server_error(client, form):
    check(client.post("/translate", data=form))


# --- /detect, and parameters in the query string (alone or with a body) on both endpoints
paths = st.sampled_from(["/translate", "/detect"])


@settings(FUZZ, max_examples=80)
@given(raw=json_bodies(), content_type=st.sampled_from(CONTENT_TYPES))
def test_detect_bodies_never_cause_a_server_error(client, raw, content_type):
    send(client, raw, content_type, "/detect")


@settings(FUZZ, max_examples=60)
@given(body=bodies)
def test_detect_json_bodies_never_cause_a_server_error(client, body):
    check(client.post("/detect", json=body))


@settings(FUZZ, max_examples=120)
@given(
    fields=form_fields,
    base=st.booleans(),
    escape=st.booleans(),
    body=st.one_of(st.just(b""), json_bodies()),
    content_type=st.one_of(st.none(), st.sampled_from(CONTENT_TYPES)),
    path=paths,
)
def test_query_strings_never_cause_a_server_error(
    client, fields, base, escape, body, content_type, path
):
    if base:
        fields = [(b"q", b"The cat."), (b"source", b"en"), (b"target", b"de"), *fields]
    # a URL holds printable ASCII only; with `escape` off, a "%" stays as it is, so that bad
    # escapes (%zz, %ff: not UTF-8) reach the server
    keep = b"%" if not escape else b""
    query = b"&".join(
        quote_from_bytes(k, safe=keep).encode() + b"=" + quote_from_bytes(v, safe=keep).encode()
        for k, v in fields
    )
    headers = {} if content_type is None else {"content-type": content_type}
    request = client.build_request("POST", path, content=body, headers=headers)
    request.url = request.url.copy_with(query=query)
    check(client.send(request))


def test_nested_json_is_refused_cleanly(client):
    r = client.post(
        "/translate",
        content=json.dumps({"q": [[["x"]]], "source": "en", "target": "de"}),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400
