"""Markdown files, read with markdown-it-py (CommonMark, plus tables and strikethrough).

Only the text of inline content is translated: paragraphs, headings, list items, block
quotes, table cells. Everything else is copied as written, line by line: a YAML or TOML front
matter at the start of the file, code blocks (fenced and indented), HTML blocks, thematic
breaks, link reference definitions, blank lines, and each block's own syntax (`#`, `>`, list
markers, table pipes, indentation).

Inside a block, emphasis, strong, strikethrough and links are pairs, and inline code, images,
autolinks, inline HTML, hard line breaks, and URLs and e-mail addresses in text are atoms
(app/formats/inline.py: translated whole with placeholders when the model keeps them, else run
by run). A link is written back as `[text](destination "title")` (the title in `'...'` or
`(...)` when it holds `"`, or with its quotes escaped) with the destination markdown-it resolved
(a reference link becomes an inline one). A block is found in its source lines by its text; a
block written over several lines comes back on its first line (Markdown joins the lines of a
paragraph anyway); one whose text cannot be found in its lines is left untranslated. Characters of Markdown syntax
in translated text are escaped with a backslash.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from . import Limits, Translate
from .inline import Token, UnitBuilder, translate_units
from .plain import decode

_PAIRS = {"em", "strong", "s"}
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


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


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


def _link_end(attrs: dict) -> str:
    title = attrs.get("title")
    title_part = f" {_title(title)}" if title else ""
    return f"]({attrs.get('href', '')}{title_part})"


def _unit(children) -> UnitBuilder:
    b = UnitBuilder()
    links: list[str] = []  # the closing markup of each open link
    autolink: list[str] | None = None
    for tok in children:
        kind = tok.type
        if autolink is not None:
            if kind == "link_close":
                b.atom("<" + "".join(autolink) + ">")
                autolink = None
            else:
                autolink.append(tok.content)
        elif kind == "text":
            b.text(tok.content)
        elif kind == "softbreak":
            b.text("\n")
        elif kind == "hardbreak":
            b.atom("\\\n")
        elif kind == "code_inline":
            b.atom(_code_span(tok.content, tok.markup))
        elif kind == "html_inline":
            b.atom(tok.content)
        elif kind == "image":
            b.atom(f"![{tok.content}" + _link_end({"href": tok.attrs.get("src"), **tok.attrs}))
        elif kind == "link_open" and tok.markup == "autolink":
            autolink = []
        elif kind == "link_open":
            links.append(_link_end(dict(tok.attrs)))
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


def _escape(text: str) -> str:
    out = []
    for i, c in enumerate(text):
        inside_word = c == "_" and 0 < i < len(text) - 1 and text[i - 1].isalnum()
        if c in _ESCAPED and not (inside_word and text[i + 1].isalnum()):
            out.append("\\")
        out.append(c)
    return "".join(out)


def _render(tokens: list[Token]) -> str:
    out = []
    for tok in tokens:
        if tok.kind != "text":
            out.append(tok.ref)
        else:
            out.append(_escape(tok.text.replace("\n", " ")))
    return "".join(out)


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

    spans, units = [], []  # (start, end) in `text` of each unit's source
    cursor: dict[int, int] = {}  # per line, where the next block on it may start (tables)
    front = _FRONT_MATTER.match(text)
    # the front matter's lines are parsed as blank lines (the others keep their numbers)
    parsed = re.sub(r"[^\r\n]", "", front.group()) + text[front.end() :] if front else text
    for block in _parser().parse(parsed):
        if block.type != "inline" or not block.map or not block.children:
            continue
        content_lines = block.content.split("\n")
        first_line = block.map[0]
        start_off, first_text = line(first_line)
        col = first_text.find(content_lines[0], cursor.get(first_line, 0))
        last_index = first_line + len(content_lines) - 1
        last_off, last_text = line(last_index)
        from_col = col if len(content_lines) == 1 else 0
        end_col = last_text.find(content_lines[-1], from_col) if col >= 0 else -1
        if col < 0 or end_col < 0:
            continue  # not found as written: left as it is
        end_col += len(content_lines[-1])
        cursor[last_index] = end_col
        unit = _unit(block.children).build()
        if unit is not None:
            spans.append((start_off + col, last_off + end_col))
            units.append(unit)
    translated = translate_units(units, translate)
    out, at = [], 0
    for (start, end), tokens in zip(spans, translated, strict=True):
        out.append(text[at:start])
        out.append(_render(tokens))
        at = end
    out.append(text[at:])
    return codec.encode_text("".join(out))
