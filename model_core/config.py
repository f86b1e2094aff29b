"""The model configuration: one typed dataclass, stored inside every checkpoint.

It holds everything needed to rebuild the network, including the variant switches that let the
same code express the Annotated Transformer (pre-norm, ReLU, interleaved sin/cos) and other
widely used checkpoints (e.g. Marian: post-norm, swish, sin|cos halves, tied embeddings, bias).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

NORMS = ("pre", "post")
ACTIVATIONS = ("relu", "gelu", "swish")
POSITION_LAYOUTS = ("interleaved", "halves")


@dataclass(frozen=True)
class ModelConfig:
    """Shape and variant of an encoder-decoder Transformer."""

    src_vocab_size: int  # source vocabulary size (sentencepiece pieces)
    tgt_vocab_size: int  # target vocabulary size
    d_model: int = 512  # width of every residual stream
    encoder_layers: int = 6  # N in the paper
    decoder_layers: int = 6
    n_heads: int = 8  # h; d_model must be divisible by it
    d_ff: int = 2048  # inner width of the position-wise feed-forward network
    dropout: float = 0.1  # residual, attention and embedding dropout (training only)
    max_positions: int = 1024  # rows of the sinusoidal table: longest source or target
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3
    share_embeddings: bool = True  # one table for source and target (needs one vocabulary)
    tie_output: bool = True  # the generator's weight is the target embedding table
    output_bias: bool = False  # a bias on the generator's logits
    norm: str = "pre"  # "pre": x + f(LN(x)) with a final LN per stack; "post": LN(x + f(x))
    activation: str = "relu"  # feed-forward non-linearity: relu | gelu | swish
    position_layout: str = "interleaved"  # sin/cos interleaved (seeds) or sin|cos halves
    layer_norm_eps: float = 1e-6
    scale_embeddings: bool = True  # multiply embeddings by sqrt(d_model) (Marian: scale_embedding)
    suppress_ids: tuple[int, ...] = ()  # ids never generated (Marian: bad_words_ids = [[pad]])
    force_eos_at_limit: bool = False  # the last allowed token is EOS (forced_eos_token_id)

    def __post_init__(self) -> None:
        object.__setattr__(self, "suppress_ids", tuple(int(i) for i in self.suppress_ids))
        problems = []
        if self.d_model % self.n_heads:
            problems.append(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.d_model % 2:
            problems.append(f"d_model={self.d_model} must be even for sinusoidal positions")
        if self.norm not in NORMS:
            problems.append(f"norm={self.norm!r} is not one of {NORMS}")
        if self.activation not in ACTIVATIONS:
            problems.append(f"activation={self.activation!r} is not one of {ACTIVATIONS}")
        if self.position_layout not in POSITION_LAYOUTS:
            problems.append(
                f"position_layout={self.position_layout!r} is not one of {POSITION_LAYOUTS}"
            )
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            problems.append("share_embeddings needs src_vocab_size == tgt_vocab_size")
        for name in ("src_vocab_size", "tgt_vocab_size", "encoder_layers", "decoder_layers"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1")
        if not 0.0 <= self.dropout < 1.0:
            problems.append(f"dropout={self.dropout} must be in [0, 1)")
        # bos is the decoder's start token; Marian starts from <pad>, so bos may equal pad
        special = {self.pad_id, self.unk_id, self.eos_id}
        ids = (self.pad_id, self.unk_id, self.bos_id, self.eos_id)
        if (
            len(special) != 3
            or self.bos_id in (self.unk_id, self.eos_id)
            or min(ids) < 0
            or max(ids) >= self.tgt_vocab_size
        ):
            problems.append(
                "pad/unk/eos ids must be distinct and inside the vocabulary (bos may equal pad)"
            )
        if any(not 0 <= i < self.tgt_vocab_size for i in self.suppress_ids):
            problems.append("suppress_ids must be inside the target vocabulary")
        if problems:
            raise ValueError("invalid ModelConfig: " + "; ".join(problems))

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Build from a dict; unknown keys are an error (they usually mean a version mismatch)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown model config key(s): {', '.join(unknown)}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ModelConfig:
        return cls.from_dict(json.loads(text))
