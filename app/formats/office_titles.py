"""The slide titles a .pptx lists in its properties (`TitlesOfParts` in docProps/app.xml), made
to agree with its translated slides (used by app/formats/office.py).

PowerPoint writes there, each time it saves, the title of each slide in the presentation's
order, after the fonts and themes it uses; Windows shows the list in the file's properties and
its search indexes it. It kept the source's titles. An entry is not translated on its own: it
is replaced by its slide's title as translated on the slide, where it is that slide's title as
the slide was sent (whitespace aside), so it reads as PowerPoint writes it on the next save
(a title of several paragraphs or lines is written with a space between them). An entry that
is not (a slide without a title is listed as "PowerPoint Presentation" in the language of
PowerPoint's own menus, as are the groups' names, "Slide Titles"; a list written by an older
save, before slides were moved) stays as it is, and so do the fonts' and themes' names.
"""

from __future__ import annotations

import posixpath
import re
import zipfile

from lxml import etree

from . import FormatError
from .office_archive import BIG_ENTRY, parse_part, read_entry, serialize_part
from .office_runs import A

P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
VT = "{http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes}"
EP = "{http://schemas.openxmlformats.org/officeDocument/2006/extended-properties}"
PART = "docProps/app.xml"
TITLES = frozenset({"title", "ctrTitle"})
SPACES = re.compile(r"\s+")


def slide_order(archive: zipfile.ZipFile, presentation: etree._Element) -> list[str]:
    """The slides' part names, in the presentation's order (none when its relationships
    cannot be read)."""
    name = "ppt/_rels/presentation.xml.rels"
    try:
        info = archive.getinfo(name)
        if info.file_size > BIG_ENTRY:
            return []
        rels = parse_part(name, read_entry(archive, info))
    except (KeyError, FormatError):
        return []
    targets = {r.get("Id"): r.get("Target") or "" for r in rels.iter(RELS + "Relationship")}
    order = []
    for slide in presentation.iter(P + "sldId"):
        target = targets.get(slide.get(R + "id"), "")
        if target.startswith("/"):
            order.append(target[1:])
        else:
            order.append(posixpath.normpath(posixpath.join("ppt", target)))
    return order


def _text(paragraph: etree._Element) -> str:
    """A DrawingML paragraph's text, a line break a space."""
    return "".join(
        " " if c.tag == A + "br" else c.findtext(A + "t") or ""
        for c in paragraph
        if c.tag in (A + "r", A + "fld", A + "br")
    )


def slide_title(slide: etree._Element | None) -> str | None:
    """The text of a slide's title placeholder, its paragraphs and lines a space apart (None:
    the slide has none)."""
    if slide is None:
        return None
    for shape in slide.iter(P + "sp"):
        ph = shape.find(f"{P}nvSpPr/{P}nvPr/{P}ph")
        if ph is not None and ph.get("type") in TITLES:
            return SPACES.sub(" ", " ".join(_text(p) for p in shape.iter(A + "p"))).strip()
    return None


def agree(
    archive: zipfile.ZipFile, before: list[str | None], after: list[str | None]
) -> bytes | None:
    """docProps/app.xml with each slide's listed title (`before`: the slides' titles in order
    as sent) replaced by its translation (`after`); None when nothing changed."""
    try:
        info = archive.getinfo(PART)
        if info.file_size > BIG_ENTRY:
            return None
        raw = read_entry(archive, info)
        root = parse_part(PART, raw)
    except (KeyError, FormatError):  # the properties are copied as they are
        return None
    pairs = root.find(f"{EP}HeadingPairs/{VT}vector")
    entries = root.find(f"{EP}TitlesOfParts/{VT}vector")
    if pairs is None or entries is None:
        return None
    counts = []
    for variant in pairs.iter(VT + "variant"):
        count = variant.findtext(VT + "i4")
        if count is not None and count.strip().isdigit():
            counts.append(int(count))
    listed = entries.findall(VT + "lpstr")
    groups, at = [], 0
    for count in counts:  # the groups of as many entries as slides
        if count == len(before) and at + count <= len(listed):
            groups.append(listed[at : at + count])
        at += count
    if not groups:  # no group of as many entries as slides (a list older than the slides)
        return None

    def listed_as(entry: etree._Element, title: str | None) -> bool:
        return title is not None and SPACES.sub("", entry.text or "") == SPACES.sub("", title)

    # the slides' titles: the group that lists the most of them (a font or a theme may be
    # named as a slide is)
    group = max(reversed(groups), key=lambda g: sum(map(listed_as, g, before)))
    changed = False
    for entry, source, target in zip(group, before, after, strict=True):
        if listed_as(entry, source) and target is not None and target != source:
            entry.text = target
            changed = True
    return serialize_part(root, raw) if changed else None
