"""A unit's translation written as Markdown (app/formats/markdown.py): its text escaped where it
would read as syntax, links written back as written, and the spacing a model gives emphasis
mended.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

from markdown_it.helpers import parseLinkDestination, parseLinkTitle

from .inline import Token
from .markdown_parser import AS_WRITTEN, VARIABLE

#: the ref of an address's item: written back as it stood in the source, not escaped
RAW = object()


class Inner(NamedTuple):
    """Text inside a piece of markup, translated as a unit of its own: an image's alternative
    text, a link's title (a screen reader reads one, a browser shows the other)."""

    # its unit among its block's (0: the block's text); a field over tuple.index, as
    # NamedTuple allows
    index: int  # type: ignore[assignment]
    source: str  # as written, for where it is not translated
    quote: str  # a title's opening delimiter (`"`, `'`, `(`); "" for alternative text


#: a piece of markup: as written, or its parts, some of them text of their own (Inner)
Markup = str | tuple[str | Inner, ...]


def split_title(markup: str) -> tuple[str, str, str, str] | None:
    """(what comes before it, its opening delimiter, as written, what comes after it) of the
    title in what follows a link's text or an image's alternative text (`](destination
    "title")`); None without one."""
    if not markup.startswith("]("):
        return None
    pos, end = 2, len(markup)
    while pos < end and markup[pos] in " \t\r\n":
        pos += 1
    destination = parseLinkDestination(markup, pos, end)
    if not destination.ok:
        return None
    pos = start = destination.pos
    while pos < end and markup[pos] in " \t\r\n":
        pos += 1
    title = parseLinkTitle(markup, pos, end)
    if pos == start or not title.ok:
        return None
    return markup[:pos], markup[pos], markup[pos + 1 : title.pos - 1], markup[title.pos - 1 :]


def title_text(text: str, quote: str, cell: bool = False) -> str:
    """A title's translated text as Markdown between `quote` and its closing delimiter: that
    delimiter, a backslash, a `&` that would start a character reference (and in a table
    cell, a `|`) escaped."""
    text = " ".join(text.split())
    closing = {"(": "()"}.get(quote, quote)
    out = []
    for i, c in enumerate(text):
        if (
            c == "\\"
            or c in closing
            or (cell and c == "|")
            or (c == "&" and _ENTITY.match(text, i))
        ):
            out.append("\\")
        out.append(c)
    return "".join(out)


class LineBreak(str):
    """A line break as the source wrote it: a hard one's spaces or backslash, the line ending
    and the next line's indentation or `>` markers (a soft one's: the ref of its text, written
    where the break was not translated away)."""


_ESCAPED = set("\\`*_[]<")
#: what starts a block at the start of a line (`*`, `_`, `` ` `` are always escaped)
_BLOCK_STARTS = set("#>-+=~")
#: what would end a heading as its closing sequence
_CLOSING_HASHES = re.compile(r"(?:^|[ \t])(#+)[ \t]*\Z")
#: a character reference (`&copy;`, `&#169;`, `&#xA9;`)
_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{0,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
#: an ordered list item's number
_ORDERED = re.compile(r"(\d{1,9})[.)](?=[ \t]|$)")


def code_span(content: str, markup: str) -> str:
    pad = " " if content.startswith("`") or content.endswith("`") else ""
    return f"{markup}{pad}{content}{pad}{markup}"


def _title(title: str) -> str:
    """A link's title as Markdown: in the first of "", '' and () it does not hold, else in ""
    with its quotes escaped (a backslash is escaped too)."""
    title = title.replace("\\", "\\\\")
    for start, end in ('""', "''", "()"):
        if start not in title and end not in title:
            return f"{start}{title}{end}"
    return '"' + title.replace('"', '\\"') + '"'


def _destination(href: str) -> str:
    """A link's destination as Markdown: its parentheses escaped unless they balance
    (markdown-it gives it percent-encoded: no spaces, `<` or `>` in it; `<x)y>` and `x\\)y`
    came back as `x)y`, a link to `x`)."""
    depth = 0
    for c in href:
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            break
    if depth == 0:
        return href
    return href.replace("(", "\\(").replace(")", "\\)")


def link_end(attrs: dict) -> str:
    title = attrs.get("title")
    title_part = f" {_title(title)}" if title else ""
    return f"]({_destination(attrs.get('href', ''))}{title_part})"


def link_close(tok) -> str:
    """What follows a link's text: its source as written, `(destination "title")` or
    `[label]`; `[its text]` for a reference whose label is its text (`[text][]`, `[text]`:
    translated, the text would no longer name the definition); written from what markdown-it
    resolved where the source is not known or spans lines."""
    tail, label = tok.meta.get("tail"), tok.meta.get("label")
    if tail is None or "\n" in tail:
        return link_end(dict(tok.attrs))
    if tail.startswith("(") or (tail.startswith("[") and tail != "[]"):
        return "]" + tail
    return f"][{' '.join(label.split())}]"


def _escape(text: str, cell: bool = False) -> str:
    """Text as Markdown: what would read as syntax escaped (a `~` beside another: GFM's
    strikethrough; the first `$` or `:` of math or an emoji's shortcode, as AS_WRITTEN finds
    them; a `&` that starts a character reference)."""
    out = []
    syntax: set[int] = set()  # each `$` that opens math, the `:` that opens a shortcode
    for m in AS_WRITTEN.finditer(text):
        if text[m.start()] in "$:" and not VARIABLE.fullmatch(m.group()):
            opening = len(m.group()) - len(m.group().lstrip("$")) or 1
            syntax.update(range(m.start(), m.start() + opening))
    for i, c in enumerate(text):
        inside_word = c == "_" and 0 < i < len(text) - 1 and text[i - 1].isalnum()
        entity = c == "&" and _ENTITY.match(text, i)
        tilde = c == "~" and "~" in text[max(i - 1, 0) : i] + text[i + 1 : i + 2]
        if (c in _ESCAPED or (cell and c == "|") or entity or tilde or i in syntax) and not (
            inside_word and text[i + 1].isalnum()
        ):
            out.append("\\")
        out.append(c)
    return "".join(out)


def _line_start(text: str, first: bool) -> str:
    """Text that starts a line of a block, without the indentation that would make it code,
    its first character escaped where it would start a block (a heading, a list item, a
    quote, a fence, a thematic break; a setext underline, but not on the block's `first`
    line: there an `=` is text, or MkDocs' `=== "Tab"`)."""
    text = text.lstrip(" \t")
    if m := _ORDERED.match(text):
        return f"{m.group(1)}\\{text[m.end(1) :]}"
    if text[:1] in _BLOCK_STARTS and not (first and text[:1] == "="):
        return "\\" + text
    return text


def _outside_pairs(pieces: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (kind, Markdown) pieces of a unit with the spaces at the start and end of a pair's
    text moved out of it: CommonMark reads `** bold **` as text (a model often writes
    `<g1> bold </g1>`), its asterisks shown."""
    out: list[tuple[str, str]] = []
    opening: list[tuple[str, str]] = []  # opening markup not followed by text yet
    for kind, piece in pieces:
        if kind == "open":
            opening.append((kind, piece))
            continue
        if kind == "text" and opening:
            core = piece.lstrip(" ")
            if core != piece:
                out.append(("text", piece[: len(piece) - len(core)]))
            if core:  # spaces alone: before the markup still open
                out.extend(opening)
                out.append(("text", core))
                opening = []
            continue
        out.extend(opening)
        opening = []
        if kind == "close":
            spaces = ""
            while out and out[-1][0] == "text" and out[-1][1].endswith(" "):
                core = out[-1][1].rstrip(" ")
                spaces = out.pop()[1][len(core) :] + spaces
                if core:
                    out.append(("text", core))
                    break
            out.append((kind, piece))
            if spaces:
                out.append(("text", spaces))
            continue
        out.append((kind, piece))
    return out + opening


def _asterisks_inside_words(pieces: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pieces with each `_` or `__` pair that touches a letter or digit outside it written
    with `*` or `**`: CommonMark reads no `_` emphasis inside a word (a translation may glue
    it to a word: a compound, a language written without spaces)."""
    out = list(pieces)
    stack: list[int] = []  # the index of each pair open
    for k, (kind, piece) in enumerate(out):
        if kind == "open":
            stack.append(k)
        elif kind == "close" and stack:
            start = stack.pop()
            if piece not in ("_", "__") or out[start][1] != piece:
                continue
            before = next((out[i][1][-1] for i in range(start - 1, -1, -1) if out[i][1]), "")
            after = next((out[i][1][0] for i in range(k + 1, len(out)) if out[i][1]), "")
            if before.isalnum() or after.isalnum():
                stars = "*" * len(piece)
                out[start], out[k] = ("open", stars), ("close", stars)
    return out


def _piece(tok: Token, cell: bool, markup: Callable[[Markup], str]) -> tuple[str, str]:
    """(kind, Markdown) of a token: a soft line break not translated away as the source wrote
    it, other text escaped (its line breaks joined: Markdown joins them anyway)."""
    if tok.kind != "text":
        return tok.kind, markup(tok.ref)
    if tok.ref is RAW:
        return "text", tok.text
    if isinstance(tok.ref, LineBreak) and not tok.translated and tok.text == "\n":
        return "atom", tok.ref
    return "text", _escape(tok.text.replace("\n", " "), cell)


def _render(
    tokens: list[Token],
    cell: bool,
    markup: Callable[[Markup], str],
    inside: bool = False,
) -> str:
    """`markup`: writes a piece of markup; `inside`: the text is inside markup (an image's
    alternative text), not at the start of a line."""
    pieces = [_piece(tok, cell, markup) for tok in tokens]
    out: list[str] = []
    kinds: list[str] = []  # the kind of each piece of `out`
    line_start = True  # at the start of a line: the unit's, or after a hard line break
    pieces = _asterisks_inside_words(_outside_pairs(pieces))
    for k, (kind, piece) in enumerate(pieces):
        if (
            kind == "text"
            and piece.endswith("!")
            and next((p for p in pieces[k + 1 :] if p[1]), None) == ("open", "[")
        ):
            piece = piece[:-1] + "\\!"  # not an image
        if kind != "text":
            i = len(out) - 1
            while isinstance(piece, LineBreak) and i >= 0 and kinds[i] == "text":
                out[i] = out[i].rstrip(" \t")  # a translation's spaces: no hard line break
                i = i - 1 if not out[i] else -1
            out.append(piece)
            kinds.append(kind)
            line_start = (
                isinstance(piece, LineBreak)
                or piece.endswith(("\n", "\r"))
                or (line_start and not piece)
            )
            continue
        if line_start and not inside:
            piece = _line_start(piece, first=not any(out))
        out.append(piece)
        kinds.append(kind)
        line_start = line_start and not piece
    return "".join(out).rstrip(" \t")


def render_block(tokens: Sequence[list[Token] | None], cell: bool, heading: bool) -> str:
    """A block's text, from its units' tokens: its text's, then those of the Inner text in its
    markup (None: not translated)."""

    def inner(part: Inner) -> str:
        own = tokens[part.index]
        if own is None or not any(t.translated for t in own):
            return part.source
        if not part.quote:
            return _render(own, cell, markup, inside=True)
        return title_text("".join(t.text for t in own if t.kind == "text"), part.quote, cell)

    def markup(ref: Markup) -> str:
        if isinstance(ref, tuple):
            return "".join(p if isinstance(p, str) else inner(p) for p in ref)
        return ref

    rendered = _render(tokens[0] or [], cell, markup)
    if heading and (m := _CLOSING_HASHES.search(rendered)):  # not a closing sequence
        rendered = f"{rendered[: m.start(1)]}\\{rendered[m.start(1) :]}"
    if cell and rendered.endswith("\\"):  # GFM reads a `|` after any backslash as text
        rendered += " "
    return rendered
