"""URLs, IPv4 addresses and e-mail addresses in text, which every format copies as written
(app/formats/inline.py, app/formats/markdown.py, and plain text in app/translate.py).

An address is found by `_VERBATIM`, then trimmed of the punctuation after it that is not
part of it (a full stop, a closing quote, a bracket it did not open); an e-mail address whose
host has no dot is one only as `_DOTLESS_HOST` says.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

#: URLs and e-mail addresses, kept as written (their end trimmed by `verbatim_spans`)
_VERBATIM = re.compile(
    r"(?:\b[a-z][a-z0-9+-]{1,15}://|\bwww\.)[^\s<>\"]+"
    r"|(?:\bmailto:)?(?<![\w.+-])[\w.+-]{1,64}@[\w-]+(?:\.[\w-]+)*"
    r"|(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?(?![\w.]\w)",  # an IPv4 address
    re.IGNORECASE,
)
_CLOSING = {")": "(", "]": "[", "}": "{"}
#: an e-mail address's host name without a dot (`user@localhost`, `admin@intranet`): three
#: characters or more, from a letter; an address only after a local part of two or more
#: (`a@b`, `amig@s` and `tod@s`, as Spanish writes for both genders, are words)
_DOTLESS_HOST = re.compile(r"[A-Za-z][A-Za-z0-9-]{2,}")
#: what ends a sentence or closes a quote after an address, not part of it
_TRAILING = ".,;:!?'\")]}\u2026\u201c\u201d\u00bb\u00ab\u2019\u2018\u203a\u2039\u201e"


def verbatim_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each URL and e-mail address in `text`, without the punctuation after it
    (a full stop, a comma, a closing bracket that it did not open)."""
    return list(iter_verbatim(text))


def iter_verbatim(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int]]:
    """The spans of `verbatim_spans` that start in text[start:end] and end by `end`, as they are
    found (what is before `start` still decides where a word begins)."""
    for m in _VERBATIM.finditer(text, start, len(text) if end is None else end):
        found = trim_address(text, *m.span())
        if found is not None:
            yield found


def trim_address(text: str, start: int, end: int, extra: str = "") -> tuple[int, int] | None:
    """text[start:end] without the punctuation at its end (a closing bracket only when the
    address did not open it; `extra`: more characters to drop there), or None when what is
    left is no address."""
    trailing = _TRAILING + extra
    while end > start and text[end - 1] in trailing:
        ch = text[end - 1]
        if ch in _CLOSING and text.count(_CLOSING[ch], start, end) >= text.count(ch, start, end):
            break
        end -= 1
    return (start, end) if _is_address(text[start:end]) else None


def _is_address(span: str) -> bool:
    """Whether a match of _VERBATIM, trimmed, is an address: a URL, an IPv4 address, an e-mail
    address whose host has a dot, or one whose host has none under the rule of _DOTLESS_HOST
    (any, after `mailto:`). A `@mention` never matches: an address needs a local part."""
    if "://" in span or span[:4].lower() == "www.":
        return True
    local, at, host = span.rpartition("@")
    if not at:  # an IPv4 address
        return "." in span
    if "." in host:
        return True
    if local[:7].lower() == "mailto:":
        return bool(host)
    return len(local) >= 2 and _DOTLESS_HOST.fullmatch(host) is not None
