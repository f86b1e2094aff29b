"""Splitting text into sentences so that the translation keeps the input's layout.

`split_text` returns the leading whitespace and a list of (sentence, separator) pairs with
`prefix + "".join(s + sep for s, sep in pairs) == text`; translating each sentence and joining
them back with the same separators mirrors paragraphs, line breaks and spacing. Sentences break
after . ! ? … (and closing quotes) followed by whitespace, except after common abbreviations,
and at every line break. Nothing is dropped.
"""

from __future__ import annotations

import re

_WHITESPACE = re.compile(r"\s+")
_END = re.compile(r"[.!?…。！？][\"'”’»)\]]*$")
_ABBREVIATIONS = {
    "mr.",
    "mrs.",
    "ms.",
    "dr.",
    "prof.",
    "st.",
    "vs.",
    "etc.",
    "e.g.",
    "i.e.",
    "no.",
    "jr.",
    "sr.",
    "z.b.",
    "bzw.",
    "usw.",
    "ca.",
    "nr.",
    "hr.",
    "fr.",
    "d.h.",
    "u.a.",
    "vgl.",
}


def _ends_sentence(chunk: str) -> bool:
    if not _END.search(chunk):
        return False
    last = chunk.rsplit(None, 1)[-1].lower()
    return last not in _ABBREVIATIONS


def split_text(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Leading whitespace, then (sentence, following whitespace) pairs."""
    stripped = text.lstrip()
    lead = len(text) - len(stripped)
    pairs: list[tuple[str, str]] = []
    pos = lead
    for m in _WHITESPACE.finditer(text, lead):
        chunk = text[pos : m.start()]
        if "\n" in m.group() or m.end() == len(text) or _ends_sentence(chunk):
            pairs.append((chunk, m.group()))
            pos = m.end()
    if pos < len(text):
        pairs.append((text[pos:], ""))
    return text[:lead], pairs


def split_long(words_text: str, count_tokens, max_tokens: int) -> list[str]:
    """Split a sentence whose token count exceeds `max_tokens` into pieces at word boundaries.

    A single word longer than the limit is cut into character runs. Pieces are rejoined with a
    space after translation.
    """
    if count_tokens(words_text) <= max_tokens:
        return [words_text]
    pieces: list[str] = []
    current: list[str] = []
    for word in words_text.split():
        candidate = " ".join([*current, word])
        if current and count_tokens(candidate) > max_tokens:
            pieces.append(" ".join(current))
            current = [word]
        else:
            current.append(word)
        while (
            count_tokens(" ".join(current)) > max_tokens
            and len(current) == 1
            and len(current[0]) > 1
        ):
            w = current[0]
            cut = max(1, len(w) // 2)
            while cut > 1 and count_tokens(w[:cut]) > max_tokens:
                cut //= 2
            pieces.append(w[:cut])
            current = [w[cut:]]
    if current:
        pieces.append(" ".join(current))
    return pieces
