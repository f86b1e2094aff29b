"""A checkpoint is a directory:

    config.json        {"format": 1, "model": ModelConfig, "source_language", "target_language",
                        "source_tokenizer", "target_tokenizer", "training": {...}}
    model.safetensors  the weights (float32 or float16), tied tables stored once
    *.model            the sentencepiece model(s) named in config.json

Loading validates everything and raises one CheckpointError naming the file and the problem.
Nothing is ever unpickled: weights are safetensors, metadata is JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from . import marian
from .config import ModelConfig
from .model import Transformer
from .tokenizer import Tokenizer

FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
#: files that hold a checkpoint's weights, in order of preference (sized by `weights_bytes`)
WEIGHT_FILES = (WEIGHTS_FILE, "pytorch_model.bin")
_TOP_KEYS = {
    "format",
    "model",
    "source_language",
    "target_language",
    "source_tokenizer",
    "target_tokenizer",
    "training",
}


class CheckpointError(Exception):
    """A checkpoint directory that cannot be loaded; the message names the file and the problem."""


@dataclass
class Checkpoint:
    model: Transformer
    config: ModelConfig
    source_tokenizer: Tokenizer | marian.MarianTokenizer
    target_tokenizer: Tokenizer | marian.MarianTokenizer
    source_language: str
    target_language: str
    path: Path
    training: dict[str, Any] = field(default_factory=dict)
    target_languages: list[str] = field(default_factory=list)  # all targets (multi-target)
    target_tokens: dict[str, str] = field(default_factory=dict)  # target -> ">>xxx<<" token
    generation: dict[str, Any] = field(default_factory=dict)  # decoding defaults of the model
    beam_stop: str = (
        "first_k"  # beam_search's stopping rule ("heuristic", "early": as transformers)
    )


def _tied_keys(cfg: ModelConfig) -> set[str]:
    """State-dict keys that are aliases of another table and are not stored."""
    keys = set()
    if cfg.share_embeddings:
        keys.add("tgt_embed.weight")
    if cfg.tie_output:
        keys.add("generator.weight")
    return keys


def stored_state(model: Transformer, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The tensors a checkpoint holds: every parameter once, contiguous, optionally cast.
    (Layers derived for inference, such as fused q|k|v projections, are not stored.)"""
    skip = _tied_keys(model.cfg)
    state = {}
    for name, tensor in model.state_dict().items():
        if name in skip or ".fused_qkv." in name:
            continue
        t = tensor.detach().cpu()
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        state[name] = t.contiguous()
    return state


def save_checkpoint(
    directory: str | Path,
    model: Transformer,
    *,
    source_tokenizer: str | Path,
    target_tokenizer: str | Path,
    source_language: str,
    target_language: str,
    training: dict[str, Any] | None = None,
    dtype: torch.dtype | None = None,
) -> Path:
    """Write model + config + tokenizer(s) to `directory` (created); returns it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    names = {}
    for role, src in (("source", Path(source_tokenizer)), ("target", Path(target_tokenizer))):
        name = src.name
        if (directory / name).resolve() != src.resolve():
            (directory / name).write_bytes(src.read_bytes())
        names[role] = name
    save_file(stored_state(model, dtype), str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
    (directory / WEIGHTS_FILE).chmod(0o644)  # readable by a service running as another user
    meta = {
        "format": FORMAT_VERSION,
        "model": model.cfg.to_dict(),
        "source_language": source_language,
        "target_language": target_language,
        "source_tokenizer": names["source"],
        "target_tokenizer": names["target"],
        "training": training or {},
    }
    (directory / CONFIG_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return directory


def read_metadata(directory: str | Path) -> dict[str, Any]:
    """Parse and check config.json alone (cheap: no weights)."""
    path = Path(directory) / CONFIG_FILE
    if not Path(directory).is_dir():
        raise CheckpointError(f"{directory}: not a checkpoint directory")
    if not path.is_file():
        raise CheckpointError(f"{path}: missing file")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable JSON ({exc})") from exc
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    unknown = sorted(set(meta) - _TOP_KEYS)
    if unknown:
        raise CheckpointError(f"{path}: unknown key(s) {', '.join(unknown)}")
    missing = sorted((_TOP_KEYS - {"training"}) - set(meta))
    if missing:
        raise CheckpointError(f"{path}: missing key(s) {', '.join(missing)}")
    if meta["format"] != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: format {meta['format']!r}, this version reads {FORMAT_VERSION}"
        )
    try:
        meta["model"] = ModelConfig.from_dict(meta["model"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: model config: {exc}") from exc
    return meta


def describe(directory: str | Path) -> list[tuple[str, str]]:
    """The (source, target) language pairs a checkpoint directory translates, read from its
    metadata alone (no weights, no tokenizer): what a service lists before loading anything.
    A list, since one directory may serve several pairs (a multi-target model)."""
    if marian.is_marian_dir(directory):
        try:
            info = marian.marian_languages(directory)
        except marian.MarianError as exc:
            raise CheckpointError(str(exc)) from None
        return [(info.source_language, target) for target in info.target_languages]
    meta = read_metadata(directory)
    pair = (meta["source_language"], meta["target_language"])
    for lang in pair:
        if not isinstance(lang, str) or not lang:
            raise CheckpointError(
                f"{Path(directory) / CONFIG_FILE}: language codes must be non-empty strings, "
                f"got {lang!r}"
            )
    return [pair]


def weights_bytes(directory: str | Path) -> int:
    """Bytes of a checkpoint directory's weight file (the first of WEIGHT_FILES present): an
    estimate of the memory the model takes once loaded at the precision it was stored in
    (file sizes only; nothing is read)."""
    directory = Path(directory)
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            return (directory / name).stat().st_size
    return 0


def _load_tokenizer(
    directory: Path, name: str, vocab_size: int, cfg: ModelConfig, role: str
) -> Tokenizer:
    path = directory / name
    if not path.is_file():
        raise CheckpointError(f"{path}: missing file ({role} sentencepiece model)")
    try:
        tok = Tokenizer(path)
    except (OSError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: not a sentencepiece model ({exc})") from exc
    if tok.vocab_size != vocab_size:
        raise CheckpointError(
            f"{path}: vocabulary size {tok.vocab_size} does not match the model's "
            f"{role} vocabulary size {vocab_size} in {CONFIG_FILE}"
        )
    expected = {
        "pad_id": cfg.pad_id,
        "unk_id": cfg.unk_id,
        "bos_id": cfg.bos_id,
        "eos_id": cfg.eos_id,
    }
    if tok.special_ids() != expected:
        raise CheckpointError(
            f"{path}: special ids {tok.special_ids()} differ from {CONFIG_FILE}'s {expected}"
        )
    return tok


def load_checkpoint(
    directory: str | Path, *, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
) -> Checkpoint:
    """Validate and load a checkpoint directory (ours, or Hugging Face Marian's layout);
    the model is returned in eval mode."""
    directory = Path(directory)
    if marian.is_marian_dir(directory):
        try:
            return load_marian(directory, device=device, dtype=dtype)
        except marian.MarianError as exc:
            raise CheckpointError(str(exc)) from exc
    meta = read_metadata(directory)
    cfg: ModelConfig = meta["model"]
    src_tok = _load_tokenizer(
        directory, meta["source_tokenizer"], cfg.src_vocab_size, cfg, "source"
    )
    tgt_tok = _load_tokenizer(
        directory, meta["target_tokenizer"], cfg.tgt_vocab_size, cfg, "target"
    )
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise CheckpointError(f"{weights}: missing file")
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{weights}: unreadable safetensors file ({exc})") from exc
    model = Transformer(cfg)
    expected = {k: v for k, v in model.state_dict().items() if k not in _tied_keys(cfg)}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing:
        raise CheckpointError(f"{weights}: missing tensor(s) {', '.join(missing[:5])}")
    if unexpected:
        raise CheckpointError(f"{weights}: unexpected tensor(s) {', '.join(unexpected[:5])}")
    for name, ref in expected.items():
        if tuple(state[name].shape) != tuple(ref.shape):
            raise CheckpointError(
                f"{weights}: tensor {name} has shape {tuple(state[name].shape)}, "
                f"the config needs {tuple(ref.shape)}"
            )
    model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, strict=False)
    model.to(device=device, dtype=dtype).eval()
    return Checkpoint(
        model=model,
        config=cfg,
        source_tokenizer=src_tok,
        target_tokenizer=tgt_tok,
        source_language=meta["source_language"],
        target_language=meta["target_language"],
        path=directory,
        training=meta.get("training", {}),
    )


def load_marian(
    directory: Path, *, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
) -> Checkpoint:
    """A Hugging Face Marian directory (model_core/marian.py), loaded as it is."""
    config_path = directory / marian.CONFIG_FILE
    hf_config = marian._read_json(config_path)
    if not isinstance(hf_config, dict):
        raise marian.MarianError(f"{config_path}: expected a JSON object")
    langs = marian.marian_languages(directory)
    generation = marian.generation_defaults(directory, hf_config)
    cfg = marian.model_config(hf_config, config_path)
    hf_state, weights = marian.read_weights(directory)
    cfg = marian.resolve_sharing(hf_state, cfg)
    from dataclasses import replace

    start = generation.pop("decoder_start_id", cfg.bos_id)
    try:
        cfg = replace(
            cfg,
            bos_id=start,
            suppress_ids=tuple(generation.pop("suppress_ids")),
            force_eos_at_limit=generation.pop("force_eos_at_limit"),
        )
    except ValueError as exc:  # the decoder's start token is the only value left to check
        raise marian.MarianError(
            f"{directory / 'generation_config.json'}: decoder_start_token_id {start} cannot "
            f"start the decoder ({exc})"
        ) from exc
    try:
        state = marian.to_our_state(hf_state, cfg)
    except KeyError as exc:
        raise marian.MarianError(f"{weights}: missing tensor {exc}") from exc
    model = Transformer(cfg)
    expected = {k: v for k, v in model.state_dict().items() if k not in _tied_keys(cfg)}
    for name, ref in expected.items():
        if name not in state:
            raise marian.MarianError(f"{weights}: missing tensor for {name}")
        if tuple(state[name].shape) != tuple(ref.shape):
            raise marian.MarianError(
                f"{weights}: tensor for {name} has shape {tuple(state[name].shape)}, "
                f"{marian.CONFIG_FILE} needs {tuple(ref.shape)}"
            )
    model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, strict=False)
    model.to(device=device, dtype=dtype).eval()
    vocab = marian.load_vocab(directory / "vocab.json")
    tgt_vocab = vocab
    if (directory / "target_vocab.json").is_file():
        tgt_vocab = marian.load_vocab(directory / "target_vocab.json")
    specials = {"pad_id": cfg.pad_id, "unk_id": cfg.unk_id, "bos_id": cfg.bos_id}
    specials["eos_id"] = cfg.eos_id
    toks = []
    for name, voc, size in (
        ("source.spm", vocab, cfg.src_vocab_size),
        ("target.spm", tgt_vocab, cfg.tgt_vocab_size),
    ):
        path = directory / name
        if not path.is_file():
            raise marian.MarianError(f"{path}: missing file (sentencepiece model)")
        tok = marian.MarianTokenizer(path, voc, specials, marian.clean_up_spaces(directory))
        if tok.vocab_size > size:
            raise marian.MarianError(
                f"{path}: its vocabulary has ids up to {tok.vocab_size - 1}; "
                f"{marian.CONFIG_FILE} has {size} embeddings"
            )
        toks.append(tok)
    return Checkpoint(
        model=model,
        config=cfg,
        source_tokenizer=toks[0],
        target_tokenizer=toks[1],
        source_language=langs.source_language,
        target_language=langs.target_languages[0],
        path=directory,
        training={},
        target_languages=langs.target_languages,
        target_tokens=langs.target_tokens,
        beam_stop=generation.pop("beam_stop"),
        generation=generation,
    )
