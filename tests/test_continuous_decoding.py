"""Continuous decoding (model_core/continuous.py): a sentence that joins a running decode at any
step, beside others at other steps and with other limits, gets what it gets decoded alone."""

import copy

import pytest
import torch

from bench.footprint_bench import padded, staggered
from model_core import continuous, fused
from model_core.continuous import RunningBatch
from model_core.decoding import beam_search, greedy_search
from model_core.masks import pad_mask
from tests.conftest import random_model, tiny_config
from tests.test_fused import needs_kernel
from tests.test_model_decoding import VARIANTS, random_batch

VOCAB = 60


def alone(model, src, limit: int, beam_size: int, n_best: int, stop: str, alpha: float):
    """The static decoders on one sentence: its n-best (tokens, score) pairs."""
    src = src.to(next(model.parameters()).device)
    mask = pad_mask(src, 0)
    limits = torch.tensor([limit])
    if beam_size == 1:
        hyps = greedy_search(model, src, mask, limits, alpha)
    else:
        hyps = beam_search(model, src, mask, limits, beam_size, alpha, n_best, stop=stop)[0]
    return [(h.tokens, h.score) for h in hyps]


def sources(seed: int, count: int) -> list[torch.Tensor]:
    src, mask = random_batch(seed, batch=count)
    return [src[i : i + 1, : int(mask[i, 0, 0].sum())] for i in range(count)]


def run_staggered(running: RunningBatch, srcs, limits, n_bests, joins_at, choose=None) -> dict:
    """Sentence i joins when the running decode has taken joins_at[i] steps; until all are
    done. `choose(step, ids)`: the sentences that take that step (`step(only=...)`; those left
    out must not move). Returns id -> [(tokens, score)]."""
    results, step = {}, 0
    while len(results) < len(srcs):
        newcomers = [i for i, at in enumerate(joins_at) if at == step]
        if newcomers:
            src = padded([srcs[i] for i in newcomers]).to(next(running.model.parameters()).device)
            running.join(
                newcomers,
                src,
                pad_mask(src, 0),
                [limits[i] for i in newcomers],
                [n_bests[i] for i in newcomers],
            )
        only = choose(step, running.ids) if choose is not None else None
        before = {s.id: s.step for s in running.sentences}
        for sid, hyps in running.step(only):
            assert only is None or sid in only
            results[sid] = [(h.tokens, h.score) for h in hyps]
        if only is not None:  # those left out did not move
            for s in running.sentences:
                assert s.step == before[s.id] + (s.id in only)
        step += 1
        assert step < 500
    assert len(running) == 0
    return results


def finish_as_alone(running: RunningBatch, results: dict, srcs, limits: dict, stop: str) -> None:
    """Steps `running` to its end, then checks each sentence (id -> its limit in `limits`)
    against the static decoders on it alone (beam 2, one hypothesis)."""
    while len(running):
        results.update(running.step())
    for i, limit in limits.items():
        want = alone(running.model, srcs[i], limit, 2, 1, stop, 1.0)
        assert [h.tokens for h in results[i]] == [t for t, _ in want], f"sentence {i}"


@pytest.mark.parametrize(
    ("variant", "beam_size", "stop"),
    [
        ("seeds", 1, "first_k"),
        ("seeds", 4, "first_k"),
        ("seeds", 3, "heuristic"),
        ("marian-like", 4, "heuristic"),
        ("marian-like", 4, "early"),
        ("separate-embeddings", 2, "first_k"),
        ("forced-eos", 4, "heuristic"),
        ("forced-eos", 1, "first_k"),
    ],
)
@pytest.mark.parametrize("fixed", [False, True])
def test_a_sentence_joining_at_any_step_decodes_as_alone(
    variant, beam_size, stop, fixed, monkeypatch
):
    """`fixed`: the layout a GPU replays from a CUDA graph (every step over all places, the
    beam selection included, sentences keeping their places), eagerly here."""
    if fixed:
        monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)
    forced = {**VARIANTS["marian-like"], "force_eos_at_limit": True}  # as OPUS-MT's configs
    model = random_model(tiny_config(VOCAB, **VARIANTS.get(variant, forced)), seed=11)
    srcs = sources(21, 8)
    limits = [20, 5, 14, 20, 9, 3, 17, 12]
    n_bests = [min(beam_size, 1 + i % 3) for i in range(8)]
    joins_at = [0, 0, 1, 3, 3, 4, 7, 12]
    alpha = 0.8
    running = RunningBatch(model, beam_size=beam_size, length_penalty=alpha, stop=stop, fixed=fixed)
    got = run_staggered(running, srcs, limits, n_bests, joins_at)
    assert (running.buffers() != (0, 0, 0)) == fixed
    for i, src in enumerate(srcs):
        want = alone(model, src, limits[i], beam_size, n_bests[i], stop, alpha)
        assert [t for t, _ in got[i]] == [t for t, _ in want], f"sentence {i}"
        assert [s for _, s in got[i]] == pytest.approx([s for _, s in want], abs=1e-4)
        assert len(got[i]) == n_bests[i]


@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("beam_size", [1, 4])
def test_the_gather_layout_decodes_as_alone(beam_size, fixed, monkeypatch):
    """Without the attention kernels (a GPU, another dtype, or not built), torch's attention
    with a mask per row; `fixed`: in buffers of a fixed size (what a GPU replays from CUDA
    graphs), eagerly here, each step over every position and row of the buffers."""
    monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)
    model = random_model(tiny_config(VOCAB, **VARIANTS["marian-like"]), seed=16)
    srcs = sources(26, 6)
    limits = [18, 6, 18, 11, 18, 9]
    running = RunningBatch(model, beam_size=beam_size, stop="heuristic", fixed=fixed)
    got = run_staggered(
        running,
        srcs,
        limits,
        [1, 2, 1, 1, 1, 1][:6] if beam_size > 1 else [1] * 6,
        [0, 1, 1, 4, 9, 9],
    )
    assert not running.slots and (running.buffers() != (0, 0, 0)) == fixed
    for i, src in enumerate(srcs):
        n_best = 2 if beam_size > 1 and i == 1 else 1
        want = alone(model, src, limits[i], beam_size, n_best, "heuristic", 1.0)
        assert [t for t, _ in got[i]] == [t for t, _ in want]
        assert [s for _, s in got[i]] == pytest.approx([s for _, s in want], abs=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("beam_size", [1, 4])
def test_on_a_gpu_a_sentence_joining_at_any_step_decodes_as_alone(beam_size, fixed):
    """The service's continuous scheduler on a GPU: the gather layout, on CUDA tensors, in
    float32 (half precision rounds batches and lone sentences differently); `fixed`: each step
    replayed from a CUDA graph of the fixed buffers (captured anew as they grow)."""
    model = random_model(tiny_config(VOCAB, **VARIANTS["marian-like"]), seed=17).to("cuda")
    srcs = sources(27, 8)
    limits = [20, 5, 14, 20, 9, 3, 17, 12]
    n_bests = [min(beam_size, 1 + i % 3) for i in range(8)]
    running = RunningBatch(model, beam_size=beam_size, stop="heuristic", fixed=fixed)
    got = run_staggered(running, srcs, limits, n_bests, [0, 0, 1, 3, 3, 4, 7, 12])
    assert not running.slots and running.tokens.device.type == "cuda"
    for i, src in enumerate(srcs):
        want = alone(model, src, limits[i], beam_size, n_bests[i], "heuristic", 1.0)
        assert [t for t, _ in got[i]] == [t for t, _ in want], f"sentence {i}"
        assert [s for _, s in got[i]] == pytest.approx([s for _, s in want], abs=1e-3)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_prepared_model_decodes_continuously_as_its_static_search(beam_size):
    """Packed linear layers and the slot-mode kernels of the static search, against the
    continuous decode's gather mode on the same prepared model."""
    model = random_model(tiny_config(VOCAB), seed=12).prepare_for_inference(packed=True)
    srcs = sources(22, 6)
    limits = [16, 16, 8, 16, 4, 16]
    running = RunningBatch(model, beam_size=beam_size)
    got = run_staggered(running, srcs, limits, [1] * 6, [0, 2, 2, 5, 6, 9])
    for i, src in enumerate(srcs):
        want = alone(model, src, limits[i], beam_size, 1, "first_k", 1.0)
        assert [t for t, _ in got[i]] == [t for t, _ in want]
        assert [s for _, s in got[i]] == pytest.approx([s for _, s in want], abs=1e-4)


def test_sentences_that_leave_are_never_computed_again_and_the_rest_are_unaffected():
    model = random_model(tiny_config(VOCAB), seed=13)
    srcs = sources(23, 5)
    src = padded(srcs)
    running = RunningBatch(model, beam_size=4)
    running.join(list("abcde"), src, pad_mask(src, 0), [30] * 5, [1] * 5)
    results = dict(running.step())
    assert running.leave(["b", "d", "zz"]) == 2  # an unknown id is ignored
    assert running.ids == [i for i in "ace" if i not in results]
    while len(running):
        results.update(running.step())
    assert "b" not in results and "d" not in results
    for i, name in ((0, "a"), (2, "c"), (4, "e")):
        want = alone(model, srcs[i], 30, 4, 1, "first_k", 1.0)
        assert [h.tokens for h in results[name]] == [t for t, _ in want]


def test_fixed_buffers_grow_to_fit_newcomers_and_stay_for_the_next_ones(monkeypatch):
    """The fixed gather layout: more sentences, a longer source or a longer limit than the
    buffers hold grow them (to powers of two), the sentences already running carried over; a
    sentence leaving mid-decode frees its place; an empty batch keeps its buffers, which the
    next newcomers reuse. Every sentence gets what it gets decoded alone."""
    monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)
    model = random_model(tiny_config(VOCAB, **VARIANTS["marian-like"]), seed=18)
    srcs = sorted(sources(28, 7), key=lambda x: x.shape[1])  # each newcomer the longest yet
    running = RunningBatch(model, beam_size=2, stop="heuristic", fixed=True)
    seen, results = [], {}

    def join(i: int, limit: int) -> None:
        src = srcs[i]
        running.join([i], src, pad_mask(src, 0), [limit], [1])
        seen.append(running.buffers())

    join(0, 6)
    assert running.buffers() == (1, 8, 1 << (srcs[0].shape[1] - 1).bit_length())
    for i, limit in ((1, 9), (2, 20), (3, 12), (4, 30)):
        results.update(running.step())
        join(i, limit)
    assert seen[-1][0] >= 4 and seen[-1][1] == 32 and seen[-1][2] >= srcs[4].shape[1]
    assert all(
        a <= b for x, y in zip(seen, seen[1:], strict=False) for a, b in zip(x, y, strict=True)
    )
    left = running.ids[0]
    assert running.leave([left]) == 1
    while len(running):
        results.update(running.step())
    kept = running.buffers()
    assert kept == seen[-1] and running.allocated() == kept[0] * 2 * kept[1]
    kv = running._idle.kv
    join(5, 10)
    join(6, 10)
    assert running.cache.kv is kv  # the same buffers: a GPU replays the same graph
    limits = {0: 6, 1: 9, 2: 20, 3: 12, 4: 30, 5: 10, 6: 10}
    del limits[left]
    finish_as_alone(running, results, srcs, limits, "heuristic")
    assert left not in results


def test_fixed_buffers_keep_their_addresses_until_they_grow(monkeypatch):
    """What a CUDA graph of the fixed layout's step relies on: steps, joins that fit and leaves
    move data within the same tensors (a replay reads them by address), and the step set up at
    the buffers' first step (here the function a GPU would capture, run again each step) serves
    every later one; only a newcomer that does not fit brings new tensors, and a new set-up."""
    monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)
    model = random_model(tiny_config(VOCAB), seed=19)
    srcs = sources(29, 6)
    running = RunningBatch(model, beam_size=2, fixed=True)

    def addresses() -> list[int]:
        cache = running.cache or running._idle
        tensors = [cache.kv, cache.src_bias, *cache.cross_k, *cache.cross_v, *running._inputs]
        return [t.data_ptr() for t in tensors]

    def join(ids: list[int], limit: int) -> None:
        src = padded([srcs[i] for i in ids])
        running.join(ids, src, pad_mask(src, 0), [limit] * len(ids), [1] * len(ids))

    join([0, 1, 2, 3], 30)  # four places, 32 positions
    first = addresses()
    running.step()
    graph = running._graph
    assert callable(graph)  # on a GPU: (CUDA graph, its output)
    running.step()
    assert running.leave([1]) == 1
    running.step()
    assert srcs[4].shape[1] <= running.buffers()[2]  # (the test's data) its source fits
    join([4], 20)  # fits: a free place, a shorter limit
    assert addresses() == first and running._graph is graph
    while len(running):
        running.step()
    assert addresses() == first and running._graph is graph  # kept while empty
    join([5, 0, 2, 3, 4], 30)  # five sentences: eight places
    assert running.buffers()[0] == 8 and addresses() != first and running._graph is None
    running.step()
    assert callable(running._graph) and running._graph is not graph


def test_kept_buffers_whose_places_ended_at_their_last_position_serve_newcomers(monkeypatch):
    """Sentences that run to a limit of exactly the buffers' positions leave their places at
    a step past the last position; the next newcomers in the kept buffers decode as alone
    (the places left behind are padding, and padding must not index past the buffers)."""
    monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)
    model = random_model(tiny_config(VOCAB), seed=21)
    srcs = sources(31, 4)
    running = RunningBatch(model, beam_size=2, fixed=True)
    src = padded(srcs[:3])
    running.join([0, 1, 2], src, pad_mask(src, 0), [8, 8, 8], [1, 1, 1])
    results = {}
    while len(running):
        results.update(running.step())
    assert running.buffers()[1] == 8 and 8 in running._idle.steps.tolist()  # (the test's data)
    running.join([3], srcs[3], pad_mask(srcs[3], 0), [5], [1])
    finish_as_alone(running, results, srcs, {0: 8, 1: 8, 2: 8, 3: 5}, "first_k")


@pytest.mark.parametrize("selection", [False, True])
def test_a_fixed_step_runs_the_same_operations_on_the_same_shapes_every_time(
    selection, monkeypatch
):
    """What a CUDA graph bakes in: the operations of the decoder step, their shapes and their
    non-tensor arguments. Recorded for every step of the same buffers, as sentences join (and
    fit), step at different positions and leave, they are the same each time; and none reads a
    value back to the host or brings host data in (a capture cannot hold either)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Trace(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            def shape(a):
                if isinstance(a, torch.Tensor):
                    return (tuple(a.shape), a.dtype)
                if isinstance(a, (list, tuple)):
                    return tuple(shape(x) for x in a)
                return a

            self.ops.append((str(func), shape(args), shape(sorted((kwargs or {}).items()))))
            return func(*args, **(kwargs or {}))

    monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)
    monkeypatch.setattr(RunningBatch, "capture_selection", selection)  # in the graph or after
    marian_like = {**VARIANTS["marian-like"], "suppress_ids": (5,)}
    model = random_model(tiny_config(VOCAB, **marian_like), seed=23)
    srcs = sources(33, 6)
    running = RunningBatch(model, beam_size=2, stop="heuristic", fixed=True)
    traces = []

    def join(ids, limit):
        src = padded([srcs[i] for i in ids])
        running.join(ids, src, pad_mask(src, 0), [limit] * len(ids), [1] * len(ids))

    join([0, 1, 2], 30)
    running.step()
    decode = running._graph

    def traced():
        with Trace() as trace:
            out = decode()
        traces.append(trace.ops)
        return out

    running._graph = traced
    for _ in range(3):
        running.step()
    running.leave([running.ids[0]])
    running.step()
    join([3], 12)  # a free place: it fits
    for _ in range(4):
        running.step()
    assert running._graph is traced and len(traces) == 8 and len(traces[0]) > 20
    assert all(t == traces[0] for t in traces[1:])
    host = ("_local_scalar_dense", "nonzero", "masked_select", "lift_fresh", "is_nonzero")
    assert not [op for op, _, _ in traces[0] if any(h in op for h in host)]
    assert any("topk" in op for op, _, _ in traces[0]) == selection  # the beam selection
    assert any("index_fill_" in op for op, _, _ in traces[0])  # the suppressed id, in place


def decode_plan(model, fixed: bool, k: int, stop: str, plan, srcs) -> tuple[dict, set]:
    """A continuous decode that follows `plan` (per step: the ids that join, the ids that
    leave) and then runs to the end; id -> [(tokens, score, finished)], and the ids that left."""
    running = RunningBatch(model, beam_size=k, length_penalty=0.8, stop=stop, fixed=fixed)
    results, left = {}, set()

    def step() -> None:
        for sid, hyps in running.step():
            results[sid] = [(h.tokens, h.score, h.finished) for h in hyps]

    for joins, leaves in plan:
        if joins:
            src = padded([srcs[i][0] for i in joins])
            limits, n_bests = [srcs[i][1] for i in joins], [srcs[i][2] for i in joins]
            running.join(joins, src, pad_mask(src, 0), limits, n_bests)
        gone = [i for i in leaves if i in running.ids]
        running.leave(gone)
        left |= set(gone)
        step()
    while len(running):
        step()
    return results, left


@pytest.mark.parametrize("trial", range(4))
def test_the_fixed_layout_decodes_as_the_gather_layout_under_random_joins_and_leaves(
    trial, monkeypatch
):
    """Random sentences (limits, n-best), joining at random steps, some leaving mid-decode, a
    random model variant, beam size and stop rule: the fixed layout (places kept, free places
    reused, buffers grown while sentences run) gives what the gather layout gives."""
    import random

    monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)
    rnd = random.Random(trial)
    variant = rnd.choice(["seeds", "marian-like", "forced"])
    forced = {**VARIANTS["marian-like"], "force_eos_at_limit": True}
    model = random_model(tiny_config(VOCAB, **VARIANTS.get(variant, forced)), seed=trial)
    k, stop, n = rnd.choice([1, 2, 3, 4]), rnd.choice(["first_k", "heuristic", "early"]), 14
    picked = sources(100 + trial, n)
    srcs = [(picked[i], rnd.choice([2, 3, 5, 9, 17, 30]), rnd.randint(1, k)) for i in range(n)]
    plan, upcoming = [], 0
    for _ in range(40):
        joins = []
        while upcoming < n and rnd.random() < 0.35:
            joins.append(upcoming)
            upcoming += 1
        plan.append((joins, [rnd.randrange(n)] if rnd.random() < 0.1 else []))
    plan.append((list(range(upcoming, n)), []))
    want, want_left = decode_plan(model, False, k, stop, plan, srcs)
    got, got_left = decode_plan(model, True, k, stop, plan, srcs)
    assert got_left == want_left and set(got) == set(want)
    for i, hyps in want.items():
        assert [(t, f) for t, _, f in got[i]] == [(t, f) for t, _, f in hyps], f"sentence {i}"
        assert [s for _, s, _ in got[i]] == pytest.approx([s for _, s, _ in hyps], abs=1e-4)


def test_in_fixed_buffers_sentences_keep_their_places_and_newcomers_take_free_ones(monkeypatch):
    """The fixed layout moves no sentence: one that finishes or leaves frees its place (its
    neighbours' state stays where it is, bit for bit), and the next newcomer takes the lowest
    free place; everyone still gets what it gets decoded alone."""
    monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)
    model = random_model(tiny_config(VOCAB), seed=24)
    srcs = sources(34, 5)
    srcs[0], srcs[1], srcs[2], srcs[4] = srcs[1], srcs[0], srcs[4], srcs[2]
    assert srcs[4].shape[1] < srcs[0].shape[1]  # the newcomer's source is the shorter
    running = RunningBatch(model, beam_size=2, fixed=True)
    src = padded(srcs[:4])
    running.join([0, 1, 2, 3], src, pad_mask(src, 0), [30, 4, 30, 30], [1] * 4)
    assert running.places == [0, 1, 2, 3]
    results = dict(running.step())
    cross = [x[2:4].clone() for x in running.cache.cross_k]
    assert running.leave([0]) == 1
    while 1 not in results:  # sentence 1 stops at its limit of 4
        results.update(running.step())
    assert sorted(running.free) == [0, 1] and running.places == [2, 3]
    assert all(torch.equal(x[2:4], c) for x, c in zip(running.cache.cross_k, cross, strict=True))
    running.join([4], srcs[4], pad_mask(srcs[4], 0), [30], [1])
    assert running.places == [2, 3, 0] and running.free == [1]
    finish_as_alone(running, results, srcs, {1: 4, 2: 30, 3: 30, 4: 30}, "first_k")
    assert 0 not in results


@pytest.mark.parametrize("selection", [False, True])
def test_a_captured_fixed_step_and_every_tensor_it_reads_live_as_long_as_its_graph(
    selection, monkeypatch
):
    """A CUDA graph holds no reference to what it reads: it reads tensors by address, and a
    tensor nothing else holds gives its memory to the next allocation (a replay then reads
    whatever that holds: an index out of bounds on a GPU). The batch keeps the captured step's
    function, and so every tensor it holds, as long as the graph. Here the capture (on the
    CPU) gives a stand-in for the graph that holds the function only weakly, as a graph
    would, and replays it while it lives."""
    import weakref

    monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)
    monkeypatch.setattr(RunningBatch, "capture_selection", selection)
    monkeypatch.setattr(continuous, "graphs_for", lambda device: True)

    class Graph:
        def __init__(self, call, out):
            self.call, self.out = weakref.ref(call), out

        def replay(self):
            call = self.call()
            assert call is not None, "the captured step was let go while its graph replays"
            got = call()
            pairs = zip(
                *(x if isinstance(x, tuple) else (x,) for x in (self.out, got)), strict=True
            )
            for mine, new in pairs:
                mine.copy_(new)

    def fake_capture(call, device, keep=()):
        saved = [t.clone() for t in keep]
        got = call()  # (a capture runs nothing: `keep` as it was)
        out = tuple(x.clone() for x in got) if isinstance(got, tuple) else got.clone()
        for t, was in zip(keep, saved, strict=True):
            t.copy_(was)
        return Graph(call, out), out

    monkeypatch.setattr(continuous, "capture", fake_capture)
    model = random_model(tiny_config(VOCAB, **VARIANTS["marian-like"]), seed=25)
    srcs = sources(35, 6)
    limits = [12, 5, 12, 9, 12, 7]
    running = RunningBatch(model, beam_size=3, stop="heuristic", fixed=True)
    got = run_staggered(running, srcs, limits, [1, 2, 1, 3, 1, 1], [0, 0, 2, 2, 5, 9])
    assert isinstance(running._graph, tuple)  # the stand-in's replays ran every step
    for i, src in enumerate(srcs):
        want = alone(model, src, limits[i], 3, [1, 2, 1, 3, 1, 1][i], "heuristic", 1.0)
        assert [t for t, _ in got[i]] == [t for t, _ in want], f"sentence {i}"
        assert [s for _, s in got[i]] == pytest.approx([s for _, s in want], abs=1e-4)


def test_a_fixed_decode_is_freed_when_let_go_and_reset_starts_it_afresh(monkeypatch):
    """The step set up for fixed buffers holds no reference back to the batch (no cycle: the
    batch, its buffers and its model go as soon as the last reference does, without waiting
    for the cyclic collector); `reset` lets go of the buffers, and the batch decodes afresh."""
    import gc
    import weakref

    monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)
    model = random_model(tiny_config(VOCAB), seed=22)
    srcs = sources(32, 2)
    running = RunningBatch(model, beam_size=2, fixed=True)
    running.join([0], srcs[0], pad_mask(srcs[0], 0), [6], [1])
    running.step()
    assert running._graph is not None
    gc.disable()
    try:
        ref = weakref.ref(running)
        del running
        assert ref() is None
    finally:
        gc.enable()
    running = RunningBatch(model, beam_size=2, fixed=True)
    running.join([0], srcs[0], pad_mask(srcs[0], 0), [6], [1])
    running.step()
    seqs = weakref.ref(running._inputs[2])  # also held by the step's functions
    running.reset()
    assert len(running) == 0 and running.buffers() == (0, 0, 0) and running._graph is None
    assert seqs() is None  # every buffer let go (a GPU's memory, for another decode)
    running.join([1], srcs[1], pad_mask(srcs[1], 0), [9], [1])
    results = {}
    while len(running):
        results.update(running.step())
    want = alone(model, srcs[1], 9, 2, 1, "first_k", 1.0)
    assert [h.tokens for h in results[1]] == [t for t, _ in want]


def test_the_envelope_counts_rows_times_the_longest_limit():
    model = random_model(tiny_config(VOCAB), seed=14)
    srcs = sources(24, 3)
    running = RunningBatch(model, beam_size=2)
    assert running.envelope() == (0, 0)
    src = padded(srcs)
    running.join([0, 1, 2], src, pad_mask(src, 0), [7, 11, 5], [1, 1, 1])
    longest_source = max(s.shape[1] for s in srcs)
    assert running.envelope() == (3 * 2 * 11, 3 * longest_source)
    assert running.allocated() == 6 * 11  # what the envelope counts is what is allocated


@pytest.mark.parametrize(
    ("device", "layout"),
    [
        ("cpu", "slots"),
        ("cpu", "gather"),
        ("cpu", "fixed"),
        pytest.param("cuda", "gather", marks=pytest.mark.gpu),
        pytest.param("cuda", "fixed", marks=pytest.mark.gpu),
    ],
)
@pytest.mark.parametrize("beam_size", [1, 4])
@pytest.mark.parametrize("case", ["outputs to 60", "sources of 150, a vocabulary of 2000"])
def test_a_running_decode_holds_no_more_than_its_footprint(
    device, layout, beam_size, case, monkeypatch
):
    """What admission counts for a join (RunningBatch.footprint, before it) bounds the memory
    the decode holds during the join and the steps after it, measured by torch's profiler
    (on CUDA: its allocator's peak; the fixed layout then replays CUDA graphs): buffers that
    grow (the old ones are copied into the new), the gather layout's spare buffer for the
    beams' reorder, the fixed layout's temporary for it, a step's logits and search, the
    newcomers' encoder."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    if layout == "slots" and not fused.attention_kernels_for(torch.zeros(1)):
        pytest.skip("needs the attention kernels")
    monkeypatch.setattr(fused, "ATTENTION_KERNELS", layout == "slots")
    if case == "outputs to 60":  # the key/value buffers most of it
        cfg = tiny_config(VOCAB, d_model=64, max_positions=512)
        srcs = sources(27, 10)
        limits = [60, 20, 60, 10, 45, 60, 8, 30, 60, 20]
    else:  # the newcomers' encoder and the steps' logits most of it
        cfg = tiny_config(2000, d_model=64, d_ff=256, max_positions=512)
        generator = torch.Generator().manual_seed(28)
        srcs = [torch.randint(4, 2000, (1, 150 - 7 * i), generator=generator) for i in range(10)]
        limits = [6, 3, 5, 4, 6, 3, 5, 4, 6, 3]
    model = random_model(cfg, seed=17).to(device)
    running = RunningBatch(model, beam_size=beam_size, fixed=layout == "fixed")
    assert running.layout == layout
    # one key/value position of one row (or of one sentence's source): every decoder layer's
    # key and value, float32
    position = cfg.decoder_layers * 2 * cfg.d_model * 4
    plan = [([0, 1, 2, 3], 2), ([4, 5, 6], 4), ([7, 8, 9], 70 if max(limits) > 10 else 8)]
    held, counted, allocated = staggered(running, srcs, limits, plan, device)
    assert len(running) == 0
    for i, (most, count) in enumerate(zip(held, counted, strict=True)):
        # beside: each row's tokens, the masks, small tensors of the search
        assert most <= count * position + (1 << 16), f"call {i}: {most} > {count} positions"
    assert max(held) >= max(allocated) * position  # (the measurement sees the buffers)


@pytest.mark.parametrize("layout", ["slots", "gather", "fixed"])
@pytest.mark.parametrize("fails", ["encoder", "cross state"])
def test_a_join_whose_encoder_fails_leaves_the_running_sentences_as_they_were(
    layout, fails, monkeypatch
):
    """Newcomers whose encoder (or cross-attention state) fails, out of memory say, do not
    join, and the sentences already decoding go on as if they had never come."""
    if layout == "slots" and not fused.attention_kernels_for(torch.zeros(1)):
        pytest.skip("needs the attention kernels")
    monkeypatch.setattr(fused, "ATTENTION_KERNELS", layout == "slots")
    model = random_model(tiny_config(VOCAB), seed=22)
    srcs = sources(32, 4)
    running = RunningBatch(model, beam_size=2, stop="heuristic", fixed=layout == "fixed")
    src = padded(srcs[:2])
    running.join([0, 1], src, pad_mask(src, 0), [12, 9], [1, 1])
    results = dict(running.step())
    results.update(running.step())
    name = (
        "encode_tokens"
        if fails == "encoder"
        else ("slot_cross_state" if layout == "slots" else "init_cache")
    )

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(model, name, out_of_memory)
    src = padded(srcs[2:])
    with pytest.raises(continuous.NewcomersFailed, match="out of memory"):
        running.join([2, 3], src, pad_mask(src, 0), [10, 10], [1, 1])
    assert running.ids == [i for i in (0, 1) if i not in results]
    monkeypatch.undo()
    monkeypatch.setattr(fused, "ATTENTION_KERNELS", layout == "slots")
    finish_as_alone(running, results, srcs, {0: 12, 1: 9}, "heuristic")


def test_n_best_beyond_the_beam_size_is_refused():
    model = random_model(tiny_config(VOCAB), seed=15)
    src = sources(25, 1)[0]
    running = RunningBatch(model, beam_size=2)
    with pytest.raises(ValueError, match="n_best"):
        running.join([0], src, pad_mask(src, 0), [5], [3])


@needs_kernel  # the slot layout is the attention kernels'
def test_newcomers_take_the_slots_of_finished_sentences():
    model = random_model(tiny_config(VOCAB), seed=17)
    srcs = sources(27, 4)
    running = RunningBatch(model, beam_size=2)
    assert running.allocated() == 0
    first = srcs[:3]
    src = padded(first)
    running.join([0, 1, 2], src, pad_mask(src, 0), [3, 9, 9], [1, 1, 1])
    done = {}
    while 0 not in done:
        done.update(running.step())
    assert running.slots and running.buffers()[0] == 3  # the finished one's place is kept
    before = running.allocated()
    running.join([3], srcs[3], pad_mask(srcs[3], 0), [9], [1])
    assert running.allocated() == before and running.buffers()[0] == 3  # and taken again
    while len(running):
        done.update(running.step())
    want = alone(model, srcs[3], 9, 2, 1, "first_k", 1.0)
    assert [h.tokens for h in done[3]] == [t for t, _ in want]


@needs_kernel  # the slot layout is the attention kernels'
@pytest.mark.parametrize("prepared", [False, True])
def test_a_newcomer_in_a_wider_sentences_place_decodes_as_alone(prepared):
    """A short source takes the place of a finished long one (the rest of the place's
    cross-attention state is padding again), with a wider one and one in a new place joining
    at the same step; then a still wider one widens every place. Prepared: the whole decoder
    step and the cross-attention state in one C call each."""
    model = random_model(tiny_config(VOCAB), seed=18)
    if prepared:
        model = model.prepare_for_inference(packed=True)
    g = torch.Generator().manual_seed(28)

    def source(length: int) -> torch.Tensor:
        tokens = torch.randint(4, VOCAB, (1, length), generator=g)
        return torch.cat([tokens, torch.tensor([[3]])], 1)

    srcs = [source(n) for n in (14, 3, 9, 2, 11, 5, 20, 1)]
    limits = [2, 12, 2, 10, 12, 9, 8, 6]  # 0 and 2 finish first, leaving wide places
    joins_at = [0, 0, 0, 4, 4, 4, 6, 6]  # 3 and 5 take their places, 4 a new one; 6 widens
    running = RunningBatch(model, beam_size=2)
    seen = []
    join = running.join

    def spy(*args):
        free, width = sorted(running.free), running.buffers()[2]
        join(*args)
        seen.append((free, width, sorted(running.places), running.buffers()[2]))

    running.join = spy
    got = run_staggered(running, srcs, limits, [1] * 8, joins_at)
    assert running.slots
    assert seen[1] == ([0, 2], 15, [0, 1, 2, 3], 15)  # two places taken, one new; 12 < 15 wide
    assert seen[2][1:] == (15, [0, 1, 2, 3, 4, 5], 21)  # two new places, every place widened
    for i, src in enumerate(srcs):
        want = alone(model, src, limits[i], 2, 1, "first_k", 1.0)
        assert [t for t, _ in got[i]] == [t for t, _ in want], f"sentence {i}"
        assert [s for _, s in got[i]] == pytest.approx([s for _, s in want], abs=1e-4)


@needs_kernel  # the slot layout is the attention kernels'
@pytest.mark.parametrize("prepared", [False, True])
def test_a_newcomers_extra_beams_are_not_computed_in_its_first_step(monkeypatch, prepared):
    """A newcomer starts with one real row of its K (the others' score is -inf): its first
    step computes that row only, and the rows computed are those of the whole step (the same
    bits with packed layers, whose results do not depend on the other rows; torch's own
    matrix products may round differently with fewer rows)."""
    model = random_model(tiny_config(VOCAB), seed=17)
    if prepared:
        model = model.prepare_for_inference(packed=True)
    srcs = sources(27, 3)
    running = RunningBatch(model, beam_size=3)
    running.join([0], srcs[0], pad_mask(srcs[0], 0), [20], [1])
    running.step()
    running.step()
    rest = srcs[1:]
    src = padded(rest)
    running.join([1, 2], src, pad_mask(src, 0), [20, 20], [1, 1])

    whole_cache = copy.deepcopy(running.cache)
    whole = model.decode_step(running.tokens.clone(), whole_cache)  # all 9 rows
    computed = []
    decode_step = model.decode_step

    def counting(tokens, cache, rows=None):
        logits = decode_step(tokens, cache, rows=rows)
        computed.append(logits.shape[0])
        if rows is not None:
            if prepared:
                assert torch.equal(logits, whole[rows])
            else:
                torch.testing.assert_close(logits, whole[rows], rtol=0, atol=1e-5)
        return logits

    monkeypatch.setattr(model, "decode_step", counting)
    running.step()
    running.step()
    assert computed == [3 + 1 + 1, 9]
    done = {}
    while len(running):
        done.update(running.step())
    for i in (1, 2):
        want = alone(model, srcs[i], 20, 3, 1, "first_k", 1.0)
        assert [h.tokens for h in done[i]] == [t for t, _ in want]


@needs_kernel  # the slot layout is the attention kernels'
@pytest.mark.parametrize(
    ("beam_size", "stop", "prepared"),
    [(1, "first_k", False), (4, "first_k", True), (3, "heuristic", False)],
)
def test_sentences_that_sit_out_steps_decode_as_alone(beam_size, stop, prepared):
    """step(only=...): the sentences left out of a step (the scheduler steps a bounded share
    of a large running decode) keep their state, and each sentence's result is what it gets
    decoded alone, whichever steps it sat out, newcomers and finishing ones included."""
    model = random_model(tiny_config(VOCAB, **VARIANTS["marian-like"]), seed=19)
    if prepared:
        model = model.prepare_for_inference(packed=True)
    srcs = sources(29, 8)
    limits = [20, 5, 14, 20, 9, 3, 17, 12]
    n_bests = [min(beam_size, 1 + i % 3) for i in range(8)]
    joins_at = [0, 0, 1, 3, 3, 4, 7, 12]
    running = RunningBatch(model, beam_size=beam_size, length_penalty=0.8, stop=stop)
    assert running.partial_steps is False  # nothing joined yet: no layout
    sat_out = set()

    def choose(step, ids):  # different sentences left out each step, newcomers among them
        only = [sid for n, sid in enumerate(ids) if (n + step) % 3 != 0] or ids[:1]
        sat_out.update(set(ids) - set(only))
        return only

    results = run_staggered(running, srcs, limits, n_bests, joins_at, choose)
    assert running.partial_steps
    assert sat_out == set(range(8))
    for i, src in enumerate(srcs):
        want = alone(model, src, limits[i], beam_size, n_bests[i], stop, 0.8)
        assert [t for t, _ in results[i]] == [t for t, _ in want], f"sentence {i}"
        assert [s for _, s in results[i]] == pytest.approx([s for _, s in want], abs=1e-4)


def test_in_the_gather_layout_every_sentence_steps(monkeypatch):
    """The gather layout (a GPU, or no attention kernels) computes all rows in each step:
    `only` is ignored there, and partial_steps says so."""
    monkeypatch.setattr(fused, "ATTENTION_KERNELS", False)
    model = random_model(tiny_config(VOCAB), seed=20)
    srcs = sources(30, 2)
    src = padded(srcs)
    running = RunningBatch(model, beam_size=2)
    running.join(["a", "b"], src, pad_mask(src, 0), [30, 30], [1, 1])
    running.step(only=["a"])
    assert not running.partial_steps
    assert [s.step for s in running.sentences] == [1, 1]
