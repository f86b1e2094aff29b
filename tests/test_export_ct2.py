"""Export to CTranslate2: same weights, same greedy tokens for a batch of mixed lengths."""

import ctranslate2
import pytest

from model_core.checkpoint import save_checkpoint
from model_core.export_ct2 import export
from model_core.translator import Translator
from tests.conftest import random_model, tiny_config

SENTENCES = [
    "The cat.",
    "A big red car is very fast today.",
    "We eat bread.",
    "I see a small green tree.",
    "The dog is slow and the house is very big.",
    "Water.",
    "We run fast today.",
]


@pytest.mark.parametrize(
    "variant",
    [{}, {"norm": "post", "activation": "gelu", "position_layout": "halves", "output_bias": True}],
)
def test_ctranslate2_greedy_tokens_equal_ours(variant, spm_model, tokenizer, tmp_path):
    model = random_model(tiny_config(tokenizer.vocab_size, **variant), seed=11)
    ckpt = save_checkpoint(
        tmp_path / "ckpt",
        model,
        source_tokenizer=spm_model,
        target_tokenizer=spm_model,
        source_language="en",
        target_language="de",
    )
    out = export(ckpt, tmp_path / "ct2")
    ours = Translator.load(ckpt, device="cpu")
    theirs = ctranslate2.Translator(str(out), device="cpu", compute_type="float32")
    max_len = 20
    mine = ours.translate_batch(SENTENCES, beam_size=1, max_length=max_len)
    pieces = [tokenizer.encode_pieces(s) for s in SENTENCES]
    ct2 = theirs.translate_batch(
        pieces, beam_size=1, max_decoding_length=max_len, min_decoding_length=0, return_scores=True
    )
    for m, c in zip(mine, ct2, strict=True):
        assert c.hypotheses[0] == m.hypotheses[0].tokens
        # Both report the length-normalised log-probability: equal scores mean equal weights.
        assert c.scores[0] == pytest.approx(m.hypotheses[0].score, abs=1e-4)


def test_benchmark_runs_half_precisions_on_a_gpu_and_refuses_them_without_one(capsys):
    import torch

    from bench import ct2_bench

    assert [ct2_bench.device_for(p) for p in ("float32", "int8", "float16", "bfloat16")] == [
        "cpu",
        "cpu",
        "cuda",
        "cuda",
    ]
    if torch.cuda.is_available():
        assert ct2_bench.default_precisions() == "float32,int8,float16,bfloat16"
    else:
        assert ct2_bench.default_precisions() == "float32,int8"
        with pytest.raises(SystemExit):
            ct2_bench.main(["--precisions", "float32,bfloat16"])
        assert "none is available" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ct2_bench.main(["--precisions", "float8"])
    assert "unknown precision" in capsys.readouterr().err


@pytest.mark.parametrize("beams", [1, 3])
def test_marian_directory_exports_with_the_same_tokens(beams, tmp_path):
    """A Hugging Face Marian directory: CTranslate2 gives our tokens (EOS forced at the limit
    is ours and transformers' behaviour, which CTranslate2 lacks: compare before it)."""
    pytest.importorskip("transformers")
    from tests.marian_helpers import make_marian_dir

    d = make_marian_dir(tmp_path / "opus-mt-en-de", tied=False, seed=6)
    out = export(d, tmp_path / "ct2")
    ours = Translator.load(d, device="cpu", dtype="float32")
    theirs = ctranslate2.Translator(str(out), device="cpu", compute_type="float32")
    max_len = 12
    sources = [ours.encode_source(s) for s in SENTENCES]
    mine = ours.translate_ids(sources, beam_size=beams, max_length=max_len, max_length_ratio=9.0)
    pieces = [ours.source_tokenizer.id_to_piece(ids) for ids in sources]
    ct2 = theirs.translate_batch(
        pieces, beam_size=beams, max_decoding_length=max_len, min_decoding_length=0
    )
    vocab = ours.target_tokenizer.vocab
    for m, c in zip(mine, ct2, strict=True):
        got = [vocab[p] for p in c.hypotheses[0]]
        if m[0].finished and len(m[0].tokens) < max_len - 1:
            assert got == m[0].tokens
        else:
            assert got[: len(m[0].tokens)] == m[0].tokens
    assert ours.config.pad_id not in {i for h in mine for i in h[0].tokens}


def test_the_export_never_replaces_the_checkpoint_or_a_folder_of_other_files(
    random_checkpoint, tmp_path, capsys
):
    """CTranslate2 removes the output folder before it writes: the checkpoint itself, a folder
    holding it, a file and a folder of other files are refused with one line, untouched
    (`mt-export-ct2 weights/en-de weights/en-de` deleted the model); an earlier export is
    replaced."""
    import shutil

    from model_core import export_ct2

    weights = tmp_path / "weights"
    model = weights / "en-de"
    shutil.copytree(random_checkpoint, model)
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "keep.txt").write_text("mine")
    cases = [
        (model, f"{model} is the checkpoint {model}: the export would delete it"),
        (weights, f"{weights} holds the checkpoint {model}: the export would delete it"),
        (notes, f"{notes} holds other files: the export replaces its folder whole"),
        (notes / "keep.txt", f"{notes / 'keep.txt'} is a file: give a folder"),
    ]
    for output, message in cases:
        assert export_ct2.main([str(model), str(output)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"mt-export-ct2: error: {message}") and err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before
    assert (notes / "keep.txt").read_text() == "mine"
    out = tmp_path / "ct2"
    assert export_ct2.main([str(model), str(out)]) == 0
    assert export_ct2.main([str(model), str(out)]) == 0  # an earlier export: replaced
    assert ctranslate2.Translator(str(out), device="cpu") is not None
