"""The training command: sentencepiece + Transformer from aligned plain-text files.

    mt-train --data ../shared/data/tatoeba --source en --target de --run runs/en-de \
             --export weights/en-de --max-minutes 100

Steps: train (or reuse) a joint sentencepiece model; train with label smoothing, AdamW with
warm-up and inverse-square-root decay (the seeds' Noam schedule), token-count batches from
length-bucketed shuffled data, gradient accumulation and clipping; evaluate dev loss and BLEU
periodically; save resumable state (model, optimizer, schedule, data position, elapsed time)
and resume from it automatically; export the average of the last K snapshots as a float16
model_core checkpoint whose config.json records the data, command, steps, wall time and BLEU.
Interrupting (Ctrl-C or SIGTERM) finishes the step in progress and saves the state, so the same
command picks up there; a second Ctrl-C quits at once, keeping the state saved last.
"""

from __future__ import annotations

if __name__ == "__main__":
    # `python -m model_core.train` runs as the console script does: mt_train imports this
    # module itself, so that a Ctrl-C while torch imports is one line (status 130)
    from model_core.cli import mt_train

    raise SystemExit(mt_train())

import argparse
import copy
import json
import math
import platform
import re
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F
from tqdm import tqdm

from . import marian
from .checkpoint import (
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    read_metadata,
    save_checkpoint,
)
from .cli import DefaultsShown, integer, number
from .config import ModelConfig
from .data import (
    TITLE_WORDS,
    UPPER_WORDS,
    VARIANTS,
    Augmentation,
    Batch,
    DataError,
    count_batches,
    iterate_batches,
    read_parallel,
)
from .model import Transformer, count_parameters
from .threads import available_cpus
from .tokenizer import Tokenizer, train_sentencepiece
from .translator import Translator, resolve_device

STATE_FILE = "state.pt"
NO_AUGMENTATION = dict.fromkeys(VARIANTS, 0.0)
SPM_SETTINGS_FILE = "spm.json"  # what the run's spm.model was made from


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="mt-train", description=__doc__.split("\n")[0], formatter_class=DefaultsShown
    )
    g = p.add_argument_group("data")
    g.add_argument("--data", type=Path, help="folder holding train.SRC/train.TGT/dev.SRC/dev.TGT")
    g.add_argument("--source", default="src", help="source language code (file suffix with --data)")
    g.add_argument("--target", default="tgt", help="target language code (file suffix with --data)")
    for name in ("train-src", "train-tgt", "dev-src", "dev-tgt"):
        g.add_argument(f"--{name}", type=Path, help="explicit file (overrides --data)")
    g.add_argument(
        "--max-tokens-per-sentence", type=integer(1), default=128, help="longer pairs are skipped"
    )
    g.add_argument(
        "--strip-final-punctuation",
        type=number(0.0, 1.0),
        default=0.0,
        metavar="FRACTION",
        help="this fraction of the pairs whose both sides end in . ! or ? is trained without "
        "it (so that a lone word or a phrase typed without a full stop is translated, not "
        "looped on)",
    )
    g.add_argument(
        "--lowercase-first-letter",
        type=number(0.0, 1.0),
        default=0.0,
        metavar="FRACTION",
        help="this fraction of the source sentences starts in lower case (as users type)",
    )
    g.add_argument(
        "--title-case",
        type=number(0.0, 1.0),
        default=0.0,
        metavar="FRACTION",
        help=f"this fraction of the sources of at most {TITLE_WORDS} words is written as a "
        "heading: in Title Case as English writes it (half of them with every word "
        "capitalised), without the final punctuation (the target's removed too)",
    )
    g.add_argument(
        "--upper-case",
        type=number(0.0, 1.0),
        default=0.0,
        metavar="FRACTION",
        help=f"this fraction of the pairs whose source has at most {UPPER_WORDS} words is "
        "written in capitals on both sides (as warnings and some headings are)",
    )
    g = p.add_argument_group("model")
    g.add_argument(
        "--init",
        type=Path,
        help="start from this model_core checkpoint's weights and sentencepiece model (a "
        "shipped model or an earlier export: to train it further or on other data); the "
        "model options are its own. A run folder with a saved state resumes that instead",
    )
    g.add_argument(
        "--vocab-size", type=integer(8), default=8000, help="joint sentencepiece vocabulary"
    )
    g.add_argument("--d-model", type=integer(1), default=256)
    g.add_argument("--encoder-layers", type=integer(1), default=3)
    g.add_argument("--decoder-layers", type=integer(1), default=3)
    g.add_argument("--heads", type=integer(1), default=4)
    g.add_argument("--d-ff", type=integer(1), default=1024)
    g.add_argument("--dropout", type=number(0.0, 1.0, high_open=True), default=0.1)
    g.add_argument("--max-positions", type=integer(3), default=512)
    g = p.add_argument_group("optimisation")
    g.add_argument(
        "--batch-tokens", type=integer(1), default=4096, help="padded tokens per micro-batch"
    )
    g.add_argument(
        "--accumulate", type=integer(1), default=1, help="micro-batches per optimizer step"
    )
    g.add_argument("--lr", type=number(0.0, low_open=True), default=1e-3, help="peak learning rate")
    g.add_argument("--warmup", type=integer(1), default=1000, help="warm-up steps")
    g.add_argument("--label-smoothing", type=number(0.0, 1.0, high_open=True), default=0.1)
    g.add_argument(
        "--clip", type=number(0.0, low_open=True), default=1.0, help="gradient norm clipping"
    )
    g.add_argument("--seed", type=integer(0), default=1)
    g = p.add_argument_group("length of the run")
    g.add_argument("--max-steps", type=integer(0), default=0, help="0: no step limit")
    g.add_argument("--max-epochs", type=number(0.0), default=0, help="0: no epoch limit")
    g.add_argument(
        "--max-minutes", type=number(0.0), default=0, help="0: no time limit (counts resumes)"
    )
    g = p.add_argument_group("evaluation and checkpoints")
    g.add_argument(
        "--run", type=Path, required=True, help="run folder: tokenizer, state, snapshots"
    )
    g.add_argument(
        "--eval-every", type=integer(1), default=500, help="steps between dev evaluations"
    )
    g.add_argument(
        "--eval-sentences", type=integer(1), default=400, help="dev sentences for periodic BLEU"
    )
    g.add_argument(
        "--save-every", type=integer(1), default=250, help="steps between resumable saves"
    )
    g.add_argument(
        "--average-last", type=integer(1), default=5, help="snapshots averaged at export"
    )
    g.add_argument("--export", type=Path, help="write the final model_core checkpoint here")
    g.add_argument(
        "--export-only",
        action="store_true",
        help="export the run's saved state without training further (needs --export)",
    )
    g.add_argument(
        "--export-beam-size", type=integer(1, 64), default=4, help="beam for the final dev BLEU"
    )
    g.add_argument(
        "--threads",
        type=integer(0, 1024),
        default=0,
        help="CPU threads (0: the CPUs this process may use)",
    )
    g.add_argument("--no-progress", action="store_true", help="log lines instead of a progress bar")
    args = p.parse_args(argv)
    if not args.data and not (args.train_src and args.train_tgt):
        p.error("give --data DIR (with --source/--target) or --train-src and --train-tgt")
    if args.export_only and not args.export:
        p.error("--export-only needs --export DIR")
    if not (args.max_steps or args.max_epochs or args.max_minutes or args.export_only):
        p.error("give at least one of --max-steps, --max-epochs, --max-minutes")
    return args


def data_files(args: argparse.Namespace) -> dict[str, Path]:
    """The four data files, each checked to exist; a missing one is named with the options
    that give it."""
    if args.data is not None and not args.data.is_dir():
        raise DataError(f"--data {args.data}: folder not found")
    files: dict[str, Path | None] = {}
    for split in ("train", "dev"):
        for side, lang in (("src", args.source), ("tgt", args.target)):
            explicit = getattr(args, f"{split}_{side}")
            files[f"{split}_{side}"] = explicit or (
                args.data / f"{split}.{lang}" if args.data else None
            )
    if files["dev_src"] is None or files["dev_tgt"] is None:
        raise DataError("no dev set: pass --dev-src and --dev-tgt (or --data with dev.* files)")
    for split in ("train", "dev"):
        keys = (f"{split}_src", f"{split}_tgt")
        for key in keys:
            path = files[key]
            # the dev files are checked above; parse_args asks for --data or both train files
            assert path is not None
            if getattr(args, key) is not None:  # given by its own option
                if not path.exists():  # (read_lines names a folder or unreadable file)
                    raise DataError(f"--{key.replace('_', '-')} {path}: file not found")
                continue
            if path.is_file():
                continue
            raise DataError(missing_from_data(args, split, path))
    return cast(dict[str, Path], files)  # none is None (checked above)


def missing_from_data(args: argparse.Namespace, split: str, path: Path) -> str:
    """Why a file --data names is missing: the names looked for, the options that give the
    files, and a pair of the folder's files that could be the ones meant."""
    src, tgt = f"{split}.{args.source}", f"{split}.{args.target}"
    message = (
        f"{path}: {split} file not found (--data {args.data} looks for {src} and {tgt}, "
        f"their suffixes from --source and --target); give the {split} files with "
        f"--{split}-src and --{split}-tgt"
    )
    others = sorted(
        p.stem
        for p in args.data.glob(f"*.{args.source}")
        if p.stem != "train" and (args.data / f"{p.stem}.{args.target}").is_file()
    )
    if split == "dev" and others:  # (multi30k names its dev set val.*)
        name = "val" if "val" in others else others[0]
        message += (
            f", e.g. --dev-src {args.data / f'{name}.{args.source}'} "
            f"--dev-tgt {args.data / f'{name}.{args.target}'}"
        )
    return message


def check_folder(path: Path, option: str) -> None:
    """`path` is, or can become, a folder: not a file, nor under one (checked before any
    training, so that an export does not fail after it)."""
    for place in (path, *path.parents):
        if place.exists():
            if not place.is_dir():
                what = "is a file" if place == path else f"is under the file {place}"
                raise DataError(f"{option} {path} {what}: give a folder")
            return


def read_json(path: Path) -> dict | None:
    """The JSON object in `path`, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def vocabulary_problem(error: str, vocab_size: int) -> str:
    """sentencepiece's training `error` said as mt-train's: its messages name its own options
    (vocab_size, --character_coverage); the bound it gives is said as the --vocab-size to give."""
    if high := re.search(r"Vocabulary size too high \(\d+\)\. .*<= (\d+)", error):
        most = int(high[1])
        return (
            f"--vocab-size {vocab_size} is more than the training files make: sentencepiece "
            f"makes at most {most} pieces from them; give --vocab-size {most} or less (or "
            "more training data)"
        )
    if low := re.search(r"smaller than required_chars\. \d+ vs (\d+)", error):
        least = int(low[1])
        return (
            f"--vocab-size {vocab_size} is less than the training files need: their "
            f"characters, the 256 byte pieces and the special ones take {least}; give "
            f"--vocab-size {least} or more"
        )
    why = error.strip().splitlines()[-1] if error.strip() else "no reason given"
    return (
        f"sentencepiece cannot make {vocab_size} pieces from the training files ({why}); "
        "change --vocab-size"
    )


def initial_checkpoint(args: argparse.Namespace) -> Checkpoint:
    """The checkpoint of --init, which mt-train can train further: one of its own exports
    (one sentencepiece model for both sides, one target language) for the run's languages.
    Raises DataError naming what does not fit."""
    where = f"--init {args.init}"
    one_tokenizer = "mt-train trains models with one sentencepiece model for both languages "
    if marian.is_marian_dir(args.init):
        raise DataError(
            f"{where}: {one_tokenizer}(its own exports); an OPUS-MT model has one per side"
        )
    try:
        init = load_checkpoint(args.init)
    except CheckpointError as exc:
        raise DataError(f"{where}: {exc}") from None
    meta = read_metadata(args.init)
    if meta["source_tokenizer"] != meta["target_tokenizer"]:
        raise DataError(
            f"{where}: {one_tokenizer}(its own exports); this checkpoint has one per side"
        )
    if len(init.target_languages) > 1:
        raise DataError(f"{where}: a model of several target languages cannot be trained here")
    adopt_languages(args, init.source_language, init.target_language, where)
    return init


def adopt_languages(args: argparse.Namespace, source: str, target: str, where: str) -> None:
    """The languages of the checkpoint a run starts from: --source/--target when they are
    left out (the exported model is labelled with them), else they must be its own."""
    for option, given, own in (("source", args.source, source), ("target", args.target, target)):
        default = "src" if option == "source" else "tgt"
        if given == default:
            setattr(args, option, own)
        elif own and given != own:
            raise DataError(
                f"{where} translates {source} -> {target}; --{option} {given} does not match "
                "(leave --source and --target out to take its languages; files named otherwise "
                "go by --train-src, --train-tgt, --dev-src and --dev-tgt)"
            )


def init_record(init: Checkpoint) -> dict[str, Any]:
    """What an exported model says of the checkpoint it started from."""
    own = init.training
    record: dict[str, Any] = {
        "path": str(init.path),
        "source_language": init.source_language,
        "target_language": init.target_language,
    }
    for key in ("command", "training_pairs", "steps", "epochs", "wall_time_minutes", "dev_bleu"):
        if key in own:
            record[key] = own[key]
    if "initialized_from" in own:  # trained further more than once
        record["initialized_from"] = own["initialized_from"]
    return record


def noam(step: int, warmup: int) -> float:
    """Learning-rate multiplier: linear warm-up, then inverse square root; 1.0 at the peak."""
    step = max(step, 1)
    return min(step / warmup, math.sqrt(warmup / step))


def bleu(hyps: list[str], refs: list[str]) -> float:
    import sacrebleu

    return float(sacrebleu.corpus_bleu(hyps, [refs]).score)


class Run:
    """State of one training run; `train()` runs until a limit, `export()` writes the model."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.run_dir: Path = args.run
        check_folder(args.run, "--run")
        if args.export:
            check_folder(args.export, "--export")
        self.device = resolve_device("auto")
        if self.device.type == "cpu":
            torch.set_num_threads(args.threads or available_cpus())
        torch.manual_seed(args.seed)
        self.state_path = args.run / STATE_FILE
        resume = (
            torch.load(self.state_path, weights_only=True) if self.state_path.is_file() else None
        )
        if resume and "data_settings" in resume:  # keep the data position meaningful
            # (a state saved before the augmentation options trained without them)
            saved = {**NO_AUGMENTATION, **json.loads(resume["data_settings"])}
            for key, value in saved.items():
                if getattr(args, key) != value:
                    self.log(
                        f"resuming with the run's --{key.replace('_', '-')} {value} (not {getattr(args, key)})"
                    )
                    setattr(args, key, value)
        init = None
        if args.init is not None:
            if resume:
                self.log(f"--init {args.init} not used: resuming the run's saved state")
            else:
                init = initial_checkpoint(args)
        self.initialized_from: dict[str, Any] | None = None
        if resume:
            self.initialized_from = json.loads(resume.get("initialized_from", "null"))
        if self.initialized_from:  # the languages the run took from --init
            adopt_languages(
                args,
                self.initialized_from["source_language"],
                self.initialized_from["target_language"],
                f"the run's --init {self.initialized_from['path']}",
            )
        # (the languages known, --data's files are named by them; and before the run folder
        # is made: a mistyped --data left an empty one behind)
        self.files = data_files(args)
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataError(f"--run {args.run}: {exc.strerror or exc}") from None
        train_src, train_tgt = read_parallel(self.files["train_src"], self.files["train_tgt"])
        self.dev_src, self.dev_tgt = read_parallel(self.files["dev_src"], self.files["dev_tgt"])
        self.augmentation = Augmentation(**{key: getattr(args, key) for key in VARIANTS})
        train_src, train_tgt, self.augmented = self.augmentation.apply(
            train_src, train_tgt, args.seed
        )
        self.spm_path = self.run_dir / "spm.model"
        # What the run's sentencepiece model was made from: until a training state is saved,
        # a command with another --vocab-size or other training files makes it again (it
        # used to take the one a failed or interrupted first attempt left, unsaid).
        made_from: dict[str, Any] = {
            "vocab_size": args.vocab_size,
            "train_src": str(Path(self.files["train_src"]).resolve()),
            "train_tgt": str(Path(self.files["train_tgt"]).resolve()),
        }
        if init is not None:  # the checkpoint's own sentencepiece model, copied
            made_from = {"init": str(init.path.resolve())}
        made_from_path = self.run_dir / SPM_SETTINGS_FILE
        if init is not None:  # (no state saved yet) its tokenizer, copied anew each time
            self.spm_path.write_bytes(init.source_tokenizer.path.read_bytes())
            made_from_path.write_text(json.dumps(made_from, indent=1) + "\n")
        elif self.spm_path.is_file() and not resume and read_json(made_from_path) != made_from:
            self.log(
                "the run's sentencepiece model was made from other options or files and no "
                "training state is saved yet: making it again"
            )
            self.spm_path.unlink()
        if not self.spm_path.is_file():
            self.log(f"training sentencepiece ({args.vocab_size} pieces, joint)")
            try:
                train_sentencepiece(
                    [self.files["train_src"], self.files["train_tgt"]],
                    self.run_dir / "spm",
                    args.vocab_size,
                    num_threads=args.threads or available_cpus(),
                )
            except RuntimeError as exc:  # e.g. a vocabulary too large or too small for the data
                raise DataError(vocabulary_problem(str(exc), args.vocab_size)) from None
            made_from_path.write_text(json.dumps(made_from, indent=1) + "\n")
        self.tok = Tokenizer(self.spm_path)
        limit = args.max_tokens_per_sentence
        pairs = [
            (self.tok.encode(s), self.tok.encode(t))
            for s, t in zip(train_src, train_tgt, strict=True)
        ]
        self.pairs = [(s, t) for s, t in pairs if 0 < len(s) <= limit and 0 < len(t) <= limit]
        self.skipped = len(pairs) - len(self.pairs)
        if not self.pairs and not args.export_only:
            raise DataError(
                f"no training pair has at most {limit} tokens on both sides "
                "(--max-tokens-per-sentence): nothing to train on"
            )
        if resume:
            self.cfg = ModelConfig.from_dict(resume["config"])
            self.report_model_options("resuming with the run's")
        elif init is not None:
            self.cfg = init.config
            self.report_model_options(f"starting from --init {args.init}:")
        else:
            try:
                self.cfg = ModelConfig(
                    src_vocab_size=self.tok.vocab_size,
                    tgt_vocab_size=self.tok.vocab_size,
                    d_model=args.d_model,
                    encoder_layers=args.encoder_layers,
                    decoder_layers=args.decoder_layers,
                    n_heads=args.heads,
                    d_ff=args.d_ff,
                    dropout=args.dropout,
                    max_positions=args.max_positions,
                    **self.tok.special_ids(),
                )
            except ValueError as exc:
                raise DataError(f"model options: {exc}") from None
        if limit + 2 > self.cfg.max_positions:  # a target with BOS or EOS, within the table
            raise DataError(
                f"--max-tokens-per-sentence {limit} needs --max-positions of at least "
                f"{limit + 2} (it is {self.cfg.max_positions})"
            )
        self.check_dev_lengths()
        self.model = Transformer(self.cfg).to(self.device)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0
        )
        self.step, self.epoch, self.batch_in_epoch, self.elapsed = 0, 0, 0, 0.0
        self.history: list[dict] = []
        if init is not None:  # (`initialized_from`: the checkpoint's record, in short)
            self.model.load_state_dict(init.model.state_dict())
            self.initialized_from = init_record(init)
            self.log(f"starting from the weights of {args.init}")
        if resume:
            self.model.load_state_dict(resume["model"])
            self.optimizer.load_state_dict(resume["optimizer"])
            self.step, self.epoch = resume["step"], resume["epoch"]
            self.batch_in_epoch, self.elapsed = resume["batch_in_epoch"], resume["elapsed"]
            self.history = json.loads(resume["history"])
            self.log(f"resumed from {self.state_path} at step {self.step}, epoch {self.epoch}")
        self.batches_per_epoch = max(count_batches(self.pairs, args.batch_tokens, 0, args.seed), 1)
        self.stop_requested, self.stop_signal = False, None

    def report_model_options(self, said: str) -> None:
        """A resumed run keeps its model and vocabulary, a run from --init the checkpoint's:
        options that differ are said."""
        a, c = self.args, self.cfg
        for option, value, saved in (
            ("d-model", a.d_model, c.d_model),
            ("encoder-layers", a.encoder_layers, c.encoder_layers),
            ("decoder-layers", a.decoder_layers, c.decoder_layers),
            ("heads", a.heads, c.n_heads),
            ("d-ff", a.d_ff, c.d_ff),
            ("dropout", a.dropout, c.dropout),
            ("max-positions", a.max_positions, c.max_positions),
            ("vocab-size", a.vocab_size, self.tok.vocab_size),
        ):
            if value != saved:
                self.log(f"{said} --{option} {saved} (not {value})")

    def check_dev_lengths(self) -> None:
        """Every dev sentence fits the model's position table (evaluation would fail on it
        in the middle of the run); the first that does not is named."""
        room = self.cfg.max_positions - 1  # its tokens and EOS (or BOS)
        for key, lines in (("dev_src", self.dev_src), ("dev_tgt", self.dev_tgt)):
            for line_number, line in enumerate(lines, 1):
                tokens = len(self.tok.encode(line))
                if tokens > room:
                    raise DataError(
                        f"{self.files[key]}: line {line_number} has {tokens} tokens; the model "
                        f"takes {room} at most (--max-positions {self.cfg.max_positions}): "
                        "split or remove it"
                    )

    def log(self, message: str) -> None:
        tqdm.write(f"[mt-train] {message}", file=sys.stderr)

    def save_state(self) -> None:
        """Atomically write the resumable state and a weights snapshot for averaging."""
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "config": self.cfg.to_dict(),
            "step": self.step,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "elapsed": self.elapsed,
            "history": json.dumps(self.history),
            "initialized_from": json.dumps(self.initialized_from),
            "data_settings": json.dumps(self.data_settings()),
        }
        tmp = self.state_path.with_suffix(".tmp")
        torch.save(state, tmp)
        tmp.replace(self.state_path)
        snapshots = self.run_dir / "snapshots"
        snapshots.mkdir(exist_ok=True)
        from safetensors.torch import save_file

        from .checkpoint import stored_state

        save_file(stored_state(self.model), str(snapshots / f"step-{self.step:07d}.safetensors"))
        for old in sorted(snapshots.glob("step-*.safetensors"))[: -max(self.args.average_last, 1)]:
            old.unlink()

    def data_settings(self) -> dict:
        """What fixes the batch order: a resumed run must use the saved values."""
        a = self.args
        return {
            "batch_tokens": a.batch_tokens,
            "seed": a.seed,
            "max_tokens_per_sentence": a.max_tokens_per_sentence,
            **{key: getattr(a, key) for key in VARIANTS},
        }

    def batch_loss(self, batch: Batch, label_smoothing: float) -> torch.Tensor:
        """Summed cross-entropy of a batch's target tokens under teacher forcing."""
        logits = self.model(batch.src.to(self.device), batch.tgt_in.to(self.device))
        return F.cross_entropy(
            logits.float().flatten(0, 1),
            batch.tgt_out.to(self.device).flatten(),
            ignore_index=self.cfg.pad_id,
            label_smoothing=label_smoothing,
            reduction="sum",
        )

    def translator(self) -> Translator:
        """A Translator over a snapshot of the model (inference preparation changes modules)."""
        ckpt = Checkpoint(
            copy.deepcopy(self.model),
            self.cfg,
            self.tok,
            self.tok,
            self.args.source,
            self.args.target,
            self.run_dir,
        )
        dtype = next(self.model.parameters()).dtype
        return Translator(ckpt, self.device, dtype)

    @torch.no_grad()
    def evaluate(self, sentences: int, beam_size: int = 1) -> dict[str, float]:
        """Dev loss over the whole dev set; BLEU (detokenized, cased) on its first `sentences`."""
        self.model.eval()
        dev = [
            (self.tok.encode(s), self.tok.encode(t))
            for s, t in zip(self.dev_src, self.dev_tgt, strict=True)
        ]
        total, tokens = 0.0, 0
        c = self.cfg
        for _, batch in iterate_batches(
            dev, 8192, pad=c.pad_id, bos=c.bos_id, eos=c.eos_id, epoch=0, seed=0
        ):
            total += self.batch_loss(batch, label_smoothing=0.0).item()
            tokens += batch.n_tokens
        hyps = self.translator().translate_batch(self.dev_src[:sentences], beam_size=beam_size)
        score = bleu([h.text for h in hyps], self.dev_tgt[:sentences])
        self.model.train()
        return {"dev_loss": total / tokens, "dev_bleu": score}

    def out_of_budget(self) -> bool:
        a = self.args
        return (
            (a.max_steps and self.step >= a.max_steps)
            or (
                a.max_epochs
                and self.epoch + self.batch_in_epoch / self.batches_per_epoch >= a.max_epochs
            )
            or (a.max_minutes and self.elapsed >= a.max_minutes * 60)
            or self.stop_requested
        )

    def train(self) -> None:
        a, c = self.args, self.cfg
        self.model.train()
        self.log(
            f"{count_parameters(self.model):,} parameters; {len(self.pairs):,} pairs "
            f"({self.skipped} over {a.max_tokens_per_sentence} tokens skipped); "
            f"{self.batches_per_epoch} batches/epoch; device {self.device}"
        )
        if any(self.augmented.values()):
            made = self.augmented
            self.log(
                f"pairs trained as variants: {made['strip_final_punctuation']:,} "
                f"without the final punctuation, {made['lowercase_first_letter']:,} "
                f"with the source's first letter in lower case, {made['title_case']:,} as "
                f"headings in Title Case, {made['upper_case']:,} in capitals"
            )
        total = a.max_steps or None
        if a.max_epochs:
            epoch_steps = int(a.max_epochs * self.batches_per_epoch / a.accumulate)
            total = min(total or epoch_steps, epoch_steps)
        bar = tqdm(
            total=total,
            initial=self.step,
            unit="step",
            disable=a.no_progress,
            mininterval=1.0 if sys.stderr.isatty() else 30.0,
            dynamic_ncols=True,
        )
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.device.type == "cuda")
        window_tokens, window_start, micro, loss_sum = 0, time.monotonic(), 0, 0.0
        last_tick = time.monotonic()
        first_step, first_elapsed = self.step, self.elapsed  # this session's pace, for the ETA
        while not self.out_of_budget():
            for index, batch in iterate_batches(
                self.pairs,
                a.batch_tokens,
                pad=c.pad_id,
                bos=c.bos_id,
                eos=c.eos_id,
                epoch=self.epoch,
                seed=a.seed,
                skip=self.batch_in_epoch,
            ):
                with autocast:
                    loss = self.batch_loss(batch, a.label_smoothing) / batch.n_tokens
                (loss / a.accumulate).backward()
                loss_sum += loss.item()
                micro += 1
                window_tokens += batch.n_tokens
                self.batch_in_epoch = index + 1
                if micro % a.accumulate:
                    continue
                lr = a.lr * noam(self.step + 1, a.warmup)
                for group in self.optimizer.param_groups:
                    group["lr"] = lr
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), a.clip)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.step += 1
                now = time.monotonic()
                self.elapsed += now - last_tick
                last_tick = now
                bar.update(1)
                if self.step % 20 == 0:
                    rate = window_tokens / max(now - window_start, 1e-9)
                    info = {
                        "loss": f"{loss_sum / micro:.3f}",
                        "tok/s": f"{rate:,.0f}",
                        "lr": f"{lr:.2e}",
                        "epoch": f"{self.epoch + self.batch_in_epoch / self.batches_per_epoch:.2f}",
                    }
                    if a.max_minutes:
                        left = max(a.max_minutes * 60 - self.elapsed, 0.0)
                        info["left"] = tqdm.format_interval(left)
                        if total is None:  # only a time limit: the steps it leaves room for,
                            # at this session's pace, give the bar a total (percent and ETA)
                            pace = (self.step - first_step) / max(
                                self.elapsed - first_elapsed, 1e-9
                            )
                            bar.total = self.step + int(pace * left)
                    bar.set_postfix(info, refresh=False)
                    if a.no_progress or not sys.stderr.isatty():
                        self.log(
                            f"step {self.step} " + " ".join(f"{k}={v}" for k, v in info.items())
                        )
                    window_tokens, window_start, micro, loss_sum = 0, now, 0, 0.0
                if self.step % a.eval_every == 0:
                    scores = self.evaluate(a.eval_sentences)
                    self.history.append(
                        {"step": self.step, "elapsed_s": round(self.elapsed), **scores}
                    )
                    self.log(
                        f"step {self.step}: dev loss {scores['dev_loss']:.3f}, "
                        f"dev BLEU (greedy, first {a.eval_sentences}) {scores['dev_bleu']:.2f}"
                    )
                    last_tick = time.monotonic()
                    # tokens/s counts training only, not the evaluation's time
                    window_tokens, window_start = 0, last_tick
                if self.step % a.save_every == 0:
                    self.save_state()
                if self.out_of_budget():
                    break
            else:
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        bar.close()
        self.save_state()
        self.log(
            f"stopped at step {self.step} (epoch {self.epoch + self.batch_in_epoch / self.batches_per_epoch:.2f}, "
            f"{self.elapsed / 60:.1f} min of training); state in {self.state_path}"
        )

    def average_snapshots(self) -> int:
        """Load the mean of the last K snapshots into the model; returns how many were averaged."""
        from safetensors.torch import load_file

        paths = sorted((self.run_dir / "snapshots").glob("step-*.safetensors"))[
            -self.args.average_last :
        ]
        if len(paths) < 2:
            return len(paths)
        mean = None
        for path in paths:
            state = load_file(str(path))
            mean = state if mean is None else {k: mean[k] + state[k] for k in mean}
        assert mean is not None
        self.model.load_state_dict({k: v / len(paths) for k, v in mean.items()}, strict=False)
        return len(paths)

    def export(self, directory: Path) -> dict:
        averaged = self.average_snapshots()
        scores = self.evaluate(len(self.dev_src), beam_size=self.args.export_beam_size)
        self.log(
            f"export: averaged {averaged} snapshot(s); full dev BLEU (beam {self.args.export_beam_size}) "
            f"{scores['dev_bleu']:.2f}, dev loss {scores['dev_loss']:.3f}"
        )
        training = {
            "command": " ".join(["mt-train", *sys.argv[1:]]),
            "data": {k: str(v) for k, v in self.files.items()},
            "training_pairs": len(self.pairs),
            **(
                {"augmentation": {**asdict(self.augmentation), "pairs": self.augmented}}
                if any(self.augmented.values())
                else {}
            ),
            "steps": self.step,
            "epochs": round(self.epoch + self.batch_in_epoch / self.batches_per_epoch, 3),
            "wall_time_minutes": round(self.elapsed / 60, 1),
            "averaged_snapshots": averaged,
            "dev_bleu": round(scores["dev_bleu"], 2),
            "dev_bleu_beam_size": self.args.export_beam_size,
            "dev_loss": round(scores["dev_loss"], 4),
            "history": self.history,
            **({"initialized_from": self.initialized_from} if self.initialized_from else {}),
            "hardware": f"{platform.machine()} {self.device.type}, {torch.get_num_threads()} threads",
            "date": time.strftime("%Y-%m-%d"),
        }
        save_checkpoint(
            directory,
            self.model,
            source_tokenizer=self.spm_path,
            target_tokenizer=self.spm_path,
            source_language=self.args.source,
            target_language=self.args.target,
            training=training,
            dtype=torch.float16,
        )
        self.log(f"exported {directory}")
        return training


class SetupInterrupted(Exception):
    """Ctrl-C or SIGTERM before training began (reading the data, making the tokenizer)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.export_only and not (args.run / STATE_FILE).is_file():
        # (checked first: a sentencepiece model was trained into a new run folder before)
        print(
            f"mt-train: error: {args.run / STATE_FILE} not found: nothing to export "
            "(--export-only exports the state a training run saved in --run)",
            file=sys.stderr,
        )
        return 2
    run: Run | None = None

    def request_stop(signum, frame):  # finish the current step, save, and exit
        if run is None:  # nothing to save yet: stop where it is
            raise SetupInterrupted(signum)
        if run.stop_requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: at once, without saving
        run.stop_requested, run.stop_signal = True, signum

    handlers = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            run = Run(args)
        except DataError as exc:
            print(f"mt-train: error: {exc}", file=sys.stderr)
            return 2
        except SetupInterrupted as exc:  # (it used to end in a traceback, or silently)
            print(
                "mt-train: interrupted before training began: nothing to save; "
                "run the same command to start again",
                file=sys.stderr,
            )
            return 130 if exc.signum == signal.SIGINT else 143
        return run_or_export(run, args)
    finally:  # (main may be called in a process that goes on: tests)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def run_or_export(run: Run, args: argparse.Namespace) -> int:
    if args.export_only:
        if not run.state_path.is_file():
            print(
                f"mt-train: error: {run.state_path} not found: nothing to export", file=sys.stderr
            )
            return 2
        run.export(args.export)
        return 0
    try:
        run.train()
    except KeyboardInterrupt:  # the state saved last is consistent; this step's is not
        run.log(f"interrupted again: the state saved last ({run.state_path}) is kept")
        return 130
    if run.stop_requested:
        run.log("interrupted: state saved; run the same command to resume")
        return 130 if run.stop_signal == signal.SIGINT else 143
    if args.export:
        run.export(args.export)
    return 0
