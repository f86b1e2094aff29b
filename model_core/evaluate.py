"""The evaluation command: translate a file with a checkpoint and score it with sacreBLEU.

    mt-evaluate weights/en-de --src ../shared/data/tatoeba/dev.en --ref ../shared/data/tatoeba/dev.de

Prints BLEU and chrF (detokenized, cased) with sacreBLEU's signature, sentences/s and tokens/s,
and how many outputs show a model looping: run to the length limit (`at_length_limit`), or a
word repeated at once (`word_repeated`, beside the references' own count); `--output` writes
the translations, one per line.
"""

from __future__ import annotations

if __name__ == "__main__":
    # `python -m model_core.evaluate` runs as the console script does: mt_evaluate imports this
    # module itself, so that a Ctrl-C while torch imports is one line (status 130)
    from model_core.cli import mt_evaluate

    raise SystemExit(mt_evaluate())

import argparse
import itertools
import json
import os
import re
import sys
import time
from pathlib import Path

import sacrebleu

from .checkpoint import CheckpointError
from .cli import DefaultsShown, folder_of_models, integer, interruptible, number
from .data import DataError, read_lines
from .langcodes import two_letter
from .symbols import spell
from .translator import Translator
from .truecase import upper
from .verbatim import (
    NO_PLACES,
    has_numbers,
    holds_names,
    holds_numbers,
    keep,
    notation,
    places,
    protect,
)


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one existing file (through links and relative paths too)."""
    try:
        return a.samefile(b)
    except OSError:  # one of them does not exist (yet)
        return False


WORD = re.compile(r"\w+")


def repeats_a_word(text: str) -> bool:
    """Whether a word follows itself ("Katze Katze"), case and punctuation aside: the loop
    of a model that does not know how to end (a language has a few such pairs of its own,
    "had had": count the references too, for the rate of those)."""
    words = [w.casefold() for w in WORD.findall(text)]
    return any(a == b for a, b in itertools.pairwise(words))


class Progress:
    """Progress on stderr while the lines are translated (a 2,000-line set takes minutes on a
    CPU, and nothing was said until the end): "mt-evaluate: 640/2000 lines, 11.2 lines/s,
    about 2 min 1 s left", on a terminal in one line written over, otherwise a line every
    30 seconds."""

    EVERY_S = 30.0  # between two lines, not on a terminal
    TTY_EVERY_S = 0.5

    def __init__(self, total: int, shown: bool):
        self.total, self.done, self.shown = total, 0, shown
        self.tty = sys.stderr.isatty()
        self.start = self.last = time.monotonic()

    def __call__(self, translated: int) -> None:
        self.done += translated
        now = time.monotonic()
        if not self.shown or now - self.last < (self.TTY_EVERY_S if self.tty else self.EVERY_S):
            return
        self.last = now
        rate = self.done / max(now - self.start, 1e-9)
        left = max(self.total - self.done, 0) / rate if rate else 0.0
        minutes, seconds = divmod(round(left), 60)
        eta = f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
        line = f"mt-evaluate: {self.done}/{self.total} lines, {rate:.1f} lines/s, about {eta} left"
        if self.tty:
            print(f"\r{line}\x1b[K", end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    def end(self) -> None:
        if self.shown and self.tty and self.last > self.start:
            print(file=sys.stderr)  # (the line written over ends)


@interruptible("mt-evaluate", ": nothing written")
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="mt-evaluate",
        description=__doc__.split("\n")[0],
        formatter_class=DefaultsShown,
    )
    p.add_argument("checkpoint", type=Path, help="the model's folder")
    p.add_argument("--src", type=Path, required=True, help="source sentences, one per line")
    p.add_argument("--ref", type=Path, help="reference translations (omit to translate only)")
    p.add_argument("--output", type=Path, help="write translations here")
    p.add_argument("--beam-size", type=integer(1, 64), default=4, help="beam width (1: greedy)")
    p.add_argument(
        "--length-penalty",
        type=number(0.0),
        default=1.0,
        help="the exponent of the length a hypothesis' score is divided by (0: none)",
    )
    p.add_argument(
        "--batch-size", type=integer(1), default=64, help="sentences decoded together at most"
    )
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:N")
    p.add_argument(
        "--dtype", default="auto", help="auto, float32, float16, bfloat16 (auto: float32 on CPU)"
    )
    p.add_argument("--json", action="store_true", help="print the scores as one JSON object")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress lines on stderr (by default: a line that updates itself on a "
        "terminal, one every 30 seconds otherwise)",
    )
    p.add_argument(
        "--recase",
        action="store_true",
        help="recase each line in capitals or in Title Case as the service does, and give the "
        "translation of one in capitals in capitals (model_core/truecase.py)",
    )
    p.add_argument(
        "--keep-numbers",
        action="store_true",
        help="translate each line with numbers also with stand-in numbers, and keep the "
        "translation that holds the source's numbers, as the service does "
        "(model_core/verbatim.py)",
    )
    p.add_argument(
        "--keep-names",
        action="store_true",
        help="translate each line with names the vocabulary does not know also with stand-in "
        "names, and keep the translation that holds them, as the service does "
        "(model_core/verbatim.py)",
    )
    p.add_argument(
        "--spell-symbols",
        action="store_true",
        help="send currency symbols by numbers, degrees and '&' between words spelled as the "
        "source language's words, as the service does (model_core/symbols.py)",
    )
    args = p.parse_args(argv)
    if args.output is not None and (
        args.output.is_dir()
        or not args.output.parent.is_dir()
        or not os.access(args.output.parent, os.W_OK)
    ):
        # (checked before translating, not after)
        print(
            f"mt-evaluate: error: --output {args.output}: give a file in an existing folder "
            "that can be written to",
            file=sys.stderr,
        )
        return 2
    for option, given in (("--src", args.src), ("--ref", args.ref)):
        if args.output is not None and given is not None and same_file(args.output, given):
            # (the translations used to replace the file they were made from, unsaid)
            print(
                f"mt-evaluate: error: --output {args.output} is the {option} file: "
                "give another file",
                file=sys.stderr,
            )
            return 2
    models = folder_of_models(args.checkpoint)
    if models is not None:
        print(f"mt-evaluate: error: {models}", file=sys.stderr)
        return 2
    if args.output is not None and args.output.resolve().is_relative_to(
        args.checkpoint.resolve()
    ):  # (config.json or the weights were replaced by the translations, unsaid)
        print(
            f"mt-evaluate: error: --output {args.output} is inside the checkpoint folder "
            f"{args.checkpoint}: give a file elsewhere",
            file=sys.stderr,
        )
        return 2
    try:
        translator = Translator.load(args.checkpoint, device=args.device, dtype=args.dtype)
        sources = read_lines(args.src)
        refs = read_lines(args.ref) if args.ref else None
    except (CheckpointError, DataError, ValueError) as exc:  # ValueError: --device, --dtype
        print(f"mt-evaluate: error: {exc}", file=sys.stderr)
        return 2
    if refs is not None and len(refs) != len(sources):
        print(
            f"mt-evaluate: error: {args.src} has {len(sources)} lines, {args.ref} has {len(refs)}",
            file=sys.stderr,
        )
        return 2
    room = translator.max_source_tokens
    for line_number, line in enumerate(sources, 1):
        tokens = len(translator.encode_source(line))
        if tokens > room:
            print(
                f"mt-evaluate: error: {args.src}: line {line_number} has {tokens} tokens; the "
                f"model takes {room} at most: split or remove it",
                file=sys.stderr,
            )
            return 2
    sent, loud = list(sources), [False] * len(sources)
    if args.recase:
        sent, loud = map(list, zip(*map(translator.truecaser.recase, sources), strict=True))
    if args.spell_symbols:
        sent = [spell(line, two_letter(translator.source_language)) for line in sent]
    start = time.perf_counter()
    progress = Progress(
        len(sent) * (2 if args.keep_numbers or args.keep_names else 1), not args.no_progress
    )
    results = translator.translate_batch(
        sent,
        beam_size=args.beam_size,
        length_penalty=args.length_penalty,
        max_batch_size=args.batch_size,
        progress=progress,
    )
    texts = [r.text for r in results]
    again: list = []  # (the lines with numbers or names, translated with stand-ins)
    kept_how: dict[str, int] = {}  # how the lines with numbers or names to keep were given
    names = [
        translator.truecaser.names(line) if translator.truecaser.kind(source) is None else []
        for line, source in zip(sent, sources, strict=True)
    ]
    # the places the target language names otherwise: a translation that names one so holds
    # it (model_core/verbatim.py)
    names_known = places(
        two_letter(translator.source_language), two_letter(translator.target_language)
    )
    if args.keep_numbers or args.keep_names:
        protected = [
            protect(line, args.keep_numbers, spans if args.keep_names else [])
            for line, spans in zip(sent, names, strict=True)
        ]
        kept = [i for i, (_, stand_ins) in enumerate(protected) if stand_ins]
        progress.total = len(sent) + len(kept)  # (the lines with something to keep, again)
        again = translator.translate_batch(
            [protected[i][0] for i in kept],
            beam_size=args.beam_size,
            length_penalty=args.length_penalty,
            max_batch_size=args.batch_size,
            progress=progress,
        )
        stand_in_texts = {i: r.text for i, r in zip(kept, again, strict=True)}
        write = notation(translator.source_language, translator.target_language)
        place_names = names_known if args.keep_names else NO_PLACES
        for i, (_, stand_ins) in enumerate(protected):
            if stand_ins or (args.keep_numbers and has_numbers(sent[i])):
                texts[i], how = keep(
                    sent[i],
                    texts[i],
                    stand_in_texts.get(i),
                    stand_ins,
                    write,
                    args.keep_numbers,
                    place_names,
                )
                kept_how[how] = kept_how.get(how, 0) + 1
    seconds = time.perf_counter() - start
    progress.end()
    hyps = [upper(t) if up else t for t, up in zip(texts, loud, strict=True)]
    with_numbers = [i for i, line in enumerate(sent) if has_numbers(line)]
    with_names = [i for i, spans in enumerate(names) if spans]
    if args.output:
        try:  # (a full disk or a folder made read-only meanwhile was a traceback)
            args.output.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
        except OSError as exc:
            print(
                f"mt-evaluate: error: --output {args.output}: cannot be written "
                f"({exc.strerror or exc})",
                file=sys.stderr,
            )
            return 1
    report = {
        "checkpoint": str(args.checkpoint),
        "sentences": len(hyps),
        "beam_size": args.beam_size,
        "seconds": round(seconds, 2),
        "sentences_per_s": round(len(hyps) / seconds, 1),
        "generated_tokens_per_s": round(
            sum(r.output_tokens + 1 for r in [*results, *again]) / seconds, 1
        ),
        # outputs that ran to the length limit (cut there, or ended by the EOS a Marian
        # model's decoding forces there): a model that repeats itself shows here
        "at_length_limit": sum(r.hypotheses[0].at_limit for r in results if r.hypotheses),
        "word_repeated": sum(map(repeats_a_word, hyps)),
        # the lines with a number of two digits or more (or a sign or separators), and those
        # whose translation holds each of them (by sign and digits); the lines with names the
        # vocabulary does not know, and those whose translation holds each as written
        # (model_core/verbatim.py)
        "lines_with_numbers": len(with_numbers),
        "numbers_held": sum(holds_numbers(sent[i], hyps[i]) for i in with_numbers),
        "lines_with_names": len(with_names),
        "names_held": sum(
            holds_names((sent[i][a:b] for a, b in names[i]), hyps[i], names_known)
            for i in with_names
        ),
        "device": str(translator.device),
        "dtype": str(translator.dtype).replace("torch.", ""),
    }
    if args.keep_numbers or args.keep_names:  # how the lines with them were given
        report["kept_given"] = kept_how
    if refs is not None:
        bleu_metric = sacrebleu.BLEU()
        bleu = bleu_metric.corpus_score(hyps, [refs])
        chrf = sacrebleu.CHRF().corpus_score(hyps, [refs])
        report.update(
            bleu=round(bleu.score, 2),
            chrf=round(chrf.score, 2),
            word_repeated_in_references=sum(map(repeats_a_word, refs)),
            signature=str(bleu_metric.get_signature()),
        )
    if args.json:
        print(json.dumps(report))
    else:
        width = max(map(len, report))
        for key, value in report.items():
            print(f"{key:>{width}}: {value}")
    return 0
