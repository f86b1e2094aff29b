"""Many models on one server (app/registry.py): every directory listed before it loads, lazy
loading on first use, least-recently-used unloading beyond the memory budget, pivoting through
a third language, MT_MODELS selection, and the metrics. Real uvicorn servers, real checkpoints
(random weights) and a real sentencepiece model."""

from __future__ import annotations

import asyncio
import time
import types
from pathlib import Path

import httpx
import pytest
import torch

import app.translate
from app.batcher import Worker
from app.engine import load_translator
from app.registry import Registry, discover
from model_core.checkpoint import describe, weights_bytes
from model_core.translator import Translator
from tests.conftest import save_random_checkpoint
from tests.service_helpers import serve_in_process, serve_in_thread, wait_ready
from tests.test_service import (
    deadline_behind_a_held_batch,
    gated_server,
    hold_the_engine,
    metric,
    post,
    wait_for,
)
from tests.test_service_libre import DE, EN

PAIRS = [("en", "de"), ("de", "en"), ("en", "fr"), ("fr", "en")]
SENTENCE = "The big red car is very fast today."


@pytest.fixture(scope="module")
def weights_dir(spm_model, tmp_path_factory) -> Path:
    """Four directories: en-de, de-en, en-fr, fr-en, each a different random model."""
    d = tmp_path_factory.mktemp("many")
    for seed, (s, t) in enumerate(PAIRS):
        save_random_checkpoint(d / f"{s}-{t}", spm_model, s, t, seed=seed + 1)
    return d


def translate(url: str, source: str, target: str, text: str = SENTENCE, **kw) -> httpx.Response:
    return post(url, json={"q": text, "source": source, "target": target, "beam_size": 2, **kw})


def loaded(url: str) -> dict[str, bool]:
    return {m["name"]: m["loaded"] for m in httpx.get(f"{url}/models", timeout=30).json()}


def test_describe_reads_pairs_without_weights(weights_dir, tmp_path):
    assert describe(weights_dir / "de-en") == [("de", "en")]
    size = weights_bytes(weights_dir / "de-en")
    assert size == (weights_dir / "de-en" / "model.safetensors").stat().st_size > 0
    # the weights are not read: a directory whose weights are unreadable still describes itself
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_bytes((weights_dir / "de-en" / "config.json").read_bytes())
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    assert describe(broken) == [("de", "en")]


def test_lazy_load_on_first_request(weights_dir):
    with serve_in_thread(weights_dir, preload="none") as (url, _):
        assert loaded(url) == {"de-en": False, "en-de": False, "en-fr": False, "fr-en": False}
        models = httpx.get(f"{url}/models").json()
        assert all("parameters" not in m and m["weights_bytes"] > 0 for m in models)
        assert metric(url, "mt_model_loads_total") == 0
        r = translate(url, "en", "de")
        assert r.status_code == 200, r.text
        assert r.json()["models"] == ["en-de"] and r.json()["model"] == "en-de"
        assert loaded(url) == {"de-en": False, "en-de": True, "en-fr": False, "fr-en": False}
        entry = next(m for m in httpx.get(f"{url}/models").json() if m["name"] == "en-de")
        assert entry["parameters"] > 0 and entry["device"] == "cpu"
        assert metric(url, "mt_model_loads_total") == 1
        assert metric(url, "mt_models_loaded") == 1
        # the same answer as the checkpoint loaded by hand (beam 2, same length limits)
        direct = Translator.load(weights_dir / "en-de", device="cpu", dtype="float32")
        assert r.json()["translatedText"] == direct.translate_batch([SENTENCE], beam_size=2)[0].text

        # several requests at once for a model not loaded yet: one load, all answered alike
        async def many() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=60) as ac:
                body = {"q": SENTENCE, "source": "en", "target": "fr", "beam_size": 2}
                return await asyncio.gather(
                    *(ac.post(f"{url}/translate", json=body) for _ in range(6))
                )

        answers = asyncio.run(many())
        assert {a.status_code for a in answers} == {200}
        assert len({a.json()["translatedText"] for a in answers}) == 1
        assert metric(url, "mt_model_loads_total") == 2


def test_least_recently_used_model_is_unloaded_beyond_the_budget(weights_dir, caplog):
    size = weights_bytes(weights_dir / "en-de")
    with (
        caplog.at_level("INFO", logger="app.registry"),
        serve_in_thread(  # room for two models, not three
            weights_dir, preload="none", model_memory_budget_mb=2.5 * size / 1e6
        ) as (url, _),
    ):
        first = {}
        for s, t in [("en", "de"), ("de", "en")]:
            first[(s, t)] = translate(url, s, t).json()["translatedText"]
        assert loaded(url) == {"de-en": True, "en-de": True, "en-fr": False, "fr-en": False}
        translate(url, "en", "fr")  # en-de is the least recently used
        assert loaded(url) == {"de-en": True, "en-de": False, "en-fr": True, "fr-en": False}
        assert metric(url, "mt_model_unloads_total", 'reason="memory_budget"') == 1
        assert "unloaded en-de" in caplog.text and "memory budget: en-fr needed room" in caplog.text
        # reloaded on demand, with the same answer; de-en is now the least recently used
        assert translate(url, "en", "de").json()["translatedText"] == first[("en", "de")]
        assert loaded(url) == {"de-en": False, "en-de": True, "en-fr": True, "fr-en": False}
        assert metric(url, "mt_model_loads_total") == 4
        assert metric(url, "mt_model_unloads_total") == 2
        assert metric(url, "mt_models_loaded") == 2
        assert metric(url, "mt_models_loaded_bytes") == 2 * size
        assert metric(url, "mt_model_load_seconds_count") == 4


def test_a_model_in_use_is_never_unloaded(weights_dir):
    """While a request holds a model, loading others unloads the next least recently used one
    instead, even when the held one is the oldest."""
    size = weights_bytes(weights_dir / "en-de")

    async def scenario() -> list[list[str]]:
        worker = Worker()
        registry = Registry(
            discover(weights_dir),
            load=lambda p: load_translator(p, device="cpu", dtype="float32"),
            budget_bytes=int(2.5 * size),
        )
        registry.worker_run = worker.run
        states = []
        try:
            async with registry.hold("en-de") as held:
                async with registry.hold("de-en"):
                    pass
                async with registry.hold("en-fr"):  # room for two: de-en goes, not en-de
                    states.append(sorted(registry.loaded))
                async with registry.hold("fr-en"):  # en-fr goes
                    states.append(sorted(registry.loaded))
                assert registry.loaded["en-de"] is held
            async with registry.hold("de-en"):  # en-de is free again and the oldest
                states.append(sorted(registry.loaded))
        finally:
            worker.stop()
            await worker.join()
        return states

    assert asyncio.run(scenario()) == [
        ["en-de", "en-fr"],
        ["en-de", "fr-en"],
        ["de-en", "fr-en"],
    ]


def test_pivot_equals_translating_through_both_legs_by_hand(weights_dir):
    with serve_in_thread(weights_dir) as (url, _):
        languages = {x["code"]: x["targets"] for x in httpx.get(f"{url}/languages").json()}
        assert languages == {"de": ["en", "fr"], "en": ["de", "fr"], "fr": ["de", "en"]}
        texts = [SENTENCE, "I see a small green tree.\n\nWe eat bread. The dog is slow."]
        r = translate(url, "de", "fr", text=texts, alternatives=1)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["models"] == ["de-en", "en-fr"] and body["model"] == "de-en+en-fr"
        leg1 = translate(url, "de", "en", text=texts).json()
        leg2 = translate(url, "en", "fr", text=leg1["translatedText"], alternatives=1).json()
        assert body["translatedText"] == leg2["translatedText"]
        assert body["alternatives"] == leg2["alternatives"]
        direct = translate(url, "en", "fr", text=texts).json()["translatedText"]
        assert body["translatedText"] != direct  # the first leg did something
        # html: the markup is kept; the text pieces go through both legs
        pivoted = translate(url, "de", "fr", text="<p>The <b>cat</b> is big.</p>", format="html")
        out = pivoted.json()["translatedText"]
        assert pivoted.json()["models"] == ["de-en", "en-fr"]
        assert out.startswith("<p>") and out.endswith("</p>") and out.count("<b>") == 1
    with serve_in_thread(weights_dir, pivot_language="") as (url, _):
        r = translate(url, "de", "fr")
        assert r.status_code == 400 and "no model translates 'de' to 'fr'" in r.json()["error"]


def test_texts_in_two_languages_take_their_routes_at_once(weights_dir):
    """`source: auto` with an English and a German text into French: the English one through
    en-fr, the German one through the pivot (de-en, then en-fr), side by side; each as it is
    translated alone."""
    with serve_in_thread(weights_dir) as (url, _):
        r = translate(url, "auto", "fr", text=[EN, DE])
        assert r.status_code == 200, r.text
        body = r.json()
        assert [d["language"] for d in body["detectedLanguage"]] == ["en", "de"]
        assert body["models"] == ["en-fr", "de-en"] and body["model"] == "en-fr, de-en+en-fr"
        alone = [translate(url, "en", "fr", text=EN), translate(url, "de", "fr", text=DE)]
        assert body["translatedText"] == [a.json()["translatedText"] for a in alone]


ENGLISH = [
    EN,
    "My brother works in a big office in the centre of the city.",
    "We eat bread and cheese for breakfast every morning.",
]
GERMAN = [
    DE,
    "Mein Bruder arbeitet in einem großen Büro in der Mitte der Stadt.",
    "Wir essen jeden Morgen Brot und Käse zum Frühstück.",
]


@pytest.mark.parametrize("scheduler", ["static", "continuous"])
def test_a_request_over_several_models_takes_at_most_its_share_in_all(weights_dir, scheduler):
    """`source: auto` with texts in English and in German into French: the English ones go to
    en-fr, the German ones to de-en (then en-fr), side by side. The share of the queue (4
    here) bounds the request over both: each route was checked alone, so 3 + 3 sentences were
    queued at once."""
    with serve_in_thread(
        weights_dir, max_queue_size=8, max_request_share=0.5, scheduler=scheduler
    ) as (url, _):
        r = translate(url, "auto", "fr", text=ENGLISH + GERMAN)
        assert r.status_code == 413 and "Retry-After" not in r.headers, r.text
        error = r.json()["error"]
        assert "`q` holds 6 sentences whose texts go to 2 models side by side" in error, error
        assert "(en-fr: 3, de-en+en-fr: 3 pieces): 6 pieces in all" in error, error
        assert "at most 4 pieces from one request, over all its models" in error, error
        r = translate(url, "auto", "fr", text=ENGLISH[:2] + GERMAN[:2])
        assert r.status_code == 200, r.text
        assert [d["language"] for d in r.json()["detectedLanguage"]] == ["en"] * 2 + ["de"] * 2
        assert metric(url, 'mt_rejected_requests_total{reason="queue_full"}') == 0


def test_a_deadline_on_two_routes_is_one_504_and_neither_is_computed(weights_dir):
    two = {"q": [EN, DE], "source": "auto", "target": "fr", "beam_size": 2}
    got = deadline_behind_a_held_batch(weights_dir, two)  # both routes wait behind the held batch
    assert got["first"].status_code == 504
    late = got["second"]
    assert late.status_code == 504 and "did not finish" in late.json()["error"]
    assert got["after"].status_code == 200
    assert got["beams"] == [1, 1]  # the worker takes batches in order: the routes' were dropped
    # two requests timed out, however many routes of the second one ran out of time
    assert got["timed_out"] == 2


def test_the_deadline_of_a_request_through_the_pivot_covers_both_legs(weights_dir, monkeypatch):
    """MT_REQUEST_TIMEOUT_S is the request's deadline, not each leg's: once the first leg
    through the pivot language has taken it, the request is a 504 and the second leg is not
    computed (it had a deadline of its own: twice the time in all). The translate module's
    clock is moved on while the first leg is computed, as if it had taken the time."""
    ahead = [0.0]
    clock = types.SimpleNamespace(
        perf_counter=time.perf_counter, monotonic=lambda: time.monotonic() + ahead[0]
    )
    monkeypatch.setattr(app.translate, "time", clock)
    with serve_in_thread(weights_dir, request_timeout_s=30) as (url, served):
        inner, models = served.state.batcher.fn, []

        def engine(key, payloads):
            models.append(key.model)
            if key.model == "de-en":
                ahead[0] += 30
            return inner(key, payloads)

        served.state.batcher.fn = engine
        r = translate(url, "de", "fr")
        assert r.status_code == 504 and "did not finish within 30.0 s" in r.json()["error"]
        assert models == ["de-en"]
        assert metric(url, "mt_timed_out_requests_total") == 1
        r = translate(url, "de", "fr")  # (a deadline of its own: the first leg starts it)
        assert r.status_code == 504 and models == ["de-en"] * 2
        ahead[0] = 0.0
        served.state.batcher.fn = inner
        assert translate(url, "de", "fr").status_code == 200


def test_when_one_route_fails_the_other_routes_waiting_sentences_are_dropped(weights_dir):
    """`source: auto` with an English and a German text into French, while the engine holds
    a batch and one sentence of another request waits in a queue of two: one route's sentence
    queues, the other's finds the queue full. The answer is one 503, and the sentence that
    queued leaves the queue uncomputed, cancelled with its request (not counted as dropped
    for a client that went away): once the held batch ends, the engine computes only the
    request that waited."""
    two = {"q": [EN, DE], "source": "auto", "target": "fr", "beam_size": 2}
    water = {"q": "Water.", "source": "en", "target": "de", "beam_size": 1}
    options = {"max_queue_size": 2, "max_request_share": 1.0}
    with gated_server(weights_dir, max_batch_size=1, max_wait_ms=0, **options) as (
        url,
        _,
        engine,
    ):

        async def scenario():
            async with httpx.AsyncClient(timeout=60) as c:
                first = await hold_the_engine(c, url, engine)
                waiting = asyncio.ensure_future(c.post(f"{url}/translate", json=water))
                await asyncio.to_thread(
                    wait_for, lambda: metric(url, "mt_queue_depth") == 1, "a sentence waits"
                )
                second = await c.post(f"{url}/translate", json=two)
                depth = metric(url, "mt_queue_depth")
                engine.release()
                return await first, await waiting, second, depth

        first, waited, second, depth = asyncio.run(scenario())
        assert second.status_code == 503 and "busy" in second.json()["error"], second.text
        assert depth == 1  # the route's sentence that queued left with the answer
        disconnected = 'mt_dropped_sentences_total{reason="client_disconnected"}'
        assert metric(url, disconnected) == 0  # cancelled with its request: no client went away
        assert first.status_code == 200 and waited.status_code == 200
        assert [key.beam_size for key, _ in engine.calls] == [1, 1]  # not the routes' (2)
        assert metric(url, 'mt_rejected_requests_total{reason="queue_full"}') == 1


def test_unknown_pair_is_a_400_listing_the_available_pairs(weights_dir):
    with serve_in_thread(weights_dir, preload="none") as (url, _):
        r = translate(url, "fr", "xx")
        assert r.status_code == 400
        assert r.json()["error"] == (
            "'xx' is not supported: no model translates into it; available pairs: "
            "de->en, en->de, en->fr, fr->en"
        )
        assert not any(loaded(url).values())  # nothing was loaded for it


def test_mt_models_selects_what_is_served(weights_dir, tmp_path):
    with serve_in_thread(weights_dir, models="en-de, de-en") as (url, _):
        assert loaded(url) == {"en-de": True, "de-en": True}
        assert httpx.get(f"{url}/health").json()["models"] == ["de-en", "en-de"]
        assert [x["code"] for x in httpx.get(f"{url}/languages").json()] == ["de", "en"]
        r = translate(url, "en", "fr")
        assert r.status_code == 400 and "available pairs: de->en, en->de" in r.json()["error"]
    with serve_in_process(weights_dir, tmp_path / "log", models="en-de,nope") as (url, proc):
        assert proc.wait(timeout=120) == 1
    log = (tmp_path / "log").read_text()
    assert "MT_MODELS names nope, not a directory in" in log and "de-en, en-de" in log
    with serve_in_process(weights_dir, tmp_path / "log2", preload="fr-en,gone") as (url, proc):
        assert proc.wait(timeout=120) == 1
    assert "MT_PRELOAD names gone, not a served model" in (tmp_path / "log2").read_text()


def test_preload_stops_at_the_budget(weights_dir, caplog):
    size = weights_bytes(weights_dir / "en-de")
    with (
        caplog.at_level("WARNING"),
        serve_in_thread(weights_dir, model_memory_budget_mb=2.5 * size / 1e6) as (url, _),
    ):
        assert loaded(url) == {"de-en": True, "en-de": True, "en-fr": False, "fr-en": False}
        assert "en-fr left to load on first use" in caplog.text
        assert translate(url, "en", "fr").status_code == 200


def test_twenty_models_served_under_a_budget_release_their_memory(spm_model, tmp_path):
    """20 directories, a budget that holds 3 of them: every model answers as it did the first
    time it was asked, and the server's resident memory stays far below what 20 loaded models
    take (unloaded models give their memory back)."""
    weights = tmp_path / "w"
    config = dict(d_model=192, d_ff=768, encoder_layers=2, decoder_layers=2, tie_output=False)
    for i in range(20):
        save_random_checkpoint(weights / f"en-x{i:02d}", spm_model, "en", f"x{i:02d}", i, **config)
    size = weights_bytes(weights / "en-x00")
    budget_mb = 3.5 * size / 1e6
    with serve_in_process(
        weights,
        tmp_path / "log",
        preload="none",
        model_memory_budget_mb=budget_mb,
        threads=1,
        warmup="false",
    ) as (url, proc):
        wait_ready(url, timeout=120, process=proc)

        def rss() -> int:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
            raise AssertionError("no VmRSS")

        translate(url, "en", "x00")
        baseline = rss()  # one model loaded, torch and the server warmed up
        answers = {}
        peak = baseline
        for round_ in range(2):
            for i in range(20):
                r = translate(url, "en", f"x{i:02d}")
                assert r.status_code == 200, r.text
                text = r.json()["translatedText"]
                if round_ == 0:
                    answers[i] = text
                else:
                    assert text == answers[i], f"en-x{i:02d} answered differently after a reload"
                peak = max(peak, rss())
        assert len(set(answers.values())) > 10  # twenty different models, not one
        assert sum(loaded(url).values()) <= 3
        assert metric(url, "mt_model_unloads_total") >= 37
        grown = peak - baseline
        # 20 loaded models would take at least 20 x size; under the budget the growth stays
        # within a few models' worth
        assert grown < 8 * size, f"resident memory grew by {grown / 1e6:.1f} MB"
    log = (tmp_path / "log").read_text()
    assert "unloaded en-x00" in log and "memory budget" in log


def test_a_model_that_fails_to_load_on_first_use_is_a_clear_500(weights_dir, tmp_path, caplog):
    weights = tmp_path / "w"
    for name in ("en-de", "de-en"):
        (weights / name).mkdir(parents=True)
        for f in (weights_dir / name).iterdir():
            (weights / name / f.name).write_bytes(f.read_bytes())
    (weights / "de-en" / "model.safetensors").write_bytes(b"truncated")
    with caplog.at_level("ERROR"), serve_in_thread(weights, preload="none") as (url, _):
        assert [x["code"] for x in httpx.get(f"{url}/languages").json()] == ["de", "en"]
        r = translate(url, "de", "en")
        assert r.status_code == 500
        assert r.json()["error"] == (
            "the model 'de-en' could not be loaded; the server log has the details"
        )
        assert "unreadable safetensors file" in caplog.text and "Traceback" not in r.text
        assert translate(url, "en", "de").status_code == 200  # the others are still served
        assert loaded(url) == {"de-en": False, "en-de": True}


def registry_scenario(weights: Path, budget: int, scenario, **kw):
    """Runs `scenario(registry)` on an event loop with a real worker thread and real loads."""

    async def run():
        worker = Worker()
        registry = Registry(
            discover(weights),
            load=lambda p: load_translator(p, device="cpu", dtype="float32"),
            budget_bytes=budget,
            **kw,
        )
        registry.worker_run = worker.run
        try:
            return await scenario(registry)
        finally:
            worker.stop()
            await worker.join()

    return asyncio.run(run())


def test_models_loaded_past_the_budget_while_others_were_in_use_are_unloaded_after(weights_dir):
    """Requests for three models at once under a budget of one: each is loaded beside the
    others in use (none can go then), and once they have been idle for `idle_s` the server is
    back within the budget (it stayed past it until the next load)."""
    size = weights_bytes(weights_dir / "en-de")

    async def scenario(registry: Registry) -> tuple[list[str], list[str]]:
        async with registry.hold("en-de"), registry.hold("de-en"), registry.hold("en-fr"):
            during = sorted(registry.loaded)
        for _ in range(500):  # the trim runs on the worker thread once they are idle
            await asyncio.sleep(0.01)
            if registry.loaded_bytes() <= registry.budget_bytes:
                break
        return during, sorted(registry.loaded)

    during, after = registry_scenario(weights_dir, int(1.5 * size), scenario, idle_s=0.05)
    assert during == ["de-en", "en-de", "en-fr"]
    assert after == ["en-fr"]  # the most recently held one stays


def test_a_model_larger_than_the_budget_alone_stays_loaded_between_requests(weights_dir):
    """The trim back to the budget keeps the most recently used model: one larger than the
    budget is not unloaded (and loaded again) around each request."""
    size = weights_bytes(weights_dir / "en-de")
    loads: list[str] = []

    async def scenario(registry: Registry) -> list[str]:
        for _ in range(3):
            async with registry.hold("en-de"):
                pass
            await asyncio.sleep(0.1)  # past idle_s: a trim ran
            await registry.worker_run(lambda: None)
        return sorted(registry.loaded)

    kept = registry_scenario(
        weights_dir, size // 2, scenario, idle_s=0.02, on_load=lambda e, s: loads.append(e.name)
    )
    assert kept == ["en-de"] and loads == ["en-de"]


def test_a_model_that_failed_to_load_fails_again_without_unloading_others(weights_dir, tmp_path):
    """Its first load may have made room; a retry with its files unchanged fails at once and
    unloads nothing (each retry used to unload whatever was loaded); mended files load."""
    weights = tmp_path / "w"
    for name in ("en-de", "de-en"):
        (weights / name).mkdir(parents=True)
        for f in (weights_dir / name).iterdir():
            (weights / name / f.name).write_bytes(f.read_bytes())
    good = (weights / "de-en" / "model.safetensors").read_bytes()
    (weights / "de-en" / "model.safetensors").write_bytes(b"\0" * len(good))  # its size, broken
    size = weights_bytes(weights_dir / "en-de")

    async def scenario(registry: Registry) -> list:
        from app.registry import ModelLoadError

        seen = []
        for _ in range(2):
            async with registry.hold("en-de"):
                pass
            with pytest.raises(ModelLoadError):
                async with registry.hold("de-en"):
                    pass
            seen.append(sorted(registry.loaded))
        (weights / "de-en" / "model.safetensors").write_bytes(good)  # mended
        async with registry.hold("de-en"):
            seen.append(sorted(registry.loaded))
        return seen

    unloads: list[str] = []
    seen = registry_scenario(
        weights, int(1.5 * size), scenario, on_unload=lambda e, reason: unloads.append(e.name)
    )
    # the first try made room (en-de went), the retry after en-de came back did not
    assert seen == [[], ["en-de"], ["de-en"]]
    assert unloads == ["en-de", "en-de"]


def engine_scenario(weights: Path, scenario, load=None, **kw):
    """Runs `scenario(engine)` on an event loop with a real worker thread: the loads on first
    use are the engine's (each followed by its warm-up), as in the service."""
    import torch

    from app.engine import Engine

    async def run():
        worker = Worker()
        registry = Registry(
            discover(weights),
            load=load or (lambda p: load_translator(p, device="cpu", dtype="float32")),
            **kw,
        )
        registry.worker_run = worker.run
        # made on the worker thread, as start_engine is: each load must run there
        engine = await worker.run(
            lambda: Engine(registry, device=torch.device("cpu"), warmup_beams=(1,))
        )
        try:
            return await scenario(engine)
        finally:
            worker.stop()
            await worker.join()

    return asyncio.run(run())


def test_a_setting_that_does_not_fit_a_model_fails_its_first_use_once(weights_dir):
    """MT_QUANTIZE=int8 with a bfloat16 model, loaded on first use: the requests get the
    error of a model that could not be loaded, and the model is not loaded again for each
    request only to fail the same way (it was: a whole load per request)."""
    from app.registry import ModelLoadError

    loads: list[Path] = []

    def load(path: Path) -> Translator:
        loads.append(path)
        return load_translator(path, device="cpu", dtype="bfloat16", quantize="int8")

    async def scenario(engine) -> list[str]:
        errors = []
        for _ in range(3):
            with pytest.raises(ModelLoadError) as caught:
                async with engine.registry.hold("en-de"):
                    pass
            errors.append(str(caught.value))
        return errors

    errors = engine_scenario(weights_dir, scenario, load=load)
    assert errors == [errors[0]] * 3
    assert "MT_QUANTIZE=int8 for en-de" in errors[0] and "float32" in errors[0]
    assert len(loads) == 1


def test_int8_quantization_out_of_memory_is_tried_again_a_model_failure_is_not(
    weights_dir, monkeypatch
):
    """MT_QUANTIZE=int8 on first use: quantizing that ran out of memory is reported as such
    and the next request loads the model again (it was remembered as a setting that does not
    fit: every later request failed at once until a restart); a failure of the model's own
    layers is named as one and remembered."""
    import model_core.translator
    from app.registry import ModelLoadError, ModelOutOfMemory

    real = model_core.translator.quantize_linears
    failures = [
        RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes")
    ]
    loads: list[Path] = []

    def quantize(module):
        if failures:
            raise failures.pop(0)
        return real(module)

    def load(path: Path) -> Translator:
        loads.append(path)
        return load_translator(path, device="cpu", dtype="float32", quantize="int8")

    async def scenario(engine) -> tuple[str, bool, str, str]:
        monkeypatch.setattr(model_core.translator, "quantize_linears", quantize)
        with pytest.raises(ModelOutOfMemory) as caught:  # answered 503 with Retry-After
            async with engine.registry.hold("en-de"):
                pass
        async with engine.registry.hold("en-de") as translator:
            quantized = translator.quantized
        failures.append(RuntimeError("fbgemm: unsupported shape"))
        errors = []
        for _ in range(2):
            with pytest.raises(ModelLoadError) as broken:
                async with engine.registry.hold("de-en"):
                    pass
            errors.append(str(broken.value))
        return str(caught.value), quantized, *errors

    oom, quantized, broken, again = engine_scenario(weights_dir, scenario, load=load)
    assert "MT_QUANTIZE=int8 for en-de: out of memory while quantizing" in oom
    assert quantized
    assert broken == again
    assert "MT_QUANTIZE=int8 for de-en: quantizing the model failed: fbgemm" in broken
    assert [p.name for p in loads] == ["en-de", "en-de", "de-en"]


def test_a_model_whose_warm_up_fails_is_unloaded_and_loaded_again_next_time(
    weights_dir, monkeypatch
):
    """A warm-up that fails after a first-use load (on a GPU, out of memory: simulated here,
    as no GPU runs these tests) leaves no half-ready model behind: the requests get the
    error of a model that could not be loaded, the model is unloaded and its memory freed,
    and the next request loads it afresh."""
    import gc
    import weakref

    import app.engine
    from app.registry import ModelLoadError, ModelOutOfMemory

    real_warm_up = app.engine.warm_up
    held: list[weakref.ref] = []

    def failing_warm_up(translator, *args, **kwargs):
        held.append(weakref.ref(translator))
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    unloads: list[tuple[str, str]] = []

    async def scenario(engine) -> tuple[str, list[str], bool, list[str]]:
        monkeypatch.setattr(app.engine, "warm_up", failing_warm_up)
        with pytest.raises(ModelLoadError) as caught:
            async with engine.registry.hold("en-de"):
                pass
        after_failure = sorted(engine.registry.loaded)
        gc.collect()
        freed = held[0]() is None
        monkeypatch.setattr(app.engine, "warm_up", real_warm_up)
        async with engine.registry.hold("en-de") as translator:
            assert translator is engine.registry.entries["en-de"].translator
        assert caught.type is ModelOutOfMemory  # answered 503 with Retry-After
        return str(caught.value), after_failure, freed, sorted(engine.registry.loaded)

    error, after_failure, freed, after_retry = engine_scenario(
        weights_dir, scenario, on_unload=lambda e, reason: unloads.append((e.name, reason))
    )
    assert error == (
        "en-de: the warm-up after its load failed: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    assert after_failure == [] and freed, "the unwarmed model stayed in memory"
    assert unloads == [("en-de", "warm_up_failed")]
    assert after_retry == ["en-de"]


@pytest.mark.parametrize(
    "failure",
    [
        RuntimeError(
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate 268435456 bytes. "
            "Error code 12 (Cannot allocate memory)"
        ),
        MemoryError(),
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    ],
    ids=["cpu", "python", "cuda"],
)
def test_a_first_use_load_out_of_memory_is_a_503_and_the_next_request_loads_it(
    weights_dir, monkeypatch, caplog, failure
):
    """A model that runs out of memory while it loads for its first request: that request
    gets 503 with Retry-After and says so (it got a 500 'internal error'), the log says it
    once, and the next request loads the model. The allocation failure is mocked (the model's
    parameters cannot be made to run out of memory here)."""
    import model_core.checkpoint

    real = model_core.checkpoint.Transformer
    failures = [failure]

    def transformer(cfg):
        if failures:
            raise failures.pop()
        return real(cfg)

    monkeypatch.setattr(model_core.checkpoint, "Transformer", transformer)
    with serve_in_thread(weights_dir, preload="none", retry_after_s=3) as (url, _):
        r = translate(url, "en", "de")
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "3"
        assert r.json()["error"] == (
            "the server ran out of memory loading the model 'en-de'; retry after the "
            "Retry-After delay"
        )
        assert loaded(url)["en-de"] is False
        logged = [rec for rec in caplog.records if "out of memory while loading" in rec.message]
        assert [(rec.levelname, rec.exc_info) for rec in logged] == [("ERROR", None)]
        assert logged[0].message.startswith("en-de: out of memory while loading: ")
        assert metric(url, "mt_rejected_requests_total", 'reason="out_of_memory"') == 1
        r = translate(url, "en", "de")
        assert r.status_code == 200, r.text
        assert loaded(url)["en-de"] is True


def test_preload_loads_each_named_model_once_and_all_only_those_that_serve(weights_dir, tmp_path):
    size = weights_bytes(weights_dir / "en-de")
    with serve_in_thread(  # room for two: a name given twice does not count twice
        weights_dir, preload="en-de,en-de,de-en", model_memory_budget_mb=2.5 * size / 1e6
    ) as (url, _):
        assert loaded(url) == {"de-en": True, "en-de": True, "en-fr": False, "fr-en": False}
    shadow = tmp_path / "w"
    for name in ("a-en-de", "b-en-de"):  # b serves no pair: a serves en->de
        (shadow / name).mkdir(parents=True)
        for f in (weights_dir / "en-de").iterdir():
            (shadow / name / f.name).write_bytes(f.read_bytes())
    with serve_in_thread(shadow, preload="all") as (url, _):
        assert loaded(url) == {"a-en-de": True, "b-en-de": False}


def test_a_model_loaded_on_first_use_is_warmed_up_like_one_preloaded(weights_dir, monkeypatch):
    import app.engine

    warmed: list[str] = []
    real = app.engine.warm_up

    def counting(translator, *args, **kwargs):
        warmed.append(translator.checkpoint.path.name)
        return real(translator, *args, **kwargs)

    monkeypatch.setattr(app.engine, "warm_up", counting)
    with serve_in_thread(weights_dir, preload="en-de") as (url, _):
        assert warmed == ["en-de"]
        assert translate(url, "de", "en").status_code == 200
        assert warmed == ["en-de", "de-en"]  # (it was not warmed up)


def fail_first(monkeypatch, stage: str) -> None:
    """The first model's load (its weights allocated) or warm-up runs out of memory, mocked:
    a model's parameters cannot be made to run out of memory here."""
    import app.engine
    import model_core.checkpoint

    failures = [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")]
    if stage == "load":
        real = model_core.checkpoint.Transformer

        def transformer(cfg):
            if failures:
                raise failures.pop()
            return real(cfg)

        monkeypatch.setattr(model_core.checkpoint, "Transformer", transformer)
    else:
        real_warm_up = app.engine.warm_up

        def warm_up(translator, *args, **kwargs):
            if failures:
                raise failures.pop()
            return real_warm_up(translator, *args, **kwargs)

        monkeypatch.setattr(app.engine, "warm_up", warm_up)


@pytest.mark.parametrize("stage", ["load", "warm-up"])
def test_out_of_memory_at_start_up_leaves_the_model_to_its_first_use_when_skipping(
    weights_dir, monkeypatch, caplog, stage
):
    """MT_PRELOAD with MT_SKIP_BAD_CHECKPOINTS: a model that runs out of memory while it loads
    or warms up at start-up is logged, listed in /health as not loaded and loaded by its first
    request, and the others are served (it stopped the server, the setting notwithstanding)."""
    fail_first(monkeypatch, stage)
    with (
        caplog.at_level("WARNING"),
        serve_in_thread(weights_dir, preload="all", skip_bad_checkpoints=True) as (url, _),
    ):
        health = httpx.get(f"{url}/health", timeout=30).json()
        assert health["models"] == ["de-en", "en-de", "en-fr", "fr-en"]
        assert health["loaded_models"] == ["en-de", "en-fr", "fr-en"]
        logged = [r for r in caplog.records if r.message.startswith("MT_PRELOAD: de-en: ")]
        assert [(r.levelname, r.exc_info) for r in logged] == [("WARNING", None)]
        stage_words = "loading" if stage == "load" else "warming up after its load"
        assert f"de-en: out of memory while {stage_words}: CUDA out of memory" in logged[0].message
        assert logged[0].message.endswith("; de-en left to load on first use")
        assert translate(url, "en", "de").status_code == 200
        assert translate(url, "de", "en").status_code == 200
        assert loaded(url)["de-en"] is True


@pytest.mark.parametrize("stage", ["load", "warm-up"])
def test_out_of_memory_at_start_up_stops_it_in_one_line_without_skipping(
    weights_dir, monkeypatch, stage
):
    """Without MT_SKIP_BAD_CHECKPOINTS, out of memory at start-up stops it with the model and
    the failure named (a warm-up's was an unforeseen error, logged with its traceback)."""
    from app.engine import StartupError, start_engine
    from app.settings import Settings

    fail_first(monkeypatch, stage)
    with pytest.raises(StartupError) as caught:
        start_engine(Settings(weights_dir=weights_dir, preload="all"), None)
    stage_words = "loading" if stage == "load" else "warming up after its load"
    assert str(caught.value) == (
        f"de-en: out of memory while {stage_words}: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
