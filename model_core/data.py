"""Parallel text for training: reading and checking aligned files, and token-count batches.

Batches are built by token count from length-bucketed data: pairs are sorted by length (with a
per-epoch random tie-break), cut into batches whose padded size stays under the budget, and the
batch order is shuffled with a seed derived from the epoch, so a run can resume mid-epoch by
rebuilding the same order and skipping the batches already done.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from .truecase import MINOR_WORDS


class DataError(Exception):
    """A problem with the training or evaluation files; the message says which file and line."""


def read_lines(path: str | Path) -> list[str]:
    """Read a UTF-8 text file, one sentence per line; empty lines are an error."""
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: a folder, not a file: give a text file, one sentence per line")
    try:  # read once: a pipe (/dev/stdin, <(...)) can be read only once
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except OSError as exc:  # no permission, an I/O error (it was a traceback)
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:  # bytes decoded as they are: lines end at "\n" only (a lone "\r" is in a line)
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}: line {line_no} is not valid UTF-8 ({exc.reason})") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise DataError(f"{path}: the file is empty")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            raise DataError(f"{path}: line {i} is empty (every line must hold a sentence)")
    return [line.rstrip("\r") for line in lines]


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> tuple[list[str], list[str]]:
    """Read two aligned files; their line counts must match."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: "
            "the files must be aligned line by line"
        )
    return src, tgt


# sentence-final marks that --strip-final-punctuation removes (Latin and CJK full stops,
# exclamation and question marks; a run of them, as in "Wait...", goes whole)
FINAL_PUNCTUATION = ".!?\u3002\uff01\uff1f"


#: the variants `Augmentation` makes, by their field's name
VARIANTS = ("strip_final_punctuation", "lowercase_first_letter", "title_case", "upper_case")
#: the longest source (in words) that --title-case writes as a heading, and --upper-case in
#: capitals
TITLE_WORDS, UPPER_WORDS = 10, 20


def title_cased(text: str, every_word: bool = False) -> str:
    """`text` as a title: each word's first letter in capitals, but for the minor words
    inside it (`every_word`: all of them, as many web pages and slides write titles)."""
    words = text.split(" ")
    out = []
    for n, word in enumerate(words):
        inside = 0 < n < len(words) - 1
        if word[:1].isalpha() and (every_word or not inside or word.lower() not in MINOR_WORDS):
            word = word[0].upper() + word[1:]
        out.append(word)
    return " ".join(out)


@dataclass
class Augmentation:
    """Training-pair variants a run makes (each a fraction of the pairs it applies to).

    Users type lone words and phrases without a final full stop ("cat", "good morning") and
    start sentences in lower case; corpora of whole sentences have almost none of these, and
    a model trained only on them loops on such input ("Katze Katze Katze."). Documents have
    headings in Title Case ("The Old House" gave "Der Alte Hosus", "The old house" "Das alte
    Haus") and text in capitals ("WARNING" gave quotation marks and letters), which the
    corpora hardly have. Title Case follows English usage (German writes headings as
    sentences). Each pair is counted under the last variant of case it got (capitals undo
    a lower-case first letter), and under the final punctuation's where that went. The pairs each
    variant is drawn for are fixed by the run's seed, so that a resumed run sees the same data.
    """

    strip_final_punctuation: float = 0.0  # both sides end in FINAL_PUNCTUATION: trained without
    lowercase_first_letter: float = 0.0  # the source's first letter in lower case
    title_case: float = 0.0  # a short source as a heading: Title Case, no final punctuation
    upper_case: float = 0.0  # both sides in capitals, as a warning or a slide's heading

    def apply(
        self, src: list[str], tgt: list[str], seed: int
    ) -> tuple[list[str], list[str], dict[str, int]]:
        """The pairs with the variants drawn for them, and how many of each were made."""
        rng = random.Random(seed * 1_000_003 + 7)
        out_src, out_tgt = list(src), list(tgt)
        # the later variants draw from a stream of their own: the pairs the first two are drawn
        # for stay those a run saved before them had
        rng_case = random.Random(seed * 1_000_003 + 11)
        made = {key: 0 for key in VARIANTS}
        for i, (s, t) in enumerate(zip(src, tgt, strict=True)):
            # draws for every pair, used or not: which pairs get a variant does not depend on
            # the other pairs' text
            strip, lower = rng.random(), rng.random()
            title, upper, style = rng_case.random(), rng_case.random(), rng_case.random()
            if strip < self.strip_final_punctuation:
                s2, t2 = s.rstrip().rstrip(FINAL_PUNCTUATION), t.rstrip().rstrip(FINAL_PUNCTUATION)
                if s2 != s.rstrip() and t2 != t.rstrip() and s2.strip() and t2.strip():
                    s, t = s2.rstrip(), t2.rstrip()
                    made["strip_final_punctuation"] += 1
            # the case variant each pair ends with (a later one undoes an earlier one's case)
            case = None
            if lower < self.lowercase_first_letter and s[:1].isupper() and not s[1:2].isupper():
                s = s[0].lower() + s[1:]  # (not "USA" or "NASA": a word in capitals stays)
                case = "lowercase_first_letter"
            if title < self.title_case and len(s.split()) <= TITLE_WORDS:
                s2, t2 = s.rstrip().rstrip(FINAL_PUNCTUATION), t.rstrip().rstrip(FINAL_PUNCTUATION)
                headed = title_cased(s2.rstrip(), every_word=style < 0.5)
                if headed != s2.rstrip() and t2.strip():  # (a letter was turned)
                    s, t, case = headed, t2.rstrip(), "title_case"
            if upper < self.upper_case and len(s.split()) <= UPPER_WORDS and s.upper() != s:
                s, t, case = s.upper(), t.upper(), "upper_case"
            if case is not None:
                made[case] += 1
            out_src[i], out_tgt[i] = s, t
        return out_src, out_tgt, made


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) ids, padded, ending in EOS
    tgt_in: torch.Tensor  # (B, T) BOS + ids
    tgt_out: torch.Tensor  # (B, T) ids + EOS
    n_tokens: int  # real target tokens (the loss's denominator)


def make_batch(pairs: list[tuple[list[int], list[int]]], pad: int, bos: int, eos: int) -> Batch:
    s_len = max(len(s) for s, _ in pairs) + 1
    t_len = max(len(t) for _, t in pairs) + 1
    src = torch.full((len(pairs), s_len), pad, dtype=torch.long)
    tgt_in = torch.full((len(pairs), t_len), pad, dtype=torch.long)
    tgt_out = torch.full((len(pairs), t_len), pad, dtype=torch.long)
    for i, (s, t) in enumerate(pairs):
        src[i, : len(s) + 1] = torch.tensor(s + [eos])
        tgt_in[i, : len(t) + 1] = torch.tensor([bos] + t)
        tgt_out[i, : len(t) + 1] = torch.tensor(t + [eos])
    return Batch(src, tgt_in, tgt_out, sum(len(t) + 1 for _, t in pairs))


def batch_indices(
    lengths: list[tuple[int, int]], max_tokens: int, epoch: int, seed: int
) -> list[list[int]]:
    """Group pair indices into batches of at most `max_tokens` padded tokens (either side)."""
    rng = random.Random(seed * 100_003 + epoch)
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i][1], lengths[i][0], rng.random()))
    batches: list[list[int]] = []
    current: list[int] = []
    widest = 0
    for i in order:
        w = max(widest, lengths[i][0] + 1, lengths[i][1] + 1)
        if current and w * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, w = [], max(lengths[i]) + 1
        current.append(i)
        widest = w
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def iterate_batches(
    pairs: list[tuple[list[int], list[int]]],
    max_tokens: int,
    *,
    pad: int,
    bos: int,
    eos: int,
    epoch: int,
    seed: int,
    skip: int = 0,
) -> Iterator[tuple[int, Batch]]:
    """Yield (index in epoch, batch) for one epoch, starting after `skip` batches."""
    lengths = [(len(s), len(t)) for s, t in pairs]
    for index, idx in enumerate(batch_indices(lengths, max_tokens, epoch, seed)):
        if index < skip:
            continue
        yield index, make_batch([pairs[i] for i in idx], pad, bos, eos)


def count_batches(
    pairs: list[tuple[list[int], list[int]]], max_tokens: int, epoch: int, seed: int
) -> int:
    return len(batch_indices([(len(s), len(t)) for s, t in pairs], max_tokens, epoch, seed))
