"""The whole decoder step in one C call (model_core/decoder_step.py) against the per-layer path
(model.DecoderLayer.step) on the same prepared model: the same bits, in every search."""

from __future__ import annotations

import pytest
import torch

from model_core import decoder_step, fused
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
}


@pytest.fixture
def per_layer_path():
    """Run the body with the fused step turned off; on again afterwards."""

    def run(fn):
        decoder_step.ENABLED = False
        try:
            return fn()
        finally:
            decoder_step.ENABLED = True

    return run


class Counting:
    """A model's fused step, counting the steps it ran (so that a test knows it was used)."""

    def __init__(self, step: decoder_step.DecoderStep):
        self.step, self.calls = step, 0

    def fits(self, cache) -> bool:
        return self.step.fits(cache)

    def __call__(self, tokens, cache):
        self.calls += 1
        return self.step(tokens, cache)


def prepared(variant: str, seed: int = 3):
    """A prepared random model whose biases and LayerNorm weights are random too (each
    distinct, so that a kernel that took the wrong one would show)."""
    model = random_model(tiny_config(VOCAB, **FITTING[variant]), seed=seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn_like(p) * 0.3 + (1.0 if name.endswith("norm.weight") else 0))
    model.prepare_for_inference(packed=True, backend="panels")
    assert model.fused_step is not None
    model.fused_step = Counting(model.fused_step)
    return model


@pytest.mark.parametrize("variant", list(FITTING))
def test_each_step_gives_the_same_logits_as_the_per_layer_path(variant, per_layer_path):
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
    per_layer = per_layer_path(lambda: logits_of_steps(1))
    assert model.fused_step.calls == 40
    for step, (a, b) in enumerate(zip(fused_logits, per_layer, strict=True)):
        assert torch.equal(a, b), f"step {step}"
    for i in model.cfg.suppress_ids:
        assert fused_logits[0][:, i].eq(float("-inf")).all()


@pytest.mark.parametrize("variant", list(FITTING))
@pytest.mark.parametrize("beam_size", [1, 4])
def test_searches_give_the_same_tokens_and_scores(variant, beam_size, per_layer_path):
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
    assert got == per_layer_path(search)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_continuous_decoding_with_rows_at_their_own_steps(beam_size, per_layer_path):
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
    assert got == per_layer_path(run)


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
    assert model.prepare_for_inference(packed=True, backend=backend).fused_step is None
    assert random_model(tiny_config(VOCAB), seed=1).prepare_for_inference().fused_step is None


def fused_backends() -> list[str]:
    from model_core.model import packed_linear_backends

    return packed_linear_backends()


def test_the_step_is_dropped_when_the_weights_may_move():
    """unpack() (before int8 quantization) and .to() replace the tensors whose addresses the
    step holds; a copied model holds other tensors."""
    import copy

    model = random_model(tiny_config(VOCAB), seed=1).prepare_for_inference(packed=True)
    assert copy.deepcopy(model).fused_step is None
    assert model.fused_step is not None
    model.to(torch.float32)
    assert model.fused_step is None
    model = random_model(tiny_config(VOCAB), seed=1).prepare_for_inference(packed=True)
    assert model.unpack().fused_step is None


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
