"""The fused top-k + logsumexp kernel against torch ops, and the search with and without it."""

import shutil

import pytest
import torch

from model_core import decoding, fused
from model_core.decoding import beam_search, greedy_search
from model_core.masks import pad_mask
from tests.conftest import random_model, tiny_config

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
        greedy = greedy_search(model, src, mask, limits)
        beam = beam_search(model, src, mask, limits, beam_size=3, n_best=3)
        runs[use] = (greedy, beam)
    (g1, b1), (g0, b0) = runs[True], runs[False]
    assert [h.tokens for h in g1] == [h.tokens for h in g0]
    assert [h.score for h in g1] == pytest.approx([h.score for h in g0], rel=1e-5)
    assert [[h.tokens for h in s] for s in b1] == [[h.tokens for h in s] for s in b0]
    for s1, s0 in zip(b1, b0, strict=True):
        assert [h.score for h in s1] == pytest.approx([h.score for h in s0], rel=1e-5)
