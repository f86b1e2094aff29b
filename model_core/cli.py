"""argparse types for the command-line tools: a value out of range is refused by argparse with
one line naming the option (`mt-train: error: argument --accumulate: ...`, status 2) before any
work starts, instead of a traceback (or a silent misbehaviour) later; and `folder_of_models`,
which names the model folders inside a folder given where one model's folder is wanted; and
`interruptible`: Ctrl-C ends a command with one line and status 130, not a traceback.

The console scripts (pyproject's [project.scripts]) start at a `launcher`, which imports the
command's module itself: a Ctrl-C during that import (torch takes seconds) ends the command
with the same line and status, where the script's own `from ... import main` would have
printed a traceback from inside torch. This module imports nothing heavy for that reason."""

from __future__ import annotations

import argparse
import functools
import importlib
import math
import sys
from collections.abc import Callable
from pathlib import Path


def integer(low: int, high: int | None = None):
    """An int in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            span = f"at least {low}" if high is None else f"between {low} and {high}"
            raise argparse.ArgumentTypeError(f"{value}: give a whole number {span}")
        return value

    return parse


def number(low: float, high: float | None = None, low_open: bool = False, high_open: bool = False):
    """A finite float in the range [low, high] (an end excluded where it is open)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        below = value <= low if low_open else value < low
        above = high is not None and (value >= high if high_open else value > high)
        if not math.isfinite(value) or below or above:
            left = "above" if low_open else "at least"
            span = f"{left} {low:g}"
            if high is not None:
                span += f" and {'below' if high_open else 'at most'} {high:g}"
            raise argparse.ArgumentTypeError(f"{text}: give a number {span}")
        return value

    return parse


def folder_of_models(path: Path) -> str | None:
    """Why `path` is no model folder when it holds model folders (weights/ given for
    weights/en-de), naming them; None otherwise."""
    if not path.is_dir() or (path / "config.json").exists():
        return None
    try:
        names = sorted(p.name for p in path.iterdir() if (p / "config.json").is_file())
    except OSError:
        return None
    if not names:
        return None
    if len(names) == 1:
        return f"{path} holds a model in {names[0]}: give {path / names[0]}"
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return f"{path} holds several models ({shown}): give one of them, e.g. {path / names[0]}"


def interruptible(prog: str, note: str = "") -> Callable:
    """Wrap a command's `main(argv)`: Ctrl-C ends it with `prog: interrupted` (and `note`,
    what is left behind) and status 130, as a shell reports SIGINT, instead of a traceback."""

    def wrap(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def run(argv: list[str] | None = None) -> int:
            try:
                return main(argv)
            except KeyboardInterrupt:
                print(f"{prog}: interrupted{note}", file=sys.stderr)
                return 130

        return run

    return wrap


def launcher(prog: str, target: str) -> Callable[[], int]:
    """A console script's entry: import `target` ("module:function") and run it; Ctrl-C while
    it imports or runs ends it with `prog: interrupted` and status 130."""

    def run() -> int:
        try:
            module, _, name = target.partition(":")
            main = getattr(importlib.import_module(module), name)
            return main()
        except KeyboardInterrupt:
            print(f"{prog}: interrupted", file=sys.stderr)
            return 130

    return run


mt_train = launcher("mt-train", "model_core.train:main")
mt_evaluate = launcher("mt-evaluate", "model_core.evaluate:main")
mt_export_ct2 = launcher("mt-export-ct2", "model_core.export_ct2:main")
mt_fetch = launcher("mt-fetch", "model_core.fetch:main")


class DefaultsShown(argparse.HelpFormatter):
    """--help with each option's default after its help, where it has one (not None, not a
    flag's False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            action.default not in (None, False, argparse.SUPPRESS)
            and action.option_strings
            and "%(default)" not in text
            and action.nargs != 0
        ):
            text += " (default: %(default)s)"
        return text
