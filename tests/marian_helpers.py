"""Small random Marian models in the Hugging Face layout, built with transformers itself:
real sentencepiece models (source and target) trained on made-up text, one vocab.json over
both, MarianMTModel.save_pretrained. Random weights get a large scale so that the next-token
distributions are peaked and a comparison of token ids is meaningful (no near ties)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import sentencepiece as spm
import torch

from tests.conftest import make_parallel, write_lines


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one thread inside the block: transformers' generate on these tiny models is
    mostly per-step overhead, which a second OpenMP thread multiplies on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_spm(lines: list[str], prefix: Path, vocab_size: int) -> Path:
    spm.SentencePieceTrainer.train(
        input=str(write_lines(prefix.with_suffix(".txt"), lines)),
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    return prefix.with_suffix(".model")


def make_marian_dir(
    directory: Path,
    *,
    layers: tuple[int, int] = (2, 2),
    heads: int = 2,
    d_model: int = 32,
    d_ff: int = 64,
    spm_vocab: int = 70,
    tied: bool = True,
    share: bool = True,
    logits_bias: bool = True,
    piece_bias: dict[str, float] | None = None,
    lang_tokens: tuple[str, ...] = (),
    num_beams: int = 4,
    length_penalty: float | None = None,
    languages: tuple[str, str] | None = ("en", "de"),
    seed: int = 0,
    scale: float = 3.0,
) -> Path:
    """Write a random MarianMTModel + tokenizer files to `directory`; returns it.

    tied: lm_head is the decoder's embedding table; share: one table for encoder and
    decoder (share_encoder_decoder_embeddings); piece_bias: added to final_logits_bias at
    those pieces' ids ({"<pad>": 50.0}); languages: tokenizer_config.json's source_lang /
    target_lang (None: no tokenizer_config.json); num_beams, length_penalty: written to
    generation_config.json."""
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    directory.mkdir(parents=True, exist_ok=True)
    src, tgt = make_parallel(300, seed=seed)
    work = directory.parent / f".{directory.name}-spm"
    work.mkdir(exist_ok=True)
    src_spm = train_spm(src, work / "src", spm_vocab)
    tgt_spm = train_spm(tgt, work / "tgt", spm_vocab)
    (directory / "source.spm").write_bytes(src_spm.read_bytes())
    (directory / "target.spm").write_bytes(tgt_spm.read_bytes())
    pieces = []
    for path in (src_spm, tgt_spm):
        sp = spm.SentencePieceProcessor(model_file=str(path))
        pieces += [sp.id_to_piece(i) for i in range(3, sp.get_piece_size())]
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in [*lang_tokens, *pieces]:
        vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    if languages is not None:
        (directory / "tokenizer_config.json").write_text(
            json.dumps(
                {"source_lang": languages[0], "target_lang": languages[1], "model_max_length": 64}
            )
        )
    pad = vocab["<pad>"]
    config = MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        d_model=d_model,
        encoder_layers=layers[0],
        decoder_layers=layers[1],
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=d_ff,
        decoder_ffn_dim=d_ff,
        max_position_embeddings=64,
        pad_token_id=pad,
        eos_token_id=0,
        bos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
        scale_embedding=True,
        tie_word_embeddings=tied,
        share_encoder_decoder_embeddings=share,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue
            if p.dim() > 1:
                p.normal_(0.0, scale / p.shape[-1] ** 0.5)
            elif "layer_norm" in name and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 0.1)
        if logits_bias:
            model.final_logits_bias.normal_(0.0, 1.0)
        for piece, value in (piece_bias or {}).items():
            model.final_logits_bias[0, vocab[piece]] += value
    model.generation_config = GenerationConfig(
        bad_words_ids=[[pad]],
        bos_token_id=0,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        num_beams=num_beams,
        pad_token_id=pad,
        **({} if length_penalty is None else {"length_penalty": length_penalty}),
        renormalize_logits=True,
    )
    model.save_pretrained(directory)
    return directory
