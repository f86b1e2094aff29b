"""The encoder, and each decoder step, in one C call each, for the models they fit.

Decoding one sentence makes ~25 kernel calls per step (model.DecoderLayer.step: per layer the
q|k|v projection, self-attention, its output projection, the cross-attention query, the
cross-attention, its output projection and the two feed-forward layers; then the generator),
each a few microseconds of arithmetic; the encoder makes ~15 more per batch. From Python each
call also costs its argument checks and output allocation, as much again as the arithmetic at
batch 1. These classes gather the weights' addresses once, when the model is prepared, and run
the kernels one after another in C (`_kernels.decoder_step`, `encoder_stack`, `cross_kv`):

- `DecoderStep`: the same kernels in the same order as the per-layer path, so the same bits.
- `EncoderStack`: likewise for every layer; its final LayerNorm is the C kernel's where the
  per-layer path runs torch's, so the memory agrees with it to float rounding.
- `DecoderStep.cross_kv`: every decoder layer's cross-attention keys and values from the memory
  in one product (one packed weight holding all of them; each output the same chain of
  multiply-adds as in its own layer's product), written into the slot cache's layout.

They fit pre-norm stacks with ReLU feed-forward layers whose linear layers are all packed on the
"panels" backend (the CPU float32 default where the C kernels are built). Other models
(post-norm Marian, gelu/swish, oneDNN, int8, GPU) keep the per-layer path. `ENABLED` turns both
off (tests compare the paths).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from . import fused

if TYPE_CHECKING:  # model imports this module
    from .model import DecoderCache, FeedForward, MultiHeadAttention, Transformer

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


class _Plan:
    """A table of weight addresses for a kernel, and the tensors behind them (kept alive).
    Each method appends one part and says whether it fits."""

    def __init__(self, model: Transformer):
        self.cfg = model.cfg
        self.keep: list[torch.Tensor] = []
        self.addresses: list[int] = []

    def _add(self, *tensors: torch.Tensor | None) -> None:
        for t in tensors:
            if t is not None:  # an alias of the storage: replacing a parameter's data (a
                self.keep.append(t.detach())  # submodule's .half()) never frees what it holds
            self.addresses.append(0 if t is None else t.data_ptr())

    def weight(self, linear: nn.Module, out_features: int, in_features: int) -> bool:
        packed = _panels(linear)
        if packed is None or (packed.out_features, packed.in_features) != (
            out_features,
            in_features,
        ):
            return False
        self._add(packed.panels, packed.bias)
        return True

    def norm(self, module: nn.Module) -> bool:
        d = self.cfg.d_model
        if (
            not isinstance(module, nn.LayerNorm)
            or module.normalized_shape != (d,)
            or module.eps != self.cfg.layer_norm_eps
            or not (_float_cpu(module.weight) and _float_cpu(module.bias))
        ):
            return False
        self._add(module.weight, module.bias)
        return True

    def tables(self, embed: torch.Tensor, positions: torch.Tensor, vocab: int) -> bool:
        """The embedding table (`vocab` rows, the ids the kernel checks against) and the
        position table."""
        if (
            not (_float_cpu(embed) and _float_cpu(positions))
            or embed.shape != (vocab, self.cfg.d_model)
            or positions.shape[1] != self.cfg.d_model
        ):
            return False
        self._add(embed, positions)
        return True

    def self_attention(self, attn: MultiHeadAttention, norm: nn.Module) -> bool:
        """The fused q|k|v projection, the LayerNorm before it, the output projection."""
        d = self.cfg.d_model
        return (
            attn.fused_qkv is not None
            and self.weight(attn.fused_qkv, 3 * d, d)
            and self.norm(norm)
            and self.weight(attn.out_proj, d, d)
        )

    def feed_forward(self, ffn: FeedForward, norm: nn.Module) -> bool:
        """The LayerNorm before it, then both ReLU feed-forward layers."""
        d, ff = self.cfg.d_model, self.cfg.d_ff
        return (
            ffn.act is F.relu
            and self.norm(norm)
            and self.weight(ffn.w1, ff, d)
            and self.weight(ffn.w2, d, ff)
        )

    def tensor(self) -> torch.Tensor:
        return torch.tensor(self.addresses, dtype=torch.int64)


def _fits(model: Transformer) -> bool:
    return fused.kernel_available() and model.cfg.norm == "pre" and not model.training


def _threads_isa() -> tuple[int, int]:
    return torch.get_num_threads(), fused.LINEAR_MAX_ISA


class _Stack:
    """A stack's sizes and its table of weight addresses."""

    def __init__(self, model: Transformer, plan: _Plan, layers: int, vocab: int):
        cfg = model.cfg
        self.layers, self.d, self.heads, self.d_ff = layers, cfg.d_model, cfg.n_heads, cfg.d_ff
        self.vocab, self.eps = vocab, float(cfg.layer_norm_eps)
        self.scale = (self.d // self.heads) ** -0.5  # attention's, as the per-layer path's
        self.positions = model.positions.shape[0]
        self.embed_scale = float(model.embed_scale)
        self._keep = plan.keep  # the tensors whose addresses the plan holds
        self.plan = plan.tensor()

    def __deepcopy__(self, memo) -> None:
        """A copied model holds other tensors than these addresses: it gets no fused stack."""
        return None


class EncoderStack(_Stack):
    """The encoder's weights as one table of addresses for `_kernels.encoder_stack`."""

    def __init__(self, model: Transformer, plan: _Plan):
        super().__init__(model, plan, model.cfg.encoder_layers, model.cfg.src_vocab_size)

    @classmethod
    def build(cls, model: Transformer) -> EncoderStack | None:
        """The encoder for `model` where it fits (see the module docstring), else None."""
        if not _fits(model):
            return None
        plan, cfg = _Plan(model), model.cfg
        for layer in model.encoder_layers:
            if not (
                plan.self_attention(layer.self_attn, layer.res_attn.norm)
                and plan.feed_forward(layer.ffn, layer.res_ffn.norm)
            ):
                return None
        if not (
            plan.norm(model.encoder_norm)
            and plan.tables(model.src_embed.weight, model.positions, cfg.src_vocab_size)
        ):
            return None
        return cls(model, plan)

    def fits(self, src: torch.Tensor) -> bool:
        """Whether it runs on this batch: on the CPU, with the attention kernels on."""
        return ENABLED and fused.ATTENTION_KERNELS and src.device.type == "cpu"

    def __call__(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """(B, S) ids, (B, 1, 1, S) mask -> memory (B, S, d), zeros at padding; as
        Transformer.encode_tokens."""
        b, s = src.shape
        src = src.to(torch.int64).contiguous()
        mask = src_mask.reshape(b, s).to(torch.uint8).contiguous()
        memory = torch.zeros((b, s, self.d), dtype=torch.float32)
        fused._kernels.encoder_stack(
            self.plan.data_ptr(), self.layers, self.d, self.heads, self.d_ff, self.vocab,
            self.positions, self.eps, self.embed_scale, self.scale,
            src.data_ptr(), mask.data_ptr(), b, s,
            memory.data_ptr(), *_threads_isa(),
        )  # fmt: skip
        return memory


class DecoderStep(_Stack):
    """The decoder's weights as one table of addresses for `_kernels.decoder_step`, and its
    cross-attention key/value projections as one packed weight for `_kernels.cross_kv`."""

    def __init__(self, model: Transformer, plan: _Plan, cross: fused.PackedWeight):
        super().__init__(model, plan, model.cfg.decoder_layers, model.cfg.tgt_vocab_size)
        self.suppress = torch.tensor(sorted(model.cfg.suppress_ids), dtype=torch.int64)
        self.cross = cross

    @classmethod
    def build(cls, model: Transformer) -> DecoderStep | None:
        """The step for `model` where it fits (see the module docstring), else None."""
        if not _fits(model):
            return None
        plan, cfg = _Plan(model), model.cfg
        d = cfg.d_model
        cross_weights, cross_biases = [], []
        for layer in model.decoder_layers:
            ca = layer.cross_attn
            if not (
                plan.self_attention(layer.self_attn, layer.res_self.norm)
                and plan.weight(ca.q_proj, d, d)
                and plan.norm(layer.res_cross.norm)
                and plan.weight(ca.out_proj, d, d)
                and plan.feed_forward(layer.ffn, layer.res_ffn.norm)
            ):
                return None
            for proj in (ca.k_proj, ca.v_proj):
                packed = _panels(proj)
                if packed is None or packed.bias is None or packed.in_features != d:
                    return None
                if packed.out_features != d:
                    return None
                cross_weights.append(packed.dense())
                cross_biases.append(packed.bias)
        if not (
            plan.norm(model.decoder_norm)
            and plan.weight(model.generator, cfg.tgt_vocab_size, d)
            and plan.tables(model.tgt_embed.weight, model.positions, cfg.tgt_vocab_size)
        ):
            return None
        cross = fused.PackedWeight(torch.cat(cross_weights), torch.cat(cross_biases))
        return cls(model, plan, cross)

    def cross_kv(
        self, memory: torch.Tensor, src_mask: torch.Tensor
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The slot cache's cross-attention state from the memory (B, S, d): per layer, keys
        times 1/sqrt(head_dim) and values, each (B, heads, S, head_dim), zeros at padding."""
        b, s, _ = memory.shape
        hd = self.d // self.heads
        memory = memory.contiguous()
        mask = src_mask.reshape(b, s).to(torch.uint8).contiguous()
        keys = torch.zeros((self.layers, b, self.heads, s, hd), dtype=torch.float32)
        values = torch.zeros_like(keys)
        assert self.cross.bias is not None  # built with the biases (build)
        fused._kernels.cross_kv(
            self.cross.panels.data_ptr(), self.cross.bias.data_ptr(), self.layers, self.d,
            self.heads, memory.data_ptr(), mask.data_ptr(), b, s, 1.0 / math.sqrt(hd),
            keys.data_ptr(), values.data_ptr(), *_threads_isa(),
        )  # fmt: skip
        return list(keys.unbind(0)), list(values.unbind(0))

    def fits_memory(self, memory: torch.Tensor) -> bool:
        """Whether `cross_kv` runs on this memory: float32 on the CPU, d_model wide."""
        return (
            ENABLED
            and memory.dtype == torch.float32
            and memory.device.type == "cpu"
            and memory.dim() == 3
            and memory.shape[2] == self.d
        )

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
        sentences = cross[2 * layers]
        bias = cache.src_bias
        if bias.shape != (sentences, src_len) or not _float_cpu(bias):
            raise ValueError("decoder step: src_bias must be (sentences, S), float32, contiguous")
        kv, history, slots, sentence = cache.kv, cache.history, cache.slots, cache.sentence
        # slot mode (fits) sets them all
        assert history is not None and slots is not None and sentence is not None
        row_steps = cache.row_steps if cache.steps is not None else None
        for index in (slots, sentence, row_steps):
            if index is not None and (
                index.dtype != torch.int64 or not index.is_contiguous() or index.numel() != n
            ):
                raise ValueError("decoder step: slots, sentences and steps: int64, one per row")
        hd = self.d // self.heads
        if not (_float_cpu(kv) and kv.shape[:1] + kv.shape[3:] == (layers, 2, self.heads, hd)) or (
            history.shape != kv.shape[1:3]
            or history.dtype != torch.int64
            or not history.is_contiguous()
        ):
            raise ValueError("decoder step: inconsistent self-attention cache")
        logits = torch.empty((n, self.vocab), dtype=torch.float32)
        fused._kernels.decoder_step(
            self.plan.data_ptr(), layers, self.d, self.heads, self.d_ff, self.vocab,
            self.positions, self.eps, self.embed_scale, self.scale,
            tokens.data_ptr(), n, cache.length, 0 if row_steps is None else row_steps.data_ptr(),
            kv.data_ptr(), kv.shape[1], kv.shape[2], slots.data_ptr(), history.data_ptr(),
            pointers.data_ptr(), sentences, src_len, *strides, bias.data_ptr(),
            sentence.data_ptr(), self.suppress.data_ptr(), self.suppress.numel(),
            logits.data_ptr(), *_threads_isa(),
        )  # fmt: skip
        return logits
