"""The Marian benchmark's model and both of its systems, on a tiny model: CTranslate2's own
converter takes the directory it builds, and ours and CTranslate2 generate the same token ids,
every sentence to the length cap. Nothing here measures a speed."""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import make_parallel, write_lines

pytest.importorskip("transformers")
pytest.importorskip("ctranslate2")

from bench.marian_bench import build_marian_dir, convert, worker  # noqa: E402


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    work = tmp_path_factory.mktemp("marian-bench")
    src, tgt = make_parallel(300, seed=5)
    write_lines(work / "corpus.en", src)
    write_lines(work / "corpus.de", tgt)
    write_lines(work / "test.en", make_parallel(6, seed=6)[0])
    info = build_marian_dir(
        work / "model",
        corpus=work / "corpus",
        lines=300,
        vocab_size=400,
        d_model=32,
        layers=2,
        heads=2,
        d_ff=64,
    )
    return work, info, convert(work / "model", work / "ct2")


def test_the_vocabulary_is_padded_to_the_requested_size(dirs):
    work, info, _ = dirs
    vocab = json.loads((work / "model" / "vocab.json").read_text(encoding="utf-8"))
    config = json.loads((work / "model" / "config.json").read_text())
    assert len(vocab) == info["vocab_size"] == config["vocab_size"] == 400
    assert info["real_entries"] < 400 and vocab["<pad>"] == 399 == config["pad_token_id"]


@pytest.mark.parametrize("beam", [1, 4])
def test_ours_and_ctranslate2_generate_the_same_ids_to_the_cap(dirs, beam):
    work, _, ct2_dir = dirs
    threads = torch.get_num_threads()
    spec = {
        "malloc": "default",
        "threads": 1,
        "precision": "float32",
        "beam": beam,
        "batch": 4,
        "n": 6,
        "max_length": 7,
        "linear_backend": "auto",
        "src": str(work / "test.en"),
        "marian": str(work / "model"),
        "ct2_dir": str(ct2_dir),
    }
    try:
        ours = worker({**spec, "system": "ours"})
        theirs = worker({**spec, "system": "ct2"})
    finally:
        torch.set_num_threads(threads)
    assert ours["tokens"] == theirs["tokens"] == 6 * 7
    assert ours["texts"] == theirs["texts"]
