"""model_core.linear_backend: choosing the packed linear backend for the CPU, and each
backend against a plain float64 reference."""

import json
from pathlib import Path

import pytest
import torch

from app.engine import StartupError, start_engine
from app.settings import Settings
from model_core import fused
from model_core import linear_backend as lb
from model_core.linear_backend import available_backends, cache_key, choose_linear_backend
from model_core.model import PackedLinear
from model_core.translator import Translator
from tests.conftest import skip_unless_batch_invariant

SHAPES = ((48, 16), (16, 48))
WEIGHTS = Path(__file__).resolve().parent.parent / "weights"


def never(backends, shapes):
    raise AssertionError("no micro-benchmark expected")


def every(backend, shapes) -> bool:  # a batch-invariance check that every backend passes
    return True


def fake_timer(times: dict[str, float], calls: list):
    def timer(backends, shapes):
        calls.extend(backends)
        return {b: times[b] for b in backends}

    return timer


def test_a_named_backend_is_used_and_checked(tmp_path):
    for name in ("panels", "onednn"):
        got = choose_linear_backend(
            name,
            SHAPES,
            cache_path=tmp_path / "c.json",
            available=["panels", "onednn"],
            timer=never,
        )
        assert got == name
    with pytest.raises(ValueError, match="not available here"):
        choose_linear_backend("onednn", SHAPES, available=["panels"], timer=never)
    with pytest.raises(ValueError, match="choose one of"):
        choose_linear_backend("mkl", SHAPES, available=["panels"], timer=never)
    with pytest.raises(ValueError, match="no packed linear backend"):
        choose_linear_backend("auto", SHAPES, available=[], timer=never)


def test_auto_with_one_backend_built_takes_it_without_measuring(tmp_path):
    for only in ("panels", "onednn"):
        got = choose_linear_backend(
            "auto", SHAPES, cache_path=tmp_path / "c.json", available=[only], timer=never
        )
        assert got == only


def test_auto_without_a_vectorised_panels_kernel_takes_onednn(tmp_path):
    got = choose_linear_backend(
        "auto",
        SHAPES,
        cache_path=tmp_path / "c.json",
        available=["panels", "onednn"],
        vectorised=False,
        timer=never,
        invariant=every,
    )
    assert got == "onednn"


@pytest.mark.parametrize(
    "machine,capability,expected",
    [
        ("x86_64", "AVX512", True),
        ("x86_64", "AVX2", True),
        ("x86_64", "DEFAULT", False),
        ("aarch64", "SVE256", False),
        ("arm64", "DEFAULT", False),
    ],
)
def test_panels_kernel_is_vectorised_only_on_x86_with_avx2(machine, capability, expected):
    assert lb.panels_vectorised(machine, capability) is expected


@pytest.mark.parametrize("faster", ["panels", "onednn"])
def test_auto_measures_once_then_reads_the_cache(tmp_path, faster):
    cache = tmp_path / "sub" / "c.json"
    times = {"panels": 2.0, "onednn": 1.0} if faster == "onednn" else {"panels": 1.0, "onednn": 3.0}
    calls: list = []
    kw = {"cache_path": cache, "available": ["panels", "onednn"], "vectorised": True}
    kw["invariant"] = every
    assert choose_linear_backend("auto", SHAPES, timer=fake_timer(times, calls), **kw) == faster
    assert sorted(calls) == ["onednn", "panels"]
    entry = json.loads(cache.read_text())[cache_key(SHAPES, torch.get_num_threads())]
    assert entry["backend"] == faster and entry["relative_cost"] == times
    assert choose_linear_backend("auto", SHAPES, timer=never, **kw) == faster
    # other shapes are another entry: measured again
    calls.clear()
    other = ((32, 8),)
    assert choose_linear_backend("auto", other, timer=fake_timer(times, calls), **kw) == faster
    assert len(calls) == 2 and len(json.loads(cache.read_text())) == 2


def test_cache_key_depends_on_threads_and_shapes():
    assert cache_key(SHAPES, 1) != cache_key(SHAPES, 2)
    assert cache_key(SHAPES, 2) != cache_key(SHAPES[:1], 2)
    assert cache_key(SHAPES, 2) == cache_key(SHAPES, 2)


def test_a_corrupt_or_stale_cache_is_measured_again(tmp_path):
    cache = tmp_path / "c.json"
    kw = {"cache_path": cache, "available": ["panels", "onednn"], "vectorised": True}
    kw["invariant"] = every
    times = {"panels": 1.0, "onednn": 2.0}
    cache.write_text("{not json")
    calls: list = []
    assert choose_linear_backend("auto", SHAPES, timer=fake_timer(times, calls), **kw) == "panels"
    assert len(calls) == 2
    # a cached backend that is not built any more is not trusted
    key = cache_key(SHAPES, torch.get_num_threads())
    cache.write_text(json.dumps({key: {"backend": "gone"}}))
    calls.clear()
    assert choose_linear_backend("auto", SHAPES, timer=fake_timer(times, calls), **kw) == "panels"
    assert len(calls) == 2


def test_an_unwritable_cache_still_chooses(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    got = choose_linear_backend(
        "auto",
        SHAPES,
        cache_path=blocker / "c.json",  # its parent is a file
        available=["panels", "onednn"],
        vectorised=True,
        timer=fake_timer({"panels": 1.0, "onednn": 2.0}, []),
        invariant=every,
    )
    assert got == "panels"


@pytest.mark.parametrize("vectorised", [True, False])
def test_auto_leaves_out_a_backend_that_gives_a_row_other_bits_in_a_batch(
    tmp_path, caplog, vectorised
):
    # as oneDNN did on an Intel Xeon with AMX: faster, but a sentence would translate
    # differently alone and in a batch; without vector code the own kernel is still taken
    cache = tmp_path / "c.json"
    checked: list = []

    def only_panels(backend, shapes):
        checked.append(backend)
        return backend == "panels"

    kw = {"cache_path": cache, "available": ["panels", "onednn"], "vectorised": vectorised}
    with caplog.at_level("WARNING", logger="model_core.linear_backend"):
        got = choose_linear_backend(
            "auto", SHAPES, timer=fake_timer({"panels": 3.0, "onednn": 1.0}, []),
            invariant=only_panels, **kw,
        )  # fmt: skip
    assert got == "panels" and checked == ["onednn"]  # panels gives the same bits by design
    assert "onednn left out" in caplog.text
    entry = json.loads(cache.read_text())[cache_key(SHAPES, torch.get_num_threads())]
    assert entry["backend"] == "panels"
    assert entry["batch_invariant"] == {"panels": True, "onednn": False}
    # the next start reads the choice: no check, no measurement
    assert choose_linear_backend("auto", SHAPES, timer=never, invariant=never, **kw) == "panels"


@pytest.mark.parametrize("kind", ["plain", "norm_relu", "residual"])
def test_the_batch_invariance_check_catches_rows_that_depend_on_the_batch(monkeypatch, kind):
    shapes = ((48, 16), (16, 16))  # the square one adds a residual
    passing = [b for b in available_backends() if lb.batch_invariant(b, shapes)]
    if not passing:  # panels passes wherever it is built (by design; tested above)
        pytest.skip("no backend built here gives a row the same bits in any batch")
    backend = passing[0]
    # one call kind whose rows move by a rounding step with the batch's row count
    method = "add_to" if kind == "residual" else "forward"
    inner = getattr(PackedLinear, method)

    def drifting(self, x, *args, **kwargs):
        out = inner(self, x, *args, **kwargs)
        if (kind == "norm_relu") == ("norm" in kwargs) and x.shape[0] == lb.INVARIANCE_BATCH:
            out = out + 1e-6
        return out

    monkeypatch.setattr(PackedLinear, method, drifting)
    assert not lb.batch_invariant(backend, shapes)


def test_the_real_micro_benchmark_times_every_backend_built_here(tmp_path):
    times = lb.time_backends(available_backends(), SHAPES, rounds=2)
    assert set(times) == set(available_backends())
    assert min(times.values()) >= 1.0 and all(t < 1e3 for t in times.values())
    got = choose_linear_backend("auto", SHAPES, cache_path=tmp_path / "c.json")
    assert got in available_backends()


@pytest.mark.parametrize("backend", ["panels", "onednn"])
@pytest.mark.parametrize("rows", [1, 7, 64, 300])
def test_each_backend_matches_a_float64_reference(backend, rows):
    if backend not in available_backends():
        pytest.skip(f"{backend} is not built here")
    torch.manual_seed(rows)
    k, n = 256, 1024
    linear = torch.nn.Linear(k, n)
    norm = torch.nn.LayerNorm(k)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    layer = PackedLinear(linear, backend=backend)
    x, residual = torch.randn(rows, k), torch.randn(rows, n)
    w, b = linear.weight.double(), linear.bias.double()
    normed = torch.nn.functional.layer_norm(
        x.double(), (k,), norm.weight.double(), norm.bias.double(), norm.eps
    )
    with torch.inference_mode():
        tol = {"atol": 1e-4, "rtol": 1e-4}
        torch.testing.assert_close(layer(x).double(), x.double() @ w.T + b, **tol)
        torch.testing.assert_close(
            layer(x, activation="relu", norm=norm).double(), (normed @ w.T + b).relu(), **tol
        )
        torch.testing.assert_close(
            layer.add_to(x, residual).double(), x.double() @ w.T + b + residual.double(), **tol
        )


@pytest.mark.parametrize("backend", ["panels", "onednn"])
def test_each_backend_gives_a_row_the_same_bits_at_encoder_sizes(backend, tmp_path):
    # the encoder runs all of a batch's tokens at once: hundreds to thousands of rows
    if backend not in available_backends():
        pytest.skip(f"{backend} is not built here")
    skip_unless_batch_invariant(backend, ((1024, 256),), tmp_path)
    torch.manual_seed(1)
    layer = PackedLinear(torch.nn.Linear(256, 1024), backend=backend)
    x = torch.randn(2048, 256)
    with torch.inference_mode():
        full = layer(x)
        for rows in (1, 5, 100, 257, 1000):
            assert torch.equal(layer(x[:rows]), full[:rows])
            assert torch.equal(layer(x[-rows:]), full[-rows:])


@pytest.mark.parametrize("backend", ["panels", "onednn"])
def test_a_shipped_model_translates_a_sentence_the_same_alone_and_in_a_batch(backend, tmp_path):
    if backend not in available_backends():
        pytest.skip(f"{backend} is not built here")
    translator = Translator.load(WEIGHTS / "en-de", device="cpu", linear_backend=backend)
    assert translator.linear_backend == backend
    skip_unless_batch_invariant(backend, translator.linear_shapes, tmp_path)
    texts = ["The weather is nice today.", "Where is the station?", "I like tea.", "Yes."]
    for beam in (1, 4):
        together = translator.translate_batch(texts, beam_size=beam)
        for text, result in zip(texts, together, strict=True):
            alone = translator.translate_batch([text], beam_size=beam)[0]
            assert alone.hypotheses[0].ids == result.hypotheses[0].ids
            assert alone.hypotheses[0].score == result.hypotheses[0].score


def test_the_service_refuses_a_backend_not_built_here(monkeypatch):
    monkeypatch.setattr("app.engine.available_backends", lambda: ["panels"])
    with pytest.raises(StartupError, match="MT_LINEAR_BACKEND=onednn: not built here"):
        start_engine(Settings(weights_dir=WEIGHTS, device="cpu", linear_backend="onednn"))


@pytest.mark.skipif(not fused.kernel_available(), reason="model_core's C kernels are not built")
@pytest.mark.parametrize("k,n", [(256, 1024), (1024, 256), (64, 40), (24, 8000)])
def test_the_linear_kernels_avx512_and_avx2_tiles_give_the_same_bits(monkeypatch, k, n):
    # both levels run where the CPU has AVX-512; on a CPU without it both run AVX2 (and the
    # test compares a path with itself), which the returned level tells apart below
    torch.manual_seed(n)
    weight = fused.PackedWeight(torch.randn(n, k), torch.randn(n))
    norm = torch.nn.LayerNorm(k)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    x, residual = torch.randn(157, k), torch.randn(157, n)
    outputs = {}
    for isa in (1, 2):
        monkeypatch.setattr(fused, "LINEAR_MAX_ISA", isa)
        with torch.inference_mode():
            outputs[isa] = [
                weight(x[:rows], relu=relu, residual=None if res is None else res[:rows], norm=nm)
                for rows in (1, 5, 12, 13, 24, 30, 157)
                for relu, res, nm in (
                    (False, None, None),
                    (True, None, norm),
                    (False, residual, None),
                )
            ]
    for a, b in zip(outputs[1], outputs[2], strict=True):
        assert torch.equal(a, b)
    # a row in a batch of 157 (12-row AVX-512 tiles) equals the row alone (1-row path)
    monkeypatch.setattr(fused, "LINEAR_MAX_ISA", 2)
    with torch.inference_mode():
        full = weight(x, norm=norm)
        for r in (0, 11, 12, 150, 156):
            assert torch.equal(weight(x[r : r + 1], norm=norm), full[r : r + 1])


@pytest.mark.skipif(not fused.kernel_available(), reason="model_core's C kernels are not built")
def test_the_linear_kernel_reports_the_level_it_ran():
    w = fused.PackedWeight(torch.randn(32, 16))
    x, out = torch.randn(24, 16), torch.empty(24, 32)
    levels = []
    for isa in (0, 1, 2):
        levels.append(
            fused._kernels.linear(
                x.data_ptr(),
                16,
                24,
                16,
                w.panels.data_ptr(),
                32,
                0,
                0,
                0,
                0,
                out.data_ptr(),
                32,
                1,
                0,
                0,
                0.0,
                isa,
            )  # fmt: skip
        )
        torch.testing.assert_close(out, x @ w.dense().T, atol=1e-5, rtol=1e-5)
    assert levels[0] == 0 and levels[1] <= 1 and levels[2] <= 2
    if "avx512f" in Path("/proc/cpuinfo").read_text():
        assert levels == [0, 1, 2]
