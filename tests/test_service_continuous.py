"""The service with MT_SCHEDULER=continuous, through a real server: the same answers as the
static batcher, and deadlines and disconnects that take a sentence out of a running decode."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import threading

import httpx
import pytest
import torch

from tests.conftest import save_random_checkpoint
from tests.service_helpers import serve_in_thread
from tests.test_fused import needs_kernel
from tests.test_service import metric, post, weights_dir  # noqa: F401 (fixture)

REQUESTS = [
    {"q": "The cat is big. We eat bread today.", "beam_size": 1},
    {"q": ["I see a tree.", "The red car is fast."], "beam_size": 4, "alternatives": 2},
    {"q": "We run.", "beam_size": 4, "max_length": 5},
    {"q": "The small dog is very slow.", "beam_size": 2},
    {"q": ["Water.", "A green house.", "I eat."], "beam_size": 1, "max_length": 3},
]


async def translate_all(url: str) -> list[dict]:
    async with httpx.AsyncClient(timeout=120) as c:
        answers = await asyncio.gather(
            *(
                c.post(f"{url}/translate", json={**r, "source": "en", "target": "de"})
                for r in REQUESTS * 3
            )
        )
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    return [
        {k: a.json()[k] for k in ("translatedText", "alternatives") if k in a.json()}
        for a in answers
    ]


def test_continuous_and_static_answer_alike(weights_dir):  # noqa: F811
    answers = {}
    for scheduler in ("static", "continuous"):
        with serve_in_thread(weights_dir, scheduler=scheduler, max_batch_size=8) as (url, _):
            answers[scheduler] = asyncio.run(translate_all(url))
            if scheduler == "continuous":
                assert metric(url, "mt_batch_size_count") > 0  # one per decoder step
                assert metric(url, "mt_running_sentences") == 0
                assert metric(url, "mt_queue_depth") == 0
    assert answers["continuous"] == answers["static"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_a_gpu_cuda_graphs_answer_as_the_continuous_decode_without(weights_dir):  # noqa: F811
    """MT_CUDA_GRAPHS end to end on a GPU: the same answers as the continuous scheduler
    without it (float32: half precision may round the full buffers' attention differently)."""
    answers = {}
    for graphs in (False, True):
        with serve_in_thread(
            weights_dir, scheduler="continuous", dtype="float32", cuda_graphs=graphs
        ) as (url, app):
            assert app.state.engine.fixed == graphs
            answers[graphs] = asyncio.run(translate_all(url))
            assert metric(url, "mt_running_sentences") == 0
    assert answers[True] == answers[False]


class Gate:
    """Wraps the engine's running groups: records joins and leaves, and holds every step until
    `open` is set."""

    def __init__(self, open_group):
        self.open_group = open_group
        self.open = threading.Event()
        self.joined: list[int] = []
        self.left: list[int] = []
        self.stepped = threading.Event()

    def __call__(self, group):
        inner, gate = self.open_group(group), self

        class Held:
            def join(self, entries):
                gate.joined.extend(sid for sid, _, _ in entries)
                inner.join(entries)

            def leave(self, ids):
                gate.left.extend(ids)
                inner.leave(ids)

            partial_steps = property(lambda self: inner.partial_steps)

            def step(self, only=None):
                gate.stepped.set()
                assert gate.open.wait(30)
                return inner.step(only)

        return Held()


@pytest.mark.parametrize("way", ["deadline", "disconnect"])
def test_a_request_that_ends_early_leaves_the_running_decode(weights_dir, way):  # noqa: F811
    timeout = 3 if way == "deadline" else 60  # the gate holds the step past it
    with serve_in_thread(weights_dir, scheduler="continuous", request_timeout_s=timeout) as (
        url,
        app,
    ):
        gate = Gate(app.state.batcher.open_group)
        app.state.batcher.open_group = gate
        body = {"q": ["The cat.", "We eat bread."], "source": "en", "target": "de"}

        async def scenario():
            async with httpx.AsyncClient(timeout=60) as c:
                request = asyncio.ensure_future(c.post(f"{url}/translate", json=body))
                assert await asyncio.to_thread(gate.stepped.wait, 30)  # both are running
                if way == "disconnect":
                    request.cancel()  # the client goes away
                    with pytest.raises(asyncio.CancelledError):
                        await request
                    return None
                return await request

        answer = asyncio.run(scenario())
        if way == "deadline":
            assert answer.status_code == 504
        with_timeout = asyncio.run(asyncio.wait_for(_until(lambda: metric(url, _dropped(way))), 30))
        assert with_timeout == 2
        gate.open.set()  # the held step ends; the two leave before the next
        asyncio.run(asyncio.wait_for(_until(lambda: len(gate.left) >= 2), 30))
        assert sorted(gate.left) == sorted(gate.joined) and len(gate.joined) == 2
        assert post(url, json={**body, "q": "The dog."}).status_code == 200  # still serving
        assert metric(url, "mt_running_sentences") == 0


def test_a_request_whose_encoder_fails_fails_alone_beside_a_running_one(weights_dir):  # noqa: F811
    """A newcomer whose encoder fails as it joins (out of memory, say) gets a 500 with an error
    id; the request already decoding is answered as it would have been without it."""
    with serve_in_thread(weights_dir, scheduler="continuous") as (url, app):
        gate = Gate(app.state.batcher.open_group)
        app.state.batcher.open_group = gate
        model = app.state.engine.translator("en-de").model
        body = {"q": "The small dog is very slow.", "source": "en", "target": "de"}

        def out_of_memory(*args, **kwargs):
            raise RuntimeError("out of memory (injected)")

        async def scenario():
            async with httpx.AsyncClient(timeout=60) as c:
                running = asyncio.ensure_future(c.post(f"{url}/translate", json=body))
                assert await asyncio.to_thread(gate.stepped.wait, 30)  # its first step, held
                model.encode_tokens = out_of_memory  # the next join's encoder fails
                newcomer = asyncio.ensure_future(
                    c.post(f"{url}/translate", json={**body, "q": "We eat bread."})
                )
                await asyncio.wait_for(_until(lambda: metric(url, "mt_queue_depth")), 30)
                gate.open.set()
                return await running, await newcomer

        running, newcomer = asyncio.run(scenario())
        del model.encode_tokens  # the model's own again
        assert newcomer.status_code == 500 and "error id" in newcomer.text
        assert running.status_code == 200
        assert running.json()["translatedText"] == post(url, json=body).json()["translatedText"]
        assert metric(url, "mt_running_sentences") == 0


def test_of_newcomers_joining_together_only_the_one_too_large_fails(weights_dir):  # noqa: F811
    """Newcomers whose join together fails (their encoder out of memory) each try alone: the
    one that still fails gets a 500, the other is answered as it would have been."""
    with serve_in_thread(weights_dir, scheduler="continuous") as (url, app):
        gate = Gate(app.state.batcher.open_group)
        app.state.batcher.open_group = gate
        model = app.state.engine.translator("en-de").model
        encode = model.encode_tokens
        small = {"q": "The cat.", "source": "en", "target": "de"}
        large = {**small, "q": "We eat bread and the small dog is very slow today."}

        def out_of_memory_when_long(src, mask):  # a source this long does not fit
            if src.shape[1] > 8:
                raise RuntimeError("out of memory (injected)")
            return encode(src, mask)

        async def scenario():
            async with httpx.AsyncClient(timeout=60) as c:
                running = asyncio.ensure_future(c.post(f"{url}/translate", json=small))
                assert await asyncio.to_thread(gate.stepped.wait, 30)  # its first step, held
                model.encode_tokens = out_of_memory_when_long
                both = [
                    asyncio.ensure_future(c.post(f"{url}/translate", json=b))
                    for b in (small, large)
                ]
                await asyncio.wait_for(_until(lambda: metric(url, "mt_queue_depth") == 2), 30)
                gate.open.set()  # they join together after this step
                return await running, *[await a for a in both]

        first, fine, too_large = asyncio.run(scenario())
        del model.encode_tokens
        assert too_large.status_code == 500 and "error id" in too_large.text
        assert fine.status_code == 200 and first.status_code == 200
        assert fine.json()["translatedText"] == first.json()["translatedText"]
        assert metric(url, "mt_running_sentences") == 0


def _dropped(way: str) -> str:
    reason = "deadline" if way == "deadline" else "client_disconnected"
    return f'mt_dropped_sentences_total{{reason="{reason}"}}'


async def _until(value):
    """Polls a value until it is non-zero (an event seen from outside the server)."""
    while not (v := await asyncio.to_thread(value)):
        await asyncio.sleep(0.05)
    return v


def test_the_engine_counts_what_a_running_decode_allocates(weights_dir):  # noqa: F811
    """Admission's footprint of a group (Engine.envelope) is what the running decode counts for
    its sentences (RunningBatch.footprint: their limits and sources as the engine gave them),
    its key/value buffers and more."""
    from app.engine import DecodeKey, start_engine
    from app.settings import Settings

    engine = start_engine(Settings(weights_dir=weights_dir, warmup=False))
    translator = engine.translator("en-de")
    texts = ["The cat.", "We eat bread today and the dog is very slow.", "I see."]
    payloads = [translator.encode_source(t) for t in texts]
    keys = [DecodeKey("en-de", 3, 1, 40), DecodeKey("en-de", 3, 2, 7), DecodeKey("en-de", 3, 3, 90)]
    group = engine.open_group(engine.group_of(keys[0]))
    group.join([(i, key, p) for i, (key, p) in enumerate(zip(keys, payloads, strict=True))])
    members = [(key, len(p) + 1) for key, p in zip(keys, payloads, strict=True)]
    self_positions, cross_positions = group.running.envelope()
    assert group.running.allocated() == self_positions
    sentences = group.running.sentences
    longest, width = max(s.limit for s in sentences), max(s.source_len for s in sentences)
    counted = engine.envelope(("en-de", 3), members)
    assert counted == group.running.footprint(3, longest, width)
    assert counted > self_positions + cross_positions  # (a step's logits, for one)


def test_with_cuda_graphs_a_group_decodes_in_fixed_buffers_that_admission_counts(
    weights_dir,  # noqa: F811
    spm_model,
    tmp_path,
    monkeypatch,
):
    """MT_CUDA_GRAPHS: on a GPU the running groups keep buffers of a fixed size, replayed from
    CUDA graphs. On a CPU the setting changes nothing; forced here on the CPU's gather layout
    (the same fixed buffers, eagerly), a group translates as static batches do; admission
    counts beforehand what the buffers then hold; and a group's decode is kept when it ends,
    counted, for the group's next one, until released."""
    from app.engine import DecodeKey, start_engine
    from app.settings import Settings
    from model_core import fused

    monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)  # the gather layout, as on a GPU
    shutil.copytree(weights_dir, tmp_path / "weights")  # and a second model, not loaded
    save_random_checkpoint(tmp_path / "weights" / "de-en", spm_model, "de", "en", seed=4)
    one_model_mb = max(p.stat().st_size for p in (tmp_path / "weights").rglob("*.safetensors"))
    settings = Settings(
        weights_dir=tmp_path / "weights",
        device="cpu",  # (also where a GPU is: this is the CPU's check of the fixed buffers)
        warmup=False,
        cuda_graphs=True,
        preload="en-de",
        model_memory_budget_mb=one_model_mb * 1.5 / 1e6,
    )
    engine = start_engine(settings)
    assert not engine.fixed  # no CUDA here
    engine.fixed = True
    translator = engine.translator("en-de")
    texts = ["The cat.", "We eat bread today and the dog is very slow.", "I see.", "Good day."]
    payloads = [translator.encode_source(t) for t in texts]
    key = DecodeKey("en-de", 3, 1, 40)
    group = engine.open_group(engine.group_of(key))
    members = [(key, len(p) + 1) for p in payloads[:3]]
    counted = engine.envelope(("en-de", 3), members)  # what admission counts before the join
    group.join([(i, key, p) for i, p in enumerate(payloads[:3])])
    assert group.running.cache.fixed
    places, positions, width = group.running.buffers()
    # what the decode counts for itself with the buffers it took: the buffers, the temporary a
    # step copies the beams' rows into (at most their size), and what a step and the join hold
    sentences = group.running.sentences
    longest, widest = max(s.limit for s in sentences), max(s.source_len for s in sentences)
    assert counted == group.running.footprint(3, longest, widest, joining=3)
    assert counted > places * (2 * 3 * positions + width)
    results = dict(group.step())
    group.join([(3, key, payloads[3])])
    while len(results) < 4:
        results.update(group.step())
    static = engine.run(key, payloads)
    assert [results[i].texts for i in range(4)] == [r.texts for r in static]
    batch = group.running
    del group  # the scheduler drops a group that emptied
    # counted while kept: its buffers, and what its steps will hold (no join under way)
    kept_count = batch.footprint(0, 0, 0)
    assert engine.kept_footprints() == {("en-de", 3): kept_count}
    assert places * (3 * positions + width) < kept_count < counted
    assert engine.open_group(("en-de", 3)).running is batch  # its buffers, for the next one
    engine.release_kept(("en-de", 3))
    assert engine.kept_footprints() == {}
    assert engine.open_group(("en-de", 3)).running is not batch
    reused = engine.open_group(("en-de", 3))
    reused.join([(0, key, payloads[0])])
    while len(reused.running):
        reused.step()
    del reused
    assert engine.kept_footprints()[("en-de", 3)] > 0
    kept = engine.kept[("en-de", 3)]
    engine.load("de-en", "test")  # the budget holds one model: en-de is unloaded for it
    assert "en-de" not in engine.registry.loaded
    assert engine.kept_footprints() == {} and kept.buffers() == (0, 0, 0)  # let go of first
    failing = engine.open_group(("de-en", 3))
    failing.join([(0, DecodeKey("de-en", 3, 1, 40), payloads[1])])
    monkeypatch.setattr(failing.running, "step", lambda only=None: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.step()
    assert len(failing.running) == 0 and failing.running.buffers() == (0, 0, 0)  # not reused


def test_running_rows_bound_the_sentences_of_a_step(weights_dir):  # noqa: F811
    """MT_MAX_RUNNING_ROWS=8: at beam 4 a step holds 2 sentences at most, at beam 1 eight; the
    answers are those of the static batcher."""
    body = {"q": [f"I see {n} trees." for n in range(2, 8)], "source": "en", "target": "de"}
    answers = {}
    for scheduler in ("static", "continuous"):
        with serve_in_thread(weights_dir, scheduler=scheduler, max_running_rows=8) as (url, _):
            answers[scheduler] = []
            for beam, most in ((4, 2), (1, 8)):
                answer = post(url, json={**body, "beam_size": beam})
                answers[scheduler].append(answer.json()["translatedText"])
                if scheduler == "continuous":  # steps so far, and those of <= `most` sentences
                    steps = metric(url, "mt_batch_size_count")
                    assert metric(url, "mt_batch_size_bucket", f'le="{most}.0"') == steps
            if scheduler == "continuous":  # beam 1 ran more than 2 in some steps
                assert metric(url, "mt_batch_size_bucket", 'le="2.0"') < steps
    assert answers["continuous"] == answers["static"]


@needs_kernel  # the slot layout is the attention kernels'
def test_step_rows_bound_a_step_and_every_sentence_still_gets_its_answer(weights_dir):  # noqa: F811
    """MT_MAX_STEP_ROWS=8 (the CPU's slot layout): at beam 4 a step computes 2 sentences at
    most, the six of the request taking turns; the answers are the static batcher's. With
    MT_STEP_BOUND_WAIT_MS set, the bound still holds while no sentence waits to join."""
    body = {"q": [f"I see {n} trees." for n in range(2, 8)], "source": "en", "target": "de"}
    body["beam_size"] = 4
    answers = {}
    for scheduler in ("static", "continuous"):
        options = dict(scheduler=scheduler, device="cpu")
        if scheduler == "continuous":
            options.update(max_step_rows=8, step_bound_wait_ms=1000)
        with serve_in_thread(weights_dir, **options) as (url, app):
            answers[scheduler] = post(url, json=body).json()["translatedText"]
            if scheduler == "continuous":
                assert app.state.batcher.step_wait == 1.0
                steps = metric(url, "mt_batch_size_count")
                assert metric(url, "mt_batch_size_bucket", 'le="2.0"') == steps
                assert steps > 6 * 2  # six sentences, two per step, each several tokens long
    assert answers["continuous"] == answers["static"]


def test_the_row_bound_in_sentences_per_beam_size():
    from app.engine import Engine

    assert [Engine.places_for(128)(("en-de", beam)) for beam in (1, 4, 5, 200)] == [128, 32, 25, 1]
    assert Engine.places_for(0)(("en-de", 4)) > 10_000  # no bound: MT_MAX_BATCH_SIZE caps


def test_start_up_warms_the_decode_paths_requests_take(weights_dir, monkeypatch):  # noqa: F811
    """A GPU loads each kernel at its first use: on an H200 the first decode took 0.54 s
    against 18-50 ms for later ones, past a short deadline. There the warm-up runs greedy and the
    default beam, in static batches of 1 to 64 sentences and in a continuous decode that
    sentences join while it runs; on a CPU, where a first call costs about 2 ms more, one
    sentence at the default beam, so that a model loaded on a request's path is soon ready."""
    from app.engine import start_engine, warm_up
    from app.settings import Settings
    from model_core.continuous import RunningBatch
    from model_core.translator import Translator

    static, joins = [], []
    translate_ids, join = Translator.translate_ids, RunningBatch.join

    def recording_translate(self, ids, **options):
        static.append((options["beam_size"], len(ids)))
        return translate_ids(self, ids, **options)

    def recording_join(self, ids, *args):
        joins.append((self.k, len(ids), len(self)))  # and the sentences running already
        return join(self, ids, *args)

    monkeypatch.setattr(Translator, "translate_ids", recording_translate)
    monkeypatch.setattr(RunningBatch, "join", recording_join)
    engine = start_engine(Settings(weights_dir=weights_dir, device="cpu", default_beam_size=3))
    assert static == [(3, 1)] and joins == []
    static.clear()
    warm_up(engine.translator("en-de"), (1, 3), every_path=True)  # what a GPU runs
    assert sorted(static) == [(b, n) for b in (1, 3) for n in (1, 2, 8, 64)]
    assert joins == [(1, 1, 0), (1, 63, 1), (3, 1, 0), (3, 63, 1)]
    static.clear()
    start_engine(Settings(weights_dir=weights_dir, device="cpu", warmup=False))
    assert static == []


SOAK_TEXTS = [
    "The cat is big.",
    "We eat bread today.",
    "I see a tree.",
    "The red car is fast.",
    "Where is the station?",
    "The small dog is very slow.",
    "My brother reads a book in the garden.",
    "Water.",
    "Thank you very much.",
    "The children play in the park after school.",
]


def soak_requests(seed: int, count: int) -> list[dict]:
    """Requests with mixed options: one text or a list, beam sizes 1, 2 and 4 (three running
    groups), alternatives, output limits."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        texts = rng.sample(SOAK_TEXTS, rng.choice([1, 1, 2, 3]))
        body = {"q": texts[0] if len(texts) == 1 else texts, "source": "en", "target": "de"}
        body["beam_size"] = rng.choice([1, 2, 4])
        if body["beam_size"] > 1 and rng.random() < 0.3:
            body["alternatives"] = 1
        if rng.random() < 0.3:
            body["max_length"] = rng.choice([3, 8])
        out.append(body)
    return out


def test_under_mixed_load_with_clients_leaving_every_answer_is_the_static_one(
    weights_dir,  # noqa: F811
):
    """Many requests at once with mixed options, a tight budget (sentences wait for room, in
    three groups), clients that go away mid-request and deadlines: every answer given is the
    static scheduler's for that request, and nothing is left running or waiting afterwards."""
    requests = soak_requests(seed=7, count=48)
    distinct = {json.dumps(r, sort_keys=True): r for r in requests}

    async def answer_each(url: str, bodies: list[dict]) -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=120) as c:
            return await asyncio.gather(*(c.post(f"{url}/translate", json=b) for b in bodies))

    with serve_in_thread(weights_dir, scheduler="static") as (url, _):
        given = asyncio.run(answer_each(url, list(distinct.values())))
    static = dict(zip(distinct, given, strict=True))
    assert all(a.status_code == 200 for a in static.values())

    async def scenario(url: str) -> list[httpx.Response | None]:
        rng = random.Random(8)
        async with httpx.AsyncClient(timeout=120) as c:

            async def one(body: dict) -> httpx.Response | None:
                call = asyncio.ensure_future(c.post(f"{url}/translate", json=body))
                if rng.random() < 0.25:  # the client goes away after a while
                    await asyncio.sleep(rng.uniform(0.0, 0.4))
                    call.cancel()
                try:
                    return await call
                except asyncio.CancelledError:
                    return None

            return await asyncio.gather(*(one(b) for b in requests))

    with serve_in_thread(
        weights_dir,
        scheduler="continuous",
        max_running_tokens=1500,  # a few sentences at a time
        request_timeout_s=1,
        max_queue_size=4096,
    ) as (url, _):
        answers = asyncio.run(scenario(url))
        asyncio.run(asyncio.wait_for(_until(lambda: metric(url, "mt_running_sentences") == 0), 60))
        assert metric(url, "mt_queue_depth") == 0
        follow = post(url, json=requests[0])  # still serving, as before

    def content(answer: httpx.Response) -> dict:
        return {k: v for k, v in answer.json().items() if k != "timings"}

    given = [(r, a) for r, a in zip(requests, answers, strict=True) if a is not None]
    assert sum(a.status_code == 200 for _, a in given) > len(requests) // 4
    for body, got in given:
        assert got.status_code in (200, 504), got.text
        if got.status_code == 200:
            assert content(got) == content(static[json.dumps(body, sort_keys=True)]), body
    assert content(follow) == content(static[json.dumps(requests[0], sort_keys=True)])
