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
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .masks import pad_mask, target_mask

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}
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
        """One position per sequence: x (B, 1, d); appends this position's keys/values."""

        def self_attention(y: torch.Tensor) -> torch.Tensor:
            attn = self.self_attn
            fused = cache.qkv[layer] if cache.qkv else None
            if fused is not None:  # one matmul for q, k and v
                q, k, v = F.linear(y, *fused).split(attn.n_heads * attn.head_dim, dim=-1)
                q, k, v = attn.split(q), attn.split(k), attn.split(v)
            else:
                q, (k, v) = attn.split(attn.q_proj(y)), attn.project_kv(y)
            k, v = cache.append(layer, k, v)  # (B, h, t+1, hd)
            return attn.attend(q, k, v, None)

        def cross_attention(y: torch.Tensor) -> torch.Tensor:
            attn = self.cross_attn
            q = attn.split(attn.q_proj(y))
            return attn.attend(q, cache.cross_k[layer], cache.cross_v[layer], cache.src_mask)

        x = self.res_self(x, self_attention)
        x = self.res_cross(x, cross_attention)
        return self.res_ffn(x, self.ffn)


@dataclass
class DecoderCache:
    """Incremental decoding state for a batch of B rows (sentences or beams).

    Self-attention keys/values live in preallocated buffers that double when full, so a step
    writes one position instead of concatenating and a generous output cap costs nothing until
    it is used; `select` keeps or reorders rows.
    """

    self_k: list[torch.Tensor]  # per layer (B, h, capacity, hd)
    self_v: list[torch.Tensor]
    cross_k: list[torch.Tensor]  # per layer (B, h, S, hd), computed once from the memory
    cross_v: list[torch.Tensor]
    src_mask: torch.Tensor  # (B, 1, 1, S) bool
    length: int = 0  # positions written so far
    qkv: list[tuple[torch.Tensor, torch.Tensor] | None] = field(default_factory=list)  # fused q|k|v

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        t = self.length
        if t >= self.self_k[layer].shape[2]:  # full: double the capacity, keep the prefix
            for buffers in (self.self_k, self.self_v):
                old = buffers[layer]
                grown = old.new_empty((*old.shape[:2], 2 * old.shape[2], old.shape[3]))
                grown[:, :, :t] = old[:, :, :t]
                buffers[layer] = grown
        self.self_k[layer][:, :, t : t + 1] = k
        self.self_v[layer][:, :, t : t + 1] = v
        return self.self_k[layer][:, :, : t + 1], self.self_v[layer][:, :, : t + 1]

    def select(self, rows: torch.Tensor, same_sources: bool = False) -> None:
        """Keep rows `rows` (in that order): drops finished sequences or reorders beams.

        `same_sources=True` says every row keeps a row of the same sentence (beams reordered
        within their sentence), so the cross-attention keys/values, identical across a
        sentence's beams, stay as they are and only the self-attention prefix is gathered.
        """
        t = self.length
        for buffers in (self.self_k, self.self_v):
            for i, buf in enumerate(buffers):
                if rows.numel() == buf.shape[0]:  # same batch, new order: copy only the prefix
                    buf[:, :, :t] = buf[:, :, :t].index_select(0, rows)
                else:
                    buffers[i] = buf.index_select(0, rows)
        if same_sources:
            return
        for tensors in (self.cross_k, self.cross_v):
            for i, kv in enumerate(tensors):
                tensors[i] = kv.index_select(0, rows)
        self.src_mask = self.src_mask.index_select(0, rows)


class Transformer(nn.Module):
    """Encoder-decoder Transformer; `encode` once per batch, then `decode` or `decode_step`."""

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
        self.embed_dropout = nn.Dropout(cfg.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        pre = cfg.norm == "pre"  # pre-norm stacks end with a LayerNorm; post-norm ones already do
        eps = cfg.layer_norm_eps
        self.encoder_norm = nn.LayerNorm(cfg.d_model, eps=eps) if pre else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model, eps=eps) if pre else nn.Identity()
        self.generator = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=cfg.output_bias)
        self.reset_parameters()
        if cfg.tie_output:
            self.generator.weight = self.tgt_embed.weight

    def reset_parameters(self) -> None:
        """Xavier-uniform for matrices, as in the seeds; zero biases."""
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def embed(self, table: nn.Embedding, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        t = tokens.shape[1]
        x = table(tokens) * math.sqrt(self.cfg.d_model)  # (B, T, d)
        x = x + self.positions[offset : offset + t].to(x.dtype)
        return self.embed_dropout(x)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """(B, S) ids, (B, 1, 1, S) mask -> memory (B, S, d)."""
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return self.encoder_norm(x)

    def decode(self, memory, src_mask, tgt, tgt_mask) -> torch.Tensor:
        """Whole prefix: (B, T) ids -> hidden states (B, T, d)."""
        x = self.embed(self.tgt_embed, tgt)
        for layer in self.decoder_layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.decoder_norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.generator(hidden)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """The seeds' Generator: linear + log-softmax (computed in float32)."""
        return F.log_softmax(self.generator(hidden).float(), dim=-1)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits (B, T, V) for every target position."""
        src_mask = pad_mask(src, self.cfg.pad_id)
        memory = self.encode(src, src_mask)
        hidden = self.decode(memory, src_mask, tgt_in, target_mask(tgt_in, self.cfg.pad_id))
        return self.logits(hidden)

    def init_cache(
        self, memory: torch.Tensor, src_mask: torch.Tensor, capacity: int
    ) -> DecoderCache:
        """Cross-attention keys/values once from the memory; empty self-attention buffers."""
        b = memory.shape[0]
        h, hd = self.cfg.n_heads, self.cfg.head_dim
        cross = [layer.cross_attn.project_kv(memory) for layer in self.decoder_layers]

        def buffers() -> list[torch.Tensor]:  # positions >= length are never read: no zero fill
            shape = (b, h, min(capacity, INITIAL_CACHE_POSITIONS), hd)
            return [memory.new_empty(shape) for _ in self.decoder_layers]

        def fused_qkv(attn: MultiHeadAttention) -> tuple[torch.Tensor, torch.Tensor] | None:
            layers = (attn.q_proj, attn.k_proj, attn.v_proj)
            if not all(type(x) is nn.Linear for x in layers):  # e.g. quantized linears
                return None
            return torch.cat([x.weight for x in layers]), torch.cat([x.bias for x in layers])

        return DecoderCache(
            self_k=buffers(),
            self_v=buffers(),
            cross_k=[k for k, _ in cross],
            cross_v=[v for _, v in cross],
            src_mask=src_mask,
            qkv=[fused_qkv(layer.self_attn) for layer in self.decoder_layers],
        )

    def decode_step(self, tokens: torch.Tensor, cache: DecoderCache) -> torch.Tensor:
        """(B,) last tokens -> log-probabilities (B, V) of the next token; advances the cache."""
        x = self.embed(self.tgt_embed, tokens[:, None], offset=cache.length)  # (B, 1, d)
        for i, layer in enumerate(self.decoder_layers):
            x = layer.step(x, cache, i)
        cache.length += 1
        return self.log_probs(self.decoder_norm(x)[:, 0])


def count_parameters(model: nn.Module) -> int:
    """Distinct parameters (a tied table counts once)."""
    return sum(p.numel() for p in model.parameters())
