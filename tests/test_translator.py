"""The Translator entry point: device/dtype choice, order, edge inputs, options."""

import pytest
import torch

from model_core.int8 import Int8Linear
from model_core.model import PackedLinear, packed_linear_available, packed_linear_backends
from model_core.translator import Translator, resolve_device, resolve_dtype


@pytest.fixture(scope="module")
def translator(random_checkpoint):
    return Translator.load(random_checkpoint, device="auto", dtype="auto")


def test_auto_device_and_dtype():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    with pytest.raises(ValueError, match="dtype"):
        resolve_dtype("int3", torch.device("cpu"))


def test_results_come_back_in_input_order(translator):
    texts = ["A big red car is very fast today.", "The cat.", "We eat bread.", "I see a tree."]
    batch = translator.translate_batch(texts, beam_size=1)
    alone = [translator.translate_batch([t], beam_size=1)[0].text for t in texts]
    assert [r.text for r in batch] == alone


@pytest.mark.parametrize("fixed", [False, True])
def test_sentences_joining_a_running_decode_count_their_sources_as_the_mask_does(translator, fixed):
    """Translator.join gives the running decode each source's length (tokens + EOS) from the
    host (reading it from the mask would wait for a GPU): what admission's envelope counts."""
    ids = [translator.source_tokenizer.encode(t) for t in ("A big red car.", "We eat.", "Hi")]
    running = translator.running_batch(2, fixed=fixed)
    translator.join(running, [0, 1, 2], ids, [20] * 3, [1] * 3)
    _, mask = translator.batch_tensors(ids)
    assert [s.source_len for s in running.sentences] == mask.reshape(3, -1).sum(1).tolist()
    assert running.envelope()[1] == 3 * max(len(x) + 1 for x in ids)


def test_reference_decoder_matches_fast_path(translator):
    texts = ["A big red car is very fast today.", "The cat.", "We eat bread."]
    fast = translator.translate_batch(texts, beam_size=1)
    ref = translator.translate_batch(texts, beam_size=1, reference=True)
    assert [r.hypotheses[0].ids for r in fast] == [r.hypotheses[0].ids for r in ref]


def test_empty_and_whitespace_inputs_translate_to_empty(translator):
    results = translator.translate_batch(["", "The dog.", "   "])
    assert results[0].text == "" and results[2].text == ""
    assert results[0].source_tokens == 0


def test_n_best_returns_sorted_alternatives(translator):
    result = translator.translate_batch(["The small green house."], beam_size=4, n_best=3)[0]
    assert len(result.hypotheses) == 3
    scores = [h.score for h in result.hypotheses]
    assert scores == sorted(scores, reverse=True)
    assert len({tuple(h.ids) for h in result.hypotheses}) == 3


def test_output_length_is_capped(translator):
    result = translator.translate_batch(["The cat is big."], beam_size=1, max_length=3)[0]
    assert len(result.hypotheses[0].ids) <= 3


def test_too_long_source_is_refused_with_a_clear_message(translator):
    with pytest.raises(ValueError, match="at most 255"):
        translator.translate_batch(["the cat " * 300])


def test_invalid_options(translator):
    with pytest.raises(ValueError):
        translator.translate_batch(["x"], beam_size=2, n_best=3)
    with pytest.raises(ValueError, match="reference"):
        translator.translate_batch(["x"], beam_size=4, reference=True)
    with pytest.raises(ValueError, match="n_best"):
        translator.translate_ids([[5, 6]], beam_size=1, n_best=2)
    with pytest.raises(TypeError, match="beam_width"):  # a misspelt option is not ignored
        translator.translate_batch(["x"], beam_width=2)


def test_half_precision_on_cpu_matches_float32(random_checkpoint):
    """The dtype path the GPU uses, exercised on the CPU: bfloat16 runs and agrees closely."""
    fp32 = Translator.load(random_checkpoint, device="cpu", dtype="float32")
    bf16 = Translator.load(random_checkpoint, device="cpu", dtype="bfloat16")
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    texts = ["The cat is big.", "We eat bread today."]
    a = fp32.translate_batch(texts, beam_size=1)
    b = bf16.translate_batch(texts, beam_size=1)
    for x, y in zip(a, b, strict=True):
        assert y.hypotheses[0].score == pytest.approx(x.hypotheses[0].score, abs=0.15)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_half_precision_fast_equals_reference(random_checkpoint, dtype):
    tr = Translator.load(random_checkpoint, device="cuda", dtype=dtype)
    texts = ["A big red car is very fast today.", "The cat.", "We eat bread."]
    fast = tr.translate_batch(texts, beam_size=1)
    ref = tr.translate_batch(texts, beam_size=1, reference=True)
    assert [r.hypotheses[0].ids for r in fast] == [r.hypotheses[0].ids for r in ref]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_decoding_never_runs_cudnn_attention(random_checkpoint):
    """cuDNN's attention builds a plan per input shape: a decode whose keys grow each step
    would pay it at nearly every step of a batch of a new size. (It can fail only where
    torch would choose cuDNN, as on an H100 or H200 in bfloat16.)"""
    from torch.profiler import ProfilerActivity, profile

    from app.engine import decode_continuously

    tr = Translator.load(random_checkpoint, device="cuda", dtype="bfloat16")
    texts = ["A big red car is very fast today.", "The cat.", "We eat bread."]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        tr.translate_batch(texts, beam_size=2)
        tr.translate_batch(texts[:1], beam_size=1, reference=True)
        decode_continuously(tr, [tr.encode_source(t) for t in texts], 2, max_length=12)
    names = {e.name for e in prof.events()}
    assert any("attention" in n for n in names)  # the profile sees the attention calls
    assert not [n for n in names if "cudnn_attention" in n]


def test_a_model_on_cuda_turns_cudnn_attention_off_one_on_the_cpu_leaves_it(random_checkpoint):
    """The GPU is what cannot run here: the Translator gets a CUDA device over a model loaded
    on the CPU (at construction it only reads the device's type)."""
    from model_core.checkpoint import load_checkpoint

    cpu = torch.device("cpu")
    before = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(True)
    try:
        Translator(load_checkpoint(random_checkpoint, device=cpu), cpu, torch.float32)
        assert torch.backends.cuda.cudnn_sdp_enabled()
        checkpoint = load_checkpoint(random_checkpoint, device=cpu)
        Translator(checkpoint, torch.device("cuda"), torch.float32)
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)


def test_int8_quantization_keeps_the_model_close(random_checkpoint):
    fp32 = Translator.load(random_checkpoint, device="cpu")
    int8 = Translator.load(random_checkpoint, device="cpu").quantize_int8()
    assert int8.quantized and isinstance(int8.model.generator, Int8Linear)
    texts = ["The cat is big.", "We eat bread today.", "A red car."]
    src, mask = fp32.batch_tensors([fp32.encode_source(t) for t in texts])
    with torch.no_grad():
        bos = torch.full((3, 1), fp32.config.bos_id)
        a = fp32.model.log_probs(fp32.model.decode(fp32.model.encode(src, mask), mask, bos, None))
        b = int8.model.log_probs(int8.model.decode(int8.model.encode(src, mask), mask, bos, None))
    assert torch.equal(a.argmax(-1), b.argmax(-1))
    assert (a.exp() - b.exp()).abs().max() < 0.05  # next-token distributions nearly equal
    results = int8.translate_batch(texts, beam_size=2)
    assert len(results) == 3 and all(r.hypotheses for r in results)


needs_packed = pytest.mark.skipif(
    not packed_linear_available(), reason="no PackedLinear backend (C kernels or oneDNN) here"
)


@needs_packed
def test_packed_weights_translate_like_plain_weights(random_checkpoint):
    packed = Translator.load(random_checkpoint, device="cpu")  # auto: packed on CPU float32
    plain = Translator.load(random_checkpoint, device="cpu", packed=False)
    assert packed.packed and not plain.packed
    assert isinstance(packed.model.generator, PackedLinear)
    assert not any(isinstance(m, PackedLinear) for m in plain.model.modules())
    texts = ["The cat is big.", "A big red car is very fast today.", "Water.", "We eat bread."]
    for beam in (1, 4):
        a = packed.translate_batch(texts, beam_size=beam, n_best=beam)
        b = plain.translate_batch(texts, beam_size=beam, n_best=beam)
        assert [[h.ids for h in r.hypotheses] for r in a] == [
            [h.ids for h in r.hypotheses] for r in b
        ]
        for x, y in zip(a, b, strict=True):
            assert [h.score for h in x.hypotheses] == pytest.approx(
                [h.score for h in y.hypotheses], abs=1e-4
            )
    # the packed model still describes itself with plain tensors (it can be checkpointed)
    for (name, p), (_, q) in zip(
        packed.model.state_dict().items(), plain.model.state_dict().items(), strict=True
    ):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("backend", ["panels", "onednn"])
def test_packed_linear_operations_match_plain_linear_algebra(backend):
    if backend not in packed_linear_backends():
        pytest.skip(f"PackedLinear backend {backend} is not available here")
    torch.manual_seed(0)
    linear = torch.nn.Linear(24, 40)
    packed = PackedLinear(linear, backend=backend)
    assert packed.backend == backend
    x, residual = torch.randn(5, 24), torch.randn(5, 40)
    with torch.no_grad():
        expected = linear(x)
        torch.testing.assert_close(packed(x), expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(
            packed(x, activation="relu"), expected.relu(), atol=1e-5, rtol=1e-5
        )
        torch.testing.assert_close(
            packed.add_to(x, residual), expected + residual, atol=1e-5, rtol=1e-5
        )
        back = packed.to_linear()
        assert torch.equal(back.weight, linear.weight) and torch.equal(back.bias, linear.bias)


@needs_packed
def test_int8_after_packing_starts_from_the_plain_weights(random_checkpoint):
    int8 = Translator.load(random_checkpoint, device="cpu").quantize_int8()
    assert not int8.packed and int8.precision == "int8"
    assert not any(isinstance(m, PackedLinear) for m in int8.model.modules())
    assert int8.translate_batch(["The cat is big."], beam_size=2)[0].text


def test_int8_translates_a_sentence_the_same_in_any_batch(random_checkpoint):
    # Each input row gets its own int8 scale, so what else is in the batch (other requests'
    # sentences, in the service) cannot change a sentence's translation or its scores.
    int8 = Translator.load(random_checkpoint, device="cpu").quantize_int8()
    texts = [
        "The cat is big.",
        "We eat bread today, and tomorrow we will eat rice with the neighbours.",
        "A red car.",
        "Is it raining?",
        "My brother reads a very long book about the history of the old city.",
        "Yes.",
        "The children play in the garden while their parents cook dinner.",
        "I don't know what you mean.",
    ] * 2
    for beam in (1, 3):
        batch = int8.translate_batch(texts, beam_size=beam, n_best=beam)
        for text, together in zip(texts, batch, strict=True):
            alone = int8.translate_batch([text], beam_size=beam, n_best=beam)[0]
            assert [h.ids for h in alone.hypotheses] == [h.ids for h in together.hypotheses]
            assert [h.score for h in alone.hypotheses] == pytest.approx(
                [h.score for h in together.hypotheses], abs=1e-5
            ), text


def test_a_device_this_machine_lacks_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto").type == "cpu"
    assert resolve_device("cpu").type == "cpu"
    with pytest.raises(ValueError, match="no CUDA GPU"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="use auto, cpu, cuda or cuda:N"):
        resolve_device("gpu")
