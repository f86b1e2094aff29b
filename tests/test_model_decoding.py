"""The model's shape and variants, and the decoders checked against each other."""

import pytest
import torch
import torch.nn.functional as F

from model_core.config import ModelConfig
from model_core.decoding import (
    beam_search,
    greedy_search,
    length_normalise,
    reference_greedy_search,
)
from model_core.masks import pad_mask
from model_core.model import (
    PackedLinear,
    Transformer,
    count_parameters,
    packed_linear_available,
    packed_linear_backends,
    sinusoidal_table,
)
from model_core.translator import Translator
from tests.conftest import (
    random_model,
    save_random_checkpoint,
    skip_unless_batch_invariant,
    tiny_config,
)

VOCAB = 60
VARIANTS = {
    "seeds": {},
    "post-norm": {"norm": "post"},
    "gelu": {"activation": "gelu"},
    "swish": {"activation": "swish"},
    "halves": {"position_layout": "halves"},
    "separate-embeddings": {"share_embeddings": False, "tie_output": False, "tgt_vocab_size": 70},
    "output-bias": {"output_bias": True},
    "marian-like": {
        "norm": "post",
        "activation": "swish",
        "position_layout": "halves",
        "output_bias": True,
    },
}


def random_batch(seed: int, vocab: int = VOCAB, batch: int = 6):
    """Mixed-length sources: (B, S) ids ending in EOS, padded with 0."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 12, (batch,), generator=g)
    src = torch.zeros(batch, int(lengths.max()) + 1, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(4, vocab, (n,), generator=g)
        src[i, n] = 3
    return src, pad_mask(src, 0)


def teacher_forced_score(model, src, tokens, ended, alpha):
    """Sum of log-probs of tokens (+EOS if ended) under teacher forcing, length-normalised."""
    cfg = model.cfg
    target = tokens + ([cfg.eos_id] if ended else [])
    tgt_in = torch.tensor([[cfg.bos_id] + target[:-1]])
    with torch.no_grad():
        logp = F.log_softmax(model(src, tgt_in).float(), dim=-1)[0]
    total = logp[torch.arange(len(target)), torch.tensor(target)].sum().item()
    return length_normalise(total, len(target), alpha)


def test_base_parameter_count_matches_the_seeds_formula():
    d, vocab = 512, 1000
    cfg = ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab)
    assert count_parameters(Transformer(cfg)) == 168 * d * d + 196 * d + vocab * d
    with_bias = ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, output_bias=True)
    assert count_parameters(Transformer(with_bias)) == 168 * d * d + 196 * d + vocab * d + vocab


def test_positional_layouts():
    inter = sinusoidal_table(50, 8, "interleaved")
    halves = sinusoidal_table(50, 8, "halves")
    assert torch.allclose(inter[:, 0::2], halves[:, :4]) and torch.allclose(
        inter[:, 1::2], halves[:, 4:]
    )
    assert inter[0].tolist() == [0, 1, 0, 1, 0, 1, 0, 1]
    assert inter[7, 0].item() == pytest.approx(torch.sin(torch.tensor(7.0)).item())


def test_tying_switches_share_storage():
    tied = Transformer(tiny_config(VOCAB))
    assert tied.generator.weight is tied.tgt_embed.weight is tied.src_embed.weight
    sep = Transformer(tiny_config(VOCAB, **VARIANTS["separate-embeddings"]))
    assert sep.generator.weight is not sep.tgt_embed.weight
    assert sep.tgt_embed.weight is not sep.src_embed.weight


def test_post_norm_has_no_final_stack_norm_and_pre_norm_does():
    assert isinstance(Transformer(tiny_config(VOCAB)).encoder_norm, torch.nn.LayerNorm)
    assert isinstance(Transformer(tiny_config(VOCAB, norm="post")).encoder_norm, torch.nn.Identity)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_fast_greedy_equals_reference_greedy(variant):
    model = random_model(tiny_config(VOCAB, **VARIANTS[variant]), seed=1)
    for seed in range(3):
        src, mask = random_batch(seed)
        limits = torch.full((src.shape[0],), 25)
        fast = greedy_search(model, src, mask, limits)
        ref = reference_greedy_search(model, src, mask, limits)
        for f, r in zip(fast, ref, strict=True):
            assert f.tokens == r.tokens
            assert f.finished == r.finished
            torch.testing.assert_close(
                torch.tensor(f.token_log_probs),
                torch.tensor(r.token_log_probs),
                atol=1e-4,
                rtol=1e-4,
            )


def search(model, src, mask, limits, beam_size: int) -> list[list]:
    """Each sentence's hypotheses: greedy's one at beam size 1, else beam search's n-best."""
    if beam_size == 1:
        return [[h] for h in greedy_search(model, src, mask, limits)]
    return beam_search(model, src, mask, limits, beam_size=beam_size, n_best=beam_size)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_sentence_alone_equals_sentence_in_padded_batch(beam_size):
    model = random_model(tiny_config(VOCAB), seed=2)
    src, mask = random_batch(5, batch=8)
    limits = torch.full((8,), 20)
    batched = search(model, src, mask, limits, beam_size)
    for i in range(8):
        n = int(mask[i, 0, 0].sum())
        alone_src = src[i : i + 1, :n]
        alone = search(model, alone_src, pad_mask(alone_src, 0), limits[:1], beam_size)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[i]]
        assert [h.score for h in alone] == pytest.approx([h.score for h in batched[i]], abs=1e-4)


def test_beam_size_one_equals_greedy():
    model = random_model(tiny_config(VOCAB), seed=3)
    src, mask = random_batch(7, batch=8)
    limits = torch.full((8,), 20)
    greedy = greedy_search(model, src, mask, limits, length_penalty=0.6)
    beam = beam_search(model, src, mask, limits, beam_size=1, length_penalty=0.6)
    assert [b[0].tokens for b in beam] == [g.tokens for g in greedy]
    assert [b[0].score for b in beam] == pytest.approx([g.score for g in greedy], abs=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_scores_are_sorted_and_match_teacher_forcing(alpha):
    model = random_model(tiny_config(VOCAB), seed=4)
    src, mask = random_batch(11, batch=5)
    limits = torch.full((5,), 15)
    results = beam_search(model, src, mask, limits, beam_size=5, length_penalty=alpha, n_best=5)
    for i, hyps in enumerate(results):
        assert len(hyps) == 5
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        n = int(mask[i, 0, 0].sum())
        for h in hyps:
            expected = teacher_forced_score(model, src[i : i + 1, :n], h.tokens, h.finished, alpha)
            assert h.score == pytest.approx(expected, abs=1e-4)


def test_beam_search_finds_at_least_the_greedy_score():
    model = random_model(tiny_config(VOCAB), seed=5)
    src, mask = random_batch(13, batch=8)
    limits = torch.full((8,), 20)
    greedy = greedy_search(model, src, mask, limits, length_penalty=0.0)
    beam = beam_search(model, src, mask, limits, beam_size=6, length_penalty=0.0)
    for g, b in zip(greedy, beam, strict=True):
        assert b[0].score >= g.score - 1e-5


def test_output_limits_are_per_sentence():
    model = random_model(tiny_config(VOCAB, output_bias=True), seed=6)
    with torch.no_grad():  # make EOS unreachable so every sentence runs to its limit
        model.generator.bias[3] = -1e4
    src, mask = random_batch(1, batch=4)
    limits = torch.tensor([3, 7, 1, 12])
    for hyps in (
        greedy_search(model, src, mask, limits),
        [b[0] for b in beam_search(model, src, mask, limits, beam_size=3)],
    ):
        assert [len(h.tokens) for h in hyps] == limits.tolist()
        assert not any(h.finished for h in hyps)


def test_finished_sentences_leave_the_active_batch():
    model = random_model(tiny_config(VOCAB), seed=7)
    sizes = []
    step = model.decode_step

    def recording_step(tokens, cache):
        sizes.append(tokens.shape[0])
        return step(tokens, cache)

    model.decode_step = recording_step
    src, mask = random_batch(3, batch=6)
    limits = torch.tensor([2, 4, 6, 8, 10, 12])
    hyps = greedy_search(model, src, mask, limits)
    assert sizes[0] == 6 and sizes == sorted(sizes, reverse=True)
    assert len(sizes) == max(len(h.tokens) + h.finished for h in hyps)
    assert sizes[-1] < 6
    sizes.clear()
    beam_search(model, src, mask, limits, beam_size=2)
    # the first step runs one row per sentence (its beams would be identical), then 2 per sentence
    assert sizes[0] == 6 and sizes[1] == 12 and sizes[-1] < 12
    assert all(s % 2 == 0 for s in sizes[1:])


def test_cache_grows_past_its_initial_size_and_stays_exact():
    model = random_model(tiny_config(VOCAB, output_bias=True), seed=8)
    with torch.no_grad():  # no EOS: every sentence runs to its limit, past the initial 32 positions
        model.generator.bias[3] = -1e4
    src, mask = random_batch(4, batch=3)
    limits = torch.tensor([70, 41, 33])
    fast = greedy_search(model, src, mask, limits)
    ref = reference_greedy_search(model, src, mask, limits)
    assert [len(h.tokens) for h in fast] == [70, 41, 33]
    assert [h.tokens for h in fast] == [h.tokens for h in ref]
    beam = beam_search(model, src, mask, limits, beam_size=3)
    assert [len(b[0].tokens) for b in beam] == [70, 41, 33]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("prepared", [None, "fused", "packed"])
def test_encoding_only_real_tokens_gives_the_same_memory(variant, prepared):
    """encode_tokens (the searches' encoder) skips padding; every real position's memory is
    the seeds' encode's, and padding rows are zero."""
    if prepared == "packed" and not packed_linear_available():
        pytest.skip("no PackedLinear backend here (C kernels or oneDNN)")
    model = random_model(tiny_config(VOCAB, **VARIANTS[variant]), seed=4)
    src, mask = random_batch(5, batch=7)
    assert not bool(mask.all())  # the batch has padding
    with torch.inference_mode():
        want = model.encode(src, mask)
        if prepared:
            model.prepare_for_inference(packed=prepared == "packed")
        got = model.encode_tokens(src, mask)
    real = mask[:, 0, 0, :]
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)
    assert bool((got[~real] == 0).all())


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("packed", [False, True])
def test_prepared_model_decodes_like_the_reference(variant, packed):
    """prepare_for_inference (fused q|k|v, optionally packed linears) changes no output."""
    if packed and not packed_linear_available():
        pytest.skip("no PackedLinear backend here (C kernels or oneDNN)")
    model = random_model(tiny_config(VOCAB, **VARIANTS[variant]), seed=9)
    with torch.no_grad():
        model.generator.weight[3] -= 3.0  # rarer EOS: longer outputs, past the initial cache
    src, mask = random_batch(21, batch=7)
    limits = torch.tensor([3, 40, 12, 35, 20, 9, 38])
    ref = reference_greedy_search(model, src, mask, limits)
    beam_before = beam_search(model, src, mask, limits, beam_size=3, n_best=3)
    model.prepare_for_inference(packed=packed)
    layers = [*model.encoder_layers, *model.decoder_layers]
    assert all(layer.self_attn.fused_qkv is not None for layer in layers)
    fast = greedy_search(model, src, mask, limits)
    assert [h.tokens for h in fast] == [h.tokens for h in ref]
    assert any(len(h.tokens) > 32 for h in fast)  # the cache grew past its first allocation
    beam_after = beam_search(model, src, mask, limits, beam_size=3, n_best=3)
    assert [[h.tokens for h in b] for b in beam_after] == [
        [h.tokens for h in b] for b in beam_before
    ]


@pytest.mark.parametrize("backend", ["panels", "onednn"])
@pytest.mark.parametrize(
    "out_features,in_features", [(256, 256), (768, 256), (256, 1024), (8000, 256)]
)
def test_packed_linear_gives_each_row_the_same_bits_in_any_batch(
    backend, out_features, in_features, tmp_path
):
    # what lets a sentence translate the same alone or in a batch of any size
    if backend not in packed_linear_backends():
        pytest.skip(f"PackedLinear backend {backend} is not available here")
    skip_unless_batch_invariant(backend, ((out_features, in_features),), tmp_path)
    torch.manual_seed(out_features)
    layer = PackedLinear(torch.nn.Linear(in_features, out_features), backend=backend)
    x = torch.randn(64, in_features)
    with torch.inference_mode():
        full = layer(x)
        for rows in (1, 3, 8, 33):
            assert torch.equal(layer(x[:rows]), full[:rows])


SENTENCES = ["a short one", "a somewhat longer sentence than the first", "x", "two words"]


def test_a_step_over_the_whole_buffer_gives_the_logits_of_the_positions_written(
    spm_model, tmp_path
):
    # the fixed shape a CUDA graph of the decoder step needs (bench/cuda_graph_bench.py): rows
    # at different steps read every position of the key/value buffer, each masked beyond its
    # own step, and get the logits of the step over the positions written so far
    from bench.cuda_graph_bench import fixed_state, step_logits

    path = save_random_checkpoint(tmp_path / "m", spm_model, "en", "de", seed=3, suppress_ids=(5,))
    tr = Translator.load(path, device="cpu")
    ids = [tr.encode_source(s) for s in SENTENCES]
    tokens, cache = fixed_state(tr, ids, sentences=4, beams=3, positions=40, written=9)
    assert sorted(set(cache.steps.tolist()))[-1] == 8 and len(set(cache.steps.tolist())) > 1
    now = step_logits(tr.model, tokens, cache, 8)
    full = step_logits(tr.model, tokens, cache, 39)
    torch.testing.assert_close(full, now, rtol=1e-5, atol=1e-5)
    assert torch.equal(full.topk(4).indices, now.topk(4).indices)
    assert bool((full[:, 5] == float("-inf")).all())  # the suppressed id, as in a real step


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_captured_decoder_step_replays_with_new_inputs(spm_model, tmp_path):
    # a CUDA graph of the step (bench/cuda_graph_bench.py) reads the inputs written into its
    # buffers before each replay, and gives what the eager step gives for them
    from bench.cuda_graph_bench import fixed_state, step_logits
    from model_core.continuous import capture

    path = save_random_checkpoint(tmp_path / "m", spm_model, "en", "de", seed=3, suppress_ids=(5,))
    tr = Translator.load(path, device="cuda", dtype="bfloat16")
    ids = [tr.encode_source(s) for s in SENTENCES]
    tokens, cache = fixed_state(tr, ids, sentences=4, beams=3, positions=40, written=9)
    graph, out = capture(lambda: step_logits(tr.model, tokens, cache, 39), tr.device)
    tokens.copy_(tokens.flip(0))
    cache.row_steps.copy_(torch.clamp(cache.row_steps + 1, max=38))
    graph.replay()
    torch.cuda.synchronize()
    eager = step_logits(tr.model, tokens, cache, 39)
    torch.testing.assert_close(out, eager, rtol=1e-2, atol=1e-2)
    assert torch.equal(out.topk(4).indices, eager.topk(4).indices)
