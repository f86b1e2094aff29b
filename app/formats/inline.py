"""Translating a block of text that holds inline markup (an HTML paragraph with <b> and <a>, a
Markdown paragraph with **bold** and `code`, a Word paragraph made of differently formatted
runs), free of any model and of any one format.

A format cuts its document into units (one per block: a paragraph, a heading, a table cell)
and describes each unit as a sequence of items: text, an inline element's opening and closing
markup (a pair), and atoms (markup that stays as it is: an inline <code> element, an image, an
element marked translate="no"). Each item's `ref` is the format's own handle on it (the raw
markup to write back, or the XML nodes that hold a run's text).

Each unit is translated in one of two ways, both asked for in the same batch (the first one
only while the model is not known to lose placeholders: see PlaceholderUse):

- whole with placeholders: the unit's text with its markup replaced by placeholders (`<g1>`...
  `</g1>` for a pair, `<x2/>` for an atom), so the model sees the whole sentence. Its output
  is used when every placeholder comes back exactly once and the pairs nest properly; the
  markup then wraps the words the model placed inside the placeholders.
- whole without markup, the markup placed on the translation: the fallback for a model that
  loses or garbles placeholders (the shipped models never saw any: they turn `<g1>` into
  bytes and give back a sentence without it). The unit is cut at its atoms only (an atom
  stays exactly where it was, once); each stretch between them that holds pairs is sent as
  plain text, and so are the words each pair wraps, alone. Each pair is then put around the
  words of the stretch's translation that read most like those (app/formats/projection.py:
  character n-grams against the pair's words translated alone or as written, their position
  and length in the sentence). So the text is the translation of the plain sentence; no pair
  is dropped (a link whose words match nothing goes where its position says); only the words
  a pair wraps may be off. A stretch without pairs, one with a single run of words, and a pair
  whose markup sits inside a word (`e<noBreakHyphen/>mail` in a .docx) are translated by
  runs: each stretch of text between two pieces of markup on its own, every piece of markup
  where it was.

A unit with atoms is also sent whole as plain text with each atom replaced by a name the
model copies as written (STAND_INS: "Run Tom now."), and each atom is written where its name
is in that translation if every name comes back exactly once; otherwise by runs as above.
(Cut at an atom, "Click here to see <code>make</code> now." was "Der Markt hier, um zu
sehen. <code>make</code> Das ist jetzt." with weights/en-de; the stand-in keeps the sentence
together: bench/inline_markup_bench.py --atoms.) In a unit with pairs (but one around all of
it), the pairs are placed on that translation as a segment's are, with their words sent alone
too, each around the names of the atoms inside it and no other; a pair that wraps an atom
alone goes around its name exactly, and every atom must come back inside the pairs it was in.
(Cut at the atom, "Read <b>https://example.com/docs</b> first." was "Lies Lies gelesen,
gelesen zu lesen gelesen gelesen zu lesen! <b>https://example.com/docs</b> ersten Mal."; now
"Lies <b>https://example.com/docs</b> zuerst.")

Before this, a sentence cut by inline markup was translated in pieces ("The door is <b>open
</b>." became "Die Tür ist der Tür. <b>öffnen Sie geöffnet.</b>." with weights/en-de; now "Die
Tür ist <b>geöffnet</b>."; bench/inline_markup_bench.py measures it).

A unit with at most one stretch of text that holds letters is only translated by runs (that is
the whole sentence already); units whose pairs do not balance (broken markup) and units sent
with `whole=False` too.

URLs (`https://...`, any `scheme://...`, `www....`), IPv4 addresses and e-mail addresses
(`mailto:` too; a host name without a dot, `user@localhost`: app/formats/addresses.py) in
text are copied as written, never translated: each is an atom in the unit (a placeholder when
translated whole, a name standing in for it or a cut between runs otherwise) that comes back
as text (a "keep" item), written where the atom stands; by runs, the punctuation and spacing
that touch it too.

A unit whose translation comes back as it was sent (text in the target's language already, a
name) is written as it was: its spacing and what the format left out of the text sent (soft
hyphens, `<wbr>`) stay.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, cast

from .addresses import is_emoji, verbatim_spans
from .projection import Anchor, Pair, as_word, count_words, inside_word, joins, place

log = logging.getLogger(__name__)

#: HTML's inter-element whitespace; U+00A0 (&nbsp;) is not collapsed
_SPACE = " \t\n\r\f"
_SPACES = re.compile(f"[{_SPACE}]+")
#: our own placeholder syntax in the model's output (never used on the document's markup);
#: tolerant of the spaces and capitals a tokenizer or a model may add
_MARKER = re.compile(r"<\s*(/?)\s*([gx])\s*(\d+)\s*(/?)\s*>", re.IGNORECASE)
#: punctuation that opens a run after markup or an address (", and", ") then", ": see"), and
#: an opening bracket, quote or dash that ends one before them ("tea (", "said \u201c"): kept
#: as written when the unit is translated by runs. A model drops what starts or ends a
#: fragment like these, and the run's words then ran into the markup or the address beside it
#: ("http://example.com/a.pdfDie Katze", "</b>und wir").
_RUN_LEAD = re.compile(r"[^\w\s]+\s*")
_RUN_TRAIL = re.compile(r"\s+[(\[{\"'\u201c\u201e\u00ab\u2018\u201a\u2013\u2014-]+$")
#: the words an atom stands in for when its sentence is sent whole without markup, the first
#: ones not in the sentence already: names the shipped models give back as written (in 100
#: Tatoeba sentences with one inserted at a random word boundary, en-de / de-en: "Tom" 84 / 79,
#: "Boston" 63 / 59, "Paris" 66 / 53; "1234", "X7", a made-up name, the URL itself: none)
STAND_INS = ("Tom", "Boston", "Paris")
#: what ends a sentence: markup or an address after it is not in it
_ENDS = frozenset(".!?…。！？")
#: the pairs a segment may hold, and the pairs and atoms a unit may be sent with as
#: what a list's item starts with, before its words: a bullet or a dash (any run of
#: punctuation and symbols), or a number with its `.` or `)` ("1.", "(2)"); not a letter ("a)",
#: "IV."), which translated by runs would be sent as a word
_LIST_MARK = re.compile(r"\s*(?:[^\w\s]+|\(?\d{1,3}[.)])?\s*\Z")
#: placeholders: a stretch with more is translated by runs, a unit with more is not sent with
#: placeholders. Placing pairs costs time that grows with the pairs times the words (a
#: paragraph of 2,200 bold words, 20 kB, took seconds of CPU), its placeholder text was decoded
#: for seconds more, and a model that gives many fewer words back than it was sent ("a a a
#: ... a" came back as a few "einen") left most pairs with no word to wrap: their words were
#: lost. By runs, each run keeps its words.
MAX_MARKUP = 64

#: the soft hyphen (U+00AD, `&shy;`): where the source word may break, nowhere in its
#: translation; the model gets the words without it (sent, it cut a word into letters and
#: bytes: "transla\u00adtion" became "tra n s l a <0xC2> <0xAD> tion")
SOFT_HYPHEN = "\u00ad"


def has_letters(text: str) -> bool:
    return any(c.isalpha() for c in text)


def collapse(text: str) -> str:
    return _SPACES.sub(" ", text).strip(_SPACE)


def split_space(text: str) -> tuple[str, str, str]:
    """(leading whitespace, the rest, trailing whitespace)."""
    core = text.strip(_SPACE)
    if not core:
        return text, "", ""
    start = text.index(core[0])
    return text[:start], core, text[start + len(core) :]


class Item(NamedTuple):
    kind: str  # "text", "open", "close", "atom", "keep" (text copied as written: an atom)
    value: str | int  # the text, or the pair's / atom's number
    ref: Any  # the format's handle: raw markup, or the nodes to write back into
    text: str = ""  # for "keep": the text
    word: bool = False  # for "atom": it stands where a word would (see Unit._stand_in_text)


class Token(NamedTuple):
    """One piece of a unit's translation, in output order."""

    kind: str  # "text", "open", "close", "atom"
    text: str  # for "text": the text to write (translated, or the original when it held no letters)
    ref: Any  # the item's ref (for "text": the ref of the item it came from, None when whole)
    translated: bool  # for "text": whether `text` is a translation


def atom_token(item: Item) -> Token:
    """An atom's piece of the translation: its text as written ("keep"), or the atom."""
    if item.kind == "keep":
        return Token("text", item.text, item.ref, False)
    return Token("atom", "", item.ref, False)


@dataclass
class _Segment:
    """A stretch of a unit between its atoms that holds pairs and two runs of words or more:
    translated as one sentence, its pairs placed by app/formats/projection.py."""

    start: int  # its items: self.items[start:end]
    end: int
    text: str  # the source text of its items, whitespace as written
    lead: str  # kept as written before and after what is translated (see Unit._run)
    trail: str
    pairs: list[Pair]  # outer pairs before the pairs inside them
    sent: list[int]  # the pairs whose words are translated alone, in request order
    filled: set[int | None]  # the pairs (None: the segment) whose words all are in inner pairs

    @property
    def core(self) -> str:
        return collapse(self.text[len(self.lead) : len(self.text) - len(self.trail)])

    @property
    def requests(self) -> list[str]:
        by_number = {p.number: p for p in self.pairs}
        return [self.core] + [by_number[n].source for n in self.sent]


@dataclass
class Unit:
    items: list[Item]
    balanced: bool = True
    whole: bool = True  # False: translated by runs only
    _requests: list[str] = field(default_factory=list, init=False)
    _whole: bool = field(default=False, init=False)
    stand_in: bool = True  # False: its atoms never stand in words (see _stand_in)
    _segments: dict[int, _Segment] = field(default_factory=dict, init=False)
    _use: PlaceholderUse | None = field(default=None, init=False)
    _placeholders: bool = field(default=True, init=False)  # the placeholder text is sent
    _stand_ins: dict[str, Item] = field(default_factory=dict, init=False)
    _stand_in_requests: list[str] = field(default_factory=list, init=False)
    #: the unit with its atoms' names, as one segment, when it has pairs (see _stand_in)
    _stand_in_segment: _Segment | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        runs = [collapse(self._run(k)[1]) for k, i in enumerate(self.items) if i.kind == "text"]
        runs = [r for r in runs if has_letters(r)]
        self._whole = self.whole and self.balanced and len(runs) > 1
        stand_in = self._stand_in_requests = self._stand_in() if self.stand_in else []
        if not self._whole:
            self._requests = stand_in + runs
            return
        self._segments = {s.start: s for s in self._segment_all()}
        self._use = _placeholder_use.get()
        markup = sum(i.kind == "open" for i in self.items)  # pairs (an atom: one of its own)
        markup += sum(i.kind not in ("text", "open", "close") for i in self.items)
        self._placeholders = markup <= MAX_MARKUP and (self._use is None or self._use.wanted())
        self._requests = ([self.placeholder_text()] if self._placeholders else []) + stand_in
        k = 0
        while k < len(self.items):
            if (seg := self._segments.get(k)) is not None:
                self._requests += seg.requests
                k = seg.end
                continue
            if self.items[k].kind == "text" and has_letters(collapse(self._run(k)[1])):
                self._requests.append(collapse(self._run(k)[1]))
            k += 1

    @property
    def requests(self) -> list[str]:
        """The strings this unit needs translated (consumed in this order by `tokens`)."""
        return self._requests

    def placeholder_text(self) -> str:
        parts = []
        for item in self.items:
            if item.kind == "text":
                parts.append(str(item.value))
            elif item.kind == "open":
                parts.append(f"<g{item.value}>")
            elif item.kind == "close":
                parts.append(f"</g{item.value}>")
            else:  # atom, keep
                parts.append(f"<x{item.value}/>")
        return collapse("".join(parts))

    def _stand_in(self) -> list[str]:
        """The requests of the unit's text with each atom replaced by a name (STAND_INS) that
        the model copies as written, so that the sentence is translated whole with a word
        where each atom stands: that text, and for a unit with pairs (but one around all of
        it: an office file's run, a sentence all in bold) the words of each pair as its
        segment sends them (a pair that wraps an atom alone goes around its name). Empty for a
        unit without atoms or broken (an atom then is a closing tag), with an atom that is not
        a word's (a line break, a comment: see UnitBuilder.atom), with more atoms than names,
        with an atom inside a word, with an atom (not an address) before its words, or without
        words (an atom at the end stands in too, and an address at the start: "Send your
        questions to" alone came back "Schicken Sie Ihre Fragen?"). Each atom goes where its
        name is in the translation if every name comes back exactly once (and inside the
        pairs it is in); else the sentence is cut at the atoms (see `tokens`). Sets
        `_stand_ins`, and `_stand_in_segment` for a unit with pairs."""
        atoms = [i for i in self.items if i.kind in ("atom", "keep")]
        if (
            not atoms
            or not self.balanced
            or any(i.kind == "atom" and not i.word for i in self.items)
            or not any(
                i.kind == "text" and has_letters(collapse(self._run(k)[1]))
                for k, i in enumerate(self.items)
            )
        ):
            return []
        plain = " ".join(str(i.value) for i in self.items if i.kind == "text")
        names = [n for n in STAND_INS if not as_word(n, re.IGNORECASE).search(plain)]
        if len(names) < len(atoms):
            return []
        marks = self._marks()
        trailing = len(marks)
        while trailing and marks[trailing - 1].kind != "text":
            trailing -= 1
        if trailing < len(marks) and str(marks[trailing - 1].value).rstrip(_SPACE)[-1:] in _ENDS:
            # after the sentence's end, not in it ("I love you. Tom" came back "Ich liebe
            # dich Tom.")
            return []
        # (a list's bullet or number before it, "• ✅ Done.", "1. ⚠️ ...", is no word
        # either; a count is: "5 🍕 for the team")
        first = next(
            (m for m in marks if m.kind != "text" or not _LIST_MARK.match(str(m.value))), marks[0]
        )
        if first.kind == "atom" or (first.kind == "keep" and is_emoji(first.text)):
            # markup before the words (an icon before a paragraph) is rarely one of them, nor
            # an emoji ("⚠️ The door is open."): the name became the sentence's subject ("Tom
            # The door is open." gave "Tom schloss die Tür."); an address there is
            # (`https://example.com is a good site.`)
            return []
        # named: the items with a name for each atom
        parts: list[str] = []
        named: list[Item] = []
        stand_ins: dict[str, Item] = {}
        for k, item in enumerate(self.items):
            if item.kind in ("open", "close"):
                named.append(item)
                continue
            if item.kind == "text":
                parts.append(str(item.value))
                named.append(item)
                continue
            after = next((i for i in self.items[k + 1 :] if i.kind not in ("open", "close")), None)
            if joins("".join(parts)[-1:]) or (
                after is not None and after.kind == "text" and joins(str(after.value)[:1])
            ):
                return []  # inside a word: cut there
            name = names[len(stand_ins)]
            stand_ins[name] = item
            parts.append(name)
            named.append(Item("text", name, None))
        text = collapse("".join(parts))
        if any(len(as_word(n).findall(text)) != 1 for n in stand_ins):
            return []  # two atoms side by side ran into one word
        outer = self._outer_pair()
        inner = self.items[outer[0] + 1 : outer[1]] if outer else self.items
        if not any(i.kind == "open" for i in inner):
            self._stand_ins = stand_ins
            return [text]
        seg = self._segment(0, len(named), named)
        if seg is None:  # markup inside a word, or more pairs than MAX_MARKUP
            return []
        seg.sent = [p.number for p in seg.pairs if p.number in seg.sent and p.source not in names]
        self._stand_ins, self._stand_in_segment = stand_ins, seg
        return seg.requests

    def _marks(self) -> list[Item]:
        """The unit's items but its pairs and blank text."""
        return [
            i
            for i in self.items
            if i.kind not in ("open", "close") and (i.kind != "text" or str(i.value).strip(_SPACE))
        ]

    def tokens(self, translations: list[str]) -> list[Token]:
        """The unit's translation, given the translations of `requests` in order."""
        assert len(translations) == len(self._requests)
        placeholders = self._whole and self._placeholders
        if translations == self._requests or (
            placeholders and translations[0] == self._requests[0]
        ):
            return self._as_written()
        if placeholders:
            whole = self._parse_whole(translations[0])
            if self._use is not None:
                self._use.record(whole is not None)
            if whole is not None:
                return whole
            translations = translations[1:]
        if self._stand_ins:
            if translations[0] == self._requests[len(self._requests) - len(translations)]:
                return self._as_written()  # in the target's language already, or a name
            n = len(self._stand_in_requests)
            whole = self._parse_stand_ins(translations[:n])
            if whole is not None:
                return whole
            translations = translations[n:]
        if not self._whole:
            return self._by_runs(iter(translations))
        if translations == self._requests[len(self._requests) - len(translations) :]:
            return self._as_written()
        return self._projected(iter(translations))

    def _parse_stand_ins(self, translations: list[str]) -> list[Token] | None:
        """The tokens of the translation of `_stand_in_requests`, each atom where its name is;
        None unless every name comes back exactly once (the model translated or repeated one),
        or markup that ends the unit does not come back last."""
        output = translations[0]
        found = []
        for name, item in self._stand_ins.items():
            hits = [m.span() for m in as_word(name).finditer(output)]
            if len(hits) != 1:
                return None
            found.append((*hits[0], item))
        found.sort(key=lambda f: f[0])
        ends = self._marks()
        if ends[-1].kind == "atom" and (
            found[-1][2] is not ends[-1] or has_letters(output[found[-1][1] :])
        ):
            # markup that ends the unit stays last, but for punctuation: it may be an element
            # the block's end closes (`<p>Hello <span translate="no">Acme</p>`), which words
            # after it would join
            return None
        if self._stand_in_segment is not None:
            return self._placed_stand_ins(translations, found)
        outer = self._outer_pair()
        inner = self.items[outer[0] + 1 : outer[1]] if outer else self.items
        out: list[Token] = []
        at = 0
        for start, end, item in found:
            if start > at:
                out.append(Token("text", output[at:start], None, True))
            out.append(atom_token(item))
            at = end
        if at < len(output):
            out.append(Token("text", output[at:], None, True))
        if not outer:
            return self._spaced(out)
        start, end = outer
        first, last = self.items[start], self.items[end]
        return [
            *(Token("text", str(i.value), i.ref, False) for i in self.items[:start]),
            Token("open", "", first.ref, False),
            *self._spaced(out, inner),
            Token("close", "", last.ref, False),
            *(Token("text", str(i.value), i.ref, False) for i in self.items[end + 1 :]),
        ]

    def _placed_stand_ins(
        self, translations: list[str], found: list[tuple[int, int, Item]]
    ) -> list[Token] | None:
        """The tokens of the translation of `_stand_in_segment` (its text and the words of its
        pairs): each pair placed on it as a segment's are, but one that wraps an atom alone
        around its name (`found`: each name's offsets, in order); each atom where its name is.
        None unless every atom comes back inside the pairs it was inside, and no other (the
        link around an address kept around it, a word's bold not over it), and markup that
        ends a pair ends it still (but for punctuation: as at the unit's end, it may be an
        element the pair's end closes, `<b>Hello <span translate="no">Acme</b>`)."""
        seg = self._stand_in_segment
        assert seg is not None
        target = translations[0]
        alone = dict(zip(seg.sent, translations[1:], strict=True))
        pairs = [replace(p, translation=alone.get(p.number, "")) for p in seg.pairs]
        inside: dict[int, list[int]] = {}  # each atom's pairs, outermost first
        ends: dict[int, int] = {}  # the pairs whose last item is markup (kept as written)
        stack: list[int] = []
        last = None
        for item in self.items:
            if item.kind == "open":
                stack.append(int(item.value))
            elif item.kind == "close":
                if last is not None and last.kind == "atom":
                    ends[int(item.value)] = int(last.value)
                stack.pop()
            elif item.kind in ("atom", "keep"):
                inside[int(item.value)] = list(stack)
            if item.kind != "text" or has_letters(str(item.value)):
                last = item
        anchors = []
        for start, end, item in found:
            name = next(name for name, i in self._stand_ins.items() if i is item)
            wraps = frozenset(p.number for p in pairs if p.source == name)
            anchors.append(Anchor(start, end, frozenset(inside[int(item.value)]), wraps))
        spans = place(target, count_words(seg.core), pairs, seg.filled, anchors)
        numbers = {(kind, p.number): p.number for p in pairs for kind in ("open", "close")}
        refs = {(i.kind, i.value): i.ref for i in self.items if i.kind in ("open", "close")}
        out = [Token("text", seg.lead, None, False)] if seg.lead else []
        stack, offset, placed = [], 0, 0
        last_atom = None  # the atom the output holds last, if nothing with letters is after it
        for tok in _emit(target, None, (0, len(target)), pairs, spans, numbers):
            if tok.kind != "text":
                if tok.kind == "open":
                    stack.append(tok.ref)
                else:
                    if tok.ref in ends and last_atom != ends[tok.ref]:
                        return None
                    stack.pop()
                last_atom = None
                out.append(Token(tok.kind, "", refs[(tok.kind, tok.ref)], False))
                continue
            end, cut = offset + len(tok.text), offset
            for start, stop, item in found:
                if stop <= offset or start >= end:
                    continue
                if start < offset or stop > end or inside[int(item.value)] != stack:
                    return None  # across a pair's edge, or not in the pairs it was in
                if start > cut:
                    out.append(Token("text", target[cut:start], None, True))
                out.append(atom_token(item))
                cut, placed, last_atom = stop, placed + 1, int(item.value)
            if end > cut:
                out.append(Token("text", target[cut:end], None, True))
                if has_letters(target[cut:end]):
                    last_atom = None
            offset = end
        if placed != len(found):
            return None
        if seg.trail:
            out.append(Token("text", seg.trail, None, False))
        return out

    def _outer_pair(self) -> tuple[int, int] | None:
        """The places of the pair around all of the unit's words, if there is one: its first
        item but for blank text opens it, and its last but for blank text closes it."""
        marks = [
            k for k, i in enumerate(self.items) if i.kind != "text" or str(i.value).strip(_SPACE)
        ]
        if len(marks) < 3:
            return None
        start, end = marks[0], marks[-1]
        first, last = self.items[start], self.items[end]
        if first.kind == "open" and last.kind == "close" and first.value == last.value:
            return start, end
        return None

    def _as_written(self, start: int = 0, end: int | None = None) -> list[Token]:
        """The unit (its items[start:end]) as it was, for a translation that came back as it
        was sent (a text in the target's language already, a name): what the format left out
        of the text sent (soft hyphens, `<wbr>`) and its spacing stay."""
        out = []
        for item in self.items[start:end]:
            if item.kind == "keep":
                out.append(Token("text", item.text, item.ref, False))
            elif item.kind == "text":
                out.append(Token("text", str(item.value), item.ref, False))
            else:
                out.append(Token(item.kind, "", item.ref, False))
        return out

    def _run(self, k: int, items: list[Item] | None = None) -> tuple[str, str, str]:
        """(kept before, the words to translate, kept after) of the text item at `k` (of
        `items`, else the unit's) when translated by runs: its whitespace, and the punctuation
        beside markup (see _RUN_LEAD) or an address (everything up to the first and from the
        last letter or digit: a colon, brackets, quotes, a no-break space)."""
        items = self.items if items is None else items
        lead, core, trail = split_space(str(items[k].value))
        if not has_letters(core):
            return lead, core, trail
        if k > 0 and items[k - 1].kind == "keep":
            cut = next(i for i, c in enumerate(core) if c.isalnum())
            lead, core = lead + core[:cut], core[cut:]
        elif k > 0 and (m := _RUN_LEAD.match(core)) and has_letters(core[m.end() :]):
            lead, core = lead + m.group(), core[m.end() :]
        if k + 1 < len(items) and items[k + 1].kind == "keep":
            cut = next(i for i, c in enumerate(reversed(core)) if c.isalnum())
            if cut:
                core, trail = core[:-cut], core[-cut:] + trail
        elif (
            k + 1 < len(items) and (m := _RUN_TRAIL.search(core)) and has_letters(core[: m.start()])
        ):
            core, trail = core[: m.start()], m.group() + trail
        return lead, core, trail

    def _by_runs(self, translations) -> list[Token]:
        return [t for k in range(len(self.items)) for t in self._item_by_runs(k, translations)]

    def _item_by_runs(self, k: int, translations: Iterator[str]) -> list[Token]:
        item = self.items[k]
        if item.kind == "keep":
            return [Token("text", item.text, item.ref, False)]
        if item.kind != "text":
            return [Token(item.kind, "", item.ref, False)]
        lead, core, trail = self._run(k)
        if has_letters(collapse(core)):
            return [Token("text", lead + next(translations) + trail, item.ref, True)]
        return [Token("text", str(item.value), item.ref, False)]

    def _projected(self, translations: Iterator[str]) -> list[Token]:
        """The unit with each segment translated whole and its pairs placed on the translation
        (app/formats/projection.py), the rest by runs: every atom where it was."""
        out: list[Token] = []
        k = 0
        while k < len(self.items):
            seg = self._segments.get(k)
            if seg is None:
                out += self._item_by_runs(k, translations)
                k += 1
                continue
            sent = [next(translations) for _ in seg.requests]
            k = seg.end
            if sent == seg.requests:  # given back as sent: as written
                out += self._as_written(seg.start, seg.end)
                continue
            alone = dict(zip(seg.sent, sent[1:], strict=True))
            pairs = [replace(p, translation=alone.get(p.number, "")) for p in seg.pairs]
            target = sent[0]
            spans = place(target, count_words(seg.core), pairs, seg.filled)
            refs = {(i.kind, i.value): i.ref for i in self.items[seg.start : seg.end]}
            if seg.lead:
                out.append(Token("text", seg.lead, None, True))
            out += _emit(target, None, (0, len(target)), pairs, spans, refs)
            if seg.trail:
                out.append(Token("text", seg.trail, None, True))
        return out

    def _segment_all(self) -> list[_Segment]:
        """The unit's segments: the stretches between its atoms (and between the markup of a
        pair with an atom inside, which stays where it is) with pairs and two runs or more."""
        close_of = {}
        opened: dict[int, int] = {}
        for k, item in enumerate(self.items):
            if item.kind == "open":
                opened[int(item.value)] = k
            elif item.kind == "close":
                close_of[opened[int(item.value)]] = k
        cuts = {k for k, i in enumerate(self.items) if i.kind in ("atom", "keep")}
        while True:  # a pair across a cut is cut too
            seg_of, n = [], 0
            for k in range(len(self.items)):
                n += k in cuts
                seg_of.append(n)
            across = {k for o, c in close_of.items() if seg_of[o] != seg_of[c] for k in (o, c)}
            if across <= cuts:
                break
            cuts |= across
        out, start = [], 0
        for k in sorted(cuts) + [len(self.items)]:
            if k > start and (seg := self._segment(start, k)) is not None:
                out.append(seg)
            start = k + 1
        return out

    def _segment(self, start: int, end: int, source: list[Item] | None = None) -> _Segment | None:
        """The segment of items[start:end] (of `source`, else the unit's), or None."""
        source = self.items if source is None else source
        items = source[start:end]
        if sum(i.kind == "open" for i in items) > MAX_MARKUP:
            return None  # by runs: see MAX_MARKUP
        runs = [
            k
            for k in range(start, end)
            if source[k].kind == "text" and has_letters(collapse(self._run(k, source)[1]))
        ]
        if len(runs) < 2 or not any(i.kind == "open" for i in items):
            return None
        text, marks = "", []  # marks: (offset in text, kind, number)
        for item in items:
            if item.kind == "text":
                text += str(item.value)
            else:
                marks.append((len(text), item.kind, int(item.value)))
        if any(0 < at < len(text) and inside_word(text[at - 1], text[at]) for at, _, _ in marks):
            return None  # markup inside a word (a docx no-break hyphen): by runs
        lead = self._run(start, source)[0] if items[0].kind == "text" else ""
        trail = ""
        if items[-1].kind == "text":  # (text of spaces alone, as after a pair before an atom:
            # all trail; `_run` gives it as lead, and "<b>pizza</b> 🍕" lost its space)
            before, core, trail = self._run(end - 1, source)
            trail = trail if core else before
        lead = lead[: min(len(lead), marks[0][0])]
        trail = trail[len(trail) - min(len(trail), len(text) - marks[-1][0]) :]
        lo, hi = len(lead), len(text) - len(trail)
        # who holds each character: the innermost pair open there (None: none)
        owner: list[int | None] = []
        stack: list[int | None] = [None]
        at = 0
        opens: dict[int, int] = {}
        pairs: dict[int, Pair] = {}
        for offset, kind, number in marks + [(len(text), "", 0)]:
            owner += [stack[-1]] * (offset - at)
            at = offset
            clipped = min(max(offset, lo), hi)
            if kind == "open":
                opens[number] = clipped
                words = count_words(text[lo:clipped])
                pairs[number] = Pair(number, stack[-1], "", "", words, words)
                stack.append(number)
            elif kind == "close":
                stack.pop()
                inner = collapse(text[opens[number] : clipped])
                pairs[number].source = inner
                wrapped = text[opens[number] : clipped]
                pairs[number].spaced = wrapped[-1:] in tuple(_SPACE)
                pairs[number].spaced_before = wrapped[:1] in tuple(_SPACE)
                pairs[number].end = pairs[number].start + count_words(inner)
        filled = {p for p in [None, *pairs] if any(q.parent == p for q in pairs.values())} - {
            owner[k] for k in range(lo, hi) if text[k].isalpha()
        }
        core = collapse(text[lo:hi])
        sent = [
            p.number
            for p in pairs.values()
            if has_letters(p.source)
            and p.source != (core if p.parent is None else pairs[p.parent].source)
        ]
        return _Segment(start, end, text, lead, trail, list(pairs.values()), sent, filled)

    def _parse_whole(self, output: str) -> list[Token] | None:
        """The tokens of a placeholder translation, or None unless every pair and atom comes
        back exactly once, each pair opened before it is closed and pairs properly nested."""
        refs = {(i.kind, i.value): i.ref for i in self.items if i.kind != "text"}
        pairs = {i.value for i in self.items if i.kind == "open"}
        atoms = {i.value: i for i in self.items if i.kind in ("atom", "keep")}
        seen_open: set[int] = set()
        seen_atoms: set[int] = set()
        stack: list[int] = []
        out: list[Token] = []
        at = 0
        for m in _MARKER.finditer(output):
            if m.start() > at:
                out.append(Token("text", output[at : m.start()], None, True))
            at = m.end()
            closing, kind, number = m.group(1), m.group(2).lower(), int(m.group(3))
            if kind == "x":
                if number not in atoms or number in seen_atoms or closing:
                    return None
                seen_atoms.add(number)
                atom = atoms[number]
                if atom.kind == "keep":
                    out.append(Token("text", atom.text, atom.ref, False))
                else:
                    out.append(Token("atom", "", atom.ref, False))
            elif not closing:
                if number not in pairs or number in seen_open:
                    return None
                seen_open.add(number)
                stack.append(number)
                out.append(Token("open", "", refs[("open", number)], False))
            else:
                if not stack or stack[-1] != number:
                    return None
                stack.pop()
                out.append(Token("close", "", refs[("close", number)], False))
        if stack or seen_open != pairs or seen_atoms != set(atoms):
            return None
        if at < len(output):
            out.append(Token("text", output[at:], None, True))
        return self._spaced(out)

    def _spaced(self, out: list[Token], items: list[Item] | None = None) -> list[Token]:
        """`out` (the unit, or its `items`, translated whole) with the whitespace around it as
        written (the model saw it collapsed)."""
        items = self.items if items is None else items
        first, last = str(items[0].value), str(items[-1].value)
        if items[0].kind == "text" and (lead := first[: len(first) - len(first.lstrip(_SPACE))]):
            out.insert(0, Token("text", lead, None, False))
        if items[-1].kind == "text" and (trail := last[len(last.rstrip(_SPACE)) :]):
            out.append(Token("text", trail, None, False))
        return out


def _emit(
    target: str,
    parent: int | None,
    span: tuple[int, int],
    pairs: list[Pair],
    spans: dict[int, tuple[int, int]],
    refs: dict[tuple[str, Any], Any],
) -> list[Token]:
    """The tokens of `target[span]` with the pairs inside `parent` placed at `spans`."""
    start, end = span
    children = [p for p in pairs if p.parent == parent]
    order = sorted(
        range(len(children)),
        key=lambda k: (
            spans[children[k].number][0],
            spans[children[k].number][1] > spans[children[k].number][0],
            k,
        ),
    )
    out: list[Token] = []
    at = start
    for k in order:
        child = children[k].number
        a, b = spans[child]
        a = min(max(a, at), end)
        b = min(max(b, a), end)
        if a > at:
            out.append(Token("text", target[at:a], None, True))
        out.append(Token("open", "", refs[("open", child)], False))
        out += _emit(target, child, (a, b), pairs, spans, refs)
        out.append(Token("close", "", refs[("close", child)], False))
        at = b
    if end > at:
        out.append(Token("text", target[at:end], None, True))
    return out


class PlaceholderUse:
    """Whether the model (or the models of a route) a unit is translated with gives its
    placeholders back: a unit built in `placeholder_use(this)` sends its placeholder text only
    while `wanted` says so, and tells `record` whether the translation of it was usable. After
    `tries` placeholder texts sent and none usable, one unit in `retry` sends it (so that a
    model that keeps them is found again); the others are sent without it (a model that never
    gives placeholders back decoded it for nothing: one decode more for every unit with
    markup). Model-free: the service keeps one per route."""

    def __init__(self, name: str = "", tries: int = 32, retry: int = 64):
        self.name, self.tries, self.retry = name, tries, retry
        self.attempts = self.successes = self.skipped = 0
        self._lock = threading.Lock()

    def wanted(self) -> bool:
        with self._lock:
            if self.successes or self.attempts < self.tries:
                return True
            self.skipped += 1
            return self.skipped % self.retry == 0

    def record(self, usable: bool) -> None:
        with self._lock:
            self.attempts += 1
            self.successes += usable
            if self.attempts == self.tries and not self.successes:
                log.info(
                    "%s gave none of %d placeholder texts back usable: units with markup are "
                    "now sent without them (one in %d still is)",
                    self.name or "the model",
                    self.tries,
                    self.retry,
                )


_placeholder_use: contextvars.ContextVar[PlaceholderUse | None] = contextvars.ContextVar(
    "placeholder_use", default=None
)


@contextlib.contextmanager
def placeholder_use(use: PlaceholderUse | None) -> Iterator[None]:
    """Units built in this context (this thread) send their placeholder text as `use` says."""
    token = _placeholder_use.set(use)
    try:
        yield
    finally:
        _placeholder_use.reset(token)


class TextBudget:
    """The characters of text a document's units hold (whitespace runs counted as one), as
    they are collected: over `limit`, FormatError 413 at once, before the rest of a huge
    document is turned into units."""

    def __init__(self, limit: int):
        self.limit, self.used = limit, 0

    def add(self, text: str) -> None:
        self.used += len(_SPACES.sub(" ", text))
        if self.used > self.limit:
            from . import FormatError  # the package imports this module

            raise FormatError(
                f"the file holds more than {self.limit} characters of text", status=413
            )


_budget: contextvars.ContextVar[TextBudget | None] = contextvars.ContextVar(
    "text_budget", default=None
)


@contextlib.contextmanager
def text_budget(limit: int) -> Iterator[TextBudget]:
    """Counts the text of every unit built in this context (this thread) against `limit`."""
    budget = TextBudget(limit)
    token = _budget.set(budget)
    try:
        yield budget
    finally:
        _budget.reset(token)


def text_budget_in_force() -> TextBudget:
    """The `text_budget` of this context; a fresh, unlimited one outside any."""
    return _budget.get() or TextBudget(2**63)


class UnitBuilder:
    """Collects one unit's items in document order; `build` returns the Unit, or None when
    it holds no letters to translate."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self._open: list[tuple[str, int]] = []  # (name, pair number) of pairs not closed yet
        self._count = 0
        self.balanced = True

    def text(
        self, text: str, ref: Any = None, ref_of: Callable[[int, int], Any] | None = None
    ) -> None:
        """A stretch of text; its URLs and e-mail addresses become "keep" items, each part
        with the ref `ref_of(start, end)` gives for it (`ref` for all when not given)."""
        at = 0
        for start, end in verbatim_spans(text):
            if start > at:
                self.items.append(
                    Item("text", text[at:start], ref_of(at, start) if ref_of else ref)
                )
            self._count += 1
            keep_ref = ref_of(start, end) if ref_of else ref
            self.items.append(Item("keep", self._count, keep_ref, text[start:end]))
            at = end
        if at == 0:
            self.items.append(Item("text", text, ref))
        elif at < len(text):
            self.items.append(Item("text", text[at:], ref_of(at, len(text)) if ref_of else ref))

    def open(self, name: str, ref: Any) -> None:
        self._count += 1
        self._open.append((name, self._count))
        self.items.append(Item("open", self._count, ref))

    def close(self, name: str, ref: Any) -> None:
        if self._open and self._open[-1][0] == name:
            self.items.append(Item("close", self._open.pop()[1], ref))
        else:  # a closing tag whose opening is not in this unit: kept where it is
            self.balanced = False
            self.atom(ref)

    def atom(self, ref: Any, word: bool = False) -> None:
        """Markup kept as written; `word`: it stands where a word would (an inline <code>, an
        image), so that the sentence may be sent whole with a name in its place; not a line
        break or a comment."""
        self._count += 1
        self.items.append(Item("atom", self._count, ref, word=word))

    def keep(self, text: str, ref: Any = None) -> None:
        """Text copied as written (an address the format found itself): a "keep" item."""
        self._count += 1
        self.items.append(Item("keep", self._count, ref, text))

    def empty(self) -> bool:
        return not self.items

    def build(self, whole: bool = True, limit: int | None = None) -> Unit | None:
        """The unit, its text counted against the `text_budget` in force (a unit without
        letters is not translated, and not counted); `whole`: False to have it translated by
        runs only. `limit`: the characters one text sent may have (the service refuses a
        longer one with 413); a unit whose text with its placeholders is longer is translated
        by runs, a run longer than that in pieces cut at sentence ends."""
        if not any(i.kind == "text" and has_letters(str(i.value)) for i in self.items):
            return None
        if (budget := _budget.get()) is not None:
            budget.add("".join(str(i.value) for i in self.items if i.kind == "text"))
        balanced = self.balanced and not self._open
        unit = Unit(self.items, balanced=balanced, whole=whole)
        if limit is None or max(map(len, unit.requests), default=0) <= limit:
            return unit
        items = [
            Item("text", cast(str, piece), i.ref) if i.kind == "text" else i  # (a text's: str)
            for i in self.items
            for piece in (_cut(str(i.value), limit) if i.kind == "text" else [None])
        ]
        return Unit(items, balanced=balanced, whole=False, stand_in=False)


def _cut(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters, each cut after a sentence's end, else
    at a space, else where the limit falls."""
    pieces = []
    while len(text) > limit:
        window = text[:limit]
        cut = max(window.rfind(end) for end in (". ", "! ", "? ", "\n")) + 1
        if cut <= 0:
            cut = window.rfind(" ")
        cut = cut if cut > 0 else limit
        pieces.append(text[:cut])
        text = text[cut:]
    return pieces + [text]


def translate_units(
    units: list[Unit], translate_texts: Callable[[list[str]], list[str]]
) -> list[list[Token]]:
    """Every unit's tokens, with one call of `translate_texts` for the whole document."""
    requests = [r for u in units for r in u.requests]
    translations = translate_texts(requests) if requests else []
    if len(translations) != len(requests):
        raise ValueError(f"{len(requests)} texts sent, {len(translations)} translations received")
    return distribute(units, translations)


def distribute(units: list[Unit], translations: list[str]) -> list[list[Token]]:
    out, at = [], 0
    for unit in units:
        n = len(unit.requests)
        out.append(unit.tokens(translations[at : at + n]))
        at += n
    return out
