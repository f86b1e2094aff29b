"""The fused C kernels (top-k + logsumexp, the decoding step's attention) against torch ops, and
the searches with and without them."""

import shutil

import pytest
import torch
import torch.nn.functional as F

from model_core import decoding, fused
from model_core.decoding import beam_search, greedy_search
from model_core.masks import pad_mask
from tests.conftest import random_model, tiny_config
from tests.test_model_decoding import VARIANTS, search

needs_kernel = pytest.mark.skipif(
    not fused.kernel_available(), reason="model_core._kernels was not built (no C compiler)"
)


def test_kernel_is_built_where_a_compiler_is():
    # `pip install` builds the kernel whenever a C compiler is present; a silent build failure
    # would only show as slower decoding, so it fails here instead.
    if shutil.which("cc") or shutil.which("gcc"):
        assert fused.kernel_available()


def check_against_torch(logits: torch.Tensor, k: int) -> None:
    values, indices, lse = fused.topk_logsumexp(logits, k)
    want_values, want_indices, want_lse = fused.topk_logsumexp_torch(logits, k)
    assert values.shape == indices.shape == (logits.shape[0], k)
    assert torch.equal(values, want_values)
    # indices may differ only where values tie; each must point at its value
    assert torch.equal(logits.gather(1, indices), values)
    assert torch.allclose(lse, want_lse, rtol=1e-6, atol=1e-5)
    assert torch.allclose(lse, torch.logsumexp(logits.double(), dim=-1, keepdim=True).float())


@needs_kernel
@pytest.mark.parametrize(
    "rows,vocab,k", [(128, 8000, 8), (64, 8000, 1), (3, 17, 5), (5, 9, 9), (7, 1, 1), (2, 31, 2)]
)
def test_kernel_matches_torch(rows, vocab, k):
    torch.manual_seed(rows * vocab + k)
    check_against_torch(torch.randn(rows, vocab) * 6, k)


@needs_kernel
def test_kernel_handles_large_logits_ties_and_minus_inf():
    logits = torch.randn(4, 300) * 50  # shifted exp underflows for most entries
    logits[1] = 2.5  # a row of ties: the lowest indices first
    logits[2, ::2] = float("-inf")
    logits[3, 100:] = 1e4
    check_against_torch(logits, 6)
    _, indices, _ = fused.topk_logsumexp(logits, 6)
    assert indices[1].tolist() == [0, 1, 2, 3, 4, 5]


@needs_kernel
def test_kernel_reads_rows_of_a_wider_buffer_and_empty_input():
    wide = torch.randn(6, 120)
    check_against_torch(wide[:, :100], 4)  # row stride 120, vocab 100
    values, indices, lse = fused.topk_logsumexp(torch.empty(0, 50), 3)
    assert values.shape == indices.shape == (0, 3) and lse.shape == (0, 1)


def test_torch_path_is_used_for_other_dtypes():
    logits = torch.randn(3, 40, dtype=torch.float64)
    values, indices, lse = fused.topk_logsumexp(logits, 2)
    assert values.dtype == torch.float64
    assert torch.allclose(lse, torch.logsumexp(logits, -1, keepdim=True))


@needs_kernel
def test_searches_give_the_same_output_with_and_without_the_kernel(monkeypatch):
    torch.manual_seed(3)
    model = random_model(tiny_config(vocab=60))
    src = torch.randint(4, 60, (6, 9))
    src[2, 5:] = 0
    mask = pad_mask(src, 0)
    limits = torch.full((6,), 12)
    runs = {}
    for use in (True, False):
        monkeypatch.setattr(
            decoding,
            "topk_logsumexp",
            lambda logits, k, use=use: fused.topk_logsumexp(logits, k, use_kernel=use),
        )
        monkeypatch.setattr(
            decoding,
            "beam_select",
            lambda *args, use=use: fused.beam_select(*args, use_kernel=use),
        )
        greedy = greedy_search(model, src, mask, limits)
        beam = beam_search(model, src, mask, limits, beam_size=3, n_best=3)
        runs[use] = (greedy, beam)
    (g1, b1), (g0, b0) = runs[True], runs[False]
    assert [h.tokens for h in g1] == [h.tokens for h in g0]
    # float32 rounding: the kernel's vectorised exp against torch's (scores near 0 need `abs`)
    assert [h.score for h in g1] == pytest.approx([h.score for h in g0], rel=1e-5, abs=1e-6)
    assert [[h.tokens for h in s] for s in b1] == [[h.tokens for h in s] for s in b0]
    for s1, s0 in zip(b1, b0, strict=True):
        assert [h.score for h in s1] == pytest.approx([h.score for h in s0], rel=1e-5, abs=1e-6)


@needs_kernel
def test_kernels_are_built_with_openmp_where_gcc_is():
    # without OpenMP the kernels still work, on one thread; with gcc that would be a build bug
    if shutil.which("gcc"):
        assert fused._kernels.OPENMP == 1


def chain_attention(qkv, kv, history, slots, t, layer):
    """What attend_cached computes, with torch: follow each row's back-pointers, then SDPA."""
    n, d = qkv.shape[0], qkv.shape[1] // 3
    heads, hd = kv.shape[4], kv.shape[5]
    kv = kv.clone()
    kv[layer, slots, t] = qkv[:, d:].view(n, 2, heads, hd)
    outs = []
    for i in range(n):
        chain = [int(slots[i])]
        for p in range(t, 0, -1):
            chain.append(int(history[chain[-1], p]))
        chain.reverse()  # chain[p]: the slot holding position p
        entries = kv[layer, chain, torch.arange(t + 1)]  # (t + 1, 2, heads, hd)
        q = qkv[i, :d].view(heads, 1, hd)
        a = F.scaled_dot_product_attention(
            q, entries[:, 0].transpose(0, 1), entries[:, 1].transpose(0, 1)
        )
        outs.append(a.reshape(d))
    return torch.stack(outs), kv


@needs_kernel
@pytest.mark.parametrize("heads,hd", [(4, 64), (3, 8), (2, 5)])  # AVX2 + 4 heads, remainder, scalar
@pytest.mark.parametrize("t", [0, 7, 19])
def test_attend_cached_follows_the_back_pointers(heads, hd, t):
    torch.manual_seed(t * 10 + heads)
    layers, sentences, beams, capacity = 2, 3, 4, 24
    n_slots, d = sentences * beams, heads * hd
    kv = torch.randn(layers, n_slots, capacity, 2, heads, hd)
    # each entry's previous position is in some slot of the same sentence, as beam search leaves it
    owner = torch.arange(n_slots)[:, None] // beams
    history = (owner * beams + torch.randint(0, beams, (n_slots, capacity))).contiguous()
    slots = torch.tensor([0, 1, 2, 3, 5, 7, 8, 11])  # rows of a batch where some beams left
    qkv = torch.randn(len(slots), 3 * d)
    want, want_kv = chain_attention(qkv, kv, history, slots, t, layer=1)
    got = fused.attend_cached(qkv, kv, history, slots, t, 1)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    assert torch.equal(kv, want_kv)  # this step's k|v written at (layer, slot, t), nothing else


@needs_kernel
@pytest.mark.parametrize("heads,hd,src_len", [(4, 64, 13), (4, 64, 1), (3, 8, 9), (2, 5, 6)])
def test_attend_cross_matches_torch(heads, hd, src_len):
    torch.manual_seed(src_len)
    sentences, d = 3, heads * hd
    keys = torch.randn(sentences, heads, src_len, hd) / hd**0.5
    values = torch.randn(sentences, heads, src_len, hd)
    real = torch.ones(sentences, src_len, dtype=torch.bool)
    real[1, max(1, src_len - 3) :] = False  # a padded sentence
    bias = torch.zeros(sentences, src_len).masked_fill(~real, float("-inf"))
    sentence = torch.tensor([0, 0, 2, 1, 1, 1, 2])  # beams of a sentence share its memory
    q = torch.randn(len(sentence), d)
    got = fused.attend_cross(q, keys, values, bias, sentence)
    want = F.scaled_dot_product_attention(
        q.view(-1, heads, 1, hd),
        keys[sentence],
        values[sentence],
        attn_mask=real[sentence][:, None, None, :],
        scale=1.0,  # keys are already scaled
    ).reshape(-1, d)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


@needs_kernel
def test_attention_kernels_give_the_same_bits_on_one_or_two_threads():
    torch.manual_seed(0)
    heads, hd, d = 4, 64, 256
    kv = torch.randn(1, 40, 16, 2, heads, hd)
    history = torch.randint(0, 40, (40, 16))
    slots, qkv = torch.arange(40), torch.randn(40, 3 * d)
    keys, values = torch.randn(10, heads, 7, hd), torch.randn(10, heads, 7, hd)
    bias, sentence = torch.zeros(10, 7), torch.arange(40) // 4
    threads = torch.get_num_threads()
    results = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            results.append(
                (
                    fused.attend_cached(qkv, kv.clone(), history, slots, 9, 0),
                    fused.attend_cross(qkv[:, :d].contiguous(), keys, values, bias, sentence),
                )
            )
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for a, b in zip(results[0], results[1], strict=True))


@needs_kernel
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_searches_agree_with_the_kernels_and_with_torch_attention(monkeypatch, variant):
    """Slot cache + C attention vs gather cache + torch attention: same outputs, including
    beams reordered over many steps and a cache grown past its first allocation."""
    torch.manual_seed(5)
    model = random_model(tiny_config(60, **VARIANTS[variant]), seed=5).prepare_for_inference()
    with torch.no_grad():
        model.generator.weight[3] -= 3.0  # rarer EOS: long outputs
    src = torch.randint(4, 60, (6, 9))
    src[:, -1] = 3
    src[2, 5:] = 0
    mask = pad_mask(src, 0)
    limits = torch.tensor([40, 3, 12, 37, 20, 9])
    runs = {}
    for use in (True, False):
        monkeypatch.setattr(fused, "ATTENTION_KERNELS", use)
        with torch.inference_mode():
            cache = model.init_cache(model.encode_tokens(src, mask), mask, 8, beams=3)
        assert (cache.slots is not None) == use
        greedy = greedy_search(model, src, mask, limits)
        beam = beam_search(model, src, mask, limits, beam_size=3, n_best=3)
        runs[use] = (greedy, beam)
    (g1, b1), (g0, b0) = runs[True], runs[False]
    assert any(len(h.tokens) > 32 for h in g1)
    assert [h.tokens for h in g1] == [h.tokens for h in g0]
    # float32 rounding: the kernel's vectorised exp against torch's (scores near 0 need `abs`)
    assert [h.score for h in g1] == pytest.approx([h.score for h in g0], rel=1e-5, abs=1e-6)
    assert [[h.tokens for h in s] for s in b1] == [[h.tokens for h in s] for s in b0]
    for s1, s0 in zip(b1, b0, strict=True):
        assert [h.score for h in s1] == pytest.approx([h.score for h in s0], rel=1e-5, abs=1e-6)


def random_beam_inputs(seed: int, n: int, g: int, per_row: int, vocab: int = 30):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(n * g, vocab, generator=gen) * 3
    values, words, lse = fused.topk_logsumexp_torch(logits, per_row)
    scores = -torch.rand(n, g, generator=gen) * 5
    scores[1, 1:] = float("-inf")  # a sentence with one live beam left
    at_limit = torch.zeros(n, dtype=torch.bool)
    at_limit[2] = True
    return values, words, lse, scores, at_limit


@needs_kernel
@pytest.mark.parametrize("seed", range(6))
def test_beam_select_kernel_matches_torch(seed):
    n, g, k = 5, 4, 4
    values, words, lse, scores, at_limit = random_beam_inputs(seed, n, g, 2 * k)
    eos = int(words[seed % (n * g), 0])  # EOS is some row's best word
    got = fused.beam_select(values, words, lse, scores, at_limit, k, eos)
    want = fused.beam_select_torch(values, words, lse, scores, at_limit, k, eos)
    live = want.scores > float("-inf")
    assert torch.equal(got.scores, want.scores)
    assert torch.equal(got.rows[live], want.rows[live])  # -inf fillers may be any candidate
    assert torch.equal(got.words[live], want.words[live])
    assert [(i, r, w) for i, _, r, w in got.finished] == [(i, r, w) for i, _, r, w in want.finished]
    assert [s for _, s, _, _ in got.finished] == pytest.approx([s for _, s, _, _ in want.finished])
    assert {i for i, _, _, _ in got.finished} >= {2}  # at the limit every top-K candidate ends
    assert bool((got.scores[2] == float("-inf")).all())


@needs_kernel
def test_beam_select_first_step_and_small_vocabulary():
    # one row per sentence (the first step), and fewer words than 2K
    values, words, lse, scores, at_limit = random_beam_inputs(9, 4, 1, 3, vocab=3)
    at_limit[:] = False
    scores[1] = 0.0
    got = fused.beam_select(values, words, lse, scores, at_limit, 4, eos_id=99)
    want = fused.beam_select_torch(values, words, lse, scores, at_limit, 4, eos_id=99)
    assert got.scores.shape == want.scores.shape == (4, 3)
    assert torch.equal(got.scores, want.scores) and torch.equal(got.words, want.words)
    assert torch.equal(got.rows, want.rows) and got.finished == want.finished == []


@needs_kernel
def test_encoder_gives_the_same_memory_with_and_without_the_attention_kernel(monkeypatch):
    model = random_model(tiny_config(vocab=60), seed=2).prepare_for_inference()
    src = torch.randint(4, 60, (5, 11))
    src[1, 4:] = 0
    src[3, 9:] = 0
    mask = pad_mask(src, 0)
    with torch.inference_mode():
        want = model.encode(src, mask)  # the seeds' padded encoder
        got = {}
        for use in (True, False):
            monkeypatch.setattr(fused, "ATTENTION_KERNELS", use)
            got[use] = model.encode_tokens(src, mask)
    real = mask[:, 0, 0, :]
    for memory in got.values():
        torch.testing.assert_close(memory[real], want[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[True], got[False], atol=1e-5, rtol=1e-5)


@needs_kernel
def test_beam_select_with_a_wide_beam():
    # 40 beams x 80 words per row: far more candidates than the usual 4 x 8
    values, words, lse, scores, at_limit = random_beam_inputs(4, 3, 40, 80, vocab=200)
    eos = int(words[0, 0])
    got = fused.beam_select(values, words, lse, scores, at_limit, 40, eos)
    want = fused.beam_select_torch(values, words, lse, scores, at_limit, 40, eos)
    live = want.scores > float("-inf")
    assert torch.equal(got.scores, want.scores)
    assert torch.equal(got.rows[live], want.rows[live])
    assert [(i, r, w) for i, _, r, w in got.finished] == [(i, r, w) for i, _, r, w in want.finished]


def assert_near(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got, want.float(), atol=1e-4, rtol=1e-4)


@needs_kernel
@pytest.mark.parametrize(
    "rows,k,n",
    [(1, 256, 256), (4, 256, 768), (7, 100, 37), (13, 1024, 256), (64, 256, 8000), (200, 64, 48)],
)
def test_linear_kernel_matches_torch(rows, k, n):
    torch.manual_seed(rows * k + n)
    w, b = torch.randn(n, k) / k**0.5, torch.randn(n)
    x, residual = torch.randn(rows, k) * 3 + 1, torch.randn(rows, n)
    norm = torch.nn.LayerNorm(k, eps=1e-6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5), norm.bias.uniform_(-0.5, 0.5)
    packed = fused.pack_linear(w)
    assert packed.shape == (-(-n // 16), k, 16)
    assert torch.equal(fused.unpack_linear(packed, n), w)
    plain, layer = fused.PackedWeight(w), fused.PackedWeight(w, b)
    assert torch.equal(layer.dense(), w)
    want = x.double() @ w.double().T
    normed = norm(x).detach().double() @ w.double().T
    assert_near(plain(x), want)
    assert_near(layer(x), want + b)
    assert_near(layer(x, relu=True), (want + b).relu())
    assert_near(plain(x, residual=residual), want + residual)
    assert_near(layer(x, relu=True, residual=residual), (want + b).relu() + residual)
    assert_near(layer(x, norm=norm), normed + b)
    assert_near(layer(x, relu=True, residual=residual, norm=norm), (normed + b).relu() + residual)


@needs_kernel
def test_linear_kernel_gives_a_row_the_same_bits_anywhere():
    # any batch size, any place in the batch, one or two threads, rows read from a wider
    # buffer or a 3-D tensor, with or without the LayerNorm: what lets a sentence translate
    # the same in any batch
    torch.manual_seed(0)
    k, n = 256, 200
    layer, x = fused.PackedWeight(torch.randn(n, k), torch.randn(n)), torch.randn(50, k)
    norm = torch.nn.LayerNorm(k)
    for kw in ({}, {"norm": norm}, {"relu": True, "residual": torch.ones(50, n)}):
        full = layer(x, **kw)
        for rows in (1, 5, 6, 7, 13):
            part = {key: v[:rows] if key == "residual" else v for key, v in kw.items()}
            assert torch.equal(layer(x[:rows], **part), full[:rows])
        perm = torch.randperm(50)
        shuffled = {key: v[perm] if key == "residual" else v for key, v in kw.items()}
        assert torch.equal(layer(x[perm], **shuffled), full[perm])
        wide = torch.randn(50, k + 40)
        wide[:, 7 : 7 + k] = x
        assert torch.equal(layer(wide[:, 7 : 7 + k], **kw), full)
        threads = torch.get_num_threads()
        try:
            for t in (1, 2, 3):
                torch.set_num_threads(t)
                assert torch.equal(layer(x, **kw), full)
        finally:
            torch.set_num_threads(threads)
    assert torch.equal(layer(x.view(5, 10, k)), layer(x).view(5, 10, n))


@needs_kernel
def test_linear_kernel_propagates_nan_and_refuses_wrong_inputs():
    layer = fused.PackedWeight(torch.ones(16, 8))
    x = torch.ones(2, 8)
    x[1, 3] = float("nan")
    out = layer(x, relu=True)
    assert torch.all(out[0] == 8) and torch.all(out[1].isnan())
    assert layer(torch.ones(0, 8)).shape == (0, 16)
    with pytest.raises(ValueError, match="linear"):
        layer(torch.ones(2, 9))
    with pytest.raises(ValueError, match="linear"):
        layer(torch.ones(2, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="residual"):
        layer(x, residual=torch.ones(3, 16))
    with pytest.raises(ValueError, match="norm"):
        layer(x, norm=torch.nn.LayerNorm(9))
    with pytest.raises(ValueError, match="bias"):
        fused.PackedWeight(torch.ones(16, 8), torch.ones(15))
    with pytest.raises(ValueError, match="2-D"):
        fused.PackedWeight(torch.ones(16))
    with pytest.raises(ValueError, match="residual"):
        layer(x, residual=torch.ones(2, 16, dtype=torch.float64))


@needs_kernel
def test_linear_kernel_follows_a_norm_whose_parameters_change():
    torch.manual_seed(1)
    layer, norm, x = (
        fused.PackedWeight(torch.randn(32, 24)),
        torch.nn.LayerNorm(24),
        torch.randn(3, 24),
    )
    w = layer.dense().double()
    assert_near(layer(x, norm=norm), norm(x).detach().double() @ w.T)
    with torch.no_grad():
        norm.weight.mul_(3.0)  # in place: same tensor
    assert_near(layer(x, norm=norm), norm(x).detach().double() @ w.T)
    norm.bias = torch.nn.Parameter(torch.full((24,), 0.5))  # replaced: checked again
    assert_near(layer(x, norm=norm), norm(x).detach().double() @ w.T)
    norm.weight = torch.nn.Parameter(torch.ones(25))
    with pytest.raises(ValueError, match="norm"):
        layer(x, norm=norm)


@needs_kernel
def test_packed_linear_uses_the_kernel_where_it_is_built():
    from model_core.model import PackedLinear

    assert PackedLinear(torch.nn.Linear(8, 8)).backend == "panels"


@needs_kernel
def test_linear_kernel_on_many_odd_shapes():
    # widths that are not multiples of the panel (16) or of the AVX2 width (8), row counts
    # around the tile (6), every option combination
    gen = torch.Generator().manual_seed(7)
    for case in range(48):
        rows = int(torch.randint(0, 20, (1,), generator=gen))
        k = int(torch.randint(1, 70, (1,), generator=gen))
        n = int(torch.randint(1, 50, (1,), generator=gen))
        w, b = torch.randn(n, k, generator=gen), torch.randn(n, generator=gen)
        x = torch.randn(rows, k + 3, generator=gen)[:, 1 : k + 1]  # a row stride above k
        residual = torch.randn(rows, n, generator=gen)
        norm = torch.nn.LayerNorm(k)
        with torch.no_grad():
            norm.weight.uniform_(0.5, 1.5, generator=gen)
        use_bias, relu, use_res, use_norm = (
            (case >> 0) & 1,
            (case >> 1) & 1,
            (case >> 2) & 1,
            (case >> 3) & 1,
        )
        layer = fused.PackedWeight(w, b if use_bias else None)
        got = layer(
            x,
            relu=bool(relu),
            residual=residual if use_res else None,
            norm=norm if use_norm else None,
        )
        h = norm(x).detach().double() if use_norm else x.double()
        want = h @ w.double().T + (b.double() if use_bias else 0)
        want = want.relu() if relu else want
        want = want + residual if use_res else want
        assert got.shape == (rows, n)
        torch.testing.assert_close(got, want.float(), atol=2e-4, rtol=2e-4, msg=f"case {case}")


@needs_kernel
@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_sentence_gets_the_same_bits_alone_and_padded_in_a_batch(beam_size):
    # Padding moves a sentence's last source positions from the attention kernel's one-by-one
    # tail into its blocks (of 4 for the scores, of 8 for the softmax): they must get the same
    # bits there, so that the memory, every step and the scores do not depend on how long the
    # other sentences in the batch are.
    model = random_model(tiny_config(vocab=60), seed=4).prepare_for_inference(packed=True)
    torch.manual_seed(4)
    lengths = [1, 2, 3, 5, 6, 7, 9, 12, 13, 17, 19]
    src = torch.zeros((len(lengths), 20), dtype=torch.long)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(4, 60, (n,))
        src[i, n] = 3  # EOS
    mask, limits = pad_mask(src, 0), torch.full((len(lengths),), 15)
    with torch.inference_mode():
        memory = model.encode_tokens(src, mask)
    batched = search(model, src, mask, limits, beam_size)
    for i, n in enumerate(lengths):
        alone_src = src[i : i + 1, : n + 1]
        alone_mask = pad_mask(alone_src, 0)
        with torch.inference_mode():
            assert torch.equal(model.encode_tokens(alone_src, alone_mask)[0], memory[i, : n + 1])
        alone = search(model, alone_src, alone_mask, limits[:1], beam_size)[0]
        assert [(h.tokens, h.score) for h in alone] == [(h.tokens, h.score) for h in batched[i]]
