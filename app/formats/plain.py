"""Text files: .txt, .srt and .html, read as UTF-8 (or UTF-16 with a byte order mark) and
written back in the same encoding, byte order mark and line endings.

A .txt, .srt or .md file that is not UTF-8 and has no byte order mark is read in the legacy
encoding it is told to be in, and written back in it (app/formats/text_charset.py).

- .txt: each paragraph is one text (the service splits it into sentences), so a sentence
  wrapped over several lines is translated whole; its translation is spread over as many lines
  as the paragraph had (cut at spaces, in the proportions of the original lines), each with the
  indentation and trailing spaces of the line it replaces. A paragraph is a run of lines with
  letters; a line starting with a lowercase letter goes on the paragraph before it, and one
  starting otherwise only after a wrapped line: one of 40 columns or more that does not end
  a sentence (`.`, `!`, `?`, `:`); a list item (`- `, `* `, `1. `, `a) `, `(iv) `: the markers
  the service keeps as written, app/text.py) never goes on. So a
  heading, a line of a poem or of an address, `Dear John,` each end their line. A paragraph
  also ends at a line without letters, or with none beside its URLs and e-mail addresses
  (copied as it is), where its lines after the first
  change indentation, and before it would pass 1,000 characters (or MT_MAX_REQUEST_CHARS);
  a line longer than MT_MAX_REQUEST_CHARS is sent in pieces cut at sentence ends, as a cue is.
- .srt: each cue's text lines are translated together as one text, then spread over as many
  lines as the cue had (cut at spaces, outside markup such as `<i>`); cue numbers, timestamps,
  blank lines and blocks without a timestamp line are copied as they are, as are cues without
  text (a file without any timestamp line is refused). Markup in
  a cue is kept as in format=html, and override tags (`{\\an8}`) as they are. A dialogue, a
  cue whose every line starts with a dash (a speaker change: `- Where are you?`), is
  translated line by line, each dash kept.
- .html: as format=html (app/html_format.py); in the encoding it declares in a `<meta>`
  (windows-1252, ISO-8859-2, Shift_JIS, ...), as a browser reads it, when it has no byte order
  mark (app/html_charset.py); one that declares none and is not UTF-8 is read in the legacy
  encoding a .txt would be, and written in UTF-8 with a byte order mark.

A file of blank lines only (or spaces, a byte order mark) holds nothing to translate: it is
refused with 400, as an empty file is. (LibreTranslate's "empty file" is an upload without a
file name; the text of a blank .txt goes to its model like any other.)
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from typing import cast

from ..html_charset import PRESCAN_BYTES, HtmlCodec, declared, prescan
from ..html_format import HtmlDocument, HtmlError
from ..html_lang import kept_languages
from ..text import LINE_ENDS, list_marker
from . import FormatError, Limits, Translate, text_charset
from .addresses import verbatim_spans
from .inline import _cut, has_letters, split_space, translate_units

#: a subtitle's override tags ({\an8}, {\i1}, {\fs20}): kept as they are
_OVERRIDE = re.compile(r"\{\\[^{}]*\}")
#: markup in a cue, never cut: tags ("<3", "< 5" are text; one cut off runs to the end) and
#: override tags
_MARKUP = re.compile(r"<[A-Za-z/!?][^>]*>?|" + _OVERRIDE.pattern)
#: characters of a .txt's lines joined in one paragraph at most (one line over
#: MT_MAX_REQUEST_CHARS is sent in pieces: `in_pieces`)
_MAX_PARAGRAPH = 1_000
#: the end of a sentence at the end of a line (then closing quotes or brackets)
_END = re.compile(r"[.!?:\u2026][\"'\u201d\u2019\u00bb)\]]*$")
#: a dialogue line's dash, after the markup before it (a speaker change: "- Where are you?");
#: not a minus ("-5 degrees")
_DASH = re.compile(r"(?:\s|" + _MARKUP.pattern + r")*-+(?:\s+|(?=[^\d\s-]))")
#: a line this wide or wider (in columns: a CJK character takes two), not ending a sentence,
#: may be a wrapped line of a paragraph; a shorter one (a heading, a line of a poem,
#: "Dear John,") ends its line
_WRAPPED = 40


class Codec(str):
    """A codec's name; `encode_text` writes a text back as it was read, with its byte order mark
    (UTF-16 in the byte order it came in: Python's "utf-16" writes the machine's, little
    endian, and a big-endian file came back little-endian)."""

    def encode_text(self, text: str) -> bytes:
        if self in ("utf-16-le", "utf-16-be"):
            bom = codecs.BOM_UTF16_LE if self == "utf-16-le" else codecs.BOM_UTF16_BE
            return bom + text.encode(self)
        return text.encode(self)


def decode(data: bytes, kind: str) -> tuple[str, Codec | text_charset.LegacyCodec]:
    """(text, codec to write it back with: `codec.encode_text(text)`); FormatError for a file
    that is not text, or of blank lines only (nothing to translate)."""
    text, codec = _read(data, kind)
    if not text.strip():  # as an empty file (came back as it was, with 200)
        found = "no subtitles found" if kind == ".srt" else "nothing to translate"
        raise FormatError(f"{found}: the file holds only blank lines")
    return text, codec


def _read(data: bytes, kind: str) -> tuple[str, Codec | text_charset.LegacyCodec]:
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):  # before UTF-16's: the
        # little-endian mark starts with it (it was refused as holding NUL characters)
        raise FormatError(f"the {kind} file is UTF-32 text; save it as UTF-8")
    body = data
    if data.startswith(codecs.BOM_UTF8):
        codec = "utf-8-sig"
    elif data.startswith(codecs.BOM_UTF16_LE):
        codec, body = "utf-16-le", data[2:]
    elif data.startswith(codecs.BOM_UTF16_BE):
        codec, body = "utf-16-be", data[2:]
    else:
        codec = "utf-8"
    try:
        text = body.decode(codec)
    except UnicodeDecodeError as exc:
        if codec == "utf-8":  # a legacy encoding, unless NULs show it is no text
            _no_nul(data.decode("latin-1"), kind)
            return text_charset.detected(data, kind, exc.start)
        if codec == "utf-8-sig":  # Python's name, and a position after the byte order mark
            name, at = "UTF-8", exc.start + len(codecs.BOM_UTF8)
        else:
            name, at = codec.upper(), exc.start + len(data) - len(body)
        raise FormatError(
            f"the {kind} file is not valid {name} text (at byte {at}); save it as UTF-8"
        ) from None
    _no_nul(text, kind)
    return text, Codec(codec)


def _no_nul(text: str, kind: str) -> None:
    if "\x00" in text:  # UTF-16 without its byte order mark reads as UTF-8 with a NUL per letter
        raise FormatError(
            f"the {kind} file holds NUL characters: it is not text, or UTF-16 without a byte "
            "order mark; save it as UTF-8"
        )


def _lines(text: str) -> list[tuple[str, str]]:
    """(content, line ending) for each line."""
    out = []
    for line in text.splitlines(keepends=True):
        content = line.rstrip(LINE_ENDS)
        out.append((content, line[len(content) :]))
    return out


def _paragraphs(contents: list[str], max_chars: int = _MAX_PARAGRAPH) -> list[tuple[int, int]]:
    """[first, end) line indices of each paragraph of a text file, of at most `max_chars`
    characters (joined); see the module docstring."""
    out: list[tuple[int, int]] = []
    size = 0  # characters in the last paragraph
    for k, line in enumerate(contents):
        if not _has_words(line):
            continue
        if out and out[-1][1] == k:  # the line before is in a paragraph: does this one go on?
            first = out[-1][0]
            prev, core = contents[k - 1].strip(), line.lstrip()
            if list_marker(core):  # a list item ("- ", "1. ", "a) "), as split_text takes it
                goes_on = False
            elif core[0].islower():  # a sentence going on
                goes_on = True
            else:  # a wrapped line (long) that ends no sentence
                goes_on = _width(prev) >= _WRAPPED and not _END.search(prev)
            goes_on = goes_on and size + 1 + len(line) <= max_chars
            if goes_on and k - first >= 2:  # lines after the first are indented alike
                goes_on = _indent(line) == _indent(contents[first + 1])
            if goes_on:
                out[-1] = (first, k + 1)
                size += 1 + len(line)
                continue
        out.append((k, k + 1))
        size = len(line)
    return out


def _has_words(line: str) -> bool:
    """Whether a line has letters outside its URLs and e-mail addresses: a line of nothing
    but addresses (a list of links) is copied as it is, like a line without letters, and
    never goes on the paragraph before it (it starts with a lowercase letter)."""
    at, rest = 0, []
    for start, end in verbatim_spans(line):
        rest.append(line[at:start])
        at = end
    return has_letters("".join(rest) + line[at:])


def _width(line: str) -> int:
    """A line's width in columns: a wide character (CJK) takes two, as in a terminal or an
    editor that wraps at a column."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def translate_txt(data: bytes, translate: Translate, limits: Limits) -> bytes:
    text, codec = decode(data, ".txt")
    lines = _lines(text)
    longest = min(_MAX_PARAGRAPH, limits.max_request_chars)  # a text over it would be a 413
    paragraphs = _paragraphs([content for content, _ in lines], longest)
    texts = [" ".join(lines[k][0].strip() for k in range(a, b)) for a, b in paragraphs]
    translated = in_pieces(texts, translate, limits.max_request_chars)
    out = list(lines)
    for (first, end), new in reversed(list(zip(paragraphs, translated, strict=True))):
        spaces = [split_space(lines[k][0]) for k in range(first, end)]
        parts = _split_into(new, end - first, [len(core) for _, core, _ in spaces], markup=False)
        last = len(parts) - 1
        out[first:end] = [
            (
                spaces[i][0] + part + spaces[end - first - 1 if i == last else i][2],
                lines[end - 1 if i == last else first + i][1],
            )
            for i, part in enumerate(parts)
        ]
    return codec.encode_text("".join(c + e for c, e in out))


def in_pieces(texts: list[str], translate: Translate, limit: int) -> list[str]:
    """`texts` translated, one longer than `limit` (a paragraph on one line: a transcript, a
    text saved a paragraph per line) sent in pieces cut at sentence ends (the service refused
    it with 413), the translated pieces joined again with the spaces between them."""
    pieces = [[split_space(p) for p in _cut(t, limit)] for t in texts]
    sent = [core for text in pieces for _, core, _ in text if core]
    done = iter(translate(sent) if sent else [])
    return [
        "".join(lead + (next(done) if core else "") + trail for lead, core, trail in text)
        for text in pieces
    ]


def translate_html_file(
    data: bytes, translate: Translate, limits: Limits, target: str | None = None
) -> bytes:
    """`target`: the language code `translate` translates into, for the document's lang
    attributes (app/html_lang.py)."""
    text, codec = decode_html(data)
    try:
        doc = HtmlDocument(text, limit=limits.max_request_chars, attributes=True)
    except HtmlError as exc:
        raise FormatError(str(exc)) from None
    with kept_languages() as kept:  # the language of each text kept as it is
        tokens = translate_units(doc.units, translate)
    text = doc.render_tokens(tokens, language=target, kept=doc.unit_languages(kept))
    out = codec.encode_text(text)
    if isinstance(codec, HtmlCodec) and declared(out) is None:
        # a translation that grew before the <meta> pushed it past the first 1024 bytes, where
        # a browser looks for it (and where this service looks when the file comes back): a
        # byte order mark says UTF-8 wherever the declaration stands
        return codecs.BOM_UTF8 + text.encode("utf-8")
    return out


def decode_html(data: bytes) -> tuple[str, Codec | text_charset.LegacyCodec | HtmlCodec]:
    """An HTML file's text, in the encoding a browser reads it in (app/html_charset.py), and
    the codec to write it back with."""
    if data.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return decode(data, ".html")
    codec = declared(data)
    if codec is None:  # UTF-8, declared or not
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if prescan(data, None) == (None, ""):  # no declaration anywhere: told as a .txt's
                # legacy encoding is, and written in UTF-8 with a byte order mark, which a
                # browser reads before anything else (in that encoding, without a declaration,
                # a browser would have to guess again)
                text, _ = decode(data, ".html")
                return text, Codec("utf-8-sig")
            raise FormatError(
                f"the .html file is not valid UTF-8 text (at byte {exc.start}); save it as "
                f"UTF-8{_declaration_hint(data)}"
            ) from None
        return decode(data, ".html")
    name = codec.encoding.name
    if codec.encoding.codec is None:
        raise FormatError(
            "the .html file declares an encoding browsers do not read (it shows as one "
            "replacement character); save it as UTF-8"
        )
    try:
        return codec.decode(data), codec
    except UnicodeDecodeError as exc:
        raise FormatError(
            f"the .html file is not valid {name} text (at byte {exc.start}), the encoding its "
            "<meta> declares; declare the one it is in, or save it as UTF-8"
        ) from None


def _declaration_hint(data: bytes) -> str:
    """Why a file that is not UTF-8 was read as UTF-8: its declaration stands too far in, or
    names no encoding a browser knows."""
    later, unknown = prescan(data, None)
    if later is not None and later.codec != "utf-8":
        return (
            f" (its <meta> declares {later.name} past the first {PRESCAN_BYTES} bytes, where "
            "browsers look for it: move it to the top of <head>)"
        )
    if unknown:
        return f" (its <meta> declares {unknown!r}, an encoding browsers do not know)"
    return ' or declare its encoding (<meta charset="windows-1252">)'


def _split_into(
    text: str, n: int, lengths: list[int] | None = None, markup: bool = True
) -> list[str]:
    """`text` cut at spaces (outside markup) into at most `n` lines, of similar length or in
    the proportions of `lengths` (the original lines')."""
    inside = (
        {i for m in _MARKUP.finditer(text) for i in range(m.start(), m.end())} if markup else ()
    )
    cuts = [i for i, ch in enumerate(text) if ch == " " and i not in inside]
    lines, start = [], 0
    total = sum(lengths or []) or None
    for k in range(1, n):
        target = len(text) * (sum(lengths[:k]) / total if lengths and total else k / n)
        options = [c for c in cuts if c > start]
        if not options:
            break
        cut = min(options, key=lambda c: abs(c - target))
        lines.append(text[start:cut])
        start = cut + 1
    lines.append(text[start:])
    return [line for line in lines if line.strip()] or [text]


def translate_srt(data: bytes, translate: Translate, limits: Limits) -> bytes:
    text, codec = decode(data, ".srt")
    lines = _lines(text)
    cues: list[tuple[int, int]] = []  # [first, end) line indices of each cue's text
    i = timed = 0
    while i < len(lines):
        if not lines[i][0].strip():
            i += 1
            continue
        block_end = i
        while block_end < len(lines) and lines[block_end][0].strip():
            block_end += 1
        timing = next((k for k in range(i, block_end) if "-->" in lines[k][0]), None)
        timed += timing is not None
        if timing is not None and timing + 1 < block_end:  # else no text, or a stray block:
            cues.append((timing + 1, block_end))  # copied as it is
        i = block_end
    if not timed:  # (a file of blank lines is refused by `decode`)
        raise FormatError(
            "no subtitles found: no cue with a timestamp line (00:00:01,000 --> 00:00:02,000); "
            "not SRT"
        )
    # each cue: its texts, with the dash before each (a dialogue) or none (all lines as one)
    texts: list[list[tuple[str, HtmlDocument]]] = []
    for first, end in cues:
        cue_lines = [lines[k][0].strip() for k in range(first, end)]
        dashes = [_DASH.match(line) for line in cue_lines]
        if all(dashes):  # a dialogue: each line on its own
            parts = [
                (m.group(), line[m.end() :])
                for m, line in zip(cast(list[re.Match[str]], dashes), cue_lines, strict=True)
            ]
        else:
            parts = [("", " ".join(cue_lines))]
        try:
            texts.append(
                [
                    (dash, HtmlDocument(t, atoms=_OVERRIDE, limit=limits.max_request_chars))
                    for dash, t in parts
                ]
            )
        except HtmlError as exc:
            raise FormatError(f"line {first + 1}: {exc}") from None
    documents = [d for cue in texts for _, d in cue]
    tokens = iter(translate_units([u for d in documents for u in d.units], translate))
    rendered = iter(d.render_tokens([next(tokens) for _ in d.units], plain=True) for d in documents)
    new_cues = [[dash + next(rendered) for dash, _ in cue] for cue in texts]
    out = list(lines)
    for (first, end), new in reversed(list(zip(cues, new_cues, strict=True))):
        if len(new) == 1:
            new = _split_into(new[0], end - first)
        endings = [lines[k][1] for k in range(first, first + len(new) - 1)] + [lines[end - 1][1]]
        out[first:end] = list(zip(new, endings, strict=True))
    return codec.encode_text("".join(c + e for c, e in out))
