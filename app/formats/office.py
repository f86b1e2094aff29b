"""Word (.docx), PowerPoint (.pptx) and OpenDocument text (.odt) files: zip archives of XML.

The archive is checked before anything is unpacked (`open_archive`): a corrupt zip, an
encrypted entry or an unknown compression method is a 400; more than `max_entries` entries,
more than `max_unpacked_bytes` declared uncompressed in all, or an entry over 1 MiB that
inflates more than `max_ratio` times (a zip bomb) is a 413. zipfile stops every entry at its
declared size and checks its CRC, so the declared sizes bound what is unpacked. An archive of
another kind than its extension says (a Word document named `x.odt`, an OpenDocument
spreadsheet whose `mimetype` is not text) is a 400: it would be served under that extension.
So is a password-protected document, told apart from a broken one: a .docx or .pptx in the
compound file Office encrypts it into (the signature of a binary .doc or .ppt too), an .odt
whose manifest names how its parts are encrypted.

Only the parts that hold the document's text are parsed (lxml, with entities, DTDs and network
access off; a part with a DOCTYPE is refused): the body, headers, footers, footnotes, endnotes
and comments of a .docx, the slides, speaker notes and comments (legacy and modern; their
authors are in parts of their own) of a .pptx, the SmartArt graphics and charts of both,
content.xml and styles.xml (headers and footers) of an .odt, with the title and the fixed text
of its indexes' templates and the titles and descriptions of its pictures and shapes; besides
paragraphs, the alternative text of pictures and shapes, the document's title, subject and
description and a chart's series and category names (app/formats/office_labels.py). Every
other entry is copied with its bytes, name, order, dates
and compression unchanged (so the .odt `mimetype` entry stays first and stored).

Each paragraph (`w:p`, `a:p`, `text:p`/`text:h`) is cut into units at tabs and line breaks;
inside a unit, each run of text with its own formatting (a `w:r`/`a:r` with its properties; an
.odt span or link) is a pair for app/formats/inline.py. Consecutive runs with the same
formatting (Word splits runs for spell checking and revisions) are one, unless a marker stands
between them: a field's begin, separator or end (`w:fldChar`, `w:instrText`), a bookmark, a
comment's range or reference, a footnote's or endnote's reference, a picture, a text box or an
embedded object, a permission range, a tracked deletion (`w:del`, whose `w:delText` is never
sent) or move (`w:moveFrom`, whose text is translated where it was moved to), a non-breaking hyphen, a symbol, the page number or a date Word writes in its place
(`w:pgNum`, `w:dayLong`...), an equation (`m:oMath`) (.docx); a field (`a:fld`, whose text is
never sent) (.pptx); a bookmark, a reference mark, a comment (`office:annotation`,
`office:annotation-end`), an index entry's range, a note (`text:note`), a frame or a shape
(`draw:*`), spaces after a space (`text:s`), a tracked change mark
(.odt). A marker stays in the unit, so the sentence is still translated whole, but the text on
each side of it is a run of its own: a hyperlink field's result, a bookmarked or commented
range keeps the translation of the text it held. A bookmark that encloses nothing (Word's
`_GoBack`, an .odt `text:bookmark` or `text:reference-mark`) keeps nothing apart. A field's
instruction text is never translated, nor is a nested field's result inside it (the
`{ MERGEFIELD Gender }` of `{ IF { MERGEFIELD Gender } = "male" ... }`). A run's translation
goes into its first text node, the run's other text nodes are emptied; the formatting, every
other element and every attribute stay as they were, but for a hint of the source's layout in
a translated paragraph, which has no place in its translation and is dropped: an optional
hyphen (`w:softHyphen`, or U+00AD in the text), which does not cut its word for the model; a
page break where the last layout ended a page (`w:lastRenderedPageBreak`,
`text:soft-page-break`). A paragraph that its placeholders would take over `max_request_chars`
is sent by runs only.
"""

from __future__ import annotations

import fnmatch
import io
import re
import zipfile
from dataclasses import dataclass, field

from lxml import etree

from . import FormatError, Limits, Translate
from .inline import Unit, UnitBuilder, translate_units
from .office_labels import PROPERTY_PARTS, label_slots

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
MATH = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
BIG_ENTRY = 1 << 20
#: the signature of a Compound File (OLE2): Word 97-2003's .doc, PowerPoint's .ppt, and the
#: container Office encrypts a password-protected .docx, .pptx or .odt into
OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
#: an optional hyphen written as a character (an .odt's, and a .docx's from other writers than
#: Word): where the source word may be hyphenated, nowhere in its translation. Sent, it cut the
#: word into letters for the model ("transla\u00adtion": "tra n s l a <0xC2> <0xAD> tion").
SOFT_HYPHEN = "\u00ad"
#: characters XML 1.0 does not allow: a model whose tokenizer falls back to bytes can write
#: them, and lxml refused the translation (ValueError: the file failed with a server error)
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


@dataclass(frozen=True)
class RunFormat:
    """Where a format keeps its text runs (.docx, .pptx)."""

    paragraph: str
    text: str
    properties: str
    breaks: frozenset[str]  # end a unit; not looked into
    ignored: frozenset[str]  # hold no text to translate
    markers: frozenset[str] = frozenset()  # keep the runs on each side apart; not looked into
    #: hints of the source's layout, dropped from a translated unit (they have no place in its
    #: translation): the words on each side are one text for the model
    hints: frozenset[str] = frozenset()


DOCX = RunFormat(
    paragraph=W + "p",
    text=W + "t",
    properties=W + "rPr",
    breaks=frozenset(
        W + t
        for t in [
            "tab",
            "br",
            "cr",
            "ptab",
        ]
    ),
    ignored=frozenset(W + t for t in ["rPr", "pPr", "instrText", "delText", "delInstrText"]),
    markers=frozenset(
        W + t
        for t in [
            "fldChar",
            "instrText",
            "delInstrText",
            "bookmarkStart",
            "bookmarkEnd",
            "commentRangeStart",
            "commentRangeEnd",
            "commentReference",
            "permStart",
            "permEnd",
            # a tracked deletion (its text is w:delText, never sent) and a non-breaking hyphen
            # stay between the words on each side: merged into one run, their words came
            # before the deletion or hyphen, which ended up after the sentence
            "del",
            "noBreakHyphen",
            # text moved away with changes tracked: hidden as a deletion is, it was sent inside
            # the sentence it left (it is translated where it was moved to)
            "moveFrom",
            # a symbol, the page number and the date Word writes in their place: moved to
            # the end of the run's translation, or (a symbol) cutting the sentence in two
            "sym",
            "pgNum",
            "dayShort",
            "dayLong",
            "monthShort",
            "monthLong",
            "yearShort",
            "yearLong",
            # a note's number in the text, a picture, a text box or an embedded object (the
            # text box's paragraphs are units of their own): it cut the sentence in two,
            # translated apart
            "footnoteReference",
            "endnoteReference",
            "drawing",
            "pict",
            "object",
        ]
    )
    | {MC + "AlternateContent"}
    # an equation inside a sentence (its m:t is no text to translate): it was written after
    # the sentence's translation
    | {MATH + "oMath", MATH + "oMathPara"},
    # an optional hyphen: where the source word may be hyphenated, nowhere in its translation
    # (it was written after the run's translation; a marker would cut the word in two); where
    # the last layout ended a page (it was left after the sentence's translation)
    hints=frozenset({W + "softHyphen", W + "lastRenderedPageBreak"}),
)
PPTX = RunFormat(
    paragraph=A + "p",
    text=A + "t",
    properties=A + "rPr",
    breaks=frozenset({A + "br"}),
    ignored=frozenset({A + "rPr", A + "pPr", A + "endParaRPr"}),
    # a field (the slide number, a date): its text is PowerPoint's to write; it cut the
    # sentence around it in two, translated apart
    markers=frozenset({A + "fld"}),
)
ODT_PARAGRAPHS = frozenset({TEXT + "p", TEXT + "h"})
ODT_BREAKS = frozenset({TEXT + "tab", TEXT + "line-break"})
#: keep the text on each side apart without ending the unit; not looked into (a comment's own
#: paragraphs are units of their own, as a note's). A point bookmark or reference mark
#: (text:bookmark, text:reference-mark) encloses nothing and keeps nothing apart.
ODT_MARKERS = frozenset(
    TEXT + t
    for t in [
        "note",
        "bookmark-start",
        "bookmark-end",
        "reference-mark-start",
        "reference-mark-end",
        # the words an index entry is made of: they were merged with the text before them,
        # and the entry marked nothing
        "alphabetical-index-mark-start",
        "alphabetical-index-mark-end",
        "toc-mark-start",
        "toc-mark-end",
        "user-index-mark-start",
        "user-index-mark-end",
        "change",
        "change-start",
        "change-end",
    ]
) | {OFFICE + "annotation", OFFICE + "annotation-end"}
# the second of two spaces (a typo inside a sentence, or after its full stop): it cut the
# sentence in two
ODT_MARKERS |= {TEXT + "s"}
#: a picture, a text box or a shape inside a paragraph: every element of these namespaces is a
#: marker. It cut the sentence in two, and a shape's title and description were sent inside
#: the sentence; the paragraphs in a shape are units of their own, as its title and description.
ODT_SHAPES = (DRAW, "{urn:oasis:names:tc:opendocument:xmlns:dr3d:1.0}")
SVG = "{urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0}"
#: elements of text alone, each a unit: the text of an index's (a table of contents') template,
#: from which the index is made again when it is updated: its title and the fixed text of its
#: entries (untranslated, updating the index brought back the source's "Table of Contents"); a
#: shape's or a picture's title and description.
ODT_TEMPLATES = frozenset(
    {TEXT + "index-title-template", TEXT + "index-entry-span", SVG + "title", SVG + "desc"}
)
#: a hint of the last layout (ODF 1.2 part 1, 5.6: where a page ended when the document was
#: last saved), dropped from a translated paragraph as RunFormat.hints: written after the
#: translation of the text before it, it broke the page there
ODT_HINTS = frozenset({TEXT + "soft-page-break"})
#: a SmartArt graphic's text (DrawingML paragraphs, as a slide's, in a .docx too): its data,
#: from which it is laid out again when it is edited, and the drawing of its last layout, which
#: Word and PowerPoint show until then. Neither was translated.
DIAGRAMS = ["diagrams/data*.xml", "diagrams/drawing*.xml"]
#: a chart's title and axis titles are DrawingML paragraphs too (its series and category
#: names: app/formats/office_labels.py)
#: (kind, required entry, parts translated, run format or None for .odt)
KINDS = [
    ("docx", "word/document.xml", ["word/document.xml", "word/header*.xml", "word/footer*.xml",
                                   "word/footnotes.xml", "word/endnotes.xml",
                                   "word/comments.xml", *["word/" + d for d in DIAGRAMS],
                                   "word/charts/chart*.xml",
                                   "docProps/core.xml"], DOCX),
    ("pptx", "ppt/presentation.xml", ["ppt/slides/slide*.xml",
                                      "ppt/notesSlides/notesSlide*.xml",
                                      "ppt/comments/*.xml", "ppt/charts/chart*.xml",
                                      *["ppt/" + d for d in DIAGRAMS], "docProps/core.xml"], PPTX),
    ("odt", "content.xml", ["content.xml", "styles.xml", "meta.xml"], None),
]  # fmt: skip


@dataclass(eq=False)
class Group:
    """A run of text with one formatting: the text nodes (element, "text" or "tail") or the
    attribute (element, "@name") it fills."""

    key: object
    slots: list[tuple[etree._Element, str]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(
            (el.get(attr[1:]) if attr[0] == "@" else getattr(el, attr)) or ""
            for el, attr in self.slots
        )

    def write(self, text: str) -> None:
        text = NOT_XML.sub("", text)
        for i, (el, attr) in enumerate(self.slots):
            value = text if i == 0 else ""
            if attr[0] == "@":  # an attribute ("@descr"): a unit of its own
                el.set(attr[1:], value)
            elif attr == "tail":
                el.tail = value or None
            elif el.tag == W + "t":
                el.text = value
                if value != value.strip() and el.get(XML_SPACE) is None:
                    el.set(XML_SPACE, "preserve")
            else:
                el.text = value or None


class _Paragraphs:
    """Collects units of groups; a unit ends at `flush`, a group at `cut` or a new key."""

    def __init__(self) -> None:
        self.units: list[list[Group]] = []
        self.hints: list[list[etree._Element]] = []  # each unit's hints (RunFormat.hints)
        self.groups: list[Group] = []
        self._hints: list[etree._Element] = []
        self._cut = False

    def add(self, slot: tuple[etree._Element, str], key: object) -> None:
        if self.groups and not self._cut and self.groups[-1].key == key:
            self.groups[-1].slots.append(slot)
        else:
            self.groups.append(Group(key, [slot]))
        self._cut = False

    def cut(self) -> None:
        """The next text starts a group of its own (a marker stands between)."""
        self._cut = True

    def hint(self, el: etree._Element) -> None:
        """`el` is dropped if the unit is translated."""
        self._hints.append(el)

    def flush(self) -> None:
        if self.groups:
            self.units.append(self.groups)
            self.hints.append(self._hints)
            self.groups = []
        self._hints = []
        self._cut = False


def _run_key(run: etree._Element, fmt: RunFormat) -> object:
    props = run.find(fmt.properties)
    if props is None:
        return (run.getparent(), b"")
    # PowerPoint marks runs for spell checking (err) and editing (dirty): not formatting
    attrs = sorted((k, v) for k, v in props.attrib.items() if k not in ("dirty", "err"))
    return (run.getparent(), tuple(attrs), tuple(etree.tostring(c) for c in props))


def _empty_bookmark(el: etree._Element) -> bool:
    """A .docx bookmark that encloses nothing (Word's `_GoBack`, a cross-reference target): its
    start directly followed by its end. It keeps no words apart."""
    if el.tag == W + "bookmarkStart":
        start, end = el, el.getnext()
    elif el.tag == W + "bookmarkEnd":
        start, end = el.getprevious(), el
    else:
        return False
    return (
        start is not None
        and end is not None
        and start.tag == W + "bookmarkStart"
        and end.tag == W + "bookmarkEnd"
        and start.get(W + "id") == end.get(W + "id")
    )


def _run_units(paragraph: etree._Element, fmt: RunFormat, acc: _Paragraphs) -> None:
    # the fields open in the paragraph: True while in a field's code (between its begin and
    # separate fldChar). A nested field's result there is part of the outer field's code
    # (`IF { MERGEFIELD Gender } = "male" ...`) and is not translated either.
    fields: list[bool] = []

    def visit(el: etree._Element) -> None:
        for child in el:
            tag = child.tag
            if not isinstance(tag, str):
                continue
            if tag == W + "fldChar":
                kind = child.get(W + "fldCharType")
                if kind == "begin":
                    fields.append(True)
                elif kind == "separate" and fields:
                    fields[-1] = False
                elif kind == "end" and fields:
                    fields.pop()
            if tag in fmt.markers:
                if not _empty_bookmark(child):
                    acc.cut()
            elif tag in fmt.hints:
                acc.hint(child)
            elif tag in fmt.ignored:
                continue
            elif tag == fmt.paragraph or tag in fmt.breaks:
                acc.flush()
            elif tag == fmt.text:
                if not any(fields):
                    acc.add((child, "text"), _run_key(child.getparent(), fmt))
            else:
                visit(child)

    visit(paragraph)
    acc.flush()


def _odt_units(paragraph: etree._Element, acc: _Paragraphs) -> None:
    def visit(el: etree._Element) -> None:
        if el.text:
            acc.add((el, "text"), el)
        for child in el:
            if isinstance(child.tag, str):
                if child.tag in ODT_PARAGRAPHS or child.tag in ODT_BREAKS:
                    acc.flush()
                elif child.tag in ODT_MARKERS or child.tag.startswith(ODT_SHAPES):
                    acc.cut()
                elif child.tag in ODT_HINTS:
                    acc.hint(child)
                else:
                    visit(child)
            if child.tail:
                acc.add((child, "tail"), el)

    visit(paragraph)
    acc.flush()


def _drop(el: etree._Element) -> None:
    """Removes `el`, keeping the text after it."""
    parent = el.getparent()
    if el.tail:
        prev = el.getprevious()
        if prev is not None:
            prev.tail = (prev.tail or "") + el.tail
        else:
            parent.text = (parent.text or "") + el.tail
    parent.remove(el)


def _apply(groups: list[Group], tokens) -> None:
    """Writes a unit's translation into its groups (see app/formats/inline.py's tokens)."""
    assigned: dict[int, list[str]] = {id(g): [] for g in groups}
    stack: list[Group] = []
    last = groups[0]
    for tok in tokens:
        if tok.kind == "open":
            stack.append(tok.ref)
        elif tok.kind == "close" and stack:
            last = stack.pop()
        elif tok.kind == "text":
            assigned[id(stack[-1] if stack else last)].append(tok.text)
    for g in groups:
        g.write("".join(assigned[id(g)]))


def open_archive(data: bytes, limits: Limits) -> zipfile.ZipFile:
    """The archive, after checking what it would unpack to (see the module docstring)."""
    if data.startswith(OLE2):
        raise FormatError(
            "the file is an older binary Office file (.doc, .ppt) or a password-protected "
            "document, not a zip archive; save it, without a password, as .docx, .pptx or .odt"
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError) as exc:
        raise FormatError(f"the file is not a valid zip archive ({exc})") from None
    if len(infos) > limits.max_entries:
        raise FormatError(
            f"the archive has {len(infos)} entries; at most {limits.max_entries}", 413
        )
    total = sum(i.file_size for i in infos)
    if total > limits.max_unpacked_bytes:
        raise FormatError(
            f"the archive unpacks to {total} bytes; at most {limits.max_unpacked_bytes}", 413
        )
    for info in infos:
        if info.flag_bits & 0x1:
            raise FormatError(f"the archive entry {info.filename!r} is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise FormatError(f"the archive entry {info.filename!r} uses an unknown compression")
        if info.file_size > BIG_ENTRY and info.file_size > limits.max_ratio * max(
            info.compress_size, 1
        ):
            raise FormatError(
                f"the archive entry {info.filename!r} inflates {info.compress_size} bytes to "
                f"{info.file_size} (more than {limits.max_ratio} times): refused as a zip bomb",
                413,
            )
    return archive


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    try:
        return archive.read(info)
    except Exception as exc:  # noqa: BLE001 (zlib, CRC and truncation errors alike: a broken file)
        raise FormatError(f"the archive entry {info.filename!r} is corrupt ({exc})") from None


def _parse(name: str, raw: bytes) -> etree._Element:
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False
    )
    try:
        root = etree.fromstring(raw, parser)
    except etree.XMLSyntaxError as exc:
        raise FormatError(f"{name} is not well-formed XML ({exc})") from None
    if root.getroottree().docinfo.doctype:
        raise FormatError(f"{name} has a DOCTYPE, which office files never have")
    return root


def _serialize(root: etree._Element, raw: bytes) -> bytes:
    info = root.getroottree().docinfo
    if not raw.lstrip().startswith(b"<?xml"):
        return etree.tostring(root, encoding="UTF-8", xml_declaration=False)
    return etree.tostring(
        root.getroottree(),
        encoding=info.encoding or "UTF-8",
        xml_declaration=True,
        standalone=info.standalone,
    )


#: what each kind is, in an error message
NAMES = {
    "docx": "a Word document (.docx)",
    "pptx": "a PowerPoint presentation (.pptx)",
    "odt": "an OpenDocument text (.odt)",
}
ODT_MIMETYPE = b"application/vnd.oasis.opendocument.text"


def _kind_of(archive: zipfile.ZipFile, expected: str | None) -> tuple:
    """The entry of KINDS the archive is (`expected`'s when it holds that kind's required
    entry); FormatError 400 when it is none, or not `expected`: a Word document sent as
    `x.odt` was translated and served as `x_de.odt`, with the .odt media type."""
    names = set(archive.namelist())
    found = [k for k in KINDS if k[1] in names]
    kind = next((k for k in found if k[0] == expected), found[0] if found else None)
    if kind is None:
        raise FormatError(
            "the archive is not a Word, PowerPoint or OpenDocument text file "
            "(no word/document.xml, ppt/presentation.xml or content.xml)"
        )
    what = NAMES[kind[0]]
    if kind[0] == "odt" and "mimetype" in names:  # an .ods or .odp has a content.xml too
        info = archive.getinfo("mimetype")
        mimetype = _read(archive, info).strip() if info.file_size <= 200 else b"?"
        if not mimetype.startswith(ODT_MIMETYPE):
            what = f"an OpenDocument file of type {mimetype.decode('ascii', 'replace')!r}"
            kind = None
    if expected is not None and (kind is None or kind[0] != expected):
        raise FormatError(
            f"the file is {what}, not what its extension .{expected} says; "
            "send it with its own extension"
        )
    if kind is None:
        raise FormatError(f"the file is {what}, not a Word, PowerPoint or OpenDocument text file")
    return kind


MANIFEST = "{urn:oasis:names:tc:opendocument:xmlns:manifest:1.0}"


def _check_not_encrypted(archive: zipfile.ZipFile) -> None:
    """FormatError 400 for an OpenDocument file saved with a password: its manifest names how
    its parts are encrypted (it was "content.xml is not well-formed XML")."""
    try:
        info = archive.getinfo("META-INF/manifest.xml")
    except KeyError:
        return
    if info.file_size > BIG_ENTRY:  # a manifest lists the entries: a few kB
        return
    manifest = _parse(info.filename, _read(archive, info))
    if next(manifest.iter(MANIFEST + "encryption-data"), None) is not None:
        raise FormatError(
            "the document is password-protected; save it without a password and send it again"
        )


def translate_office(
    data: bytes, translate: Translate, limits: Limits, kind: str | None = None
) -> bytes:
    """`kind`: "docx", "pptx" or "odt", the file's extension: FormatError 400 when the file
    is another kind (None: whichever it is)."""
    archive = open_archive(data, limits)
    kind = _kind_of(archive, kind)
    if kind[0] == "odt":
        _check_not_encrypted(archive)
    _, _, patterns, fmt = kind
    text_parts = [
        i for i in archive.infolist() if any(fnmatch.fnmatchcase(i.filename, p) for p in patterns)
    ]
    text_parts.sort(key=lambda i: i.filename in PROPERTY_PARTS)  # the document's text first
    xml_bytes = sum(i.file_size for i in text_parts)
    if xml_bytes > limits.max_xml_bytes:
        raise FormatError(
            f"the document's text parts unpack to {xml_bytes} bytes of XML; at most "
            f"{limits.max_xml_bytes} (bounded by the characters of text allowed in a file)",
            413,
        )
    parts: dict[str, tuple[etree._Element, bytes]] = {}
    acc = _Paragraphs()
    part_of: list[str] = []  # the part each unit of `acc` comes from
    for info in text_parts:
        raw = _read(archive, info)
        root = _parse(info.filename, raw)
        parts[info.filename] = (root, raw)
        if fmt is None:
            units_of = (*ODT_PARAGRAPHS, *ODT_TEMPLATES)
            deleted = {  # the text of tracked deletions: hidden, never sent (as a .docx's)
                p for c in root.iter(TEXT + "tracked-changes") for p in c.iter(*units_of)
            }
            for p in root.iter(*units_of):
                if p not in deleted:
                    _odt_units(p, acc)
        else:
            drawingml = "/diagrams/" in info.filename or "/charts/" in info.filename
            part_fmt = PPTX if drawingml else fmt
            for p in root.iter(part_fmt.paragraph):
                _run_units(p, part_fmt, acc)
        for slot in label_slots(info.filename, root):  # alternative text... (office_labels.py)
            acc.add(slot, None)
            acc.flush()
        part_of.extend([info.filename] * (len(acc.units) - len(part_of)))
    units, groups, hints, touched = [], [], [], set()
    for unit_groups, unit_hints, part in zip(acc.units, acc.hints, part_of, strict=True):
        b = UnitBuilder()
        for g in unit_groups:
            b.open("run", g)
            b.text(g.text.replace(SOFT_HYPHEN, ""), g)
            b.close("run", g)
        unit = b.build()
        if unit is not None and max(map(len, unit.requests)) > limits.max_request_chars:
            # a long paragraph of many runs: sent whole, its placeholders took it over the
            # limit (a 413 for a paragraph whose text is within it); by runs, it may fit
            unit = Unit(unit.items, balanced=unit.balanced, whole=False)
        if unit is not None:
            units.append(unit)
            groups.append(unit_groups)
            hints.append(unit_hints)
            touched.add(part)
    for unit_groups, tokens in zip(groups, translate_units(units, translate), strict=True):
        _apply(unit_groups, tokens)
    for el in (el for unit_hints in hints for el in unit_hints):
        _drop(el)
    # a part without text to translate keeps its bytes
    return _rebuild(archive, {n: _serialize(*parts[n]) for n in sorted(touched)})


def _rebuild(archive: zipfile.ZipFile, replaced: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in archive.infolist():
            data = replaced.get(info.filename)
            if data is None:
                data = _read(archive, info)
            dst.writestr(info, data, compress_type=info.compress_type)
        dst.comment = archive.comment
    return out.getvalue()
