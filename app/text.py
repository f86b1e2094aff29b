"""Splitting text into sentences so that the translation keeps the input's layout.

`split_text` returns the leading whitespace and a list of (sentence, separator) pairs with
`prefix + "".join(s + sep for s, sep in pairs) == text`; translating each sentence and joining
them back with the same separators mirrors paragraphs, line breaks and spacing. Sentences break
after . ! ? … (and closing quotes) followed by whitespace, and at every line break; a period
does not end a sentence after a common abbreviation, an initial ("J.", "U.S."), before a word
in lower case or a digit ("p. 5"), or after a day before a month ("am 3. Mai"). Nothing is
dropped.
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


_INITIALS = re.compile(r"(?:[^\W\d_]\.)+")  # J.  U.S.  z.B.
_DAY = re.compile(r"\d{1,2}\.")
_MONTH_LIKE = {  # after "3." these make it a date or an ordinal (German writes "am 3. Mai")
    "januar",
    "jänner",
    "februar",
    "märz",
    "april",
    "mai",
    "juni",
    "juli",
    "august",
    "september",
    "oktober",
    "november",
    "dezember",
    "jahrhundert",
}


_NEXT_WORD = re.compile(r"\w*")


def _ends_sentence(chunk: str, text: str, at: int) -> bool:
    """Whether `chunk` (text up to a run of whitespace) ends a sentence; the next word starts
    at text[at]."""
    if not _END.search(chunk):
        return False
    last = chunk.rsplit(None, 1)[-1]
    if not last.endswith("."):  # ! ? … or a closing quote
        return True
    if last.lower() in _ABBREVIATIONS or _INITIALS.fullmatch(last):
        return False
    first = text[at : at + 1]
    if first.islower() or first.isdigit():
        return False
    next_word = _NEXT_WORD.match(text, at).group().lower()
    return not (_DAY.fullmatch(last) and next_word in _MONTH_LIKE)


def split_text(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Leading whitespace, then (sentence, following whitespace) pairs."""
    stripped = text.lstrip()
    lead = len(text) - len(stripped)
    pairs: list[tuple[str, str]] = []
    pos = lead
    for m in _WHITESPACE.finditer(text, lead):
        chunk = text[pos : m.start()]
        if "\n" in m.group() or m.end() == len(text) or _ends_sentence(chunk, text, m.end()):
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
