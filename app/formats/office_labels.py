"""Text of an office file that stands outside its paragraphs, each piece a unit of its own:
what app/formats/office.py sends besides the paragraphs it walks.

- The alternative text of a picture or a shape (.docx, .pptx: the `descr` and `title`
  attributes of `wp:docPr`, `pic:cNvPr`, `p:cNvPr`...), which screen readers read; the .odt's
  (`svg:title`, `svg:desc`) are elements, translated with the paragraphs. A VML shape's
  (`v:shape/@alt`, in a .docx from older Word versions) is translated too. A description that
  is only an image's file name (python-pptx and some converters write one) is left as it is,
  and so is the alternative text of a picture in a tracked deletion, as its text is.
- A .docx table's alternative text, its title and description (`w:tblCaption`,
  `w:tblDescription`).
- The tip a link shows when pointed at (`a:hlinkClick/@tooltip`, `a:hlinkHover/@tooltip`,
  `w:hyperlink/@w:tooltip`), which screen readers read with the link.
- The document's title, subject and description (`dc:title`, `dc:subject`, `dc:description`
  in a .docx's or .pptx's docProps/core.xml and in an .odt's meta.xml): a viewer shows the
  title in its window or tab. Keywords, author, dates and the like are not translated.
- The text of a legacy .pptx comment (`p:cm/p:text`; a modern comment's text is DrawingML
  paragraphs, as a slide's). Authors are kept in parts of their own, never translated.
- The footer an .odp's slides show and the header of its notes pages and handouts
  (`presentation:footer-decl`, `presentation:header-decl`, declared once and named by each
  page that shows it). A fixed
  date's text (`presentation:date-time-decl`) stays as written, and so do the slides' names
  (`draw:page/@draw:name`), which links to a slide name as their target.
- The names of a .pptx's sections (`p14:section/@name` in ppt/presentation.xml), shown over
  its slides in PowerPoint's slide pane and slide sorter.
- A chart's series and category names written as text in the chart (`c:strCache`,
  `c:strLit`, `c:multiLvlStrCache`, a series name's literal `c:tx/c:v`), and the text of
  data labels taken from cells (Office 2013's "Value From Cells", `c15:dlblRangeCache`, and
  a cell's text in a label, `c15:dlblFieldTableCache`), which were copied untranslated, when
  they hold letters: a year or a number written as text stays as it is. Its title and axis titles are DrawingML paragraphs. The
  workbook embedded with the chart is not changed: it still holds the source's names, which
  come back where the chart is edited (its cache is then read from the workbook again).
- An Office 2016 chart's (chartEx, `cx:`: waterfall, treemap, sunburst, histogram, box and
  whisker, funnel), which were copied untranslated: the text of its title, axis titles and
  series names (`cx:txData/cx:v`; a title's formatted copy in `cx:txPr` is DrawingML
  paragraphs) and its category names (`cx:strDim type="cat"`), which its data labels show.
  A map chart's categories are the regions it looks up by name: they stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from lxml import etree

from .inline import has_letters

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
CX = "{http://schemas.microsoft.com/office/drawing/2014/chartex}"
P14 = "{http://schemas.microsoft.com/office/powerpoint/2010/main}"
DC = "{http://purl.org/dc/elements/1.1/}"
C15 = "{http://schemas.microsoft.com/office/drawing/2012/chart}"
#: where a chart's `c:v` (or its `c:pt`) is a name written as text: a series name, a category
#: (`c:lvl`: a level of categories in several levels), a data label's text from cells
NAME_HOLDERS = frozenset(C + t for t in ["strCache", "strLit", "tx", "lvl"]) | frozenset(
    C15 + t for t in ["dlblRangeCache", "dlblFieldTableCache"]
)
PRESENTATION = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
#: an .odp's footer and header texts, declared once for the pages that show them
ODP_DECLARATIONS = (PRESENTATION + "footer-decl", PRESENTATION + "header-decl")
#: the document properties translated (a viewer shows the title; the others describe it)
PROPERTIES = (DC + "title", DC + "subject", DC + "description")
#: the parts that hold them
PROPERTY_PARTS = frozenset({"docProps/core.xml", "meta.xml"})
#: the elements that carry a drawing's alternative text, by local name, in any namespace (the
#: wp:docPr of a .docx, pic:cNvPr, p:cNvPr of a .pptx, dsp:cNvPr of a SmartArt drawing...)
ALT_HOLDERS = ("}docPr", "}cNvPr")
ALT_ATTRIBUTES = ("title", "descr")
#: a VML shape's (`v:shape`, `v:rect`...: a picture of a document from before Word 2010, the
#: fallback of a newer one's shape) is its `alt` attribute
VML = "{urn:schemas-microsoft-com:vml}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
#: a link's tip: (element, attribute)
TOOLTIPS = {
    A + "hlinkClick": "tooltip",
    A + "hlinkHover": "tooltip",
    W + "hyperlink": W + "tooltip",
    # a .docx table's alternative text (Word's Table Properties > Alt Text), which screen
    # readers read as a picture's: it was copied untranslated
    W + "tblCaption": W + "val",
    W + "tblDescription": W + "val",
}
#: a description that is only a file name: nothing to translate
FILE_NAME = re.compile(r"[^\s/\\]+\.(?:png|jpe?g|gif|bmp|tiff?|svg|emf|wmf|webp|heic)", re.I)
#: text hidden as deleted, whose drawings' alternative text is not sent either
DELETED = frozenset({W + "del", W + "moveFrom"})

Slot = tuple[etree._Element, str]


def _alt_texts(root: etree._Element) -> Iterator[Slot]:
    for el in root.iter():
        tag = el.tag
        if not isinstance(tag, str):
            continue
        names: tuple[str, ...]
        if tag.endswith(ALT_HOLDERS):
            names = ALT_ATTRIBUTES
        elif tag.startswith(VML) and el.get("alt"):
            names = ("alt",)
        else:
            continue
        if any(a.tag in DELETED for a in el.iterancestors()):
            continue
        for name in names:
            value = el.get(name)
            if value and has_letters(value) and not FILE_NAME.fullmatch(value.strip()):
                yield el, "@" + name


def _tooltips(root: etree._Element) -> Iterator[Slot]:
    for el in root.iter(*TOOLTIPS):
        tip = TOOLTIPS[el.tag]
        if has_letters(el.get(tip) or "") and not any(a.tag in DELETED for a in el.iterancestors()):
            yield el, "@" + tip


def _chart_names(root: etree._Element) -> Iterator[Slot]:
    for v in root.iter(C + "v"):
        holder = v.getparent()
        if holder.tag == C + "pt":
            holder = holder.getparent()
        if holder.tag in NAME_HOLDERS and has_letters(v.text or ""):
            yield v, "text"


def _chartex_names(root: etree._Element) -> Iterator[Slot]:
    regions = any(s.get("layoutId") == "regionMap" for s in root.iter(CX + "series"))
    for el in root.iter(CX + "v", CX + "pt"):
        if not has_letters(el.text or ""):
            continue
        if el.tag == CX + "v":
            if el.getparent().tag == CX + "txData":
                yield el, "text"
        elif not regions:
            dim = next(el.iterancestors(CX + "strDim", CX + "numDim"), None)
            if dim is not None and dim.tag == CX + "strDim" and dim.get("type") == "cat":
                yield el, "text"


def label_slots(part: str, root: etree._Element) -> Iterator[Slot]:
    """The text nodes and attributes of `part` (its name in the archive) to translate, each a
    unit of its own, in document order."""
    if part in PROPERTY_PARTS:
        for el in root.iter(*PROPERTIES):
            if el.text and has_letters(el.text):
                yield el, "text"
        return
    if part == "ppt/presentation.xml":
        for el in root.iter(P14 + "section"):
            if has_letters(el.get("name") or ""):
                yield el, "@name"
        return
    if part in ("content.xml", "styles.xml"):
        for el in root.iter(*ODP_DECLARATIONS):
            if el.text and has_letters(el.text):
                yield el, "text"
    if "/charts/" in part:
        yield from _chart_names(root)
        yield from _chartex_names(root)
    if part.startswith("ppt/comments/"):
        for el in root.iter(P + "text"):
            if el.text and has_letters(el.text):
                yield el, "text"
    yield from _alt_texts(root)
    yield from _tooltips(root)
