"""Text in HTML as a browser reads it, and translated text written as HTML.

Character references in text are read as a browser reads them (`AT&T` and `&#` are text,
`&copy2023` is "\u00a92023"). Translated text is escaped for HTML: a character the unit wrote
as an entity (`&copy;`, `&nbsp;`, `&#169;`) is written with that same entity when it comes
back (with a `;`, which a legacy `&copy` may lack), `<` is written `&lt;`, and `&` is written
`&amp;` unless a space follows it.
"""

from __future__ import annotations

import html
import html.entities
import re

#: a character reference as html.unescape finds one (HTML's rules for text): numeric, or a
#: name, with or without ";" (legacy names such as "&copy" may end without one)
_CHARREF = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")


def references(text: str):
    """(start, end, characters) of each character reference in `text`, as a browser reads it:
    a known name (the longest a legacy name without ";" allows: `&copy2023` is "\u00a9"
    and "2023") or a number; `&T` in `AT&T` is no reference."""
    for m in _CHARREF.finditer(text):
        name = m.group(1)
        if name[0] == "#" or name in html.entities.html5:
            yield m.start(), m.end(), html.unescape(m.group())
            continue
        for end in range(len(name) - 1, 1, -1):  # as html.unescape: a legacy name's prefix
            if name[:end] in html.entities.html5:
                yield m.start(), m.start() + 1 + end, html.entities.html5[name[:end]]
                break


def escape(text: str, spellings: dict[str, str]) -> str:
    """Translated text as HTML; see the module docstring."""
    # the spellings by their first character, longest first: a unit may hold a thousand
    # different entities, and trying each at every character took time in their product
    by_first: dict[str, list[str]] = {}
    for spelling in sorted(spellings, key=len, reverse=True):
        by_first.setdefault(spelling[0], []).append(spelling)
    out = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        key = next((k for k in by_first.get(ch, ()) if text.startswith(k, i)), None)
        if key is not None:
            out.append(spellings[key])
            i += len(key)
            continue
        if ch == "<":
            out.append("&lt;")
        elif ch == "&":
            out.append("&" if i + 1 < n and text[i + 1] in " \t\n" else "&amp;")
        else:
            out.append(ch)
        i += 1
    return "".join(out)
