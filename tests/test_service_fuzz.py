"""Property-based fuzzing of /translate on a real server: whatever a client sends, the answer is
never a 500, always JSON, and either a translation or an {"error": ...} with a 4xx status."""

from __future__ import annotations

import json
import shutil

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.service_helpers import serve_in_thread


@pytest.fixture(scope="module")
def url(random_checkpoint, tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-weights")
    shutil.copytree(random_checkpoint, d / "en-de")
    with serve_in_thread(d, max_request_chars=400, max_texts=8, max_output_length=24) as (base, _):
        yield base


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


def check(response: httpx.Response) -> None:
    assert response.status_code < 500 or (
        response.status_code == 503 and "Retry-After" in response.headers
    )
    body = response.json()
    if response.status_code == 200:
        assert "translatedText" in body
    else:
        assert response.status_code >= 400 and isinstance(body["error"], str) and body["error"]


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=bodies)
def test_json_bodies_never_cause_a_server_error(url, body):
    check(httpx.post(f"{url}/translate", json=body, timeout=60))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    raw=st.binary(max_size=200),
    ctype=st.sampled_from(
        [
            "application/json",
            "application/x-www-form-urlencoded",
            "text/plain",
            "multipart/form-data",
        ]
    ),
)
def test_raw_bodies_never_cause_a_server_error(url, raw, ctype):
    check(httpx.post(f"{url}/translate", content=raw, headers={"content-type": ctype}, timeout=60))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    form=st.dictionaries(
        st.sampled_from(["q", "source", "target", "alternatives", "beam_size", "format"]),
        st.text(max_size=30),
        max_size=6,
    )
)
def test_form_bodies_never_cause_a_server_error(url, form):
    check(httpx.post(f"{url}/translate", data=form, timeout=60))


def test_nested_json_is_refused_cleanly(url):
    r = httpx.post(
        f"{url}/translate",
        content=json.dumps({"q": [[["x"]]], "source": "en", "target": "de"}),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400
