"""Document formats for POST /translate_file, free of any model and of HTTP.

Each handler is a pure function `(data, translate, limits) -> bytes`: the file's bytes in, the
translated file's bytes out (`handler_for` gives it the target language, which an office file
marks its translated text with), where `translate(list[str]) -> list[str]` translates plain texts
(the service passes one that goes through the batcher; tests pass a fake). A handler calls
`translate` once for the whole file. A file the handler cannot read raises `FormatError`
with the HTTP status to answer (400 for a broken file, 413 for one too large once unpacked).

| extension | handler | what is translated |
|---|---|---|
| .txt | plain.translate_txt | paragraphs, spread back over their lines; line endings, encoding, BOM kept |
| .html, .htm | plain.translate_html_file | as format=html (app/html_format.py) |
| .md | markdown.translate_markdown | paragraphs, headings, list items, table cells; code untouched |
| .srt | plain.translate_srt | cue text (dialogue line by line); indices, timestamps, `{\\an8}` untouched |
| .docx, .pptx, .odt, .odp | office.translate_office | the text runs of the XML parts; every other part copied |
| .epub | epub.translate_epub | the XHTML chapters (as .html, read as XML), the table of contents, the title and description |
| .pdf | pdf.translate_pdf | each page's text blocks, paragraph by paragraph, drawn where they stood |

An office file of another kind than its extension says (a .docx named `x.odt`) is refused
with 400.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath

from ..html_charset import charset
from ..html_lang import kept_languages, note_kept

Translate = Callable[[list[str]], list[str]]


def once_each(translate: Translate) -> Translate:
    """`translate`, sent each distinct text once: a chart writes its categories again in each
    series, Word a picture's description in two places, a book its chapters' titles in its
    table of contents, its navigation document and each chapter's head (each copy was sent)."""

    def once(texts: list[str]) -> list[str]:
        unique = list(dict.fromkeys(texts))
        with kept_languages() as kept:  # the language each unique text was kept in
            done = dict(zip(unique, translate(unique) if unique else [], strict=True))
        if kept:  # told for each text sent, copies too (app/html_lang.py)
            note_kept([dict(zip(unique, kept, strict=True))[t] for t in texts])
        return [done[t] for t in texts]

    return once


class FormatError(ValueError):
    """The file cannot be read as its extension says; `status` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    """Bounds on what an archive (.docx, .pptx, .odt) may unpack to, checked before unpacking,
    and on the markup a handler parses: a parser's tree takes tens to hundreds of times the
    bytes it reads (markdown-it's tokens about 280 times), all before the text in it can be
    counted."""

    max_unpacked_bytes: int = 50_000_000  # all entries together, uncompressed
    max_entries: int = 2_000
    max_ratio: int = 100  # uncompressed / compressed, for entries over 1 MiB (Apache POI's bound)
    max_chars: int = 200_000  # characters of text in the file (bounds the markup below)
    max_request_chars: int = 20_000  # characters of one text sent for translation
    max_pdf_pages: int = 2_000  # pages of a PDF file (each read, then rewritten)

    @property
    def max_xml_bytes(self) -> int:
        """The XML parts of an archive that hold its text, together: 50 bytes per character,
        and 5 MB at least (so that a low MT_MAX_FILE_CHARS does not refuse small files)."""
        return max(50 * self.max_chars, 5_000_000)

    def max_text_file_bytes(self, ext: str) -> int:
        """A text file's bytes: 20 per character, 5 for Markdown (whose parser takes the
        most memory per byte, about 290 times it), and 1 MB at least."""
        return max((5 if ext == ".md" else 20) * self.max_chars, 1_000_000)


#: binary files, checked as they are opened (a PDF file's images are no text)
ARCHIVES = frozenset({".docx", ".pptx", ".odt", ".odp", ".epub", ".pdf"})


def check_text_file(filename: str, data: bytes, limits: Limits) -> None:
    """FormatError 413 for a text file (not an archive: those are checked as they are opened)
    too large for the text it may hold."""
    ext = extension(filename)
    if ext in ARCHIVES:
        return
    most = limits.max_text_file_bytes(ext)
    if len(data) > most:
        raise FormatError(
            f"the file has {len(data)} bytes; at most {most} for a {ext} file (its markup "
            "is bounded by the characters of text allowed in a file)",
            413,
        )


Handler = Callable[[bytes, Translate, Limits], bytes]

CONTENT_TYPES = {
    ".txt": "text/plain; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
    ".srt": "application/x-subrip; charset=utf-8",  # a player reads a legacy one by it
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".odp": "application/vnd.oasis.opendocument.presentation",
    ".epub": "application/epub+zip",
    ".pdf": "application/pdf",
}


def extension(filename: str) -> str:
    """A file name's extension in lower case (`.docx`), that of a name that is nothing else
    (`.txt`) too: Python takes that for a hidden file without one, and it was refused as
    "not supported" in a message listing `.txt`."""
    return PurePath("x" + PurePath(filename.replace("\\", "/")).name).suffix.lower()


def content_type(filename: str, data: bytes) -> str:
    """The media type of a translated file: its extension's, with the charset the text handlers
    wrote it in (they keep a UTF-16 file's encoding and byte order mark, an HTML file's
    declared one, and the legacy encoding a .txt or .md was told to be in: `data.charset`)."""
    ext = extension(filename)
    ctype = CONTENT_TYPES[ext]
    if ext in (".html", ".htm"):
        return f"text/html; charset={charset(data)}"
    legacy = getattr(data, "charset", None)  # text_charset.EncodedText
    if legacy is not None:
        return ctype.replace("charset=utf-8", f"charset={legacy}")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return ctype.replace("charset=utf-8", "charset=utf-16")
    return ctype


def handler_for(filename: str, language: str | None = None) -> Handler | None:
    """The handler for a file name's extension, or None when it is not supported; `language`:
    the target's tag, that the translated text is marked with (the lang attributes of an HTML
    file and of a Markdown file's HTML blocks, an office file's run and paragraph languages;
    None: not marked)."""
    from . import epub, markdown, office, pdf, plain  # noqa: PLC0415 (they import this module)

    def office_file(kind: str) -> Handler:  # refuses another kind of office file (400)
        return functools.partial(office.translate_office, kind=kind, language=language)

    handlers: dict[str, Handler] = {
        ".txt": plain.translate_txt,
        ".html": functools.partial(plain.translate_html_file, target=language),
        ".htm": functools.partial(plain.translate_html_file, target=language),
        ".md": functools.partial(markdown.translate_markdown, target=language),
        ".srt": plain.translate_srt,
        ".docx": office_file("docx"),
        ".pptx": office_file("pptx"),
        ".odt": office_file("odt"),
        ".odp": office_file("odp"),
        ".epub": functools.partial(epub.translate_epub, language=language),
        ".pdf": functools.partial(pdf.translate_pdf, language=language),
    }
    return handlers.get(extension(filename))


def supported() -> list[str]:
    return sorted(CONTENT_TYPES)
