"""Export a model_core checkpoint to a CTranslate2 model directory with the same weights.

    mt-export-ct2 weights/en-de exported/en-de-ct2 [--quantization int8]

CTranslate2's Transformer spec is filled tensor by tensor: the sinusoidal table is copied from
ours (so either position layout matches exactly), embeddings are scaled by sqrt(d_model) as in
ours, self-attention q/k/v and cross-attention k/v projections are fused as CTranslate2 expects,
and the decoder starts from the embedding of its start token like ours (<s>; <pad> for
Marian directories, which export too: ids never generated get a -1e9 logit bias). The source EOS is added by
CTranslate2 (`add_source_eos`), so callers pass sentencepiece pieces only.
Needs the `ctranslate2` package (the `bench` extra).
"""

from __future__ import annotations

if __name__ == "__main__":
    # `python -m model_core.export_ct2` runs as the console script does: mt_export_ct2 imports this
    # module itself, so that a Ctrl-C while torch imports is one line (status 130)
    from model_core.cli import mt_export_ct2

    raise SystemExit(mt_export_ct2())

import argparse
import sys
from pathlib import Path
from typing import cast

import numpy as np
import torch

from .checkpoint import CheckpointError, load_checkpoint
from .cli import folder_of_models, interruptible
from .model import MultiHeadAttention, Transformer


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy().copy()


def build_spec(model: Transformer, src_vocab: list[str], tgt_vocab: list[str]):
    """A ctranslate2 TransformerSpec holding `model`'s weights."""
    from ctranslate2.specs import common_spec, transformer_spec

    cfg = model.cfg
    activation = {
        "relu": common_spec.Activation.RELU,
        "gelu": common_spec.Activation.GELU,
        "swish": common_spec.Activation.SWISH,
    }[cfg.activation]
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.encoder_layers, cfg.decoder_layers),
        cfg.n_heads,
        pre_norm=cfg.norm == "pre",
        activation=activation,
    )
    table = _np(model.positions)

    def linear(ls, layer: torch.nn.Linear) -> None:
        ls.weight = _np(layer.weight)
        if layer.bias is not None:
            ls.bias = _np(layer.bias)

    def fused(ls, layers: list[torch.nn.Linear]) -> None:
        ls.weight = np.concatenate([_np(x.weight) for x in layers])
        ls.bias = np.concatenate([_np(x.bias) for x in layers])

    def norm(ns, ln: torch.nn.LayerNorm) -> None:
        ns.gamma, ns.beta = _np(ln.weight), _np(ln.bias)

    def self_attention(s, attn: MultiHeadAttention, ln: torch.nn.LayerNorm) -> None:
        fused(s.linear[0], [attn.q_proj, attn.k_proj, attn.v_proj])
        linear(s.linear[1], attn.out_proj)
        norm(s.layer_norm, ln)

    def ffn(s, layer) -> None:
        linear(s.linear_0, layer.ffn.w1)
        linear(s.linear_1, layer.ffn.w2)
        norm(s.layer_norm, layer.res_ffn.norm)

    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = _np(model.src_embed.weight)
    enc.position_encodings.encodings = table
    for s, layer in zip(enc.layer, model.encoder_layers, strict=True):
        self_attention(s.self_attention, layer.self_attn, layer.res_attn.norm)
        ffn(s.ffn, layer)
    dec.embeddings.weight = _np(model.tgt_embed.weight)
    dec.position_encodings.encodings = table
    for s, dec_layer in zip(dec.layer, model.decoder_layers, strict=True):
        self_attention(s.self_attention, dec_layer.self_attn, dec_layer.res_self.norm)
        cross = dec_layer.cross_attn
        linear(s.attention.linear[0], cross.q_proj)
        fused(s.attention.linear[1], [cross.k_proj, cross.v_proj])
        linear(s.attention.linear[2], cross.out_proj)
        norm(s.attention.layer_norm, dec_layer.res_cross.norm)
        ffn(s.ffn, dec_layer)
    if cfg.norm == "pre":  # pre-norm stacks end with a LayerNorm
        norm(enc.layer_norm, cast(torch.nn.LayerNorm, model.encoder_norm))
        norm(dec.layer_norm, cast(torch.nn.LayerNorm, model.decoder_norm))
    linear(dec.projection, model.generator)
    if cfg.suppress_ids:  # never generated: a -1e9 logit leaves the softmax of the rest as is
        bias = dec.projection.bias if dec.projection.has_bias() else None
        bias = np.zeros(cfg.tgt_vocab_size, np.float32) if bias is None else bias.copy()
        bias[list(cfg.suppress_ids)] = -1e9
        dec.projection.bias = bias
    if not cfg.scale_embeddings:
        enc.scale_embeddings = dec.scale_embeddings = False
    spec.config.add_source_eos = True
    spec.config.unk_token = tgt_vocab[cfg.unk_id]
    spec.config.bos_token = tgt_vocab[cfg.bos_id]
    spec.config.eos_token = tgt_vocab[cfg.eos_id]
    spec.config.decoder_start_token = tgt_vocab[cfg.bos_id]  # Marian: <pad>, ours: <s>
    spec.config.layer_norm_epsilon = cfg.layer_norm_eps
    spec.register_source_vocabulary(src_vocab)
    spec.register_target_vocabulary(tgt_vocab)
    return spec


class OutputError(ValueError):
    """The output directory cannot take the export; the message says why."""


def check_output(checkpoint_dir: Path, output_dir: Path) -> None:
    """The export replaces `output_dir` whole (CTranslate2 removes it first): it must be new,
    an empty folder or an earlier export (a model.bin in it), and never the checkpoint or a
    folder holding it (`mt-export-ct2 weights/en-de weights/en-de` deleted the model)."""
    if output_dir.exists() and not output_dir.is_dir():
        raise OutputError(f"{output_dir} is a file: give a folder (made if missing)")
    source, out = checkpoint_dir.resolve(), output_dir.resolve()
    if out == source or out in source.parents:
        what = "is" if out == source else "holds"
        raise OutputError(
            f"{output_dir} {what} the checkpoint {checkpoint_dir}: the export would delete it; "
            "give another folder"
        )
    if (
        output_dir.is_dir()
        and any(output_dir.iterdir())
        and not (output_dir / "model.bin").exists()
    ):
        raise OutputError(
            f"{output_dir} holds other files: the export replaces its folder whole; give a new "
            "or empty folder, or an earlier export"
        )


def export(
    checkpoint_dir: str | Path, output_dir: str | Path, quantization: str | None = None
) -> Path:
    """Convert; returns the output directory (an earlier export there is replaced)."""
    check_output(Path(checkpoint_dir), Path(output_dir))
    from ctranslate2.converters.converter import Converter

    ckpt = load_checkpoint(checkpoint_dir)
    src = ckpt.source_tokenizer
    tgt = ckpt.target_tokenizer
    src_vocab = src.id_to_piece(list(range(ckpt.config.src_vocab_size)))
    tgt_vocab = tgt.id_to_piece(list(range(ckpt.config.tgt_vocab_size)))

    class _Converter(Converter):
        def _load(self):
            return build_spec(ckpt.model, src_vocab, tgt_vocab)

    return Path(_Converter().convert(str(output_dir), quantization=quantization, force=True))


@interruptible("mt-export-ct2")
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mt-export-ct2", description=__doc__.split("\n")[0])
    p.add_argument("checkpoint", type=Path)
    p.add_argument("output", type=Path)
    p.add_argument(
        "--quantization", choices=["int8", "int8_float32", "float16", "bfloat16", "float32"]
    )
    args = p.parse_args(argv)
    models = folder_of_models(args.checkpoint)
    if models is not None:
        print(f"mt-export-ct2: error: {models}", file=sys.stderr)
        return 2
    try:
        out = export(args.checkpoint, args.output, args.quantization)
    except (CheckpointError, OutputError) as exc:
        print(f"mt-export-ct2: error: {exc}", file=sys.stderr)
        return 2
    except ImportError:
        print(
            "mt-export-ct2: error: needs ctranslate2 (pip install 'mt-serve[bench]')",
            file=sys.stderr,
        )
        return 2
    print(f"wrote {out}")
    return 0
