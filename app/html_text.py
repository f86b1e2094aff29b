"""Text in HTML as a browser reads it, and translated text written as HTML.

Character references in text are read as a browser reads them (`AT&T` and `&#` are text,
`&copy2023` is "\u00a92023"). Translated text is escaped for HTML: a character the unit wrote
as an entity (`&copy;`, `&nbsp;`, `&#169;`) is written with that same entity when it comes
back (with a `;`, which a legacy `&copy` may lack), `<` is written `&lt;`, and `&` is written
`&amp;` unless a space follows it. Written for XHTML (`xml`), `&` is always `&amp;` (a bare one
makes the file no XML, which an EPUB reader refuses to open), `>` is `&gt;` (`]]>` may not stand
in XML text), and the characters XML 1.0 cannot hold (C0 controls other than tab and line
breaks, U+FFFE, U+FFFF, lone surrogates) are left out.
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


#: characters XML 1.0 does not allow: a model whose tokenizer falls back to bytes can write
#: them, and lxml refused the translation (ValueError: the file failed with a server error)
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def escape(text: str, spellings: dict[str, str], xml: bool = False) -> str:
    """Translated text as HTML (`xml`: as XHTML); see the module docstring."""
    if xml:
        text = NOT_XML.sub("", text)
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
        elif ch == ">" and xml:
            out.append("&gt;")
        elif ch == "&":
            bare = not xml and i + 1 < n and text[i + 1] in " \t\n"
            out.append("&" if bare else "&amp;")
        else:
            out.append(ch)
        i += 1
    return "".join(out)
