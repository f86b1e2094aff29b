"""The seeds' copy task: a tiny model learns to copy random symbols, then copies held-out
sequences with the fast decoder. A real end-to-end check of model + training + decoding.

Training is a float trajectory that differs with the CPU's instruction set and thread count, so
the test does not demand one exact outcome after a fixed number of steps: it trains until a
validation set is copied (with a step cap), then asserts the learned property with a margin on
held-out sequences the model never saw."""

import torch
import torch.nn.functional as F

from model_core.decoding import beam_search, greedy_search
from model_core.masks import pad_mask
from model_core.model import Transformer
from tests.conftest import tiny_config

VOCAB, LENGTH, BOS, EOS = 14, 10, 2, 3
MAX_STEPS, CHECK_EVERY = 1500, 50


def sequences(n: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randint(4, VOCAB, (n, LENGTH), generator=generator)


def with_eos(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, torch.full((len(x), 1), EOS)], 1)


def greedy_copies(model: Transformer, x: torch.Tensor) -> list[list[int]]:
    src = with_eos(x)
    limits = torch.full((len(x),), LENGTH + 5)
    return [h.tokens for h in greedy_search(model, src, pad_mask(src, 0), limits)]


def exact_rate(outputs: list[list[int]], x: torch.Tensor) -> float:
    return sum(o == t for o, t in zip(outputs, x.tolist(), strict=True)) / len(x)


def token_accuracy(outputs: list[list[int]], x: torch.Tensor) -> float:
    """Position-wise agreement over LENGTH positions (missing or extra tokens count as wrong)."""
    right = sum(
        sum(a == b for a, b in zip(o, t, strict=False)) - max(len(o) - LENGTH, 0)
        for o, t in zip(outputs, x.tolist(), strict=True)
    )
    return max(right, 0) / (len(x) * LENGTH)


def test_copy_task_learns_to_copy():
    torch.manual_seed(0)
    cfg = tiny_config(VOCAB, d_model=64, d_ff=128, max_positions=64)
    model = Transformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    g = torch.Generator().manual_seed(0)
    validation = sequences(50, torch.Generator().manual_seed(999))
    steps, copied = 0, False
    while not copied and steps < MAX_STEPS:
        model.train()
        for _ in range(CHECK_EVERY):
            x = sequences(64, g)
            src, tgt_in = with_eos(x), torch.cat([torch.full((64, 1), BOS), x], 1)
            for group in opt.param_groups:
                group["lr"] = 3e-3 * min((steps + 1) / 100, 1.0)
            loss = F.cross_entropy(model(src, tgt_in).flatten(0, 1), with_eos(x).flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
        model.eval()
        copied = exact_rate(greedy_copies(model, validation), validation) == 1.0
    assert copied, f"the validation set was not copied within {MAX_STEPS} steps"

    held_out = sequences(200, torch.Generator().manual_seed(12345))
    greedy = greedy_copies(model, held_out)
    assert exact_rate(greedy, held_out) >= 0.9
    assert token_accuracy(greedy, held_out) >= 0.98

    src = with_eos(held_out[:40])
    beam = beam_search(model, src, pad_mask(src, 0), torch.full((40,), LENGTH + 5), beam_size=4)
    best = [b[0].tokens for b in beam]
    assert exact_rate(best, held_out[:40]) >= 0.9
    assert token_accuracy(best, held_out[:40]) >= 0.98
