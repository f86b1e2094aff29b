"""The training command end to end on made-up data, and its data errors."""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

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


def test_a_data_folder_without_dev_files_names_them_and_the_options(corpus_dir, tmp_path, capsys):
    """A corpus whose dev set is val.* (Multi30k): the files looked for, the options that
    give them, and the folder's pair that could be meant; one line, status 2."""
    data = tmp_path / "multi30k"
    data.mkdir()
    for name in ("train.en", "train.de", "val.en", "val.de", "test2016.en"):
        (data / name).write_bytes(
            (corpus_dir / name.replace("val", "dev").replace("test2016", "dev")).read_bytes()
        )
    run = tmp_path / "run"
    assert train.main(train_args(data, run) + ["--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "looks for dev.en and dev.de" in err
    assert "give the dev files with --dev-src and --dev-tgt" in err
    assert f"e.g. --dev-src {data / 'val.en'} --dev-tgt {data / 'val.de'}" in err

    args = train_args(data, run) + ["--max-steps", "1", "--target", "fr"]
    assert train.main(args) == 2
    err = capsys.readouterr().err
    assert f"{data / 'train.fr'}: train file not found" in err
    assert "give the train files with --train-src and --train-tgt" in err

    assert train.main(train_args(tmp_path / "nowhere", run) + ["--max-steps", "1"]) == 2
    assert f"--data {tmp_path / 'nowhere'}: folder not found" in capsys.readouterr().err
    assert not run.exists()  # no run folder is made for a command that cannot start


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
    refs = read_lines(corpus_dir / "dev.de")
    refs[3], refs[9] = "Katze Katze Katze.", "Das Haus, haus."  # two that repeat a word
    write_lines(tmp_path / "dev.de", refs)
    code = evaluate.main(
        [
            str(random_checkpoint),
            "--src",
            str(corpus_dir / "dev.en"),
            "--ref",
            str(tmp_path / "dev.de"),
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
    written = out.read_text(encoding="utf-8").splitlines()
    assert len(written) == 40
    # outputs with a word repeated at once, and the references' own count beside them
    assert report["word_repeated"] == sum(map(evaluate.repeats_a_word, written))
    assert report["word_repeated_in_references"] == sum(map(evaluate.repeats_a_word, refs)) >= 2
    # the outputs the length limit cut (an untrained model seldom ends a sentence itself)
    translator = Translator.load(random_checkpoint, device="cpu")
    sources = read_lines(corpus_dir / "dev.en")
    results = translator.translate_batch(sources, beam_size=2)
    limits = [translator.max_output_length(r.source_tokens, 256, 2.0, 10) for r in results]
    cut = sum(r.output_tokens == limit for r, limit in zip(results, limits, strict=True))
    assert report["at_length_limit"] == cut > 0


def test_evaluate_says_its_progress_on_long_jobs(
    random_checkpoint, corpus_dir, tmp_path, capsys, monkeypatch
):
    """A 2,000-line set took minutes with nothing said until the end: a progress line goes to
    stderr (every 30 s when it is no terminal; here at each batch), none with --no-progress,
    and the translations are the same either way."""
    from model_core import evaluate

    monkeypatch.setattr(evaluate.Progress, "EVERY_S", 0.0)
    outputs = []
    for extra in ([], ["--no-progress"]):
        out = tmp_path / f"hyps{len(extra)}.txt"
        args = [str(random_checkpoint), "--src", str(corpus_dir / "dev.en"), "--output", str(out)]
        assert evaluate.main([*args, "--beam-size", "1", "--batch-size", "16", *extra]) == 0
        outputs.append(out.read_text(encoding="utf-8"))
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.startswith("mt-evaluate: ")]
        if extra:
            assert lines == [], err
        else:
            assert [line.split(",")[0] for line in lines] == [
                "mt-evaluate: 16/40 lines",
                "mt-evaluate: 32/40 lines",
                "mt-evaluate: 40/40 lines",
            ], err
            assert all(" lines/s, about " in line and line.endswith(" left") for line in lines)
    assert outputs[0] == outputs[1]


def test_evaluate_command_names_a_bad_checkpoint(tmp_path, corpus_dir, capsys):
    from model_core import evaluate

    code = evaluate.main([str(tmp_path), "--src", str(corpus_dir / "dev.en")])
    assert code == 2
    assert "config.json: missing file" in capsys.readouterr().err


def test_evaluate_and_export_name_the_models_in_a_folder_of_models(
    random_checkpoint, corpus_dir, tmp_path, capsys
):
    """The weights folder given for one model's folder: the message names the models there."""
    from model_core import evaluate, export_ct2

    weights = Path(__file__).resolve().parent.parent / "weights"
    src = ["--src", str(corpus_dir / "dev.en")]
    assert evaluate.main([str(weights), *src]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing file" not in err
    assert f"{weights} holds several models (de-en, en-de)" in err
    assert f"give one of them, e.g. {weights / 'de-en'}" in err
    assert export_ct2.main([str(weights), str(tmp_path / "out")]) == 2
    assert f"{weights} holds several models (de-en, en-de)" in capsys.readouterr().err

    one = tmp_path / "one"  # a folder holding a single model
    one.mkdir()
    (one / "en-de").symlink_to(random_checkpoint, target_is_directory=True)
    assert evaluate.main([str(one), *src]) == 2
    assert f"{one} holds a model in en-de: give {one / 'en-de'}" in capsys.readouterr().err


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


# --- options and folders checked before any work ---------------------------------------------


@pytest.mark.parametrize(
    "option, value, says",
    [
        ("--accumulate", "0", "at least 1"),  # was a ZeroDivisionError
        ("--accumulate", "-1", "at least 1"),  # was training towards a larger loss
        ("--clip", "-1", "above 0"),  # the same
        ("--lr", "nan", "above 0"),
        ("--max-steps", "-5", "at least 0"),  # was 0 steps and an untrained export
        ("--max-minutes", "nan", "at least 0"),  # was no limit at all
        ("--dropout", "2", "below 1"),
        ("--eval-every", "0", "at least 1"),
        ("--threads", "-1", "between 0 and 1024"),
    ],
)
def test_an_option_out_of_range_is_one_error_line(
    corpus_dir, tmp_path, capsys, option, value, says
):
    with pytest.raises(SystemExit) as stopped:
        train.main([*train_args(corpus_dir, tmp_path / "run"), "--max-steps", "1", option, value])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: " in err and says in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()  # refused before anything was made


def last_error(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    return lines[-1]


def test_what_cannot_train_is_refused_before_training(corpus_dir, tmp_path, capsys):
    common = train_args(corpus_dir, tmp_path / "run")
    assert train.main([*common, "--max-steps", "1", "--heads", "3"]) == 2  # 32 / 3
    assert last_error(capsys).startswith("mt-train: error: model options: ")
    assert train.main([*common, "--max-steps", "1", "--max-positions", "8"]) == 2
    assert "needs --max-positions of at least 130" in last_error(capsys)
    assert train.main([*common, "--max-steps", "1", "--max-tokens-per-sentence", "1"]) == 2
    assert "no training pair has at most 1 tokens" in last_error(capsys)  # (it spun for ever)
    big = [a if a != "320" else "50000" for a in train_args(corpus_dir, tmp_path / "run2")]
    assert train.main([*big, "--max-steps", "1"]) == 2
    assert last_error(capsys).startswith("mt-train: error: --vocab-size 50000 is more than")
    (tmp_path / "a-file").write_text("")
    assert train.main([*train_args(corpus_dir, tmp_path / "a-file"), "--max-steps", "1"]) == 2
    error = last_error(capsys)
    assert "--run" in error and "is a file" in error
    export = tmp_path / "a-file" / "export"  # checked before training, not after it
    assert train.main([*common, "--max-steps", "1", "--export", str(export)]) == 2
    error = last_error(capsys)
    assert "--export" in error and "under the file" in error
    assert not (tmp_path / "run" / "state.pt").exists()


def test_a_vocab_size_the_data_cannot_make_is_told_the_vocab_size_to_give(
    corpus_dir, tmp_path, capsys
):
    """--vocab-size too large or too small for the training files: the error names
    --vocab-size and the bound sentencepiece gives (its message named its own options,
    vocab_size and --character_coverage, which mt-train does not have); that bound trains."""
    from model_core.tokenizer import Tokenizer, train_sentencepiece

    def refused(size: str) -> str:
        args = [a if a != "320" else size for a in train_args(corpus_dir, tmp_path / "run")]
        assert train.main([*args, "--max-steps", "1"]) == 2
        return last_error(capsys)

    high = re.fullmatch(
        r"mt-train: error: --vocab-size 50000 is more than the training files make: "
        r"sentencepiece makes at most (\d+) pieces from them; give --vocab-size \1 or less "
        r"\(or more training data\)",
        refused("50000"),
    )
    low = re.fullmatch(
        r"mt-train: error: --vocab-size 8 is less than the training files need: their "
        r"characters, the 256 byte pieces and the special ones take (\d+); give --vocab-size "
        r"\1 or more",
        refused("8"),
    )
    assert high and low, capsys.readouterr().err
    files = [corpus_dir / "train.en", corpus_dir / "train.de"]
    for size in (int(low[1]), int(high[1])):  # what the errors say to give is made
        model = train_sentencepiece(files, tmp_path / f"spm{size}", size)
        assert Tokenizer(model).vocab_size == size


def test_a_dev_sentence_longer_than_the_model_takes_is_named_before_training(
    corpus_dir, tmp_path, capsys
):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.en", "train.de", "dev.de"):
        (data / name).write_bytes((corpus_dir / name).read_bytes())
    dev = read_lines(corpus_dir / "dev.en")
    dev[2] = " ".join(["word"] * 600)
    write_lines(data / "dev.en", dev)
    args = [*train_args(data, tmp_path / "run"), "--max-steps", "1", "--max-positions", "256"]
    assert train.main(args) == 2
    assert f"{data / 'dev.en'}: line 3 has" in last_error(capsys)  # (it failed at evaluation)


def test_a_lone_carriage_return_stays_in_its_line(tmp_path):
    path = tmp_path / "x.en"
    path.write_bytes(b"Go\ron.\r\nStop.\n")  # sacrebleu's own reading keeps it too
    assert read_lines(path) == ["Go\ron.", "Stop."]


def test_resuming_with_other_model_options_says_which_are_kept(corpus_dir, tmp_path, capsys):
    common = train_args(corpus_dir, tmp_path / "run")
    assert train.main([*common, "--max-steps", "2"]) == 0
    other = [a if a != "32" else "64" for a in common]  # --d-model
    assert train.main([*other, "--max-steps", "3"]) == 0
    assert "resuming with the run's --d-model 32 (not 64)" in capsys.readouterr().err


def test_evaluate_refuses_bad_options_and_long_lines_before_translating(
    random_checkpoint, corpus_dir, tmp_path, capsys
):
    from model_core import evaluate

    src = str(corpus_dir / "dev.en")
    with pytest.raises(SystemExit):
        evaluate.main([str(random_checkpoint), "--src", src, "--batch-size", "0"])
    assert "argument --batch-size" in capsys.readouterr().err
    assert evaluate.main([str(random_checkpoint), "--src", src, "--output", str(tmp_path)]) == 2
    assert "give a file in an existing folder" in last_error(capsys)
    long = tmp_path / "long.en"
    write_lines(long, ["The cat.", "The dog.", " ".join(["word"] * 2000)])
    assert evaluate.main([str(random_checkpoint), "--src", str(long)]) == 2
    assert f"{long}: line 3 has" in last_error(capsys)


def test_ctrl_c_saves_a_state_that_resumes_as_if_never_stopped(corpus_dir, tmp_path):
    """Ctrl-C finishes the step in progress and saves: resumed, the run ends with the weights
    of a run never stopped (the data position saved with Ctrl-C used to count micro-batches
    of a step never taken, which the resumed run then skipped)."""
    import signal
    import subprocess
    import sys
    import time

    import torch

    steps = ["--max-steps", "80", "--accumulate", "4", "--eval-every", "1000"]
    whole = train_args(corpus_dir, tmp_path / "whole") + steps
    assert train.main(whole) == 0
    stopped = train_args(corpus_dir, tmp_path / "stopped") + steps
    proc = subprocess.Popen(
        [sys.executable, "-m", "model_core.train", *stopped],
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr:  # the step log lines come every 20 steps
        if "step 20 " in line:
            time.sleep(0.05)  # into the steps after the log line, most likely between two
            # of a step's micro-batches (right after the line it would be at a step's end)
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 130, rest
    assert "interrupted: state saved" in rest
    saved = torch.load(tmp_path / "stopped" / "state.pt", weights_only=True)["step"]
    assert 20 <= saved < 80
    assert train.main(stopped) == 0  # resumed
    a = torch.load(tmp_path / "whole" / "state.pt", weights_only=True)
    b = torch.load(tmp_path / "stopped" / "state.pt", weights_only=True)
    assert a["step"] == b["step"] == 80
    assert a["batch_in_epoch"] == b["batch_in_epoch"] and a["epoch"] == b["epoch"]
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


def test_a_time_limited_run_says_the_time_left_in_minutes_and_seconds(corpus_dir, tmp_path, capsys):
    """With only --max-minutes, each progress line gives the time left as MM:SS (it said "0m"
    for the whole last minute)."""
    import re

    assert train.main([*train_args(corpus_dir, tmp_path / "run"), "--max-minutes", "0.05"]) == 0
    lefts = re.findall(r"left=(\d\d:\d\d)\b", capsys.readouterr().err)
    assert lefts and all(m <= "00:03" for m in lefts)


def test_a_tokenizer_left_by_a_failed_first_attempt_is_not_taken_for_other_options(
    corpus_dir, tmp_path, capsys
):
    """Until a training state is saved, the run's sentencepiece model follows --vocab-size and
    the training files: a first command that failed after making it (here on its model
    options) used to leave one that the corrected command took, whatever its --vocab-size."""
    from model_core.tokenizer import Tokenizer

    common = train_args(corpus_dir, tmp_path / "run")
    assert train.main([*common, "--max-steps", "1", "--heads", "3"]) == 2  # 32 / 3
    spm = tmp_path / "run" / "spm.model"
    assert Tokenizer(spm).vocab_size == 320
    assert train.main([*common, "--max-steps", "1"]) == 0  # the same options: kept
    assert "making it again" not in capsys.readouterr().err
    assert Tokenizer(spm).vocab_size == 320

    other = [a if a != "320" else "360" for a in train_args(corpus_dir, tmp_path / "run2")]
    first = [*train_args(corpus_dir, tmp_path / "run2"), "--max-steps", "1", "--heads", "3"]
    assert train.main(first) == 2  # makes 320 pieces, then stops
    assert train.main([*other, "--max-steps", "1"]) == 0
    assert "making it again" in capsys.readouterr().err
    assert Tokenizer(tmp_path / "run2" / "spm.model").vocab_size == 360

    # once a state is saved the run keeps its vocabulary, and says so
    assert train.main([*common, "--max-steps", "2", "--vocab-size", "360"]) == 0
    assert "resuming with the run's --vocab-size 320 (not 360)" in capsys.readouterr().err
    assert Tokenizer(spm).vocab_size == 320


@pytest.mark.parametrize(("signame", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_ctrl_c_or_sigterm_before_training_began_is_one_line(corpus_dir, tmp_path, signame, status):
    """Ctrl-C while the data is read or the tokenizer made (seconds to minutes on a large
    corpus) used to end in a KeyboardInterrupt traceback, and SIGTERM in silence."""
    import subprocess
    import sys

    script = (
        "import signal, sys\n"
        "from model_core import train\n"
        "real = train.read_parallel\n"
        "def read_parallel(*a, **k):\n"
        f"    signal.raise_signal(signal.{signame})\n"
        "    return real(*a, **k)\n"
        "train.read_parallel = read_parallel\n"
        "sys.exit(train.main(sys.argv[1:]))\n"
    )
    args = [*train_args(corpus_dir, tmp_path / "run"), "--max-steps", "1"]
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "mt-train: interrupted before training began: nothing to save; "
        "run the same command to start again"
    )
    assert not (tmp_path / "run" / "state.pt").exists()


def test_evaluate_refuses_to_write_its_translations_over_its_source_or_reference(
    random_checkpoint, corpus_dir, tmp_path, capsys
):
    """`--output` naming the `--src` (or `--ref`) file used to replace it with the
    translations, with status 0."""
    from model_core import evaluate

    src, ref = tmp_path / "dev.en", tmp_path / "dev.de"
    src.write_bytes((corpus_dir / "dev.en").read_bytes())
    ref.write_bytes((corpus_dir / "dev.de").read_bytes())
    before = src.read_bytes(), ref.read_bytes()
    for output, option in ((src, "--src"), (ref, "--ref")):
        args = [str(random_checkpoint), "--src", str(src), "--ref", str(ref)]
        assert evaluate.main([*args, "--output", str(output)]) == 2
        assert last_error(capsys) == (
            f"mt-evaluate: error: --output {output} is the {option} file: give another file"
        )
    assert (src.read_bytes(), ref.read_bytes()) == before
    out = tmp_path / "out.de"
    assert evaluate.main([str(random_checkpoint), "--src", str(src), "--output", str(out)]) == 0
    assert len(out.read_text().splitlines()) == len(before[0].decode().splitlines())


def test_evaluate_refuses_an_output_inside_the_checkpoint_folder(
    random_checkpoint, corpus_dir, tmp_path, capsys
):
    """`--output weights/en-de/config.json` replaced a file of the model it evaluated with the
    translations (only --src and --ref were guarded); a new file there is refused too."""
    from model_core import evaluate

    model = tmp_path / "en-de"
    shutil.copytree(random_checkpoint, model)
    files = {f.name: f.read_bytes() for f in model.iterdir()}
    src = str(corpus_dir / "dev.en")
    (tmp_path / "link").symlink_to(model)
    (tmp_path / "elsewhere").mkdir()
    for output in (
        model / "config.json",
        model / "hyp.de",
        tmp_path / "elsewhere" / ".." / "en-de" / "config.json",
        tmp_path / "link" / "config.json",
    ):
        assert evaluate.main([str(model), "--src", src, "--output", str(output)]) == 2
        assert last_error(capsys) == (
            f"mt-evaluate: error: --output {output} is inside the checkpoint folder {model}: "
            "give a file elsewhere"
        )
    assert {f.name: f.read_bytes() for f in model.iterdir()} == files


def test_ctrl_c_ends_evaluate_export_and_fetch_with_one_line(
    random_checkpoint, corpus_dir, tmp_path, monkeypatch, capsys
):
    """Ctrl-C while a command works: one line saying what is left, status 130 as a shell
    reports SIGINT (it was a KeyboardInterrupt traceback)."""
    from model_core import evaluate, export_ct2, fetch

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    def run(main, argv):
        try:
            return main(argv)
        except KeyboardInterrupt:
            return "a KeyboardInterrupt traceback"

    monkeypatch.setattr(Translator, "translate_batch", interrupted)
    out = tmp_path / "out.txt"
    src = ["--src", str(corpus_dir / "dev.en"), "--output", str(out)]
    assert run(evaluate.main, [str(random_checkpoint), *src]) == 130
    assert capsys.readouterr().err == "mt-evaluate: interrupted: nothing written\n"
    assert not out.exists()

    monkeypatch.setattr(export_ct2, "export", interrupted)
    assert run(export_ct2.main, [str(random_checkpoint), str(tmp_path / "ct2")]) == 130
    assert capsys.readouterr().err == "mt-export-ct2: interrupted\n"

    monkeypatch.setattr(fetch, "fetch", interrupted)
    argv = ["Helsinki-NLP/opus-mt-en-de", "--weights-dir", str(tmp_path / "w")]
    assert run(fetch.main, argv) == 130
    assert capsys.readouterr().err == (
        "mt-fetch: interrupted: the model being downloaded was not kept\n"
    )


COMMAND_MODULES = {
    "mt-serve": "app.main",
    "mt-train": "model_core.train",
    "mt-evaluate": "model_core.evaluate",
    "mt-export-ct2": "model_core.export_ct2",
}


@pytest.mark.parametrize("started_as", ["console script", "python -m"])
@pytest.mark.parametrize("tool", list(COMMAND_MODULES))
def test_ctrl_c_while_a_command_imports_torch_is_one_line(tool, started_as, tmp_path):
    """Ctrl-C while a command imports torch (seconds, at every start), started as its console
    script or as `python -m` its module: one line and status 130, as later (it was a traceback
    from inside torch's import; `python -m model_core.train` still gave one after the console
    scripts were mended). The interrupt comes from a stand-in torch as its import starts, where
    a person's Ctrl-C cannot be placed deterministically."""
    root = Path(__file__).resolve().parents[1]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts[tool].partition(":")
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "import os, signal\nos.kill(os.getpid(), signal.SIGINT)\n"
    )
    # what pip writes as the console script; --help in case the import went on (mt-serve
    # answers --help before it imports torch: started with a weights folder without models
    # instead, which would stop it at once)
    script = f"import sys\nfrom {module} import {function}\nsys.exit({function}())\n"
    command = ["-c", script] if started_as == "console script" else ["-m", COMMAND_MODULES[tool]]
    args, env = ["--help"], {**os.environ, "PYTHONPATH": str(tmp_path)}
    if tool == "mt-serve":
        (tmp_path / "no-models").mkdir()
        args, env = [], {**env, "MT_WEIGHTS_DIR": str(tmp_path / "no-models")}
    result = subprocess.run(
        [sys.executable, *command, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stderr) == (130, f"{tool}: interrupted\n")
    assert result.stdout == ""


def test_a_folder_an_unreadable_file_or_a_pipe_as_data(
    random_checkpoint, corpus_dir, tmp_path, monkeypatch, capsys
):
    """A folder given as a data file is named as one (it was 'file not found'), a file that
    cannot be read is one error line (it was a PermissionError traceback), and a pipe is read
    (it was 'file not found')."""
    import os
    import threading

    from model_core import evaluate

    assert evaluate.main([str(random_checkpoint), "--src", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"mt-evaluate: error: {tmp_path}: a folder, not a file: give a text file, one sentence "
        "per line\n"
    )
    args = train_args(corpus_dir, tmp_path / "run") + ["--dev-src", str(tmp_path)]
    assert train.main([*args, "--max-steps", "1"]) == 2
    assert f"{tmp_path}: a folder, not a file" in capsys.readouterr().err

    locked = write_lines(tmp_path / "locked.en", ["The cat."])
    real_read = Path.read_bytes

    def read_bytes(self):
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    assert evaluate.main([str(random_checkpoint), "--src", str(locked)]) == 2
    assert capsys.readouterr().err == (
        f"mt-evaluate: error: {locked}: cannot be read (Permission denied)\n"
    )

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(target=lambda: pipe.write_bytes(b"The cat.\nA dog.\n"), daemon=True)
    writer.start()
    try:
        assert read_lines(pipe) == ["The cat.", "A dog."]
    finally:
        writer.join(timeout=30)


def test_evaluate_output_that_cannot_be_written_is_one_line(
    random_checkpoint, corpus_dir, tmp_path, monkeypatch, capsys
):
    """--output that fails to be written after translating (a full disk) is one error line,
    status 1 (it was an OSError traceback)."""
    from model_core import evaluate

    out = tmp_path / "out.txt"
    real_write = Path.write_text

    def write_text(self, *args, **kwargs):
        if self == out:
            raise OSError(28, "No space left on device", str(self))
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    argv = [str(random_checkpoint), "--src", str(corpus_dir / "dev.en"), "--output", str(out)]
    try:
        code = evaluate.main(argv)
    except OSError:
        code = "an OSError traceback"
    assert code == 1
    assert capsys.readouterr().err == (
        f"mt-evaluate: error: --output {out}: cannot be written (No space left on device)\n"
    )


def test_export_only_without_a_saved_run_stops_before_any_work(corpus_dir, tmp_path, capsys):
    """--export-only with a --run that holds no saved state: one line at once, and no run
    folder or sentencepiece model made (one was trained into a new folder first)."""
    run = tmp_path / "typo"
    args = train_args(corpus_dir, run) + ["--export", str(tmp_path / "out"), "--export-only"]
    assert train.main(args) == 2
    err = capsys.readouterr().err
    assert err.endswith(
        f"mt-train: error: {run / 'state.pt'} not found: nothing to export "
        "(--export-only exports the state a training run saved in --run)\n"
    )
    assert "sentencepiece" not in err
    assert not run.exists() and not (tmp_path / "out").exists()


def test_init_trains_further_from_a_checkpoints_weights_and_tokenizer(corpus_dir, tmp_path, capsys):
    first, run, export = tmp_path / "first", tmp_path / "run", tmp_path / "export"
    assert (
        train.main(
            [*train_args(corpus_dir, tmp_path / "a"), "--max-steps", "30", "--export", str(first)]
        )
        == 0
    )
    capsys.readouterr()
    # another vocabulary size and model width asked for: the checkpoint's own are kept, and said
    tiny = [*TINY, "--vocab-size", "300", "--d-model", "64", "--lr", "1e-9", "--warmup", "1"]
    args = ["--init", str(first), "--data", str(corpus_dir), "--run", str(run), *tiny]
    assert train.main([*args, "--max-steps", "1", "--export", str(export)]) == 0
    log = capsys.readouterr().err
    assert f"starting from the weights of {first}" in log
    assert f"starting from --init {first}: --d-model 32 (not 64)" in log
    assert "--vocab-size 320 (not 300)" in log and "training sentencepiece" not in log
    assert (export / "spm.model").read_bytes() == (first / "spm.model").read_bytes()
    # one step at a learning rate of 1e-9: the weights are the first model's
    from safetensors.torch import load_file

    before, after = (
        load_file(str(first / "model.safetensors")),
        load_file(str(export / "model.safetensors")),
    )
    assert before.keys() == after.keys()
    for name, tensor in before.items():
        assert after[name].float().sub(tensor.float()).abs().max() < 1e-3, name
    meta = json.loads((export / "config.json").read_text())
    # --source/--target left out: the checkpoint's languages label the model
    assert (meta["source_language"], meta["target_language"]) == ("en", "de")
    started = meta["training"]["initialized_from"]
    assert started["path"] == str(first) and started["steps"] == 30
    assert meta["training"]["steps"] == 1

    # the run resumes its own state; --init is not read again (the record is kept)
    assert train.main([*args, "--max-steps", "2", "--export", str(export)]) == 0
    assert "not used: resuming the run's saved state" in capsys.readouterr().err
    assert (
        json.loads((export / "config.json").read_text())["training"]["initialized_from"] == started
    )


def test_init_refuses_a_checkpoint_it_cannot_train_further(corpus_dir, tmp_path, capsys):
    first = tmp_path / "first"
    assert (
        train.main(
            [*train_args(corpus_dir, tmp_path / "a"), "--max-steps", "2", "--export", str(first)]
        )
        == 0
    )
    capsys.readouterr()
    common = ["--data", str(corpus_dir), "--run", str(tmp_path / "run"), *TINY, "--max-steps", "1"]
    # the other direction
    assert train.main(["--init", str(first), *common, "--source", "de", "--target", "en"]) == 2
    assert last_error(capsys).startswith(
        f"mt-train: error: --init {first} translates en -> de; --source de does not match "
        "(leave --source and --target out to take its languages; files named otherwise go by "
        "--train-src"
    )
    assert train.main(["--init", str(tmp_path), *common, "--source", "en", "--target", "de"]) == 2
    assert last_error(capsys).startswith(f"mt-train: error: --init {tmp_path}: ")
    # one sentencepiece model per side (as a converted Marian model has)
    split = tmp_path / "split"
    shutil.copytree(first, split)
    meta = json.loads((split / "config.json").read_text())
    shutil.copy(split / "spm.model", split / "target.spm")
    meta["target_tokenizer"] = "target.spm"
    (split / "config.json").write_text(json.dumps(meta))
    assert train.main(["--init", str(split), *common, "--source", "en", "--target", "de"]) == 2
    assert "one sentencepiece model for both languages" in last_error(capsys)
    # an OPUS-MT (Marian) folder: refused before its weights are read
    from tests.test_marian import make_marian_dir

    opus = make_marian_dir(tmp_path / "opus-mt-en-de", seed=1)
    (opus / "model.safetensors").write_bytes(b"not read")
    assert train.main(["--init", str(opus), *common, "--source", "en", "--target", "de"]) == 2
    assert last_error(capsys).endswith("an OPUS-MT model has one per side")
    assert not (tmp_path / "run").exists()


def test_init_copies_the_checkpoints_tokenizer_again_until_a_state_is_saved(
    corpus_dir, tmp_path, capsys
):
    """A run from --init that stopped before saving a state (a bad option) kept the tokenizer
    it had copied, though the checkpoint was exported again meanwhile with another one: the
    new weights would have read the old tokenizer's ids."""
    first, run = tmp_path / "first", tmp_path / "run"
    assert (
        train.main(
            [*train_args(corpus_dir, tmp_path / "a"), "--max-steps", "2", "--export", str(first)]
        )
        == 0
    )
    args = ["--init", str(first), "--data", str(corpus_dir), "--run", str(run), *TINY]
    assert train.main([*args, "--max-steps", "1", "--max-tokens-per-sentence", "600"]) == 2
    assert (run / "spm.model").read_bytes() == (first / "spm.model").read_bytes()
    # the checkpoint exported again, with another vocabulary
    vocab = ["--vocab-size", "300"]
    assert (
        train.main(
            [
                *train_args(corpus_dir, tmp_path / "b"),
                *vocab,
                "--max-steps",
                "2",
                "--export",
                str(first),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert train.main([*args, "--max-steps", "1"]) == 0
    assert (run / "spm.model").read_bytes() == (first / "spm.model").read_bytes()
    assert "making it again" not in capsys.readouterr().err


# --- augmentation: lone words and phrases typed without a full stop ------------------------


def test_augmentation_varies_only_the_pairs_it_applies_to():
    from model_core.data import Augmentation

    src = ["Cat.", "Wait...", "USA is big!", '"Go."', "Who?", "Hi", "It is.", "?!"]
    tgt = ["Katze.", "Warte...", "Die USA sind groß!", '"Geh."', "Wer", "Hallo", "Es ist.", "?!"]
    every = Augmentation(strip_final_punctuation=1.0, lowercase_first_letter=1.0)
    out_src, out_tgt, made = every.apply(src, tgt, seed=1)
    # a pair loses its final marks only where both sides end in them and text is left; a
    # source's first letter goes to lower case unless it begins a word in capitals
    assert out_src == ["cat", "wait", "USA is big", '"Go."', "who?", "hi", "it is", "?!"]
    assert out_tgt == [
        "Katze",
        "Warte",
        "Die USA sind groß",
        '"Geh."',
        "Wer",
        "Hallo",
        "Es ist",
        "?!",
    ]
    assert made == {
        "strip_final_punctuation": 4,
        "lowercase_first_letter": 5,
        "title_case": 0,
        "upper_case": 0,
    }
    assert src[0] == "Cat." and tgt[0] == "Katze."  # the caller's lists are left as they were
    assert Augmentation().apply(src, tgt, seed=1) == (src, tgt, {k: 0 for k in made})


def test_augmentation_draws_a_fraction_of_the_pairs_fixed_by_the_seed():
    from model_core.data import Augmentation

    src = [f"Sentence number {i}." for i in range(2000)]
    tgt = [f"Satz Nummer {i}." for i in range(2000)]
    some = Augmentation(strip_final_punctuation=0.3, lowercase_first_letter=0.2)
    a_src, a_tgt, made = some.apply(src, tgt, seed=5)
    assert 500 < made["strip_final_punctuation"] < 700  # 30% of 2,000
    assert 330 < made["lowercase_first_letter"] < 470  # 20%
    assert sum(not s.endswith(".") for s in a_src) == made["strip_final_punctuation"]
    assert [s.endswith(".") for s in a_src] == [t.endswith(".") for t in a_tgt]
    assert some.apply(src, tgt, seed=5)[0] == a_src  # the same seed, the same pairs
    assert some.apply(src, tgt, seed=6)[0] != a_src
    # which pairs are drawn does not depend on the other pairs: a pair added at the end
    # leaves the others' draws alone
    assert some.apply([*src, "One more."], [*tgt, "Noch einer."], seed=5)[0][:2000] == a_src


def test_headings_in_title_case_and_text_in_capitals():
    """Documents have headings in Title Case and in capitals, which the shipped models
    turned into nonsense ("The Old House": "Der Alte Hosus"): trained as such."""
    from model_core.data import Augmentation, title_cased

    assert title_cased("the history of the world in ten days") == (
        "The History of the World in Ten Days"
    )
    assert title_cased("go to the park and play", every_word=True) == "Go To The Park And Play"
    assert title_cased("what it is for") == "What It Is For"  # the last word in capitals
    src = ["The old house.", "Where is the station?", "USA", "1 2 3.", " ".join(["word"] * 11)]
    tgt = ["Das alte Haus.", "Wo ist der Bahnhof?", "USA", "1 2 3.", "Wort"]
    headed, headed_tgt, made = Augmentation(title_case=1.0).apply(src, tgt, seed=3)
    # no final punctuation on either side, as a heading has none; a source over ten words, or
    # one a title would not change, is left
    assert headed[:2] in (
        ["The Old House", "Where Is the Station"],
        ["The Old House", "Where Is The Station"],
    )
    assert headed_tgt[:2] == ["Das alte Haus", "Wo ist der Bahnhof"]
    assert headed[2:] == src[2:] and headed_tgt[2:] == tgt[2:]
    assert made["title_case"] == 2
    shouted, shouted_tgt, made = Augmentation(upper_case=1.0).apply(src, tgt, seed=3)
    assert shouted[:2] == ["THE OLD HOUSE.", "WHERE IS THE STATION?"]
    assert shouted_tgt[:2] == ["DAS ALTE HAUS.", "WO IST DER BAHNHOF?"]
    assert shouted[2:4] == src[2:4] and made["upper_case"] == 3  # (eleven words: 20 at most)
    # a pair is counted under the variant of case it ends with: capitals undo the others
    every = Augmentation(lowercase_first_letter=1.0, title_case=1.0, upper_case=1.0)
    out, _, made = every.apply(src[:2], tgt[:2], seed=3)
    assert out == ["THE OLD HOUSE", "WHERE IS THE STATION"]
    assert made == {
        "strip_final_punctuation": 0,
        "lowercase_first_letter": 0,
        "title_case": 0,
        "upper_case": 2,
    }


def test_the_later_variants_leave_the_pairs_drawn_for_the_first_ones():
    """A run saved before --title-case and --upper-case existed resumes on the same pairs:
    those variants draw from a stream of their own."""
    from model_core.data import Augmentation

    src = [f"Sentence number {i}." for i in range(500)]
    tgt = [f"Satz Nummer {i}." for i in range(500)]
    before = Augmentation(strip_final_punctuation=0.3).apply(src, tgt, seed=5)[1]
    after = Augmentation(strip_final_punctuation=0.3, upper_case=1.0).apply(src, tgt, seed=5)[1]
    assert [t.endswith(".") for t in after] == [t.endswith(".") for t in before]
    assert all(t.isupper() for t in after)


def test_a_run_trains_on_the_variants_and_records_them(corpus_dir, tmp_path, capsys):
    run, export = tmp_path / "run", tmp_path / "export"
    options = ["--strip-final-punctuation", "0.5", "--lowercase-first-letter", "0.25"]
    args = [*train_args(corpus_dir, run), *options, "--max-steps", "2"]
    assert train.main([*args, "--export", str(export)]) == 0
    log = capsys.readouterr().err
    made = re.search(
        r"pairs trained as variants: (\d+) without the final punctuation, (\d+) with", log
    )
    assert made, log
    stripped, lowered = int(made[1]), int(made[2])
    assert 240 < stripped < 360 and 100 < lowered < 200  # of the 600 pairs
    # what the model is trained on: the token ids of the run's pairs
    r = train.Run(train.parse_args(args))
    texts = [(r.tok.decode(s), r.tok.decode(t)) for s, t in r.pairs]
    assert sum(not s.endswith(".") and not t.endswith(".") for s, t in texts) == stripped
    assert sum(s.endswith(".") != t.endswith(".") for s, t in texts) == 0
    assert sum(s[0].islower() for s, _ in texts) == lowered
    record = json.loads((export / "config.json").read_text())["training"]["augmentation"]
    assert record == {
        "strip_final_punctuation": 0.5,
        "lowercase_first_letter": 0.25,
        "title_case": 0.0,
        "upper_case": 0.0,
        "pairs": {
            "strip_final_punctuation": stripped,
            "lowercase_first_letter": lowered,
            "title_case": 0,
            "upper_case": 0,
        },
    }
    capsys.readouterr()
    # a resumed run keeps its own fractions (the batches' order depends on them)
    other = [a if a != "0.5" else "0.1" for a in args]
    assert train.main([*other[:-1], "3"]) == 0
    assert "resuming with the run's --strip-final-punctuation 0.5 (not 0.1)" in (
        capsys.readouterr().err
    )


def test_a_run_saved_before_augmentation_resumes_without_it(corpus_dir, tmp_path, capsys):
    import torch

    run = tmp_path / "run"
    assert train.main([*train_args(corpus_dir, run), "--max-steps", "2"]) == 0
    state = torch.load(run / "state.pt", weights_only=True)
    settings = json.loads(state["data_settings"])
    del settings["strip_final_punctuation"], settings["lowercase_first_letter"]
    state["data_settings"] = json.dumps(settings)  # as such a run saved it
    torch.save(state, run / "state.pt")
    capsys.readouterr()
    more = ["--strip-final-punctuation", "0.3", "--max-steps", "3"]
    assert train.main([*train_args(corpus_dir, run), *more]) == 0
    log = capsys.readouterr().err
    assert "resuming with the run's --strip-final-punctuation 0.0 (not 0.3)" in log
    assert "pairs trained as variants" not in log


def test_a_word_that_follows_itself_is_a_repeat():
    from model_core import evaluate

    assert evaluate.repeats_a_word("Katze Katze Katze.")
    assert evaluate.repeats_a_word("Mein Freund, freund.")  # case and punctuation aside
    assert not evaluate.repeats_a_word("Die Katze sieht die Katze.")
    assert not evaluate.repeats_a_word("")
