"""Splitting text into sentences so that the translation keeps the input's layout.

`split_text` returns the leading whitespace and a list of (sentence, separator) pairs with
`prefix + "".join(s + sep for s, sep in pairs) == text`; translating each sentence and joining
them back with the same separators mirrors paragraphs, line breaks and spacing. Sentences break
after . ! ? … (and closing quotes and brackets: ” ’ » “ « ‘ › ) ]) followed by whitespace,
and at every line break (\n, \r, \u2028 and the other line ends) and tab (columns of plain
text, "Name:\tJohn": a model would give the tab back as a space); a closing quote set apart
by a space, as French writes it ("« Viens ! »"), belongs to the sentence before it; a period or an ellipsis
does not end a sentence before a word in lower case or a digit ("p. 5", "I was… um…"), nor a
period after a common abbreviation (but "etc." and "usw." before a capital do), an initial
("J.", "U.S."), a day before a month ("am 3. Mai") or, in German, an ordinal after an article
("im 3. Stock"). A list item's marker at the start of a line ("1. ", "- ", "• ", "a) ")
belongs to the separator before it: it is kept as written, not translated. Nothing is
dropped.
"""

from __future__ import annotations

import re

_WHITESPACE = re.compile(r"\s+")
_CLOSING = "\"'”’»“«‘›)]"  # closing quotes and brackets: English, German, French
_END = re.compile(f"[.!?…。！？][{re.escape(_CLOSING)}]*$")
LINE_ENDS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: closing quotes and brackets that French typography sets apart with a space ("Viens ! »")
_LONE_CLOSING = "»›”’)]"
_WORD = re.compile(r"\S+")
#: a list item's marker at the start of a line, with the space after it (through `list_marker`,
#: also what starts a paragraph of its own in a .txt file: app/formats/plain.py)
LIST_MARKER = re.compile(
    r"(?:[-*+\u2022\u2013\u2014]|\d{1,3}[.)]|[a-z]\)|\((?:\d{1,3}|[a-z]|[ivx]{1,4})\))"
    r"[ \t]+(?=\S)"  # the item's text follows on the line
)
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


#: abbreviations that close a list, and so often a sentence: one ends there before a capital
_LIST_ENDINGS = {"etc.", "usw.", "u.s.w."}
_INITIALS = re.compile(r"(?:[^\W\d_]\.)+")  # J.  U.S.  z.B.
_DAY = re.compile(r"\d{1,2}\.")
_NEXT_WORD = re.compile(r"\w{0,16}")  # enough for a month name; never a whole long word
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


#: German words after which "3." is an ordinal ("im 3. Stock", "der 2. Weltkrieg")
_ORDINAL_BEFORE_DE = {
    "der", "die", "das", "den", "dem", "des", "im", "am", "zum", "zur", "vom", "beim", "ins",
    "ans", "ein", "eine", "einen", "einem", "einer", "jeder", "jede", "jedes", "jeden", "jedem",
    "sein", "seine", "seinem", "seinen", "ihr", "ihre", "ihrem", "ihren", "mein", "meine",
    "meinem", "unser", "unsere",
}  # fmt: skip


def _ends_sentence(last: str, text: str, at: int, before: str = "", language: str = "") -> bool:
    """Whether the word `last` ends a sentence; the next word starts at text[at], the word
    before `last` is `before`; `language`: the text's, where known."""
    if before and last.strip(_LONE_CLOSING) == "":  # "Viens !" + "»": the quote ends it
        last = before + last
    if not _END.search(last):
        return False
    after = _WORD.match(text, at)
    if after and after.group().strip(_LONE_CLOSING) == "":  # the quote is part of it
        return False
    stop = last.rstrip(_CLOSING)[-1:]
    if stop not in (".", "…"):  # ! ? or their CJK forms
        return True
    first = text[at : at + 1]
    if first.islower() or first.isdigit():
        return False
    if stop == "…" or not last.endswith("."):
        return True
    if last.lower() in _LIST_ENDINGS:  # "etc. Then ...": a sentence may end with them
        return first.isupper()
    if last.lower() in _ABBREVIATIONS or _INITIALS.fullmatch(last):
        return False
    if _DAY.fullmatch(last) and language == "de" and before.lower() in _ORDINAL_BEFORE_DE:
        return False
    m = _NEXT_WORD.match(text, at)
    assert m is not None  # it matches the empty string
    next_word = m.group().lower()
    return not (_DAY.fullmatch(last) and next_word in _MONTH_LIKE)


def list_marker(text: str, at: int = 0) -> re.Match | None:
    """A list item's marker at text[at], not a day before a month ("3. Mai ist ...")."""
    marker = LIST_MARKER.match(text, at)
    next_word = _NEXT_WORD.match(text, marker.end()) if marker else None  # always matches
    after = next_word.group().lower() if next_word else ""
    if marker and _DAY.fullmatch(marker.group().rstrip()) and after in _MONTH_LIKE:
        return None
    return marker


def split_text(text: str, language: str = "") -> tuple[str, list[tuple[str, str]]]:
    """Leading whitespace (and a list marker), then (sentence, following whitespace and the
    next line's list marker) pairs; `language`: the text's, where known."""
    stripped = text.lstrip()
    lead = len(text) - len(stripped)
    if marker := list_marker(text, lead):
        lead = marker.end()
    pairs: list[tuple[str, str]] = []
    pos = word = lead  # where the current sentence and its last word start
    before = ""  # the word before the last
    for m in _WHITESPACE.finditer(text, lead):
        if m.start() < pos:  # within a list marker taken into the separator
            continue
        # only the last word decides (linear time: a long text without a stop is not rescanned)
        last_word = text[word : m.start()]
        line_end = any(c in LINE_ENDS for c in m.group())
        if (
            line_end
            or "\t" in m.group()
            or m.end() == len(text)
            or _ends_sentence(last_word, text, m.end(), before, language)
        ):
            sep = m.group()
            if line_end and (marker := list_marker(text, m.end())):
                sep += marker.group()
            pairs.append((text[pos : m.start()], sep))
            pos = m.start() + len(sep)
            before, word = "", pos
            continue
        before, word = last_word, m.end()
    if pos < len(text):
        pairs.append((text[pos:], ""))
    return text[:lead], pairs


def split_long(words_text: str, count_tokens, max_tokens: int) -> list[str]:
    """Split a sentence whose token count exceeds `max_tokens` into pieces at word boundaries.

    A single word longer than the limit is cut into character runs. Pieces are rejoined with a
    space after translation. Each word is counted once and the pieces' counts are taken as the
    sums of their words' (sentencepiece never joins words into one token); each piece is then
    counted once more, and one still over the limit is halved. So the time grows with the
    length of the text, not with its square: this runs on the event loop.
    """
    if count_tokens(words_text) <= max_tokens:
        return [words_text]
    pieces: list[str] = []
    current: list[tuple[str, int]] = []  # (word, tokens)
    total = 0
    for word in words_text.split():
        n = count_tokens(word)
        if current and (total + n > max_tokens or n > max_tokens):
            # end the piece at its last clause break (a word ending in , ; : or a dash) in
            # its second half, rather than wherever the limit falls; the rest begins the next
            cut = _clause_end(current, total) if n <= max_tokens else len(current)
            pieces.append(" ".join(w for w, _ in current[:cut]))
            current = current[cut:]
            total = sum(k for _, k in current)
        if n > max_tokens:
            pieces.extend(_cut_word(word, n, count_tokens, max_tokens))
        else:
            current.append((word, n))
            total += n
    if current:
        pieces.append(" ".join(w for w, _ in current))
    return [p for piece in pieces for p in _within_limit(piece, count_tokens, max_tokens)]


_CLAUSE_END = (",", ";", ":", "\u2013", "\u2014", ")")


def _clause_end(words: list[tuple[str, int]], total: int) -> int:
    """How many of `words` (a piece of `total` tokens) to keep: up to the last one that ends a
    clause, if the piece keeps at least half its tokens so; else all."""
    kept = total
    for i in range(len(words) - 1, 0, -1):
        kept -= words[i][1]
        if kept * 2 < total:
            break
        if words[i - 1][0].endswith(_CLAUSE_END):
            return i
    return len(words)


def _within_limit(piece: str, count_tokens, max_tokens: int) -> list[str]:
    """`piece`, halved at a space (recursively) while a half is over the limit: for counters
    whose count of a text exceeds the sum of its words' counts."""
    words = piece.split(" ")
    if len(words) < 2 or count_tokens(piece) <= max_tokens:
        return [piece]
    half = len(words) // 2
    return [
        *_within_limit(" ".join(words[:half]), count_tokens, max_tokens),
        *_within_limit(" ".join(words[half:]), count_tokens, max_tokens),
    ]


def _cut_word(word: str, tokens: int, count_tokens, max_tokens: int) -> list[str]:
    """Cut a word of `tokens` tokens (more than `max_tokens`) into runs of characters within
    the limit, each run sized from the word's characters per token and counted once (again
    only when it has to shrink)."""
    pieces: list[str] = []
    size = max(1, int(len(word) * max_tokens / tokens))
    at = 0
    while at < len(word):
        cut = min(size, len(word) - at)
        while cut > 1 and count_tokens(word[at : at + cut]) > max_tokens:
            cut = max(1, cut * 3 // 4)
        pieces.append(word[at : at + cut])
        at += cut
    return pieces


def has_content(text: str) -> bool:
    """Whether `text` holds anything to translate: a letter. A sentence without one (zero-width
    or control characters, a number, a date, a price, `---`, `:)`) goes back as it is: a model
    would invent a sentence for it."""
    return any(ch.isalpha() for ch in text)
