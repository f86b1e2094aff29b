"""Markdown files, read with markdown-it-py (CommonMark, plus tables and strikethrough, and the
rules of app/formats/markdown_parser.py), each block's inline tokens made units by
app/formats/markdown_units.py, the translation written back by app/formats/markdown_render.py.

Only the text of inline content is translated: paragraphs, headings, list items, block quotes,
table cells, and the text of an HTML block that holds no `{` (a template's tags, MDX's
expressions), as app/html_format.py translates HTML (a README's `<p align="center">` tagline,
a `<summary>`), its `lang` attributes (a paragraph `source: auto` kept as it is labelled
with its own language: app/html_lang.py) and the attributes that are text for people (`alt`,
`title`, ...: app/html_attrs.py) too; inside a list or a quote, each of its lines keeps
its indentation or `>` markers. Everything else is copied as written, line by line: a YAML or
TOML front matter at the start of the file (but for the fields naming its language, set to
the target where its text was translated: _LANG_FIELD), code blocks (fenced and indented),
thematic breaks, link reference definitions (but for their titles), blank lines, and each block's own
syntax (`#`, `>`, list markers, table pipes, indentation).

Inside a block, emphasis, strong, strikethrough, links and inline HTML elements are pairs, and
inline code, images, autolinks, other inline HTML (a void element, a comment), hard line
breaks, and URLs and e-mail addresses in text are atoms (app/formats/inline.py: translated
whole with placeholders when the model keeps them, else as plain text with each pair placed
on the translation); so are templates' tags
(`{{ x }}`, `{% if %}`), math (`$x$`, `$$x$$`; not `$HOME/$USER`: markdown_parser.py),
environment variables (`$HOME`), emoji shortcodes (`:smile:`), attribute lists (`{: .class}`)
and footnote references (`[^1]`), copied as written. A hard line break keeps its spelling
(trailing spaces or a backslash), its line ending and the next line's indentation. An address
is found in the source before markdown-it reads emphasis, code or escapes in it, and written
back byte for byte (`https://example.com/*a*/_b_` is no emphasis). A link's destination
(`](destination "title")`, `][label]`) and an image's are written back as written; an image's
alternative text (what a screen reader reads) and a link's, an image's or a link reference
definition's title are translated, each as a unit of its own (Inner in markdown_render.py),
their `]`, delimiters and backslashes escaped (a reference definition's title written over
several lines is not); a reference link whose label is its text (`[text][]`, `[text]`) gets
that label written out (`[translated][text]`).

A block whose text does not fit in one request (`Limits.max_request_chars`) is translated by
runs, each text cut into pieces that fit. A block is found in its source lines by its text; a
block written over several lines and translated whole comes back on its first line (Markdown
joins the lines of a paragraph anyway); translated by runs, the line breaks between runs stay.
A line break kept, hard or soft, is written as the source wrote it: its spaces or backslash,
the line ending, the next line's indentation or `>` markers. A block none of whose text was
translated (the model gave it back as it was) is copied as written, byte for byte (but for the
labels of an HTML block's paragraphs `source: auto` kept in their own language, in a file whose
other text was translated: as in an .html file); one whose text cannot be found in its lines is
left untranslated. The syntax of GFM and other dialects
that CommonMark reads as text stays as written, where it stands: a task list item's box
(`- [ ]`), a footnote's definition (`[^1]:`), a definition list's `: `, an alert's type
(`> [!NOTE]`), a heading's attributes at its end (`## Title {#anchor}`). A line that opens or
closes an admonition or a fenced div (`!!! note "Title"`, `::: tip`, `:::`) or a content tab
(`=== "Tab"`), as its dialect writes one (DIRECTIVE), a line of template tags alone
(`{% if x %}`), an MDX `import` or `export` line, a footnote's definition, a definition list's
term and definitions, and an alert's type stay on their own lines, the text after them on the
next.

Characters of Markdown syntax in translated text are escaped with a backslash (a `&` that would
start a character reference too, `#`s that would close a heading, `~~`, and the first `$` or
`:` of what would read as math or an emoji's shortcode, a `!` before a link): in a table cell,
a `|` too, in text, code and links alike (GFM ends a cell at any bare one), and a space follows
a backslash that ends one (GFM reads a `|` after any backslash as text); at the start of a
line, what would start a block (`#`, `>`, `-`, `+`, `=`, `~`, `1.`, `1)`), and the indentation
that would make code is dropped. The spaces a translation puts at the start or end of emphasis
or a link's text are moved out of it (`** bold **` is no emphasis), and `_` emphasis that ends
up inside a word is written with `*`.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable

from markdown_it.helpers import parseLinkTitle

from model_core.langcodes import ISO_639_1_TO_3

from ..html_format import HtmlDocument, HtmlError
from ..html_lang import kept_languages, names_language
from . import Limits, Translate
from .inline import Token, Unit, UnitBuilder, translate_units
from .markdown_parser import parser
from .markdown_render import title_text
from .markdown_units import (
    block_unit,
    render_units,
    segments,
    without_attributes,
    without_prefix,
)
from .plain import decode

#: a YAML (`---`) or TOML (`+++`) front matter block at the very start of the file (Jekyll,
#: Hugo, MkDocs, Pandoc): metadata, copied as written (but for its language fields,
#: _LANG_FIELD). CommonMark reads `---` as a thematic
#: break and the lines up to the closing `---` as a setext heading, which was translated
#: and its lines joined into one (`title: ...` and `author: ...` gone). As in Pandoc, the
#: line after the opening one is not blank (a thematic break before a paragraph is no
#: front matter)
_FRONT_MATTER = re.compile(
    r"\A(---|\+\+\+)[ \t]*(?:\r\n|\n|\r)(?![ \t]*[\r\n])(?:[^\r\n]*(?:\r\n|\n|\r))*?"
    r"(?:\1|\.\.\.)[ \t]*(?:\r\n|\n|\r|\Z)"
)
#: a front matter's field that gives the document's language (Pandoc's and Jekyll's `lang`,
#: `language`, `locale`: YAML `lang: en`, TOML `lang = "en"`), not indented, its value a
#: language code (`en`, `en-US`, `en_US`; not a name such as `English`), quoted or not; at a
#: line's start after any line end (`^` alone misses a CR's, a classic Mac OS file's)
_LANG_FIELD = {
    sep: re.compile(
        rf"""(?:^|(?<=\r))(?:lang|language|locale)[ \t]*{sep}[ \t]*(["']?)"""
        r"([A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*)\1[ \t]*(?:#[^\r\n]*)?(?=[\r\n]|\Z)",
        re.M,
    )
    for sep in (":", "=")
}


def _front_matter_language(front: str, language: str) -> str:
    """A front matter whose language fields name `language` (the text below it was translated
    into it), as app/html_lang.py sets an HTML page's `lang` and `og:locale`: a value written
    as a locale (`en_US`) gets the target so (`pt_BR` for `pt-BR`; `de` for `de`), and one
    naming the target already (`de-CH` for `de`) is kept."""

    def field(m: re.Match) -> str:
        value = m.group(2)
        if names_language(value, language) or not _language_code(value):
            return m.group()
        written = language.replace("-", "_") if "_" in value else language
        return m.group()[: m.start(2) - m.start()] + written + m.group()[m.end(2) - m.start() :]

    if front.startswith("---"):
        return _LANG_FIELD[":"].sub(field, front)
    # TOML: the document's own keys come before the first table (`[params]`: a theme's)
    table = re.search(r"(?:^|(?<=\r))\[", front, re.M)
    end = table.start() if table else len(front)
    return _LANG_FIELD["="].sub(field, front[:end]) + front[end:]


def _language_code(value: str) -> bool:
    """Whether `value` starts with a language's ISO 639 code (`en`, `deu`, `pt_BR`), not with
    two or three letters that name something else (`language: go`, `lang: yes`)."""
    code = re.split(r"[-_]", value, maxsplit=1)[0].lower()
    return code in ISO_639_1_TO_3 or any(code in codes for codes in ISO_639_1_TO_3.values())


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


def translate_markdown(
    data: bytes, translate: Translate, limits: Limits, target: str | None = None
) -> bytes:
    """`target`: the language code `translate` translates into, for the lang attributes of
    its HTML blocks (app/html_lang.py)."""
    text, codec = decode(data, ".md")
    starts = _line_starts(text)
    ends = [s for s in starts[1:]] + [len(text)]

    def line(k: int) -> tuple[int, str]:  # (start offset, text without its line ending)
        if k >= len(starts):
            return len(text), ""
        return starts[k], text[starts[k] : ends[k]].rstrip("\r\n")

    # (start, end) in `text` of each piece's source, its units' count, what writes it from
    # their tokens (None: as written), a block's text (one unit) or an HTML block (its units),
    # and whether it is an HTML block
    pieces: list[tuple[int, int, int, Callable[[list[list[Token]]], str | None], bool]] = []
    units: list[Unit] = []
    cursor: dict[int, int] = {}  # per line, where the next block on it may start (tables)

    def located(first_line: int, lines: list[str]) -> tuple[int, int] | None:
        """(start, end) in `text` of a block's `lines` of content from `first_line`."""
        # markdown-it keeps a line's indentation in a block's content, part of a tab as
        # spaces; its inline rules skip it
        first, last = lines[0].lstrip(" \t"), lines[-1].lstrip(" \t")
        start_off, first_text = line(first_line)
        col = first_text.find(first, cursor.get(first_line, 0))
        last_index = first_line + len(lines) - 1
        last_off, last_text = line(last_index)
        from_col = col if len(lines) == 1 else 0
        end_col = last_text.find(last, from_col) if col >= 0 else -1
        if col < 0 or end_col < 0:
            return None
        cursor[last_index] = end_col + len(last)
        return start_off + col, last_off + end_col + len(last)

    def html_lines(block) -> tuple[int, int, str, Callable[[str], str]] | None:
        """(start, end) in `text` of an HTML block, its HTML, and what writes its translated
        HTML back there: inside a list or a quote, with each line's indentation or `>`
        markers (None where its lines are not found as written)."""
        first, stop = block.map
        if block.level == 0:
            start, end = starts[first], ends[stop - 1]
            return start, end, text[start:end], lambda html: html
        lines = block.content.split("\n")
        if lines[-1] == "":
            lines.pop()
        prefixes, endings = [], []
        for k, content in enumerate(lines):
            off, written = line(first + k)
            if first + k >= stop or not written.endswith(content):
                return None
            prefixes.append(written[: len(written) - len(content)])
            endings.append(text[off + len(written) : ends[first + k]])

        def write(html: str) -> str:
            out = html.split("\n")
            if out[-1] == "":
                out.pop()
            last = len(out) - 1
            return "".join(
                (prefixes[min(k, len(prefixes) - 1)] if k else "")
                + written
                + (endings[-1] if k == last else endings[0] or "\n")
                for k, written in enumerate(out)
            )

        return starts[first] + len(prefixes[0]), ends[stop - 1], "\n".join(lines) + "\n", write

    def line_breaks(first_line: int, lines: list[str]) -> dict[int, str]:
        """What follows each line of a block's `lines` of content from `first_line`, up to the
        next line's text (a space markdown-it dropped, the line ending, the next line's
        indentation or `>` markers): see markdown_units.block_unit."""
        out = {}
        for k in range(len(lines) - 1):
            off, written = line(first_line + k)
            next_off, next_written = line(first_line + k + 1)
            col = next_written.find(lines[k + 1].lstrip(" \t"))
            if col >= 0 and lines[k + 1].strip(" \t"):
                space = " " if written.endswith(" ") else ""
                out[k] = space + text[off + len(written) : next_off + col]
        return out

    def definition_title(last: int, title: str) -> tuple[int, int, str] | None:
        """(start, end) in `text` of a link reference definition's title (`title`, as
        markdown-it read it) inside its delimiters, and its opening delimiter: at the end of
        the definition's `last` line (None for a title written over several lines)."""
        off, written = line(last)
        written = written.rstrip(" \t")
        for i, c in enumerate(written):
            if c in "\"'(" and (i == 0 or written[i - 1] in " \t"):
                found = parseLinkTitle(written, i, len(written))
                if found.ok and found.pos == len(written) and found.str == title:
                    return off + i + 1, off + found.pos - 1, c
        return None

    front = _FRONT_MATTER.match(text)
    # the front matter's lines are parsed as blank lines (the others keep their numbers)
    parsed = re.sub(r"[^\r\n]", "", front.group()) + text[front.end() :] if front else text
    blocks = parser().parse(parsed)
    for index, block in enumerate(blocks):
        before = [b.type for b in blocks[max(index - 3, 0) : index]]
        cell = before[-1:] in (["th_open"], ["td_open"])
        if block.type == "html_block" and block.map:
            found = html_lines(block)
            if found is None or "{" in found[2]:
                continue  # a template's tags or MDX's expressions: no words to translate
            html_start, html_end, html, write = found
            try:
                doc = HtmlDocument(html, limit=limits.max_request_chars, attributes=True)
            except HtmlError:
                continue  # left as it is
            if doc.units:

                def render(tokens, doc=doc, html=html, write=write, first=len(units)) -> str | None:
                    at = sent[first]  # where its texts stand among those sent
                    own = doc.unit_languages(kept[at : at + len(doc.texts)], part=True)
                    written = doc.render_tokens(tokens, language=target, kept=own)
                    return None if written == html else write(written)

                pieces.append((html_start, html_end, len(doc.units), render, True))
                units.extend(doc.units)
            continue
        if block.type == "definition" and block.map and block.meta.get("title"):
            title_found = definition_title(block.map[1] - 1, block.meta["title"])
            unit = UnitBuilder()
            unit.text(block.meta["title"])
            built_title = unit.build(limit=limits.max_request_chars)
            if title_found is not None and built_title is not None:
                title_start, title_end, quote = title_found

                def write_title(tokens, quote=quote) -> str:
                    return title_text("".join(t.text for t in tokens[0] if t.kind == "text"), quote)

                pieces.append((title_start, title_end, 1, write_title, False))
                units.append(built_title)
            continue
        if block.type != "inline" or not block.map or not block.children:
            continue
        # a table cell's `\|` is a bare `|` in its content
        content = block.content.replace("|", "\\|") if cell else block.content
        content_lines = content.split("\n")
        breaks = {} if cell else line_breaks(block.map[0], content_lines)
        for first, stop, segment, tail in segments(block.children, len(content_lines)):
            lines = content_lines[first:stop]
            lines[-1] = lines[-1][: len(lines[-1]) - tail]
            children, skip = without_prefix(segment, before if first == 0 else ["", ""])
            first_line = block.map[0] + first
            if skip < 0:  # an alert's line: the text starts on the next line
                lines, first_line, skip = lines[1:], first_line + 1, 0
            span = located(first_line, lines)
            if span is None:
                continue  # not found as written: left as it is
            if before[-1:] == ["heading_open"]:
                children, cut = without_attributes(children)
                span = (span[0], span[1] - cut)
            # a hard line break keeps the line ending of the block's first line (a CRLF file's)
            newline = text[starts[first_line] + len(line(first_line)[1]) : ends[first_line]]
            inner: list[UnitBuilder] = []
            builder = block_unit(children, newline or "\n", cell, breaks, inner)
            built = [b.build(limit=limits.max_request_chars) for b in (builder, *inner)]
            if any(u is not None for u in built):
                heading = before[-1:] == ["heading_open"]
                render = functools.partial(
                    render_units, built=built, items=builder.items, cell=cell, heading=heading
                )
                count = sum(u is not None for u in built)
                pieces.append((span[0] + skip, span[1], count, render, False))
                units.extend(u for u in built if u is not None)
    with kept_languages() as kept:  # the language of each text kept as it is
        translated = translate_units(units, translate)
    sent = list(itertools.accumulate((len(u.requests) for u in units), initial=0))
    changed = any(t.translated for unit in translated for t in unit)
    out, at, done = [], 0, 0
    for start, end, count, render_piece, is_html in pieces:
        out.append(text[at:start])
        tokens = translated[done : done + count]
        written = None
        # a piece none of whose text was translated (in the target's language already, or in
        # one no model serves) is copied as written; but in a file whose text was translated,
        # an HTML block's paragraphs kept so are labelled with their language, as in an .html
        # file whose other text was translated (its `lang` named the target, or was wrong)
        if (is_html and changed) or any(t.translated for unit in tokens for t in unit):
            written = render_piece(tokens)
        out.append(text[start:end] if written is None else written)
        at, done = end, done + count
    out.append(text[at:])
    if front and target and changed:  # (copied as written at the start of `out`)
        out.insert(0, _front_matter_language(front.group(), target))
        out[1] = out[1][front.end() :]
    return codec.encode_text("".join(out))
