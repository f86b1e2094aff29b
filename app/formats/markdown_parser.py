"""markdown-it-py read as a translation needs it: CommonMark plus tables and strikethrough, with
inline rules that take, as written, what must not be translated or escaped (app/formats/markdown.py
uses it).

markdown-it's own `text`, `newline`, `escape`, `autolink`, `link` and `image` rules are
wrapped: an address in text, a template's tag, math, an emoji's shortcode, an attribute list
and a footnote reference become one token of their source (ADDRESS) before markdown-it reads
emphasis, code or escapes in them; the syntax of GFM and other dialects that CommonMark reads
as text at the start of a block or a line (a task list box, a footnote or list definition, an
alert's type, a directive line: DIRECTIVE) a token of its own (PREFIX); a hard line break keeps
the spaces it was written with, a line break the number of the line it ends, and autolinks,
links and images their source (`meta`).
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.helpers import parseLinkLabel

from .addresses import iter_verbatim, trim_address

#: emphasis and strikethrough delimiters: not the end of an address when the block holds one
#: before it (`*see https://example.com/a*` is emphasis around the address, as in GFM)
_DELIMITERS = "*_~"
#: the type of an address's token (`_address_rule`), and of what is copied as an address is
ADDRESS = "verbatim_address"
#: a footnote reference (`[^1]`, GFM and Pandoc): copied as written, as an address is
_FOOTNOTE = re.compile(r"\[\^[^\]\s]{1,100}\]")
#: a template's tags, each on one line, without a `{` inside, of at most 500 characters
#: (each is tried at every `{`: one never reads past the next)
_TAGS = r"\{%(?:[^%{\n]|%(?!\})){0,500}%\}|\{#(?:[^#{\n]|#(?!\})){0,500}#\}"
_EXPRESSION = r"\{\{(?:[^{}\n]|\}(?!\})){0,500}\}\}"
_SHORTCODE = r"\{\{[<%](?:[^{}\n]|\}(?!\})){0,500}\}\}"
#: math between single dollars where the dialects that read it agree that it is math: the
#: opening `$` not followed by a space (Pandoc, markdown-it-texmath, GitHub) nor preceded by a
#: letter or a digit (texmath: a digit, GitHub: either), the closing one not preceded by a space
#: (all) nor followed by a letter or a digit (Pandoc and texmath: a digit, GitHub: either);
#: `$5 and $10` is none, and neither is prose's `$HOME/$USER` or `*$HOME* and *$USER*` (it
#: was copied as written, its words left untranslated). The math may go on over the block's
#: next line, not past a blank one (Pandoc)
_MATH = r"(?<![^\W_])\$(?![\s$])(?:[^$\n\\]|\\.|\n(?![ \t]*\n)){0,1000}?(?<![\s\\])\$(?![^\W_])"
#: an environment variable named in prose (`$HOME`, `$USER`, `${JAVA_HOME}`: upper case, at
#: least two characters): a name, not words (`$USER` came back as `$BENUTZER`)
VARIABLE = re.compile(
    r"(?<![\w$\\])\$(?:[A-Z_][A-Z0-9_]{1,100}|\{[A-Za-z_][A-Za-z0-9_]{0,100}\})(?!\w)"
)
#: what the text of a block holds that is no words, copied as written (markdown-it read
#: emphasis and escapes inside, and the model translated it): a template's tag (Jinja,
#: Liquid, Nunjucks, Hugo's shortcodes: `{{ x }}`, `{% if %}`, `{# note #}`), math (`$x$`:
#: _MATH; `$$x$$`), an environment variable (VARIABLE), an emoji's shortcode (`:smile:`), an
#: attribute list (`{: .class}`, `{ #id }`: kramdown, MkDocs' attr_list, Pandoc)
AS_WRITTEN = re.compile(
    _EXPRESSION
    + "|"
    + _TAGS
    + r"|\$\$(?:[^$]|\$(?!\$)){1,5000}?\$\$|"
    + _MATH
    + "|"
    + VARIABLE.pattern
    + r"|(?<![\w:]):[a-z0-9_+-]{1,50}:(?![\w:])"
    r"|\{:?[ \t]*[#.][\w-][^{}\n]{0,500}\}",
    re.DOTALL,
)
#: what starts a block's text and is its own syntax in GFM, copied as written and kept
#: where it stands: a task list item's box (`- [ ] ...`, `- [x] ...`), a footnote's
#: definition (`[^1]: ...`), an alert's type alone on a block quote's first line
#: (`> [!NOTE]`). markdown-it (CommonMark) reads them as text: their brackets were escaped
#: and the label translated. The spaces after one are its own only before more text (at the
#: end of a line, they are a hard line break's)
TASK = re.compile(r"\[[ xX]\](?=[ \t]|$)(?:[ \t]+(?=[^ \t\n]))?")
FOOTNOTE_DEFINITION = re.compile(r"\[\^[^\]\s]{1,100}\]:(?:[ \t]+(?=[^ \t\n]))?")
#: a definition's marker in a definition list (Pandoc, PHP Markdown Extra, MkDocs' def_list:
#: `Term` then `: Definition` on the next line)
_DEFINITION = re.compile(r":[ \t]+(?=[^ \t\n])")
ALERT = re.compile(r"\[![A-Za-z]+\][ \t]*(?=\n|$)")
#: the type of such a start's token
PREFIX = "verbatim_prefix"
#: the types of Docusaurus' and VitePress' containers, after which a title may follow
_CONTAINERS = "note|tip|info|warning|danger|caution|important|details|success|secondary"
#: a line that opens or closes a block of a Markdown dialect, copied as written on its own
#: line, as each dialect writes it (a prose line that starts with `!!!` or `:::` is text):
#: MkDocs' admonitions and details (`!!! note "Title"`, `???+ tip`: one or more class names,
#: then a title in quotes, if any), the fenced divs of Pandoc, Docusaurus, VitePress and MyST
#: (`:::` alone, `::: warning`, `::: {.note}`, `:::{note}`, `::: tip A title`, `:::note[A
#: title]`: a title only after a container's type), MkDocs' content tabs (`=== "Tab"`), a
#: template's tags, MDX's `import` and `export` statements
_CLASSES = r"[\w-]+(?:[ \t]+[\w-]+)*"
DIRECTIVE = re.compile(
    r"(?:!!![ \t]?" + _CLASSES + r'(?:[ \t]+"[^\n]*")?'
    r"|\?\?\?\+?[ \t]?(?:" + _CLASSES + r'(?:[ \t]+"[^\n]*")?|"[^\n]*")'
    r"|:{3,}[ \t]*(?:\{[^\n]*|[\w-]+[ \t]*:*|(?:" + _CONTAINERS + r")(?:[ \t]|(?=[\[{]))[^\n]*)?"
    r'|===!?\+?[ \t]+"[^\n]*")[ \t]*(?=\n|\Z)'
    # a line of a template's tags alone (`{% if x %}`, Hugo's `{{< hint >}}`)
    r"|(?:(?:" + _TAGS + "|" + _SHORTCODE + r")[ \t]*)+(?=\n|\Z)"
    # MDX's import and export statements (Docusaurus reads .md files as MDX)
    r"|import[ \t]+(?:[\w$*{}, \t]{1,200}?[ \t]+from[ \t]+)?(['\"])[^'\"\n]+\1;?[ \t]*(?=\n|\Z)"
    r"|export[ \t]+(?:const|let|var|function|class|default|async)\b[^\n]*"
)
_STARTS = (
    (PREFIX, DIRECTIVE),  # at the start of any line
    (PREFIX, TASK),
    (PREFIX, FOOTNOTE_DEFINITION),  # at the start of any line: each starts a unit
    (PREFIX, _DEFINITION),  # so does this
    (PREFIX, ALERT),
    (ADDRESS, _FOOTNOTE),
)


def parser() -> MarkdownIt:
    # inline_definitions: a `definition` token for each link reference definition (its title)
    md = MarkdownIt("commonmark", {"inline_definitions": True}).enable(["table", "strikethrough"])
    rules = dict(zip(md.inline.ruler.get_active_rules(), md.inline.ruler.getRules(""), strict=True))
    md.inline.ruler.at("text", _address_rule(rules["text"]))
    md.inline.ruler.at("newline", _newline_rule(rules["newline"]))
    md.inline.ruler.at("escape", _escape_rule(rules["escape"]))
    md.inline.ruler.at("autolink", _autolink_rule(rules["autolink"]))
    md.inline.ruler.at("link", _link_rule(rules["link"]))
    md.inline.ruler.at("image", _image_rule(rules["image"]))
    md.core.ruler.at("inline", _inline_rule)
    return md


def _inline_rule(state) -> None:
    """markdown-it's core `inline` rule, which tells the inline rules whether the text they
    read is a paragraph's (`env["_mt_paragraph"]`): a dialect's syntax at the start of a line
    (PREFIX) is only looked for in one (a table cell or a heading that starts with `!!! ` or
    `[^1]:` is text)."""
    previous = None
    for token in state.tokens:
        if token.type == "inline":
            if token.children is None:
                token.children = []
            state.env["_mt_paragraph"] = previous == "paragraph_open"
            state.md.inline.parse(token.content, state.md, state.env, token.children)
        previous = token.type


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
    (`meta["source"]`) and where in it its alternative text ends (`meta["alt_end"]`, the
    `]`): an image is written back as written, its alternative text and title translated."""

    def rule(state, silent: bool) -> bool:
        pos, count = state.pos, len(state.tokens)
        if not image_rule(state, silent):
            return False
        if not silent:
            alt_end = parseLinkLabel(state, pos + 1, False) - pos
            for tok in state.tokens[count:]:
                if tok.type == "image":
                    tok.meta = {"source": state.src[pos : state.pos], "alt_end": alt_end}
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
        _number_breaks(state, count, silent)
        return True

    return rule


def _escape_rule(escape_rule):
    """markdown-it's `escape` rule, which numbers the hard line break a backslash makes as
    the newline rule's are (_number_breaks)."""

    def rule(state, silent: bool) -> bool:
        count = len(state.tokens)
        if not escape_rule(state, silent):
            return False
        _number_breaks(state, count, silent)
        return True

    return rule


def _number_breaks(state, count: int, silent: bool) -> None:
    """Gives the line break a rule just pushed (after state.tokens[count]) the number of the
    line of the block it ends (`meta["line"]`, from 0), so that it is written back with the
    source's line ending and the next line's indentation or `>` markers."""
    if silent:
        return
    for tok in state.tokens[count:]:
        if tok.type in ("softbreak", "hardbreak"):
            at, lines = state.__dict__.get("_mt_lines", (0, 0))
            if state.pos < at:
                at, lines = 0, 0
            lines += state.src.count("\n", at, state.pos)
            state.__dict__["_mt_lines"] = (state.pos, lines)
            tok.meta = {"line": lines - 1}


def _next_address(state, pos: int, end: int) -> tuple[int, int] | None:
    """The first URL, IPv4 or e-mail address (app/formats/inline.py) that starts in
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
    token (`ADDRESS`, its source as written) and otherwise stops before one. markdown-it
    finds emphasis, code spans and escapes in an address before any later rule could see it
    (`https://example.com/*a*/b` was cut around an emphasis and its words translated);
    addresses inside code spans, autolinks, link destinations and HTML are never looked at
    (those rules consume them from their opening character)."""

    def rule(state, silent: bool) -> bool:
        pos, end = state.pos, state.posMax
        if state.src[pos] in "[!?:{ie=":
            line_start = pos == 0 or state.src[pos - 1] == "\n"
            for kind, pattern in _STARTS:
                if kind == PREFIX and (
                    state.level or not line_start or not state.env.get("_mt_paragraph", True)
                ):
                    continue
                if pattern in (TASK, ALERT) and pos:
                    continue
                m = pattern.match(state.src, pos, end)
                if m:
                    if not silent:
                        token = state.push(kind, "", 0)
                        token.content = m.group()
                        token.meta = {"line": state.src.count("\n", 0, pos)}
                    state.pos = m.end()
                    return True
        if state.src[pos] in "{$:" and (m := AS_WRITTEN.match(state.src, pos, end)):
            if not silent:
                state.push(ADDRESS, "", 0).content = m.group()
            state.pos = m.end()
            return True
        found = _next_address(state, pos, end)
        if found is None:
            return text_rule(state, silent)
        if found[0] == pos:
            if not silent:
                state.push(ADDRESS, "", 0).content = state.src[pos : found[1]]
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
