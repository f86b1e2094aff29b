"""Word (.docx), PowerPoint (.pptx), OpenDocument text (.odt) and presentation (.odp) files: zip
archives of XML.

The archive is checked, and its kind told, before anything is unpacked
(app/formats/office_archive.py). Only the parts that hold the document's text are parsed
(lxml, with entities, DTDs and network access off; a part with a DOCTYPE is refused): the body,
headers, footers, footnotes, endnotes and comments of a .docx, the slides, speaker notes and
comments (legacy and modern; their authors are in parts of their own) and the text its slide
masters and layouts show on slides (outside placeholders) and its notes and handout masters
on printed pages (their headers and footers too) of a .pptx, the SmartArt graphics
and charts of both, content.xml and styles.xml (headers and footers) of an .odt, with the
title and the fixed text of its indexes' templates and the titles and descriptions of its
pictures and shapes; besides paragraphs, the alternative text of pictures and shapes, links'
tips, the document's title, subject and description, a .pptx's section names and a chart's
series and category names (app/formats/office_labels.py); the labels of a .docx's numbered
lists and headings, "Chapter %1", sent each with its numbers as atoms (word/numbering.xml:
app/formats/office_numbering.py). The slide titles a .pptx lists in docProps/app.xml are
made the slides' translated titles (app/formats/office_titles.py). The texts a .docx's fields
show when updated (an IF's "Sir" and "Madam") are sent each as a text of its own
(app/formats/office_fields.py). Every other entry is copied with its
bytes, name, order, dates and compression unchanged (so the .odt `mimetype` entry stays first
and stored).

Each paragraph is cut into units of runs, each run of text with its own formatting a pair for
app/formats/inline.py (app/formats/office_runs.py, which describes what keeps runs apart and
what is dropped from a translated paragraph). A paragraph that its placeholders would take
over `max_request_chars` is sent by runs only, a run over it in pieces (`UnitBuilder.build`). A unit that comes back as it was sent (already
in the target's language) is left as it is, its optional hyphens and layout hints with it.
"""

from __future__ import annotations

import fnmatch

from lxml import etree

from . import FormatError, Limits, Translate, once_each
from .inline import SOFT_HYPHEN, UnitBuilder, distribute
from .office_archive import (
    check_not_encrypted,
    check_transitional,
    kind_of,
    main_part,
    open_archive,
    parse_part,
    read_entry,
    rebuild,
    serialize_part,
    with_main_part,
)
from .office_bindings import Bindings
from .office_fields import FieldTexts
from .office_labels import PROPERTY_PARTS, label_slots
from .office_language import mark_document
from .office_numbering import NumberingLabels
from .office_runs import (
    DOCX,
    DRAW,
    ODT_PARAGRAPHS,
    ODT_TEMPLATES,
    PPTX,
    TEXT,
    Paragraphs,
    RunFormat,
    apply_tokens,
    code_styles,
    drop,
    odt_units,
    run_units,
)
from .office_titles import PART as APP
from .office_titles import agree, slide_order, slide_title

#: a SmartArt graphic's text (DrawingML paragraphs, as a slide's, in a .docx too): its data,
#: from which it is laid out again when it is edited, and the drawing of its last layout, which
#: Word and PowerPoint show until then. Neither was translated.
DIAGRAMS = ["diagrams/data*.xml", "diagrams/drawing*.xml"]
P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
#: a slide master's or layout's text that its slides show: in its shapes that are no
#: placeholder (a text box "Confidential" on the master, on every slide, was left in the
#: source's language). A placeholder's text there is a prompt shown while editing, or a default
#: that a slide's own placeholder replaces: not translated.
MASTERS = ["ppt/slideMasters/slideMaster*.xml", "ppt/slideLayouts/slideLayout*.xml"]
#: the notes master's and the handout master's text, shown on every notes page and handout
#: printed: outside placeholders, and in the header and footer placeholders, whose text is the
#: header or footer typed for notes and handouts, no prompt (it was left in the source's
#: language). Their other placeholders' text is a prompt ("Click to edit Master text styles").
PRINT_MASTERS = ["ppt/notesMasters/notesMaster*.xml", "ppt/handoutMasters/handoutMaster*.xml"]
HEADERS = frozenset({"hdr", "ftr"})
#: a chart's title and axis titles are DrawingML paragraphs too (its series and category
#: names: app/formats/office_labels.py); `chart*.xml` holds an Office 2016 chart's
#: `chartEx*.xml` too
#: (kind, required entry, parts translated, run format or None for .odt)
# (extension, the part every file of the kind holds, the parts whose text is translated, the
# runs' format: None for an .odt)
Kind = tuple[str, str, list[str], RunFormat | None]
KINDS: list[Kind] = [
    ("docx", "word/document.xml", ["word/document.xml", "word/header*.xml", "word/footer*.xml",
                                   "word/footnotes.xml", "word/endnotes.xml",
                                   "word/comments.xml", *["word/" + d for d in DIAGRAMS],
                                   "word/numbering.xml",
                                   "word/charts/chart*.xml",
                                   "docProps/core.xml"], DOCX),
    ("pptx", "ppt/presentation.xml", ["ppt/slides/slide*.xml",
                                      "ppt/notesSlides/notesSlide*.xml",
                                      "ppt/comments/*.xml", "ppt/charts/chart*.xml",
                                      *["ppt/" + d for d in DIAGRAMS], *MASTERS,
                                      *PRINT_MASTERS,
                                      "ppt/presentation.xml", "docProps/core.xml"], PPTX),
    # (an embedded object's own content.xml, "Object 1/content.xml": a chart's title, axis
    # titles and its table's series and category names, which were not translated)
    ("odt", "content.xml", ["content.xml", "styles.xml", "meta.xml", "*/content.xml"], None),
    # (a presentation's slides and notes hold the same text:p paragraphs in draw:frame boxes)
    ("odp", "content.xml", ["content.xml", "styles.xml", "meta.xml", "*/content.xml"], None),
]  # fmt: skip


_PRESENTATION = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
_MASTER_PAGE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}master-page"


#: the most bytes of word/styles.xml read for its styles of code (Word's own take about 40 kB)
STYLES_BYTES = 4 << 20


def _styles(archive) -> etree._Element | None:
    """A .docx's word/styles.xml, or None where it has none or it cannot be read."""
    try:
        info = archive.getinfo("word/styles.xml")
    except KeyError:
        return None
    if info.file_size > STYLES_BYTES:
        return None
    try:
        return parse_part(info.filename, read_entry(archive, info))
    except FormatError:
        return None


def _odp_prompt(paragraph: etree._Element) -> bool:
    """Whether an OpenDocument paragraph is in a master page's placeholder, whose text is a
    prompt ("Click to edit the title text format"), as a .pptx master's placeholders are."""
    frame = next(paragraph.iterancestors(DRAW + "frame"), None)
    return (
        frame is not None
        and frame.get(_PRESENTATION + "placeholder") == "true"
        and next(frame.iterancestors(_MASTER_PAGE), None) is not None
    )


def _prompt(paragraph: etree._Element, printed: bool) -> bool:
    """Whether a master's paragraph is in a placeholder, whose text is a prompt (`printed`: a
    notes or handout master, whose header and footer are no prompts)."""
    shape = next(paragraph.iterancestors(P + "sp"), None)
    ph = None if shape is None else shape.find(f"{P}nvSpPr/{P}nvPr/{P}ph")
    return ph is not None and not (printed and ph.get("type") in HEADERS)


def translate_office(
    data: bytes,
    translate: Translate,
    limits: Limits,
    kind: str | None = None,
    language: str | None = None,
) -> bytes:
    """`kind`: "docx", "pptx", "odt" or "odp", the file's extension: FormatError 400 when the file
    is another kind (None: whichever it is). `language`: the tag the translated text is marked
    with (app/formats/office_language.py; None: its marks are kept)."""
    archive = open_archive(data, limits)
    found: Kind = kind_of(archive, kind, with_main_part(KINDS, main_part(archive)))
    if found[0] in ("odt", "odp"):
        check_not_encrypted(archive)
    _, _, patterns, fmt = found
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
    acc = Paragraphs()
    part_of: list[str] = []  # the part each unit of `acc` comes from
    # text sent whole, outside units: a .docx's numbering labels (office_numbering.py) and its
    # fields' display texts (office_fields.py), each (part, its texts)
    extras: list[tuple[str, NumberingLabels | FieldTexts]] = []
    code = code_styles(_styles(archive)) if fmt is DOCX else None
    for info in text_parts:
        raw = read_entry(archive, info)
        try:
            root = parse_part(info.filename, raw)
        except FormatError:
            if info.filename in PROPERTY_PARTS:  # the title and such: copied as they are
                continue
            raise
        parts[info.filename] = (root, raw)
        if info.filename == found[1] and fmt is not None:  # the main part of a .docx or .pptx
            check_transitional(found[0], root)
        if info.filename == "word/numbering.xml":
            extras.append((info.filename, NumberingLabels(root)))
        elif fmt is DOCX and info.filename not in PROPERTY_PARTS:
            extras.append((info.filename, FieldTexts(root)))
        if fmt is None:
            units_of = (*ODT_PARAGRAPHS, *ODT_TEMPLATES)
            deleted = {  # the text of tracked deletions: hidden, never sent (as a .docx's)
                p for c in root.iter(TEXT + "tracked-changes") for p in c.iter(*units_of)
            }
            for p in root.iter(*units_of):
                if p not in deleted and not _odp_prompt(p):
                    odt_units(p, acc)
        else:
            drawingml = "/diagrams/" in info.filename or "/charts/" in info.filename
            part_fmt = PPTX if drawingml else fmt
            printed = any(fnmatch.fnmatchcase(info.filename, m) for m in PRINT_MASTERS)
            master = printed or any(fnmatch.fnmatchcase(info.filename, m) for m in MASTERS)
            for p in root.iter(part_fmt.paragraph):
                if not (master and _prompt(p, printed)):
                    run_units(p, part_fmt, acc, code if part_fmt is DOCX else None)
        for slot in label_slots(info.filename, root):  # alternative text... (office_labels.py)
            acc.add(slot, None)
            acc.flush()
        part_of.extend([info.filename] * (len(acc.units) - len(part_of)))
    # the slides' titles as sent, in order: docProps/app.xml lists them (office_titles.py)
    slides = []
    if "ppt/presentation.xml" in parts:
        slides = slide_order(archive, parts["ppt/presentation.xml"][0])
    titles = [slide_title(parts[n][0] if n in parts else None) for n in slides]
    units, groups, hints, touched, unit_parts = [], [], [], set(), []
    for unit_groups, unit_hints, part in zip(acc.units, acc.hints, part_of, strict=True):
        b = UnitBuilder()
        for g in unit_groups:
            if g.keep:  # a field's result the application computes: where a word would be
                b.atom(g, word=True)
                continue
            b.open("run", g)
            b.text(g.text.replace(SOFT_HYPHEN, ""), g)
            b.close("run", g)
        unit = b.build(limit=limits.max_request_chars)
        if unit is not None:
            units.append(unit)
            groups.append(unit_groups)
            hints.append(unit_hints)
            touched.add(part)
            unit_parts.append(part)
    bindings = Bindings([root for root, _ in parts.values()]) if fmt is DOCX else None
    requests = [r for u in units for r in u.requests]
    texts = requests + [t for _, extra in extras for t in extra.texts]
    translations = once_each(translate)(texts) if texts else []
    if len(translations) != len(texts):
        raise ValueError(f"{len(texts)} texts sent, {len(translations)} translations received")
    tokens_of = distribute(units, translations[: len(requests)])
    at = len(requests)
    for part, extra in extras:
        n = len(extra.texts)
        if extra.write(translations[at : at + n], language):
            touched.add(part)
        at += n
    translated = []  # (part, groups) of the units that came back other than they were sent
    for unit_groups, unit_hints, tokens, part in zip(
        groups, hints, tokens_of, unit_parts, strict=True
    ):
        if not any(t.translated for t in tokens):  # came back as sent: left as it is
            continue
        sent = [g.text.replace(SOFT_HYPHEN, "") for g in unit_groups]
        apply_tokens(unit_groups, tokens)
        if [g.text for g in unit_groups] != sent:
            translated.append((part, unit_groups))
        for el in unit_hints:
            drop(el)
    if language is not None:
        roots = {name: root for name, (root, _) in parts.items()}
        touched |= mark_document(roots, translated, language, PROPERTY_PARTS)
    bound: dict[str, bytes] = {}
    if bindings is not None:  # the XML a .docx's content controls are bound to
        bound_parts, bound = bindings.write(archive, parts)
        touched |= bound_parts
    # a part without text to translate keeps its bytes
    replaced = {n: serialize_part(*parts[n]) for n in sorted(touched)} | bound
    translated_titles = [slide_title(parts[n][0] if n in parts else None) for n in slides]
    if slides and (app := agree(archive, titles, translated_titles)) is not None:
        replaced[APP] = app
    return rebuild(archive, replaced)
