"""The encoder-decoder Transformer of "Attention Is All You Need", as the Annotated Transformer
renders it, with switches for the common variants (see ModelConfig).

Two ways to run the decoder:
- `decode(memory, src_mask, tgt, tgt_mask)`: the whole target prefix at once (training, and the
  reference decoder that re-runs the prefix every step);
- `decode_step(tokens, cache)`: one new token per sequence, with a key/value cache for
  self-attention and the cross-attention keys/values computed once from the encoder memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from . import fused
from .config import ModelConfig
from .fused_stack import DecoderStep, EncoderStack
from .linear_backend import available_backends
from .masks import pad_mask, target_mask

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "swish": F.silu,
}
INITIAL_CACHE_POSITIONS = 32  # self-attention cache positions allocated up front (then doubled)


def sinusoidal_table(positions: int, d_model: int, layout: str) -> torch.Tensor:
    """(positions, d_model) table; `interleaved` puts sin at even dims, `halves` puts sin first."""
    pos = torch.arange(positions, dtype=torch.float32)[:, None]
    inv = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    angles = pos * inv  # (P, d/2)
    if layout == "halves":
        return torch.cat([angles.sin(), angles.cos()], dim=1)
    table = torch.empty(positions, d_model)
    table[:, 0::2] = angles.sin()
    table[:, 1::2] = angles.cos()
    return table


class MultiHeadAttention(nn.Module):
    """Four projections (q, k, v, out) around scaled_dot_product_attention."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.d_model
        self.n_heads, self.head_dim, self.dropout = cfg.n_heads, cfg.head_dim, cfg.dropout
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.fused_qkv: nn.Module | None = None  # q|k|v in one layer, set for inference only

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)  # (B, h, T, hd)

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.split(self.k_proj(x)), self.split(self.v_proj(x))  # 2 x (B, h, S, hd)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask) -> torch.Tensor:
        p = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B,h,T,hd)
        b, _, t, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, -1))  # (B, T, d)

    def forward(self, query: torch.Tensor, source: torch.Tensor, mask) -> torch.Tensor:
        k, v = self.project_kv(source)
        return self.attend(self.split(self.q_proj(query)), k, v, mask)


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w1, self.w2 = nn.Linear(cfg.d_model, cfg.d_ff), nn.Linear(cfg.d_ff, cfg.d_model)
        self.act, self.dropout = _ACTIVATIONS[cfg.activation], nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(self.act(self.w1(x))))


class Residual(nn.Module):
    """Residual connection with LayerNorm: pre-norm x + f(LN(x)) or post-norm LN(x + f(x))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.dropout, self.pre = nn.Dropout(cfg.dropout), cfg.norm == "pre"

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        if self.pre:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn, self.ffn = MultiHeadAttention(cfg), FeedForward(cfg)
        self.res_attn, self.res_ffn = Residual(cfg), Residual(cfg)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.res_attn(x, lambda y: self.self_attn(y, y, mask))
        return self.res_ffn(x, self.ffn)

    def forward_tokens(
        self,
        x: torch.Tensor,
        index: torch.Tensor,
        batch: tuple[int, int],
        mask: torch.Tensor,
        kernel: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Inference only, the same computation as `forward` on a batch without its padding:
        x (T, d) holds the real positions, found at `index` of the flattened (B * S) layout.
        Projections, norms and the FFN run on the T rows; attention scatters k|v (with torch's
        attention, q|k|v) into the padded (B, S) layout. `kernel`: (bias (B, S), each token's
        sentence (T,)) to attend with the fused kernel, which writes the T rows directly."""
        attn, pre = self.self_attn, self.res_attn.pre
        (b, s), d = batch, x.shape[1]
        heads, hd = attn.n_heads, attn.head_dim
        norm = self.res_attn.norm if pre else None
        if attn.fused_qkv is not None:
            qkv = _norm_project(norm, attn.fused_qkv, x)
        else:
            h = x if norm is None else norm(x)
            qkv = torch.cat([attn.q_proj(h), attn.k_proj(h), attn.v_proj(h)], dim=1)
        if kernel is not None:
            kv = qkv.new_zeros((b * s, 2 * d)).index_copy_(0, index, qkv[:, d:])
            kv = kv.view(b, s, 2, heads, hd).permute(0, 2, 3, 1, 4)  # (B, 2, h, S, hd) view
            a = fused.attend_cross(qkv[:, :d], kv[:, 0], kv[:, 1], *kernel, scale=hd**-0.5)
        else:
            padded = qkv.new_zeros((b * s, 3 * d)).index_copy_(0, index, qkv)
            q, k, v = padded.view(b, s, 3, heads, hd).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, h, S, hd)
            a = a.transpose(1, 2).reshape(b * s, d).index_select(0, index)  # (T, d)
        x = _project_add(attn.out_proj, a, x)
        if not pre:
            x = self.res_attn.norm(x)
        return _ffn_block(self.res_ffn, self.ffn, x)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn, self.cross_attn = MultiHeadAttention(cfg), MultiHeadAttention(cfg)
        self.ffn = FeedForward(cfg)
        self.res_self, self.res_cross, self.res_ffn = Residual(cfg), Residual(cfg), Residual(cfg)

    def forward(self, x, memory, src_mask, tgt_mask) -> torch.Tensor:
        x = self.res_self(x, lambda y: self.self_attn(y, y, tgt_mask))
        x = self.res_cross(x, lambda y: self.cross_attn(y, memory, src_mask))
        return self.res_ffn(x, self.ffn)

    def step(self, x: torch.Tensor, cache: DecoderCache, layer: int) -> torch.Tensor:
        """One position per row, inference only: x (N, d); appends this position's keys/values.

        The same computation as `forward` for the last position, written with as few tensor
        operations as possible (no dropout, 2-D activations, residual adds fused into the
        projection where the layer supports it): per-step overhead is what dominates
        small-batch decoding.
        """
        sa, ca = self.self_attn, self.cross_attn
        n_rows, d = x.shape
        heads, hd = sa.n_heads, sa.head_dim
        pre = self.res_self.pre

        norm = self.res_self.norm if pre else None
        if sa.fused_qkv is not None:  # one matmul for q, k and v; k|v written in one copy
            qkv = _norm_project(norm, sa.fused_qkv, x)
        else:
            h = x if norm is None else norm(x)
            qkv = torch.cat([sa.q_proj(h), sa.k_proj(h), sa.v_proj(h)], dim=1)  # (N, 3d)
        if cache.slots is not None:  # the fused kernel writes k|v and attends in one call
            assert cache.history is not None  # set with the slots (slot mode)
            a = fused.attend_cached(
                qkv, cache.kv, cache.history, cache.slots, cache.length, layer, cache.row_steps
            )
        else:
            keys, values = cache.append(layer, qkv[:, d:].view(n_rows, 2, heads, hd))
            q = qkv[:, :d].reshape(n_rows, heads, 1, hd)
            a = F.scaled_dot_product_attention(q, keys, values, attn_mask=cache.key_mask)
            a = a.view(n_rows, d)
        x = _project_add(sa.out_proj, a, x)
        if not pre:
            x = self.res_self.norm(x)

        q = _norm_project(self.res_cross.norm if pre else None, ca.q_proj, x)
        if cache.slots is not None:
            assert cache.sentence is not None  # set with the slots (slot mode)
            a = fused.attend_cross(
                q, cache.cross_k[layer], cache.cross_v[layer], cache.src_bias, cache.sentence
            )
        else:
            g = cache.group  # rows per sentence: the beams share their sentence's memory
            q = q.view(n_rows // g, g, heads, hd).transpose(1, 2)  # (n, h, g, hd)
            # the K beams of a sentence are K queries against its one copy of the memory
            scores = torch.matmul(q, cache.cross_k[layer]).add_(cache.src_bias)  # (n, h, g, S)
            a = torch.matmul(scores.softmax(dim=-1), cache.cross_v[layer])  # (n, h, g, hd)
            a = a.transpose(1, 2).reshape(n_rows, d)
        x = _project_add(ca.out_proj, a, x)
        if not pre:
            x = self.res_cross.norm(x)

        return _ffn_block(self.res_ffn, self.ffn, x)


def _ffn_block(res: Residual, ffn: FeedForward, x: torch.Tensor) -> torch.Tensor:
    """Inference only: the residual FFN sub-layer on 2-D rows, ReLU and residual add fused into
    the projections where the layers are packed."""
    relu = ffn.act is F.relu
    inner = _norm_project(res.norm if res.pre else None, ffn.w1, x, "relu" if relu else "none")
    if not relu:
        inner = ffn.act(inner)
    x = _project_add(ffn.w2, inner, x)
    return x if res.pre else res.norm(x)


def _norm_project(
    norm: nn.Module | None, linear: nn.Module, x: torch.Tensor, activation: str = "none"
) -> torch.Tensor:
    """Inference only: linear(norm(x)) (linear(x) without a norm), then the activation
    ("none" or "relu"); one call where the layer is packed."""
    if isinstance(linear, PackedLinear) and (norm is None or isinstance(norm, nn.LayerNorm)):
        return linear.forward(x, activation=activation, norm=norm)  # no module hooks to run
    out = linear(x if norm is None else norm(x))
    return F.relu(out) if activation == "relu" else out


def _project_add(linear: nn.Module, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """residual + linear(x), in one operation when the layer is packed."""
    if isinstance(linear, PackedLinear):
        return linear.add_to(x, residual)
    return residual + linear(x)


@dataclass
class DecoderCache:
    """Incremental decoding state for N rows: n sentences times `group` rows (beams) each.

    Self-attention keys and values of every layer live in one preallocated buffer that doubles
    when full: a step writes one position per layer instead of concatenating, and a generous
    output cap costs nothing until it is used. `select` keeps or reorders rows and sentences.
    Two ways to keep it, the same results:

    - slot mode (`slots` set; the fused attention kernels, CPU float32): each sentence owns
      `beams` slots of the buffer and entries never move. `history` records, for the entry at
      (slot, position), the slot holding the same hypothesis's previous position, so reordering
      beams writes N numbers instead of copying every row's prefix; the kernel follows that
      chain. Cross-attention state stays as it was built and rows index it by `sentence`.
    - gather mode (torch operations, any device): row i owns kv[i]; `select` gathers the
      prefixes into the new row order, and drops finished sentences' cross-attention state.
      With `fixed` (continuous decoding replayed from CUDA graphs, model_core/continuous.py)
      the buffers keep their size and addresses and each sentence its place (rows place*K...)
      from its first step to its last; that module reorders the beams' prefixes itself, and
      the places no sentence holds are padding, which a step computes and nobody reads.
    """

    # gather mode (N, capacity, layers, 2, h, hd); slot mode (layers, slots, capacity, 2, h, hd)
    kv: torch.Tensor
    # gather mode: per layer keys (n, h, hd, S), transposed, times 1/sqrt(hd); values (n, h, S, hd)
    # slot mode: both (sentences, h, S, hd), keys times 1/sqrt(hd)
    cross_k: list[torch.Tensor]
    cross_v: list[torch.Tensor]
    src_bias: torch.Tensor  # 0 for source tokens, -inf for padding: (n, 1, 1, S) or (sentences, S)
    length: int = 0  # positions written so far
    group: int = 1  # rows per sentence: N == n * group
    spare: torch.Tensor | None = None  # gather mode: a second buffer of kv's shape, for reordering
    slots: torch.Tensor | None = None  # slot mode: (N,) the slot of each row
    history: torch.Tensor | None = None  # slot mode: (slots, capacity) the previous position's slot
    sentence: torch.Tensor | None = None  # slot mode: (N,) each row's sentence in the cross state
    active: torch.Tensor | None = None  # slot mode: (n,) the active sentences in the cross state
    beams: int = 1  # slot mode: slots per sentence
    # sentences at different steps (continuous decoding): (n,) each sentence's tokens so far;
    # row i writes position steps[i // group] and attends to positions up to it (a mask in
    # gather mode; in slot mode the kernel stops there). `length` is then the largest step.
    steps: torch.Tensor | None = None
    row_steps: torch.Tensor | None = None  # (N,) steps per row, set by decode_step
    key_mask: torch.Tensor | None = None  # (N, 1, 1, length + 1) positions each row attends to
    cross_ptrs: tuple | None = None  # slot mode: fused_stack.DecoderStep's checked addresses
    fixed: bool = False  # gather mode in buffers that keep their size and addresses (see above)

    def reserve(self) -> None:
        """Make room for position `length`: double the capacity when the buffer is full."""
        t, old = self.length, self.kv
        if self.history is None:  # gather mode: (N, capacity, ...)
            if t < old.shape[1]:
                return
            self.spare = None  # (let go first: the copy holds the old buffer and the new one)
            self.kv = self._new_kv((old.shape[0], 2 * old.shape[1], *old.shape[2:]))
            self.kv[:, :t] = old[:, :t]
            return
        if t < old.shape[2]:  # slot mode: (layers, slots, capacity, ...)
            return
        self.kv = old.new_empty((*old.shape[:2], 2 * old.shape[2], *old.shape[3:]))
        self.kv[:, :, :t] = old[:, :, :t]
        history = identity_history(old.shape[1], self.kv.shape[2], old.device)
        history[:, :t] = self.history[:, :t]
        self.history = history

    def _new_kv(self, shape) -> torch.Tensor:
        """A gather-mode buffer. With sentences at different steps a row reads positions that
        it never wrote, masked out: they must hold finite numbers (masked attention still
        multiplies them by 0), so such buffers start as zeros; else nothing is read unwritten."""
        if self.steps is None:
            return self.kv.new_empty(shape)
        return self.kv.new_zeros(shape)

    def append(self, layer: int, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Gather mode: write this position's keys/values (N, 2, h, hd) (after `reserve`);
        returns all keys and values so far, each (N, h, t + 1, hd)."""
        t = self.length
        if self.row_steps is None:
            self.kv[:, t, layer] = kv
        else:  # each row at its own step
            rows = torch.arange(kv.shape[0], device=kv.device)
            self.kv[rows, self.row_steps, layer] = kv
        prefix = self.kv[:, : t + 1, layer]  # (N, t + 1, 2, h, hd)
        return prefix[:, :, 0].transpose(1, 2), prefix[:, :, 1].transpose(1, 2)

    def select(
        self, rows: torch.Tensor, sentences: torch.Tensor | None = None, group: int | None = None
    ) -> None:
        """Keep rows `rows` in that order (drop finished sequences, reorder or expand beams).

        `sentences`: the sentences still decoding (indices into the current ones), when some
        left; their cross-attention state is kept. `group`: rows per sentence from now on.
        """
        if group is not None:
            self.group = group
        if self.slots is not None:
            self._select_slots(rows, sentences)
            return
        t, kv = self.length, self.kv
        if rows.numel() == kv.shape[0]:  # same rows, new order: gather into the spare buffer
            target = self.spare if self.spare is not None else self._new_kv(kv.shape)
            self.spare = kv
        else:  # gather only the prefix (positions >= t: see _new_kv)
            self.spare = None  # (let go first: the gather holds the buffer and its target)
            target = self._new_kv((rows.numel(), *kv.shape[1:]))
        torch.index_select(kv[:, :t], 0, rows, out=target[:, :t])
        self.kv = target
        if sentences is None:
            return
        if self.steps is not None:
            self.steps = self.steps.index_select(0, sentences)
        for tensors in (self.cross_k, self.cross_v):
            for i, cross in enumerate(tensors):
                tensors[i] = cross.index_select(0, sentences)
        self.src_bias = self.src_bias.index_select(0, sentences)

    def _select_slots(self, rows: torch.Tensor, sentences: torch.Tensor | None) -> None:
        """Slot mode: row r of sentence s, beam j = r % group, moves to slot s * beams + j and
        records where its prefix is; nothing in the buffer moves."""
        # slot mode sets them all (init_cache); select calls this only there
        assert self.slots is not None and self.history is not None and self.active is not None
        if sentences is not None:
            self.active = self.active.index_select(0, sentences)
        g = self.group
        if rows.numel() != self.active.numel() * g or g > self.beams:
            raise ValueError("select: rows must be `group` rows per active sentence")
        self.reserve()
        if sentences is None and self.slots.numel() == rows.numel():
            slots, sentence = self.slots, self.sentence  # the same sentences, the same slots
        else:
            sentence = self.active.repeat_interleave(g)
            beam = torch.arange(g, device=rows.device).repeat(self.active.numel())
            slots = sentence * self.beams + beam
        self.history[:, self.length].index_copy_(0, slots, self.slots.index_select(0, rows))
        self.slots, self.sentence = slots, sentence


def identity_history(slots: int, capacity: int, device: torch.device) -> torch.Tensor:
    """(slots, capacity) with row s all s: every entry's previous position in its own slot."""
    return torch.arange(slots, device=device)[:, None].expand(-1, capacity).contiguous()


class Transformer(nn.Module):
    """Encoder-decoder Transformer; `encode` once per batch, then `decode` or `decode_step`."""

    positions: torch.Tensor  # buffers (register_buffer)
    suppressed: torch.Tensor

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.src_embed = nn.Embedding(cfg.src_vocab_size, cfg.d_model)
        self.tgt_embed = (
            self.src_embed
            if cfg.share_embeddings
            else nn.Embedding(cfg.tgt_vocab_size, cfg.d_model)
        )
        self.register_buffer(
            "positions",
            sinusoidal_table(cfg.max_positions, cfg.d_model, cfg.position_layout),
            persistent=False,
        )
        # the ids never generated, on the model's device: one in-place fill per step, no copy
        # from the host (so that a step can also be captured in a CUDA graph)
        self.register_buffer(
            "suppressed", torch.tensor(sorted(cfg.suppress_ids), dtype=torch.long), persistent=False
        )
        self.embed_dropout = nn.Dropout(cfg.dropout)
        # ModuleLists, typed by their layers
        self.encoder_layers = cast(
            Sequence[EncoderLayer],
            nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers)),
        )
        self.decoder_layers = cast(
            Sequence[DecoderLayer],
            nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers)),
        )
        pre = cfg.norm == "pre"  # pre-norm stacks end with a LayerNorm; post-norm ones already do
        eps = cfg.layer_norm_eps
        self.encoder_norm = nn.LayerNorm(cfg.d_model, eps=eps) if pre else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model, eps=eps) if pre else nn.Identity()
        self.generator = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=cfg.output_bias)
        self.reset_parameters()
        if cfg.tie_output:
            self.generator.weight = self.tgt_embed.weight
        # whole stacks in one C call (fused_stack.py), set by prepare_for_inference where they fit
        self.fused_encoder: EncoderStack | None = None
        self.fused_step: DecoderStep | None = None

    def _apply(self, fn, recurse=True):
        """Moving or converting parameters (.to(), .half(), ...) may move the weights whose
        addresses the fused stacks hold: drop them (the per-layer path serves)."""
        self.fused_encoder = self.fused_step = None
        return super()._apply(fn, recurse)

    def reset_parameters(self) -> None:
        """Xavier-uniform for matrices, as in the seeds; zero biases."""
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    @property
    def embed_scale(self) -> float:
        return math.sqrt(self.cfg.d_model) if self.cfg.scale_embeddings else 1.0

    def embed(self, table: nn.Embedding, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        t = tokens.shape[1]
        x = table(tokens) * self.embed_scale  # (B, T, d)
        x = x + self.positions[offset : offset + t].to(x.dtype)
        return self.embed_dropout(x)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """(B, S) ids, (B, 1, 1, S) mask -> memory (B, S, d)."""
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return self.encoder_norm(x)

    def encode_tokens(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """Inference only: `encode` without computing the padding. In a batch of mixed lengths
        every layer's projections and FFN run on the real tokens only (see
        EncoderLayer.forward_tokens). Same memory at every real position; zeros at padding,
        which cross-attention masks anyway."""
        encoder = self.fused_encoder
        if encoder is not None and encoder.fits(src):  # every layer in one C call
            return encoder(src, src_mask)
        b, s = src.shape
        index = src_mask.reshape(b * s).nonzero().squeeze(1)
        x = self.embed(self.src_embed, src)
        d = x.shape[-1]
        x = x.reshape(b * s, d).index_select(0, index)  # (T, d)
        kernel = None
        if fused.attention_kernels_for(x):
            bias = torch.zeros((b, s), dtype=x.dtype).masked_fill_(~src_mask.view(b, s), -math.inf)
            kernel = (bias, torch.div(index, s, rounding_mode="floor"))
        for layer in self.encoder_layers:
            x = layer.forward_tokens(x, index, (b, s), src_mask, kernel)
        x = self.encoder_norm(x)
        return x.new_zeros((b * s, d)).index_copy_(0, index, x).view(b, s, d)

    def decode(self, memory, src_mask, tgt, tgt_mask) -> torch.Tensor:
        """Whole prefix: (B, T) ids -> hidden states (B, T, d)."""
        x = self.embed(self.tgt_embed, tgt)
        for layer in self.decoder_layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.decoder_norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.generator(hidden)

    def suppress(self, logits: torch.Tensor) -> torch.Tensor:
        """In place: -inf for the ids never generated (cfg.suppress_ids)."""
        if self.suppressed.numel():
            logits.index_fill_(-1, self.suppressed, float("-inf"))
        return logits

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """The seeds' Generator: linear + log-softmax (computed in float32)."""
        return F.log_softmax(self.suppress(self.generator(hidden).float()), dim=-1)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits (B, T, V) for every target position."""
        src_mask = pad_mask(src, self.cfg.pad_id)
        memory = self.encode(src, src_mask)
        hidden = self.decode(memory, src_mask, tgt_in, target_mask(tgt_in, self.cfg.pad_id))
        return self.logits(hidden)

    def init_cache(
        self,
        memory: torch.Tensor,
        src_mask: torch.Tensor,
        capacity: int,
        beams: int = 1,
        gather: bool = False,
    ) -> DecoderCache:
        """Cross-attention keys/values once from the memory; empty self-attention buffers.

        `beams`: the most rows a sentence will have (the beam size). Slot mode (see
        DecoderCache) where the fused attention kernels run and `gather` is False, gather
        mode elsewhere.
        """
        b = memory.shape[0]
        h, hd = self.cfg.n_heads, self.cfg.head_dim
        scale = 1.0 / math.sqrt(hd)
        layers, positions = len(self.decoder_layers), min(capacity, INITIAL_CACHE_POSITIONS)
        if not gather and fused.attention_kernels_for(memory):
            sentences = torch.arange(b, device=memory.device)
            cross_k, cross_v, bias = self.slot_cross_state(memory, src_mask)
            return DecoderCache(  # positions >= length are never read: no zero fill
                kv=memory.new_empty((layers, b * beams, positions, 2, h, hd)),
                cross_k=cross_k,
                cross_v=cross_v,
                src_bias=bias,
                slots=sentences * beams,
                sentence=sentences,
                active=sentences,
                beams=beams,
                history=identity_history(b * beams, positions, memory.device),
            )
        bias = torch.zeros(src_mask.shape, dtype=memory.dtype, device=memory.device)
        bias = bias.masked_fill(~src_mask, float("-inf"))  # (b, 1, 1, S)
        cross = [layer.cross_attn.project_kv(memory) for layer in self.decoder_layers]
        return DecoderCache(
            kv=memory.new_empty((b, positions, layers, 2, h, hd)),
            cross_k=[(k * scale).transpose(2, 3).contiguous() for k, _ in cross],
            cross_v=[v for _, v in cross],
            src_bias=bias,
        )

    def slot_cross_state(
        self, memory: torch.Tensor, src_mask: torch.Tensor
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
        """The slot layout's cross-attention state of (b, S, d) memory: per layer keys times
        1/sqrt(head_dim) and values, each (b, heads, S, head_dim), and the (b, S) bias (0 at
        tokens, -inf at padding); what init_cache puts in a slot-layout cache, without its
        self-attention buffers (continuous decoding adds it to a running cache)."""
        b = memory.shape[0]
        bias = torch.zeros((b, src_mask.shape[-1]), dtype=memory.dtype, device=memory.device)
        bias.masked_fill_(~src_mask.reshape(b, -1), float("-inf"))
        step = self.fused_step
        if step is not None and step.fits_memory(memory):  # one C call for every layer
            cross_k, cross_v = step.cross_kv(memory, src_mask)
        else:
            scale = 1.0 / math.sqrt(self.cfg.head_dim)
            cross = [layer.cross_attn.project_kv(memory) for layer in self.decoder_layers]
            cross_k = [(k * scale).contiguous() for k, _ in cross]
            cross_v = [v.contiguous() for _, v in cross]
        return cross_k, cross_v, bias

    def decode_step(
        self, tokens: torch.Tensor, cache: DecoderCache, rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(N,) last tokens -> float32 logits (N, V) of the next token; advances the cache.

        Inference only (no dropout). The searches normalise the logits themselves, so that
        they can take the top candidates before touching the whole vocabulary twice.

        `rows` (slot layout only): compute only these rows (int64 indices, ascending), the
        logits then (len(rows), V); the others write nothing this step (a row no later step
        extends: a beam with score -inf). A row's logits are the same bits either way.
        """
        cache.reserve()
        if cache.steps is not None:  # each sentence at its own step
            cache.row_steps = cache.steps.repeat_interleave(cache.group)  # (N,)
        if rows is not None:
            if cache.slots is None or cache.row_steps is None:
                raise ValueError("decode_step(rows=...) needs the slot layout with per-row steps")
            assert cache.sentence is not None  # set with the slots (slot mode)
            whole = cache.slots, cache.sentence, cache.row_steps
            cache.slots, cache.sentence, cache.row_steps = (t.index_select(0, rows) for t in whole)
            try:
                return self._decode_rows(tokens.index_select(0, rows), cache)
            finally:
                cache.slots, cache.sentence, cache.row_steps = whole
        return self._decode_rows(tokens, cache)

    def _decode_rows(self, tokens: torch.Tensor, cache: DecoderCache) -> torch.Tensor:
        """decode_step after its room is reserved and the rows' steps set."""
        step = self.fused_step
        if step is not None and step.fits(cache):  # the whole step in one C call
            logits = step(tokens, cache)
            cache.length += 1
            return logits
        table = self.tgt_embed(tokens)  # (N, d); embed() for one position, in one fewer op
        if cache.steps is None:
            position = self.positions[cache.length]  # (d,)
        else:
            assert cache.row_steps is not None  # set from the steps (decode_step)
            position = self.positions.index_select(0, cache.row_steps)  # (N, d)
            if cache.slots is None:  # gather mode: a mask (the slot kernel stops at the step)
                width = torch.arange(cache.length + 1, device=tokens.device)
                cache.key_mask = (width <= cache.row_steps[:, None]).view(len(tokens), 1, 1, -1)
        x = (table * self.embed_scale).add_(position.to(table.dtype))  # as embed(): 2 roundings
        for i, layer in enumerate(self.decoder_layers):
            x = layer.step(x, cache, i)
        cache.length += 1
        return self.suppress(_norm_project(self.decoder_norm, self.generator, x).float())

    def prepare_for_inference(
        self, packed: bool = False, backend: str | None = None
    ) -> Transformer:
        """In place, for decoding: fuse each self-attention's q|k|v projections into one linear
        layer, and with `packed=True` (CPU float32, a PackedLinear backend available) swap
        every linear layer for a PackedLinear on `backend` (None: the first available). Outputs are unchanged up to float rounding; the model can no
        longer be trained."""
        self.eval()
        layers: list[EncoderLayer | DecoderLayer] = [*self.encoder_layers, *self.decoder_layers]
        for layer in layers:
            attn = layer.self_attn
            parts = (attn.q_proj, attn.k_proj, attn.v_proj)
            if attn.fused_qkv is None and all(type(p) is nn.Linear for p in parts):
                fused = nn.Linear(
                    self.cfg.d_model, 3 * self.cfg.d_model, device=attn.q_proj.weight.device
                )
                with torch.no_grad():
                    fused.weight.copy_(torch.cat([p.weight for p in parts]))
                    fused.bias.copy_(torch.cat([p.bias for p in parts]))
                attn.fused_qkv = fused.to(attn.q_proj.weight.dtype).requires_grad_(False)
        if packed:
            if not packed_linear_available():
                raise RuntimeError(
                    "packed weights need model_core's C kernels or torch built with oneDNN"
                )
            swap_linears(
                self,
                lambda lin: PackedLinear(lin, backend) if type(lin) is nn.Linear else lin,
            )
        self.fused_encoder = EncoderStack.build(self)
        self.fused_step = DecoderStep.build(self)
        return self

    def unpack(self) -> Transformer:
        """Undo the PackedLinear swap (e.g. before int8 quantization)."""
        self.fused_encoder = self.fused_step = None
        swap_linears(self, lambda lin: lin.to_linear() if isinstance(lin, PackedLinear) else lin)
        return self


def packed_linear_backends() -> list[str]:
    """PackedLinear's backends available here, the default first (linear_backend.py)."""
    return available_backends()


def packed_linear_available() -> bool:
    """Whether PackedLinear has a backend here: model_core's C kernels, or torch's oneDNN
    linear ops."""
    return bool(packed_linear_backends())


class PackedLinear(nn.Module):
    """A frozen float32 linear layer with its weight packed once for the CPU's GEMM. Inference
    only, CPU only. Two backends, same results up to float rounding:

    - "panels" (the default where model_core's C kernels are built): panels of 16 output
      features for `fused.PackedWeight`, model_core's own GEMM. The LayerNorm before the
      layer, its bias, ReLU and the residual add run in the same call, and a row gets the same
      bits in any batch by construction.
    - "onednn": oneDNN's blocked layout, through torch's mkldnn linear ops. Also batch
      invariant (tested), and picked by `linear_backend.choose_linear_backend` where it is
      faster on the CPU at hand (arm64, or where a start-up micro-benchmark says so).
    """

    def __init__(self, linear: nn.Linear, backend: str | None = None):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        available = packed_linear_backends()
        self.backend = backend or (available[0] if available else "onednn")
        if self.backend not in available:
            raise RuntimeError(
                f"PackedLinear backend {self.backend!r} is not available here (available: "
                f"{available}; panels needs model_core's C kernels, onednn torch's mkldnn ops)"
            )
        weight = linear.weight.detach().float().contiguous()
        if self.backend == "panels":
            self.packed = fused.PackedWeight(weight, linear.bias)  # keeps its own bias copy
            self.bias = self.packed.bias
        else:
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, 32)
            self.bias = None if linear.bias is None else linear.bias.detach().float().clone()

    def forward(
        self, x: torch.Tensor, activation: str = "none", norm: nn.LayerNorm | None = None
    ) -> torch.Tensor:
        """`activation`: "none", or "relu" applied in the same call. `norm`: a LayerNorm
        applied to x first (in the same call on the panels backend)."""
        if self.backend == "panels":
            return self.packed(x, relu=activation == "relu", norm=norm)
        if norm is not None:
            x = norm(x)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, activation, [], "")

    def add_to(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """residual + self(x) in one call."""
        if self.backend == "panels":
            return self.packed(x, residual=residual)
        return torch.ops.mkldnn._linear_pointwise.binary(x, residual, self.packed, self.bias, "add")

    def dense_weight(self) -> torch.Tensor:
        if self.backend == "panels":
            return self.packed.dense()
        return cast(torch.Tensor, self.packed).to_dense()  # the onednn backend's: a tensor

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        """Saved like nn.Linear (dense weight, bias), so a prepared model still checkpoints."""
        destination[prefix + "weight"] = self.dense_weight()
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias

    def to_linear(self) -> nn.Linear:
        linear = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None)
        with torch.no_grad():
            linear.weight.copy_(self.dense_weight())
            if self.bias is not None:
                linear.bias.copy_(self.bias)
        return linear.requires_grad_(False)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"packed={self.backend}"
        )


def swap_linears(module: nn.Module, convert) -> None:
    """Replace, in place, each submodule for which `convert` returns a new module (the layers
    under a replaced one are not visited)."""
    for name, child in module.named_children():
        new = convert(child)
        if new is not child:
            setattr(module, name, new)
        else:
            swap_linears(child, convert)


def count_parameters(model: nn.Module) -> int:
    """Distinct parameters (a tied table counts once)."""
    return sum(p.numel() for p in model.parameters())
