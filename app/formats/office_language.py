"""The language marks of a translated office file (used by app/formats/office.py).

Word, PowerPoint and LibreOffice spell-check a text, and screen readers choose a voice for
it, by the language its run is marked with: a translated document kept the source's marks
(`w:lang w:val="en-US"`, `a:rPr lang="en-US"`, `fo:language="en" fo:country="US"`) and its
translation was read and checked as the source's language. The text of each translated unit
is marked with the target's tag (`tag`: the code the client asked for when it names the
language translated into, `de-CH` for `de`, else the served code, `de` for `DEU`):

- .docx: the run's `w:rPr/w:lang` (`w:val`; `w:eastAsia` too for Chinese, Japanese and Korean,
  `w:bidi` for a right-to-left language, which Word reads for text of those scripts);
- .pptx (and the DrawingML of charts and SmartArt): the run's `a:rPr lang` (its `altLang`,
  the language paired with it for East Asian text, is dropped), and its paragraph's end
  (`a:endParaRPr`, the language of text typed at its end);
- a chart with translated text (its title, its series or category names): its language
  (`c:lang`), and that of the text properties its labels, legend and axes are drawn with
  (`c:txPr`, a chartEx's `cx:txPr`: `a:defRPr` and `a:endParaRPr` that name one), which
  hold no text of their own (they kept the source's; Office proofs and reads a chart's
  labels by them);
- .odt: the paragraph's style, an automatic style of the part made for it (a copy of its own
  automatic style, or one that inherits from its common style) with `fo:language` and
  `fo:country` (`style:language-asian`... as `w:eastAsia` and `w:bidi` above), and a span's
  automatic style that names a language of its own, likewise copied;
- the document's language in its properties (`dc:language` in docProps/core.xml, meta.xml),
  where there is one.

Text that is not translated keeps its marks: a unit that comes back as it was sent (a paragraph
in the target's language, a code), what is never sent (a tracked deletion, a field's code).
The document's defaults (styles.xml's `w:docDefaults`, an .odt's `style:default-style` and
common styles) are kept for the same reason: text without a mark of its own, not translated,
takes its language from them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from copy import deepcopy

from lxml import etree

from .office_runs import TEXT, A, Group, W

STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
FO = "{urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0}"
OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
DC_LANGUAGE = "{http://purl.org/dc/elements/1.1/}language"
C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
CX = "{http://schemas.microsoft.com/office/drawing/2014/chartex}"
#: languages whose text Word and LibreOffice mark apart: East Asian, and complex (right to
#: left) scripts
EAST_ASIAN = frozenset({"zh", "ja", "ko"})
COMPLEX = frozenset({"ar", "he", "fa", "ur", "yi", "ps", "sd", "ug", "dv", "syr", "ckb"})
#: the elements a .docx run's properties hold after `w:lang` (ECMA-376 CT_RPr's order), and
#: after them the extensions of later versions, in their own namespaces
AFTER_LANG = frozenset(W + t for t in ["eastAsianLayout", "specVanish", "oMath", "rPrChange"])
TAG = re.compile(r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*$")


def tag(asked: str, served: str) -> str:
    """The language tag to mark translated text with: `asked` (the client's target) written as
    BCP 47 writes it when it is one for the served code's language, else `served`."""
    if not TAG.match(asked) or not TAG.match(served):
        return served
    subtags = asked.replace("_", "-").split("-")
    if subtags[0].lower() != served.replace("_", "-").split("-")[0].lower():
        return served
    out = [subtags[0].lower()]
    for s in subtags[1:]:
        out.append(s.upper() if len(s) == 2 else s.title() if len(s) == 4 else s)
    return "-".join(out)


def _language(code: str) -> tuple[str, str | None]:
    """(language, region) of a tag: `pt-BR` is ("pt", "BR"), `zh-Hans` ("zh", None)."""
    subtags = code.split("-")
    region = next((s for s in subtags[1:] if len(s) == 2 or s.isdigit()), None)
    return subtags[0], region


def translated_runs(groups: Iterable[Group]) -> list[etree._Element]:
    """The runs (`w:r`, `a:r`) whose text these groups fill, each once."""
    runs: dict[etree._Element, None] = {}
    for g in groups:
        for el, attr in g.slots:
            if attr == "text" and el.tag in (W + "t", A + "t"):
                run = el.getparent()
                if run is not None and run.tag in (W + "r", A + "r"):
                    runs[run] = None
    return list(runs)


def mark_run(run: etree._Element, code: str) -> None:
    """Marks a .docx or DrawingML run's text as in `code`."""
    base = _language(code)[0]
    if run.tag == A + "r":
        props = run.find(A + "rPr")
        if props is None:
            props = etree.Element(A + "rPr")
            run.insert(0, props)
        end = run.getparent().find(A + "endParaRPr")
        for p in (props,) if end is None else (props, end):
            p.set("lang", code)
            p.attrib.pop("altLang", None)
        return
    props = run.find(W + "rPr")
    if props is None:
        props = etree.Element(W + "rPr")
        run.insert(0, props)
    lang = props.find(W + "lang")
    if lang is None:
        lang = etree.Element(W + "lang")
        # (an extension of another namespace, Word 2010's `w14:ligatures` or `w14:textFill`,
        # comes after every w: element: the mark was written after it)
        after = next(
            (
                c
                for c in props
                if c.tag in AFTER_LANG or (isinstance(c.tag, str) and not c.tag.startswith(W))
            ),
            None,
        )
        if after is None:
            props.append(lang)
        else:
            after.addprevious(lang)
    lang.set(W + "val", code)
    if base in EAST_ASIAN:
        lang.set(W + "eastAsia", code)
    if base in COMPLEX:
        lang.set(W + "bidi", code)


def mark_chart(root: etree._Element, code: str) -> None:
    """Marks a chart part's language, and its text properties' where they name one, as
    `code`."""
    for el in root.iter(C + "lang"):
        el.set("val", code)
    for props in root.iter(C + "txPr", CX + "txPr"):
        for el in props.iter(A + "defRPr", A + "endParaRPr"):
            if el.get("lang") is not None:
                el.set("lang", code)
                el.attrib.pop("altLang", None)


def _set_language(props: etree._Element, code: str) -> None:
    """`fo:language`, `fo:country` (and the East Asian or complex script's) of an .odt
    style's text properties."""
    base, region = _language(code)
    names = [(FO + "language", FO + "country")]
    if base in EAST_ASIAN:
        names.append((STYLE + "language-asian", STYLE + "country-asian"))
    if base in COMPLEX:
        names.append((STYLE + "language-complex", STYLE + "country-complex"))
    for language, country in names:
        props.set(language, base)
        props.set(country, region or "none")  # not the source's region: "de-US"


class OdtStyles:
    """Automatic styles with the target's language, made for the paragraphs and spans of one
    .odt part (`root`); `names`: every style name already used in the document."""

    def __init__(self, root: etree._Element, code: str, names: set[str]):
        self.root, self.code, self.names = root, code, names
        self.made: dict[tuple[str, str | None], str] = {}
        self.marked: set[etree._Element] = set()

    def _automatic(self) -> etree._Element:
        found = self.root.find(OFFICE + "automatic-styles")
        if found is None:  # before the body (content.xml) or the master styles (styles.xml)
            found = etree.Element(OFFICE + "automatic-styles")
            body = next(
                (c for c in self.root if c.tag in (OFFICE + "body", OFFICE + "master-styles")),
                None,
            )
            if body is None:
                self.root.append(found)
            else:
                body.addprevious(found)
        return found

    def _find(self, family: str, name: str) -> etree._Element | None:
        for s in self._automatic().iter(STYLE + "style"):
            if s.get(STYLE + "family") == family and s.get(STYLE + "name") == name:
                return s
        return None

    def _new_name(self, name: str | None) -> str:
        stem = f"{name or 'Default'}_{self.code}"
        new, n = stem, 1
        while new in self.names:
            n += 1
            new = f"{stem}_{n}"
        self.names.add(new)
        return new

    def mark(self, el: etree._Element, family: str, *, own_language_only: bool) -> None:
        """Gives `el` (a paragraph, family "paragraph", or a span, "text") a style with the
        target's language; a span only when its automatic style names a language."""
        if el in self.marked:
            return
        self.marked.add(el)
        name = el.get(TEXT + "style-name")
        key = (family, name)
        if key not in self.made:
            style = self._find(family, name) if name else None
            if own_language_only and (
                style is None
                or not any(
                    a in (FO + "language", STYLE + "language-asian", STYLE + "language-complex")
                    for p in style.iter(STYLE + "text-properties")
                    for a in p.attrib
                )
            ):
                self.made[key] = ""
            else:
                if style is not None:
                    made = deepcopy(style)
                else:
                    made = etree.Element(STYLE + "style")
                    made.set(STYLE + "family", family)
                    if name:
                        made.set(STYLE + "parent-style-name", name)
                new = self._new_name(name)
                made.set(STYLE + "name", new)
                props = made.find(STYLE + "text-properties")
                if props is None:
                    props = etree.SubElement(made, STYLE + "text-properties")
                _set_language(props, self.code)
                self._automatic().append(made)
                self.made[key] = new
        if self.made[key]:
            el.set(TEXT + "style-name", self.made[key])


def mark_odt(groups: Iterable[Group], styles: OdtStyles) -> None:
    """Marks the paragraphs (and spans with a language of their own) these groups fill."""
    for g in groups:
        el = g.key
        if not isinstance(el, etree._Element):
            continue
        for e in (el, *el.iterancestors()):
            if e.tag == TEXT + "span":
                styles.mark(e, "text", own_language_only=True)
            elif e.tag in (TEXT + "p", TEXT + "h"):
                styles.mark(e, "paragraph", own_language_only=False)
                break
            elif not e.tag.startswith(TEXT):  # a shape's title, not the paragraph's text
                break


def mark_document(
    parts: dict[str, etree._Element],
    translated: Iterable[tuple[str, list[Group]]],
    code: str,
    property_parts: Iterable[str],
) -> set[str]:
    """Marks the translated units' text (each: its part's name and its groups) and the
    document's language as `code`; the names of the parts changed besides the units' own."""
    names = {s.get(STYLE + "name") for r in parts.values() for s in r.iter(STYLE + "style")}
    odt: dict[str, OdtStyles] = {}
    charts: set[str] = set()
    done = False
    for part, groups in translated:
        done = True
        if "/charts/" in part and part not in charts:
            charts.add(part)
            mark_chart(parts[part], code)
        runs = translated_runs(groups)
        for run in runs:
            mark_run(run, code)
        if not runs and part in ("content.xml", "styles.xml"):
            if part not in odt:
                odt[part] = OdtStyles(parts[part], code, names)
            mark_odt(groups, odt[part])
    changed = set()
    for part in property_parts if done else ():
        if part in parts:
            for el in parts[part].iter(DC_LANGUAGE):
                el.text = code
                changed.add(part)
    return changed
