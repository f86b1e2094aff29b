"""File formats without a model: each handler with a fake translation keeps the file's layout
and formatting, and refuses broken or hostile files with a FormatError."""

from __future__ import annotations

import asyncio
import codecs
import io
import os
import re
import threading
import time
import zipfile
from collections.abc import Callable

import docx
import pptx
import pytest
from docx.oxml import parse_xml
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from markdown_it import MarkdownIt
from odf import teletype
from odf.dc import Creator
from odf.draw import Frame, Image
from odf.namespaces import OFFICENS
from odf.office import Annotation, AnnotationEnd
from odf.opendocument import OpenDocumentText, load
from odf.style import Style, TextProperties
from odf.text import (
    Bookmark,
    BookmarkEnd,
    BookmarkStart,
    H,
    IndexBody,
    IndexEntryPageNumber,
    IndexEntrySpan,
    IndexEntryText,
    IndexTitle,
    IndexTitleTemplate,
    Note,
    NoteBody,
    NoteCitation,
    P,
    ReferenceMarkEnd,
    ReferenceMarkStart,
    Span,
    Tab,
    TableOfContent,
    TableOfContentEntryTemplate,
    TableOfContentSource,
)

from app.files import FileStore, StoreFull, TooLarge, form_filename, safe_name
from app.formats import FormatError, Limits, content_type, handler_for
from app.formats.markdown import translate_markdown
from app.formats.office import translate_office
from app.formats.plain import translate_srt, translate_txt
from app.html_charset import HtmlCodec, lookup

LIMITS = Limits()


def upper(texts: list[str]) -> list[str]:
    return [t.upper() for t in texts]


def drop_placeholders(texts: list[str]) -> list[str]:
    return [re.sub(r"</?[gx]\d+/?>", "", t).upper() for t in texts]


def entries(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def assert_only_changed(before: bytes, after: bytes, changed: set[str]) -> None:
    a, b = entries(before), entries(after)
    assert list(a) == list(b)  # same entries, same order
    assert {n for n in a if a[n] != b[n]} == changed


def test_txt_keeps_lines_spacing_encoding_and_bom():
    src = "Hello world.\r\n  indented line  \r\n\r\n2024\nlast".encode("utf-8-sig")
    out = translate_txt(src, upper, LIMITS)
    assert out == "HELLO WORLD.\r\n  INDENTED LINE  \r\n\r\n2024\nLAST".encode("utf-8-sig")
    utf16 = "Grüße\n".encode("utf-16")
    assert translate_txt(utf16, upper, LIMITS) == "GRÜSSE\n".encode("utf-16")


def test_txt_translates_a_wrapped_paragraph_whole_and_keeps_its_lines():
    src = (
        "  My father and my mother went to\r\n"
        "  the train station yesterday because\r\n"
        "  they wanted to visit my sister.\r\n"
        "\r\n"
        "Shopping list:\r\n"
        "- eggs and milk\r\n"
        "- bread\r\n"
        "2024\r\n"
        "The end.\r\n"
        "Bye now."
    )
    sent = []
    out = translate_txt(
        src.encode("utf-8-sig"), lambda ts: sent.extend(ts) or upper(ts), LIMITS
    ).decode("utf-8-sig")
    assert sent == [
        "My father and my mother went to the train station yesterday because they wanted to"
        " visit my sister.",
        "Shopping list:",
        "- eggs and milk",
        "- bread",
        "The end.",
        "Bye now.",
    ]
    assert out == src.upper()  # the same lines, each translated in its place
    # spread in the proportions of the original lines, indented as they were
    out = translate_txt(b"A short line\nand a much longer line than the first\n", upper, LIMITS)
    assert out == b"A SHORT LINE\nAND A MUCH LONGER LINE THAN THE FIRST\n"
    # a paragraph stays far below a request's character limit
    sent.clear()
    long = ("and the words go on and on without an end " * 2 + "\n") * 100
    out = translate_txt(long.encode(), lambda ts: sent.extend(ts) or upper(ts), LIMITS)
    assert out == long.upper().encode() and len(sent) > 1 and max(map(len, sent)) <= 1_000


def test_txt_headings_verses_and_greetings_end_their_lines():
    """A short line that ends no sentence (a heading, a line of a poem, a greeting) is not
    joined to the capitalised line after it; a wrapped line of a paragraph is; and no
    paragraph passes the server's characters per request."""
    sent: list[str] = []

    def record(texts):
        sent.extend(texts)
        return upper(texts)

    src = (
        "Introduction\nThis document describes the service.\n\n"
        "Roses are red\nViolets are blue\n\n"
        "Dear John,\nThank you for the letter.\n\n"
        "This sentence is long enough to be wrapped by the editor\nWhich went on here.\n"
    )
    assert translate_txt(src.encode(), record, LIMITS) == src.upper().encode()
    assert sent == [
        "Introduction",
        "This document describes the service.",
        "Roses are red",
        "Violets are blue",
        "Dear John,",
        "Thank you for the letter.",
        "This sentence is long enough to be wrapped by the editor Which went on here.",
    ]
    sent.clear()  # CJK wrapped at a column: a wide character takes two
    cjk = "这是一个很长的句子它被编辑器折行了所以继续在下一行\n下一行继续这个句子。\n"
    translate_txt(cjk.encode(), record, LIMITS)
    assert sent == ["这是一个很长的句子它被编辑器折行了所以继续在下一行 下一行继续这个句子。"]
    sent.clear()
    wrapped = "the words go on and on and on without an end at all here\n" * 12
    out = translate_txt(wrapped.encode(), record, Limits(max_request_chars=300))
    assert out == wrapped.upper().encode() and max(map(len, sent)) <= 300 and len(sent) >= 3


def test_txt_that_is_not_utf8_is_refused():
    with pytest.raises(FormatError, match="not valid UTF-8"):
        translate_txt(NOT_TEXT, upper, LIMITS)
    # after a UTF-8 byte order mark: named as UTF-8, the byte counted from the file's start
    # (it was "not valid UTF-8-SIG text (at byte 3)": Python's name for the codec, and the
    # position after the byte order mark)
    for handler in (translate_txt, translate_srt, translate_markdown, handler_for("a.html")):
        with pytest.raises(FormatError, match=r"not valid UTF-8 text \(at byte 6\); save it"):
            handler(codecs.BOM_UTF8 + b"Caf\xc3 au lait.", upper, LIMITS)


def add_words(texts: list[str]) -> list[str]:
    """Upper case, and words in German and Russian after each text."""
    return [t.upper() + " Grüße жук" for t in texts]


@pytest.mark.parametrize(
    ("data", "out", "charset"),
    [
        (  # the reproduction: refused as "not valid UTF-8"
            b'<meta charset="windows-1252"><p>Caf\xe9</p>',
            b'<meta charset="windows-1252"><p>CAF\xc9 Gr\xfc\xdfe &#1078;&#1091;&#1082;</p>',
            "windows-1252",
        ),
        (  # ISO-8859-1 is read as a browser reads it: windows-1252 (0x93, 0x94 are quotes);
            # the Content-Type after its content, in another case; a byte 0x81 kept as it was
            b"<html><head><title>Caf\xe9</title><META content='text/html; Charset=ISO-8859-1' "
            b'http-equiv="Content-Type"></head><p>\x93Caf\xe9\x94 \x81</p>',
            b"<html><head><title>CAF\xc9 Gr\xfc\xdfe &#1078;&#1091;&#1082;</title><META "
            b"content='text/html; Charset=ISO-8859-1' http-equiv=\"Content-Type\"></head>"
            b"<p>\x93CAF\xc9\x94 \x81 Gr\xfc\xdfe &#1078;&#1091;&#1082;</p>",
            "windows-1252",
        ),
        (  # a declaration in a comment, or without http-equiv, is none; the next one counts
            b'<!-- <meta charset="koi8-r"> --><meta content="charset=koi8-r">'
            b"<meta charset=koi8-r><p>\xf7\xcf\xc4\xc1</p>",  # "Вода"
            b'<!-- <meta charset="koi8-r"> --><meta content="charset=koi8-r">'
            b"<meta charset=koi8-r><p>\xf7\xef\xe4\xe1 Gr&#252;&#223;e "
            b"\xd6\xd5\xcb</p>",
            "KOI8-R",
        ),
        (  # multi-byte: Shift_JIS
            '<meta charset="shift_jis"><p>水です</p>'.encode("cp932"),
            '<meta charset="shift_jis"><p>水です Gr&#252;&#223;e жук</p>'.encode("cp932"),
            "Shift_JIS",
        ),
        (  # a byte order mark wins over the declaration; UTF-16 declared is read as UTF-8
            codecs.BOM_UTF8 + '<meta charset="windows-1252"><p>Café</p>'.encode(),
            codecs.BOM_UTF8 + '<meta charset="windows-1252"><p>CAFÉ Grüße жук</p>'.encode(),
            "utf-8",
        ),
        (
            '<meta charset="utf-16"><p>Café</p>'.encode(),
            '<meta charset="utf-16"><p>CAFÉ Grüße жук</p>'.encode(),
            "utf-8",
        ),
    ],
)
def test_html_is_read_and_written_in_the_encoding_it_declares(data, out, charset):
    translated = handler_for("a.html")(data, add_words, LIMITS)
    assert translated == out
    assert content_type("a_de.html", translated) == f"text/html; charset={charset}"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (  # declared UTF-8, and not: not read in another encoding
            b'<meta charset="utf-8"><p>Caf\xe9</p>',
            r"not valid UTF-8 text \(at byte 28\); save it as UTF-8 or declare",
        ),
        (
            b"<p>" + b"x" * 1100 + b"</p><meta charset=latin1><p>Caf\xe9",
            "declares windows-1252 past the first 1024 bytes",
        ),
        (b"<meta charset=latin-9><p>Caf\xe9", "declares 'latin-9', an encoding browsers do not"),
        (b'<meta charset="iso-2022-kr"><p>Hi', "an encoding browsers do not read"),
        (b"<meta charset=iso-8859-3><p>\xa5", r"not valid ISO-8859-3 text \(at byte 28\)"),
    ],
)
def test_html_in_an_encoding_a_browser_would_not_read_is_refused(data, message):
    with pytest.raises(FormatError, match=message):
        handler_for("a.html")(data, upper, LIMITS)


@pytest.mark.parametrize(
    ("source", "codec"),
    [
        ("<html><head><title>Café</title></head><p>Crème brûlée, s’il vous plaît.</p>", "cp1252"),
        ("<p>Съешь же ещё этих мягких французских булок, да выпей чаю.</p>", "cp1251"),
        ("<p>Съешь же ещё этих мягких французских булок, да выпей чаю.</p>", "koi8_r"),
    ],
    ids=["windows-1252", "windows-1251", "KOI8-R"],
)
def test_html_that_declares_no_encoding_and_is_not_utf8_is_read_as_a_text_file_is(source, codec):
    """An .html file in a legacy encoding that declares none (an old page saved from an
    editor): read in the encoding charset-normalizer tells, as a .txt is, and written in UTF-8
    with a byte order mark, which a browser reads before any declaration (it was refused with
    400 'not valid UTF-8')."""
    out = handler_for("a.html")(source.encode(codec), add_words, LIMITS)
    assert out.startswith(codecs.BOM_UTF8)
    assert (
        out.decode("utf-8-sig")
        == handler_for("a.html")(source.encode(), add_words, LIMITS).decode()
    )
    assert content_type("a_de.html", out) == "text/html; charset=utf-8"
    assert handler_for("a.html")(out, lambda texts: texts, LIMITS) == out  # and read back so


def test_html_whose_translation_pushes_its_declaration_past_1024_bytes_is_written_in_utf8():
    # a long <title> before the <meta>, as older pages write it: the translation grew
    data = (
        b"<html><head><title>" + b"Hello world. " * 70 + b"</title><meta http-equiv="
        b'"Content-Type" content="text/html; charset=windows-1252"></head><p>Caf\xe9</p>'
    )
    out = handler_for("a.html")(data, add_words, LIMITS)
    assert out.startswith(codecs.BOM_UTF8)  # which a browser reads before any <meta>
    assert "<p>CAFÉ Grüße жук</p>" in out.decode("utf-8-sig")
    assert content_type("a_de.html", out) == "text/html; charset=utf-8"
    # and the file is read again as it was written (it was refused: "declares windows-1252
    # past the first 1024 bytes")
    assert handler_for("a.html")(out, lambda texts: texts, LIMITS) == out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [b"<meta", b" charset", b"=", b'"', b"'", b"windows-1252", b"koi8-r", b" ", b">"]
            + [b"<!--", b"-->", b"<p", b"</", b"<?", b" content", b"http-equiv", b"/", b"\xe9"]
            + [b"content-type", b"text/html; charset=", b"utf-16", b"x", b"\x81", b"\xff"]
        ),
        max_size=30,
    ).map(b"".join)
)
def test_any_declaration_is_read_or_refused_with_a_message(data):
    try:
        out = handler_for("a.html")(data, lambda texts: texts, LIMITS)
    except FormatError as exc:
        assert exc.status == 400, exc
        assert any(m in str(exc) for m in ("encoding", "UTF-8", "nothing to translate")), exc
    else:  # written back in the encoding it was read in, which its Content-Type names
        charset = content_type("a.html", data).split("=")[1]
        assert content_type("a.html", out) == f"text/html; charset={charset}"
        assert HtmlCodec(lookup(charset)).decode(out) is not None


SRT = (
    "1\r\n00:00:01,000 --> 00:00:02,500\r\nHello there,\r\nmy <i>good</i> friend.\r\n\r\n"
    "2\r\n00:00:03,000 --> 00:00:04,000\r\n- 42 -\r\n\r\n"
    "3\r\n00:01:05,250 --> 00:01:07,000 X1:10\r\nBye now.\r\n"
)


def test_srt_keeps_numbers_timestamps_and_line_count():
    sent = []
    out = translate_srt(SRT.encode(), lambda ts: sent.extend(ts) or upper(ts), LIMITS).decode()
    # the cue whole (placeholders for its markup), its runs for the fallback, the next cue
    assert sent == [
        "Hello there, my <g1>good</g1> friend.",
        *["Hello there, my good friend.", "good"],  # for a model that loses placeholders
        "Bye now.",
    ]
    blocks = out.split("\r\n\r\n")
    assert [b.split("\r\n")[:2] for b in blocks] == [
        b.split("\r\n")[:2] for b in SRT.split("\r\n\r\n")
    ]
    assert blocks[0].split("\r\n")[2:] == ["HELLO THERE, MY", "<i>GOOD</i> FRIEND."]
    assert blocks[1].endswith("- 42 -") and blocks[2].endswith("BYE NOW.\r\n")


def test_srt_lone_lt_is_text():
    src = b"1\n00:00:01,000 --> 00:00:02,000\nThe dog is < 5 years old.\n"
    out = translate_srt(src, upper, LIMITS)
    assert out == b"1\n00:00:01,000 --> 00:00:02,000\nTHE DOG IS < 5 YEARS OLD.\n"


def test_srt_a_minus_is_no_dialogue_dash():
    """A cue whose lines start with a negative number is one text, not dialogue lines."""
    sent: list[str] = []
    src = "1\n00:00:01,000 --> 00:00:02,000\n-5 degrees outside\n-3 tomorrow morning\n"
    translate_srt(src.encode(), lambda ts: sent.extend(ts) or upper(ts), LIMITS)
    assert sent == ["-5 degrees outside -3 tomorrow morning"]


def test_srt_keeps_override_tags_and_translates_dialogue_lines_apart():
    src = (
        "1\n00:00:06,000 --> 00:00:07,000\n{\\an8}Good morning.\n\n"
        "2\n00:00:08,000 --> 00:00:09,000\n- Where are you?\n- I am at home.\n\n"
        "3\n00:00:10,000 --> 00:00:11,000\n<i>- Who is it?</i>\n<i>-It is me.</i>\n"
    )
    sent = []
    out = translate_srt(src.encode(), lambda ts: sent.extend(ts) or upper(ts), LIMITS).decode()
    assert sent == ["Good morning.", "Where are you?", "I am at home.", "Who is it?", "It is me."]
    assert out == (
        "1\n00:00:06,000 --> 00:00:07,000\n{\\an8}GOOD MORNING.\n\n"
        "2\n00:00:08,000 --> 00:00:09,000\n- WHERE ARE YOU?\n- I AM AT HOME.\n\n"
        "3\n00:00:10,000 --> 00:00:11,000\n<i>- WHO IS IT?</i>\n<i>-IT IS ME.</i>\n"
    )


def test_srt_without_timestamps_is_refused_and_stray_blocks_are_kept():
    with pytest.raises(FormatError, match="no cue"):
        translate_srt(b"just some text\nno cues\n", upper, LIMITS)
    src = b"1\n00:00:01,000 --> 00:00:02,000\nHi there.\n\nstray words\n"
    out = translate_srt(src, upper, LIMITS)
    assert out == b"1\n00:00:01,000 --> 00:00:02,000\nHI THERE.\n\nstray words\n"


def test_srt_of_blank_lines_is_refused_and_cues_without_text_are_kept():
    """A .srt of blank lines (any line endings, a byte order mark) holds no subtitles: it is
    refused, as a file of text without timestamps is (it came back unchanged); cues with a
    number and a timestamp but no text are a subtitle file, copied as they are."""
    for blank in (b"\n\n\n", b"\r\n\r\n", b"\xef\xbb\xbf", b"\xef\xbb\xbf \r\n\t\r\n"):
        with pytest.raises(FormatError, match="no subtitles found: the file holds only blank"):
            translate_srt(blank, upper, LIMITS)
    with pytest.raises(FormatError, match="no subtitles found: no cue with a timestamp line"):
        translate_srt(b"1\n\n2\n", upper, LIMITS)
    untimed = b"\xef\xbb\xbf1\r\n00:00:01,000 --> 00:00:02,000\r\n\r\n2\r\n00:00:03,000 --> 00:00:04,000\r\n"
    sent: list[str] = []
    assert translate_srt(untimed, lambda ts: sent.extend(ts) or upper(ts), LIMITS) == untimed
    assert sent == []
    mixed = untimed + b"\r\n3\r\n00:00:05,000 --> 00:00:06,000\r\nHi there.\r\n"
    assert translate_srt(mixed, upper, LIMITS) == untimed + (
        b"\r\n3\r\n00:00:05,000 --> 00:00:06,000\r\nHI THERE.\r\n"
    )


@pytest.mark.parametrize("name", ["blank.txt", "blank.md", "blank.html", "blank.htm"])
def test_a_text_file_of_blank_lines_is_refused_as_nothing_to_translate(name):
    """A text file of blank lines or spaces holds nothing to translate: it is refused as an empty
    file is, and a .srt of blank lines (it came back unchanged, with 200). Markup without text
    (an HTML page, an empty <body>) is a document: it comes back as it is."""
    blanks = (b"\n\n\n", b"\r\n\r\n", b"   ", b"\xef\xbb\xbf", b"\xef\xbb\xbf \r\n\t\r\n")
    for blank in blanks + (codecs.BOM_UTF16_LE + " \n".encode("utf-16-le"),):
        with pytest.raises(FormatError, match="nothing to translate: the file holds only blank"):
            handler_for(name)(blank, upper, LIMITS)
    if name.endswith((".html", ".htm")):
        page = b"<html><body>\n</body></html>\n"
        assert handler_for(name)(page, upper, LIMITS) == page


MARKDOWN = """# Title with *emphasis* ##

Some **bold** text and `inline code` with a [link](https://example.com "T").
A second line of the same paragraph.

```python
print("not translated")
```

    indented code stays

| name | value |
|------|-------|
| first | `x = 1` |

- item one
- item two

> quoted text
"""


def test_markdown_keeps_syntax_and_code():
    out = translate_markdown(MARKDOWN.encode(), upper, LIMITS).decode()
    assert out.startswith("# TITLE WITH *EMPHASIS* ##\n\n")
    assert (
        'SOME **BOLD** TEXT AND `inline code` WITH A [LINK](https://example.com "T").'
        " A SECOND LINE OF THE SAME PARAGRAPH.\n" in out
    )
    assert '```python\nprint("not translated")\n```\n' in out
    assert "    indented code stays\n" in out
    assert "| NAME | VALUE |\n|------|-------|\n| FIRST | `x = 1` |\n" in out
    assert "- ITEM ONE\n- ITEM TWO\n\n> QUOTED TEXT\n" in out


def links(markdown: str) -> list[tuple[str, str, str | None]]:
    """(text or alt, destination, title) of every link and image."""
    out, parser = [], MarkdownIt("commonmark")
    for block in parser.parse(markdown):
        children = block.children or []
        for i, tok in enumerate(children):
            if tok.type == "link_open":
                out.append((children[i + 1].content, tok.attrs["href"], tok.attrs.get("title")))
            elif tok.type == "image":
                out.append((tok.content, tok.attrs["src"], tok.attrs.get("title")))
    return out


def test_markdown_link_titles_with_quotes_stay_titles():
    src = (
        'See [a link](http://x.com \'He said "hi"\') and ![a cat](cat.png "it\'s (\\"x\\")")'
        ' and [b](y "C:\\\\dir").\n'
    )
    assert links(src) == [
        ("a link", "http://x.com", 'He said "hi"'),
        ("a cat", "cat.png", 'it\'s ("x")'),
        ("b", "y", "C:\\dir"),
    ]
    out = translate_markdown(src.encode(), lambda ts: ts, LIMITS).decode()
    assert links(out) == links(src)
    out = translate_markdown(src.encode(), upper, LIMITS).decode()
    assert links(out) == [
        ("A LINK", "http://x.com", 'HE SAID "HI"'),
        ("A CAT", "cat.png", 'IT\'S ("X")'),
        ("B", "y", "C:\\DIR"),
    ]


def test_urls_and_email_addresses_in_markdown_and_docx_are_copied_as_written():
    text = "Download the installer from https://example.com/files/setup.exe today."
    want = "DOWNLOAD THE INSTALLER FROM https://example.com/files/setup.exe TODAY."
    src = f"{text}\n\nWrite to *support@example.com* if you have questions.\n"
    for translate in (upper, drop_placeholders):
        out = translate_markdown(src.encode(), translate, LIMITS).decode()
        assert out == f"{want}\n\nWRITE TO *support@example.com* IF YOU HAVE QUESTIONS.\n"
    document = docx.Document()
    document.add_paragraph(text)
    document.add_paragraph("Write to ").add_run("support@example.com").bold = True
    data = io.BytesIO()
    document.save(data)
    for translate in (upper, drop_placeholders):
        out = docx.Document(io.BytesIO(translate_office(data.getvalue(), translate, LIMITS)))
        assert [p.text for p in out.paragraphs] == [want, "WRITE TO support@example.com"]
        assert out.paragraphs[1].runs[-1].bold


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/*star*/_x_",
        "https://en.wikipedia.org/wiki/Foo_(bar)_baz",
        "www.example.com/a`b`c/**d**",
        "https://example.com/a\\_b~~c~~",
    ],
)
def test_markdown_urls_with_emphasis_characters_are_copied_byte_for_byte(url):
    # markdown-it cut them into emphasis, code and escapes before the address was looked for:
    # the words between the delimiters were translated and the rest escaped ("Foo\_(bar)")
    src = f"See {url} for more.\n\n[Open {url}](https://example.com/x) now.\n"
    want = f"SEE {url} FOR MORE.\n\n[OPEN {url}](https://example.com/x) NOW.\n"
    for translate in (upper, drop_placeholders):
        assert translate_markdown(src.encode(), translate, LIMITS).decode() == want


def test_markdown_emphasis_around_an_address_stays_emphasis():
    src = "*see https://example.com/a* and **at https://example.com/b.** ~~www.x.org~~ ok.\n"
    want = "*SEE https://example.com/a* AND **AT https://example.com/b.** ~~www.x.org~~ OK.\n"
    for translate in (upper, drop_placeholders):
        assert translate_markdown(src.encode(), translate, LIMITS).decode() == want


def test_markdown_hard_line_breaks_keep_their_spelling_and_line_ending():
    # two trailing spaces came back as a backslash, and a CRLF file's break as a bare LF
    src = "Roses are red,  \nviolets blue,\\\nsugar is sweet   \nand so are you.\n"
    for translate in (upper, drop_placeholders):
        assert translate_markdown(src.encode(), translate, LIMITS).decode() == src.upper()
        crlf = src.replace("\n", "\r\n")
        assert translate_markdown(crlf.encode(), translate, LIMITS).decode() == crlf.upper()


def make_docx() -> bytes:
    d = docx.Document()
    p = d.add_paragraph("Hello ")
    run = p.add_run("bold words")
    run.bold = True
    p.add_run(" and more.")
    d.add_paragraph("Before a tab\tafter it.")
    table = d.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "cell text"
    table.cell(0, 1).text = "42"
    d.sections[0].header.paragraphs[0].text = "Header text"
    d.core_properties.comments = ""  # python-docx's "generated by python-docx", translated
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


@pytest.mark.parametrize("fake", [upper, drop_placeholders])
def test_docx_translates_runs_and_keeps_every_other_part(fake):
    src = make_docx()
    out = translate_office(src, fake, LIMITS)
    assert_only_changed(src, out, {"word/document.xml", "word/header1.xml"})
    d = docx.Document(io.BytesIO(out))
    runs = [(r.text, r.bold) for r in d.paragraphs[0].runs]
    assert runs == [("HELLO ", None), ("BOLD WORDS", True), (" AND MORE.", None)]
    assert d.paragraphs[1].text == "BEFORE A TAB\tAFTER IT."
    assert [c.text for c in d.tables[0].rows[0].cells] == ["CELL TEXT", "42"]
    assert d.sections[0].header.paragraphs[0].text == "HEADER TEXT"
    # the XML differs only in text: same elements, attributes and order
    before, after = entries(src)["word/document.xml"], entries(out)["word/document.xml"]
    strip = re.compile(rb">[^<]*<")
    assert strip.sub(b"><", before.split(b"?>", 1)[1]) == strip.sub(b"><", after.split(b"?>", 1)[1])


WORD = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
HYPERLINK = ' HYPERLINK "https://example.com/manual" '


def make_docx_with_markers() -> bytes:
    """Sentences whose runs all have the same (no) formatting: words inside a hyperlink field, a
    bookmark, a comment's range; and a bookmark that encloses nothing (Word's _GoBack)."""
    d = docx.Document()
    ns = f'xmlns:w="{WORD}"'
    field = (
        f'<w:p {ns}><w:r><w:t xml:space="preserve">Please read </w:t></w:r>'
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        f'<w:r><w:instrText xml:space="preserve">{HYPERLINK}</w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>the user manual</w:t></w:r>'
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
        '<w:r><w:t xml:space="preserve"> before you start.</w:t></w:r></w:p>'
    )
    bookmark = (
        f'<w:p {ns}><w:r><w:t xml:space="preserve">See </w:t></w:r>'
        '<w:bookmarkStart w:id="1" w:name="target"/><w:r><w:t>the red house</w:t></w:r>'
        '<w:bookmarkEnd w:id="1"/><w:r><w:t xml:space="preserve"> on the left.</w:t></w:r></w:p>'
    )
    d.element.body.insert(0, parse_xml(field))
    d.element.body.insert(1, parse_xml(bookmark))
    p = d.add_paragraph()
    p.add_run("I like ")
    weather = p.add_run("the weather")
    p.add_run(" in the summer.")
    d.add_comment([weather], text="Which weather?", author="Tom")
    go_back = (
        f'<w:p {ns}><w:r><w:t xml:space="preserve">Hello </w:t></w:r>'
        '<w:bookmarkStart w:id="2" w:name="_GoBack"/><w:bookmarkEnd w:id="2"/>'
        "<w:r><w:t>world.</w:t></w:r></w:p>"
    )
    d.element.body.insert(3, parse_xml(go_back))
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def between(paragraph, start, end) -> str:
    """The text of the w:t elements between the first element `start` accepts and the next one
    `end` accepts."""
    text, inside = [], False
    for el in paragraph.iter():
        if not inside and start(el):
            inside = True
        elif inside and end(el):
            return "".join(text)
        elif inside and el.tag == f"{{{WORD}}}t":
            text.append(el.text or "")
    raise AssertionError("no such range")


def marker(name: str, **attrs: str):
    def accept(el) -> bool:
        return el.tag == f"{{{WORD}}}{name}" and all(
            el.get(f"{{{WORD}}}{k}") == v for k, v in attrs.items()
        )

    return accept


def whole_or_pieces(keep_placeholders: bool, requests: list[str]):
    """A fake that upper-cases a whole sentence (placeholders kept, or dropped so that the
    sentence's pieces are used) and puts each piece in brackets, to tell the two apart."""

    def fake(texts: list[str]) -> list[str]:
        requests.extend(texts)
        return [
            (t if keep_placeholders else re.sub(r"</?[gx]\d+/?>", "", t)).upper()
            if "<g" in t
            else f"[{t.upper()}]"
            for t in texts
        ]

    return fake


@pytest.mark.parametrize("keep_placeholders", [True, False], ids=["whole", "pieces"])
def test_docx_field_bookmark_and_comment_keep_the_text_they_enclose(keep_placeholders):
    src = make_docx_with_markers()
    requests: list[str] = []
    out = translate_office(src, whole_or_pieces(keep_placeholders, requests), LIMITS)
    # each sentence is still sent whole, the marked words a pair of their own
    assert "<g1>Please read </g1><g2>the user manual</g2><g3> before you start.</g3>" in requests
    assert "<g1>I like </g1><g2>the weather</g2><g3> in the summer.</g3>" in requests
    assert not any("HYPERLINK" in r for r in requests)
    assert "Hello world." in requests  # an empty bookmark does not cut the sentence
    if keep_placeholders:
        field, house, weather = "THE USER MANUAL", "THE RED HOUSE", "THE WEATHER"
        texts = ["PLEASE READ THE USER MANUAL BEFORE YOU START.", "SEE THE RED HOUSE ON THE LEFT."]
        texts += ["I LIKE THE WEATHER IN THE SUMMER.", "[HELLO WORLD.]"]
    else:  # the sentence translated whole, the marked words found in it
        field, house, weather = "THE USER MANUAL", "THE RED HOUSE", "THE WEATHER"
        texts = ["[PLEASE READ THE USER MANUAL BEFORE YOU START.]"]
        texts += ["[SEE THE RED HOUSE ON THE LEFT.]", "[I LIKE THE WEATHER IN THE SUMMER.]"]
        texts.append("[HELLO WORLD.]")
    root = etree.fromstring(entries(out)["word/document.xml"])
    paragraphs = root.findall(f".//{{{WORD}}}p")
    assert (
        between(paragraphs[0], marker("fldChar", fldCharType="separate"), marker("fldChar"))
        == field
    )
    assert between(paragraphs[1], marker("bookmarkStart"), marker("bookmarkEnd")) == house
    assert between(paragraphs[2], marker("commentRangeStart"), marker("commentRangeEnd")) == weather
    # nothing emptied, the field's instruction untouched, only text changed
    assert all(t.text for p in paragraphs[:3] for t in p.iter(f"{{{WORD}}}t"))
    assert [t.text for t in root.iter(f"{{{WORD}}}instrText")] == [HYPERLINK]
    before = entries(src)["word/document.xml"]
    strip = re.compile(rb">[^<]*<")
    assert strip.sub(b"><", before) == strip.sub(b"><", entries(out)["word/document.xml"])
    # the same runs on each side of an empty bookmark are one, as before
    assert [t.text or "" for t in paragraphs[3].iter(f"{{{WORD}}}t")] == ["[HELLO WORLD.]", ""]
    d = docx.Document(io.BytesIO(out))
    assert [p.text for p in d.paragraphs] == texts
    assert [c.text for c in d.comments] == ["[WHICH WEATHER?]"]  # comments are translated too
    assert "Which weather?" in requests


def make_odt_with_markers() -> bytes:
    """Words inside a bookmark, a comment's range and a reference mark; a point bookmark."""
    doc = OpenDocumentText()
    p = P(text="See ")
    p.addElement(BookmarkStart(name="bm"))
    p.addText("the red house")
    p.addElement(BookmarkEnd(name="bm"))
    p.addText(" on the left.")
    doc.text.addElement(p)
    p = P(text="I like ")
    note = Annotation()
    note.setAttrNS(OFFICENS, "name", "c1")  # as LibreOffice writes it (odfpy's name= is draw:)
    note.addElement(Creator(text="Tom"))
    note.addElement(P(text="Which weather?"))
    p.addElement(note)
    p.addText("the weather")
    p.addElement(AnnotationEnd(name="c1"))
    p.addText(" in the summer.")
    doc.text.addElement(p)
    p = P(text="Call ")
    p.addElement(ReferenceMarkStart(name="desk"))
    p.addText("the help desk")
    p.addElement(ReferenceMarkEnd(name="desk"))
    p.addText(" today.")
    doc.text.addElement(p)
    p = P(text="Hello ")
    p.addElement(Bookmark(name="here"))
    p.addText("world.")
    doc.text.addElement(p)
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


@pytest.mark.parametrize("keep_placeholders", [True, False], ids=["whole", "pieces"])
def test_odt_bookmark_comment_and_reference_mark_keep_the_text_they_enclose(keep_placeholders):
    src = make_odt_with_markers()
    requests: list[str] = []
    out = translate_office(src, whole_or_pieces(keep_placeholders, requests), LIMITS)
    assert "<g1>See </g1><g2>the red house</g2><g3> on the left.</g3>" in requests
    assert "<g1>I like </g1><g2>the weather</g2><g3> in the summer.</g3>" in requests
    content = entries(out)["content.xml"].decode()

    def enclosed(start: str, end: str) -> str:
        """The text between the markup `start` matches and the next `end` element."""
        return re.search(f"{start}(.*?)<{end}[ />]", content, re.S).group(1)

    # the comment's own paragraph is a unit of its own: translated, not sent with the sentence
    assert re.search(r"<office:annotation [^>]*>.*>\[WHICH WEATHER\?\]</text:p>", content)
    assert not any("Which weather" in r and "like" in r for r in requests)
    assert "Hello world." in requests  # a point bookmark does not cut the sentence
    marked = [
        enclosed("<text:bookmark-start [^>]*/>", "text:bookmark-end"),
        enclosed("</office:annotation>", "office:annotation-end"),
        enclosed("<text:reference-mark-start [^>]*/>", "text:reference-mark-end"),
    ]
    assert marked == ["THE RED HOUSE", "THE WEATHER", "THE HELP DESK"]
    got = load(io.BytesIO(out))
    texts = [teletype.extractText(e) for e in got.text.childNodes]
    if keep_placeholders:
        assert texts[0] == "SEE THE RED HOUSE ON THE LEFT."
        assert texts[2] == "CALL THE HELP DESK TODAY."
    else:  # the sentence translated whole, the marked words found in it
        assert texts[0] == "[SEE THE RED HOUSE ON THE LEFT.]"
        assert texts[2] == "[CALL THE HELP DESK TODAY.]"
    assert texts[3] == "[HELLO WORLD.]"


def make_pptx() -> bytes:
    """A slide with a title, a body of two paragraphs (the second with an italic run) and
    speaker notes."""
    prs = pptx.Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = "Slide title"
    frame = slide.placeholders[1].text_frame
    frame.text = "First point"
    para = frame.add_paragraph()
    para.add_run().text = "Mixed "
    italic = para.add_run()
    italic.text = "italic part"
    italic.font.italic = True
    slide.notes_slide.notes_text_frame.text = "Speaker notes"
    prs.core_properties.comments = ""  # python-pptx's "generated using python-pptx"
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def test_pptx_translates_slides_and_notes():
    src = make_pptx()
    out = translate_office(src, upper, LIMITS)
    assert_only_changed(src, out, {"ppt/slides/slide1.xml", "ppt/notesSlides/notesSlide1.xml"})
    got = pptx.Presentation(io.BytesIO(out)).slides[0]
    texts = [s.text_frame.text for s in got.shapes if s.has_text_frame]
    assert texts == ["SLIDE TITLE", "FIRST POINT\nMIXED ITALIC PART"]
    runs = got.placeholders[1].text_frame.paragraphs[1].runs
    assert [(r.text, r.font.italic) for r in runs] == [("MIXED ", None), ("ITALIC PART", True)]
    assert got.notes_slide.notes_text_frame.text == "SPEAKER NOTES"


def test_pptx_field_inside_a_sentence_does_not_cut_it_in_two():
    src = entries(make_pptx())
    run = '<a:r><a:rPr lang="en-US"/><a:t xml:space="preserve">{}</a:t></a:r>'
    field = (
        '<a:fld id="{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}" type="slidenum">'
        '<a:rPr lang="en-US"/><a:t>1</a:t></a:fld>'
    )
    slide = src["ppt/slides/slide1.xml"].decode()
    slide = slide.replace(
        "<a:r><a:t>First point</a:t></a:r>",
        run.format("This is slide ") + field + run.format(" of the talk."),
    )
    assert field in slide
    src["ppt/slides/slide1.xml"] = slide.encode()
    requests: list[str] = []
    out = translate_office(zip_of(src), whole_or_pieces(True, requests), LIMITS, "pptx")
    # it was sent as "This is slide" and "of the talk.", translated apart
    assert "<g1>This is slide </g1><g2> of the talk.</g2>" in requests
    assert "1" not in requests  # the field's text is PowerPoint's
    got = pptx.Presentation(io.BytesIO(out)).slides[0]
    assert got.placeholders[1].text_frame.paragraphs[0].text == "THIS IS SLIDE 1 OF THE TALK."


def test_pptx_runs_that_differ_only_in_language_or_smart_tag_marks_are_one_text():
    """PowerPoint marks runs with the keyboard's language (lang, altLang), smart tags
    (smtClean, smtId) and proofing (noProof), none of which a reader sees: a sentence of such
    runs was sent as pieces with placeholders, and translated in pieces when the model lost
    them."""
    src = entries(make_pptx())
    slide = src["ppt/slides/slide1.xml"].decode()
    slide = slide.replace(
        "<a:r><a:t>First point</a:t></a:r>",
        '<a:r><a:t xml:space="preserve">The cat </a:t></a:r>'
        '<a:r><a:rPr lang="en-GB" altLang="en-US" dirty="0"/><a:t>sleeps </a:t></a:r>'
        '<a:r><a:rPr lang="en-US" smtClean="0" smtId="4" noProof="1"/><a:t>all day.</a:t></a:r>'
        '<a:r><a:rPr lang="en-US" b="1"/><a:t> Really.</a:t></a:r>',
    )
    src["ppt/slides/slide1.xml"] = slide.encode()
    requests: list[str] = []
    out = translate_office(zip_of(src), whole_or_pieces(True, requests), LIMITS, "pptx")
    assert "<g1>The cat sleeps all day.</g1><g2> Really.</g2>" in requests
    got = pptx.Presentation(io.BytesIO(out)).slides[0].placeholders[1].text_frame.paragraphs[0]
    assert [r.text for r in got.runs] == ["THE CAT SLEEPS ALL DAY.", "", "", " REALLY."]


def words_only(sent: list[str]) -> Callable[[list[str]], list[str]]:
    """A model that writes words, never a tab (upper case, spaces collapsed); what it is sent
    goes to `sent`."""

    def model(texts: list[str]) -> list[str]:
        sent.extend(texts)
        return [" ".join(t.split()).upper() for t in texts]

    return model


def test_pptx_tab_inside_a_run_ends_the_text_sent_and_stays():
    """PowerPoint writes a tab as a character in its run's text (DrawingML has no tab
    element): it was sent inside the text, and a model, which writes no tabs, lost it (the
    columns it aligned ran together). A tab now ends the text sent, as a .docx `w:tab` does."""
    src = entries(make_pptx())
    run = '<a:r><a:rPr lang="en-US" b="1"/><a:t>{}</a:t></a:r>'
    slide = src["ppt/slides/slide1.xml"].decode()
    slide = slide.replace(
        "<a:r><a:t>First point</a:t></a:r>",
        run.format("Name\tPrice list") + run.format("\t\tIn stock"),
    )
    src["ppt/slides/slide1.xml"] = slide.encode()
    sent: list[str] = []
    model = words_only(sent)
    out = translate_office(zip_of(src), model, LIMITS, "pptx")
    assert not [t for t in sent if "\t" in t]
    assert {"Name", "Price list", "In stock"} <= set(sent)
    got = pptx.Presentation(io.BytesIO(out)).slides[0].placeholders[1].text_frame.paragraphs[0]
    assert got.text == "NAME\tPRICE LIST\t\tIN STOCK"
    assert {r.font.bold for r in got.runs} == {True}


def test_docx_tab_inside_a_text_ends_the_text_sent_and_stays():
    """Word writes a tab as `w:tab`, other writers as a character in `w:t`: it was sent
    inside the text as a space (the columns it aligned ran together). It now ends the text
    sent, as `w:tab` does, and stays a tab in the run, whose formatting the texts keep."""
    src = entries(make_docx())
    body = src["word/document.xml"].decode()
    run = '<w:r><w:rPr><w:b/></w:rPr><w:t xml:space="preserve">{}</w:t></w:r>'
    body = body.replace(
        "<w:r><w:t>Before a tab</w:t><w:tab/><w:t>after it.</w:t></w:r>",
        run.format("Name\tPrice list") + run.format("\t\tIn stock \t"),
    )
    assert "Price list" in body
    src["word/document.xml"] = body.encode()
    sent: list[str] = []
    model = words_only(sent)
    out = translate_office(zip_of(src), model, LIMITS, "docx")
    assert not [t for t in sent if "\t" in t]
    assert {"Name", "Price list", "In stock"} <= set(sent)
    got = docx.Document(io.BytesIO(out)).paragraphs[1]
    assert got.text == "NAME\tPRICE LIST\t\tIN STOCK \t"
    assert {r.bold for r in got.runs} == {True}
    # the tabs stay characters of the runs' texts, each text kept whole by Word
    xml = entries(out)["word/document.xml"].decode()
    assert '<w:t xml:space="preserve">\t\t</w:t>' in xml


def test_pptx_text_a_master_or_layout_shows_on_slides_is_translated_not_its_prompts():
    """A text box on the slide master or a layout is shown on every slide of it: it was left
    in the source's language. A placeholder's prompt there ("Click to edit Master title
    style") is shown only while editing, and is not sent."""
    src = entries(make_pptx())
    box = (
        '<p:sp><p:nvSpPr><p:cNvPr id="99" name="TextBox 99"/><p:cNvSpPr txBox="1"/><p:nvPr/>'
        '</p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:lstStyle/><a:p><a:r><a:rPr lang="en-US"/>'
        "<a:t>{}</a:t></a:r></a:p></p:txBody></p:sp></p:spTree>"
    )
    for name, text in [
        ("ppt/slideMasters/slideMaster1.xml", "Company confidential"),
        ("ppt/slideLayouts/slideLayout2.xml", "Draft for review"),
    ]:
        src[name] = src[name].replace(b"</p:spTree>", box.format(text).encode(), 1)
    sent: list[str] = []
    out = entries(translate_office(zip_of(src), lambda ts: sent.extend(ts) or upper(ts), LIMITS))
    assert b"<a:t>COMPANY CONFIDENTIAL</a:t>" in out["ppt/slideMasters/slideMaster1.xml"]
    assert b"<a:t>DRAFT FOR REVIEW</a:t>" in out["ppt/slideLayouts/slideLayout2.xml"]
    assert b"Click to edit Master title style" in out["ppt/slideMasters/slideMaster1.xml"]
    assert not [t for t in sent if "Click to edit" in t]
    assert out["ppt/slideLayouts/slideLayout1.xml"] == src["ppt/slideLayouts/slideLayout1.xml"]


def test_pptx_notes_and_handout_masters_text_and_headers_are_translated_not_prompts():
    """A notes or handout master's text box, header and footer are printed on every notes
    page or handout: they were left in the source's language. Its body's prompt is not sent."""
    src = entries(make_pptx())
    box = (
        '<p:sp><p:nvSpPr><p:cNvPr id="99" name="TextBox 99"/><p:cNvSpPr txBox="1"/><p:nvPr/>'
        '</p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:lstStyle/><a:p><a:r><a:rPr lang="en-US"/>'
        "<a:t>Internal use only</a:t></a:r></a:p></p:txBody></p:sp></p:spTree>"
    )
    name = "ppt/notesMasters/notesMaster1.xml"
    notes = src[name].decode().replace("</p:spTree>", box, 1)
    header = '<p:ph type="hdr" sz="quarter"/>'
    at = notes.index(header)
    end = notes.index('<a:p><a:endParaRPr lang="en-US"/></a:p>', at)
    notes = (
        notes[:end]
        + '<a:p><a:r><a:rPr lang="en-US"/><a:t>Sales meeting</a:t></a:r></a:p>'
        + notes[end + len('<a:p><a:endParaRPr lang="en-US"/></a:p>') :]
    )
    src[name] = notes.encode()
    handout = notes.replace("p:notesMaster", "p:handoutMaster").replace(
        "Internal use only", "Handout for participants"
    )
    src["ppt/handoutMasters/handoutMaster1.xml"] = handout.encode()
    sent: list[str] = []
    out = entries(translate_office(zip_of(src), lambda ts: sent.extend(ts) or upper(ts), LIMITS))
    for part, text in [
        (name, "INTERNAL USE ONLY"),
        ("ppt/handoutMasters/handoutMaster1.xml", "HANDOUT FOR PARTICIPANTS"),
    ]:
        assert f"<a:t>{text}</a:t>".encode() in out[part]
        assert b"<a:t>SALES MEETING</a:t>" in out[part]
        assert b"Click to edit Master text styles" in out[part]
    assert not [t for t in sent if "Click to edit" in t or "level" in t]


DGM = (
    'xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
)
DSP = (
    'xmlns:dsp="http://schemas.microsoft.com/office/drawing/2008/diagram" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
)


@pytest.mark.parametrize(
    "make, folder, kind", [(make_pptx, "ppt", "pptx"), (make_docx, "word", "docx")]
)
def test_smartart_text_is_translated(make, folder, kind):
    """A SmartArt graphic's text: in its data (laid out again from it when edited) and in the
    drawing of its last layout (shown until then). Neither was translated."""
    src = entries(make())
    text = '<a:p><a:r><a:rPr lang="en-US"/><a:t>Plan the work</a:t></a:r></a:p>'
    src[f"{folder}/diagrams/data1.xml"] = (
        f'<dgm:dataModel {DGM}><dgm:ptLst><dgm:pt modelId="{{1}}" type="doc"><dgm:t>'
        '<a:bodyPr/><a:p><a:endParaRPr lang="en-US"/></a:p></dgm:t></dgm:pt>'
        f'<dgm:pt modelId="{{2}}"><dgm:t><a:bodyPr/>{text}</dgm:t></dgm:pt></dgm:ptLst>'
        "</dgm:dataModel>"
    ).encode()
    src[f"{folder}/diagrams/drawing1.xml"] = (
        f"<dsp:drawing {DSP}><dsp:spTree><dsp:sp><dsp:txBody><a:bodyPr/>{text}"
        "</dsp:txBody></dsp:sp></dsp:spTree></dsp:drawing>"
    ).encode()
    out = entries(translate_office(zip_of(src), upper, LIMITS, kind))
    for name in ("data1.xml", "drawing1.xml"):
        assert b"<a:t>PLAN THE WORK</a:t>" in out[f"{folder}/diagrams/{name}"]


def make_odt() -> bytes:
    """A heading, a paragraph with a bold span, and one with a tab."""
    doc = OpenDocumentText()
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    doc.text.addElement(H(outlinelevel=1, text="A heading"))
    p = P(text="Hello ")
    p.addElement(Span(stylename=bold, text="bold words"))
    p.addText(" and more.")
    doc.text.addElement(p)
    p2 = P(text="Before a tab")
    p2.addElement(Tab())
    p2.addText("after it")
    doc.text.addElement(p2)
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def test_odt_translates_spans_and_keeps_mimetype_first_and_stored():
    src = make_odt()
    out = translate_office(src, upper, LIMITS)
    assert_only_changed(src, out, {"content.xml"})
    first = zipfile.ZipFile(io.BytesIO(out)).infolist()[0]
    assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED
    got = load(io.BytesIO(out))
    assert [teletype.extractText(e) for e in got.text.childNodes] == [
        "A HEADING",
        "HELLO BOLD WORDS AND MORE.",
        "BEFORE A TAB\tAFTER IT",
    ]
    assert (
        b'<text:span text:style-name="Bold">BOLD WORDS</text:span>' in entries(out)["content.xml"]
    )


def make_odp() -> bytes:
    """A slide with a title box and a paragraph with a bold span, and its speaker notes."""
    from odf.draw import Page, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.style import MasterPage, PageLayout

    doc = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    doc.automaticstyles.addElement(layout)
    master = MasterPage(name="Master", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    page = Page(name="page1", masterpagename=master)
    doc.presentation.addElement(page)

    def box(parent, *paragraphs) -> None:
        frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
        parent.addElement(frame)
        text_box = TextBox()
        frame.addElement(text_box)
        for paragraph in paragraphs:
            text_box.addElement(paragraph)

    p = P(text="Hello ")
    p.addElement(Span(stylename=bold, text="bold words"))
    p.addText(" and more.")
    box(page, P(text="The slide title"), p)
    notes = Notes()
    page.addElement(notes)
    box(notes, P(text="Say hello to everyone."))
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def test_odp_translates_slides_and_notes_and_keeps_mimetype_first_and_stored():
    """LibreTranslate translates .odp files (argos-translate-files); they were refused here."""
    src = make_odp()
    out = translate_office(src, upper, LIMITS, "odp")
    assert_only_changed(src, out, {"content.xml"})
    first = zipfile.ZipFile(io.BytesIO(out)).infolist()[0]
    assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED
    got = load(io.BytesIO(out))
    texts = [teletype.extractText(e) for e in got.getElementsByType(P)]
    assert texts == ["THE SLIDE TITLE", "HELLO BOLD WORDS AND MORE.", "SAY HELLO TO EVERYONE."]
    assert (
        b'<text:span text:style-name="Bold">BOLD WORDS</text:span>' in entries(out)["content.xml"]
    )
    # the translated paragraphs are marked with the target's language, as an .odt's
    marked = entries(translate_office(src, upper, LIMITS, "odp", language="de"))["content.xml"]
    assert marked.count(b'text:style-name="Default_de"') == 3
    assert b'fo:language="de"' in marked


def test_an_odp_master_pages_placeholder_prompts_are_not_translated():
    """A master page's placeholder holds a prompt ("Click to edit the title text format"),
    never shown in the slide show: left as it is, as a .pptx master's; its other text (a
    footer typed on the master) is shown on every slide, and translated."""
    parts = entries(make_odp())
    styles = parts["styles.xml"].decode()
    master = (
        '<draw:frame presentation:class="title" presentation:placeholder="true">'
        "<draw:text-box><text:p>Click to edit the title text format</text:p></draw:text-box>"
        "</draw:frame><draw:frame><draw:text-box><text:p>Our company</text:p></draw:text-box>"
        "</draw:frame>"
    )
    styles = re.sub(r"(<style:master-page[^>]*?)/>", rf"\1>{master}</style:master-page>", styles)
    styles = re.sub(r"(<style:master-page[^>]*?[^/])>(?!<draw)", rf"\1>{master}", styles)
    assert styles.count("Click to edit") == 1, styles
    if "xmlns:presentation=" not in styles:
        styles = styles.replace(
            "<office:document-styles ",
            '<office:document-styles xmlns:presentation="urn:oasis:names:tc:opendocument:'
            'xmlns:presentation:1.0" ',
            1,
        )
    parts["styles.xml"] = styles.encode()
    out = entries(translate_office(zip_of(parts), upper, LIMITS, "odp"))["styles.xml"]
    assert b"Click to edit the title text format" in out and b"OUR COMPANY" in out


def test_an_odp_footer_and_header_are_translated_its_fixed_date_and_slide_names_are_not():
    """The footer an .odp's slides show is declared once (`presentation:footer-decl`) and was
    left in the source's language; a slide's name is a link's target, kept."""
    parts = entries(make_odp())
    content = parts["content.xml"].decode()
    decls = (
        '<presentation:footer-decl presentation:name="ftr1">Our company</presentation:footer-decl>'
        '<presentation:header-decl presentation:name="hdr1">Draft</presentation:header-decl>'
        '<presentation:date-time-decl presentation:name="dtd1" presentation:source="fixed">'
        "Monday</presentation:date-time-decl>"
    )
    content = re.sub(r"(<office:presentation>)", rf"\1{decls}", content, count=1)
    assert "footer-decl" in content
    parts["content.xml"] = content.encode()
    out = entries(translate_office(zip_of(parts), upper, LIMITS, "odp"))["content.xml"].decode()
    assert ">OUR COMPANY</presentation:footer-decl>" in out
    assert ">DRAFT</presentation:header-decl>" in out
    assert ">Monday</presentation:date-time-decl>" in out
    assert 'draw:name="page1"' in out


@pytest.mark.parametrize(
    "make", [make_docx, make_pptx, make_odt, make_odp], ids=["docx", "pptx", "odt", "odp"]
)
def test_characters_xml_does_not_allow_in_a_translation_are_left_out(make):
    """A model whose tokenizer falls back to bytes can write control characters: lxml refused
    them (ValueError, a server error for the whole file)."""
    out = translate_office(make(), lambda ts: [t.upper() + "\x01\x00\ufffe" for t in ts], LIMITS)
    parts = entries(out)
    for name in parts:
        if name.endswith(".xml"):
            etree.fromstring(parts[name])  # well-formed
    text = b"".join(v for k, v in parts.items() if k.endswith(".xml"))
    assert b"\x01" not in text and "\ufffe".encode() not in text
    assert any(b"HELLO" in v or b"SLIDE TITLE" in v for v in parts.values())


def test_a_password_protected_odt_is_refused_as_such():
    parts = entries(make_odt())
    manifest = parts["META-INF/manifest.xml"].decode()
    parts["META-INF/manifest.xml"] = manifest.replace(
        'manifest:full-path="content.xml" manifest:media-type="text/xml"/>',
        'manifest:full-path="content.xml" manifest:media-type="text/xml"><manifest:'
        'encryption-data manifest:checksum-type="SHA1/1K" manifest:checksum="x"/>'
        "</manifest:file-entry>",
    ).encode()
    assert b"encryption-data" in parts["META-INF/manifest.xml"]
    parts["content.xml"] = bytes(range(256))  # what an encrypted part reads as
    with pytest.raises(FormatError, match="password-protected; save it without a password"):
        translate_office(zip_of(parts), upper, LIMITS, "odt")


def test_odt_tracked_deletions_are_not_translated():
    """The text of a tracked deletion is hidden until the change is rejected: it was sent to
    the model out of context, and rejecting the change brought back a translated fragment (a
    .docx's deleted text was never sent)."""
    src = make_odt()
    with zipfile.ZipFile(io.BytesIO(src)) as z:
        parts = {i.filename: z.read(i.filename) for i in z.infolist()}
    changes = (
        b'<text:tracked-changes><text:changed-region text:id="ct1"><text:deletion>'
        b"<office:change-info><office:annotation/></office:change-info>"
        b"<text:p>very old words</text:p>"
        b'<draw:frame xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
        b'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0">'
        b"<svg:title>very old picture</svg:title></draw:frame>"
        b"</text:deletion></text:changed-region>"
        b"</text:tracked-changes>"
    )
    parts["content.xml"] = (
        parts["content.xml"]
        .replace(b"<office:text>", b"<office:text>" + changes)
        .replace(b"Hello ", b'Hello <text:change text:change-id="ct1"/>')
    )
    sent: list[str] = []
    out = translate_office(zip_of(parts), lambda ts: sent.extend(ts) or upper(ts), LIMITS)
    assert not any("very" in t for t in sent), sent
    content = entries(out)["content.xml"]
    assert b"<text:p>very old words</text:p>" in content and b"A HEADING" in content


def test_soft_hyphen_characters_do_not_cut_a_word_for_the_model():
    src = entries(make_odt())
    src["content.xml"] = src["content.xml"].replace(
        b"Before a tab", "A transla\u00adtion of the soft\u00adware".encode()
    )
    requests: list[str] = []
    out = translate_office(zip_of(src), lambda ts: requests.extend(ts) or upper(ts), LIMITS)
    assert "A translation of the software" in requests
    assert "A TRANSLATION OF THE SOFTWARE<text:tab/>" in entries(out)["content.xml"].decode()
    src = docx_body("<w:p><w:r><w:t>A transla\u00adtion here.</w:t></w:r></w:p>")
    requests.clear()
    out = translate_office(src, lambda ts: requests.extend(ts) or upper(ts), LIMITS)
    assert requests == ["A translation here."]


def test_odt_two_spaces_inside_a_sentence_do_not_cut_it_in_two():
    src = entries(make_odt())
    # as LibreOffice writes "The cat  sat": the second space as text:s
    src["content.xml"] = src["content.xml"].replace(
        b"Before a tab", b"The cat <text:s/>sat on the mat."
    )
    requests: list[str] = []
    out = translate_office(zip_of(src), whole_or_pieces(True, requests), LIMITS, "odt")
    # it was sent as "The cat" and "sat on the mat.", translated apart
    assert "<g1>The cat </g1><g2>sat on the mat.</g2>" in requests
    assert b"<text:p>THE CAT <text:s/>SAT ON THE MAT.<text:tab/>" in entries(out)["content.xml"]


def test_odt_shape_inside_a_sentence_neither_cuts_it_nor_sends_its_title_with_it():
    src = entries(make_odt())
    svg = (
        'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
        'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"'
    )
    src["content.xml"] = src["content.xml"].replace(
        b"Before a tab",
        f'The chart <draw:rect {svg} text:anchor-type="as-char"><svg:title>Blue box</svg:title>'
        "<svg:desc>A box drawn in blue</svg:desc><text:p>Inside the box</text:p></draw:rect>"
        " shows it.".encode(),
    )
    requests: list[str] = []
    out = translate_office(zip_of(src), whole_or_pieces(True, requests), LIMITS, "odt")
    # it was "<g1>The chart </g1><g2>Blue box</g2><g3>A box drawn in blue</g3>", "shows it."
    assert "<g1>The chart </g1><g2> shows it.</g2>" in requests
    assert {"Blue box", "A box drawn in blue", "Inside the box"} <= set(requests)
    content = entries(out)["content.xml"].decode()
    assert re.search(
        r"<text:p>THE CHART <draw:rect [^>]*><svg:title>\[BLUE BOX\]</svg:title>"
        r"<svg:desc>\[A BOX DRAWN IN BLUE\]</svg:desc><text:p>\[INSIDE THE BOX\]</text:p>"
        "</draw:rect> SHOWS IT.<text:tab/>",
        content,
    )


def test_odt_index_entry_keeps_the_words_it_marks():
    src = entries(make_odt())
    start = b'<text:alphabetical-index-mark-start text:id="IMark1"/>'
    end = b'<text:alphabetical-index-mark-end text:id="IMark1"/>'
    src["content.xml"] = src["content.xml"].replace(
        b"Hello ", b"Hello there, " + start + b"my friend" + end + b", "
    )
    requests: list[str] = []
    out = translate_office(zip_of(src), whole_or_pieces(True, requests), LIMITS, "odt")
    assert "<g1>Hello there, </g1><g2>my friend</g2><g3>, </g3>" in requests[1]
    # before, the words were merged with the text before them: the entry marked nothing
    assert (
        b"HELLO THERE, " + start + b"MY FRIEND" + end + b", <text:span"
        in entries(out)["content.xml"]
    )


def test_odt_soft_page_breaks_in_a_translated_paragraph_are_dropped():
    """A soft page break is where the last layout ended a page: inside a translated paragraph
    it was written after the translation of the words before it (and broke the page there)."""
    src = make_odt()
    with zipfile.ZipFile(io.BytesIO(src)) as z:
        parts = {i.filename: z.read(i.filename) for i in z.infolist()}
    spb = b"<text:soft-page-break/>"
    parts["content.xml"] = (
        parts["content.xml"]
        .replace(b"Hello ", b"Hello there, " + spb + b"my friend, ")
        .replace(b"bold words", b"bold " + spb + b"words")
        .replace(b"<text:h", b"<text:p>12 " + spb + b"34</text:p>" + spb + b"<text:h")
    )
    sent: list[str] = []
    out = translate_office(zip_of(parts), lambda ts: sent.extend(ts) or upper(ts), LIMITS)
    assert "<g1>Hello there, my friend, </g1><g2>bold words</g2><g3> and more.</g3>" in sent
    content = entries(out)["content.xml"]
    assert b"<text:p>HELLO THERE, MY FRIEND, <text:span" in content
    assert b'"Bold">BOLD WORDS</text:span> AND MORE.</text:p>' in content
    # between paragraphs, and in a paragraph without words to translate, it stays
    assert b"<text:p>12 " + spb + b"34</text:p>" + spb + b"<text:h" in content
    assert content.count(spb) == 2
    got = load(io.BytesIO(out))
    assert (
        teletype.extractText(got.text.childNodes[3])
        == "HELLO THERE, MY FRIEND, BOLD WORDS AND MORE."
    )


def test_odt_table_of_contents_title_and_entry_text_are_translated_in_its_template_too():
    """An index is made again from its template when it is updated: the template's title was
    not translated, and updating the table of contents brought back "Table of Contents"."""
    doc = OpenDocumentText()
    toc = TableOfContent(name="Table of Contents1")
    source = TableOfContentSource(outlinelevel=10)
    source.addElement(IndexTitleTemplate(text="Table of Contents"))
    entry = TableOfContentEntryTemplate(outlinelevel=1, stylename="Contents_20_1")
    entry.addElement(IndexEntryText())
    entry.addElement(IndexEntrySpan(text=" on page "))
    entry.addElement(IndexEntryPageNumber())
    source.addElement(entry)
    toc.addElement(source)
    body = IndexBody()
    title = IndexTitle(name="Table of Contents1_Head")
    title.addElement(P(text="Table of Contents"))
    body.addElement(title)
    body.addElement(P(text="Introduction on page 1"))
    toc.addElement(body)
    doc.text.addElement(toc)
    doc.text.addElement(H(outlinelevel=1, text="Introduction"))
    buf = io.BytesIO()
    doc.save(buf)
    out = translate_office(buf.getvalue(), upper, LIMITS, "odt")
    content = entries(out)["content.xml"].decode()
    assert "<text:index-title-template>TABLE OF CONTENTS</text:index-title-template>" in content
    assert "<text:index-entry-span> ON PAGE </text:index-entry-span>" in content
    assert "<text:p>TABLE OF CONTENTS</text:p>" in content
    assert "Table of Contents" not in content.replace('text:name="Table of Contents1', "")


def zip_of(files: dict[str, bytes], method=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_a_zip_bomb_is_refused_before_it_is_unpacked():
    bomb = zip_of({"word/document.xml": b"<a/>", "word/media/big.bin": b"\0" * (8 << 20)})
    with pytest.raises(FormatError, match="zip bomb") as caught:
        translate_office(bomb, upper, LIMITS)
    assert caught.value.status == 413
    with pytest.raises(FormatError, match="unpacks to") as caught:
        translate_office(bomb, upper, Limits(max_unpacked_bytes=1 << 20))
    assert caught.value.status == 413
    many = zip_of({f"f{i}": b"" for i in range(30)})
    with pytest.raises(FormatError, match="30 entries"):
        translate_office(many, upper, Limits(max_entries=20))


def test_a_lying_size_in_the_zip_directory_is_caught_while_reading():
    src = bytearray(make_docx())
    # the central directory says word/document.xml is 10 bytes long; it inflates to more
    name = b"word/document.xml"
    at = src.rfind(b"PK\x01\x02", 0, src.rfind(name))
    src[at + 24 : at + 28] = (10).to_bytes(4, "little")
    with pytest.raises(FormatError):
        translate_office(bytes(src), upper, LIMITS)


def needs_version(data: bytes, version: int) -> bytes:
    """`data`, a zip archive, whose first central directory entry needs `version` (tenths)."""
    out = bytearray(data)
    out[out.find(b"PK\x01\x02") + 6] = version
    return bytes(out)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"not a zip at all", "not a valid zip"),
        # a .doc, or a .docx saved with a password (an OLE2 compound file): "not a valid zip"
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504), "password-protected document"),
        (make_docx()[:2000], "not a valid zip"),
        # the central directory says "version needed to extract: 6.4" (zipfile knows 6.3)
        (needs_version(make_docx(), 64), "needs a newer unzip"),
        (zip_of({"word/document.xml": b"<w:document><w:p>broken"}), "not well-formed XML"),
        (zip_of({"other.xml": b"<a/>"}), "not a Word, PowerPoint or OpenDocument"),
        (
            zip_of({"content.xml": b'<!DOCTYPE x [<!ENTITY e "boom">]><x>&e;</x>'}),
            "DOCTYPE",
        ),
    ],
)
def test_broken_office_files_are_refused(data, message):
    with pytest.raises(FormatError, match=message) as caught:
        translate_office(data, upper, LIMITS)
    assert caught.value.status == 400


def test_an_office_file_of_another_kind_than_its_extension_is_refused():
    # a Word document named x.odt was translated and served as x_de.odt, typed as an .odt
    ods = zip_of(
        {"mimetype": b"application/vnd.oasis.opendocument.spreadsheet", "content.xml": b"<a/>"}
    )
    for name, data, what in [
        ("x.odt", make_docx(), "a Word document (.docx)"),
        ("x.pptx", make_odt(), "an OpenDocument text (.odt)"),
        ("x.docx", make_pptx(), "a PowerPoint presentation (.pptx)"),
        ("x.odt", ods, "'application/vnd.oasis.opendocument.spreadsheet'"),
        ("x.odp", ods, "'application/vnd.oasis.opendocument.spreadsheet'"),
        ("x.odt", make_odp(), "an OpenDocument presentation (.odp)"),
        ("x.odp", make_odt(), "an OpenDocument text (.odt)"),
    ]:
        with pytest.raises(FormatError, match="not what its extension") as caught:
            handler_for(name)(data, upper, LIMITS)
        assert caught.value.status == 400 and what in str(caught.value)
    for name, data in [
        ("x.docx", make_docx()),
        ("x.pptx", make_pptx()),
        ("x.odt", make_odt()),
        ("x.odp", make_odp()),
    ]:
        assert handler_for(name)(data, upper, LIMITS)


def test_handlers_by_extension():
    assert handler_for("a/b/Report.DOCX").func is translate_office
    assert handler_for("a/b/Report.DOCX").keywords == {"kind": "docx", "language": None}
    assert handler_for("x.odt", "de").keywords == {"kind": "odt", "language": "de"}
    assert handler_for("notes.md", "de").func is translate_markdown
    assert handler_for("notes.md", "de").keywords == {"target": "de"}
    assert handler_for("x.exe") is None and handler_for("noextension") is None


def test_safe_names_drop_folders_and_odd_characters():
    assert safe_name("../../etc/passwd.txt", "de") == "passwd_de.txt"
    assert safe_name("C:\\Users\\me\\Bericht über.docx", "en") == "Bericht_über_en.docx"
    assert safe_name('"; rm -rf.html', "de") == "rm_-rf_de.html"
    assert safe_name(".hidden.md", "de/../x") == "hidden_de_.._x.md"


def test_file_store_ids_expiry_and_total_size(tmp_path):
    store = FileStore(tmp_path / "files", ttl_s=60, max_total_bytes=10)
    put, get = (lambda *a: asyncio.run(store.put(*a))), (lambda i: asyncio.run(store.get(i)))
    file_id = put(b"12345", "a.txt", "text/plain")
    assert [p.name for p in (tmp_path / "files").iterdir()] == [f"{file_id}.mtfile"]
    assert get(file_id)[1] == b"12345"
    assert get("../../etc/passwd") is None and get("x" * 24) is None
    with pytest.raises(StoreFull):
        put(b"123456", "b.txt", "text/plain")
    store.index[file_id].expires = time.monotonic()
    assert get(file_id) is None  # expired: gone from the index and the disk
    assert list((tmp_path / "files").iterdir()) == []
    put(b"123456", "b.txt", "text/plain")  # fits again
    # a new store in the same folder removes what an earlier process left
    FileStore(tmp_path / "files", ttl_s=60, max_total_bytes=10)
    assert list((tmp_path / "files").iterdir()) == []


def test_a_file_larger_than_the_store_keeps_in_all_is_too_large_not_full(tmp_path):
    """It was StoreFull (503 with Retry-After), though no wait could ever make it fit."""
    store = FileStore(tmp_path / "files", ttl_s=60, max_total_bytes=10)
    put = lambda *a: asyncio.run(store.put(*a))  # noqa: E731
    with pytest.raises(TooLarge) as err:
        put(b"12345678901", "a.txt", "text/plain")
    assert (err.value.size, err.value.limit) == (11, 10)
    assert list((tmp_path / "files").iterdir()) == []
    put(b"1234567890", "a.txt", "text/plain")  # as large as kept in all: fits
    with pytest.raises(StoreFull):
        put(b"1", "b.txt", "text/plain")


class SlowDisk:
    """FileStore's writes wait for `go`; `done` is set after each write (or its failure)."""

    def __init__(self, monkeypatch):
        import app.files as files_module

        self.go, self.done = threading.Event(), threading.Event()
        write = files_module._write_new

        def slow_write(path, data):
            try:
                assert self.go.wait(10)
                write(path, data)
            finally:
                self.done.set()

        monkeypatch.setattr(files_module, "_write_new", slow_write)


def test_the_file_store_writes_and_reads_off_the_event_loop(tmp_path, monkeypatch):
    """Its disk work ran on the event loop (up to MT_FILES_MAX_TOTAL_BYTES at once), holding
    every other request up meanwhile. While a slow disk writes a file, the loop goes on; the
    file's room is counted (a file refused meanwhile is told to wait as long as the file
    being written will be kept), and it is not found until written; a request cancelled
    while its file is written leaves nothing on disk."""
    store = FileStore(tmp_path / "files", ttl_s=600, max_total_bytes=10)
    disk = SlowDisk(monkeypatch)

    async def scenario():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        tick = asyncio.create_task(ticker())
        putting = asyncio.create_task(store.put(b"123456", "a.txt", "text/plain"))
        await asyncio.sleep(0.1)  # the write waits for `go`: the loop goes on
        assert ticks > 10 and not putting.done()
        (file_id,) = store.index
        assert await store.get(file_id) is None  # not written yet
        with pytest.raises(StoreFull) as full:  # its room is taken
            await store.put(b"12345", "b.txt", "text/plain")
        assert full.value.retry_after_s == 601  # (it was 1 s: a retry every second)
        disk.go.set()
        assert await putting == file_id
        entry, data = await store.get(file_id)
        assert data == b"123456" and entry.expires < float("inf")
        # cancelled while written: no entry, and no file once the thread is done
        disk.go.clear()
        disk.done.clear()
        cancelled = asyncio.create_task(store.put(b"1234", "c.txt", "text/plain"))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert list(store.index) == [file_id]
        disk.go.set()
        assert await asyncio.to_thread(disk.done.wait, 10)
        await asyncio.sleep(0.05)  # the removal after the write, on the loop
        tick.cancel()
        return file_id

    file_id = asyncio.run(scenario())
    assert [p.name for p in (tmp_path / "files").iterdir()] == [f"{file_id}.mtfile"]


@pytest.mark.parametrize("own_folder", [False, True])
def test_a_file_written_while_the_store_closes_is_not_kept(tmp_path, monkeypatch, own_folder):
    """The server stops while a translated file is written: its put raises StoreClosed (the
    route answers 503), and nothing is left on disk. (The file stayed in a configured folder
    under a dead link; in the store's own folder, removed meanwhile, the write failed: a 500.)"""
    from app.files import StoreClosed

    store = FileStore(None if own_folder else tmp_path / "files", ttl_s=60, max_total_bytes=10)
    folder = store.directory
    disk = SlowDisk(monkeypatch)

    async def scenario():
        putting = asyncio.create_task(store.put(b"123", "a.txt", "text/plain"))
        await asyncio.sleep(0.05)
        store.close()
        disk.go.set()
        with pytest.raises(StoreClosed):
            await putting
        with pytest.raises(StoreClosed):  # and a later one is refused at once
            await store.put(b"1", "b.txt", "text/plain")

    asyncio.run(scenario())
    assert not folder.exists() if own_folder else list(folder.iterdir()) == []


def test_a_write_that_fails_leaves_no_partial_file(tmp_path, monkeypatch):
    """A full disk: the half-written `.partial` stayed in a configured folder for good (a new
    store removed only whole files an earlier process left)."""
    store = FileStore(tmp_path / "files", ttl_s=60, max_total_bytes=10)

    class FullDisk(io.BytesIO):
        def write(self, data):
            raise OSError(28, "No space left on device")

    real_fdopen = os.fdopen

    def fdopen(fd, *args, **kwargs):
        real_fdopen(fd, *args, **kwargs).close()
        return FullDisk()

    monkeypatch.setattr(os, "fdopen", fdopen)
    with pytest.raises(OSError, match="No space"):
        asyncio.run(store.put(b"123", "a.txt", "text/plain"))
    monkeypatch.undo()
    assert list((tmp_path / "files").iterdir()) == [] and not store.index
    leftover = tmp_path / "files" / ("A" * 24 + ".partial")  # a process killed mid-write
    leftover.write_bytes(b"12")
    FileStore(tmp_path / "files", ttl_s=60, max_total_bytes=10)
    assert not leftover.exists()


def test_txt_lines_of_nothing_but_addresses_stay_as_they_are():
    # a URL starts with a lowercase letter: it went on the paragraph before it ("Links:"),
    # whose translation was then spread over the links' lines
    data = (
        b"Links:\nhttps://example.com/one\nwww.example.org/two\n\n"
        b"Read the notes at\nhttps://example.com/docs before you start.\n"
    )
    sent: list[str] = []

    def record(texts: list[str]) -> list[str]:
        sent.extend(texts)
        return upper(texts)

    out = translate_txt(data, record, LIMITS)
    assert sent == ["Links:", "Read the notes at https://example.com/docs before you start."]
    assert out.decode().splitlines()[:3] == [
        "LINKS:",
        "https://example.com/one",
        "www.example.org/two",
    ]


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
@pytest.mark.parametrize(
    ("handler", "text"),
    [
        (translate_txt, "Hello world.\r\n"),
        (translate_srt, "1\r\n00:00:01,000 --> 00:00:02,000\r\nHello world.\r\n"),
        (translate_markdown, "# Hello\r\n\r\nWorld.\r\n"),
        (handler_for("a.html"), "<p>Hello world.</p>\r\n"),
    ],
)
def test_utf16_files_keep_their_byte_order(codec, handler, text):
    bom = codecs.BOM_UTF16_LE if codec == "utf-16-le" else codecs.BOM_UTF16_BE
    out = handler(bom + text.encode(codec), upper, LIMITS)
    # a big-endian file came back little-endian (Python's "utf-16" writes the machine's order)
    assert out.startswith(bom)
    assert out[2:].decode(codec).lower() == text.lower()


@pytest.mark.parametrize(
    "front",
    [
        "---\ntitle: Hello world\nauthor: The cat\n---\n",
        "---\r\ntitle: Hello\r\ntags: [a, b]\r\n...\r\n",
        '+++\ntitle = "Hello world"\n+++\n',
    ],
)
def test_markdown_front_matter_is_copied_as_written(front):
    # CommonMark reads "---" as a thematic break and the lines to the next "---" as a setext
    # heading: the metadata was translated and its lines joined into one
    body = "\n# My house\n\nWe eat bread.\n"
    out = translate_markdown((front + body).encode(), upper, LIMITS).decode()
    assert out == front + body.upper()


def test_markdown_thematic_breaks_around_a_paragraph_are_no_front_matter():
    src = "---\n\nWe eat bread.\n\n---\n"
    assert translate_markdown(src.encode(), upper, LIMITS).decode() == src.upper()


def test_a_decomposed_file_name_keeps_its_letters():
    # macOS names files decomposed: "u" + U+0308; the mark became "_" ("Bericht_u_ber_de.docx")
    assert safe_name("Bericht u\u0308ber.docx", "de") == "Bericht_\u00fcber_de.docx"


def test_a_file_name_in_a_script_with_vowel_signs_keeps_them():
    """Devanagari, Tamil, Bengali, Thai vowel signs and Hebrew points are combining marks that
    no composed character replaces: each became `_` (`रिपोर्ट.docx` came back as
    `र_प_र_ट_de.docx`)."""
    for name in ("रिपोर्ट", "அறிக்கை", "দলিল", "ที่นี่", "תַּלְמוּד"):
        assert safe_name(f"{name}.docx", "de") == f"{name}_de.docx"
    assert safe_name("a\u200fb\u0301c.txt", "de") == "a_b\u0301c_de.txt"  # a mark, a bidi mark
    # marks that show nothing (the grapheme joiner, a variation selector), or follow no letter
    assert safe_name("a\u034f\u034fb\ufe0fc.txt", "de") == "a_b_c_de.txt"
    assert safe_name("\u0301\u0301.txt", "de") == "document_de.txt"


def test_a_file_name_keeps_its_zero_width_joiners():
    """Persian writes a zero-width non-joiner inside words (`گزارش‌ها`, "reports"), Indic
    scripts a joiner or non-joiner to choose a letter's form: each became `_`
    (`گزارش_ها_de.docx`). Other invisible characters (a right-to-left override) still do."""
    assert safe_name("گزارش\u200cها.docx", "de") == "گزارش\u200cها_de.docx"
    assert safe_name("क्\u200dष.txt", "de") == "क्\u200dष_de.txt"
    assert safe_name("a\u202egpj.txt", "de") == "a_gpj_de.txt"


def test_the_escapes_browsers_write_in_a_file_name_are_decoded():
    # browsers and curl send `"` as %22: `"weird".txt` came back as `22weird_22_de.txt`
    assert form_filename("%22weird%22.txt") == '"weird".txt'
    assert safe_name(form_filename("%22weird%22.txt"), "de") == "weird_de.txt"
    assert form_filename("a%0D%0Ab.txt") == "a\r\nb.txt"
    assert form_filename("100%25 %41.txt") == "100%25 %41.txt"  # no other escape is made


def docx_body(paragraphs: str) -> bytes:
    """A Word document whose body is `paragraphs` (w:p elements written by hand)."""
    d = docx.Document()
    ns = f'xmlns:w="{WORD}"'
    for i, p in enumerate(re.findall(r"<w:p>.*?</w:p>", paragraphs)):
        d.element.body.insert(i, parse_xml(p.replace("<w:p>", f"<w:p {ns}>", 1)))
    d.core_properties.comments = ""  # python-docx's "generated by python-docx", translated
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


#: the elements `word_texts` lists by their name
WORD_MARKS = ["del", "noBreakHyphen", "softHyphen", "sym", "pgNum", "dayLong", "monthLong"]
WORD_MARKS += ["footnoteReference", "lastRenderedPageBreak"]


def word_texts(data: bytes) -> list[list[str]]:
    """Each body paragraph's children in order: a w:t's text, or the name of one of
    WORD_MARKS."""
    root = etree.fromstring(entries(data)["word/document.xml"])
    out = []
    for p in root.iter(f"{{{WORD}}}p"):
        items = []
        for el in p.iter(f"{{{WORD}}}t", *(f"{{{WORD}}}{m}" for m in WORD_MARKS)):
            items.append(el.text or "" if el.tag == f"{{{WORD}}}t" else etree.QName(el).localname)
        out.append(items)
    return out


def test_docx_deletion_and_non_breaking_hyphen_stay_between_their_words():
    src = docx_body(
        '<w:p><w:r><w:t xml:space="preserve">The cat </w:t></w:r>'
        '<w:del w:id="1" w:author="A"><w:r><w:delText xml:space="preserve">very </w:delText>'
        "</w:r></w:del><w:r><w:t>is big.</w:t></w:r></w:p>"
        '<w:p><w:r><w:t xml:space="preserve">Send an e</w:t><w:noBreakHyphen/>'
        "<w:t>mail today.</w:t></w:r></w:p>"
    )
    out = translate_office(src, drop_placeholders, LIMITS, "docx")
    # before, the runs on each side were one: the deleted word and the hyphen came after
    # the whole sentence ("THE CAT IS BIG.", del, "")
    assert word_texts(out)[:2] == [
        ["THE CAT ", "del", "IS BIG."],
        ["SEND AN E", "noBreakHyphen", "MAIL TODAY."],
    ]
    assert b"very " in entries(out)["word/document.xml"]  # deleted text: never translated


def test_docx_text_moved_away_is_not_sent_with_the_sentence_it_left():
    src = docx_body(
        '<w:p><w:r><w:t xml:space="preserve">The cat </w:t></w:r><w:moveFrom w:id="3" '
        'w:author="A"><w:r><w:t xml:space="preserve">really </w:t></w:r></w:moveFrom>'
        "<w:r><w:t>is big.</w:t></w:r></w:p>"
    )
    requests: list[str] = []
    out = translate_office(src, whole_or_pieces(True, requests), LIMITS, "docx")
    # it was "<g1>The cat </g1><g2>really </g2><g3>is big.</g3>"
    assert requests[0] == "<g1>The cat </g1><g2>is big.</g2>"
    assert word_texts(out)[0] == ["THE CAT ", "really ", "IS BIG."]


def test_docx_page_number_date_and_symbol_stay_between_their_words_soft_hyphens_go():
    src = docx_body(
        '<w:p><w:r><w:t xml:space="preserve">Page </w:t></w:r><w:r><w:pgNum/></w:r>'
        '<w:r><w:t xml:space="preserve"> of the report.</w:t></w:r></w:p>'
        '<w:p><w:r><w:t xml:space="preserve">Today is </w:t><w:dayLong/>'
        '<w:t xml:space="preserve">, in </w:t><w:monthLong/><w:t> this year.</w:t></w:r></w:p>'
        '<w:p><w:r><w:t xml:space="preserve">Click </w:t><w:sym w:font="Wingdings" w:char="F0E0"/>'
        '<w:t xml:space="preserve"> to go on.</w:t></w:r></w:p>'
        '<w:p><w:r><w:t xml:space="preserve">A transla</w:t><w:softHyphen/>'
        "<w:t>tion of it.</w:t></w:r></w:p>"
    )
    requests: list[str] = []
    out = translate_office(src, whole_or_pieces(True, requests), LIMITS, "docx")
    # before, the page number and the date came after the sentence ("PAGE OF THE REPORT.",
    # "pgNum", ""), the symbol cut it in two, and the soft hyphen ended the word's translation
    assert word_texts(out)[:4] == [
        ["PAGE ", "pgNum", " OF THE REPORT."],
        ["TODAY IS ", "dayLong", ", IN ", "monthLong", " THIS YEAR."],
        ["CLICK ", "sym", " TO GO ON."],
        ["[A TRANSLATION OF IT.]", ""],
    ]
    # the sentence is sent whole, the word with a soft hyphen as one word
    assert "<g1>Click </g1><g2> to go on.</g2>" in requests
    assert "A translation of it." in requests


def test_office_paragraph_that_comes_back_as_sent_is_left_as_it_is():
    """A paragraph the model gives back unchanged (already in the target's language) keeps its
    soft hyphens, spacing and page break hints (they were dropped as from a translation)."""
    german = (
        '<w:p><w:r><w:lastRenderedPageBreak/><w:t xml:space="preserve">Eine  \u00dcber</w:t>'
        "<w:softHyphen/><w:t>setzung der Soft\u00adware.</w:t></w:r></w:p>"
    )
    src = docx_body(german + "<w:p><w:r><w:t>A translation.</w:t></w:r></w:p>")

    def english_only(texts: list[str]) -> list[str]:
        return [t.upper() if t.startswith("A ") else t for t in texts]

    out = translate_office(src, english_only, LIMITS, "docx")
    assert word_texts(out)[:2] == [
        ["lastRenderedPageBreak", "Eine  \u00dcber", "softHyphen", "setzung der Soft\u00adware."],
        ["A TRANSLATION."],
    ]
    odt = entries(make_odt())
    odt["content.xml"] = odt["content.xml"].replace(
        b"Before a tab", "Die Soft\u00adware<text:s/> l\u00e4uft".encode()
    )
    out = entries(translate_office(zip_of(odt), lambda texts: texts, LIMITS))
    assert "Die Soft\u00adware<text:s/> l\u00e4uft<text:tab/>" in out["content.xml"].decode()


def test_docx_last_rendered_page_break_in_a_translated_paragraph_is_dropped():
    """Where the last layout ended a page: it was left after the sentence's translation
    (where tools that read it, python-docx's rendered_page_breaks, took the page to end)."""
    src = docx_body(
        '<w:p><w:r><w:t xml:space="preserve">End of page one </w:t></w:r>'
        "<w:r><w:lastRenderedPageBreak/><w:t>and the rest.</w:t></w:r></w:p>"
        "<w:p><w:r><w:lastRenderedPageBreak/><w:t>42</w:t></w:r></w:p>"
    )
    out = translate_office(src, upper, LIMITS, "docx")
    assert word_texts(out)[:2] == [
        ["END OF PAGE ONE AND THE REST.", ""],
        ["lastRenderedPageBreak", "42"],
    ]


def test_docx_equation_inside_a_sentence_stays_between_its_words():
    math = 'xmlns:m="http://schemas.openxmlformats.org/officeDocument/2006/math"'
    src = docx_body(
        '<w:p><w:r><w:t xml:space="preserve">The value </w:t></w:r>'
        f"<m:oMath {math}><m:r><m:t>x+1</m:t></m:r></m:oMath>"
        '<w:r><w:t xml:space="preserve"> is positive.</w:t></w:r></w:p>'
    )
    requests: list[str] = []
    out = translate_office(src, whole_or_pieces(True, requests), LIMITS, "docx")
    assert requests[0] == "<g1>The value </g1><g2> is positive.</g2>"
    # before, the equation came after the sentence: "THE VALUE IS POSITIVE.", x+1, ""
    xml = entries(out)["word/document.xml"].decode()
    assert re.search(
        r">THE VALUE </w:t></w:r><m:oMath>.*>x\+1<.*</m:oMath><w:r>.*> IS POSITIVE.<", xml
    )


def test_a_note_reference_inside_a_sentence_does_not_cut_it_in_two():
    """A sentence with a footnote's number in it was sent as two texts, translated apart."""
    src = docx_body(
        '<w:p><w:r><w:t xml:space="preserve">According to Smith</w:t></w:r><w:r><w:rPr>'
        '<w:rStyle w:val="FootnoteReference"/></w:rPr><w:footnoteReference w:id="1"/></w:r>'
        '<w:r><w:t xml:space="preserve">, cats sleep a lot.</w:t></w:r></w:p>'
    )
    requests: list[str] = []
    out = translate_office(src, whole_or_pieces(True, requests), LIMITS, "docx")
    assert requests[0] == "<g1>According to Smith</g1><g2>, cats sleep a lot.</g2>"
    assert word_texts(out)[0] == ["ACCORDING TO SMITH", "footnoteReference", ", CATS SLEEP A LOT."]

    doc = OpenDocumentText()
    p = P(text="According to Smith")
    note = Note(id="ftn1", noteclass="footnote")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text="Smith, Cats, 2020."))
    note.addElement(body)
    p.addElement(note)
    p.addText(", cats sleep a lot.")
    doc.text.addElement(p)
    buf = io.BytesIO()
    doc.save(buf)
    requests.clear()
    out = translate_office(buf.getvalue(), whole_or_pieces(True, requests), LIMITS, "odt")
    assert requests[0] == "<g1>According to Smith</g1><g2>, cats sleep a lot.</g2>"
    assert "[SMITH, CATS, 2020.]" in entries(out)["content.xml"].decode()  # the note itself
    got = load(io.BytesIO(out))
    assert teletype.extractText(got.text.childNodes[0]) == (
        "ACCORDING TO SMITH1[SMITH, CATS, 2020.], CATS SLEEP A LOT."
    )


def test_a_picture_or_text_box_inside_a_sentence_does_not_cut_it_in_two():
    """The words on each side of an inline picture or a text box's anchor were sent as two
    texts, translated apart; the text box's own paragraph is translated on its own."""
    ns = (
        'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
        'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
        'xmlns:v="urn:schemas-microsoft-com:vml"'
    )
    box = "<w:txbxContent><w:p><w:r><w:t>Boxed words.</w:t></w:r></w:p></w:txbxContent>"
    d = docx.Document()
    paragraph = parse_xml(
        f'<w:p xmlns:w="{WORD}"><w:r><w:t xml:space="preserve">Look at the box </w:t></w:r>'
        f'<w:r><mc:AlternateContent {ns}><mc:Choice Requires="wps"><w:drawing><wps:txbx>{box}'
        f"</wps:txbx></w:drawing></mc:Choice><mc:Fallback><w:pict><v:textbox>{box}"
        "</v:textbox></w:pict></mc:Fallback></mc:AlternateContent></w:r>"
        '<w:r><w:t xml:space="preserve"> and read it.</w:t></w:r></w:p>'
    )
    d.element.body.insert(0, paragraph)
    buf = io.BytesIO()
    d.save(buf)
    requests: list[str] = []
    out = translate_office(buf.getvalue(), whole_or_pieces(True, requests), LIMITS, "docx")
    assert requests[0] == "<g1>Look at the box </g1><g2> and read it.</g2>"
    # the text box, and its copy for old readers: the same text, sent once, written in both
    assert requests.count("Boxed words.") == 1
    root = etree.fromstring(entries(out)["word/document.xml"])
    texts = [t.text for t in root.iter(f"{{{WORD}}}t")]
    assert texts[:4] == ["LOOK AT THE BOX ", "[BOXED WORDS.]", "[BOXED WORDS.]", " AND READ IT."]

    doc = OpenDocumentText()
    p = P(text="Click ")
    frame = Frame(anchortype="as-char", width="1cm", height="1cm")
    frame.addElement(Image(href="Pictures/icon.png"))
    p.addElement(frame)
    p.addText(" to save.")
    doc.text.addElement(p)
    buf = io.BytesIO()
    doc.save(buf)
    requests.clear()
    out = translate_office(buf.getvalue(), whole_or_pieces(True, requests), LIMITS, "odt")
    assert requests[0] == "<g1>Click </g1><g2> to save.</g2>"
    assert re.search(
        r"<text:p>CLICK <draw:frame .*</draw:frame> TO SAVE.</text:p>",
        entries(out)["content.xml"].decode(),
    )


def test_a_long_paragraph_of_many_runs_is_sent_by_runs_when_whole_it_is_over_the_limit():
    """Its placeholders took it over the limit of a text sent (a 413 from the service for a
    paragraph whose text is within it); by runs, each piece is within it."""
    runs = "".join(
        f'<w:r>{"<w:rPr><w:b/></w:rPr>" if i % 2 else ""}<w:t xml:space="preserve">'
        f"word{i:02} </w:t></w:r>"
        for i in range(20)
    )
    src = docx_body(f"<w:p>{runs}</w:p>")
    limits = Limits(max_request_chars=200)  # the text: 140 characters; whole: 342
    requests: list[str] = []
    out = translate_office(src, whole_or_pieces(True, requests), limits, "docx")
    assert max(map(len, requests)) <= 200
    assert word_texts(out)[0] == [f"[WORD{i:02}] " for i in range(20)]


def test_docx_nested_field_result_inside_a_field_code_is_not_translated():
    def field(kind: str) -> str:
        return f'<w:r><w:fldChar w:fldCharType="{kind}"/></w:r>'

    src = docx_body(
        "<w:p>"
        + field("begin")
        + '<w:r><w:instrText xml:space="preserve"> IF </w:instrText></w:r>'
        + field("begin")
        + "<w:r><w:instrText> MERGEFIELD Gender </w:instrText></w:r>"
        + field("separate")
        + "<w:r><w:t>male</w:t></w:r>"
        + field("end")
        + '<w:r><w:instrText xml:space="preserve"> = "male" "Sir" "Madam" </w:instrText></w:r>'
        + field("separate")
        + "<w:r><w:t>Dear Sir</w:t></w:r>"
        + field("end")
        + "</w:p>"
    )
    requests: list[str] = []

    def fake(texts: list[str]) -> list[str]:
        requests.extend(texts)
        return upper(texts)

    out = translate_office(src, fake, LIMITS, "docx")
    # the nested MERGEFIELD's result is part of the IF field's code; the IF's result is text
    assert word_texts(out)[0] == ["male", "DEAR SIR"]
    # never the compared "male"; the texts the IF shows are (tests/test_office_fields.py)
    assert requests == ["Dear Sir", "Sir", "Madam"]


#: bytes that are text in no encoding (no NUL among them)
NOT_TEXT = bytes(range(1, 256)) * 3


@pytest.mark.parametrize(
    ("data", "charset", "want"),
    [
        # the reproduction: refused as "not valid UTF-8" (Windows Notepad, windows-1252)
        (b"Caf\xe9 au lait.\n", "windows-1252", "CAFÉ AU LAIT.\n"),
        (
            "Il était une fois, à côté de la forêt, un garçon qui s’appelait Léon.\r\n".encode(
                "cp1252"
            ),
            "windows-1252",
            "IL ÉTAIT UNE FOIS, À CÔTÉ DE LA FORÊT, UN GARÇON QUI S’APPELAIT LÉON.\r\n",
        ),
        (
            "Привет, мир! Как дела? Всё хорошо. Сегодня мы пойдём в парк.\n".encode("koi8-r"),
            "KOI8-R",
            "ПРИВЕТ, МИР! КАК ДЕЛА? ВСЁ ХОРОШО. СЕГОДНЯ МЫ ПОЙДЁМ В ПАРК.\n",
        ),
        (
            "Привет, мир! Как дела? Всё хорошо. Сегодня мы пойдём в парк.\n".encode("cp1251"),
            "windows-1251",
            "ПРИВЕТ, МИР! КАК ДЕЛА? ВСЁ ХОРОШО. СЕГОДНЯ МЫ ПОЙДЁМ В ПАРК.\n",
        ),
        (
            "こんにちは、世界。今日はいい天気ですね。明日は雨が降るそうです。\n".encode(
                "shift_jis"
            ),
            "Shift_JIS",
            "こんにちは、世界。今日はいい天気ですね。明日は雨が降るそうです。\n",
        ),
        (
            "你好，世界。今天天气很好。我们去公园散步吧。\n".encode("gb18030"),
            "gb18030",
            "你好，世界。今天天气很好。我们去公园散步吧。\n",
        ),
    ],
)
def test_a_text_file_in_a_legacy_encoding_is_translated_and_written_back_in_it(data, charset, want):
    # each was refused with 400 "not valid UTF-8"
    out = translate_txt(data, upper, LIMITS)
    assert out.decode(lookup(charset).codec) == want
    assert content_type("a.txt", out) == f"text/plain; charset={charset}"
    md = translate_markdown(data, upper, LIMITS)
    assert md.decode(lookup(charset).codec) == want
    assert content_type("a.md", md) == f"text/markdown; charset={charset}"


@pytest.mark.parametrize(
    ("text", "codec", "charset"),
    [
        # Turkish: it was read as windows-1252 ("Şişli" as "Þiþli", "ışık" as "ýþýk")
        ("Şişli'de buluşalım.\n", "cp1254", "windows-1254"),
        (
            "Bugün hava çok güzel, dışarıda yürüyüşe çıkmak istiyorum. Şehrin ışıkları gece "
            "boyunca parlıyor.\r\n",
            "cp1254",
            "windows-1254",
        ),
        (
            "1\n00:00:01,000 --> 00:00:02,000\nNe yapıyorsun? Bilmiyorum.\n",
            "cp1254",
            "windows-1254",
        ),
        # the same bytes in Icelandic and Faroese are windows-1252's letters
        ("Það er gott.\n", "cp1252", "windows-1252"),
        (
            "Þetta er íslenskur texti með þ og ð stöfum. Ég fór í búðina.\n",
            "cp1252",
            "windows-1252",
        ),
        ("Hann býr í Tórshavn, í Norðuratlantshavi.\n", "cp1252", "windows-1252"),
    ],
    ids=["tr-short", "tr", "tr-srt", "is-short", "is", "fo"],
)
def test_turkish_in_windows_1254_is_not_read_as_windows_1252(text, codec, charset):
    sent: list[str] = []

    def same(texts: list[str]) -> list[str]:
        sent.extend(texts)
        return texts

    handler = translate_srt if text.startswith("1\n") else translate_txt
    out = handler(text.encode(codec), same, LIMITS)
    assert "".join(sent) == "".join(text.splitlines()[-1:])
    assert out == text.encode(codec)
    assert content_type("a.txt", out) == f"text/plain; charset={charset}"


def test_a_legacy_srt_is_translated_and_written_back_in_its_encoding():
    src = "1\r\n00:00:01,000 --> 00:00:02,000\r\nJ’ai vu l’été – déjà.\r\n\r\n"
    out = translate_srt(src.encode("cp1252"), upper, LIMITS)
    assert out == src.upper().encode("cp1252")


def test_a_translation_that_does_not_fit_the_legacy_encoding_is_written_in_utf8_with_a_bom():
    data = "Привет, мир! Как дела? Всё хорошо. Сегодня мы пойдём в парк.\n".encode("cp1251")
    out = translate_txt(data, add_words, LIMITS)  # "Grüße": ü and ß are not in windows-1251
    assert out.startswith(codecs.BOM_UTF8)
    assert out.decode("utf-8-sig").endswith(" Grüße жук\n")
    assert content_type("a.txt", out) == "text/plain; charset=utf-8"
    fits = translate_txt(data, lambda ts: [t + " жук" for t in ts], LIMITS)
    assert fits.decode("cp1251").endswith("парк. жук\n")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (NOT_TEXT, "nor text in another encoding that could be recognised; save it as UTF-8"),
        (b"\x00\xff" * 40, "NUL characters"),
        (  # too short to tell windows-1251 from Greek or Thai: refused rather than misread
            "Привет, мир!\n".encode("cp1251"),
            r"its encoding could not be told: it reads as .*windows-1251 \('Привет, мир!'\)",
        ),
    ],
)
def test_a_file_whose_encoding_cannot_be_told_is_refused(data, message):
    for handler in (translate_txt, translate_srt, translate_markdown):
        with pytest.raises(FormatError, match=message):
            handler(data, upper, LIMITS)


@pytest.mark.parametrize(
    "data",
    [
        # a line in windows-1252 after UTF-8 ones: it was read as ISO-8859-10 ("cafÃĐ")
        "Le café est chaud. Où est la gare? Il était une fois un garçon.\n".encode()
        + b"Caf\xe9 au lait.\n",
        "Grüße aus München. Schön, dass du da bist.\n".encode()[:-8] + b"\xc3",  # cut off
    ],
)
def test_a_utf8_file_with_bytes_that_are_not_utf8_is_not_read_in_a_legacy_encoding(data):
    for handler in (translate_txt, translate_srt, translate_markdown):
        with pytest.raises(FormatError, match=r"not valid UTF-8 text \(at byte \d+\), though"):
            handler(data, upper, LIMITS)


LONG_PARAGRAPH = " ".join(f"The cat sat on mat number {i} today." for i in range(40))


def recorded(translate):
    """(the texts sent, `translate` that records them there)."""
    sent: list[str] = []

    def recording(texts: list[str]) -> list[str]:
        sent.extend(texts)
        return translate(texts)

    return sent, recording


def test_a_paragraph_longer_than_one_request_is_sent_in_pieces_in_html_and_docx():
    """A paragraph whose text alone is over `max_request_chars` was sent whole: the service
    refused the .html or .docx file with 413 ("the file has a paragraph of N characters"),
    where a .txt or .md file's is cut. Now every format cuts it at sentence ends."""
    long, limits = LONG_PARAGRAPH, Limits(max_request_chars=300)
    sent, recording = recorded(upper)
    html = f"<p>{long} A <b>bold</b> word.</p>".encode()
    out = handler_for("a.html")(html, recording, limits).decode()
    assert max(map(len, sent)) <= 300, max(map(len, sent))
    assert out == f"<p>{long.upper()} A <b>BOLD</b> WORD.</p>"
    sent.clear()
    src = docx_body(f'<w:p><w:r><w:t xml:space="preserve">{long}</w:t></w:r></w:p>')
    out = translate_office(src, recording, limits, "docx")
    assert max(map(len, sent)) <= 300, max(map(len, sent))
    assert "".join(word_texts(out)[0]) == long.upper()


def test_a_line_longer_than_one_request_is_sent_in_pieces_in_txt_and_srt():
    """A .txt paragraph on one line (a transcript, a text saved a paragraph per line) or a cue
    over `max_request_chars` was sent whole: the service refused the file with 413 ("the file
    has a paragraph of N characters"), where an .md, .html or .docx file's is cut. Now it is
    cut at sentence ends too, and the translated pieces joined again on its line."""
    long, limits = LONG_PARAGRAPH, Limits(max_request_chars=300)
    sent, recording = recorded(upper)
    out = translate_txt(f"Title\r\n\r\n  {long}  \r\nThe end.\r\n".encode(), recording, limits)
    assert max(map(len, sent)) <= 300, max(map(len, sent))
    assert out.decode() == f"TITLE\r\n\r\n  {long.upper()}  \r\nTHE END.\r\n"
    sent.clear()
    srt = f"1\n00:00:01,000 --> 00:00:09,000\n<i>{long}</i>\n".encode()
    out = translate_srt(srt, recording, limits)
    assert max(map(len, sent)) <= 300, max(map(len, sent))
    assert out.decode() == f"1\n00:00:01,000 --> 00:00:09,000\n<i>{long.upper()}</i>\n"


def test_a_utf32_text_file_is_refused_as_utf32():
    """UTF-32 starts with UTF-16's byte order mark: it was refused as holding NUL characters,
    "not text, or UTF-16 without a byte order mark", which it is neither."""
    for name in ("a.txt", "a.srt", "a.md", "a.html"):
        for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be")):
            data = bom + "The cat.\n".encode(codec)
            with pytest.raises(FormatError, match=r"is UTF-32 text.*save it as UTF-8"):
                handler_for(name)(data, upper, LIMITS)


def test_a_strict_open_xml_document_is_refused_not_returned_untranslated():
    """Word's and PowerPoint's "Strict Open XML" save their parts in other namespaces
    (http://purl.oclc.org/ooxml/...): none of their text was found, and the file came back as
    it was, with 200, as if translated."""
    strict = {
        "word/document.xml": (b"schemas.openxmlformats.org/wordprocessingml/2006/main",
                              b"purl.oclc.org/ooxml/wordprocessingml/main"),
        "ppt/presentation.xml": (b"schemas.openxmlformats.org/presentationml/2006/main",
                                 b"purl.oclc.org/ooxml/presentationml/main"),
    }  # fmt: skip
    for kind, src in (("docx", make_docx()), ("pptx", make_pptx())):
        parts = entries(src)
        for name, (transitional, purl) in strict.items():
            if name in parts:
                parts[name] = parts[name].replace(transitional, purl)
        with pytest.raises(FormatError, match=r"Strict Open XML.*save it as"):
            translate_office(zip_of(parts), upper, LIMITS, kind)


def docx_field(code: str, result: str) -> str:
    """A complex field (begin, code, separate, result, end) of runs."""
    return (
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        f'<w:r><w:instrText xml:space="preserve"> {code} </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
        f"<w:r><w:t>{result}</w:t></w:r>"
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    )


def plain_run(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{text}</w:t></w:r>'


#: a model that loses placeholders and moves a name, as the shipped ones do: the sentences of
#: the tests of kept fields, with their fields' stand-ins
MOVED = {
    "We will call you at Tom tomorrow morning.": "Wir rufen Sie morgen früh bei Tom an.",
    "This is page Tom of Boston.": "Dies ist Seite Tom von Boston.",
    "As table Tom shows, it works.": "Wie Tabelle Tom zeigt, funktioniert es.",
    "Please come in, dear guest.": "Bitte kommen Sie herein, lieber Gast.",
}


def moving_model(texts: list[str]) -> list[str]:
    return [MOVED.get(t, re.sub(r"</?[gx]\d+/?>", "", t).upper()) for t in texts]


def test_docx_a_field_the_application_computes_keeps_its_result_and_the_words_go_around_it():
    """A mail merge's field, a page number, a cross-reference to a number: Word writes their
    results again, so the words the model put where the field's runs were were wiped out at
    the next merge or update ("We will call you at «Phone» tomorrow." was "Wir werden dich
    {MERGEFIELD Phone| „Py“ nennen.} morgen früh auf"). Their results stay as written; the
    translation is cut where the field's stand-in came back. A hyperlink's result is text,
    translated."""
    src = docx_body(
        "<w:p>"
        + plain_run("We will call you at ")
        + docx_field("MERGEFIELD Phone", "«Phone»")
        + plain_run(" tomorrow morning.")
        + "</w:p><w:p>"
        + plain_run("This is page ")
        + '<w:fldSimple w:instr=" PAGE "><w:r><w:t>3</w:t></w:r></w:fldSimple>'
        + plain_run(" of ")
        + docx_field("NUMPAGES \\* MERGEFORMAT", "12")
        + plain_run(".")
        + "</w:p><w:p>"
        + plain_run("As table ")
        + docx_field("REF _Ref2 \\h", "4")
        + plain_run(" shows, it works.")
        + "</w:p><w:p>"
        + plain_run("Please come in, ")
        + docx_field('HYPERLINK "https://example.com"', "dear guest")
        + plain_run(".")
        + "</w:p>"
    )
    out = translate_office(src, moving_model, LIMITS, "docx")
    assert word_texts(out) == [
        ["Wir rufen Sie morgen früh bei ", "«Phone»", " an."],
        ["Dies ist Seite ", "3", " von ", "12", "."],
        ["Wie Tabelle ", "4", " zeigt, funktioniert es."],
        # a hyperlink's words are translated, the link around their translation
        ["Bitte kommen Sie herein, ", "lieber Gast", "."],
    ]
    # the fields' codes are as they were
    document = entries(out)["word/document.xml"].decode()
    assert document.count("MERGEFIELD Phone") == 1 and 'w:instr=" PAGE "' in document


def test_docx_a_kept_simple_field_inside_a_fields_code_is_no_atom_of_the_sentence():
    """A MERGEFIELD written as a simple field inside an IF's code was taken for a kept field of
    the sentence: the sentence went out with a placeholder for it."""
    src = docx_body(
        "<w:p>"
        + plain_run("Hello ")
        + '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        + '<w:r><w:instrText xml:space="preserve"> IF </w:instrText></w:r>'
        + '<w:fldSimple w:instr=" MERGEFIELD Gender "><w:r><w:t>«Gender»</w:t></w:r></w:fldSimple>'
        + '<w:r><w:instrText xml:space="preserve"> = "male" "Mr" "Ms" </w:instrText></w:r>'
        + '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>Mr</w:t></w:r>'
        + '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
        + plain_run(" Smith, welcome to the meeting.")
        + "</w:p>"
    )
    sent: list[str] = []
    out = translate_office(src, lambda t: sent.extend(t) or upper(t), LIMITS, "docx")
    assert not [t for t in sent if "<x" in t], sent
    assert word_texts(out)[0] == ["HELLO ", "«Gender»", "MR", " SMITH, WELCOME TO THE MEETING."]


def test_odt_a_field_the_application_computes_keeps_its_text_and_the_words_go_around_it():
    """LibreOffice writes a page number, a page count and a mail merge's database field
    again (on loading, on a merge): the words put into them were lost ("Die Ergebnisse sind
    auf Seite  von [3]diesem Bericht", the page number emptied)."""
    text = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
    content = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        f' xmlns:text="{text}" office:version="1.3"><office:body><office:text>'
        "<text:p>This is page <text:page-number>3</text:page-number> of "
        "<text:page-count>12</text:page-count>.</text:p>"
        '<text:p>We will call you at <text:database-display text:column-name="Phone">'
        "&lt;Phone&gt;</text:database-display> tomorrow morning.</text:p>"
        "</office:text></office:body></office:document-content>"
    )
    mimetype = zipfile.ZipInfo("mimetype")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(mimetype, "application/vnd.oasis.opendocument.text", zipfile.ZIP_STORED)
        z.writestr("content.xml", content)
    translated = translate_office(out.getvalue(), moving_model, LIMITS, "odt")
    root = etree.fromstring(entries(translated)["content.xml"])
    paragraphs = list(root.iter(f"{{{text}}}p"))
    assert ["".join(p.itertext()) for p in paragraphs] == [
        "Dies ist Seite 3 von 12.",
        "Wir rufen Sie morgen früh bei <Phone> an.",
    ]
    assert paragraphs[0].find(f"{{{text}}}page-number").text == "3"
    assert paragraphs[1].find(f"{{{text}}}database-display").text == "<Phone>"


def test_a_docx_whose_main_part_has_another_name_is_translated():
    """Word for the web saves a document's main part as word/document2.xml, named by
    _rels/.rels and [Content_Types].xml (ECMA-376 fixes no name): it was refused as "not a
    Word, PowerPoint or OpenDocument ... file"."""
    files = entries(make_docx())
    renamed = {}
    for name, data in files.items():
        data = data.replace(b"/word/document.xml", b"/word/document2.xml")
        data = data.replace(b'Target="word/document.xml"', b'Target="word/document2.xml"')
        name = name.replace("document.xml", "document2.xml")
        renamed[name] = data
    src = zip_of(renamed)
    assert "word/document2.xml" in entries(src) and "word/document.xml" not in entries(src)
    out = translate_office(src, upper, LIMITS, "docx")
    assert_only_changed(src, out, {"word/document2.xml", "word/header1.xml"})
    d = docx.Document(io.BytesIO(out))  # python-docx finds the part by its relationship
    assert d.paragraphs[0].text == "HELLO BOLD WORDS AND MORE."
    assert d.sections[0].header.paragraphs[0].text == "HEADER TEXT"


def test_docx_code_is_kept_as_written_and_the_sentence_translated_around_it():
    """Code in a .docx, as pandoc writes it (character style VerbatimChar, paragraph style
    SourceCode), in a style whose font is fixed width (or based on one), or set in such a font
    (Courier New) was translated as prose: "Run `git status`" gave "Führen Sie den Status von
    git aus". A run of code is kept as written, standing in its sentence as a word would; a
    fixed-width font sets code only beside text in another."""

    def run(text: str, props: str = "") -> str:
        return f'<w:r><w:rPr>{props}</w:rPr><w:t xml:space="preserve">{text}</w:t></w:r>'

    src = docx_body(
        "<w:p>"
        + run("Run ")
        + run("git status", '<w:rStyle w:val="VerbatimChar"/>')
        + run(" before you commit.")
        + '</w:p><w:p><w:pPr><w:pStyle w:val="SourceCode"/></w:pPr>'
        + run('print("hello world")')
        + "</w:p><w:p>"
        + run("Type ")
        + run("make clean", '<w:rFonts w:ascii="Courier New" w:hAnsi="Courier New"/>')
        + run(" to start again.")
        + "</w:p><w:p>"
        + run("Call ")
        + run("open file", '<w:rStyle w:val="CommandBold"/>')
        + run(" first.")
        + "</w:p><w:p>"
        # all of a paragraph in Courier (a screenplay's, a typewritten letter's) is prose
        + run("INT. KITCHEN - NIGHT. ", '<w:rFonts w:ascii="Courier New"/>')
        + run("Anna waits.", '<w:rFonts w:ascii="Courier Prime"/>')
        + "</w:p><w:p>"
        # faces whose names hold "code" or "mono" but are no fixed-width fonts: prose
        + run("Welcome to the ")
        + run("annual meeting", '<w:rFonts w:ascii="Arial Unicode MS"/>')
        + run(" of ")
        + run("all members", '<w:rFonts w:ascii="Monotype Corsiva"/>')
        + run(".")
        + "</w:p>"
    )
    parts = entries(src)
    styles = parts["word/styles.xml"].decode()
    ours = (
        '<w:style w:type="character" w:styleId="Command"><w:name w:val="Command"/>'
        '<w:rPr><w:rFonts w:ascii="Consolas" w:hAnsi="Consolas"/></w:rPr></w:style>'
        '<w:style w:type="character" w:styleId="CommandBold"><w:name w:val="Command Bold"/>'
        '<w:basedOn w:val="Command"/><w:rPr><w:b/></w:rPr></w:style>'
    )
    parts["word/styles.xml"] = styles.replace("</w:styles>", ours + "</w:styles>").encode()
    out = translate_office(zip_of(parts), moving_model, LIMITS, "docx")
    assert word_texts(out) == [
        ["RUN ", "git status", " BEFORE YOU COMMIT."],
        ['print("hello world")'],
        ["TYPE ", "make clean", " TO START AGAIN."],
        ["CALL ", "open file", " FIRST."],
        ["INT. KITCHEN - NIGHT. ", "ANNA WAITS."],
        ["WELCOME TO THE ", "ANNUAL MEETING", " OF ", "ALL MEMBERS", "."],
    ]


def test_odt_an_embedded_charts_titles_and_names_are_translated():
    """A chart inserted in LibreOffice lives in its own "Object 1/content.xml": its title, axis
    titles and its table's series and category names stayed in the source's language (a .docx's
    or .pptx's chart was translated)."""
    ns = (
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:chart="urn:oasis:names:tc:opendocument:xmlns:chart:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"'
    )
    content = (
        f"<office:document-content {ns}><office:body><office:text>"
        "<text:p>The chart below shows our sales.</text:p>"
        "</office:text></office:body></office:document-content>"
    )
    chart = (
        f"<office:document-content {ns}><office:body><office:chart><chart:chart>"
        "<chart:title><text:p>Sales per quarter</text:p></chart:title>"
        '<chart:plot-area><chart:axis chart:dimension="x"><chart:title><text:p>Quarter</text:p>'
        "</chart:title></chart:axis></chart:plot-area>"
        '<table:table table:name="local-table"><table:table-rows><table:table-row>'
        '<table:table-cell office:value-type="string"><text:p>First quarter</text:p>'
        '</table:table-cell><table:table-cell office:value-type="float" office:value="10">'
        "<text:p>10</text:p></table:table-cell></table:table-row></table:table-rows>"
        "</table:table></chart:chart></office:chart></office:body></office:document-content>"
    )
    src = zip_of(
        {
            "mimetype": b"application/vnd.oasis.opendocument.text",
            "content.xml": content.encode(),
            "Object 1/content.xml": chart.encode(),
        },
        zipfile.ZIP_STORED,
    )
    out = entries(translate_office(src, upper, LIMITS, "odt"))
    texts = [t for t in etree.fromstring(out["Object 1/content.xml"]).itertext() if t.strip()]
    assert texts == ["SALES PER QUARTER", "QUARTER", "FIRST QUARTER", "10"]
    assert b"THE CHART BELOW SHOWS OUR SALES." in out["content.xml"]


def test_docx_a_bound_controls_node_is_given_its_translation():
    """A cover page's Abstract is a content control bound to a customXml part, its Title to
    the document's properties: Word fills a bound control from its node when it opens the
    document, and the translated abstract came back in English. A plain text control's node
    is written; not a date's (its node holds the date, the control its display), not one
    showing its placeholder (the prompt became the content), not the properties that are not
    translated (keywords); a binding where no control is is no 500."""
    cover = "http://schemas.microsoft.com/office/2006/coverPageProps"
    core = "http://schemas.openxmlformats.org/package/2006/metadata/core-properties"
    dc = "http://purl.org/dc/elements/1.1/"
    custom, properties = (
        "{55AF091B-3C7A-41E3-B477-F2FDAA23CFDA}",
        "{6C3C8BC8-F283-45AE-878A-BAB7291924A1}",
    )

    def control(mapping: str, path: str, store: str, text: str, kind: str = "<w:text/>") -> str:
        return (
            f'<w:sdt><w:sdtPr><w:dataBinding w:prefixMappings="{mapping}" w:xpath="{path}" '
            f'w:storeItemID="{store}"/>{kind}</w:sdtPr>'
            f"<w:sdtContent><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:sdtContent></w:sdt>"
        )

    ns0 = f"xmlns:ns0='{cover}'"
    controls = (
        control(ns0, "/ns0:CoverPageProperties[1]/ns0:Abstract[1]", custom, "Our sales.")
        + control(
            ns0, "/ns0:CoverPageProperties[1]/ns0:PublishDate[1]", custom, "March 1, 2024",
            '<w:date w:fullDate="2024-03-01T00:00:00Z"><w:dateFormat w:val="MMMM d, yyyy"/></w:date>',
        )
        + control(
            ns0, "/ns0:CoverPageProperties[1]/ns0:CompanyAddress[1]", custom,
            "[Company address]", "<w:showingPlcHdr/><w:text/>",
        )
        + control(f"xmlns:ns0='{core}' xmlns:ns1='{dc}'", "/ns0:coreProperties[1]/ns1:title[1]",
                  properties, "Sales report")
        + control(f"xmlns:ns0='{core}'", "/ns0:coreProperties[1]/ns0:keywords[1]", properties,
                  "sales, year")
    )  # fmt: skip
    parts = entries(docx_body("<w:p><w:r><w:t>The body.</w:t></w:r></w:p>"))
    body = parts["word/document.xml"].decode()
    stray = '<w:dataBinding w:xpath="/a:b[1]" w:storeItemID="x"/>'  # right under the body
    parts["word/document.xml"] = body.replace("<w:body>", "<w:body>" + controls + stray, 1).encode()
    parts["customXml/item1.xml"] = (
        f'<CoverPageProperties xmlns="{cover}"><PublishDate>2024-03-01</PublishDate>'
        "<Abstract>Our sales.</Abstract><CompanyAddress/></CoverPageProperties>"
    ).encode()
    parts["customXml/itemProps1.xml"] = (
        b'<ds:datastoreItem ds:itemID="{55AF091B-3C7A-41E3-B477-F2FDAA23CFDA}" xmlns:ds='
        b'"http://schemas.openxmlformats.org/officeDocument/2006/customXml"/>'
    )
    props = re.sub(
        r"<cp:keywords>[^<]*</cp:keywords>|<cp:keywords/>|<dc:title>[^<]*</dc:title>|<dc:title/>",
        "",
        parts["docProps/core.xml"].decode(),
    )
    parts["docProps/core.xml"] = props.replace(
        "</cp:coreProperties>",
        "<dc:title>Sales report</dc:title><cp:keywords>sales, year</cp:keywords>"
        f'<w:dataBinding xmlns:w="{WORD}" w:xpath="/a:b[1]"/></cp:coreProperties>',  # no parent
    ).encode()  # fmt: skip
    out = entries(translate_office(zip_of(parts), upper, LIMITS, "docx"))
    item = out["customXml/item1.xml"]
    assert b"<Abstract>OUR SALES.</Abstract>" in item
    assert b"<PublishDate>2024-03-01</PublishDate>" in item and b"<CompanyAddress/>" in item
    assert b"<dc:title>SALES REPORT</dc:title>" in out["docProps/core.xml"]
    assert b"<cp:keywords>sales, year</cp:keywords>" in out["docProps/core.xml"]
    assert out["customXml/itemProps1.xml"] == parts["customXml/itemProps1.xml"]
