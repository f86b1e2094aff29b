"""EPUB books (.epub) without a model: the chapters, the table of contents and the book's title
and description translated, written back as XML a reading system opens, every other entry
kept; books that are no EPUB, or whose text is encrypted, refused with a FormatError.

The books are made with EbookLib (as many tools write EPUB 3, with a navigation document and
an NCX) and by hand (EPUB 2 as Project Gutenberg's and older tools wrote them: DOCTYPEs, an
OEBPS folder, legacy encodings), and read back with EbookLib and lxml."""

from __future__ import annotations

import io
import random
import re
import zipfile
from pathlib import Path

import pytest
from ebooklib import epub
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from app.formats import FormatError, Limits, content_type, handler_for
from app.formats.epub import translate_epub
from app.html_lang import note_kept
from tests.test_file_formats import entries, make_docx, make_odt, upper, zip_of

LIMITS = Limits()
CSS = b"p { text-indent: 1em; }\n"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def make_book(chapters: dict[str, str] | None = None) -> bytes:
    """An EPUB 3 book as EbookLib writes it: two chapters, a style sheet, a picture, a
    description written as HTML, a navigation document and an NCX."""
    book = epub.EpubBook()
    book.set_identifier("urn:uuid:1b2c3d")
    book.set_title("The Old House")
    book.set_language("en")
    book.add_author("Jane Doe")
    book.add_metadata("DC", "description", "<p>A <b>short</b> story.</p>")
    chapters = chapters or {
        "chap_01.xhtml": (
            '<h1>The Garden</h1><p>The children played in the <em>garden</em>.<a id="p1"/> '
            "Their mother called them.</p><p>Tom &amp; Anna<br/>were hungry.</p>"
        ),
        "chap_02.xhtml": '<h1>The Night</h1><p>See <img src="house.png" alt="a red house"/>.</p>',
    }
    items = []
    for n, (name, content) in enumerate(chapters.items()):
        item = epub.EpubHtml(title=f"Chapter {n + 1}", file_name=name, lang="en")
        item.content = content
        item.add_link(href="style.css", rel="stylesheet", type="text/css")
        book.add_item(item)
        items.append(item)
    book.add_item(epub.EpubItem(file_name="style.css", media_type="text/css", content=CSS))
    book.add_item(epub.EpubItem(file_name="house.png", media_type="image/png", content=PNG))
    book.toc = [epub.Link(i.file_name, i.title, f"c{n}") for n, i in enumerate(items)]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items]
    buf = io.BytesIO()
    epub.write_epub(buf, book)
    return buf.getvalue()


def read_book(data: bytes) -> epub.EpubBook:
    return epub.read_epub(io.BytesIO(data), {"ignore_ncx": False})


def well_formed(data: bytes) -> None:
    """Every XML entry of the book parses as XML (what a reading system requires)."""
    for name, raw in entries(data).items():
        if name.endswith((".xhtml", ".ncx", ".opf", ".xml")):
            etree.fromstring(raw, etree.XMLParser(resolve_entities=False, load_dtd=False))


def test_a_book_is_translated_chapters_contents_and_metadata_and_read_back():
    src = make_book()
    out = translate_epub(src, upper, LIMITS, language="de")
    well_formed(out)
    before, after = entries(src), entries(out)
    assert list(before) == list(after)  # same entries, same order
    for name in ("mimetype", "META-INF/container.xml", "EPUB/style.css", "EPUB/house.png"):
        assert after[name] == before[name]
    first = zipfile.ZipFile(io.BytesIO(out)).infolist()[0]
    assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED

    book = read_book(out)
    assert book.get_metadata("DC", "title")[0][0] == "THE OLD HOUSE"
    assert book.get_metadata("DC", "language")[0][0] == "de"
    assert book.get_metadata("DC", "creator")[0][0] == "Jane Doe"  # a name: kept
    description = book.get_metadata("DC", "description")[0][0]
    assert description == "<p>A <b>SHORT</b> STORY.</p>"  # its markup kept
    chapter = after["EPUB/chap_01.xhtml"].decode()
    assert "<h1>THE GARDEN</h1>" in chapter
    assert '<p>THE CHILDREN PLAYED IN THE <em>GARDEN</em>.<a id="p1"/> THEIR MOTHER' in chapter
    assert "TOM &amp; ANNA<br/>WERE HUNGRY." in chapter
    assert 'lang="de" xml:lang="de"' in chapter
    assert 'alt="A RED HOUSE"' in after["EPUB/chap_02.xhtml"].decode()
    assert '<link href="style.css" rel="stylesheet" type="text/css"/>' in chapter
    nav = after["EPUB/nav.xhtml"].decode()
    assert ">CHAPTER 1</a>" in nav and ">CHAPTER 2</a>" in nav
    ncx = etree.fromstring(after["EPUB/toc.ncx"])
    labels = [t.text for t in ncx.iter("{http://www.daisy.org/z3986/2005/ncx/}text")]
    assert labels == ["THE OLD HOUSE", "CHAPTER 1", "CHAPTER 2"]


def test_each_distinct_text_is_sent_once_in_one_call():
    """A chapter's title stands in its head, the navigation document and the NCX: sent once."""
    calls: list[list[str]] = []

    def recording(texts: list[str]) -> list[str]:
        calls.append(texts)
        return upper(texts)

    translate_epub(make_book(), recording, LIMITS)
    assert len(calls) == 1
    assert len(calls[0]) == len(set(calls[0]))
    assert "Chapter 1" in calls[0] and "The Old House" in calls[0]
    assert "Jane Doe" not in calls[0] and "urn:uuid:1b2c3d" not in calls[0]


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=12))
def test_whatever_the_model_writes_the_book_stays_well_formed_xml(tail):
    """A bare `&` (HTML's escaping writes "Tom & Anna" so), `]]>` or a control character in a
    translation made a chapter that no reading system opens."""
    out = translate_epub(make_book(), lambda ts: [t + tail + " & ]]> <" for t in ts], LIMITS)
    well_formed(out)
    chapter = entries(out)["EPUB/chap_01.xhtml"].decode()
    assert "&amp; ]]&gt; &lt;" in chapter


def test_self_closed_elements_end_where_they_start():
    """In XHTML `<script src="s.js"/>` and `<div/>` are whole elements; read as HTML, the
    script took the rest of the chapter for its code, which was never translated."""
    body = (
        '<script src="s.js"/><div class="rule"/><p>After the script.</p>'
        '<p>A <span id="x"/>word.</p>'
    )
    chapter = f'<html xmlns="http://www.w3.org/1999/xhtml"><body>{body}</body></html>'
    out = translate_epub(epub2(chapter.encode()), upper, LIMITS)
    assert entries(out)["OEBPS/Text/ch 1.html"].decode() == chapter.replace(
        "After the script.", "AFTER THE SCRIPT."
    ).replace("word.", "WORD.")


def test_a_paragraph_kept_in_its_own_language_is_labelled_with_it():
    """With `source: auto`, a French quote in an English book is kept as it is: its paragraph
    says it is French, as in an .html file (app/html_lang.py)."""
    book = make_book({"c.xhtml": "<p>The end is near.</p><p>La fin est proche.</p>"})

    def auto(texts: list[str]) -> list[str]:
        kept = ["fr" if t.startswith("La ") else None for t in texts]
        note_kept(kept)
        return [t if k else t.upper() for t, k in zip(texts, kept, strict=True)]

    from app.html_lang import kept_languages

    with kept_languages():
        out = translate_epub(book, auto, LIMITS, language="de")
    chapter = entries(out)["EPUB/c.xhtml"].decode()
    assert "<p>THE END IS NEAR.</p>" in chapter
    # (in both attributes: XHTML 1.1, in which EPUB 2 books are written, has `xml:lang` only)
    assert '<p lang="fr" xml:lang="fr">La fin est proche.</p>' in chapter


NCX_DOCTYPE = (
    '<!DOCTYPE ncx PUBLIC "-//NISO//DTD ncx 2005-1//EN" '
    '"http://www.daisy.org/z3986/2005/ncx-2005-1.dtd">'
)
XHTML11 = (
    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" '
    '"http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">'
)


def epub2(
    chapter: bytes | None = None,
    extra: dict[str, bytes] | None = None,
    href: str = "Text/ch%201.html",
) -> bytes:
    """An EPUB 2 book as older tools wrote it: the package in OEBPS/, a chapter whose name has
    a space (its href %-escaped), DOCTYPEs, the NCX as its table of contents."""
    chapter = (
        chapter
        or (
            '<?xml version="1.0" encoding="utf-8"?>\n' + XHTML11 + "\n"
            '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en"><head><title>Part One'
            '</title></head><body><h2>Part One</h2><p class="first">It was cold.</p></body></html>'
        ).encode()
    )
    files = {
        "mimetype": b"application/epub+zip",
        "META-INF/container.xml": (
            b'<?xml version="1.0"?><container version="1.0" '
            b'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            b'<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            b"</rootfiles></container>"
        ),
        "OEBPS/content.opf": (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<package xmlns="http://www.idpf.org/2007/opf" version="2.0" unique-identifier="id">'
            '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/" '
            'xmlns:opf="http://www.idpf.org/2007/opf">'
            "<dc:title>A Winter Tale</dc:title><dc:language>en-GB</dc:language>"
            '<dc:identifier id="id">x1</dc:identifier><dc:subject>Fiction</dc:subject>'
            "<dc:description>A tale of snow &amp; ice.</dc:description></metadata>"
            '<manifest><item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
            f'<item id="c1" href="{href}" media-type="application/xhtml+xml"/></manifest>'
            '<spine toc="ncx"><itemref idref="c1"/></spine></package>'
        ).encode(),
        "OEBPS/toc.ncx": (
            '<?xml version="1.0" encoding="UTF-8"?>' + NCX_DOCTYPE + '<ncx xmlns="http://www.'
            'daisy.org/z3986/2005/ncx/" version="2005-1" xml:lang="en"><head/><docTitle><text>'
            "A Winter Tale</text></docTitle><docAuthor><text>John Smith</text></docAuthor>"
            '<navMap><navPoint id="n1" playOrder="1"><navLabel><text>\n  Part One\n</text>'
            '</navLabel><content src="Text/ch%201.html"/></navPoint></navMap>'
            '<pageList><pageTarget type="normal" value="1"><navLabel><text>1</text>'
            "</navLabel></pageTarget></pageList></ncx>"
        ).encode(),
        "OEBPS/Text/ch 1.html": chapter,
    }
    files.update(extra or {})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data, zipfile.ZIP_STORED if name == "mimetype" else None)
    return buf.getvalue()


def test_an_epub2_book_with_doctypes_its_ncx_and_an_escaped_href():
    out = translate_epub(epub2(), upper, LIMITS, language="de")
    well_formed(out)
    parts = entries(out)
    chapter = parts["OEBPS/Text/ch 1.html"].decode()
    assert chapter.startswith('<?xml version="1.0" encoding="utf-8"?>\n' + XHTML11)
    assert '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="de">' in chapter
    assert '<h2>PART ONE</h2><p class="first">IT WAS COLD.</p>' in chapter
    ncx = parts["OEBPS/toc.ncx"].decode()
    assert NCX_DOCTYPE in ncx and 'xml:lang="de"' in ncx
    assert "<text>A WINTER TALE</text>" in ncx and "<text>John Smith</text>" in ncx
    assert "<text>\n  PART ONE\n</text>" in ncx  # the whitespace around a label kept
    assert "<text>1</text>" in ncx
    opf = parts["OEBPS/content.opf"].decode()
    assert "<dc:title>A WINTER TALE</dc:title>" in opf and "<dc:language>de</dc:language>" in opf
    assert "<dc:subject>Fiction</dc:subject>" in opf
    assert "<dc:description>A TALE OF SNOW &amp; ICE.</dc:description>" in opf


def test_a_chapter_in_a_legacy_encoding_is_written_back_in_it():
    """An EPUB 2 chapter declared ISO-8859-1: read in it, and written in it, a character it
    cannot hold as a character reference."""
    chapter = (
        '<?xml version="1.0" encoding="iso-8859-1"?>\n<html xmlns="http://www.w3.org/1999/'
        'xhtml"><head><title>Caf\xe9</title></head><body><p>Caf\xe9 au lait.</p></body></html>'
    ).encode("latin-1")
    out = translate_epub(epub2(chapter), lambda ts: [f"\u201e{t}\u201c" for t in ts], LIMITS)
    written = entries(out)["OEBPS/Text/ch 1.html"]
    root = etree.fromstring(written)
    assert root.findtext(".//{http://www.w3.org/1999/xhtml}p") == "\u201eCaf\xe9 au lait.\u201c"
    assert b"&#8222;Caf\xe9 au lait.&#8220;" in written


def test_a_chapter_in_utf16_stays_in_utf16():
    text = '<?xml version="1.0" encoding="UTF-16"?><html xmlns="http://www.w3.org/1999/xhtml">'
    text += "<body><p>Snow fell.</p></body></html>"
    out = translate_epub(epub2(b"\xff\xfe" + text.encode("utf-16-le")), upper, LIMITS)
    written = entries(out)["OEBPS/Text/ch 1.html"]
    assert written.startswith(b"\xff\xfe")
    assert "<p>SNOW FELL.</p>" in written[2:].decode("utf-16-le")


def test_a_book_whose_text_is_already_in_the_target_language_keeps_its_bytes():
    src = make_book()
    out = translate_epub(src, lambda ts: ts, LIMITS, language="de")
    assert entries(out) == entries(src)


ENCRYPTION = (
    '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
    'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
    '<enc:EncryptionMethod Algorithm="{algorithm}"/><enc:CipherData>'
    '<enc:CipherReference URI="{uri}"/></enc:CipherData></enc:EncryptedData></encryption>'
)


def test_a_book_with_drm_is_refused_and_one_with_obfuscated_fonts_is_not():
    drm = ENCRYPTION.format(
        algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc", uri="OEBPS/Text/ch%201.html"
    )
    with pytest.raises(FormatError, match="encrypted \\(DRM") as caught:
        translate_epub(epub2(extra={"META-INF/encryption.xml": drm.encode()}), upper, LIMITS)
    assert caught.value.status == 400
    fonts = ENCRYPTION.format(
        algorithm="http://www.idpf.org/2008/embedding", uri="OEBPS/Fonts/serif.otf"
    )
    extra = {"META-INF/encryption.xml": fonts.encode(), "OEBPS/Fonts/serif.otf": b"\x01" * 64}
    out = translate_epub(epub2(extra=extra), upper, LIMITS)
    assert "IT WAS COLD." in entries(out)["OEBPS/Text/ch 1.html"].decode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (make_docx(), "a Word document \\(.docx\\), not what its extension .epub says"),
        (make_odt(), "'application/vnd.oasis.opendocument.text'"),
        (zip_of({"a.txt": b"hi"}), "not an EPUB book"),
        (zip_of({"mimetype": b"application/epub+zip"}), "no META-INF/container.xml"),
        (
            zip_of(
                {
                    "mimetype": b"application/epub+zip",
                    "META-INF/container.xml": b"<container/>",
                }
            ),
            "names no package document",
        ),
        (b"not a zip", "not a valid zip archive"),
    ],
)
def test_files_that_are_no_epub_are_refused_as_what_they_are(data, message):
    with pytest.raises(FormatError, match=message) as caught:
        handler_for("book.epub")(data, upper, LIMITS)
    assert caught.value.status == 400


def test_an_epub_named_as_an_office_file_is_refused_as_an_epub():
    with pytest.raises(FormatError, match="an EPUB book \\(.epub\\), not what its extension"):
        handler_for("book.odt")(make_book(), upper, LIMITS)


def test_a_package_that_declares_entities_is_refused():
    """An internal DTD subset is how a "billion laughs" is written; no EPUB has one."""
    parts = entries(epub2())
    parts["OEBPS/toc.ncx"] = re.sub(
        rb"<!DOCTYPE ncx[^>]*>",
        b'<!DOCTYPE ncx [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>',
        parts["OEBPS/toc.ncx"],
    )
    with pytest.raises(FormatError, match="declares entities of its own"):
        translate_epub(zip_of(parts), upper, LIMITS)


def test_a_book_too_large_for_its_text_is_refused_with_413():
    """Its documents are bounded as an office file's XML is (50 bytes per character of text
    allowed, 5 MB at least), before any is parsed."""
    words = random.Random(0).choices(["snow", "ice", "wind", "cold", "night"], k=1_100_000)
    chapter = f"<html><body><p>{' '.join(words)}</p></body></html>".encode()
    with pytest.raises(FormatError, match="at most 5000000") as caught:
        translate_epub(epub2(chapter), upper, Limits(max_chars=100))
    assert caught.value.status == 413


def test_the_media_type_and_handler():
    assert content_type("Book.EPUB", b"") == "application/epub+zip"
    handler = handler_for("a/Book.epub", "de")
    assert handler.func is translate_epub and handler.keywords == {"language": "de"}


def test_the_books_language_and_page_progression_follow_the_target():
    """Into Arabic an EPUB 3 spine is paged right to left (a reading system turns pages the
    other way otherwise; EPUB 2 has no such setting), and the text takes the target's
    direction; a language already named (`en-GB` for `en`) is kept as written."""
    out = entries(translate_epub(make_book(), upper, LIMITS, language="ar"))
    opf = out["EPUB/content.opf"].decode()
    assert "<dc:language>ar</dc:language>" in opf
    assert '<spine toc="ncx" page-progression-direction="rtl">' in opf
    back = entries(translate_epub(zip_of(out), lambda ts: [t.lower() for t in ts], LIMITS, "en"))
    assert '<spine toc="ncx" page-progression-direction="ltr">' in back["EPUB/content.opf"].decode()
    out = entries(translate_epub(epub2(), upper, LIMITS, language="ar"))
    assert b"page-progression" not in out["OEBPS/content.opf"]
    assert (
        '<html dir="rtl" xmlns="http://www.w3.org/1999/xhtml" xml:lang="ar">'
        in out["OEBPS/Text/ch 1.html"].decode()
    )
    kept = entries(translate_epub(epub2(), upper, LIMITS, language="en"))["OEBPS/content.opf"]
    assert b"<dc:language>en-GB</dc:language>" in kept


def test_a_package_that_lists_no_xhtml_document_is_refused():
    parts = entries(epub2())
    parts["OEBPS/content.opf"] = parts["OEBPS/content.opf"].replace(
        b"application/xhtml+xml", b"image/png"
    )
    with pytest.raises(FormatError, match="lists no XHTML document"):
        translate_epub(zip_of(parts), upper, LIMITS)


def test_a_page_breaks_number_is_not_sent_and_prefixed_formulas_are_kept():
    """A page break's `title` is the printed page's number ("xii", which the model turned into
    a word); MathML and SVG may be written with a prefix in XHTML, and are kept as such."""
    body = (
        '<p>One<span epub:type="pagebreak" id="p12" title="xii"/> two.</p>'
        '<div role="doc-pagebreak" aria-label="xiii"/>'
        '<p><m:math xmlns:m="http://www.w3.org/1998/Math/MathML"><m:mtext>is big</m:mtext>'
        "</m:math> stays.</p>"
        '<svg:svg xmlns:svg="http://www.w3.org/2000/svg"><svg:text>Label</svg:text></svg:svg>'
    )
    chapter = (
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
        f"<body>{body}</body></html>"
    )
    sent: list[str] = []

    def recording(texts: list[str]) -> list[str]:
        sent.extend(texts)
        return upper(texts)

    out = entries(translate_epub(epub2(chapter.encode()), recording, LIMITS))
    written = out["OEBPS/Text/ch 1.html"].decode()
    assert not {"xii", "xiii", "is big", "Label"} & set(sent)
    assert 'title="xii"' in written and 'aria-label="xiii"' in written
    assert "<m:mtext>is big</m:mtext></m:math> STAYS." in written
    assert "<svg:text>Label</svg:text>" in written


def test_a_chapter_listed_as_text_html_that_is_xhtml_is_written_as_xml():
    """Older tools list XHTML chapters as `text/html`; reading systems parse them as XML, and
    a bare `&` (HTML's escaping of "Tom & Anna") made the chapter unreadable."""
    parts = entries(epub2())
    opf = parts["OEBPS/content.opf"].replace(b"application/xhtml+xml", b"text/html")
    parts["OEBPS/content.opf"] = opf
    out = translate_epub(zip_of(parts), lambda ts: [t.replace("was", "& was") for t in ts], LIMITS)
    well_formed(out)
    assert "It &amp; was cold." in entries(out)["OEBPS/Text/ch 1.html"].decode()


@pytest.mark.parametrize(
    ("chapter", "message"),
    [
        (
            '<?xml version="1.0" encoding="UTF-16"?><html><body><p>Hi</p></body></html>'.encode(
                "utf-16-le"
            ),
            None,
        ),
        ('<?xml version="1.0"?><html/>'.encode("utf-32"), "UTF-32"),
        (b'<?xml version="1.0" encoding="base64"?><html/>', "'base64', which is unknown"),
        (b'<?xml version="1.0" encoding="idna"?><html/>', "'idna', which is unknown"),
        (b'<?xml version="1.0" encoding="rot13"?><html/>', "'rot13', which is unknown"),
        (b"<html><body><p>Caf\xe9</p></body></html>", "not valid utf-8 text"),
        (b"<html><body>\x00</body></html>", "holds NUL characters"),
    ],
)
def test_a_chapters_encoding_is_told_as_xml_tells_it_or_refused(chapter, message):
    """UTF-16 without a byte order mark (told by its `<?`) was read as UTF-8, and the whole
    chapter, markup and all, sent as one text; codecs that are no text encodings (`base64`)
    failed with a server error."""
    book = epub2(chapter)
    if message is None:
        out = entries(translate_epub(book, upper, LIMITS))["OEBPS/Text/ch 1.html"]
        assert out.decode("utf-16-le").endswith("<html><body><p>HI</p></body></html>")
        return
    with pytest.raises(FormatError, match=message) as caught:
        translate_epub(book, upper, LIMITS)
    assert caught.value.status == 400


def test_manifest_items_without_ids_are_each_translated():
    parts = entries(epub2(extra={"OEBPS/b.xhtml": b"<html><body><p>Second.</p></body></html>"}))
    opf = parts["OEBPS/content.opf"].decode()
    opf = opf.replace('<item id="c1" ', "<item ").replace(
        "</manifest>", '<item href="b.xhtml" media-type="application/xhtml+xml"/></manifest>'
    )
    parts["OEBPS/content.opf"] = opf.encode()
    out = entries(translate_epub(zip_of(parts), upper, LIMITS))
    assert b"IT WAS COLD." in out["OEBPS/Text/ch 1.html"]
    assert b"SECOND." in out["OEBPS/b.xhtml"]


def test_a_package_too_large_is_refused_before_it_is_parsed():
    parts = entries(epub2())
    items = "".join(
        f'<item id="i{n}" href="x{n}.png" media-type="image/png"/>' for n in range(3000)
    )
    opf = parts["OEBPS/content.opf"].decode().replace("<manifest>", "<manifest>" + items)
    parts["OEBPS/content.opf"] = opf.encode()
    small = Limits(max_chars=1)  # (its XML bound: 5 MB at least)
    assert len(opf) < small.max_xml_bytes
    translate_epub(zip_of(parts), upper, small)
    with pytest.raises(FormatError, match="content.opf has .* bytes; at most 100") as caught:
        translate_epub(zip_of(parts), upper, _TinyXml())
    assert caught.value.status == 413


class _TinyXml(Limits):
    @property
    def max_xml_bytes(self) -> int:
        return 100


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("version", ["epub3", "epub2"])
def test_a_book_pandoc_made_is_translated_and_stays_a_book(version):
    """pandoc's books (tests/fixtures/README.md): a title page, chapters titled by their file
    names ("ch001.xhtml", which the model made "Knöcher.": a file name is kept as written),
    footnotes and their links, a block quote, a list."""
    src = (FIXTURES / f"pandoc-book-{version}.epub").read_bytes()
    sent: list[str] = []

    def recording(texts: list[str]) -> list[str]:
        sent.extend(texts)
        return upper(texts)

    out = translate_epub(src, recording, LIMITS, language="de")
    well_formed(out)
    assert not [t for t in sent if "xhtml" in t]
    assert "A footnote about the night." in sent and "Apples" in sent
    book = read_book(out)
    assert book.get_metadata("DC", "title")[0][0] == "THE OLD HOUSE"
    assert book.get_metadata("DC", "language")[0][0] == "de"
    # the guide's reference (EPUB 2's landmarks) titled as the book is
    package = entries(out)["EPUB/content.opf"].decode()
    assert '<reference type="toc" title="THE OLD HOUSE" href="nav.xhtml"/>' in package
    chapter = next(v for k, v in entries(out).items() if k.endswith("ch002.xhtml")).decode()
    assert "<title>ch002.xhtml</title>" in chapter
    assert 'IT WAS A <strong>DARK</strong> NIGHT.<a href="#fn1" class="footnote-ref"' in chapter
    assert '<a href="ch001.xhtml#the-garden">THE GARDEN</a>' in chapter
    assert 'xml:lang="de"' in chapter
