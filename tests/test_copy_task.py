"""The seeds' copy task: a tiny model learns to copy random symbols, then copies held-out
sequences exactly with the fast decoder. A real end-to-end check of model + decoding."""

import torch
import torch.nn.functional as F

from model_core.decoding import beam_search, greedy_search
from model_core.masks import pad_mask
from model_core.model import Transformer
from tests.conftest import tiny_config

VOCAB, LENGTH, BOS, EOS = 14, 10, 2, 3


def sequences(n: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randint(4, VOCAB, (n, LENGTH), generator=generator)


def test_copy_task_learns_to_copy_exactly():
    torch.manual_seed(0)
    cfg = tiny_config(VOCAB, d_model=64, d_ff=128, max_positions=64)
    model = Transformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    g = torch.Generator().manual_seed(0)
    eos = torch.full((64, 1), EOS)
    model.train()
    for step in range(400):
        x = sequences(64, g)
        src, tgt_in = torch.cat([x, eos], 1), torch.cat([torch.full((64, 1), BOS), x], 1)
        for group in opt.param_groups:
            group["lr"] = 3e-3 * min((step + 1) / 100, 1.0)
        loss = F.cross_entropy(model(src, tgt_in).flatten(0, 1), torch.cat([x, eos], 1).flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    held_out = sequences(100, torch.Generator().manual_seed(12345))
    src = torch.cat([held_out, torch.full((100, 1), EOS)], 1)
    limits = torch.full((100,), LENGTH + 5)
    greedy = greedy_search(model, src, pad_mask(src, 0), limits)
    assert [h.tokens for h in greedy] == held_out.tolist()
    beam = beam_search(model, src[:20], pad_mask(src[:20], 0), limits[:20], beam_size=4)
    assert [b[0].tokens for b in beam] == held_out[:20].tolist()
