"""A Markdown block's inline tokens as units (app/formats/markdown.py): the unit of its text,
and those of the text inside its markup (an image's alternative text, a title: Inner), its
stretches of lines (a dialect's lines kept on their own), and its text written back from
their translations (app/formats/markdown_render.py).
"""

from __future__ import annotations

import re

from .inline import Item, Token, Unit, UnitBuilder
from .markdown_parser import ADDRESS, ALERT, DIRECTIVE, PREFIX, TASK
from .markdown_render import (
    RAW,
    Inner,
    LineBreak,
    code_span,
    link_close,
    link_end,
    render_block,
    split_title,
)

_PAIRS = {"em", "strong", "s"}
#: an inline HTML element's start and end tags: a pair, as emphasis is (two atoms, they could
#: come back in the other order: `</a> text <a href="...">`); a void element's is an atom
_HTML_OPEN = re.compile(r"<([A-Za-z][A-Za-z0-9-]*)(?:\s[^>]*[^/>])?\s*>\Z")
_HTML_CLOSE = re.compile(r"</([A-Za-z][A-Za-z0-9-]*)\s*>\Z")
_VOID = {
    *("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"),
    *("track", "wbr"),
}
#: a heading's attributes at its end (`## Title {#anchor .class}`: Pandoc, MkDocs'
#: attr_list, Hugo, kramdown's `{: #anchor}`): copied as written, where they stand
_ATTRIBUTES = re.compile(r"\{:?[ \t]*[#.][^{}\n]*\}\Z")


def block_unit(
    children,
    newline: str = "\n",
    cell: bool = False,
    breaks: dict[int, str] | None = None,
    inner: list[UnitBuilder] | None = None,
) -> UnitBuilder:
    """The unit of a block's inline tokens; `newline`: the line ending markup written over
    several lines (markdown-it reads every line ending as `\\n`) is written with; `cell`: a
    table cell's (markdown-it took the backslash off each `\\|` in it, and a `|` written back
    bare would end the cell: each is escaped again); `breaks`: per line of the block, what
    follows its text up to the next line's (its line ending, that line's indentation or `>`
    markers), for the line break there; `inner`: where the units of the text inside its
    markup (an image's alternative text, a link's title: Inner) are added."""
    breaks = breaks or {}
    inner = [] if inner is None else inner

    def raw(markup: str) -> str:
        if newline != "\n":
            markup = markup.replace("\n", newline)
        return markup.replace("|", "\\|") if cell else markup

    def titled(markup: str, title: str | None) -> tuple[str | Inner, ...]:
        """The parts of what follows a link's text or an image's alternative text, its title
        (`title`, as markdown-it read it) a unit of its own."""
        found = split_title(markup) if title else None
        if found is None:
            return (markup,)
        before, quote, written, after = found
        assert title is not None  # (found only with a title)
        inner.append(UnitBuilder())
        inner[-1].text(title)
        return (before + quote, Inner(len(inner), written, quote), after)

    b = UnitBuilder()
    links: list[tuple[str | Inner, ...]] = []  # the closing markup of each open link
    autolink: str | None = None  # the source of the autolink open
    for tok in children:
        kind = tok.type
        if autolink is not None:
            if kind == "link_close":
                b.atom(raw(autolink), word=True)
                autolink = None
        elif kind == "text":
            b.text(tok.content)
        elif kind in (ADDRESS, PREFIX):  # a PREFIX not at its place: as written
            b.keep(raw(tok.content), RAW)
        elif kind in ("softbreak", "hardbreak"):
            after = breaks.get(tok.meta.get("line", -1))
            if kind == "softbreak":  # a space before it is the break's (markdown-it drops it)
                b.text("\n", None if after is None else LineBreak(after))
            else:  # trailing spaces, or a backslash
                markup = tok.markup or "\\"
                b.atom(markup + newline if after is None else LineBreak(markup + after.lstrip(" ")))
        elif kind == "code_inline":
            b.atom(raw(code_span(tok.content, tok.markup)), word=True)
        elif kind == "html_inline":
            if (m := _HTML_OPEN.match(tok.content)) and m.group(1).lower() not in _VOID:
                b.open("html:" + m.group(1).lower(), raw(tok.content))
            elif m := _HTML_CLOSE.match(tok.content):
                b.close("html:" + m.group(1).lower(), raw(tok.content))
            else:  # a void element, a comment, ...
                b.atom(raw(tok.content))
        elif kind == "image":
            inner.append(block_unit(tok.children or [], newline, cell, None, inner))
            alt = len(inner)
            source, alt_end = tok.meta.get("source") or "", tok.meta.get("alt_end", -1)
            if "\n" not in source and 2 <= alt_end < len(source):
                alt_source, after = source[2:alt_end], source[alt_end:]
            else:  # over several lines: on one
                alt_source = tok.content.replace("\n", " ")
                after = link_end({"href": tok.attrs.get("src"), **tok.attrs})
            alt_part = Inner(alt, raw(alt_source), "")
            b.atom(("![", alt_part, *titled(raw(after), tok.attrs.get("title"))), word=True)
        elif kind == "link_open" and tok.markup == "autolink":
            autolink = tok.meta.get("source") or f"<{tok.attrs.get('href', '')}>"
        elif kind == "link_open":
            links.append(titled(raw(link_close(tok)), tok.attrs.get("title")))
            b.open("link", "[")
        elif kind == "link_close":
            b.close("link", links.pop() if links else "]")
        elif kind.endswith("_open") and kind[:-5] in _PAIRS:
            b.open(kind[:-5], tok.markup)
        elif kind.endswith("_close") and kind[:-6] in _PAIRS:
            b.close(kind[:-6], tok.markup)
        else:  # anything else markdown-it may add: its text, as text
            b.text(tok.content)
    return b


def render_units(
    tokens: list[list[Token]],
    built: list[Unit | None],
    items: list[Item],
    cell: bool,
    heading: bool,
) -> str:
    """A block's text from the tokens of those of its units (`built`: its text's, then those
    of the text inside its markup) that were translated: its text as it was (`items`) where
    it had none to translate."""
    it = iter(tokens)
    mine = [next(it) if unit is not None else None for unit in built]
    if mine[0] is None:
        mine[0] = [
            Token("text", i.text if i.kind == "keep" else str(i.value), i.ref, False)
            if i.kind in ("text", "keep")
            else Token(i.kind, "", i.ref, False)
            for i in items
        ]
    return render_block(mine, cell, heading)


def segments(children: list, count: int) -> list[tuple[int, int, list, int]]:
    """A block's inline tokens cut into stretches of lines, each (its first line in the
    block, the line after its last, its tokens, the characters of a hard line break's markup
    at the end of its last line, left where they are): cut before each footnote definition
    or definition list marker that starts a line other than the first (consecutive
    definitions are one paragraph in CommonMark: they were joined into one line, the second
    no longer a definition), and
    around each directive line (DIRECTIVE), left out; `count`: the block's lines."""
    out: list[tuple[int, int, list, int]] = []
    first = 0
    current: list = []
    for tok in children:
        line = tok.meta.get("line", 0) if tok.type == PREFIX else 0
        directive = tok.type == PREFIX and DIRECTIVE.match(tok.content)
        if directive or (line > 0 and current and current[-1].type == "softbreak"):
            tail = 0
            while current and current[-1].type in ("softbreak", "hardbreak"):
                if current[-1].type == "hardbreak":
                    tail = len(current[-1].markup or "\\")
                current.pop()
            if current:
                out.append((first, line, current, tail))
            first, current = line + 1 if directive else line, []
        elif tok.type in ("softbreak", "hardbreak") and not current and first > 0:
            continue  # the line break after a directive line
        if not directive:
            current.append(tok)
    if current:
        out.append((first, count, current, 0))
    return out


def without_attributes(children: list) -> tuple[list, int]:
    """A heading's inline tokens without the attributes (_ATTRIBUTES) at its end, and their
    length (0: none)."""
    last = children[-1] if children else None
    m = _ATTRIBUTES.search(last.content) if last is not None and last.type == "text" else None
    if m is None:
        return children, 0
    assert last is not None  # (m was found in it)
    kept = last.copy()
    kept.content = last.content[: m.start()].rstrip(" \t")
    return children[:-1] + [kept], len(last.content) - len(kept.content)


def without_prefix(children: list, before: list[str]) -> tuple[list, int]:
    """A block's inline tokens without the PREFIX that starts them where GFM reads it as its
    own syntax, and the length of its text (-1: an alert's, with its line); as they are
    otherwise."""
    if not children or children[0].type != PREFIX:
        return children, 0
    prefix = children[0].content
    if TASK.match(prefix):
        place = before[-2:] == ["list_item_open", "paragraph_open"]
    elif ALERT.match(prefix):
        place = before[-2:] == ["blockquote_open", "paragraph_open"]
        if place and len(children) > 1 and children[1].type == "softbreak":
            return children[2:], -1
        place = place and len(children) == 1
    else:
        place = True
    return (children[1:], len(prefix)) if place else (children, 0)
