"""EPUB books (.epub, EPUB 2 and 3): a zip of XHTML documents, with a package document (the
OPF) that lists them and holds the book's metadata, and a table of contents.

The archive is checked as an office file's is (app/formats/office_archive.py: entries, sizes,
zip bombs), and its kind told before anything is parsed: its `mimetype` entry says
`application/epub+zip` (a Word document or an OpenDocument file named `.epub` is refused as
what it is), and `META-INF/container.xml` names the package. A book whose content documents are
encrypted (DRM: `META-INF/encryption.xml` names them) is refused, as its text cannot be read;
fonts obfuscated as the EPUB standard describes are no obstacle.

Translated, in one call for the whole book:

- every XHTML content document the package's manifest lists, the spine's chapters first in
  reading order, then the others (EPUB 3's navigation document, a cover page): as an .html
  file's text is (app/html_format.py: markup kept byte for byte, the attribute values that
  are text for people, `lang` and `xml:lang` set to the target where the text was
  translated), read and written as XML (`<a id="p12"/>` ends where it starts; text escaped
  for XML, which a reading system requires: one bare `&` and it refuses the chapter);
- the NCX table of contents of an EPUB 2 book: its title and its entries' labels;
- the package's titles and description (a description written as HTML, as Calibre writes it,
  translated as HTML), and the titles of its guide's references (EPUB 2's landmarks: "Cover",
  "Table of Contents"); its first `dc:language` becomes the target's, and the `xml:lang` of
  the package and of what was translated with it.

Author names, subjects, identifiers, styles, images and fonts are not translated. Every entry
that was not changed keeps its bytes, name, order, dates and compression (the `mimetype` entry
stays first and stored, as reading systems require). A document in UTF-16 or in an encoding
its XML declaration names is written back in it (characters it cannot hold as character
references).
"""

from __future__ import annotations

import codecs
import posixpath
import re
import zipfile
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from lxml import etree

from ..html_charset import lookup
from ..html_format import HtmlDocument
from ..html_lang import direction, kept_languages, names_language
from ..html_text import NOT_XML
from ..html_tokenizer import HtmlError
from . import FormatError, Limits, Translate, once_each
from .inline import SOFT_HYPHEN, Token, Unit, UnitBuilder, translate_units
from .office_archive import BIG_ENTRY, NAMES, open_archive, read_entry, rebuild

MIMETYPE = b"application/epub+zip"
CONTAINER = "META-INF/container.xml"
ENCRYPTION = "META-INF/encryption.xml"
_CONTAINER_NS = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
_ENC = "{http://www.w3.org/2001/04/xmlenc#}"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
#: the algorithms of font obfuscation (IDPF's, and Adobe's older one): only fonts use them
_OBFUSCATION = frozenset({"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"})
#: the media types of the content documents translated, and whether each is read as XML (one
#: listed as `text/html`, as older tools list XHTML chapters, is read as XML where it is XHTML:
#: `_XHTML`)
_DOCUMENTS = {"application/xhtml+xml": True, "text/html": False}
_XHTML = re.compile(r"""\A\s*<\?xml|xmlns\s*=\s*["']http://www\.w3\.org/1999/xhtml["']""")
_NCX_TYPE = "application/x-dtbncx+xml"
#: an XML declaration's encoding
_DECLARED = re.compile(rb"""^<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
#: a description that holds markup (`<p>`, `</b>`, `<br/>`): HTML, as Calibre writes it
_MARKUP = re.compile(r"</?[A-Za-z][^<>]*>")


def _parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def _parse(name: str, raw: bytes) -> etree._Element:
    """An XML part of the book; FormatError 400 where it is not well-formed or declares
    entities of its own (a DOCTYPE that names a public DTD, as an NCX's does, is read)."""
    try:
        root = etree.fromstring(raw, _parser())
    except etree.XMLSyntaxError as exc:
        raise FormatError(f"{name} is not well-formed XML ({exc})") from None
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is not None and next(dtd.iterentities(), None) is not None:
        raise FormatError(f"{name} declares entities of its own, which an EPUB's files never do")
    return root


def _serialize(root: etree._Element) -> bytes:
    """A part written back, with its XML declaration and DOCTYPE."""
    info = root.getroottree().docinfo
    return etree.tostring(
        root.getroottree(),
        encoding=info.encoding or "UTF-8",
        xml_declaration=True,
        standalone=True if info.standalone else None,  # (lxml says False where none is)
    )


def _kind(archive: zipfile.ZipFile) -> None:
    """FormatError 400 where the archive is no EPUB: an office file is refused as what it is;
    an archive with a `META-INF/container.xml` is taken for a book whatever its `mimetype`
    entry says (a reading system does so; a stray byte order mark in it is not worth a
    refusal)."""
    names = set(archive.namelist())
    mimetype = b""
    if "mimetype" in names:
        info = archive.getinfo("mimetype")
        mimetype = read_entry(archive, info).strip() if info.file_size <= 200 else b"?"
    what = next(
        (NAMES[k] for k, part in (("docx", "word/document.xml"), ("pptx", "ppt/presentation.xml"))
         if part in names),
        None,
    )  # fmt: skip
    if what is None and mimetype.startswith(b"application/vnd.oasis.opendocument"):
        what = f"an OpenDocument file of type {mimetype.decode('ascii', 'replace')!r}"
    if what is not None:
        raise FormatError(
            f"the file is {what}, not what its extension .epub says; send it with its own extension"
        )
    if CONTAINER in names:
        return
    if mimetype == MIMETYPE:
        raise FormatError(f"the book has no {CONTAINER}, which names its package document")
    raise FormatError(
        f"the archive is not an EPUB book (it has no {CONTAINER}, and no mimetype entry that "
        f"says {MIMETYPE.decode()})"
    )


def _entry(base: str, href: str) -> str:
    """The archive entry a manifest's `href` names (relative to the package document's
    folder, its %-escapes decoded, without a fragment)."""
    path = unquote(urlsplit(href).path)
    return posixpath.normpath(posixpath.join(base, path)) if path else ""


def _encrypted(archive: zipfile.ZipFile) -> set[str]:
    """The entries encrypted otherwise than by font obfuscation."""
    try:
        info = archive.getinfo(ENCRYPTION)
    except KeyError:
        return set()
    if info.file_size > BIG_ENTRY:
        raise FormatError(
            f"{ENCRYPTION} has {info.file_size} bytes; a list of entries has a few kB"
        )
    root = _parse(ENCRYPTION, read_entry(archive, info))
    out = set()
    for data in root.iter(_ENC + "EncryptedData"):
        method = data.find(_ENC + "EncryptionMethod")
        algorithm = "" if method is None else method.get("Algorithm", "")
        if algorithm in _OBFUSCATION:
            continue
        for ref in data.iter(_ENC + "CipherReference"):
            out.add(_entry("", ref.get("URI", "")))
    return out


@dataclass
class _Document:
    """A content document: its entry, its text and how to write it back."""

    name: str
    doc: HtmlDocument
    encoding: str
    bom: bytes


#: how an XML document's first bytes tell its encoding (XML 1.0, appendix F): byte order
#: marks, then UTF-16 without one by its `<?`; None: UTF-32, which no EPUB may use
_SIGNATURES: list[tuple[bytes, str | None, bool]] = [  # (bytes, codec, whether a mark)
    (b"\x00\x00\xfe\xff", None, True),
    (b"\xff\xfe\x00\x00", None, True),
    (b"\x00\x00\x00<", None, False),
    (b"<\x00\x00\x00", None, False),
    (codecs.BOM_UTF8, "utf-8", True),
    (codecs.BOM_UTF16_LE, "utf-16-le", True),
    (codecs.BOM_UTF16_BE, "utf-16-be", True),
    (b"<\x00?\x00", "utf-16-le", False),
    (b"\x00<\x00?", "utf-16-be", False),
]


def _decode(name: str, raw: bytes) -> tuple[str, str, bytes]:
    """(text, codec, byte order mark) of a content document: told by its first bytes (a byte
    order mark, or UTF-16's `<?`), else by the encoding its XML declaration names (among
    those browsers know: app/html_charset.py), else UTF-8."""
    bom, codec = b"", "utf-8"
    for signature, known, mark in _SIGNATURES:
        if raw.startswith(signature):
            if known is None:
                raise FormatError(f"{name} is UTF-32 text; save the book in UTF-8")
            bom, codec = (signature if mark else b""), known
            break
    else:
        declared = _DECLARED.match(raw)
        if declared is not None:
            label = declared.group(1).decode("ascii")
            found = lookup(label)
            if found is None or found.codec is None:
                raise FormatError(
                    f"{name} declares the encoding {label!r}, which is unknown; "
                    "save the book in UTF-8"
                )
            # the encoding as XML reads the label (ISO-8859-1 as itself, where a browser
            # reads an HTML page so labelled as windows-1252), among those browsers know
            try:
                codec = codecs.lookup(label).name
            except LookupError:  # (a label of the web's that Python lacks: x-mac-cyrillic)
                codec = found.codec
            if codec.startswith(("utf-16", "utf-32")):  # declared, but read as ASCII: UTF-8
                codec = "utf-8"
    try:
        text = raw[len(bom) :].decode(codec)
    except UnicodeDecodeError as exc:
        raise FormatError(
            f"{name} is not valid {codec} text (at byte {exc.start + len(bom)}); "
            "save the book in UTF-8"
        ) from None
    if "\x00" in text:  # (UTF-16 read as UTF-8, or a file of another kind)
        raise FormatError(f"{name} holds NUL characters: it is not {codec} text")
    return text, codec, bom


class _Slot:
    """A text of the NCX or the package (a title, a label): its element (and `attribute`,
    where the text is that attribute's value), the whitespace around its text, and its unit
    (or, for a description written as HTML, its document)."""

    def __init__(
        self, element: etree._Element, limit: int, html: bool = False, attribute: str = ""
    ):
        self.element, self.attribute = element, attribute
        text = (element.get(attribute) if attribute else element.text) or ""
        stripped = text.strip()
        self.before = text[: len(text) - len(text.lstrip())]
        self.after = text[len(text.rstrip()) :]
        self.doc: HtmlDocument | None = None
        self.unit: Unit | None = None
        if html and _MARKUP.search(stripped):
            self.doc = HtmlDocument(stripped, limit=limit)
        else:
            builder = UnitBuilder()
            builder.text(" ".join(stripped.replace(SOFT_HYPHEN, "").split()))
            self.unit = builder.build(limit=limit)

    @property
    def units(self) -> list[Unit]:
        if self.doc is not None:
            return self.doc.units
        return [] if self.unit is None else [self.unit]

    def write(self, tokens: list[list[Token]], language: str | None) -> bool:
        """Its translation written into its element; whether it was translated."""
        if not any(t.translated for unit in tokens for t in unit):
            return False
        if self.doc is not None:
            text = self.doc.render_tokens(tokens, language=language)
        else:
            text = "".join(t.text for t in tokens[0])
        # (lxml refuses the characters XML cannot hold, which a model may write)
        text = self.before + NOT_XML.sub("", text) + self.after
        if self.attribute:
            self.element.set(self.attribute, text)
            return True
        self.element.text = text
        written = self.element.get(_XML_LANG)
        if language is not None and written is not None and not names_language(written, language):
            self.element.set(_XML_LANG, language)
        return True


def _declare(package: etree._Element, name: str, language: str) -> set[str]:
    """The package set to say that the book is in `language`, once its text was translated:
    its first `dc:language` (others, of a book in several, kept) and its `xml:lang` (each kept
    where it names the language already: `de-CH` for `de`), and its `dir` and an EPUB 3
    spine's page progression turned to the language's direction (an Arabic book is paged
    right to left); {name} where the package changed."""
    changed = False
    metadata = package.find(_OPF + "metadata")
    first = None if metadata is None else next(metadata.iter(_DC + "language"), None)
    if first is not None and not names_language(first.text or "", language):
        first.text, changed = language, True
    written = package.get(_XML_LANG)
    if written is not None and not names_language(written, language):
        package.set(_XML_LANG, language)
        changed = True
    wanted = direction(language)
    if package.get("dir") not in (None, wanted):  # the direction of the metadata's text
        package.set("dir", wanted)
        changed = True
    spine = package.find(_OPF + "spine")
    if spine is not None and package.get("version", "").startswith("3"):  # (not in EPUB 2)
        progression = spine.get("page-progression-direction")
        if progression != wanted and (wanted == "rtl" or progression == "rtl"):
            spine.set("page-progression-direction", wanted)
            changed = True
    return {name} if changed else set()


def translate_epub(
    data: bytes, translate: Translate, limits: Limits, language: str | None = None
) -> bytes:
    """`language`: the tag the translation is in, for the book's `dc:language` and its
    documents' `lang` attributes (None: they are kept)."""
    archive = open_archive(data, limits)
    _kind(archive)
    container = archive.getinfo(CONTAINER)
    if container.file_size > BIG_ENTRY:
        raise FormatError(f"{CONTAINER} has {container.file_size} bytes; it names a file or two")
    rootfile = next(
        (
            r
            for r in _parse(CONTAINER, read_entry(archive, container)).iter(
                _CONTAINER_NS + "rootfile"
            )
            if r.get("media-type", "application/oebps-package+xml")
            == "application/oebps-package+xml"
        ),
        None,
    )
    names = set(archive.namelist())
    package_name = _entry("", rootfile.get("full-path", "")) if rootfile is not None else ""
    if package_name not in names:
        raise FormatError(f"{CONTAINER} names no package document that the book holds")
    encrypted = _encrypted(archive)
    base = posixpath.dirname(package_name)

    def checked(name: str) -> zipfile.ZipInfo:
        if name in encrypted:
            raise FormatError(
                f"the book is encrypted (DRM: {name} is listed in {ENCRYPTION}), so its text "
                "cannot be read; send a book without DRM"
            )
        return archive.getinfo(name)

    package_info = checked(package_name)
    if package_info.file_size > limits.max_xml_bytes:  # (before it is parsed: lxml's tree
        # takes tens of times the bytes it reads)
        raise FormatError(
            f"{package_name} has {package_info.file_size} bytes; at most {limits.max_xml_bytes}",
            413,
        )
    package = _parse(package_name, read_entry(archive, package_info))
    items = [  # (a manifest may name a file twice, or one the book lacks, or lack ids)
        item
        for item in package.iter(_OPF + "item")
        if item.getparent() is not None and item.getparent().tag == _OPF + "manifest"
    ]
    by_id: dict[str | None, etree._Element] = {}
    for item in items:
        if item.get("id") is not None:
            by_id.setdefault(item.get("id"), item)
    spine = [
        by_id[i] for i in (r.get("idref") for r in package.iter(_OPF + "itemref")) if i in by_id
    ]
    documents: list[tuple[str, bool]] = []  # (entry, read as XML)
    ncx_name = None
    for item in dict.fromkeys([*spine, *items]):  # the spine's in reading order first
        name = _entry(base, item.get("href", ""))
        media = item.get("media-type", "")
        if name not in names or any(name == n for n, _ in documents):
            continue
        if media in _DOCUMENTS:
            documents.append((name, _DOCUMENTS[media]))
        elif media == _NCX_TYPE and ncx_name is None:
            ncx_name = name
    if not documents:
        raise FormatError(
            f"{package_name} lists no XHTML document that the book holds (manifest items of "
            "media type application/xhtml+xml): there is no text to translate"
        )
    infos = [checked(n) for n, _ in documents] + ([checked(ncx_name)] if ncx_name else [])
    xml_bytes = sum(i.file_size for i in infos) + package_info.file_size
    if xml_bytes > limits.max_xml_bytes:
        raise FormatError(
            f"the book's text documents unpack to {xml_bytes} bytes; at most "
            f"{limits.max_xml_bytes} (bounded by the characters of text allowed in a file)",
            413,
        )

    docs: list[_Document] = []
    for name, xml in documents:
        text, encoding, bom = _decode(name, read_entry(archive, archive.getinfo(name)))
        xml = xml or _XHTML.search(text, 0, 4096) is not None
        try:
            doc = HtmlDocument(text, limit=limits.max_request_chars, attributes=True, xml=xml)
        except HtmlError as exc:
            raise FormatError(f"{name}: {exc}") from None
        docs.append(_Document(name, doc, encoding, bom))
    ncx = None
    slots: list[tuple[str, _Slot]] = []  # (the part, the slot)
    if ncx_name is not None:
        ncx = _parse(ncx_name, read_entry(archive, archive.getinfo(ncx_name)))
        for label in ncx.iter(_NCX + "docTitle", _NCX + "navLabel"):
            for text in label.iter(_NCX + "text"):
                slots.append((ncx_name, _Slot(text, limits.max_request_chars)))
    metadata = package.find(_OPF + "metadata")
    if metadata is not None:
        for element in metadata.iter(_DC + "title", _DC + "description"):
            html = element.tag == _DC + "description"
            slots.append((package_name, _Slot(element, limits.max_request_chars, html)))
    for reference in package.iterfind(f"{_OPF}guide/{_OPF}reference"):  # (EPUB 2's landmarks)
        if reference.get("title"):
            slot = _Slot(reference, limits.max_request_chars, attribute="title")
            slots.append((package_name, slot))

    units = [u for d in docs for u in d.doc.units] + [u for _, s in slots for u in s.units]
    with kept_languages() as kept:  # the language of each text kept as it is
        tokens = translate_units(units, once_each(translate))
    replaced: dict[str, bytes] = {}
    at = sent = 0
    for d in docs:
        n = len(d.doc.units)
        requests = sum(len(u.requests) for u in d.doc.units)
        own = d.doc.unit_languages(kept[sent : sent + requests]) if kept else None
        doc_tokens = tokens[at : at + n]
        at, sent = at + n, sent + requests
        if not any(t.translated for unit in doc_tokens for t in unit):
            continue  # nothing translated: the document keeps its bytes
        text = d.doc.render_tokens(doc_tokens, language=language, kept=own)
        replaced[d.name] = d.bom + text.encode(d.encoding, errors="xmlcharrefreplace")
    touched = set()
    for part, slot in slots:
        n = len(slot.units)
        if slot.write(tokens[at : at + n], language):
            touched.add(part)
        at += n
    if ncx is not None and ncx_name in touched:
        written = ncx.get(_XML_LANG)
        if language is not None and written is not None and not names_language(written, language):
            ncx.set(_XML_LANG, language)
        replaced[ncx_name] = _serialize(ncx)
    if (replaced or touched) and language is not None:
        touched |= _declare(package, package_name, language)
    if package_name in touched:
        replaced[package_name] = _serialize(package)
    return rebuild(archive, replaced)
