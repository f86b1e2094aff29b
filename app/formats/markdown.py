"""Markdown files, read with markdown-it-py (CommonMark, plus tables and strikethrough).

Only the text of inline content is translated: paragraphs, headings, list items, block quotes,
table cells, and the text of an HTML block that is not inside a list or a quote and holds no
`{` (a template's tags, MDX's expressions), as app/html_format.py translates HTML (a README's
`<p align="center">` tagline, a `<summary>`). Everything else is copied as written, line by
line: a YAML or TOML front matter at the start of the file, code blocks (fenced and indented),
HTML blocks inside lists and quotes, thematic breaks, link reference definitions, blank lines,
and each block's own syntax (`#`, `>`, list markers, table pipes, indentation).

Inside a block, emphasis, strong, strikethrough, links and inline HTML elements are pairs, and
inline code, images, autolinks, other inline HTML (a void element, a comment), hard line
breaks, and URLs and e-mail addresses in text are atoms (app/formats/inline.py: translated
whole with placeholders when the model keeps them, else run by run); so are templates' tags
(`{{ x }}`, `{% if %}`), math (`$x$`, `$$x$$`), emoji shortcodes (`:smile:`), attribute lists
(`{: .class}`) and footnote references (`[^1]`), copied as written. A hard line break keeps its
spelling (trailing spaces or a backslash) and the line ending of its block's first line. An
address is found in the source before markdown-it reads emphasis, code or escapes in it, and
written back byte for byte (`https://example.com/*a*/_b_` is no emphasis). A link's destination
and title (`](destination "title")`, `][label]`) and an image are written back as written; a
reference link whose label is its text (`[text][]`, `[text]`) gets that label written out
(`[translated][text]`).

A block is found in its source lines by its text; a block written over several lines comes back
on its first line (Markdown joins the lines of a paragraph anyway); one whose text cannot be
found in its lines is left untranslated. The syntax of GFM and other dialects that CommonMark
reads as text stays as written, where it stands: a task list item's box (`- [ ]`), a footnote's
definition (`[^1]:`), a definition list's `: `, an alert's type (`> [!NOTE]`), a heading's
attributes at its end (`## Title {#anchor}`). A line that opens or closes an admonition or a
fenced div (`!!! note "Title"`, `::: tip`, `:::`) or a content tab (`=== "Tab"`), a line of
template tags alone (`{% if x %}`), an MDX `import` or `export` line, a footnote's definition,
a definition list's term and definitions, and an alert's type stay on their own lines, the text
after them on the next.

Characters of Markdown syntax in translated text are escaped with a backslash (a `&` that
would start a character reference too, `#`s that would close a heading, `~~`, and the first
`$` or `:` of what would read as math or an emoji's shortcode, a `!` before a link): in a table
cell, a `|` too, in text, code and links alike (GFM ends a cell at any bare one); at the start
of a line, what would start a block (`#`, `>`, `-`, `+`, `=`, `~`, `1.`, `1)`), and the
indentation that would make code is dropped. The spaces a translation puts at the start or
end of emphasis or a link's text are moved out of it (`** bold **` is no emphasis), and
`_` emphasis that ends up inside a word is written with `*`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from markdown_it import MarkdownIt
from markdown_it.helpers import parseLinkLabel

from ..html_format import HtmlDocument, HtmlError
from . import Limits, Translate
from .addresses import iter_verbatim, trim_address
from .inline import Token, Unit, UnitBuilder, translate_units
from .plain import decode

_PAIRS = {"em", "strong", "s"}
#: an inline HTML element's start and end tags: a pair, as emphasis is (two atoms, they could
#: come back in the other order: `</a> text <a href="...">`); a void element's is an atom
_HTML_OPEN = re.compile(r"<([A-Za-z][A-Za-z0-9-]*)(?:\s[^>]*[^/>])?\s*>\Z")
_HTML_CLOSE = re.compile(r"</([A-Za-z][A-Za-z0-9-]*)\s*>\Z")
_VOID = {
    *("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"),
    *("track", "wbr"),
}
#: a YAML (`---`) or TOML (`+++`) front matter block at the very start of the file (Jekyll,
#: Hugo, MkDocs, Pandoc): metadata, copied as written. CommonMark reads `---` as a thematic
#: break and the lines up to the closing `---` as a setext heading, which was translated
#: and its lines joined into one (`title: ...` and `author: ...` gone). As in Pandoc, the
#: line after the opening one is not blank (a thematic break before a paragraph is no
#: front matter)
_FRONT_MATTER = re.compile(
    r"\A(---|\+\+\+)[ \t]*(?:\r\n|\n|\r)(?![ \t]*[\r\n])(?:[^\r\n]*(?:\r\n|\n|\r))*?"
    r"(?:\1|\.\.\.)[ \t]*(?:\r\n|\n|\r|\Z)"
)
_ESCAPED = set("\\`*_[]<")
#: what starts a block at the start of a line (`*`, `_`, `` ` `` are always escaped)
_BLOCK_STARTS = set("#>-+=~")
#: what would end a heading as its closing sequence
_CLOSING_HASHES = re.compile(r"(?:^|[ \t])(#+)[ \t]*\Z")
#: a character reference (`&copy;`, `&#169;`, `&#xA9;`)
_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{0,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
#: an ordered list item's number
_ORDERED = re.compile(r"(\d{1,9})[.)](?=[ \t]|$)")


#: emphasis and strikethrough delimiters: not the end of an address when the block holds one
#: before it (`*see https://example.com/a*` is emphasis around the address, as in GFM)
_DELIMITERS = "*_~"
#: the type of an address's token (`_address_rule`)
_ADDRESS = "verbatim_address"
#: the ref of an address's item: written back as it stood in the source, not escaped
_RAW = object()
#: a footnote reference (`[^1]`, GFM and Pandoc): copied as written, as an address is
_FOOTNOTE = re.compile(r"\[\^[^\]\s]{1,100}\]")
#: what the text of a block holds that is no words, copied as written (markdown-it read
#: emphasis and escapes inside, and the model translated it): a template's tag (Jinja,
#: Liquid, Nunjucks, Hugo's shortcodes: `{{ x }}`, `{% if %}`, `{# note #}`), math between
#: dollars as GitHub and Pandoc read it (`$x$`: no space inside either dollar, no digit after
#: the second: `$5 and $10` is none; `$$x$$`), an emoji's shortcode (`:smile:`), an
#: attribute list (`{: .class}`, `{ #id }`: kramdown, MkDocs' attr_list, Pandoc)
#: a template's tags, each on one line, without a `{` inside, of at most 500 characters
#: (each is tried at every `{`: one never reads past the next)
_TAGS = r"\{%(?:[^%{\n]|%(?!\})){0,500}%\}|\{#(?:[^#{\n]|#(?!\})){0,500}#\}"
_EXPRESSION = r"\{\{(?:[^{}\n]|\}(?!\})){0,500}\}\}"
_SHORTCODE = r"\{\{[<%](?:[^{}\n]|\}(?!\})){0,500}\}\}"
_AS_WRITTEN = re.compile(
    _EXPRESSION + "|" + _TAGS + r"|\$\$(?:[^$]|\$(?!\$)){1,5000}?\$\$"
    r"|\$(?![\s$])(?:[^$\n\\]|\\.|\n(?![ \t]*\n)){0,1000}?(?<![\s\\])\$(?!\d)"
    r"|(?<![\w:]):[a-z0-9_+-]{1,50}:(?![\w:])"
    r"|\{:?[ \t]*[#.][\w-][^{}\n]{0,500}\}",
    re.DOTALL,
)
#: what starts a block's text and is its own syntax in GFM, copied as written and kept
#: where it stands: a task list item's box (`- [ ] ...`, `- [x] ...`), a footnote's
#: definition (`[^1]: ...`), an alert's type alone on a block quote's first line
#: (`> [!NOTE]`). markdown-it (CommonMark) reads them as text: their brackets were escaped
#: and the label translated. The spaces after one are its own only before more text (at the
#: end of a line, they are a hard line break's)
_TASK = re.compile(r"\[[ xX]\](?=[ \t]|$)(?:[ \t]+(?=[^ \t\n]))?")
_FOOTNOTE_DEFINITION = re.compile(r"\[\^[^\]\s]{1,100}\]:(?:[ \t]+(?=[^ \t\n]))?")
#: a definition's marker in a definition list (Pandoc, PHP Markdown Extra, MkDocs' def_list:
#: `Term` then `: Definition` on the next line)
_DEFINITION = re.compile(r":[ \t]+(?=[^ \t\n])")
_ALERT = re.compile(r"\[![A-Za-z]+\][ \t]*(?=\n|$)")
#: a heading's attributes at its end (`## Title {#anchor .class}`: Pandoc, MkDocs'
#: attr_list, Hugo, kramdown's `{: #anchor}`): copied as written, where they stand
_ATTRIBUTES = re.compile(r"\{:?[ \t]*[#.][^{}\n]*\}\Z")
#: the type of such a start's token
_PREFIX = "verbatim_prefix"
#: a line that opens or closes a block of a Markdown dialect, copied as written on its own
#: line: MkDocs' admonitions and details (`!!! note "Title"`, `???+ tip`), the fenced divs of
#: Pandoc, Docusaurus, VitePress and MyST (`::: warning`, `:::`), MkDocs' content tabs
#: (`=== "Tab"`), a template's tags, MDX's
#: `import` and `export` statements
_DIRECTIVE = re.compile(
    r"(?:(?:!!!|\?\?\?\+?)[ \t]+\w|:::|===\+?[ \t]+\")[^\n]*"
    # a line of a template's tags alone (`{% if x %}`, Hugo's `{{< hint >}}`)
    r"|(?:(?:" + _TAGS + "|" + _SHORTCODE + r")[ \t]*)+(?=\n|\Z)"
    # MDX's import and export statements (Docusaurus reads .md files as MDX)
    r"|import[ \t]+(?:[\w$*{}, \t]{1,200}?[ \t]+from[ \t]+)?(['\"])[^'\"\n]+\1;?[ \t]*(?=\n|\Z)"
    r"|export[ \t]+(?:const|let|var|function|class|default|async)\b[^\n]*"
)
_STARTS = (
    (_PREFIX, _DIRECTIVE),  # at the start of any line
    (_PREFIX, _TASK),
    (_PREFIX, _FOOTNOTE_DEFINITION),  # at the start of any line: each starts a unit
    (_PREFIX, _DEFINITION),  # so does this
    (_PREFIX, _ALERT),
    (_ADDRESS, _FOOTNOTE),
)


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    rules = dict(zip(md.inline.ruler.get_active_rules(), md.inline.ruler.getRules(""), strict=True))
    md.inline.ruler.at("text", _address_rule(rules["text"]))
    md.inline.ruler.at("newline", _newline_rule(rules["newline"]))
    md.inline.ruler.at("autolink", _autolink_rule(rules["autolink"]))
    md.inline.ruler.at("link", _link_rule(rules["link"]))
    md.inline.ruler.at("image", _image_rule(rules["image"]))
    return md


def _link_rule(link_rule):
    """markdown-it's `link` rule, which keeps on the link_open token (`meta`) the link's
    source after its text (`tail`: `(destination "title")`, `[label]`, `[]` or nothing) and
    its text as written (`label`), so that its destination is written back as written: the
    one markdown-it resolves is percent-encoded (`Äpfel` as `%C3%84pfel`), its host in
    punycode."""

    def rule(state, silent: bool) -> bool:
        pos, count = state.pos, len(state.tokens)
        if not link_rule(state, silent):
            return False
        if not silent:
            label_end = parseLinkLabel(state, pos, True)
            if label_end > pos:
                meta = {"tail": state.src[label_end + 1 : state.pos]}
                meta["label"] = state.src[pos + 1 : label_end]
                for tok in state.tokens[count:]:
                    if tok.type == "link_open":
                        tok.meta = meta
                        break
        return True

    return rule


def _image_rule(image_rule):
    """markdown-it's `image` rule, which keeps the image's source on its token
    (`meta["source"]`): an image is an atom, written back as written."""

    def rule(state, silent: bool) -> bool:
        pos, count = state.pos, len(state.tokens)
        if not image_rule(state, silent):
            return False
        for tok in state.tokens[count:]:
            if tok.type == "image":
                tok.meta = {"source": state.src[pos : state.pos]}
        return True

    return rule


def _autolink_rule(autolink_rule):
    """markdown-it's `autolink` rule, which keeps the autolink's source on its link_open
    token (`meta["source"]`): it is written back as written. The text markdown-it gives it is
    decoded for display (`%20` a space, punycode Unicode): `<https://example.com/a%20b>` came
    back as `<https://example.com/a b>`, no autolink."""

    def rule(state, silent: bool) -> bool:
        pos, count = state.pos, len(state.tokens)
        if not autolink_rule(state, silent):
            return False
        for tok in state.tokens[count:]:  # the pending text, then link_open
            if tok.type == "link_open":
                tok.meta = {"source": state.src[pos : state.pos]}
        return True

    return rule


def _newline_rule(newline_rule):
    """markdown-it's `newline` rule, which gives a hard line break written as spaces at the end
    of the line those spaces as its markup (markdown-it gives both spellings none, and the
    break came back as a backslash)."""

    def rule(state, silent: bool) -> bool:
        pos, count = state.pos, len(state.tokens)
        if not newline_rule(state, silent):
            return False
        if not silent and len(state.tokens) > count and state.tokens[-1].type == "hardbreak":
            start = pos
            while start > 0 and state.src[start - 1] == " ":
                start -= 1
            state.tokens[-1].markup = state.src[start:pos]
        return True

    return rule


def _next_address(state, pos: int, end: int) -> tuple[int, int] | None:
    """The first URL, IPv4 or e-mail address (app/formats/addresses.py) that starts in
    state.src[pos:end], as written in the source: up to a `]` it did not open (the end of a
    link's text), without an emphasis delimiter at its end that the block holds before it.
    Remembered per `end` (a link's text is parsed with its own), so that a long paragraph is
    searched once, not once per piece of it."""
    src = state.src
    memo = state.__dict__.setdefault("_mt_addresses", {})
    known = memo.get(end)
    if known is not None and known[0] <= pos and (known[1] is None or known[1][0] >= pos):
        return known[1]
    first = memo.setdefault("first", {c: src.find(c) for c in _DELIMITERS})
    found = None
    for start, stop in iter_verbatim(src, pos, end):
        depth = 0
        for i in range(start, stop):  # cut at a "]" the address did not open
            depth += {"[": 1, "]": -1}.get(src[i], 0)
            if depth < 0:
                stop = i
                break
        extra = "".join(c for c in _DELIMITERS if 0 <= first[c] < start)
        found = trim_address(src, start, stop, extra)
        if found is not None:
            break
    memo[end] = (pos, found)
    return found


def _address_rule(text_rule):
    """markdown-it's `text` rule, which takes an address that starts where it stands as one
    token (`_ADDRESS`, its source as written) and otherwise stops before one. markdown-it
    finds emphasis, code spans and escapes in an address before any later rule could see it
    (`https://example.com/*a*/b` was cut around an emphasis and its words translated);
    addresses inside code spans, autolinks, link destinations and HTML are never looked at
    (those rules consume them from their opening character)."""

    def rule(state, silent: bool) -> bool:
        pos, end = state.pos, state.posMax
        if state.src[pos] in "[!?:{ie=":
            line_start = pos == 0 or state.src[pos - 1] == "\n"
            for kind, pattern in _STARTS:
                if kind == _PREFIX and (state.level or not line_start):
                    continue
                if pattern in (_TASK, _ALERT) and pos:
                    continue
                m = pattern.match(state.src, pos, end)
                if m:
                    if not silent:
                        token = state.push(kind, "", 0)
                        token.content = m.group()
                        token.meta = {"line": state.src.count("\n", 0, pos)}
                    state.pos = m.end()
                    return True
        if state.src[pos] in "{$:" and (m := _AS_WRITTEN.match(state.src, pos, end)):
            if not silent:
                state.push(_ADDRESS, "", 0).content = m.group()
            state.pos = m.end()
            return True
        found = _next_address(state, pos, end)
        if found is None:
            return text_rule(state, silent)
        if found[0] == pos:
            if not silent:
                state.push(_ADDRESS, "", 0).content = state.src[pos : found[1]]
            state.pos = found[1]
            return True
        # the text before the address (markdown-it 4's rule runs to the next terminator
        # character whatever posMax says: it is cut here)
        state.posMax = found[0]
        try:
            if not text_rule(state, True):
                return False
        finally:
            state.posMax = end
        stop = min(state.pos, found[0])
        if not silent:
            append = getattr(state, "append_pending", None)  # markdown-it 4
            if append is not None:
                append(state.src[pos:stop])
            else:
                state.pending += state.src[pos:stop]
        state.pos = stop
        return True

    return rule


def _code_span(content: str, markup: str) -> str:
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


def _link_end(attrs: dict) -> str:
    title = attrs.get("title")
    title_part = f" {_title(title)}" if title else ""
    return f"]({_destination(attrs.get('href', ''))}{title_part})"


def _link_close(tok) -> str:
    """What follows a link's text: its source as written, `(destination "title")` or
    `[label]`; `[its text]` for a reference whose label is its text (`[text][]`, `[text]`:
    translated, the text would no longer name the definition); written from what markdown-it
    resolved where the source is not known or spans lines."""
    tail, label = tok.meta.get("tail"), tok.meta.get("label")
    if tail is None or "\n" in tail:
        return _link_end(dict(tok.attrs))
    if tail.startswith("(") or (tail.startswith("[") and tail != "[]"):
        return "]" + tail
    return f"][{' '.join(label.split())}]"


def _unit(children, newline: str = "\n", cell: bool = False) -> UnitBuilder:
    """The unit of a block's inline tokens; `newline`: the line ending a hard line break, and
    markup written over several lines (markdown-it reads every line ending as `\\n`), are
    written with; `cell`: a table cell's (markdown-it took the backslash off each `\\|` in
    it, and a `|` written back bare would end the cell: each is escaped again)."""

    def raw(markup: str) -> str:
        if newline != "\n":
            markup = markup.replace("\n", newline)
        return markup.replace("|", "\\|") if cell else markup

    b = UnitBuilder()
    links: list[str] = []  # the closing markup of each open link
    autolink: str | None = None  # the source of the autolink open
    for tok in children:
        kind = tok.type
        if autolink is not None:
            if kind == "link_close":
                b.atom(raw(autolink))
                autolink = None
        elif kind == "text":
            b.text(tok.content)
        elif kind in (_ADDRESS, _PREFIX):  # a _PREFIX not at its place: as written
            b.keep(raw(tok.content), _RAW)
        elif kind == "softbreak":
            b.text("\n")
        elif kind == "hardbreak":
            b.atom((tok.markup or "\\") + newline)  # trailing spaces, or a backslash
        elif kind == "code_inline":
            b.atom(raw(_code_span(tok.content, tok.markup)))
        elif kind == "html_inline":
            if (m := _HTML_OPEN.match(tok.content)) and m.group(1).lower() not in _VOID:
                b.open("html:" + m.group(1).lower(), raw(tok.content))
            elif m := _HTML_CLOSE.match(tok.content):
                b.close("html:" + m.group(1).lower(), raw(tok.content))
            else:  # a void element, a comment, ...
                b.atom(raw(tok.content))
        elif kind == "image":
            source = tok.meta.get("source")
            if not source or "\n" in source:
                source = f"![{tok.content}" + _link_end({"href": tok.attrs.get("src"), **tok.attrs})
            b.atom(raw(source))
        elif kind == "link_open" and tok.markup == "autolink":
            autolink = tok.meta.get("source") or f"<{tok.attrs.get('href', '')}>"
        elif kind == "link_open":
            links.append(raw(_link_close(tok)))
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


def _segments(children: list, count: int) -> list[tuple[int, int, list, int]]:
    """A block's inline tokens cut into stretches of lines, each (its first line in the
    block, the line after its last, its tokens, the characters of a hard line break's markup
    at the end of its last line, left where they are): cut before each footnote definition
    or definition list marker that starts a line other than the first (consecutive
    definitions are one paragraph in CommonMark: they were joined into one line, the second
    no longer a definition), and
    around each directive line (_DIRECTIVE), left out; `count`: the block's lines."""
    out, first, current = [], 0, []
    for tok in children:
        line = tok.meta.get("line", 0) if tok.type == _PREFIX else 0
        directive = tok.type == _PREFIX and _DIRECTIVE.match(tok.content)
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


def _without_attributes(children: list) -> tuple[list, int]:
    """A heading's inline tokens without the attributes (_ATTRIBUTES) at its end, and their
    length (0: none)."""
    last = children[-1] if children else None
    m = _ATTRIBUTES.search(last.content) if last is not None and last.type == "text" else None
    if m is None:
        return children, 0
    kept = last.copy()
    kept.content = last.content[: m.start()].rstrip(" \t")
    return children[:-1] + [kept], len(last.content) - len(kept.content)


def _without_prefix(children: list, before: list[str]) -> tuple[list, int]:
    """A block's inline tokens without the _PREFIX that starts them where GFM reads it as its
    own syntax, and the length of its text (-1: an alert's, with its line); as they are
    otherwise."""
    if not children or children[0].type != _PREFIX:
        return children, 0
    prefix = children[0].content
    if _TASK.match(prefix):
        place = before[-2:] == ["list_item_open", "paragraph_open"]
    elif _ALERT.match(prefix):
        place = before[-2:] == ["blockquote_open", "paragraph_open"]
        if place and len(children) > 1 and children[1].type == "softbreak":
            return children[2:], -1
        place = place and len(children) == 1
    else:
        place = True
    return (children[1:], len(prefix)) if place else (children, 0)


def _escape(text: str, cell: bool = False) -> str:
    """Text as Markdown: what would read as syntax escaped (a `~` beside another: GFM's
    strikethrough; the first `$` or `:` of math or an emoji's shortcode, as _AS_WRITTEN finds
    them; a `&` that starts a character reference)."""
    out = []
    syntax = set()  # each `$` that opens math, the `:` that opens a shortcode
    for m in _AS_WRITTEN.finditer(text):
        if text[m.start()] in "$:":
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


def _render(tokens: list[Token], cell: bool = False) -> str:
    pieces = [
        (
            tok.kind,
            tok.ref
            if tok.kind != "text"
            else tok.text
            if tok.ref is _RAW
            else _escape(tok.text.replace("\n", " "), cell),
        )
        for tok in tokens
    ]
    out: list[str] = []
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
            out.append(piece)
            line_start = piece.endswith(("\n", "\r")) or (line_start and not piece)
            continue
        if line_start:
            piece = _line_start(piece, first=not any(out))
        out.append(piece)
        line_start = line_start and not piece
    return "".join(out).rstrip(" \t")


def _render_block(tokens: list[list[Token]], cell: bool, heading: bool) -> str:
    """A block's text, from its one unit's tokens."""
    rendered = _render(tokens[0], cell)
    if heading and (m := _CLOSING_HASHES.search(rendered)):  # not a closing sequence
        rendered = f"{rendered[: m.start(1)]}\\{rendered[m.start(1) :]}"
    return rendered


def _line_starts(text: str) -> list[int]:
    """Start offset of each line (line endings \\r\\n, \\r or \\n, as markdown-it counts them)."""
    starts, i, n = [0], 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\r" and i + 1 < n and text[i + 1] == "\n":
            i += 1
        if ch in "\r\n":
            starts.append(i + 1)
        i += 1
    return starts


def translate_markdown(data: bytes, translate: Translate, limits: Limits) -> bytes:
    text, codec = decode(data, ".md")
    starts = _line_starts(text)
    ends = [s for s in starts[1:]] + [len(text)]

    def line(k: int) -> tuple[int, str]:  # (start offset, text without its line ending)
        if k >= len(starts):
            return len(text), ""
        return starts[k], text[starts[k] : ends[k]].rstrip("\r\n")

    # (start, end) in `text` of each piece's source, its units' count, and what writes it
    # from their tokens: a block's text (one unit) or an HTML block (its units)
    pieces: list[tuple[int, int, int, Callable[[list[list[Token]]], str]]] = []
    units: list[Unit] = []
    cursor: dict[int, int] = {}  # per line, where the next block on it may start (tables)

    def located(first_line: int, lines: list[str]) -> tuple[int, int] | None:
        """(start, end) in `text` of a block's `lines` of content from `first_line`."""
        start_off, first_text = line(first_line)
        col = first_text.find(lines[0], cursor.get(first_line, 0))
        last_index = first_line + len(lines) - 1
        last_off, last_text = line(last_index)
        from_col = col if len(lines) == 1 else 0
        end_col = last_text.find(lines[-1], from_col) if col >= 0 else -1
        if col < 0 or end_col < 0:
            return None
        cursor[last_index] = end_col + len(lines[-1])
        return start_off + col, last_off + end_col + len(lines[-1])

    front = _FRONT_MATTER.match(text)
    # the front matter's lines are parsed as blank lines (the others keep their numbers)
    parsed = re.sub(r"[^\r\n]", "", front.group()) + text[front.end() :] if front else text
    blocks = _parser().parse(parsed)
    for index, block in enumerate(blocks):
        before = [b.type for b in blocks[max(index - 3, 0) : index]]
        cell = before[-1:] in (["th_open"], ["td_open"])
        if block.type == "html_block" and block.level == 0 and block.map:
            html_start, html_end = starts[block.map[0]], ends[block.map[1] - 1]
            if "{" in text[html_start:html_end]:
                continue  # a template's tags or MDX's expressions: no words to translate
            try:
                doc = HtmlDocument(text[html_start:html_end])
            except HtmlError:
                continue  # left as it is
            if doc.units:
                pieces.append((html_start, html_end, len(doc.units), doc.render_tokens))
                units.extend(doc.units)
            continue
        if block.type != "inline" or not block.map or not block.children:
            continue
        # a table cell's `\|` is a bare `|` in its content
        content = block.content.replace("|", "\\|") if cell else block.content
        content_lines = content.split("\n")
        for first, stop, segment, tail in _segments(block.children, len(content_lines)):
            lines = content_lines[first:stop]
            lines[-1] = lines[-1][: len(lines[-1]) - tail]
            lines[0] = lines[0].lstrip(" \t")  # markdown-it skips a line's indentation
            children, skip = _without_prefix(segment, before if first == 0 else ["", ""])
            first_line = block.map[0] + first
            if skip < 0:  # an alert's line: the text starts on the next line
                lines, first_line, skip = lines[1:], first_line + 1, 0
            span = located(first_line, lines)
            if span is None:
                continue  # not found as written: left as it is
            if before[-1:] == ["heading_open"]:
                children, cut = _without_attributes(children)
                span = (span[0], span[1] - cut)
            # a hard line break keeps the line ending of the block's first line (a CRLF file's)
            newline = text[starts[first_line] + len(line(first_line)[1]) : ends[first_line]]
            unit = _unit(children, newline or "\n", cell).build()
            if unit is not None:
                heading = before[-1:] == ["heading_open"]
                render = functools.partial(_render_block, cell=cell, heading=heading)
                pieces.append((span[0] + skip, span[1], 1, render))
                units.append(unit)
    translated = translate_units(units, translate)
    out, at, done = [], 0, 0
    for start, end, count, render in pieces:
        out.append(text[at:start])
        out.append(render(translated[done : done + count]))
        at, done = end, done + count
    out.append(text[at:])
    return codec.encode_text("".join(out))
