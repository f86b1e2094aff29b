"""int8 linear layers for CPU inference, with every input row quantized on its own.

torch's dynamic quantization (`torch.ao.quantization.quantize_dynamic`) scales a whole input
tensor with one range, so in a batch a sentence's activations are rounded according to the
other sentences' values, and the same sentence can translate differently depending on what it
was batched with. `Int8Linear` gives each row its own scale instead (as CTranslate2's int8 does),
so a row's result depends on that row alone: a translation is the same in any batch.

- Weights: int8, symmetric, one scale per output feature.
- Inputs: each row scaled by its largest magnitude to 7 bits (-63..63, stored as unsigned
  1..127 around a zero point of 64), so fbgemm's u8 x s8 pair products cannot saturate.
- Products summed in int32 by fbgemm (exact in any order), converted to float32 and multiplied
  back by the row's scale; then the bias.
"""

from __future__ import annotations

import warnings
from typing import TypeVar

import torch
from torch import nn

from .model import swap_linears

M = TypeVar("M", bound=nn.Module)

ROW_LEVELS = 63  # |quantized input| <= 63: 7 bits with the sign
ZERO_POINT = 64  # stored unsigned: 1..127
TINY = 1e-30  # an all-zero row keeps scale TINY (and quantizes to zeros)


def int8_available() -> bool:
    """Whether this torch build has the quantized CPU linear op Int8Linear runs on."""
    return hasattr(torch.ops.quantized, "linear_with_input_q_dq_qweight_dq_output_fp32") and any(
        e in torch.backends.quantized.supported_engines for e in ("x86", "fbgemm")
    )


class Int8Linear(nn.Module):
    """A frozen linear layer computing in int8 (inference only, CPU only); see the module's
    docstring. Built from a float nn.Linear."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        weight = linear.weight.detach().float().cpu()
        scales = (weight.abs().amax(dim=1) / 127).clamp_min(TINY).double()
        with warnings.catch_warnings():  # torch marks its quantized-tensor API as deprecated
            warnings.simplefilter("ignore")
            q = torch.quantize_per_channel(
                weight, scales, torch.zeros(self.out_features, dtype=torch.long), 0, torch.qint8
            )
            self.packed = torch.ops.quantized.linear_prepack(q, None)
        self.bias = None if linear.bias is None else linear.bias.detach().float().cpu().clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        scale = rows.abs().amax(dim=1, keepdim=True).clamp_min_(TINY)
        out = torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(
            rows / scale, 1.0 / ROW_LEVELS, ZERO_POINT, self.packed
        )
        out = out.mul_(scale) if self.bias is None else torch.addcmul(self.bias, out, scale)
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per row"


def quantize_linears(module: M) -> M:
    """Replace every float nn.Linear inside `module` by an Int8Linear, in place."""
    swap_linears(module, lambda m: Int8Linear(m) if type(m) is nn.Linear else m)
    return module
