"""The paragraph walker of office files: where .docx, .pptx and .odt keep their text runs, and
how a paragraph is cut into units of runs for app/formats/inline.py (used by
app/formats/office.py).

Each paragraph (`w:p`, `a:p`, `text:p`/`text:h`) is cut into units at tabs (a tab character
in a run's text too: a DrawingML run is cut in two around it, a .docx `w:t` that writers
other than Word write it in is cut into texts of the same run) and line breaks;
inside a unit, each run of text with its own formatting (a `w:r`/`a:r` with its properties; an
.odt span or link) is a pair for app/formats/inline.py. Consecutive runs with the same
formatting (Word splits runs for spell checking and revisions; a DrawingML run's language and
proofing marks are no formatting: NOT_FORMATTING) are one, unless a marker stands
between them: a field's begin, separator or end (`w:fldChar`, `w:instrText`), a bookmark, a
comment's range or reference, a footnote's or endnote's reference, a picture, a text box or an
embedded object, a permission range, a tracked deletion (`w:del`, whose `w:delText` is never
sent) or move (`w:moveFrom`, whose text is translated where it was moved to), a non-breaking
hyphen, a symbol, the page number or a date Word writes in its place (`w:pgNum`,
`w:dayLong`...), an equation (`m:oMath`) (.docx); a field (`a:fld`, whose text is
never sent) (.pptx); a bookmark, a reference mark, a comment (`office:annotation`,
`office:annotation-end`), an index entry's range, a note (`text:note`), a frame or a shape
(`draw:*`), spaces after a space (`text:s`), a tracked change mark
(.odt). A marker stays in the unit, so the sentence is still translated whole, but the text on
each side of it is a run of its own: a hyperlink field's result, a bookmarked or commented
range keeps the translation of the text it held. A bookmark that encloses nothing (Word's
`_GoBack`, an .odt `text:bookmark` or `text:reference-mark`) keeps nothing apart. A field's
instruction text is never sent with its paragraph (the texts some fields show are sent on
their own: app/formats/office_fields.py), nor is a nested field's result inside it (the
`{ MERGEFIELD Gender }` of `{ IF { MERGEFIELD Gender } = "male" ... }`). The result of a field
whose result the application computes (KEPT_FIELDS: a mail merge's data, a page number, a date,
a caption's number; in .odt KEPT_ODT_FIELDS) is kept as written, an atom of the unit standing
where a word would: the translation around it goes into the runs before and after it (it took
the words the model put where its runs were, which the next update of the field wiped out:
"We will call you at «Phone» tomorrow." was "Wir werden dich {MERGEFIELD Phone| „Py“ nennen.}
morgen früh auf"). A run's translation
goes into its first text node, the run's other text nodes are emptied; the formatting, every
other element and every attribute stay as they were, but for a hint of the source's layout in
a translated paragraph, which has no place in its translation and is dropped: an optional
hyphen (`w:softHyphen`, or U+00AD in the text), which does not cut its word for the model; a
page break where the last layout ended a page (`w:lastRenderedPageBreak`,
`text:soft-page-break`).
"""

from __future__ import annotations

import re
from copy import deepcopy
from dataclasses import dataclass, field

from lxml import etree

from ..html_text import NOT_XML

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
MATH = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"


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
    #: the format writes a tab as a character in its run's text (DrawingML has no tab
    #: element; writers other than Word put one in a .docx `w:t`): each tab is cut into a text
    #: of its own, which ends a unit as `breaks` do
    tab_characters: bool = False


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
    # a tab inside `w:t` (Word writes `w:tab`, other writers the character) was sent as a
    # space: the columns it aligned ran together
    tab_characters=True,
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
    # a tab inside a run's text was sent as a space: the columns it aligned ran together
    tab_characters=True,
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


#: fields whose result Word computes when it updates them (a mail merge, F9, printing, a page
#: laid out): their results are kept as written (the module docstring). Not a hyperlink's, a
#: cross-reference's (REF: the words of the text it names, translated there too), an IF's (its
#: texts are translated: app/formats/office_fields.py) or a table of contents' (paragraphs of
#: their own, made again from the translated headings).
KEPT_FIELDS = frozenset(
    {
        "MERGEFIELD",
        "MERGEREC",
        "MERGESEQ",
        "ADDRESSBLOCK",
        "GREETINGLINE",
        "PAGE",
        "NUMPAGES",
        "SECTIONPAGES",
        "SECTION",
        "PAGEREF",
        "NOTEREF",
        "SEQ",
        "LISTNUM",
        "AUTONUM",
        "AUTONUMLGL",
        "AUTONUMOUT",
        "DATE",
        "TIME",
        "CREATEDATE",
        "SAVEDATE",
        "PRINTDATE",
        "EDITTIME",
        "FILENAME",
        "FILESIZE",
        "AUTHOR",
        "LASTSAVEDBY",
        "USERNAME",
        "USERINITIALS",
        "USERADDRESS",
        "NUMWORDS",
        "NUMCHARS",
        "REVNUM",
        "DOCPROPERTY",
        "DOCVARIABLE",
        "TEMPLATE",
        "BARCODE",
        "DISPLAYBARCODE",
        "MERGEBARCODE",
        "=",  # a formula (`= SUM(ABOVE)`)
    }
)
#: .odt fields whose text LibreOffice writes again (on loading: page numbers, counts,
#: sequences, dates; on a mail merge: the database's fields), kept as written; not a
#: reference's text, a hidden or conditional text (its texts are the author's), or a
#: placeholder's prompt.
KEPT_ODT_FIELDS = frozenset(
    TEXT + t
    for t in [
        "page-number",
        "page-count",
        "page-continuation",
        "paragraph-count",
        "word-count",
        "character-count",
        "table-count",
        "image-count",
        "object-count",
        "sequence",
        "date",
        "time",
        "creation-date",
        "creation-time",
        "modification-date",
        "modification-time",
        "print-date",
        "print-time",
        "editing-duration",
        "editing-cycles",
        "file-name",
        "template-name",
        "author-name",
        "author-initials",
        "creator",
        "printed-by",
        "database-display",
        "database-name",
        "database-row-number",
        "database-next",
        "database-row-select",
        "sender-firstname",
        "sender-lastname",
        "sender-initials",
        "sender-title",
        "sender-position",
        "sender-email",
        "sender-phone-private",
        "sender-fax",
        "sender-company",
        "sender-phone-work",
        "sender-street",
        "sender-city",
        "sender-postal-code",
        "sender-country",
        "sender-state-or-province",
        "variable-get",
        "variable-set",
        "user-field-get",
        "sequence-ref",
        "expression",
        "table-formula",
        "page-variable-get",
        "user-defined",
    ]
)


#: a font that sets code (fixed width): Courier New, Consolas, Lucida Console, Source Code
#: Pro, DejaVu Sans Mono, Menlo... (not Monotype Corsiva, nor Arial Unicode MS or Lucida Sans
#: Unicode, whose names hold "mono" and "code")
MONOSPACE = re.compile(
    r"mono(?!type)|courier|consol|(?<!uni)code|sans typewriter|menlo|monaco|inconsolata", re.I
)
#: the styles of code that Word and pandoc write (HTML Code, HTML Preformatted...; pandoc's
#: inline code and its code blocks), whatever their fonts. A style of another name whose font
#: is fixed width sets code only beside text in another font (a screenplay's are all Courier).
CODE_STYLES = frozenset(
    {
        "VerbatimChar",
        "SourceCode",
        "HTMLCode",
        "HTMLPreformatted",
        "HTMLKeyboard",
        "HTMLTypewriter",
        "HTMLSample",
    }
)


@dataclass(frozen=True)
class CodeStyles:
    """A .docx's styles of code (`code_styles`): `named`, CODE_STYLES and those based on one;
    `fixed`, those whose font is fixed width (or based on one)."""

    named: frozenset[str]
    fixed: frozenset[str]


def code_styles(styles: etree._Element | None) -> CodeStyles:
    """The ids of word/styles.xml's styles of code (CodeStyles)."""
    based: dict[str, str] = {}
    fixed = set()
    for style in styles.iter(W + "style") if styles is not None else ():
        sid = style.get(W + "styleId") or ""
        parent = style.find(W + "basedOn")
        if parent is not None:
            based[sid] = parent.get(W + "val") or ""
        fonts = style.find(f"{W}rPr/{W}rFonts")
        if fonts is not None and MONOSPACE.search(fonts.get(W + "ascii") or ""):
            fixed.add(sid)

    def closed(found: set[str]) -> frozenset[str]:
        out = set(found)
        for sid in based:
            seen, at = set(), sid
            while at in based and at not in found and at not in seen:
                seen.add(at)
                at = based[at]
            if at in found:
                out.add(sid)
        return frozenset(out)

    return CodeStyles(closed(set(CODE_STYLES)), closed(fixed))


def code_kind(run: etree._Element, paragraph: etree._Element, styles: CodeStyles) -> str | None:
    """ "named" for a .docx run in a style of code (its character style, or its paragraph's),
    "fixed" for one in a fixed-width font (its own, or its style's), else None."""
    props = run.find(W + "rPr")
    style = props.find(W + "rStyle") if props is not None else None
    p_style = paragraph.find(f"{W}pPr/{W}pStyle")
    ids = [s.get(W + "val") for s in (style, p_style) if s is not None]
    if any(i in styles.named for i in ids):
        return "named"
    fonts = props.find(W + "rFonts") if props is not None else None
    font = fonts.get(W + "ascii") if fonts is not None else None
    if font:
        return "fixed" if MONOSPACE.search(font) else None
    return "fixed" if any(i in styles.fixed for i in ids) else None


def kept_field(instruction: str, result: str) -> bool:
    r"""Whether a .docx field of this code (`w:instrText`s together, a simple field's `w:instr`)
    and this result keeps its result as written: one the application computes (KEPT_FIELDS),
    or one without letters (a cross-reference to a table's number: the words around it went
    into it, `{ REF _Ref2 \h }` showing "von" where it showed "4")."""
    return _kept(instruction, bool(result.strip()), any(c.isalpha() for c in result))


def _kept(instruction: str, has_text: bool, has_letters: bool) -> bool:
    words = instruction.split(maxsplit=1)
    if has_text and not has_letters:
        return True
    return bool(words) and (words[0].upper() in KEPT_FIELDS or words[0].startswith("="))


def _kept_fields(paragraph: etree._Element) -> set[etree._Element]:
    """The begin fldChar of each field of `paragraph` whose result is kept (`kept_field`);
    its code's pieces joined once, its result told by two flags (a result of many runs, each
    added to the text before, took seconds)."""
    kept: set[etree._Element] = set()
    fields: list[list] = []  # [begin, in its code, its code's pieces, has text, has letters]
    for el in paragraph.iter(W + "fldChar", W + "instrText", W + "t"):
        if el.tag == W + "fldChar":
            kind = el.get(W + "fldCharType")
            if kind == "begin":
                fields.append([el, True, [], False, False])
            elif kind == "separate" and fields:
                fields[-1][1] = False
            elif kind == "end" and fields:
                begin, _, code, has_text, has_letters = fields.pop()
                if _kept("".join(code), has_text, has_letters):
                    kept.add(begin)
        elif fields and fields[-1][1]:
            if el.tag == W + "instrText":  # (a nested field's result there is no code)
                fields[-1][2].append(el.text or "")
        elif fields and el.text:
            field = fields[-1]
            field[3] = field[3] or not el.text.isspace()
            field[4] = field[4] or any(c.isalpha() for c in el.text)
    return kept


@dataclass(eq=False)
class Group:
    """A run of text with one formatting: the text nodes (element, "text" or "tail") or the
    attribute (element, "@name") it fills; `keep`: a field's result, kept as written (an atom
    of its unit)."""

    key: object
    slots: list[tuple[etree._Element, str]] = field(default_factory=list)
    keep: bool = False

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


class Paragraphs:
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

    def keep(self, slot: tuple[etree._Element, str], field_of: object) -> None:
        """A text of the result of the field `field_of`, whose result is kept as written: one
        group with its other texts, apart from the text on each side."""
        last = self.groups[-1] if self.groups else None
        if last is not None and last.keep and last.key is field_of:
            last.slots.append(slot)
        else:
            self.groups.append(Group(field_of, [slot], keep=True))
        self._cut = True

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


#: attributes of a DrawingML run's properties that no reader sees: PowerPoint's marks for
#: spell checking (err, noProof), editing (dirty), smart tags (smtClean, smtId) and the
#: keyboard's language (lang, altLang; the translation is in another one anyway). Runs that
#: differ in them only were sent apart, and translated in pieces when the model lost the
#: placeholders between them.
NOT_FORMATTING = frozenset({"dirty", "err", "noProof", "smtClean", "smtId", "lang", "altLang"})


def _run_key(run: etree._Element, fmt: RunFormat) -> object:
    props = run.find(fmt.properties)
    if props is None:
        return (run.getparent(), (), ())
    attrs = sorted((k, v) for k, v in props.attrib.items() if k not in NOT_FORMATTING)
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


def _split_tabs(paragraph: etree._Element, fmt: RunFormat) -> None:
    """Cuts each text that holds tabs into texts and texts of tabs (RunFormat.tab_characters):
    a .docx run's texts in the same run (it may hold several), a DrawingML run (which holds
    one) into runs, each with a copy of its properties."""
    for t in list(paragraph.iter(fmt.text)):
        run = t.getparent()
        if "\t" not in (t.text or "") or run.tag in fmt.markers:  # a field's text is its own
            continue
        pieces = [p for p in re.split("(\t+)", t.text) if p]
        t.text = pieces[0]
        at = t if t.tag == W + "t" else run
        for piece in pieces[1:]:
            copy = deepcopy(at)
            copy.tail = None
            text = copy if copy.tag == fmt.text else copy.find(fmt.text)
            text.text = piece
            if text.tag == W + "t" and piece != piece.strip():  # else Word drops the spaces
                text.set(XML_SPACE, "preserve")
            at.addnext(copy)
            at = copy
        if t.tag == W + "t" and pieces[0] != pieces[0].strip():
            t.set(XML_SPACE, "preserve")


def run_units(
    paragraph: etree._Element,
    fmt: RunFormat,
    acc: Paragraphs,
    code: CodeStyles | None = None,
) -> None:
    """`code`: a .docx's styles of code (`code_styles`): a run of code is kept as written, an
    atom of its unit (it was translated: "Run `git status`" gave "Führen Sie den Status von
    git aus"): one in a style of code, or one in a fixed-width font in a paragraph that has
    letters in another font (a paragraph all in Courier, a screenplay's, is prose); None: no
    run is code."""
    if fmt.tab_characters:
        _split_tabs(paragraph, fmt)
    kinds: dict[etree._Element, str | None] = {}
    if code is not None:
        for t in paragraph.iter(W + "t"):
            kinds[t] = code_kind(t.getparent(), paragraph, code)
        if not any(k is None and any(c.isalpha() for c in t.text or "") for t, k in kinds.items()):
            kinds = {t: k for t, k in kinds.items() if k == "named"}
    # the fields open in the paragraph: [in its code, whether its result is kept], in its code
    # between its begin and separate fldChar. A nested field's result there is part of the
    # outer field's code (`IF { MERGEFIELD Gender } = "male" ...`) and is not translated either.
    fields: list[list] = []
    kept_results = _kept_fields(paragraph) if fmt.paragraph == W + "p" else set()

    def visit(el: etree._Element) -> None:
        for child in el:
            tag = child.tag
            if not isinstance(tag, str):
                continue
            if tag == W + "fldChar":
                kind = child.get(W + "fldCharType")
                if kind == "begin":
                    fields.append([True, child in kept_results])
                elif kind == "separate" and fields:
                    fields[-1][0] = False
                elif kind == "end" and fields:
                    fields.pop()
            if (
                tag == W + "fldSimple"
                and not any(f[0] for f in fields)
                and kept_field(
                    child.get(W + "instr") or "",
                    "".join(t.text or "" for t in child.iter(fmt.text)),
                )
            ):
                acc.cut()
                for t in child.iter(fmt.text):
                    acc.keep((t, "text"), child)
            elif tag in fmt.markers:
                if not _empty_bookmark(child):
                    acc.cut()
            elif tag in fmt.hints:
                acc.hint(child)
            elif tag in fmt.ignored:
                continue
            elif tag == fmt.paragraph or tag in fmt.breaks:
                acc.flush()
            elif tag == fmt.text and fmt.tab_characters and not (child.text or "x").strip("\t"):
                acc.flush()  # a run of tabs (_split_tabs)
            elif tag == fmt.text:
                kept = next((f for f in fields if not f[0] and f[1]), None)
                if any(f[0] for f in fields):
                    pass
                elif kept is not None:
                    acc.keep((child, "text"), kept)
                elif kinds.get(child):
                    acc.keep((child, "text"), kinds)
                else:
                    acc.add((child, "text"), _run_key(child.getparent(), fmt))
            else:
                visit(child)

    visit(paragraph)
    acc.flush()


def odt_units(paragraph: etree._Element, acc: Paragraphs) -> None:
    def visit(el: etree._Element) -> None:
        if el.text:
            acc.add((el, "text"), el)
        for child in el:
            if isinstance(child.tag, str):
                if child.tag in ODT_PARAGRAPHS or child.tag in ODT_BREAKS:
                    acc.flush()
                elif child.tag in KEPT_ODT_FIELDS:
                    acc.cut()
                    acc.keep((child, "text"), child)
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


def drop(el: etree._Element) -> None:
    """Removes `el`, keeping the text after it."""
    parent = el.getparent()
    if el.tail:
        prev = el.getprevious()
        if prev is not None:
            prev.tail = (prev.tail or "") + el.tail
        else:
            parent.text = (parent.text or "") + el.tail
    parent.remove(el)


def apply_tokens(groups: list[Group], tokens) -> None:
    """Writes a unit's translation into its groups (see app/formats/inline.py's tokens).

    A kept field's result (an atom) stays where it is in the document, so the translation is
    cut where its atom came back: the text before it goes into the runs before the field,
    the text after it into the runs after (the words the model put before the stand-in of
    "We will call you at «Phone» tomorrow." went into the runs after the field: "Wir werden
    dich «Phone» morgen früh bei anrufen.")."""
    assigned: dict[int, list[str]] = {id(g): [] for g in groups}
    # for each group written, the kept groups before it; for each such count, those groups
    zone: dict[int, int] = {}
    zones: dict[int, list[Group]] = {}
    kept = 0
    for g in groups:
        if g.keep:
            kept += 1
        else:
            zone[id(g)] = kept
            zones.setdefault(kept, []).append(g)
    stack: list[Group] = []
    last = groups[0]
    atoms = 0  # the kept fields' atoms the translation has given so far
    for tok in tokens:
        if tok.kind == "open":
            stack.append(tok.ref)
        elif tok.kind == "close" and stack:
            last = stack.pop()
        elif tok.kind == "atom" and getattr(tok.ref, "keep", False):
            atoms += 1
        elif tok.kind == "text":
            g = stack[-1] if stack else last
            if kept and zone.get(id(g)) != atoms:
                # on the other side of a field than the translation puts it (or before any
                # run: the unit starts with a field): the group nearest to the field on the
                # side it belongs to, where there is one
                if atoms in zones:
                    side = zones[atoms]
                    g = side[-1] if zone.get(id(g), -1) > atoms else side[0]
                elif g.keep:
                    g = next(iter(zones.values()))[0]
            assigned[id(g)].append(tok.text)
    for g in groups:
        if not g.keep:
            g.write("".join(assigned[id(g)]))
