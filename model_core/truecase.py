"""Casing for a sentence whose casing says nothing about its words: one in capitals ("WARNING:
DO NOT ENTER") or in Title Case ("The Old House").

Corpora of sentences have few of either, and a model trained on them translates such a
sentence badly: the shipped en-de model gave "Der Alte Hosus" for "The Old House" (and "Das
alte Haus" for "The old house"), and quotation marks and letters for "THE OLD HOUSE"; on the
sentences of tatoeba/dev in capitals it scored 1.75 BLEU, written as below 39.47 (weights/
README.md). So each word of such a sentence is sent as the source tokenizer's vocabulary writes
it most often: among the word as written, in lower case and capitalised, the one that is a
whole-word piece of the sentencepiece model with the highest score (its log-probability in
the unigram model: how often the word was seen so); a word none of whose forms is a piece keeps
its casing (in capitals: lower case). The first word is capitalised. "THE OLD HOUSE" is sent as
"The old house", "DAS ALTE HAUS" as "Das alte Haus" (German writes "Haus" capitalised more
often), "I SAW TOM" as "I saw Tom", "The History Of Germany" as "The history of Germany".

German capitalises its nouns, so that many of its sentences look like Title Case: only its
sentences in capitals are recased (`NOUN_CAPITALS`).

Placeholders (`<g1>`, `</g1>`, `<x2/>`: app/formats/inline.py) are left as they are, and a
translation of a sentence in capitals is given back in capitals (`upper`) outside them.
"""

from __future__ import annotations

import re
from typing import Protocol

#: the languages that capitalise their nouns (ISO 639-1): no Title Case is told in them
NOUN_CAPITALS = frozenset({"de", "lb"})
#: a placeholder of app/formats/inline.py, never recased
_PLACEHOLDER = re.compile(r"</?[gx]\d+/?>")
#: a word: letters, with the apostrophes and hyphens inside it
_WORD = re.compile(r"[^\W\d_](?:[\w'\u2019-]*\w)?")


class _Pieces(Protocol):
    def get_piece_size(self) -> int: ...
    def id_to_piece(self, i: int) -> str: ...
    def get_score(self, i: int) -> float: ...


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


def upper(text: str) -> str:
    """`text` in capitals, but for its placeholders."""
    return "".join(part.upper() if is_text else part for is_text, part in _text_parts(text))


class Truecaser:
    """Recases sentences in capitals or in Title Case by a sentencepiece model's pieces."""

    def __init__(self, sp: _Pieces, title: bool = True):
        """`title`: whether Title Case is recased (not for a language that capitalises its
        nouns, German: most of its sentences look so)."""
        self.title = title
        self.scores: dict[str, float] = {}
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if piece.startswith("\u2581") and len(piece) > 1:
                self.scores[piece[1:]] = sp.get_score(i)

    @staticmethod
    def kind(text: str) -> str | None:
        """ "capitals" for a sentence in capitals (two cased letters or more, none in lower
        case), "title" for one in Title Case (two words or more; every word after the first
        of four letters or more capitalised, and one at least), else None."""
        words = [w for is_text, part in _text_parts(text) if is_text for w in _WORD.findall(part)]
        cased = [c for w in words for c in w if c.isupper() or c.islower()]
        if len(cased) >= 2 and not any(c.islower() for c in cased):
            return "capitals"
        rest = [w for w in words[1:] if len(w) > 1 and any(c.isupper() or c.islower() for c in w)]
        if not rest or any(len(w) > 4 and not w[0].isupper() for w in rest):
            return None
        if 2 * sum(w[0].isupper() for w in rest) <= len(rest):
            return None  # (mostly short words in lower case: "How do I get to Park Street?")
        return "title"

    def _best(self, word: str, capitals: bool) -> str:
        forms = [word, word.lower(), word[:1].upper() + word[1:].lower()]
        scored = [(self.scores[f], -n, f) for n, f in enumerate(forms) if f in self.scores]
        if not scored:
            return word.lower() if capitals else word
        return max(scored)[2]

    def recase(self, text: str) -> tuple[str, bool]:
        """`text` to send, and whether its translation goes back in capitals; `text` itself
        where its casing says something of its words."""
        kind = self.kind(text)
        if kind is None or (kind == "title" and not self.title):
            return text, False
        capitals = kind == "capitals"
        first = [True]

        def word(m: re.Match[str]) -> str:
            out = self._best(m.group(), capitals)
            if first:
                first.clear()
                out = out[:1].upper() + out[1:]
            return out

        out = "".join(
            _WORD.sub(word, part) if is_text else part for is_text, part in _text_parts(text)
        )
        return out, capitals
