"""Hugging Face Marian checkpoints (OPUS-MT), served as they are downloaded: no conversion step.

A Marian directory holds `config.json` (`"model_type": "marian"`), `model.safetensors` or
`pytorch_model.bin`, `source.spm`, `target.spm`, `vocab.json` (one vocabulary over both
sentencepiece models; `target_vocab.json` where the vocabularies are separate) and optionally
`generation_config.json`. Its network is our Transformer with Marian's switches (ModelConfig:
post-norm, swish, sin|cos halves, the decoder starting from <pad>, `final_logits_bias`, pad
never generated, EOS forced at the length limit), so every fast path serves it.

The language pair comes from, in order: an `mt.json` in the directory
(`{"source_language": "en", "target_language": "de"}`, or `"target_languages": [...]`),
config.json's `source_language` / `target_language`, tokenizer_config.json's `source_lang` /
`target_lang` (what OPUS-MT directories carry), or the directory name `opus-mt-SRC-TGT`.
Multi-target models carry `>>xxx<<` tokens in their vocabulary, listed by two-letter codes
where langcodes.py has one (`>>deu<<` as `de`); the token for the request's target is put
before the source. `pytorch_model.bin` is read with `torch.load(weights_only=True)`: never unpickled code.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sentencepiece as spm
import torch

from .config import ModelConfig
from .langcodes import token_languages, two_letter

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
OVERRIDE_FILE = "mt.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_LANG_TOKEN = re.compile(r"^>>([A-Za-z_]{2,12})<<$")
_DIR_NAME = re.compile(r"^opus-mt-(?:tc-(?:big-|base-)?)?([A-Za-z_]+)-([A-Za-z_]+)$")


class MarianError(Exception):
    """A Marian directory that cannot be loaded; the message names the file and the problem."""


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise MarianError(f"{path}: missing file")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MarianError(f"{path}: unreadable JSON ({exc})") from exc


def is_marian_dir(directory: str | Path) -> bool:
    """Whether `directory` holds a Hugging Face Marian config (cheap: reads config.json only)."""
    path = Path(directory) / CONFIG_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("model_type") == "marian"


@dataclass
class LanguageInfo:
    """What a Marian directory translates, read without loading weights."""

    source_language: str
    target_languages: list[str]
    target_tokens: dict[str, str] = field(default_factory=dict)  # language -> ">>xxx<<"

    @property
    def multi_target(self) -> bool:
        return bool(self.target_tokens)


def _vocab_language_tokens(vocab: dict[str, int]) -> dict[str, str]:
    found = {}
    for piece in vocab:
        m = _LANG_TOKEN.match(piece)
        if m:
            found[m.group(1)] = piece
    return found


def _json_object(path: Path) -> dict[str, Any]:
    data = _read_json(path)
    if not isinstance(data, dict):
        raise MarianError(f"{path}: expected a JSON object")
    return data


def _language_code(value: Any, path: Path, key: str) -> str | None:
    """A language code from a metadata file (None when absent or empty)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise MarianError(f"{path}: {key} must be a language code (a string), got {value!r}")
    return value


def marian_languages(directory: str | Path) -> LanguageInfo:
    """The language pair(s) of a Marian directory. Each of source and target comes from the
    first of: `mt.json` (an explicit override), config.json's `source_language` /
    `target_language`, tokenizer_config.json's `source_lang` / `target_lang` (what real
    OPUS-MT directories carry), the directory name `opus-mt-SRC-TGT`. Three-letter codes with
    a two-letter one (`deu`) are listed as that (`de`), except those mt.json names. A model
    is multi-target when its vocabulary has `>>xxx<<` tokens: its targets are those tokens'
    languages (two-letter codes where langcodes.token_languages finds one). Reads JSON only."""
    directory = Path(directory)
    config = _json_object(directory / CONFIG_FILE)
    vocab = _json_object(directory / "vocab.json")
    override: dict[str, Any] = {}
    if (directory / OVERRIDE_FILE).is_file():
        override = _json_object(directory / OVERRIDE_FILE)
    tok_config: dict[str, Any] = {}
    if (directory / TOKENIZER_CONFIG_FILE).is_file():
        tok_config = _json_object(directory / TOKENIZER_CONFIG_FILE)
    m = _DIR_NAME.match(directory.name)
    named = (m.group(1), m.group(2)) if m else (None, None)

    def first(role: str) -> tuple[str | None, bool]:
        """(code, whether mt.json gave it) for role "source" or "target"."""
        over_path = directory / OVERRIDE_FILE
        code = _language_code(override.get(f"{role}_language"), over_path, f"{role}_language")
        if code:
            return code, True
        code = _language_code(
            config.get(f"{role}_language"), directory / CONFIG_FILE, f"{role}_language"
        ) or _language_code(
            tok_config.get(f"{role}_lang"), directory / TOKENIZER_CONFIG_FILE, f"{role}_lang"
        )
        return code or named[role == "target"], False

    source, explicit_source = first("source")
    if source and not explicit_source:
        source = two_letter(source)
    explicit_targets = override.get("target_languages")
    if explicit_targets is not None and (
        not isinstance(explicit_targets, list)
        or not all(isinstance(t, str) and t for t in explicit_targets)
    ):
        raise MarianError(
            f"{directory / OVERRIDE_FILE}: target_languages must be a list of language codes"
        )
    target, explicit_target = first("target")
    targets = explicit_targets or ([target] if target else [])
    tokens = _vocab_language_tokens(vocab)  # the model's code -> ">>code<<"
    if tokens:
        listed = token_languages(sorted(tokens))  # the model's code -> the code listed
        by_listed = {listed[code]: token for code, token in tokens.items()}
        aliases = {code: token for code, token in tokens.items() if code not in by_listed}
        wanted = [t for t in targets if t in by_listed or t in aliases]
        explicit = bool(wanted) and bool(explicit_targets or explicit_target)
        targets = wanted if explicit else sorted(by_listed)  # mt.json may name those to serve
        tokens = {**aliases, **by_listed}  # three-letter requests still find their token
    elif targets and not (explicit_targets or explicit_target):
        targets = [two_letter(t) for t in targets]
    if not source or not targets:
        raise MarianError(
            f"{directory}: unknown language pair: no source_lang/target_lang in "
            f"{TOKENIZER_CONFIG_FILE}; name the directory opus-mt-SRC-TGT or write "
            f'{OVERRIDE_FILE} with {{"source_language": ..., "target_language": ...}}'
        )
    return LanguageInfo(source, targets, tokens)


class MarianTokenizer:
    """A sentencepiece model whose pieces are numbered by the model's vocab.json (as the
    Hugging Face MarianTokenizer does); the same interface as tokenizer.Tokenizer."""

    def __init__(
        self,
        spm_path: Path,
        vocab: dict[str, int],
        specials: dict[str, int],
        clean_up_spaces: bool = False,
    ):
        """`clean_up_spaces`: tokenizer_config.json's `clean_up_tokenization_spaces`, which
        makes transformers remove the space before punctuation and English contractions in
        what it decodes."""
        self.path, self.clean_up_spaces = spm_path, clean_up_spaces
        try:
            self.sp = spm.SentencePieceProcessor(model_file=str(spm_path))
        except (OSError, RuntimeError) as exc:
            raise MarianError(f"{spm_path}: not a sentencepiece model ({exc})") from exc
        self.vocab = vocab
        self.pieces = {i: p for p, i in vocab.items()}
        self.pad_id, self.unk_id = specials["pad_id"], specials["unk_id"]
        self.bos_id, self.eos_id = specials["bos_id"], specials["eos_id"]
        # transformers' MarianTokenizer has no bos token: the decoder's start token (<pad>,
        # or another piece a generation config names) is skipped only where it is special
        self.skip = {self.pad_id, self.unk_id, self.eos_id}
        self.skip |= {i for p, i in vocab.items() if _LANG_TOKEN.match(p)}

    @property
    def vocab_size(self) -> int:
        return max(self.vocab.values()) + 1

    def encode_pieces(self, text: str) -> list[str]:
        return self.sp.encode(text, out_type=str)

    def encode(self, text: str) -> list[int]:
        return [self.vocab.get(p, self.unk_id) for p in self.encode_pieces(text)]

    def decode(self, ids: list[int]) -> str:
        pieces = [self.pieces[i] for i in ids if i not in self.skip and i in self.pieces]
        text = self.sp.decode_pieces(pieces).replace("\u2581", " ").strip()  # as MarianTokenizer
        return clean_up_tokenization(text) if self.clean_up_spaces else text

    def id_to_piece(self, ids: list[int]) -> list[str]:
        return [self.pieces.get(i, "<unk>") for i in ids]

    def special_ids(self) -> dict[str, int]:
        return {"pad_id": self.pad_id, "unk_id": self.unk_id}


def clean_up_tokenization(text: str) -> str:
    """transformers' `clean_up_tokenization`, applied as it applies it."""
    for spaced, joined in (
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ):
        text = text.replace(spaced, joined)
    return text


def clean_up_spaces(directory: Path) -> bool:
    """tokenizer_config.json's `clean_up_tokenization_spaces` (false when it says nothing)."""
    path = directory / TOKENIZER_CONFIG_FILE
    if not path.is_file():
        return False
    return _json_object(path).get("clean_up_tokenization_spaces") is True


def model_config(config: dict[str, Any], path: Path) -> ModelConfig:
    """ModelConfig from a Hugging Face Marian config.json (validated)."""
    try:
        if config.get("normalize_before"):
            raise ValueError("pre-norm Marian models (normalize_before) are not supported")
        if config.get("add_final_layer_norm") or config.get("normalize_embedding"):
            raise ValueError("Marian variants with extra layer norms are not supported")
        heads = config["encoder_attention_heads"]
        if config.get("decoder_attention_heads", heads) != heads:
            raise ValueError("different encoder and decoder head counts are not supported")
        if config.get("decoder_ffn_dim", config["encoder_ffn_dim"]) != config["encoder_ffn_dim"]:
            raise ValueError("different encoder and decoder ffn sizes are not supported")
        activation = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}[
            config.get("activation_function", "swish")
        ]
        vocab = int(config["vocab_size"])
        tgt_vocab = int(config.get("decoder_vocab_size") or vocab)
        if int(config.get("max_position_embeddings", 512)) < 1:
            raise ValueError("max_position_embeddings must be at least 1")
        shared = bool(config.get("share_encoder_decoder_embeddings", True))
        pad = int(config["pad_token_id"])
        eos = int(config["eos_token_id"])
        return ModelConfig(
            src_vocab_size=vocab,
            tgt_vocab_size=tgt_vocab,
            d_model=int(config["d_model"]),
            encoder_layers=int(config["encoder_layers"]),
            decoder_layers=int(config["decoder_layers"]),
            n_heads=int(heads),
            d_ff=int(config["encoder_ffn_dim"]),
            dropout=0.0,
            max_positions=int(config.get("max_position_embeddings", 512)),
            pad_id=pad,
            unk_id=int(config.get("unk_token_id", 1)),
            bos_id=int(_given(config, "decoder_start_token_id", pad)),
            eos_id=eos,
            share_embeddings=shared,
            tie_output=False,  # decided from the tensors by load_marian
            output_bias=True,
            norm="post",
            activation=activation,
            position_layout="halves",
            layer_norm_eps=1e-5,
            scale_embeddings=bool(config.get("scale_embedding", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MarianError(f"{path}: not a usable Marian config ({exc!r})") from exc


def read_weights(directory: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """The state dict of model.safetensors, else pytorch_model.bin (weights_only)."""
    from safetensors.torch import load_file

    for name in WEIGHT_FILES:
        path = directory / name
        if not path.is_file():
            continue
        try:
            if name.endswith(".safetensors"):
                state = load_file(str(path))
            else:
                state = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as exc:  # (pickle.UnpicklingError and friends from weights_only)
            # the first line only: torch goes on to suggest weights_only=False, which would run
            # whatever code the file holds; the service never does
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise MarianError(
                f"{path}: unreadable weights file, or one holding more than tensors ({why})"
            ) from exc
        if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
        ):
            raise MarianError(f"{path}: expected a mapping of names to tensors")
        return {k.removeprefix("model."): v for k, v in state.items()}, path
    raise MarianError(f"{directory}: missing file (one of {', '.join(WEIGHT_FILES)})")


def to_our_state(hf: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Rename a Marian state dict (without the "model." prefix) to ours."""
    shared = hf.get("shared.weight")
    enc_embed = hf.get("encoder.embed_tokens.weight", shared)
    dec_embed = hf.get("decoder.embed_tokens.weight", shared)
    if enc_embed is None or dec_embed is None:
        raise KeyError("embed_tokens.weight / shared.weight")
    out = {"src_embed.weight": enc_embed}
    if not cfg.share_embeddings:
        out["tgt_embed.weight"] = dec_embed
    if not cfg.tie_output:
        out["generator.weight"] = hf["lm_head.weight"]
    bias = hf.get("final_logits_bias")
    out["generator.bias"] = (
        bias.reshape(-1) if bias is not None else torch.zeros(cfg.tgt_vocab_size)
    )
    attn = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "out_proj": "out_proj"}

    def copy(ours: str, theirs: str) -> None:
        for kind in ("weight", "bias"):
            out[f"{ours}.{kind}"] = hf[f"{theirs}.{kind}"]

    for i in range(cfg.encoder_layers):
        ours, theirs = f"encoder_layers.{i}", f"encoder.layers.{i}"
        for a in attn:
            copy(f"{ours}.self_attn.{a}", f"{theirs}.self_attn.{a}")
        copy(f"{ours}.res_attn.norm", f"{theirs}.self_attn_layer_norm")
        copy(f"{ours}.ffn.w1", f"{theirs}.fc1")
        copy(f"{ours}.ffn.w2", f"{theirs}.fc2")
        copy(f"{ours}.res_ffn.norm", f"{theirs}.final_layer_norm")
    for i in range(cfg.decoder_layers):
        ours, theirs = f"decoder_layers.{i}", f"decoder.layers.{i}"
        for a in attn:
            copy(f"{ours}.self_attn.{a}", f"{theirs}.self_attn.{a}")
            copy(f"{ours}.cross_attn.{a}", f"{theirs}.encoder_attn.{a}")
        copy(f"{ours}.res_self.norm", f"{theirs}.self_attn_layer_norm")
        copy(f"{ours}.res_cross.norm", f"{theirs}.encoder_attn_layer_norm")
        copy(f"{ours}.ffn.w1", f"{theirs}.fc1")
        copy(f"{ours}.ffn.w2", f"{theirs}.fc2")
        copy(f"{ours}.res_ffn.norm", f"{theirs}.final_layer_norm")
    return out


def resolve_sharing(hf: dict[str, torch.Tensor], cfg: ModelConfig) -> ModelConfig:
    """The config with share_embeddings and tie_output set from the tensors (the encoder's
    and decoder's tables equal; lm_head absent or equal to the decoder's table)."""
    from dataclasses import replace

    enc = hf.get("encoder.embed_tokens.weight", hf.get("shared.weight"))
    dec = hf.get("decoder.embed_tokens.weight", hf.get("shared.weight"))
    head = hf.get("lm_head.weight")
    tie = head is None or (dec is not None and torch.equal(head, dec))
    share = enc is not None and dec is not None and enc.shape == dec.shape and torch.equal(enc, dec)
    return replace(cfg, tie_output=tie, share_embeddings=share)


#: generation settings transformers applies and this engine does not, with the values that
#: leave the output as it is: a model that sets another is served with a warning naming it
UNSUPPORTED_GENERATION = {
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "min_length": 0,
    "min_new_tokens": None,
    "do_sample": False,
    "num_beam_groups": 1,
    "diversity_penalty": 0.0,
    "exponential_decay_length_penalty": None,
    "forced_bos_token_id": None,
    "begin_suppress_tokens": None,
    "sequence_bias": None,
}


def _given(config: dict[str, Any], key: str, default: Any) -> Any:
    """config[key], or `default` where it is missing or null (JSON's "not set")."""
    value = config.get(key)
    return default if value is None else value


def _whole(gen: dict[str, Any], key: str) -> int:
    """A count of the generation config: a whole number (4 or 4.0), not 2.7, "4" or true."""
    value = gen[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"{key} {value!r} is not a whole number")
    return int(value)


def generation_defaults(directory: Path, config: dict[str, Any]) -> dict[str, Any]:
    """Beam size, length penalty, length limit, the beam search's stopping rule and
    never-generated ids from generation_config.json, or from config.json when there is none
    (as transformers takes them: config.json's generation keys are not mixed into a
    generation_config.json), as DecodingOptions' fields.

    transformers counts `max_length` with the decoder's start token, so it allows
    max_length - 1 generated tokens; ours counts generated tokens (EOS included). A Marian
    model's output has no limit relative to its source (`max_length_ratio` high enough never
    to bind), as transformers' `max_new_tokens` has none: a request's `max_length` caps it
    exactly as `max_new_tokens` does."""
    gen = config
    path = directory / "generation_config.json"
    if path.is_file():
        data = _read_json(path)
        if not isinstance(data, dict):
            raise MarianError(f"{path}: expected a JSON object")
        gen = data
    else:
        path = directory / CONFIG_FILE
    out: dict[str, Any] = {}
    try:
        if gen.get("num_beams"):
            out["beam_size"] = _whole(gen, "num_beams")
            if out["beam_size"] < 1:
                raise ValueError(f"num_beams {gen['num_beams']!r} is below 1")
        if gen.get("length_penalty") is not None:
            out["length_penalty"] = float(gen["length_penalty"])
            if not math.isfinite(out["length_penalty"]):
                raise ValueError(f"length_penalty {gen['length_penalty']!r} is not finite")
        if gen.get("max_new_tokens"):  # transformers: it wins over max_length
            out["max_length"] = max(1, _whole(gen, "max_new_tokens"))
        elif gen.get("max_length"):
            out["max_length"] = max(1, _whole(gen, "max_length") - 1)
        # transformers' early_stopping=True ends a beam search at the step that brings
        # num_beams finished hypotheses ("early"); False, its default, is its heuristic
        out["beam_stop"] = "early" if gen.get("early_stopping") is True else "heuristic"
        positions = int(config.get("max_position_embeddings", 512))
        out["max_length_ratio"] = float(max(positions, 1))
        bad = [ids[0] for ids in gen.get("bad_words_ids") or [] if len(ids) == 1]
        bad += list(gen.get("suppress_tokens") or [])  # never generated, as bad words
        ignored = [
            f"{key}={gen[key]!r}"
            for key, neutral in UNSUPPORTED_GENERATION.items()
            if gen.get(key, neutral) != neutral
        ]
        if gen.get("early_stopping") not in (None, True, False):
            ignored.append(f"early_stopping={gen['early_stopping']!r}")
        if any(len(ids) > 1 for ids in gen.get("bad_words_ids") or []):
            ignored.append("bad_words_ids of more than one token")
        if gen.get("renormalize_logits") is not True:  # the engine's scores are renormalised
            # after the never-generated ids are taken out; transformers' then are not
            ignored.append(f"renormalize_logits={gen.get('renormalize_logits', False)!r}")
        if ignored:
            log.warning(
                "%s: %s not applied (this engine does not implement them): its translations "
                "may differ from transformers' generate",
                path,
                ", ".join(ignored),
            )
        out["suppress_ids"] = sorted({int(i) for i in bad} | {int(config["pad_token_id"])})
        vocab = int(config.get("decoder_vocab_size") or config["vocab_size"])
        outside = [i for i in out["suppress_ids"] if not 0 <= i < vocab]
        if outside:  # (transformers refuses them too; ModelConfig's check would be a traceback)
            raise ValueError(
                f"bad_words_ids/suppress_tokens name token id(s) {outside} outside the "
                f"target vocabulary of {vocab}"
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise MarianError(f"{path}: not a usable generation config ({exc!r})") from exc
    eos = config.get("eos_token_id")
    forced = gen.get("forced_eos_token_id")
    if isinstance(forced, list):  # transformers takes a list of ids as well as one
        if forced and forced != [eos] and forced != [eos] * len(forced):
            log.warning(
                "%s: forced_eos_token_id=%r not applied beyond the end of sentence %r: its "
                "translations may differ from transformers' generate",
                path,
                forced,
                eos,
            )
        forced = eos if eos in forced else None
    elif forced is not None and forced != eos:
        log.warning(
            "%s: forced_eos_token_id=%r is not the end of sentence %r, not applied: its "
            "translations may differ from transformers' generate",
            path,
            forced,
            eos,
        )
    gen_eos = gen.get("eos_token_id", eos)
    if gen_eos != eos and gen_eos != [eos]:  # transformers ends a sentence at any of them
        log.warning(
            "%s: eos_token_id=%r not applied (sentences end at config.json's %r only): its "
            "translations may differ from transformers' generate",
            path,
            gen_eos,
            eos,
        )
    out["force_eos_at_limit"] = forced is not None and forced == eos
    if gen is not config and gen.get("decoder_start_token_id") is not None:
        # transformers starts the decoder from the generation config's token, not config.json's
        try:
            out["decoder_start_id"] = int(gen["decoder_start_token_id"])
        except (TypeError, ValueError) as exc:
            raise MarianError(f"{path}: not a usable generation config ({exc!r})") from exc
    return out


def load_vocab(path: Path) -> dict[str, int]:
    vocab = _read_json(path)
    if not isinstance(vocab, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in vocab.items()
    ):
        raise MarianError(f"{path}: expected a JSON object of piece -> id")
    return vocab
