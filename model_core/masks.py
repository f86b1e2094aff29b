"""Attention masks as booleans (True = may attend), the convention of scaled_dot_product_attention.

Boolean masks are exact in every dtype: no -1e9 fill that overflows in float16.
"""

from __future__ import annotations

import torch

_SUBSEQUENT_CACHE: dict[tuple[str, int], torch.Tensor] = {}


def pad_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Keys that are real tokens: (B, T) ids -> (B, 1, 1, T) bool."""
    return (tokens != pad_id)[:, None, None, :]


def subsequent_mask(size: int, device: torch.device | str) -> torch.Tensor:
    """Lower-triangular (1, 1, T, T) bool: query i sees keys 0..i. Built once per device, sliced."""
    device = torch.device(device)
    key = (str(device), 0)
    cached = _SUBSEQUENT_CACHE.get(key)
    if cached is None or cached.shape[-1] < size:
        capacity = max(size, 256 if cached is None else 2 * cached.shape[-1])
        cached = torch.ones(capacity, capacity, dtype=torch.bool, device=device).tril_()
        _SUBSEQUENT_CACHE[key] = cached
    return cached[None, None, :size, :size]


def target_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Decoder self-attention mask: not a pad key AND not a future key. (B, 1, T, T) bool."""
    return pad_mask(tokens, pad_id) & subsequent_mask(tokens.shape[1], tokens.device)
