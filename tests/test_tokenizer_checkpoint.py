"""Tokenizer edge cases, checkpoint round trips, and every corruption a loader must name."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from model_core.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from model_core.translator import Translator
from tests.conftest import random_model, tiny_config


def test_empty_and_whitespace_encode_to_nothing(tokenizer):
    assert tokenizer.encode("") == []
    assert tokenizer.encode("   \t ") == []
    assert tokenizer.decode([]) == ""


def test_round_trip_of_known_text(tokenizer):
    text = "The cat is very big."
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_emoji_and_unseen_characters_round_trip_through_byte_fallback(tokenizer):
    text = "The 🐈 is グレー."
    ids = tokenizer.encode(text)
    assert tokenizer.unk_id not in ids
    assert tokenizer.decode(ids) == text


def test_special_ids_are_fixed(tokenizer):
    assert tokenizer.special_ids() == {"pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3}


def test_decode_drops_special_ids(tokenizer):
    ids = tokenizer.encode("the dog")
    assert (
        tokenizer.decode([tokenizer.bos_id, *ids, tokenizer.eos_id, tokenizer.pad_id]) == "the dog"
    )


def test_very_long_input_encodes_without_limit(tokenizer):
    ids = tokenizer.encode("the cat " * 2000)
    assert len(ids) >= 4000


def test_round_trip_is_bit_exact(random_checkpoint):
    ckpt = load_checkpoint(random_checkpoint)
    state = load_file(str(random_checkpoint / "model.safetensors"))
    loaded = ckpt.model.state_dict()
    for name, tensor in state.items():
        assert torch.equal(loaded[name], tensor), name
    assert ckpt.source_language == "en" and ckpt.target_language == "de"


def test_saved_then_loaded_model_translates_identically(random_checkpoint, tmp_path):
    a = Translator.load(random_checkpoint, device="cpu")
    copy = save_checkpoint(
        tmp_path / "copy",
        a.model,
        source_tokenizer=a.source_tokenizer.path,
        target_tokenizer=a.target_tokenizer.path,
        source_language="en",
        target_language="de",
    )
    b = Translator.load(copy, device="cpu")
    texts = ["The cat.", "A big red car is fast today."]
    assert [r.text for r in a.translate_batch(texts)] == [r.text for r in b.translate_batch(texts)]
    for (n, p), (_, q) in zip(
        a.model.state_dict().items(), b.model.state_dict().items(), strict=True
    ):
        assert torch.equal(p, q), n


def test_float16_weights_load_in_the_runtime_dtype(spm_model, tokenizer, tmp_path):
    model = random_model(tiny_config(tokenizer.vocab_size))
    out = save_checkpoint(
        tmp_path / "half",
        model,
        source_tokenizer=spm_model,
        target_tokenizer=spm_model,
        source_language="en",
        target_language="de",
        dtype=torch.float16,
    )
    assert all(t.dtype == torch.float16 for t in load_file(str(out / "model.safetensors")).values())
    ckpt = load_checkpoint(out, dtype=torch.float32)
    assert next(ckpt.model.parameters()).dtype == torch.float32
    ref = model.src_embed.weight.detach().to(torch.float16).float()
    assert torch.equal(ckpt.model.src_embed.weight, ref)


def corrupt(src, tmp_path, edit):
    target = tmp_path / "broken"
    shutil.copytree(src, target)
    edit(target)
    return target


def edit_config(fn):
    def edit(d):
        meta = json.loads((d / "config.json").read_text())
        fn(meta)
        (d / "config.json").write_text(json.dumps(meta))

    return edit


def edit_weights(fn):
    def edit(d):
        state = load_file(str(d / "model.safetensors"))
        fn(state)
        save_file(state, str(d / "model.safetensors"))

    return edit


CORRUPTIONS = {
    "missing config": (lambda d: (d / "config.json").unlink(), r"config\.json: missing file"),
    "bad json": (lambda d: (d / "config.json").write_text("{not json"), "unreadable JSON"),
    "unknown top key": (edit_config(lambda m: m.update(extra=1)), "unknown key.*extra"),
    "unknown model key": (
        edit_config(lambda m: m["model"].update(n_layers=6)),
        "unknown model config key.*n_layers",
    ),
    "invalid model value": (edit_config(lambda m: m["model"].update(norm="sandwich")), "norm"),
    "missing weights": (
        lambda d: (d / "model.safetensors").unlink(),
        r"model\.safetensors: missing file",
    ),
    "garbage weights": (
        lambda d: (d / "model.safetensors").write_bytes(b"\x00" * 20),
        "unreadable safetensors",
    ),
    "missing tensor": (
        edit_weights(lambda s: s.pop("encoder_norm.weight")),
        "missing tensor.*encoder_norm.weight",
    ),
    "unexpected tensor": (
        edit_weights(lambda s: s.update(extra=torch.zeros(2))),
        "unexpected tensor.*extra",
    ),
    "wrong shape": (
        edit_weights(lambda s: s.update({"encoder_norm.weight": torch.zeros(7)})),
        r"encoder_norm\.weight has shape \(7,\)",
    ),
    "missing tokenizer": (lambda d: (d / "spm.model").unlink(), r"spm\.model: missing file"),
    "vocab mismatch": (
        edit_config(lambda m: m["model"].update(src_vocab_size=999, tgt_vocab_size=999)),
        "vocabulary size 320 does not match.*999",
    ),
    "not a tokenizer": (
        lambda d: (d / "spm.model").write_bytes(b"nonsense"),
        "not a sentencepiece model",
    ),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corruption_raises_checkpoint_error_naming_the_problem(case, random_checkpoint, tmp_path):
    edit, message = CORRUPTIONS[case]
    broken = corrupt(random_checkpoint, tmp_path, edit)
    with pytest.raises(CheckpointError, match=message) as info:
        load_checkpoint(broken)
    assert str(broken) in str(info.value)


def test_not_a_directory(tmp_path):
    with pytest.raises(CheckpointError, match="not a checkpoint directory"):
        load_checkpoint(tmp_path / "nowhere")
