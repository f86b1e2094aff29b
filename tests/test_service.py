"""The HTTP service against a real uvicorn server on a loopback port, with a real checkpoint
(a random tiny model with a real sentencepiece tokenizer) loaded from disk."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import re
import shutil
import threading
import time

import httpx
import pytest

from model_core.translator import resolve_device, resolve_dtype
from tests.service_helpers import serve_in_thread


@pytest.fixture(scope="module")
def weights_dir(random_checkpoint, tmp_path_factory):
    d = tmp_path_factory.mktemp("weights")
    shutil.copytree(random_checkpoint, d / "en-de")
    return d


@pytest.fixture(scope="module")
def server(weights_dir):
    with serve_in_thread(weights_dir, max_batch_size=16, max_wait_ms=20) as (url, app):
        yield url, app


def wait_for(condition, what: str, timeout: float = 60.0) -> None:
    """Until condition() holds; the timeout only bounds a test that fails."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


def post(url: str, **kw) -> httpx.Response:
    return httpx.post(f"{url}/translate", timeout=60, **kw)


def metric(url: str, name: str, labels: str | None = None) -> float:
    """The sum of a metric's series, or of the one series with exactly these `labels`
    (as exported, e.g. 'route="/health",status="200"')."""
    text = httpx.get(f"{url}/metrics").text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            head, value = line.rsplit(" ", 1)
            wanted = head == f"{name}{{{labels}}}" if labels is not None else head == name
            if wanted or (labels is None and head.startswith(name + "{")):
                total += float(value)
    return total


TEXTS = [
    "The cat.",
    "A big red car is very fast today.",
    "We eat bread.",
    "I see a small green tree.",
    "The dog is slow.",
    "Water.",
    "The house is very very big and the tree is small today.",
    "We run fast.",
]


def test_health_languages_models(server):
    url, _ = server
    health = httpx.get(f"{url}/health")
    assert health.status_code == 200
    assert health.json()["status"] == "ok" and health.json()["models"] == ["en-de"]
    assert httpx.get(f"{url}/health/live").status_code == 200
    assert httpx.get(f"{url}/health/ready").status_code == 200
    assert httpx.get(f"{url}/languages").json() == [
        {"code": "en", "name": "English", "targets": ["de"]}
    ]
    # POST too, as LibreTranslate took it before 1.3 and argos-translate's client still sends
    # it (with a form body)
    posted = httpx.post(f"{url}/languages", data={"api_key": ""})
    assert posted.status_code == 200 and posted.json() == httpx.get(f"{url}/languages").json()
    models = httpx.get(f"{url}/models").json()
    assert (
        models[0]["name"] == "en-de"
        and models[0]["device"] == str(resolve_device("auto"))  # the GPU where there is one
        and models[0]["parameters"] > 0
    )


@pytest.mark.parametrize("path", ["/health", "/languages", "/metrics", "/", "/frontend/settings"])
def test_head_is_answered_wherever_get_is(server, path):
    """The same status and headers as GET, and no body (RFC 9110); counted under its route."""
    server, _ = server
    before = metric(server, "mt_requests_total")
    head, get = httpx.head(f"{server}{path}"), httpx.get(f"{server}{path}")
    assert head.status_code == get.status_code == 200
    assert head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]
    if path != "/metrics":  # (the scrape's own length changes from one to the next)
        assert head.headers["content-length"] == get.headers["content-length"]
    assert metric(server, "mt_requests_total", f'route="{path}",status="200"') >= 2
    assert metric(server, "mt_requests_total") >= before + 2
    assert httpx.head(f"{server}/translate").status_code == 405  # POST only, as for GET


def test_json_and_form_bodies_agree(server):
    url, _ = server
    as_json = post(url, json={"q": "The cat is big.", "source": "en", "target": "de"})
    as_form = post(url, data={"q": "The cat is big.", "source": "en", "target": "de"})
    assert as_json.status_code == as_form.status_code == 200
    assert as_json.json()["translatedText"] == as_form.json()["translatedText"]
    assert isinstance(as_json.json()["translatedText"], str)


def test_timings_split_engine_time_from_the_rest(server):
    url, _ = server
    body = post(url, json={"q": TEXTS[:4], "source": "en", "target": "de"}).json()
    t = body["timings"]
    assert 0 < t["compute_ms"] <= t["queue_and_compute_ms"] <= t["total_ms"]


def test_list_q_returns_a_list_in_order(server):
    url, _ = server
    alone = [
        post(url, json={"q": t, "source": "en", "target": "de"}).json()["translatedText"]
        for t in TEXTS[:3]
    ]
    listed = post(url, json={"q": TEXTS[:3], "source": "en", "target": "de"}).json()[
        "translatedText"
    ]
    assert listed == alone


def test_alternatives_and_auto_source(server):
    url, _ = server
    r = post(url, json={"q": "The dog.", "source": "auto", "target": "de", "alternatives": 2})
    body = r.json()
    # at most as many as asked: two hypotheses that read the same are one alternative, as
    # LibreTranslate gives them
    assert r.status_code == 200 and 1 <= len(body["alternatives"]) <= 2
    assert body["translatedText"] not in body["alternatives"]
    assert body["detectedLanguage"]["language"] == "en"
    r = post(
        url, json={"q": ["The dog.", "A cat."], "source": "en", "target": "de", "alternatives": 1}
    )
    assert [len(a) for a in r.json()["alternatives"]] == [1, 1]


def test_multi_paragraph_text_keeps_its_layout(server):
    url, _ = server
    text = "  The cat is big. The dog is small!\n\nWe eat bread.\nI see a tree.  \n"
    out = post(url, json={"q": text, "source": "en", "target": "de", "beam_size": 1}).json()[
        "translatedText"
    ]
    assert out.startswith("  ") and out.endswith("  \n")
    assert out.count("\n") == text.count("\n") and "\n\n" in out
    # Each sentence is translated as it would be alone.
    parts = ["The cat is big.", "The dog is small!", "We eat bread.", "I see a tree."]
    alone = [
        post(url, json={"q": p, "source": "en", "target": "de", "beam_size": 1}).json()[
            "translatedText"
        ]
        for p in parts
    ]
    assert out == f"  {alone[0]} {alone[1]}\n\n{alone[2]}\n{alone[3]}  \n"


def test_a_sentence_longer_than_the_limit_is_split_not_truncated(weights_dir):
    with serve_in_thread(weights_dir, max_sentence_tokens=12) as (url, app):
        words = "the cat is big and the dog is small and we eat bread today very fast"
        r = post(url, json={"q": words, "source": "en", "target": "de", "beam_size": 1})
        assert r.status_code == 200
        seen = metric(url, "mt_sentences_total")
        assert seen >= 2  # one text became several pieces, all translated
        assert metric(url, "mt_input_tokens_total") >= len(words.split())


ERRORS = [
    ({"json": {"q": "", "source": "en", "target": "de"}}, 400, "empty"),
    ({"json": {"q": [], "source": "en", "target": "de"}}, 400, "empty list"),
    ({"json": {"q": 5, "source": "en", "target": "de"}}, 400, "q"),
    ({"json": {"source": "en", "target": "de"}}, 400, "q: Field required"),
    ({"json": {"q": "x", "source": "en", "target": "fr"}}, 400, "available pairs: en->de"),
    ({"json": {"q": "x", "source": "auto", "target": "fr"}}, 400, "available pairs"),
    ({"json": {"q": "x", "source": "en", "target": "de", "beam_size": 0}}, 400, "beam_size"),
    ({"json": {"q": "x", "source": "en", "target": "de", "beam_size": 99}}, 400, "between 1 and 8"),
    ({"json": {"q": "x", "source": "en", "target": "de", "beam_size": "wide"}}, 400, "beam_size"),
    ({"json": {"q": "x", "source": "en", "target": "de", "beam_size": True}}, 400, "true/false"),
    (
        {"json": {"q": "x", "source": "en", "target": "de", "alternatives": False}},
        400,
        "true/false",
    ),
    ({"json": {"q": "x", "source": "en", "target": "de", "format": "pdf"}}, 400, "format 'pdf'"),
    ({"json": {"q": "x", "source": "en", "target": "de", "alternatives": 50}}, 400, "alternatives"),
    ({"json": {"q": "x", "source": "en", "target": "de", "max_length": 10**6}}, 400, "max_length"),
    ({"json": {"q": "x" * 20_001, "source": "en", "target": "de"}}, 413, "characters"),
    (
        {
            "content": b'{"q": "a\\ud800b", "source": "en", "target": "de"}',
            "headers": {"content-type": "application/json"},
        },
        400,
        "`q` holds an unpaired UTF-16 surrogate",
    ),
    (
        {
            "content": b'{"q": ["ok", "\\udfff"], "source": "en", "target": "de"}',
            "headers": {"content-type": "application/json"},
        },
        400,
        "`q[1]` holds an unpaired UTF-16 surrogate",
    ),
    ({"json": {"q": ["x"] * 129, "source": "en", "target": "de"}}, 413, "texts"),
    (
        {"content": b"{not json", "headers": {"content-type": "application/json"}},
        400,
        "not valid JSON",
    ),
    ({"content": b"[1, 2]", "headers": {"content-type": "application/json"}}, 400, "JSON object"),
    (
        {
            "content": b"[" * 100_000 + b"]" * 100_000,
            "headers": {"content-type": "application/json"},
        },
        400,
        "nests too deeply",
    ),
    (
        {
            "content": b'{"q": ' + b"[" * 100_000 + b"]" * 100_000 + b', "source": "en"}',
            "headers": {"content-type": "application/json"},
        },
        400,
        "nests too deeply",
    ),
    (
        {"content": b"\xff\xfe", "headers": {"content-type": "application/json"}},
        400,
        "not valid JSON",
    ),
]


@pytest.mark.parametrize("kwargs, status, message", ERRORS)
def test_client_mistakes_get_a_clear_error(server, kwargs, status, message):
    url, _ = server
    r = post(url, **kwargs)
    assert r.status_code == status
    assert message in r.json()["error"]


# Requests that a form body can express too: a JSON body and a form body are read by different
# parsers (app/params.py); a client must not be able to tell them apart.
BOTH_FRONT_ENDS = [
    ({"q": "The cat is big.", "source": "en", "target": "de"}, 200),
    (
        {
            "q": "The cat. The dog.\n\nWe eat.",
            "source": "auto",
            "target": "de",
            "alternatives": "1",
        },
        200,
    ),
    ({"q": "The cat.", "source": "en", "target": "de", "beam_size": "1", "max_length": "5"}, 200),
    ({"q": "", "source": "en", "target": "de"}, 400),
    ({"q": "x", "source": "en", "target": "fr"}, 400),
    ({"q": "x", "source": "en", "target": "de", "beam_size": "99"}, 400),
    ({"q": "x", "source": "en", "target": "de", "beam_size": "wide"}, 400),
    ({"q": "x", "source": "en", "target": "de", "format": "pdf"}, 400),
    ({"source": "en", "target": "de"}, 400),
    ({"q": "x" * 20_001, "source": "en", "target": "de"}, 413),
]


@pytest.mark.parametrize("fields, status", BOTH_FRONT_ENDS)
def test_json_fast_path_and_form_route_answer_alike(server, fields, status):
    url, _ = server
    as_form = post(url, data=fields)
    typed = {
        k: int(v)
        if k in ("alternatives", "max_length") or (k == "beam_size" and v.isdigit())
        else v
        for k, v in fields.items()
    }
    as_json = post(url, json=typed)
    assert as_json.status_code == as_form.status_code == status
    assert as_json.headers["content-type"] == as_form.headers["content-type"] == "application/json"
    a, b = as_json.json(), as_form.json()
    if status == 200:
        a.pop("timings"), b.pop("timings")
    assert a == b


def test_an_unexpected_error_on_the_fast_path_is_a_json_500_with_an_error_id(weights_dir, caplog):
    with serve_in_thread(weights_dir) as (url, app):
        registry = app.state.engine.registry
        real = registry.route
        registry.route = lambda s, t: ["gone"]  # a server bug: a route to a model not served
        try:
            with caplog.at_level("ERROR"):
                r = post(url, json={"q": "The cat.", "source": "en", "target": "de"})
        finally:
            registry.route = real
        assert r.status_code == 500
        error_id = re.search(r"internal error \(error id ([0-9a-f]{12})\)", r.json()["error"])
        assert error_id and error_id.group(1) in caplog.text
        assert "Traceback" not in r.text
        assert requests_counted(url, "/translate", 500) == 1
        assert post(url, json={"q": "The cat.", "source": "en", "target": "de"}).status_code == 200


def test_a_middleware_added_to_the_app_sees_the_json_fast_path(weights_dir):
    seen = []

    class Tag:
        def __init__(self, app):
            self.app = app

        async def __call__(self, scope, receive, send):
            if scope["type"] != "http":  # lifespan
                return await self.app(scope, receive, send)
            seen.append(scope["path"])

            async def tagged(message):
                if message["type"] == "http.response.start":
                    message["headers"] = [*message.get("headers", []), (b"x-tag", b"seen")]
                await send(message)

            await self.app(scope, receive, tagged)

    with serve_in_thread(weights_dir, configure=lambda app: app.add_middleware(Tag)) as (url, _):
        body = {"q": "The cat.", "source": "en", "target": "de", "beam_size": 1}
        for r in (
            post(url, json=body),  # the fast path
            post(url, data=body),  # FastAPI's route
            httpx.post(f"{url}/detect", json={"q": "The cat."}),
            post(url, json={**body, "target": "xx"}),  # an error from the fast path
        ):
            assert r.headers.get("x-tag") == "seen", (r.status_code, r.text)
        assert seen.count("/translate") == 3 and "/detect" in seen


def test_a_body_over_the_byte_limit_is_refused_json_form_or_chunked(weights_dir):
    with serve_in_thread(weights_dir, max_body_bytes=2000) as (url, _):
        big = {"q": "The cat is big. " * 200, "source": "en", "target": "de"}
        as_json = post(url, json=big)
        as_form = post(url, data=big)

        def chunks():  # no Content-Length: the limit is found while reading
            yield b'{"q": "'
            for _ in range(100):
                yield b"The cat is big. " * 10
            yield b'", "source": "en", "target": "de"}'

        chunked = post(url, content=chunks(), headers={"content-type": "application/json"})
        for r in (as_json, as_form, chunked):
            assert r.status_code == 413 and "at most 2000" in r.json()["error"]
        assert "body is 3" in as_json.json()["error"]  # it says how large the body was
        small = {"q": "The cat is big.", "source": "en", "target": "de"}
        assert post(url, json=small).status_code == post(url, data=small).status_code == 200


def test_unknown_path_and_method_are_json_errors(server):
    url, _ = server
    r = httpx.get(f"{url}/nope")
    assert r.status_code == 404 and "no such path" in r.json()["error"]
    r = httpx.get(f"{url}/translate")
    assert r.status_code == 405 and "not allowed" in r.json()["error"]


async def test_concurrent_requests_equal_requests_sent_alone(server):
    url, _ = server
    texts = [TEXTS[i % len(TEXTS)] + (" We eat bread." * (i % 3)) for i in range(64)]
    async with httpx.AsyncClient(timeout=120) as client:
        alone = {}
        for t in sorted(set(texts)):
            r = await client.post(f"{url}/translate", json={"q": t, "source": "en", "target": "de"})
            alone[t] = r.json()["translatedText"]
        before = metric(url, "mt_batch_size_count"), metric(url, "mt_batch_size_sum")
        results = await asyncio.gather(
            *(
                client.post(f"{url}/translate", json={"q": t, "source": "en", "target": "de"})
                for t in texts
            )
        )
    assert all(r.status_code == 200 for r in results)
    assert [r.json()["translatedText"] for r in results] == [alone[t] for t in texts]
    batches = metric(url, "mt_batch_size_count") - before[0]
    sentences = metric(url, "mt_batch_size_sum") - before[1]
    assert sentences / batches > 1.0  # batches of more than one sentence


def test_a_requests_outcome_keeps_slow_failures_apart_from_quick_refusals():
    """504s and 500s are the slowest requests: counted as refused, beside the quick 429s and
    503s, they were dropped from the answered ones' quantiles with the refusals."""
    from app.metrics import outcome

    assert [outcome(s) for s in (200, 304, 400, 413, 429, 503, 499, 500, 504)] == [
        "answered", "answered", "refused", "refused", "refused", "refused", "cancelled",
        "failed", "failed",
    ]  # fmt: skip


def test_metrics_exposition(server):
    url, _ = server
    post(url, json={"q": "The cat.", "source": "en", "target": "de"})
    text = httpx.get(f"{url}/metrics").text
    for name in (
        "mt_requests_total",
        "mt_request_latency_seconds_bucket",
        "mt_queue_wait_seconds_bucket",
        "mt_queue_depth",
        "mt_in_flight_requests",
        "mt_batch_size_bucket",
        "mt_batch_padded_tokens_bucket",
        "mt_batch_compute_seconds_bucket",
        "mt_input_tokens_total",
        "mt_generated_tokens_total",
        "mt_model_info",
        "mt_ready 1.0",
    ):
        assert name in text, name
    assert re.search(r'mt_requests_total\{route="/translate",status="200"\} [1-9]', text)
    # an answer's latency apart from a refusal's, which pulled the quantiles down
    assert re.search(
        r'mt_request_latency_seconds_count\{outcome="answered",route="/translate"\} [1-9]', text
    )
    refused = 'mt_request_latency_seconds_count{outcome="refused",route="/translate"}'
    answered = 'mt_request_latency_seconds_count{outcome="answered",route="/translate"}'
    before = {name: metric(url, name) for name in (refused, answered)}
    assert post(url, json={"q": "The cat.", "source": "en", "target": "zz"}).status_code == 400
    text = httpx.get(f"{url}/metrics").text
    assert metric(url, refused) == before[refused] + 1
    assert metric(url, answered) == before[answered]
    # every reason's series from the start, at 0; no `_created` series
    for reason in ("queue_full", "draining", "loading", "files_full", "concurrency"):
        assert f'mt_rejected_requests_total{{reason="{reason}"}} 0.0' in text, reason
    assert 'mt_dropped_sentences_total{reason="deadline"} 0.0' in text
    assert 'mt_model_unloads_total{reason="memory_budget"} 0.0' in text
    assert "_created" not in text
    dtype = str(resolve_dtype("auto", resolve_device("auto"))).removeprefix("torch.")
    assert f'dtype="{dtype}"' in text  # float32 on a CPU, half precision on a GPU
    # the process's own, as a Python service is expected to have them: its resident memory
    # within a factor of two of what the kernel says (VmRSS), its CPU time counting
    import os

    rss = float(re.search(r"^process_resident_memory_bytes (\S+)$", text, re.M)[1])
    with open(f"/proc/{os.getpid()}/status") as status:  # (the server runs in this process)
        vm_rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))
    assert vm_rss / 2 < rss < vm_rss * 2
    assert float(re.search(r"^process_cpu_seconds_total (\S+)$", text, re.M)[1]) > 0
    assert re.search(r'^python_info\{implementation="CPython"', text, re.M)


def requests_counted(url: str, route: str, status: int) -> float:
    return metric(url, "mt_requests_total", f'route="{route}",status="{status}"')


def test_every_request_is_counted_once_by_route_and_status(server):
    """JSON bodies are answered in front of FastAPI and form bodies by its route: both counted
    once under /translate, like the requests FastAPI alone serves."""
    url, _ = server
    cases = [
        (
            "/translate",
            200,
            lambda: post(url, json={"q": "The cat.", "source": "en", "target": "de"}),
        ),
        (
            "/translate",
            200,
            lambda: post(url, data={"q": "The cat.", "source": "en", "target": "de"}),
        ),
        ("/translate", 400, lambda: post(url, json={"q": "", "source": "en", "target": "de"})),
        ("/translate", 400, lambda: post(url, data={"q": "", "source": "en", "target": "de"})),
        ("/health", 200, lambda: httpx.get(f"{url}/health")),
        ("other", 404, lambda: httpx.get(f"{url}/no-such-path")),
    ]
    for route, status, send in cases:
        before = requests_counted(url, route, status)
        assert send().status_code == status
        assert requests_counted(url, route, status) == before + 1, (route, status)


class SlowEngine:
    """Wraps the engine function: records what it computed, sleeps, can fail on a marker.
    With `gated`, every batch waits until the test opens the gate (`release`); `running` is
    set once a batch has started."""

    def __init__(self, fn, delay: float = 0.0, fail_beam: int | None = None, gated: bool = False):
        self.fn, self.delay, self.fail_beam = fn, delay, fail_beam
        self.calls: list[tuple[object, int]] = []
        self.running, self.gate = threading.Event(), threading.Event()
        if not gated:
            self.gate.set()

    def release(self) -> None:
        self.gate.set()

    def __call__(self, key, payloads):
        self.calls.append((key, len(payloads)))
        self.running.set()
        assert self.gate.wait(60)  # bounded only so that a failing test ends
        time.sleep(self.delay)
        if self.fail_beam is not None and key.beam_size == self.fail_beam:
            raise RuntimeError("injected fault")
        return self.fn(key, payloads)


@contextlib.contextmanager
def gated_server(weights_dir, **options):
    """A server (serve_in_thread with `options`) whose engine is a gated SlowEngine:
    yields (url, app, engine)."""
    with serve_in_thread(weights_dir, **options) as (url, app):
        engine = SlowEngine(app.state.batcher.fn, gated=True)
        app.state.batcher.fn = engine
        yield url, app, engine


async def hold_the_engine(
    client: httpx.AsyncClient, url: str, engine: SlowEngine
) -> asyncio.Future:
    """Posts a one-sentence request (beam 1) whose batch the gated `engine` holds until the test
    releases it; returns the future of its answer once that batch has started."""
    body = {"q": "The cat.", "source": "en", "target": "de", "beam_size": 1}
    busy = asyncio.ensure_future(client.post(f"{url}/translate", json=body))
    assert await asyncio.to_thread(engine.running.wait, 60)
    return busy


def test_the_thread_that_loaded_the_models_runs_every_batch(server):
    # torch keeps per-thread OpenMP teams: loading on one thread and computing on another made
    # every small operation slower, so loading, warm-up and batches share one thread
    url, app = server
    threads = set()
    inner = app.state.batcher.fn

    def recording(key, payloads):
        threads.add(threading.get_ident())
        return inner(key, payloads)

    app.state.batcher.fn = recording
    try:
        assert post(url, json={"q": TEXTS[:3], "source": "en", "target": "de"}).status_code == 200
    finally:
        app.state.batcher.fn = inner
    assert threads == {app.state.engine.loaded_on}
    assert app.state.engine.loaded_on != threading.main_thread().ident


def test_start_up_objects_are_left_out_of_full_garbage_collections(server):
    # a full pass over everything torch and the models created took ~0.1 s, mid-batch
    assert gc.get_freeze_count() > 1000


def test_fault_in_one_batch_fails_only_that_batch(weights_dir, caplog):
    with serve_in_thread(weights_dir, max_wait_ms=50) as (url, app):
        app.state.batcher.fn = SlowEngine(app.state.batcher.fn, fail_beam=3)

        async def burst():
            async with httpx.AsyncClient(timeout=60) as c:
                bad = c.post(
                    f"{url}/translate",
                    json={"q": "The cat.", "source": "en", "target": "de", "beam_size": 3},
                )
                good = [
                    c.post(
                        f"{url}/translate",
                        json={"q": t, "source": "en", "target": "de", "beam_size": 2},
                    )
                    for t in TEXTS
                ]
                return await asyncio.gather(bad, *good)

        with caplog.at_level("ERROR", logger="app.batcher"):
            bad, *good = asyncio.run(burst())
        assert bad.status_code == 500
        error_id = re.search(r"error id ([0-9a-f]{12})", bad.json()["error"]).group(1)
        assert error_id in caplog.text
        assert all(r.status_code == 200 for r in good)
        assert post(url, json={"q": "The cat.", "source": "en", "target": "de"}).status_code == 200
        assert metric(url, "mt_batch_failures_total") == 1


def test_overload_gets_only_200_and_503_and_recovers(weights_dir):
    with serve_in_thread(weights_dir, max_queue_size=6, max_batch_size=2, max_wait_ms=0) as (
        url,
        app,
    ):
        app.state.batcher.fn = SlowEngine(app.state.batcher.fn, delay=0.05)

        async def burst():
            async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=200)) as c:
                return await asyncio.gather(
                    *(
                        c.post(
                            f"{url}/translate",
                            json={"q": TEXTS[i % 8], "source": "en", "target": "de"},
                        )
                        for i in range(120)
                    )
                )

        results = asyncio.run(burst())
        codes = {r.status_code for r in results}
        assert codes <= {200, 503} and 503 in codes and 200 in codes
        for r in results:
            if r.status_code == 503:
                assert int(r.headers["Retry-After"]) >= 1 and "busy" in r.json()["error"]
        assert httpx.get(f"{url}/health").status_code == 200
        assert post(url, json={"q": "The cat.", "source": "en", "target": "de"}).status_code == 200
        assert metric(url, 'mt_rejected_requests_total{reason="queue_full"}') >= 1


def test_a_request_larger_than_the_whole_queue_is_413_not_503(weights_dir):
    # a 503 says "retry later", but this request could never be queued: the client must split it
    with serve_in_thread(weights_dir, max_queue_size=6, max_request_share=1.0) as (url, _):
        # seven different sentences (a sentence repeated in a request is decoded once)
        sentences = [f"The cat {i}." for i in range(7)]
        seven = {"q": " ".join(sentences), "source": "en", "target": "de", "beam_size": 1}
        r = post(url, json=seven)
        assert r.status_code == 413 and "Retry-After" not in r.headers
        assert "7 sentences" in r.json()["error"] and "at most 6" in r.json()["error"]
        as_list = {**seven, "q": sentences}
        assert post(url, json=as_list).status_code == post(url, data=as_list).status_code == 413
        six = {**seven, "q": " ".join(sentences[:6])}
        assert post(url, json=six).status_code == 200
        assert metric(url, 'mt_rejected_requests_total{reason="queue_full"}') == 0


@pytest.mark.parametrize("scheduler", ["static", "continuous"])
def test_one_request_takes_at_most_its_share_of_the_queue(weights_dir, scheduler):
    with serve_in_thread(
        weights_dir, max_queue_size=8, max_request_share=0.5, scheduler=scheduler
    ) as (url, _):
        five = {"q": [f"The cat {i}." for i in range(5)], "source": "en", "target": "de"}
        five["beam_size"] = 1
        r = post(url, json=five)
        assert r.status_code == 413 and "at most 4 from one request" in r.json()["error"]
        four = {**five, "q": ["The cat.", "We eat bread.", "I see a tree.", "The dog."]}
        r = post(url, json=four)
        assert r.status_code == 200 and len(r.json()["translatedText"]) == 4


def behind_a_held_batch(weights_dir, body: dict, **options) -> dict:
    """A server with one sentence per batch (and `options`) whose engine holds the first batch
    (beam 1): `body` is posted behind it, the queue depth read once it is answered, then the
    batch released and a one-sentence request (beam 1) sent. Returns both answers, that depth,
    the beam sizes the engine computed, and the metrics of what was dropped or refused."""
    with gated_server(weights_dir, max_batch_size=1, max_wait_ms=0, **options) as (
        url,
        _,
        engine,
    ):

        async def two():
            async with httpx.AsyncClient(timeout=60) as c:
                first = await hold_the_engine(c, url, engine)
                second = await c.post(f"{url}/translate", json=body)
                depth = metric(url, "mt_queue_depth")
                engine.release()
                return await first, second, depth

        first, second, depth = asyncio.run(two())
        water = {"q": "Water.", "source": "en", "target": "de", "beam_size": 1}
        after = post(url, json=water)
        return {
            "first": first,
            "second": second,
            "depth": depth,
            "after": after,
            "beams": [key.beam_size for key, _ in engine.calls],
            "timed_out": metric(url, "mt_timed_out_requests_total"),
            "dropped": metric(url, 'mt_dropped_sentences_total{reason="deadline"}'),
            "disconnected": metric(url, 'mt_dropped_sentences_total{reason="client_disconnected"}'),
            "queue_full": metric(url, 'mt_rejected_requests_total{reason="queue_full"}'),
        }


def deadline_behind_a_held_batch(weights_dir, body: dict) -> dict:
    """behind_a_held_batch with a 3 s deadline: the held batch runs past the deadlines (the
    last request, computed in milliseconds, has the rest of it on a loaded machine)."""
    return behind_a_held_batch(weights_dir, body, request_timeout_s=3)


def test_deadline_gives_504_and_abandoned_work_is_not_computed(weights_dir):
    got = deadline_behind_a_held_batch(
        weights_dir, {"q": "We eat bread.", "source": "en", "target": "de", "beam_size": 2}
    )
    assert got["first"].status_code == 504  # its own batch ran past the 3 s deadline
    second = got["second"]
    assert second.status_code == 504 and "did not finish" in second.json()["error"]
    # the worker takes its batches in order: once a later one is computed, the second's
    # would have been
    assert got["after"].status_code == 200
    assert got["beams"] == [1, 1]  # not the second's (2)
    assert got["timed_out"] == 2
    assert got["dropped"] == 1


def test_client_disconnect_drops_its_queued_sentences(weights_dir):
    with gated_server(weights_dir, max_batch_size=1, max_wait_ms=0) as (url, _, engine):

        async def scenario():
            async with httpx.AsyncClient(timeout=60) as c:
                busy = await hold_the_engine(c, url, engine)
                gone = asyncio.ensure_future(
                    c.post(
                        f"{url}/translate",
                        json={
                            "q": ["We eat bread.", "The dog."],
                            "source": "en",
                            "target": "de",
                            "beam_size": 2,
                        },
                    )
                )
                # once both of its sentences wait (the engine is held), the client goes away
                await asyncio.to_thread(
                    wait_for, lambda: metric(url, "mt_queue_depth") == 2, "both sentences wait"
                )
                gone.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await gone
                await asyncio.to_thread(
                    wait_for,
                    lambda: metric(url, "mt_cancelled_requests_total") == 1,
                    "the server has seen the client go",
                )
                engine.release()
                return await busy

        assert asyncio.run(scenario()).status_code == 200
        # the worker takes its batches in order: once a later one is computed, the dropped
        # ones would have been
        water = {"q": "Water.", "source": "en", "target": "de", "beam_size": 1}
        assert post(url, json=water).status_code == 200
        assert [key.beam_size for key, _ in engine.calls] == [1, 1]  # none of beam 2
        assert metric(url, "mt_cancelled_requests_total") == 1
        assert metric(url, 'mt_dropped_sentences_total{reason="client_disconnected"}') == 2


def test_int8_setting_serves_a_quantized_model(weights_dir):
    with serve_in_thread(weights_dir, quantize="int8", device="cpu") as (url, app):
        assert httpx.get(f"{url}/models").json()[0]["dtype"] == "int8"
        r = post(url, json={"q": "The cat is big.", "source": "en", "target": "de"})
        assert r.status_code == 200 and isinstance(r.json()["translatedText"], str)
        assert 'dtype="int8"' in httpx.get(f"{url}/metrics").text


@pytest.mark.parametrize("scheduler", ["static", "continuous"])
def test_a_shutdown_just_before_ready_stops_the_batcher(weights_dir, monkeypatch, scheduler):
    """A shutdown that comes while the service builds its language detection (its batcher
    already started, not yet in the service's state) stops the batcher and its worker thread:
    nothing is left running, and no warning says sentences were dropped."""
    import app.main as service
    from app.settings import Settings

    started, release = threading.Event(), threading.Event()
    detector = service.Detector

    def slow_detector(*args, **kwargs):
        started.set()
        assert release.wait(30)
        return detector(*args, **kwargs)

    monkeypatch.setattr(service, "Detector", slow_detector)
    batchers = recorded_batchers(monkeypatch, scheduler)
    app = service.create_app(Settings(weights_dir=weights_dir, scheduler=scheduler))

    async def scenario():
        async with app.router.lifespan_context(app):
            assert await asyncio.to_thread(started.wait, 60)
        release.set()

    with warnings_logged() as logged:
        asyncio.run(scenario())
    assert len(batchers) == 1 and app.state.batcher is None
    assert not batchers[0]._worker.thread.is_alive()
    assert not [r for r in logged if "dropped" in r.getMessage()]


@pytest.mark.parametrize("scheduler", ["static", "continuous"])
def test_a_language_detection_that_fails_to_build_stops_startup(
    weights_dir, monkeypatch, scheduler
):
    """Building the language detection raises (after the batcher started): start-up stops as
    when a model fails to load, `/health` says why, the log has one line with the traceback,
    mt-serve is asked to exit, and the batcher and its worker thread are stopped (they were
    left running, and the service said nothing: never ready, with no error)."""
    import app.main as service
    from app.settings import Settings

    exits = []

    def broken_detector(*args, **kwargs):
        raise RuntimeError("injected: the detection's tables are unreadable")

    monkeypatch.setattr(service, "Detector", broken_detector)
    batchers = recorded_batchers(monkeypatch, scheduler)
    app = service.create_app(Settings(weights_dir=weights_dir, scheduler=scheduler))
    app.state.request_exit = lambda: exits.append(True)

    async def scenario():
        async with app.router.lifespan_context(app):
            async with asyncio.timeout(60):
                while not exits:
                    await asyncio.sleep(0.01)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return await client.get("/health")

    with warnings_logged() as logged:
        health = asyncio.run(scenario())
    assert health.status_code == 503
    assert "the detection's tables are unreadable" in health.json()["error"]
    assert app.state.startup_error == "injected: the detection's tables are unreadable"
    lines = [r for r in logged if "startup failed" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is not None
    assert (
        "startup failed: RuntimeError while building the language detection: injected"
        in lines[0].getMessage()
    )
    assert len(batchers) == 1 and app.state.batcher is None
    assert not batchers[0]._worker.thread.is_alive()


def recorded_batchers(monkeypatch, scheduler: str) -> list:
    """The batchers the service starts from now on (of `scheduler`'s kind), in a list."""
    import app.main as service

    kind = service.ContinuousBatcher if scheduler == "continuous" else service.MicroBatcher
    batchers = []

    class Recorded(kind):
        async def start(self):
            batchers.append(self)
            await super().start()

    monkeypatch.setattr(service, kind.__name__, Recorded)
    return batchers


@contextlib.contextmanager
def warnings_logged():
    """The records of warnings and errors logged meanwhile."""
    import logging

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler, root = Keep(logging.WARNING), logging.getLogger()
    root.addHandler(handler)
    try:
        yield records
    finally:
        root.removeHandler(handler)


@pytest.mark.parametrize("fmt", ["text", "html"])
def test_emoji_come_back_as_written_in_their_places(server, fmt):
    """Whatever the model makes of the words (this one is untrained), each emoji comes back
    once, as sent, in order: a model of words read their bytes as the start of a word."""
    url, _ = server
    emoji = ["🍕", "👩\u200d👩\u200d👧", "🙏🏽", "🇩🇪"]
    q = "I love 🍕 and 👩\u200d👩\u200d👧. Thank you 🙏🏽! 🇩🇪 is big."
    if fmt == "html":
        q = f"<p>{q}</p>"
    r = post(url, json={"q": q, "source": "en", "target": "de", "format": fmt})
    assert r.status_code == 200, r.text
    out = r.json()["translatedText"]
    from app.formats.addresses import verbatim_spans

    text = re.sub(r"</?p>", "", out)  # (the HTML's own tags: no placeholders of a template)
    assert [text[a:b] for a, b in verbatim_spans(text)] == emoji, out
