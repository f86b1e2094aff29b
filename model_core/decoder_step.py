"""A whole decoder step in one C call (`_kernels.decoder_step`), for the models it fits.

Decoding one sentence makes ~25 kernel calls per step (model.DecoderLayer.step: per layer the
q|k|v projection, self-attention, its output projection, the cross-attention query, the
cross-attention, its output projection and the two feed-forward layers; then the generator),
each a few microseconds of arithmetic. From Python each call also costs its argument checks and
output allocation, as much again as the arithmetic at batch 1. `DecoderStep` gathers the
weights' addresses once, when the model is prepared, and runs the step's kernels one after
another in C: the same kernels in the same order as the per-layer path, so the same bits.

It fits a pre-norm decoder with ReLU feed-forward layers whose linear layers are all packed on
the "panels" backend (the CPU float32 default where the C kernels are built), decoding over the
slot cache. Other models (post-norm Marian, gelu/swish, oneDNN, int8, GPU) keep the per-layer
path. `ENABLED` turns it off (tests compare the two paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from . import fused

if TYPE_CHECKING:  # model imports this module
    from .model import DecoderCache, Transformer

ENABLED = True


def _panels(linear: nn.Module) -> fused.PackedWeight | None:
    """The layer's PackedWeight where it is a PackedLinear on the panels backend."""
    packed = getattr(linear, "packed", None)
    if getattr(linear, "backend", None) == "panels" and isinstance(packed, fused.PackedWeight):
        return packed
    return None


def _float_cpu(t: torch.Tensor | None) -> bool:
    return (
        t is not None and t.dtype == torch.float32 and t.device.type == "cpu" and t.is_contiguous()
    )


class DecoderStep:
    """The decoder's weights as one table of addresses for `_kernels.decoder_step`."""

    def __init__(self, model: Transformer, keep: list[torch.Tensor], plan: list[int]):
        cfg = model.cfg
        self.layers, self.d, self.heads = cfg.decoder_layers, cfg.d_model, cfg.n_heads
        self.d_ff, self.vocab, self.eps = cfg.d_ff, cfg.tgt_vocab_size, float(cfg.layer_norm_eps)
        self.positions = model.positions.shape[0]
        self.embed_scale = float(model.embed_scale)
        self.suppress = torch.tensor(sorted(cfg.suppress_ids), dtype=torch.int64)
        self._keep = keep  # the tensors whose addresses the plan holds
        self.plan = torch.tensor(plan, dtype=torch.int64)

    def __deepcopy__(self, memo) -> None:
        """A copied model holds other tensors than these addresses: it gets no fused step."""
        return None

    @classmethod
    def build(cls, model: Transformer) -> DecoderStep | None:
        """The step for `model` where it fits (see the module docstring), else None."""
        cfg = model.cfg
        if not fused.kernel_available() or cfg.norm != "pre" or model.training:
            return None
        keep: list[torch.Tensor] = []
        plan: list[int] = []

        def weight(linear: nn.Module, out_features: int, in_features: int) -> bool:
            packed = _panels(linear)
            if packed is None or (packed.out_features, packed.in_features) != (
                out_features,
                in_features,
            ):
                return False
            keep.append(packed.panels)
            plan.append(packed.panels.data_ptr())
            if packed.bias is not None:
                keep.append(packed.bias)
            plan.append(0 if packed.bias is None else packed.bias.data_ptr())
            return True

        def norm(module: nn.Module) -> bool:
            if not isinstance(module, nn.LayerNorm) or module.normalized_shape != (d,):
                return False
            if module.eps != cfg.layer_norm_eps:
                return False
            if not (_float_cpu(module.weight) and _float_cpu(module.bias)):
                return False
            keep.extend((module.weight, module.bias))
            plan.extend((module.weight.data_ptr(), module.bias.data_ptr()))
            return True

        d, ff = cfg.d_model, cfg.d_ff
        for layer in model.decoder_layers:
            sa, ca, ffn = layer.self_attn, layer.cross_attn, layer.ffn
            if ffn.act is not F.relu or sa.fused_qkv is None:
                return None
            if not (
                weight(sa.fused_qkv, 3 * d, d)
                and norm(layer.res_self.norm)
                and weight(sa.out_proj, d, d)
                and weight(ca.q_proj, d, d)
                and norm(layer.res_cross.norm)
                and weight(ca.out_proj, d, d)
                and norm(layer.res_ffn.norm)
                and weight(ffn.w1, ff, d)
                and weight(ffn.w2, d, ff)
            ):
                return None
        if not (norm(model.decoder_norm) and weight(model.generator, cfg.tgt_vocab_size, d)):
            return None
        embed, positions = model.tgt_embed.weight, model.positions
        if not (_float_cpu(embed) and _float_cpu(positions)) or embed.shape[1] != d:
            return None
        keep.extend((embed, positions))
        plan.extend((embed.data_ptr(), positions.data_ptr()))
        return cls(model, keep, plan)

    def fits(self, cache: DecoderCache) -> bool:
        """Whether the step runs on this cache: slot mode, float32 on the CPU."""
        return ENABLED and cache.slots is not None and cache.kv.dtype == torch.float32

    def _cross(self, cache: DecoderCache) -> tuple[tuple[int, ...], torch.Tensor]:
        """The cross-attention keys' and values' addresses (layer by layer, keys then values),
        their shape and strides; and the addresses as a tensor for the kernel. Checked whenever
        they change (continuous decoding replaces them as sentences join)."""
        tensors = [t for pair in zip(cache.cross_k, cache.cross_v, strict=True) for t in pair]
        first = tensors[0]
        key = (*(t.data_ptr() for t in tensors), *first.shape, *first.stride())
        if cache.cross_ptrs is not None and cache.cross_ptrs[0] == key:
            return cache.cross_ptrs
        shape, stride = first.shape, first.stride()
        if (
            len(tensors) != 2 * self.layers
            or len(shape) != 4
            or shape[1] != self.heads
            or shape[1] * shape[3] != self.d
            or stride[3] != 1
            or any(
                t.dtype != torch.float32
                or t.device.type != "cpu"
                or t.shape != shape
                or t.stride() != stride
                for t in tensors
            )
        ):
            raise ValueError("decoder step: inconsistent cross-attention state")
        cache.cross_ptrs = (key, torch.tensor(key[: len(tensors)], dtype=torch.int64))
        return cache.cross_ptrs

    def __call__(self, tokens: torch.Tensor, cache: DecoderCache) -> torch.Tensor:
        """(N,) last tokens -> logits (N, V), suppressed ids -inf; as Transformer.decode_step
        (the caller has reserved room and set the rows' steps)."""
        n = tokens.numel()
        if tokens.dtype != torch.int64 or not tokens.is_contiguous():
            tokens = tokens.to(torch.int64).contiguous()
        cross, pointers = self._cross(cache)
        layers = self.layers
        src_len = cross[2 * layers + 2]
        strides = cross[2 * layers + 4 : 2 * layers + 7]
        bias = cache.src_bias
        if bias.dim() != 2 or bias.shape[1] != src_len or not bias.is_contiguous():
            raise ValueError("decoder step: src_bias must be (sentences, S) and contiguous")
        kv, history, slots, sentence = cache.kv, cache.history, cache.slots, cache.sentence
        row_steps = cache.row_steps if cache.steps is not None else None
        logits = torch.empty((n, self.vocab), dtype=torch.float32)
        fused._kernels.decoder_step(
            self.plan.data_ptr(), layers, self.d, self.heads, self.d_ff, self.vocab,
            self.positions, self.eps, self.embed_scale,
            tokens.data_ptr(), n, cache.length, 0 if row_steps is None else row_steps.data_ptr(),
            kv.data_ptr(), kv.shape[1], kv.shape[2], slots.data_ptr(), history.data_ptr(),
            pointers.data_ptr(), src_len, *strides, bias.data_ptr(),
            sentence.data_ptr(), self.suppress.data_ptr(), self.suppress.numel(),
            logits.data_ptr(), torch.get_num_threads(), fused.LINEAR_MAX_ISA,
        )  # fmt: skip
        return logits
