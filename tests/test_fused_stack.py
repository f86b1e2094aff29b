"""The encoder and each decoder step in one C call each (model_core/fused_stack.py) against the
per-layer path (model.EncoderLayer.forward_tokens, DecoderLayer.step) on the same prepared model:
the same bits in the decoder, in every search; the encoder's memory to float rounding."""

from __future__ import annotations

import pytest
import torch

from model_core import fused, fused_stack
from model_core.continuous import RunningBatch
from model_core.decoding import beam_search, greedy_search
from model_core.masks import pad_mask
from tests.conftest import random_model, tiny_config
from tests.test_continuous_decoding import run_staggered, sources
from tests.test_model_decoding import random_batch

pytestmark = pytest.mark.skipif(not fused.kernel_available(), reason="needs the C kernels")

VOCAB = 60
FITTING = {  # pre-norm ReLU decoders: the step runs on them
    "seeds": {},
    "output-bias, no embedding scale": {"output_bias": True, "scale_embeddings": False},
    "separate tables, suppressed ids": {
        "share_embeddings": False,
        "tie_output": False,
        "tgt_vocab_size": 70,
        "suppress_ids": (0, 5),
    },
    "halves, wider heads": {"position_layout": "halves", "n_heads": 2},
    # 1/sqrt(6) rounds differently as float(6 ** -0.5) and 1.0f / sqrtf(6.0f)
    "head_dim 6, scalar attention": {"d_model": 24, "n_heads": 4, "d_ff": 40},
}


class Counting:
    """A model's fused decoder step, counting the steps it ran (so that a test knows it was
    used), and switched off by `per_layer_path` (the fused encoder stays on for both runs)."""

    def __init__(self, step: fused_stack.DecoderStep):
        self.step, self.calls, self.enabled = step, 0, True

    def fits(self, cache) -> bool:
        return self.enabled and self.step.fits(cache)

    def fits_memory(self, memory) -> bool:
        return self.enabled and self.step.fits_memory(memory)

    def cross_kv(self, memory, src_mask):
        return self.step.cross_kv(memory, src_mask)

    def __call__(self, tokens, cache):
        self.calls += 1
        return self.step(tokens, cache)


def per_layer_path(model, fn):
    """fn() with the model's fused decoder step switched off."""
    model.fused_step.enabled = False
    try:
        return fn()
    finally:
        model.fused_step.enabled = True


def prepared(variant: str, seed: int = 3):
    """A prepared random model whose biases and LayerNorm weights are random too (each
    distinct, so that a kernel that took the wrong one would show)."""
    model = random_model(tiny_config(VOCAB, **FITTING[variant]), seed=seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn_like(p) * 0.3 + (1.0 if name.endswith("norm.weight") else 0))
    model.prepare_for_inference(packed=True, backend="panels")
    assert model.fused_step is not None and model.fused_encoder is not None
    model.fused_step = Counting(model.fused_step)
    return model


@pytest.mark.parametrize("variant", list(FITTING))
def test_each_step_gives_the_same_logits_as_the_per_layer_path(variant):
    model = prepared(variant)
    src, mask = random_batch(5, batch=6)

    def logits_of_steps(beams: int) -> list[torch.Tensor]:
        with torch.inference_mode():
            cache = model.init_cache(model.encode_tokens(src, mask), mask, 40, beams=beams)
            tokens = torch.full((6,), model.cfg.bos_id)
            seen = []
            for step in range(40):  # past the first 32 positions: the cache grows once
                logits = model.decode_step(tokens, cache)
                seen.append(logits)
                tokens = (logits.argmax(-1) + step) % model.cfg.tgt_vocab_size
            return seen

    fused_logits = logits_of_steps(1)
    assert model.fused_step.calls == 40
    per_layer = per_layer_path(model, lambda: logits_of_steps(1))
    assert model.fused_step.calls == 40
    for step, (a, b) in enumerate(zip(fused_logits, per_layer, strict=True)):
        assert torch.equal(a, b), f"step {step}"
    for i in model.cfg.suppress_ids:
        assert fused_logits[0][:, i].eq(float("-inf")).all()


@pytest.mark.parametrize("variant", list(FITTING))
@pytest.mark.parametrize("beam_size", [1, 4])
def test_searches_give_the_same_tokens_and_scores(variant, beam_size):
    model = prepared(variant, seed=7)
    src, mask = random_batch(8, batch=7)
    limits = torch.tensor([3, 25, 9, 25, 1, 17, 25])

    def search():
        if beam_size == 1:
            return [[(h.tokens, h.score, h.token_log_probs)] for h in greedy_search(
                model, src, mask, limits, 0.7)]  # fmt: skip
        hyps = beam_search(model, src, mask, limits, beam_size, 0.7, n_best=2)
        return [[(h.tokens, h.score) for h in n_best] for n_best in hyps]

    got = search()
    assert model.fused_step.calls > 0
    assert got == per_layer_path(model, search)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_continuous_decoding_with_rows_at_their_own_steps(beam_size):
    """Sentences joining a running decode: each row at its own position (row_steps), the
    cross-attention state replaced as they join."""
    model = prepared("seeds", seed=9)
    srcs = sources(31, 6)
    limits, joins = [16, 16, 8, 16, 4, 16], [0, 2, 2, 5, 6, 9]

    def run():
        running = RunningBatch(model, beam_size=beam_size)
        return run_staggered(running, srcs, limits, [1] * 6, joins)

    got = run()
    assert model.fused_step.calls > 0
    assert got == per_layer_path(model, run)


@pytest.mark.parametrize(
    ("overrides", "backend"),
    [
        ({"norm": "post"}, "panels"),
        ({"activation": "gelu"}, "panels"),
        ({}, "onednn"),
    ],
)
def test_models_it_does_not_fit_keep_the_per_layer_path(overrides, backend):
    if backend not in fused_backends():
        pytest.skip(f"{backend} is not built here")
    model = random_model(tiny_config(VOCAB, **overrides), seed=1)
    model.prepare_for_inference(packed=True, backend=backend)
    assert model.fused_step is None and model.fused_encoder is None
    model = random_model(tiny_config(VOCAB), seed=1).prepare_for_inference()  # not packed
    assert model.fused_step is None and model.fused_encoder is None


def fused_backends() -> list[str]:
    from model_core.model import packed_linear_backends

    return packed_linear_backends()


def test_the_step_is_dropped_when_the_weights_may_move():
    """unpack() (before int8 quantization) and .to() replace the tensors whose addresses the
    step holds; a copied model holds other tensors."""
    import copy

    model = random_model(tiny_config(VOCAB), seed=1).prepare_for_inference(packed=True)
    copied = copy.deepcopy(model)
    assert copied.fused_step is None and copied.fused_encoder is None
    assert model.fused_step is not None and model.fused_encoder is not None
    model.to(torch.float32)
    assert model.fused_step is None and model.fused_encoder is None
    model = random_model(tiny_config(VOCAB), seed=1).prepare_for_inference(packed=True)
    model.unpack()
    assert model.fused_step is None and model.fused_encoder is None


def test_an_out_of_range_token_is_an_error_not_a_read_past_the_table():
    model = prepared("seeds")
    src, mask = random_batch(2, batch=2)
    with torch.inference_mode():
        cache = model.init_cache(model.encode_tokens(src, mask), mask, 8)
        with pytest.raises(IndexError):
            model.decode_step(torch.tensor([1, VOCAB]), cache)
        with pytest.raises(IndexError):
            model.decode_step(torch.tensor([-1, 4]), cache)
        assert cache.length == 0
        logits = model.decode_step(torch.tensor([4, 5]), cache)
    assert model.fused_step.calls == 3
    assert logits.shape == (2, VOCAB) and torch.isfinite(logits).all()


def test_padding_keeps_a_sentence_from_reading_another():
    """The step on a batch equals the step on each sentence alone (bit for bit)."""
    model = prepared("seeds", seed=4)
    src, mask = random_batch(12, batch=5)
    assert model.fused_step is not None
    with torch.inference_mode():
        limits = torch.full((5,), 12)
        batch = greedy_search(model, src, mask, limits)
        for i, hyp in enumerate(batch):
            n = int(mask[i, 0, 0].sum())
            one = src[i : i + 1, :n]
            alone = greedy_search(model, one, pad_mask(one, 0), limits[:1])[0]
            assert (alone.tokens, alone.score) == (hyp.tokens, hyp.score)


@pytest.mark.parametrize("variant", list(FITTING))
def test_the_encoder_in_one_call_gives_the_per_layer_memory(variant):
    """Every layer the same kernels; only the final LayerNorm is another implementation."""
    model = prepared(variant, seed=6)
    src, mask = random_batch(14, batch=7)
    with torch.inference_mode():
        fused_memory = model.encode_tokens(src, mask)
        fused_stack.ENABLED = False
        try:
            per_layer = model.encode_tokens(src, mask)
        finally:
            fused_stack.ENABLED = True
    real = mask.view(7, -1, 1)
    assert torch.allclose(fused_memory, per_layer, atol=1e-5, rtol=1e-5)
    assert fused_memory.masked_select(~real).eq(0).all()  # padding: zeros, as encode_tokens
    assert fused_memory.abs().sum() > 0


def test_the_encoder_gives_each_sentence_the_same_bits_alone_as_in_a_batch():
    model = prepared("seeds", seed=2)
    src, mask = random_batch(15, batch=6)
    with torch.inference_mode():
        batch = model.encode_tokens(src, mask)
        for i in range(6):
            n = int(mask[i, 0, 0].sum())
            one = src[i : i + 1, :n]
            assert torch.equal(model.encode_tokens(one, pad_mask(one, 0))[0], batch[i, :n])


def test_cross_attention_state_in_one_call_equals_each_layers_projection():
    model = prepared("output-bias, no embedding scale", seed=8)
    src, mask = random_batch(16, batch=5)
    with torch.inference_mode():
        memory = model.encode_tokens(src, mask)
        fused_cache = model.init_cache(memory, mask, 8, beams=2)
        per_layer = per_layer_path(model, lambda: model.init_cache(memory, mask, 8, beams=2))
    real = mask.view(5, 1, -1, 1)  # (B, 1, S, 1) against (B, h, S, hd)
    for a, b in zip(
        fused_cache.cross_k + fused_cache.cross_v,
        per_layer.cross_k + per_layer.cross_v,
        strict=True,
    ):
        assert a.shape == b.shape
        assert torch.equal(a.masked_select(real), b.masked_select(real))


def test_an_out_of_range_source_id_is_an_error():
    model = prepared("seeds")
    src = torch.tensor([[4, VOCAB, 3]])
    with torch.inference_mode(), pytest.raises(IndexError):
        model.encode_tokens(src, pad_mask(src, 0))
