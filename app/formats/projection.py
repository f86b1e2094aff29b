"""Placing a sentence's inline markup on its translation, free of any model: the markup
projection app/formats/inline.py uses when the model does not carry placeholders.

Given the translation of a sentence's plain text and, for each pair of markup in it (an
element's opening and closing tag), the words it wraps in the source and their translation
alone, each pair is put around the stretch of whole words of the translation that reads most
like those (character 2- to 4-gram overlap, either with the stretch's translation alone or with
the source words themselves, as names and numbers are copied), with a light preference for a
stretch as long as the source's and at the same relative place in the sentence. Pairs are
placed outer ones first; an inner pair stays inside its outer pair's stretch, and pairs side by
side never overlap (they may change order, as words do in a translation). The punctuation at a
stretch's edge stays outside it unless the source words have some there. A word is a run
between whitespace, or one character of Chinese or Japanese (Han, kana: written without spaces),
in the translation and in the source alike.

No pair is ever dropped: a pair whose words match nothing is put where the position and
length say; a pair that wraps no words in the source, or finds no word left for it, wraps none
in the translation either (at the place its position says). Where a pair's words make up all
of its outer pair's (or the sentence's) words, as a document's runs do (each run a pair), the
pairs side by side are widened to share out every word between them: the space between two
goes with the one whose source has it (or with neither), the punctuation at an edge stays
outside unless its source words have some there, and a pair of punctuation alone (the "." run
after a bold word) takes that punctuation where it touches its neighbour's words.
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass

import numpy as np

#: the scripts written without spaces between words whose every character can stand alone
#: (Han, kana, half-width kana): each of their characters is a word of its own here, so
#: a pair wraps a few characters of a Chinese or Japanese sentence, not the whole of it
_UNSPACED = (
    "\u3005\u3006\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_WORDS = re.compile(rf"[{_UNSPACED}]|[^\s{_UNSPACED}]+")
_UNSPACED_CHAR = re.compile(rf"[{_UNSPACED}]")
#: the weights of a stretch's place in the sentence and of its length against the source's,
#: beside its n-gram similarity (0 to 1), in a stretch's score
_WHERE, _LENGTH = 0.2, 0.1


@dataclass
class Pair:
    """One pair of markup: the source words it wraps, in word positions of the sentence."""

    number: int
    parent: int | None  # the pair it is inside, None at the top
    source: str  # the source text it wraps (whitespace collapsed)
    translation: str  # that text translated alone ("" when not translated)
    start: float  # source word position where it opens (words before it)
    end: float  # ... and where it closes
    spaced: bool = False  # the source text it wraps ends with whitespace
    spaced_before: bool = False  # ... starts with whitespace


@dataclass
class Anchor:
    """Markup the translation holds as a word (a name that stands in for it: see
    app/formats/inline.py) at target[start:end]: the pairs it is inside in the source go
    around it, the others not; those that wrap it alone go around exactly those characters."""

    start: int
    end: int
    inside: frozenset[int]
    alone: frozenset[int]


def count_words(text: str) -> int:
    """The words of `text` as placement counts them (app/formats/inline.py counts the source's
    alike): runs between whitespace, and each character of a script without spaces."""
    return sum(1 for _ in _WORDS.finditer(text))


def inside_word(before: str, after: str) -> bool:
    """Whether a place between the characters `before` and `after` is inside a word: both are
    letters or digits, neither one of a script without spaces (whose characters are words)."""
    return joins(before) and joins(after)


def joins(char: str) -> bool:
    """Whether `char` is a letter or digit that makes one word with a letter it touches: not
    one of a script without spaces, nor punctuation or a space."""
    return char.isalnum() and not _UNSPACED_CHAR.search(char)


def as_word(word: str, flags: int = 0) -> re.Pattern[str]:
    """Where `word` stands as a word of its own: not beside a letter or digit of a script
    written with spaces (beside a Han or kana character it is: "我和Tom去了" holds "Tom")."""
    edge = rf"[^\W{_UNSPACED}]"
    return re.compile(rf"(?<!{edge}){re.escape(word)}(?!{edge})", flags)


def grams(text: str) -> frozenset[str]:
    padded = f" {text.lower()} "
    return frozenset(padded[i : i + n] for n in (2, 3, 4) for i in range(len(padded) - n + 1))


def similarity(hits: int, size: int, reference: int) -> float:
    """How much a stretch of `size` n-grams, `hits` of them in a reference of `reference`
    n-grams, reads like it: an F-score weighted to precision (a stretch of a sentence against a
    stretch translated alone, which a small model pads with words of its own)."""
    if not hits or not size or not reference:
        return 0.0
    p, r = hits / size, min(1.0, hits / reference)
    return 1.25 * p * r / (0.25 * p + r)


def place(
    target: str,
    words_in_source: int,
    pairs: list[Pair],
    filled: set[int | None],
    anchors: tuple[Anchor, ...] | list[Anchor] = (),
) -> dict[int, tuple[int, int]]:
    """Each pair's (start, end) character offsets in `target`, properly nested. `filled`: the
    pairs (None: the sentence) whose words are all inside their inner pairs. `anchors`: each
    pair's stretch holds the word of every anchor inside it and of no other, where one does
    (a pair finds none where the anchors leave it none); a pair that wraps an anchor alone
    goes around it first."""
    words = [(m.start(), m.end()) for m in _WORDS.finditer(target)]
    pinned: dict[int, tuple[int, int, int, int]] = {}  # pair: (word i, word j, start, end)
    held: list[tuple[int, frozenset[int]]] = []  # (the word of an anchor, the pairs around it)
    for anchor in anchors:
        a, b = anchor.start, anchor.end
        k = next((k for k, (s, e) in enumerate(words) if s <= a and b <= e), None)
        if k is not None:
            held.append((k, anchor.inside))
            pinned.update({number: (k, k + 1, a, b) for number in anchor.alone})
    spans: dict[int | None, tuple[int, int]] = {None: (0, len(words))}
    chars: dict[int | None, tuple[int, int]] = {None: (0, len(target))}
    source: dict[int | None, tuple[float, float]] = {None: (0.0, float(max(words_in_source, 1)))}
    for p in pairs:
        source[p.number] = (p.start, p.end)
    for parent in [None] + [p.number for p in pairs]:
        children = [p for p in pairs if p.parent == parent]
        if children:
            _place_children(
                target, words, parent, children, spans, chars, source, filled, pinned, held
            )
    return {p.number: chars[p.number] for p in pairs}


def _place_children(target, words, parent, children, spans, chars, source, filled, pinned, held):
    lo, hi = spans[parent]
    s_lo, s_hi = source[parent]
    width, s_width = hi - lo, max(s_hi - s_lo, 1e-9)
    punctuation = [
        c for c in children if parent in filled and c.source and not any(map(str.isalnum, c.source))
    ]
    ranked: dict[int, _Options] = {}  # per pair: (score, i, j), best first
    own = [grams(target[a:b]) for a, b in words[lo:hi]]  # each word's n-grams
    sizes = _sums([len(g) for g in own])
    holders: dict[str, list[int]] = {}  # an n-gram -> the words (from lo) that have it
    for k, g in enumerate(own):
        for gram in g:
            holders.setdefault(gram, []).append(k)
    for c in children:
        if c.number in pinned:
            i, j = pinned[c.number][:2]
            if lo <= i and j <= hi:  # else it finds no word: see below
                ranked[c.number] = _Options(np.array([np.inf]), np.array([i]), np.array([j]))
            continue
        if not c.source.strip() or c in punctuation:
            continue
        refs = [r for r in (grams(c.translation), grams(c.source)) if r]
        hits = [(_shared(holders, r, width), len(r)) for r in refs]
        expected = max(1.0, (c.end - c.start) * width / s_width)
        centre = ((c.start + c.end) / 2 - s_lo) / s_width
        longest = max(4, int(2 * expected) + 1)
        options = _options(lo, width, sizes, hits, expected, centre, longest)
        if held:  # the stretches that hold the anchors inside it, and no other
            keep = np.ones(len(options), dtype=bool)
            for k, inside in held:
                holds = (options.starts <= k) & (k < options.ends)
                keep &= holds if c.number in inside else ~holds
            options = _Options(options.scores[keep], options.starts[keep], options.ends[keep])
        ranked[c.number] = options
    placed = _choose(ranked, len(words))
    taken = list(placed.values())
    p_start, p_end = chars[parent]
    fill = parent in filled and placed
    order = sorted(placed.items(), key=lambda kv: kv[1])
    for k, (number, (i, j)) in enumerate(order):
        before = order[k - 1][0] if k else None
        after = order[k + 1][0] if k < len(order) - 1 else None
        if number in pinned:
            start, end = pinned[number][2:]
        elif fill:  # share out every word: from this pair's first word to the next one's
            i = lo if k == 0 else i
            j = hi if k == len(order) - 1 else order[k + 1][1][0]
            start = p_start if k == 0 else words[i][0]
            end = p_end if k == len(order) - 1 else words[j][0]
            # the space between two is the first's, the second's or neither's, as in the source
            if before in pinned:  # what follows the pinned word's name up to here
                gap = target[pinned[before][3] : start]
                start -= (
                    len(gap) if source_of(children, number).spaced_before else len(gap.lstrip())
                )
            elif k and not source_of(children, before).spaced:
                start = words[i - 1][1] if source_of(children, number).spaced_before else start
            if after in pinned:  # what precedes the pinned word's name
                gap = target[words[j - 1][1] : pinned[after][2]]
                end = words[j - 1][1] + (
                    len(gap) if source_of(children, number).spaced else len(gap.rstrip())
                )
            elif k < len(order) - 1 and not source_of(children, number).spaced:
                end = words[j - 1][1]
            # the punctuation at its edges that its source words do not have stays outside
            core = _trim(target, words[i][0], words[j - 1][1], source_of(children, number).source)
            start = core[0] if core[0] > words[i][0] else start
            end = core[1] if core[1] < words[j - 1][1] else end
        else:
            source = source_of(children, number).source
            start, end = _trim(target, words[i][0], words[j - 1][1], source)
        spans[number], chars[number] = (i, j), (start, end)
    for c in punctuation:  # a run of its own in the source (the "." after a bold word)
        k = children.index(c)
        before = next((p for p in reversed(children[:k]) if p.number in placed), None)
        after = next((p for p in children[k + 1 :] if p.number in placed), None)
        if before is not None and target[: chars[before.number][1]].endswith(c.source):
            a, b = chars[before.number]
            chars[before.number] = (a, max(a, b - len(c.source)))
            spans[c.number], chars[c.number] = spans[before.number], (b - len(c.source), b)
            placed[c.number] = spans[c.number]
        elif before is not None and target[chars[before.number][1] :].startswith(c.source):
            b = chars[before.number][1]
            spans[c.number], chars[c.number] = spans[before.number], (b, b + len(c.source))
            placed[c.number] = spans[c.number]
        elif after is not None and target[chars[after.number][0] :].startswith(c.source):
            a, b = chars[after.number]
            chars[after.number] = (min(b, a + len(c.source)), b)
            spans[c.number], chars[c.number] = spans[after.number], (a, a + len(c.source))
            placed[c.number] = spans[c.number]
    for c in children:
        if c.number in placed:
            continue
        # wraps no words: at the word boundary its position says, outside the others' stretches
        at = lo + round(((c.start - s_lo) / s_width) * width)
        at = min(max(at, lo), hi)
        for a, b in taken:
            if a < at < b:
                at = b if at - a > b - at else a
        offset = p_start if at == lo else (words[at][0] if at < hi else p_end)
        if at == hi and hi > lo and not fill:
            offset = min(p_end, words[hi - 1][1])
        spans[c.number], chars[c.number] = (at, at), (offset, offset)


def _options(lo, width, sizes, hits, expected, centre, longest) -> _Options:
    """(score, i, j) of every stretch of words i..j (j - i at most `longest`) among the
    `width` words from `lo` on, best first (in order of i, then j, where scores tie). The
    stretches of a long sentence are many (its words times `longest`) for each of its pairs:
    scored as arrays, the same numbers as one by one (the same operations on each)."""
    if width <= 0:
        return _Options(np.zeros(0), np.zeros(0, int), np.zeros(0, int))
    longest = min(longest, width)  # (a stretch ends within the words)
    grid = np.meshgrid(np.arange(width), np.arange(1, longest + 1), indexing="ij")
    start, length = grid[0].ravel(), grid[1].ravel()
    keep = start + length <= width
    start, length = start[keep], length[keep]
    end = start + length
    sums = np.asarray(sizes)
    size = sums[end] - sums[start]
    sim = np.zeros(len(start))
    for h, n in hits:
        got = np.asarray(h)
        got = got[end] - got[start]
        some = (got > 0) & (size > 0) & (n > 0)
        p = np.divide(got, size, out=np.zeros(len(start)), where=some)
        r = np.minimum(1.0, got / n) if n else np.zeros(len(start))
        with np.errstate(invalid="ignore", divide="ignore"):
            f = 1.25 * p * r / (0.25 * p + r)
        sim = np.maximum(sim, np.where(some, f, 0.0))
    i, j = start + lo, end + lo
    where = 1 - np.abs(((i + j) / 2 - lo) / max(width, 1) - centre)
    off = np.array([0.0] + [abs(math.log(d / expected)) for d in range(1, longest + 1)])
    score = sim + _WHERE * where - _LENGTH * off[length]
    order = np.argsort(-score, kind="stable")
    return _Options(score[order], i[order], j[order])


def _choose(ranked: dict[int, _Options], words: int) -> dict[int, tuple[int, int]]:
    """The stretch (i, j) each pair takes: in turn, the best stretch of all first (of two as
    good, the first pair's), each pair's from those that hold no word of a pair placed before;
    a pair with none left takes none."""
    placed: dict[int, tuple[int, int]] = {}
    occupied = [False] * words
    heap = [(-o.scores[0], n, number, 0) for n, (number, o) in enumerate(ranked.items()) if len(o)]
    heapq.heapify(heap)
    while heap:
        _, n, number, k = heapq.heappop(heap)
        options = ranked[number]
        _, i, j = options[k]
        if any(occupied[i:j]):  # overlaps a placed pair: its next stretch that does not
            k += 1
            while k < len(options) and any(occupied[options.starts[k] : options.ends[k]]):
                k += 1
            if k < len(options):
                heapq.heappush(heap, (-options.scores[k], n, number, k))
            continue
        placed[number] = (i, j)
        occupied[i:j] = [True] * (j - i)
    return placed


class _Options:
    """A pair's stretches best first, as a list of (score, i, j) reads (kept as three arrays:
    most are never read)."""

    __slots__ = ("scores", "starts", "ends")

    def __init__(self, scores: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        self.scores, self.starts, self.ends = scores, starts, ends

    def __len__(self) -> int:
        return len(self.scores)

    def __getitem__(self, k: int) -> tuple[float, int, int]:
        return float(self.scores[k]), int(self.starts[k]), int(self.ends[k])


def _shared(holders: dict[str, list[int]], reference: frozenset[str], width: int) -> np.ndarray:
    """Prefix sums of the n-grams each of `width` words shares with `reference` (`holders`:
    the words that have each n-gram): out[k] is the sum over the words before k."""
    counts = [0] * width
    for gram in reference:
        for k in holders.get(gram, ()):
            counts[k] += 1
    return np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))


def _sums(values: list[int]) -> list[int]:
    """Prefix sums: out[k] = sum(values[:k])."""
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out


def source_of(children: list[Pair], number: int) -> Pair:
    return next(c for c in children if c.number == number)


def _trim(target: str, start: int, end: int, source: str) -> tuple[int, int]:
    """The stretch without the punctuation at its edges that the source words do not have."""
    s, e = start, end
    if source[:1].isalnum():
        while s < e and not target[s].isalnum():
            s += 1
    if source[-1:].isalnum():
        while e > s and not target[e - 1].isalnum():
            e -= 1
    return (s, e) if s < e else (start, end)
