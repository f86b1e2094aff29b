"""The training command end to end on made-up data, and its data errors."""

import json

import pytest

from model_core import train
from model_core.data import DataError, read_lines, read_parallel
from model_core.translator import Translator
from tests.conftest import write_lines

TINY = [
    "--vocab-size",
    "320",
    "--d-model",
    "32",
    "--encoder-layers",
    "1",
    "--decoder-layers",
    "1",
    "--heads",
    "2",
    "--d-ff",
    "64",
    "--dropout",
    "0.0",
    "--batch-tokens",
    "600",
    "--lr",
    "3e-3",
    "--warmup",
    "10",
    "--eval-every",
    "15",
    "--eval-sentences",
    "10",
    "--save-every",
    "15",
    "--average-last",
    "2",
    "--threads",
    "1",
    "--no-progress",
    "--export-beam-size",
    "2",
]


def train_args(corpus_dir, run) -> list[str]:
    """mt-train arguments for a tiny en->de run in `run` on the test corpus."""
    return ["--data", str(corpus_dir), "--source", "en", "--target", "de", "--run", str(run), *TINY]


def test_train_resume_export_and_load(corpus_dir, tmp_path, capsys):
    run, export = tmp_path / "run", tmp_path / "export"
    common = train_args(corpus_dir, run)
    assert train.main([*common, "--max-steps", "30"]) == 0
    assert (run / "state.pt").is_file() and (run / "spm.model").is_file()
    first = capsys.readouterr().err
    assert "stopped at step 30" in first

    assert train.main([*common, "--max-steps", "60", "--export", str(export)]) == 0
    log = capsys.readouterr().err
    assert "resumed from" in log and "at step 30" in log
    assert "stopped at step 60" in log

    meta = json.loads((export / "config.json").read_text())
    history = meta["training"]["history"]
    assert [h["step"] for h in history] == [15, 30, 45, 60]
    assert history[-1]["dev_loss"] < history[0]["dev_loss"] - 0.5  # loss falls
    assert meta["training"]["steps"] == 60 and meta["training"]["averaged_snapshots"] == 2
    assert "mt-train" in meta["training"]["command"]
    translator = Translator.load(export, device="cpu")
    assert translator.source_language == "en" and translator.target_language == "de"
    assert isinstance(translator.translate_batch(["The cat is big."])[0].text, str)

    again = tmp_path / "again"  # --export-only writes the saved state without training
    assert train.main([*common, "--export", str(again), "--export-only"]) == 0
    assert json.loads((again / "config.json").read_text())["training"]["steps"] == 60


def test_misaligned_files(tmp_path):
    a = write_lines(tmp_path / "a", ["one", "two", "three"])
    b = write_lines(tmp_path / "b", ["eins", "zwei"])
    with pytest.raises(DataError, match="has 3 lines but .* has 2"):
        read_parallel(a, b)


def test_empty_line_is_named(tmp_path):
    a = write_lines(tmp_path / "a", ["one", "", "three"])
    with pytest.raises(DataError, match="line 2 is empty"):
        read_lines(a)


def test_unreadable_encoding_is_named(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("ok\nGrüße\n".encode("latin-1"))
    with pytest.raises(DataError, match="line 2 is not valid UTF-8"):
        read_lines(path)


def test_missing_dev_set_is_a_clear_error(corpus_dir, tmp_path, capsys):
    code = train.main(
        [
            "--train-src",
            str(corpus_dir / "train.en"),
            "--train-tgt",
            str(corpus_dir / "train.de"),
            "--run",
            str(tmp_path / "run"),
            "--max-steps",
            "1",
            *TINY,
        ]
    )
    assert code == 2
    assert "no dev set" in capsys.readouterr().err


def test_misaligned_training_files_stop_the_command(corpus_dir, tmp_path, capsys):
    short = write_lines(tmp_path / "train.de", ["nur eine zeile"])
    code = train.main(
        [
            "--train-src",
            str(corpus_dir / "train.en"),
            "--train-tgt",
            str(short),
            "--dev-src",
            str(corpus_dir / "dev.en"),
            "--dev-tgt",
            str(corpus_dir / "dev.de"),
            "--run",
            str(tmp_path / "run"),
            "--max-steps",
            "1",
            *TINY,
        ]
    )
    assert code == 2
    assert "must be aligned" in capsys.readouterr().err


def test_evaluate_command_reports_bleu(random_checkpoint, corpus_dir, tmp_path, capsys):
    from model_core import evaluate

    out = tmp_path / "hyps.txt"
    code = evaluate.main(
        [
            str(random_checkpoint),
            "--src",
            str(corpus_dir / "dev.en"),
            "--ref",
            str(corpus_dir / "dev.de"),
            "--output",
            str(out),
            "--beam-size",
            "2",
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sentences"] == 40 and 0.0 <= report["bleu"] <= 100.0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 40


def test_evaluate_command_names_a_bad_checkpoint(tmp_path, corpus_dir, capsys):
    from model_core import evaluate

    code = evaluate.main([str(tmp_path), "--src", str(corpus_dir / "dev.en")])
    assert code == 2
    assert "config.json: missing file" in capsys.readouterr().err


def test_evaluate_command_names_a_device_or_dtype_it_cannot_use(
    random_checkpoint, corpus_dir, capsys
):
    from model_core import evaluate

    src = ["--src", str(corpus_dir / "dev.en")]
    assert evaluate.main([str(random_checkpoint), *src, "--device", "gpu"]) == 2
    assert "unknown device 'gpu'" in capsys.readouterr().err
    assert evaluate.main([str(random_checkpoint), *src, "--dtype", "int3"]) == 2
    assert "int3" in capsys.readouterr().err


def test_resume_keeps_the_runs_batch_size(corpus_dir, tmp_path, capsys):
    run = tmp_path / "run"
    common = train_args(corpus_dir, run)
    assert train.main([*common, "--max-steps", "5"]) == 0
    changed = [a if a != "600" else "900" for a in common]  # a different --batch-tokens
    assert train.main([*changed, "--max-steps", "6"]) == 0
    assert "resuming with the run's --batch-tokens 600 (not 900)" in capsys.readouterr().err
