"""Casing for a sentence whose casing says nothing about its words: one in capitals ("WARNING:
DO NOT ENTER") or in Title Case ("The Old House").

Corpora of sentences have few of either, and a model trained on them translates such a
sentence badly: the shipped en-de model of the third training run gave "Der Alte Hosus" for
"The Old House" (and "Das alte Haus" for "The old house"), and quotation marks and letters
for "THE OLD HOUSE"; the fourth run's, trained on such sentences for an hour, still scores 1.75
BLEU on the sentences of tatoeba/dev in capitals as written, and 42.17 recased so
(weights/README.md). Each word of such a sentence is sent as the source tokenizer's vocabulary
writes it most often: among the word as written, in lower case and capitalised, the one that
is a whole-word piece of the sentencepiece model with the highest score (its log-probability in
the unigram model: how often the word was seen so). A word in capitals none of whose forms is a
piece goes in lower case (a word the vocabulary cuts in two or three, "warning"), but where it
has a digit ("MP3") or three letters or more that the vocabulary spells a piece a letter in
lower case too (an acronym, "FAQ"): kept as written, as is a Roman numeral ("II"); a word
with an apostrophe is recased before it ("TOM'S": "Tom's"). The first word is capitalised.
"THE OLD HOUSE" is sent as "The old house", "DAS ALTE HAUS" as "Das alte Haus" (German writes
"Haus" capitalised more often), "I SAW TOM" as "I saw Tom", "The History of Germany" as "The
history of Germany".

A sentence is in Title Case where, after its first word, each word is capitalised or one of the
minor words English titles keep in lower case ("of", "the", "and": `MINOR_WORDS`), one at least
is capitalised, and it does not end with `.` or `!` (a heading does not;
"Welcome to New York City!" is a sentence with names). German capitalises its nouns, so that many
of its sentences look so: only its sentences in capitals are recased (`NOUN_CAPITALS`).

Placeholders (`<g1>`, `</g1>`, `<x2/>`: app/formats/inline.py) are left as they are, and so are
the names that stand in for markup in a text sent (`names`: "Tom" in "VISIT Tom NOW" is no word
of the sentence, neither for telling its case nor in its translation, where `upper` keeps it so
that it is found). The translation of a sentence in capitals is given back in capitals.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

#: the languages that capitalise their nouns (ISO 639-1): no Title Case is told in them
NOUN_CAPITALS = frozenset({"de", "lb"})
#: the words English titles keep in lower case inside a title (articles, conjunctions and
#: short prepositions, as most style guides have it)
MINOR_WORDS = frozenset(
    ["a", "an", "the", "and", "but", "or", "nor", "for", "so", "yet", "as", "at", "by", "in"]
    + ["of", "off", "on", "per", "to", "up", "via", "with", "from", "into"]
)
#: a placeholder of app/formats/inline.py, never recased
_PLACEHOLDER = re.compile(r"</?[gx]\d+/?>")
#: a word: letters, with the apostrophes and hyphens inside it
_WORD = re.compile(r"[^\W\d_](?:[\w'\u2019-]*\w)?")
_ROMAN = re.compile(r"[IVXLCDM]{2,}")


def _text_parts(text: str) -> list[tuple[bool, str]]:
    """(is text, part) of `text`, its placeholders apart."""
    out, at = [], 0
    for m in _PLACEHOLDER.finditer(text):
        if m.start() > at:
            out.append((True, text[at : m.start()]))
        out.append((False, m.group()))
        at = m.end()
    if at < len(text):
        out.append((True, text[at:]))
    return out


def upper(text: str, keep: Collection[str] = ()) -> str:
    """`text` in capitals, but for its placeholders and the words in `keep`."""

    def word(m: re.Match[str]) -> str:
        return m.group() if m.group() in keep else m.group().upper()

    return "".join(_WORD.sub(word, part) if t else part for t, part in _text_parts(text))


def _cased(word: str) -> bool:
    return any(c.isupper() or c.islower() for c in word)


def kind(text: str, names: Collection[str] = ()) -> str | None:
    """ "capitals" for a sentence in capitals (two cased letters or more, none in lower case),
    "title" for one in Title Case (see the module docstring), else None; `names`: words that
    stand in for markup, not counted."""
    words = [
        w
        for is_text, part in _text_parts(text)
        if is_text
        for w in _WORD.findall(part)
        if w not in names
    ]
    cased = [c for w in words for c in w if c.isupper() or c.islower()]
    if len(cased) >= 2 and not any(c.islower() for c in cased):
        return "capitals"
    rest = [w for w in words[1:] if len(w) > 1 and _cased(w)]
    if not rest or text.rstrip()[-1:] in (".", "!"):
        return None
    if any(not w[0].isupper() and w.lower() not in MINOR_WORDS for w in rest):
        return None
    return "title" if any(w[0].isupper() for w in rest) else None


class Truecaser:
    """Recases sentences in capitals or in Title Case by a sentencepiece model's pieces."""

    def __init__(self, sp: Any, title: bool = True):
        """`sp`: a sentencepiece.SentencePieceProcessor; `title`: whether Title Case is
        recased (not for a language that capitalises its nouns)."""
        self.sp, self.title = sp, title
        self.scores: dict[str, float] = {}
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if piece.startswith("\u2581") and len(piece) > 1:
                self.scores[piece[1:]] = sp.get_score(i)

    def kind(self, text: str, names: Collection[str] = ()) -> str | None:
        """`kind`, but None for Title Case where it is not recased."""
        found = kind(text, names)
        return None if found == "title" and not self.title else found

    def _best(self, word: str, capitals: bool) -> str:
        split = re.split(r"(['\u2019])", word, maxsplit=1)
        if len(split) == 3 and split[0]:  # "TOM'S": "Tom" and "'s"
            base, apostrophe, rest = split
            return self._best(base, capitals) + apostrophe + (rest.lower() if capitals else rest)
        forms = [word, word.lower(), word[:1].upper() + word[1:].lower()]
        scored = [(self.scores[f], -n, f) for n, f in enumerate(forms) if f in self.scores]
        if scored:
            return max(scored)[2]
        if not capitals or _ROMAN.fullmatch(word):
            return word
        # (an acronym, "FAQ", the vocabulary spells a letter a piece in lower case too; a word
        # with a digit, "MP3", is a name)
        spelled = len(self.sp.encode(word.lower(), out_type=str)) >= len(word) >= 3
        return word if spelled or any(c.isdigit() for c in word) else word.lower()

    def recase(self, text: str, names: Collection[str] = ()) -> tuple[str, bool]:
        """`text` to send, and whether its translation goes back in capitals (`upper`, with
        `names` kept); `text` itself where its casing says something of its words."""
        found = self.kind(text, names)
        if found is None:
            return text, False
        capitals = found == "capitals"
        first = [True]

        def word(m: re.Match[str]) -> str:
            if m.group() in names or (
                len(m.group()) == 1 and m.string[m.end() : m.end() + 1] == "."
            ):
                return m.group()  # (a name standing in for markup; an initial, "U.S.A.")
            out = self._best(m.group(), capitals)
            if first:
                first.clear()
                out = out[:1].upper() + out[1:]
            return out

        out = "".join(
            _WORD.sub(word, part) if is_text else part for is_text, part in _text_parts(text)
        )
        return out, capitals
