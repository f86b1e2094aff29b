"""Per-row top-k and logsumexp of decoder logits in one call.

The searches need, for every row of the (rows, vocab) logits, its best few words and its
log-normaliser (log-softmax = logit - logsumexp). On the CPU, torch needs three passes over
the vocabulary for this (topk, max-shifted exp, sum), each with a temporary: 11% of a beam-4
batch's time in an earlier profile (docs/BENCHMARKS.md, section 3). The optional C kernel
(`_kernels.c`, built by `pip install`) does it in two passes with no temporaries. Elsewhere (GPU, other dtypes, or no compiled kernel) torch ops compute the
same thing.
"""

from __future__ import annotations

import torch

try:
    from . import _kernels
except ImportError:  # built without a C compiler: the torch path below serves
    _kernels = None


def kernel_available() -> bool:
    return _kernels is not None


def topk_logsumexp_torch(logits: torch.Tensor, k: int):
    values, indices = logits.topk(k, dim=-1)
    row_max = values[:, :1]
    lse = (logits - row_max).exp_().sum(dim=-1, keepdim=True).log_().add_(row_max)
    return values, indices, lse


def topk_logsumexp(
    logits: torch.Tensor, k: int, use_kernel: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows, V) logits -> the k best values (rows, k) best first, their indices (rows, k),
    and each row's logsumexp (rows, 1)."""
    if (
        use_kernel
        and _kernels is not None
        and logits.device.type == "cpu"
        and logits.dtype == torch.float32
        and logits.dim() == 2
        and logits.stride(1) == 1
        and not logits.requires_grad
    ):
        rows, vocab = logits.shape
        values = torch.empty((rows, k), dtype=torch.float32)
        indices = torch.empty((rows, k), dtype=torch.long)
        lse = torch.empty((rows, 1), dtype=torch.float32)
        if rows:
            _kernels.topk_logsumexp(
                logits.data_ptr(),
                rows,
                vocab,
                logits.stride(0),
                k,
                values.data_ptr(),
                indices.data_ptr(),
                lse.data_ptr(),
            )
        return values, indices, lse
    return topk_logsumexp_torch(logits, k)
