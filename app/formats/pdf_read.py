"""A PDF page's text as paragraphs, read by pdfminer.six (app/formats/pdf.py translates them).

pdfminer's layout analysis groups the glyphs of a page, and those of the forms it draws, into
lines and boxes; a box is cut into paragraphs where the font's size or weight changes, a line
starts with a list bullet or number or just right of a shape as small as a bullet (a browser
draws a list's bullets as paths), or a blank line's room separates two lines. Glyphs that
are not upright (a sideways label, a page turned by /Rotate whose text was not turned back)
and invisible ones (a scanned page's OCR layer) are kept apart, to be drawn again as they
were. Text the page hides is left out, neither translated nor drawn again: glyphs on an
optional-content layer that is off (marked content `/OC`, or a form or image whose /OC is
off) and glyphs that a later opaque rectangle or image covers (a redaction's black box, a
white box over words taken back, a scan over its OCR text). Coordinates are pdfminer's layout
space: the page as shown, its origin at the bottom left of the media box.

Bounds, each a FormatError 413 past it: the bytes of content pdfminer parses (a form drawn
again and again is parsed each time), the drawing operations and the forms it follows, the
characters it finds in the file and on one page, the graphics states a page saves without
restoring them, and the time it takes.
"""

from __future__ import annotations

import bisect
import io
import math
import re
import statistics
import time
from collections import Counter, deque
from dataclasses import dataclass, field, replace

from . import FormatError

#: drawing operations (text runs, paths, images, forms) pdfminer may follow in one file
MAX_OPERATIONS = 1_000_000
MAX_FIGURES = 20_000  # forms drawn in one file: pdfminer sets up each one anew
MAX_PAGE_CHARS = 50_000  # glyphs of one page (pdfminer holds an object for each)
MAX_SAVED_STATES = 256  # graphics states saved at once (`q`); PDF readers allow 28 to 256
MAX_RULES = 5_000  # straight lines kept for one page (a table's borders: the first)
MAX_MARKS = 10_000  # shapes as small as a bullet kept for one page (a chart's: the first)
MAX_SECONDS = 120.0  # what reading (or rewriting) a file may take, whatever else bounds it
#: the bounds a worker process takes from the server's (app/formats/pdf_worker.py)
BOUNDS = (
    "MAX_OPERATIONS",
    "MAX_FIGURES",
    "MAX_PAGE_CHARS",
    "MAX_SAVED_STATES",
    "MAX_SECONDS",
)
#: a line starting with one of these starts a paragraph (its marker is drawn as it was)
BULLET = re.compile(r"[•◦▪▫■□●○‣⁃∙·\-–—*]\s|\(?\d{1,3}[.)]\s|\(?[a-zA-Z][.)]\s")
BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
ITALIC = re.compile(r"italic|oblique", re.IGNORECASE)
_CID = "(cid:"  # pdfminer's text for a glyph it cannot map to Unicode
_CIDS = re.compile(r"\(cid:\d+\)")


@dataclass
class Paragraph:
    text: str  # without its list marker
    marker: str  # "• ", "1. ", or ""
    x0: float
    y0: float
    x1: float
    y1: float
    size: float  # the font size of most of its characters
    first_baseline: float
    pitch: float  # from one line's baseline to the next (1.2 times the size for one line)
    lines: int
    bold: bool
    italic: bool
    fontname: str  # the name of the font most of its characters are in
    color: tuple[str, tuple[float, ...]] | None  # ("rgb" | "gray" | "cmyk", components)
    centred: bool


@dataclass
class Glyph:
    """A glyph drawn again as it was: its text, its text matrix in layout space (without the
    font size), font size, font name and colour."""

    text: str
    matrix: tuple[float, ...]
    size: float
    fontname: str
    color: tuple[str, tuple[float, ...]] | None
    invisible: bool


@dataclass
class Page:
    pageid: int  # the page object's number, in the file pdfminer read
    ctm: tuple[float, ...]  # pdfminer's: the page's own space to the layout's
    visible: tuple[float, float, float, float]  # the crop box, in layout space
    paragraphs: list[Paragraph] = field(default_factory=list)
    glyphs: list[Glyph] = field(default_factory=list)
    readable: bool = True  # False: the page is left as it is
    #: straight lines drawn on the page (a table's borders): (x0, y0, x1, y1), upright or level
    rules: list[tuple[float, float, float, float]] = field(default_factory=list)

    @property
    def drawn(self) -> bool:
        return self.readable and bool(self.paragraphs or self.glyphs)

    @classmethod
    def from_dict(cls, d: dict) -> Page:
        """The page `dataclasses.asdict` wrote (as JSON: tuples come back as lists)."""
        return cls(
            **{
                **d,
                "paragraphs": [Paragraph(**p) for p in d["paragraphs"]],
                "glyphs": [Glyph(**g) for g in d["glyphs"]],
                "rules": [tuple(r) for r in d.get("rules", [])],
            }
        )


def read_pages(data: bytes, max_content_bytes: int, max_chars: int) -> list[Page]:
    """The pages pdfminer finds in `data` (a file pypdf wrote: app/formats/pdf.py)."""
    from pdfminer.layout import LAParams  # noqa: PLC0415
    from pdfminer.pdfdocument import PDFDocument  # noqa: PLC0415
    from pdfminer.pdfinterp import PDFResourceManager  # noqa: PLC0415
    from pdfminer.pdfpage import PDFPage  # noqa: PLC0415
    from pdfminer.pdfparser import PDFParser  # noqa: PLC0415

    device = _device(
        PDFResourceManager(caching=True),
        LAParams(all_texts=True),
        max_chars,
        time.monotonic() + MAX_SECONDS,
    )
    document = PDFDocument(PDFParser(io.BytesIO(data)))
    interpreter = _interpreter(device, max_content_bytes, Layers(document.catalog))
    pages = []
    for page in PDFPage.create_pages(document):
        interpreter.process_page(page)
        pages.append(_page(page, device))
    return pages


class Layers:
    """Which optional-content groups (layers) a reader shows: the file's default
    configuration (/OCProperties /D: its /BaseState, /ON and /OFF). Anything this cannot make
    out is shown."""

    MAX_DEPTH = 16  # a visibility expression's nesting followed
    MAX_TERMS = 1000  # the groups and operators of one expression followed

    def __init__(self, catalog) -> None:
        from pdfminer.pdftypes import resolve1  # noqa: PLC0415

        config = resolve1(_get(resolve1(catalog.get("OCProperties")), "D"))
        self.shown_by_default = _name(resolve1(_get(config, "BaseState"))) != "OFF"
        self.on = _ids(resolve1(_get(config, "ON")))
        self.off = _ids(resolve1(_get(config, "OFF")))
        self.known: dict[int, bool] = {}  # by object number: what `shown` found
        self.terms = 0

    def _group_shown(self, objid: int) -> bool:
        if objid in self.off:
            return False
        return objid in self.on or self.shown_by_default

    def shown(self, ref) -> bool:
        """Whether what an /OC entry (a group or a membership dictionary) marks is shown."""
        from pdfminer.pdftypes import PDFObjRef  # noqa: PLC0415

        if not isinstance(ref, PDFObjRef):
            self.terms = 0
            return self._shown(ref)
        if ref.objid not in self.known:
            self.terms = 0
            self.known[ref.objid] = self._shown(ref)
        return self.known[ref.objid]

    def _shown(self, ref) -> bool:
        from pdfminer.pdftypes import PDFObjRef, resolve1  # noqa: PLC0415

        obj = resolve1(ref)
        if not isinstance(obj, dict):
            return True
        if _name(obj.get("Type")) != "OCMD":
            return self._group_shown(ref.objid) if isinstance(ref, PDFObjRef) else True
        expression = resolve1(obj.get("VE"))
        if isinstance(expression, list) and expression:
            return self._expression(expression, 0)
        groups = resolve1(obj.get("OCGs"))
        refs = groups if isinstance(groups, list) else [obj.get("OCGs")]
        states = [self._group_shown(r.objid) for r in refs if isinstance(r, PDFObjRef)]
        if not states:
            return True
        policy = _name(resolve1(obj.get("P"))) or "AnyOn"
        if policy == "AllOn":
            return all(states)
        if policy == "AnyOff":
            return not all(states)
        if policy == "AllOff":
            return not any(states)
        return any(states)

    def _expression(self, expression, depth: int) -> bool:
        from pdfminer.pdftypes import PDFObjRef, resolve1  # noqa: PLC0415

        self.terms += 1
        if self.terms > self.MAX_TERMS:
            return True
        if isinstance(expression, PDFObjRef) and not isinstance(resolve1(expression), list):
            return self._group_shown(expression.objid)
        expression = resolve1(expression)
        if not isinstance(expression, list) or not expression or depth > self.MAX_DEPTH:
            return True
        operator, values = _name(expression[0]), []
        for operand in expression[1:]:
            if self.terms > self.MAX_TERMS:
                return True
            values.append(self._expression(operand, depth + 1))
        if operator == "Not" and len(values) == 1:
            return not values[0]
        if operator == "And" and values:
            return all(values)
        if operator == "Or" and values:
            return any(values)
        return True


def _get(d, key: str):
    return d.get(key) if isinstance(d, dict) else None


def _name(value) -> str | None:
    from pdfminer.psparser import PSLiteral  # noqa: PLC0415

    name = value.name if isinstance(value, PSLiteral) else None
    return name if isinstance(name, str) else None


def _ids(refs) -> set[int]:
    from pdfminer.pdftypes import PDFObjRef  # noqa: PLC0415

    return {r.objid for r in refs if isinstance(r, PDFObjRef)} if isinstance(refs, list) else set()


Box = tuple[float, float, float, float]


def _intersection(box: Box, clip: Box | None) -> Box:
    """The part of `box` inside `clip` (an empty box where they do not meet)."""
    if clip is None:
        return box
    return (max(box[0], clip[0]), max(box[1], clip[1]), min(box[2], clip[2]), min(box[3], clip[3]))


@dataclass(frozen=True)
class Paint:
    """What a fill does to what lies under it, as far as hiding text goes."""

    alpha: bool = True  # the graphics state's /ca is 1
    blend: bool = True  # its blend mode is Normal
    mask: bool = True  # it has no soft mask
    ceiling: bool = True  # the page drawing this form paints opaquely
    text_clip: bool = False  # the clip is text: a fill shows as the glyphs
    clip: Box | None = None  # the clipping path's box, in layout space (None: none)

    @property
    def opaque(self) -> bool:
        return self.alpha and self.blend and self.mask and self.ceiling and not self.text_clip


def _form_box(attrs: dict, ctm) -> Box | None:
    """A form's /BBox through its /Matrix and `ctm`, in layout space: what it draws is
    clipped to it."""
    from pdfminer.pdftypes import resolve1  # noqa: PLC0415

    box, matrix = resolve1(attrs.get("BBox")), resolve1(attrs.get("Matrix")) or (1, 0, 0, 1, 0, 0)
    try:
        x0, y0, x1, y1 = (float(v) for v in box)
        m = tuple(float(v) for v in matrix)
        corners = [_apply(ctm, *_apply(m, x, y)) for x in (x0, x1) for y in (y0, y1)]
    except (TypeError, ValueError):
        return None
    xs, ys = [x for x, _ in corners], [y for _, y in corners]
    return min(xs), min(ys), max(xs), max(ys)


#: blend modes that paint over what is below as it is
_NORMAL_BLEND = {"Normal", "Compatible"}


def _interpreter(device, max_content_bytes: int, layers: Layers):
    """pdfminer's interpreter, counting the content bytes it parses (forms are parsed by a
    copy of it, `dup`, each time they are drawn: the count is the device's, shared) and the
    graphics states saved; following which layers are off (marked content, forms and images
    with /OC) and whether a fill is opaque (the graphics state's /ca, /BM and /SMask, which
    pdfminer does not read), for the device to know the text a page hides."""
    from pdfminer.pdfinterp import PDFPageInterpreter  # noqa: PLC0415
    from pdfminer.pdftypes import resolve1, stream_value  # noqa: PLC0415
    from pdfminer.psparser import PSLiteral  # noqa: PLC0415

    class Interpreter(PDFPageInterpreter):
        paint = Paint()  # what a fill does now (saved with `q`, restored with `Q`)
        inherited = Paint()  # a form's: that of the page (or form) drawing it
        form_clip: Box | None = None  # the box of the form being drawn (see do_Do)
        saved: list[Paint]

        def init_state(self, ctm) -> None:
            super().init_state(ctm)
            self.saved = []
            self._paint(self.inherited)

        def _paint(self, paint: Paint) -> None:
            self.paint = paint
            device.opaque, device.clip = paint.opaque, paint.clip

        def subinterp(self):
            # a form is drawn as a whole through what the page's state does to it: a fill
            # inside it is opaque only where the page's is (a transparency group drawn with
            # /ca 0.15 sets /ca 1 inside), and clipped to its own box too
            interpreter = super().subinterp()
            interpreter.inherited = replace(
                self.paint,
                alpha=True,
                blend=True,
                mask=True,
                ceiling=self.paint.opaque,
                clip=_intersection(self.form_clip, self.paint.clip)
                if self.form_clip
                else self.paint.clip,
            )
            return interpreter

        def do_gs(self, name) -> None:
            state = resolve1(_get(resolve1(_get(self.resources, "ExtGState")), _name(name) or ""))
            if not isinstance(state, dict):
                return
            paint = self.paint
            alpha = resolve1(state.get("ca"))
            if isinstance(alpha, (int, float)):
                paint = replace(paint, alpha=alpha >= 1)
            blend = resolve1(state.get("BM"))
            blend = blend[0] if isinstance(blend, list) and blend else blend
            if isinstance(blend, PSLiteral):
                paint = replace(paint, blend=blend.name in _NORMAL_BLEND)
            if "SMask" in state:
                paint = replace(paint, mask=_name(resolve1(state["SMask"])) == "None")
            self._paint(paint)

        def do_Tr(self, render) -> None:
            super().do_Tr(render)
            if isinstance(render, int) and 4 <= render <= 7:
                # text added to the clip: what is painted next shows through the glyphs (the
                # text in another colour), covering nothing
                self._paint(replace(self.paint, text_clip=True))

        def do_W(self) -> None:
            box = _path_box(self.curpath, self.ctm)
            if box is not None:
                self._paint(replace(self.paint, clip=_intersection(box, self.paint.clip)))
            super().do_W()

        def do_W_a(self) -> None:  # W*
            self.do_W()

        def do_Q(self) -> None:
            if self.gstack and self.saved:
                self._paint(self.saved.pop())
            super().do_Q()

        def do_BMC(self, tag) -> None:
            device.layers.append(device.layer_off)
            super().do_BMC(tag)

        def do_BDC(self, tag, props) -> None:
            off = device.layer_off
            if _name(tag) == "OC":
                marks = props
                if isinstance(props, PSLiteral):
                    listed = resolve1(_get(self.resources, "Properties"))
                    marks = _get(listed, _name(props) or "")
                off = off or not layers.shown(marks)
            device.layers.append(off)
            super().do_BDC(tag, props)

        def do_EMC(self) -> None:
            if device.layers:
                device.layers.pop()
            super().do_EMC()

        def do_Do(self, xobjid) -> None:
            attrs = getattr(resolve1(_get(self.xobjmap, _name(xobjid) or "")), "attrs", None)
            if isinstance(attrs, dict) and "OC" in attrs and not layers.shown(attrs["OC"]):
                return  # a form or an image on a layer that is off: not drawn
            layers_open = len(device.layers)
            self.form_clip = _form_box(attrs, self.ctm) if isinstance(attrs, dict) else None
            super().do_Do(xobjid)
            self.form_clip = None
            del device.layers[layers_open:]  # a form's own marked content ends with it
            self._paint(self.paint)

        def execute(self, streams) -> None:
            for obj in streams:
                device.content_bytes += len(stream_value(obj).get_data() or b"")
            if device.content_bytes > max_content_bytes:
                raise FormatError(
                    f"the PDF file's pages draw more than {max_content_bytes} bytes of content"
                    " (a form is counted each time it is drawn)",
                    413,
                )
            super().execute(streams)

        def do_q(self) -> None:
            if len(self.gstack) >= MAX_SAVED_STATES:
                raise FormatError(
                    f"the PDF file saves more than {MAX_SAVED_STATES} graphics states at once",
                    413,
                )
            self.saved.append(self.paint)
            super().do_q()

    return Interpreter(device.rsrcmgr, device)


def _device(rsrcmgr, laparams, max_chars: int, deadline: float):
    """pdfminer's page aggregator that keeps each page's transformation, sets apart invisible
    and turned glyphs, leaves out the glyphs a page hides, skips paths and images (its layout
    does not need them; opaque rectangles and images drawn over text are kept as covers) and
    counts what it follows."""
    from pdfminer.converter import PDFPageAggregator  # noqa: PLC0415
    from pdfminer.layout import LTChar, LTContainer  # noqa: PLC0415

    class Device(PDFPageAggregator):
        operations = figures = content_bytes = chars = page_chars = 0
        page_ctm: tuple[float, ...] = (1, 0, 0, 1, 0, 0)
        unreadable = 0
        invisible = False
        glyphs: list[Glyph]
        #: for each glyph of `glyphs`: when it was drawn (the operation's number) and its box
        glyph_places: list[tuple[int, Box]]
        opaque = True  # the interpreter's: whether a fill now paints over what is below
        clip: Box | None = None  # the interpreter's: the clipping path's box
        layers: list[bool]  # marked-content sequences open: whether each is on a layer off
        marks: list[Box]  # shapes as small as a list's bullet
        rules: list[Box]  # straight lines (a table's borders): see Rules
        covers: Covers

        @property
        def layer_off(self) -> bool:
            return bool(self.layers) and self.layers[-1]

        def _count(self) -> None:
            self.operations += 1
            if self.operations > MAX_OPERATIONS:
                raise FormatError(
                    f"the PDF file draws more than {MAX_OPERATIONS} times; too much to read", 413
                )
            if self.operations % 1000 == 0:
                self.in_time()

        def in_time(self) -> None:
            """FormatError 413 past the reading's deadline."""
            if time.monotonic() > deadline:
                raise FormatError(
                    f"the PDF file takes more than {MAX_SECONDS:.0f} s to read; too much", 413
                )

        def begin_page(self, page, ctm) -> None:
            self.page_ctm = tuple(ctm)
            self.unreadable = self.page_chars = 0
            self.glyphs, self.glyph_places, self.layers, self.marks = [], [], [], []
            self.rules = []
            super().begin_page(page, ctm)
            self.covers = Covers(self.cur_item.bbox)

        def end_page(self, page) -> None:
            if self.covers:  # leave out the glyphs covered after they were drawn
                self._uncover(self.cur_item)
                kept = [
                    (g, place)
                    for g, place in zip(self.glyphs, self.glyph_places, strict=True)
                    if g.invisible or not self.covers.hide(*place)
                ]
                self.glyphs = [g for g, _ in kept]
            super().end_page(page)

        def _uncover(self, item) -> None:
            kept = []
            for n, child in enumerate(item._objs):
                if n % 1000 == 0:
                    self.in_time()
                if isinstance(child, LTChar):
                    if self.covers.hide(child.drawn, child.bbox):  # type: ignore[attr-defined]
                        continue
                elif isinstance(child, LTContainer):
                    self._uncover(child)
                kept.append(child)
            item._objs = kept

        def begin_figure(self, name, bbox, matrix) -> None:
            self._count()
            self.figures += 1
            if self.figures > MAX_FIGURES:
                raise FormatError(f"the PDF file draws more than {MAX_FIGURES} forms", 413)
            super().begin_figure(name, bbox, matrix)

        def paint_path(self, gstate, stroke, fill, evenodd, path) -> None:
            self._count()  # not kept: no text
            if len(self.marks) < MAX_MARKS and not self.layer_off:
                mark = _mark(path, self.ctm)
                if mark is not None:
                    self.marks.append(mark)
            if len(self.rules) < MAX_RULES and not self.layer_off:
                self.rules += _rules(path, self.ctm, stroke)[: MAX_RULES - len(self.rules)]
            if fill and self.opaque and self.page_chars and not self.layer_off:
                box = _rectangle(path, self.ctm)
                if box is not None:
                    self.covers.add(self.operations, _intersection(box, self.clip))

        def render_image(self, name, stream) -> None:
            self._count()  # not kept: no text
            masked = any(stream.get(key) for key in ("ImageMask", "IM", "SMask", "Mask"))
            a, b, c, d, _, _ = getattr(self.cur_item, "matrix", (1, 0, 0, 1, 0, 0))  # upright?
            upright = (abs(b) < 1e-6 and abs(c) < 1e-6) or (abs(a) < 1e-6 and abs(d) < 1e-6)
            if self.opaque and self.page_chars and not self.layer_off and not masked and upright:
                self.covers.add(self.operations, _intersection(self.cur_item.bbox, self.clip))

        def render_string(self, textstate, seq, ncs, graphicstate) -> None:
            self._count()
            self.invisible = textstate.render in (3, 7)  # an OCR layer, a clipping path
            super().render_string(textstate, seq, ncs, graphicstate)

        def render_char(self, matrix, font, fontsize, scaling, rise, cid, ncs, graphicstate):
            width = super().render_char(
                matrix, font, fontsize, scaling, rise, cid, ncs, graphicstate
            )
            self.chars += 1
            self.page_chars += 1
            if self.chars > max_chars:
                raise FormatError(f"the PDF file holds more than {max_chars} characters", 413)
            if self.page_chars > MAX_PAGE_CHARS:
                raise FormatError(
                    f"a page of the PDF file holds more than {MAX_PAGE_CHARS} characters", 413
                )
            char = self.cur_item._objs[-1]
            char.drawn = self.operations  # type: ignore[attr-defined]  # when: see Covers
            if self.layer_off:  # hidden: neither translated nor drawn again
                self.cur_item._objs.pop()
                return width
            text = char.get_text()
            if text.startswith(_CID):
                self.unreadable += 1
            if self.invisible or not char.upright:  # drawn again as it was, not translated
                self.cur_item._objs.pop()
                if not text.isspace() and not text.startswith(_CID):
                    self.glyph_places.append((self.operations, char.bbox))
                    self.glyphs.append(
                        Glyph(
                            text,
                            tuple(matrix),
                            fontsize,
                            char.fontname,
                            color(char.graphicstate.ncolor, ncs),
                            self.invisible,
                        )
                    )
            return width

    return Device(rsrcmgr, laparams=laparams)


class Covers:
    """Opaque rectangles and images drawn on a page after its first glyph, by the order
    they were drawn in: whether those drawn after a glyph cover its middle. Kept in squares of
    the page (48 points, or a 24th of a larger page's side), so that a glyph is tested against
    the covers near it, the latest `MAX_PARTS` for each square (a redaction is drawn last)
    besides the last that covers all of it; what lies outside the page is no cover, nor is
    a shape thinner than `THIN` (a rule)."""

    SQUARES = 24  # per side of the page, at most
    MAX_PARTS = 64  # covers over part of a square kept for it (a chart's many: the latest)
    THIN = 2.0  # a cover thinner than this (a rule, an underline) hides no glyph's middle

    def __init__(self, page: Box = (0.0, 0.0, 612.0, 792.0)) -> None:
        if not all(map(math.isfinite, page)):
            page = (-1e6, -1e6, 1e6, 1e6)
        self.page = page
        self.side = max(
            48.0, (page[2] - page[0]) / self.SQUARES, (page[3] - page[1]) / self.SQUARES
        )
        # per square: the last cover over all of it, and those over part of it
        self.whole: dict[tuple[int, int], int] = {}
        self.part: dict[tuple[int, int], deque[tuple[int, Box]]] = {}

    def __bool__(self) -> bool:
        return bool(self.whole or self.part)

    def add(self, order: int, box: Box) -> None:
        x0, y0, x1, y1 = (float(v) for v in box)
        x0, y0, x1, y1 = _intersection((x0, y0, x1, y1), self.page)
        if not (x1 - x0 > self.THIN and y1 - y0 > self.THIN):
            return
        if not all(map(math.isfinite, (x0, y0, x1, y1))):
            return
        side = self.side
        for i in range(int(x0 // side), int(x1 // side) + 1):
            for j in range(int(y0 // side), int(y1 // side) + 1):
                sx, sy = i * side, j * side
                if x0 <= sx and sx + side <= x1 and y0 <= sy and sy + side <= y1:
                    self.whole[i, j] = order
                else:
                    parts = self.part.setdefault((i, j), deque(maxlen=self.MAX_PARTS))
                    parts.append((order, (x0, y0, x1, y1)))

    def hide(self, order: int, box: Box) -> bool:
        """Whether covers drawn after the glyph drawn at `order` cover the middle of its box
        (half its width and height: a line struck through it or under it hides nothing)."""
        x0, y0, x1, y1 = box
        dx, dy = (x1 - x0) / 4, (y1 - y0) / 4
        points = [(x0 + dx, y0 + dy), (x1 - dx, y0 + dy), (x0 + dx, y1 - dy), (x1 - dx, y1 - dy)]
        return all(self._covered(order, x, y) for x, y in [((x0 + x1) / 2, (y0 + y1) / 2), *points])

    def _covered(self, order: int, x: float, y: float) -> bool:
        if not (math.isfinite(x) and math.isfinite(y)):
            return False
        square = (int(x // self.side), int(y // self.side))
        if self.whole.get(square, -1) > order:
            return True
        return any(
            later > order and x0 <= x <= x1 and y0 <= y <= y1
            for later, (x0, y0, x1, y1) in self.part.get(square, ())
        )


def _rectangle(path, ctm) -> tuple[float, float, float, float] | None:
    """The box a path fills when it is one upright rectangle (`re`, or four lines closed),
    in layout space; None for any other path (a frame of two rectangles, a curve)."""
    shape = "".join(str(segment[0]) for segment in path)
    if shape not in ("mlllh", "mllllh", "mllll", "mlll"):
        return None
    try:
        points = [_apply(ctm, float(s[1]), float(s[2])) for s in path if s[0] != "h"]
    except (TypeError, ValueError, IndexError):
        return None
    if len(points) == 5:
        if points[4] != points[0]:
            return None
        points.pop()
    xs = sorted({round(x, 2) for x, _ in points})
    ys = sorted({round(y, 2) for _, y in points})
    if len(xs) != 2 or len(ys) != 2:
        return None
    corners = {(round(x, 2), round(y, 2)) for x, y in points}
    if corners != {(x, y) for x in xs for y in ys}:
        return None
    return xs[0], ys[0], xs[1], ys[1]


def _page(page, device) -> Page:
    layout = device.get_result()
    ctm = device.page_ctm
    corners = [_apply(ctm, x, y) for x in page.cropbox[::2] for y in page.cropbox[1::2]]
    xs, ys = [x for x, _ in corners], [y for _, y in corners]
    out = Page(page.pageid, ctm, (min(xs), min(ys), max(xs), max(ys)), glyphs=device.glyphs)
    lines = [list(_lines(box)) for box in _boxes(layout)]
    chars = sum(len(line.get_text()) for box in lines for line in box)
    visible = chars + sum(not g.invisible for g in out.glyphs)
    if not visible or device.unreadable * 10 > chars + len(out.glyphs):
        # only invisible text (a scan: its translation would cover the picture), or text
        # that cannot be read: left as it is
        out.readable = False
        return out
    marks, rules = Marks(device.marks), Rules(device.rules)
    out.paragraphs = [
        p
        for box in lines
        for p in _paragraphs(rules.cut(box, device.in_time), layout.width, marks, rules)
    ]
    out.rules = device.rules
    return out


def _apply(m: tuple[float, ...], x: float, y: float) -> tuple[float, float]:
    a, b, c, d, e, f = m
    return a * x + c * y + e, b * x + d * y + f


def _boxes(item):
    """The horizontal text boxes of a page or a figure (a form's text), in reading order."""
    from pdfminer.layout import LTFigure, LTTextBoxHorizontal  # noqa: PLC0415

    for child in item:
        if isinstance(child, LTTextBoxHorizontal):
            yield child
        elif isinstance(child, LTFigure):
            yield from _boxes(child)


def _lines(box):
    from pdfminer.layout import LTTextLineHorizontal  # noqa: PLC0415

    return (line for line in box if isinstance(line, LTTextLineHorizontal))


def _text(line) -> str:
    return line_text(line.get_text())


#: bullets Word writes in the Symbol and Wingdings fonts, which map them to the Unicode private
#: use area (U+F0B7 for Symbol's bullet): no other font has them
_SYMBOL_BULLETS = re.compile("^[\uf0a7\uf0b7\uf076\uf0d8\uf0fc\uf06e\uf0a8]")


def line_text(text: str) -> str:
    """A line's text; a glyph pdfminer cannot name ("(cid:127)": a symbol font's) is a bullet
    at the line's start (where such glyphs are, in a page readable otherwise), else left out;
    so is a symbol font's bullet."""
    text = _SYMBOL_BULLETS.sub("•", text.strip())
    if text.startswith(_CID):
        text = _CIDS.sub("•", text, count=1)
    return _CIDS.sub("", text)


class Marks:
    """Small round or square shapes drawn on a page (a list's bullets where a browser draws
    them as paths, not glyphs), by the band of height they lie in; those in a column closer
    together than three times their height (a dotted border) are no bullets."""

    BAND = 8.0
    LOOK = 32  # marks looked at for one line, at most

    def __init__(self, boxes: list[Box]) -> None:
        column = sorted(boxes, key=lambda b: (round(b[0] + b[2]), b[1]))
        crowded = set()
        for a, b in zip(column, column[1:], strict=False):
            same_x = round(a[0] + a[2]) == round(b[0] + b[2])
            if same_x and b[1] - a[1] < 3 * max(a[3] - a[1], b[3] - b[1]):
                crowded |= {a, b}
        self.bands: dict[int, list[Box]] = {}
        for box in boxes:
            if box not in crowded:
                centre = (box[1] + box[3]) / 2
                self.bands.setdefault(int(centre // self.BAND), []).append(box)
        for listed in self.bands.values():
            listed.sort(key=lambda b: b[2])
        self.ends = {band: [b[2] for b in listed] for band, listed in self.bands.items()}

    def before(self, line, size: float) -> bool:
        """Whether a mark lies just left of `line`'s start, level with it."""
        if not all(map(math.isfinite, (line.y0, line.y1, line.x0))):
            return False
        if line.y1 - line.y0 > 16 * self.BAND:  # no list item's line is that high
            return False
        reach = 2 * max(size, 1)
        for band in range(int(line.y0 // self.BAND), int(line.y1 // self.BAND) + 1):
            ends = self.ends.get(band, [])
            start = bisect.bisect_left(ends, line.x0 - reach)
            stop = bisect.bisect_right(ends, line.x0 + 0.5)
            for _, y0, _, y1 in self.bands[band][start:stop][: self.LOOK] if ends else ():
                if line.y0 <= (y0 + y1) / 2 <= line.y1:
                    return True
        return False


def _path_box(path, ctm) -> Box | None:
    """The box of a path's points (control points too) in layout space; None for no point.
    An operand pdfminer could not read as a number (it keeps it as it was) is passed over."""
    points = [
        _apply(ctm, float(x), float(y))
        for segment in path
        for x, y in zip(segment[1::2], segment[2::2], strict=False)
        if isinstance(x, (int, float)) and isinstance(y, (int, float))
    ]
    if not points:
        return None
    xs, ys = [x for x, _ in points], [y for _, y in points]
    return min(xs), min(ys), max(xs), max(ys)


def _mark(path, ctm) -> Box | None:
    """The box of a path as small as a bullet (1 to 8 points, about as wide as high)."""
    box = _path_box(path, ctm)
    if box is None:
        return None
    width, height = box[2] - box[0], box[3] - box[1]
    if 1 <= width <= 8 and 1 <= height <= 8 and 0.6 <= width / height <= 1.6:
        return box
    return None


class Rules:
    """The straight lines of a page, which part a table's cells: pdfminer puts cells close
    together on one line ("Fresh apples Five euros"). A text line is cut where an upright
    rule passes through a gap between its glyphs and the pieces on both sides are cells:
    between two upright rules, under and over level ones that span them (a bordered word
    inside a sentence, a `<kbd>`, is a box but its neighbours are not, and stays in its
    sentence). Each piece, and each line in a cell (the cell's next lines), belongs to the
    cell whose left border is nearest on its left; a box's pieces are taken cell by cell. A level rule across two lines parts them (a
    table's rows; an underline spans less than the lines)."""

    BAND = 48.0
    MAX_BANDS = 64  # bands an upright rule is listed in, at most
    NEAR = 3.0  # a cell's level borders lie within this many line heights of its text
    SPACING = 4.0  # two upright rules this close: a cell's end and the next one's start
    LOOK = 32  # rules looked at for one question, at most

    def __init__(self, rules: list[Box]) -> None:
        self.upright: dict[int, list[Box]] = {}  # by band of height, in order of x
        self.level: list[Box] = []  # in order of y
        for rule in rules:
            x0, y0, x1, y1 = rule
            if not all(map(math.isfinite, rule)):
                continue
            if x0 == x1:
                first = int(y0 // self.BAND)
                for band in range(first, min(int(y1 // self.BAND), first + self.MAX_BANDS) + 1):
                    self.upright.setdefault(band, []).append(rule)
            else:
                self.level.append(rule)
        for listed in self.upright.values():
            listed.sort()
        self.xs = {band: [r[0] for r in listed] for band, listed in self.upright.items()}
        self.level.sort(key=lambda r: r[1])
        self.heights = [r[1] for r in self.level]

    def cut(self, lines, tick=lambda: None) -> list:
        """The lines of a text box, cut into cells, each with its `cell` (the x of its left
        border, or -inf), the pieces of each cell together, in the box's order."""
        pieces = []
        for order, line in enumerate(lines):
            tick()
            for piece in self._cells(line):
                pieces.append((piece.cell, order, piece))
        if len(pieces) == len(lines):  # no line cut: no table here, the box as it is
            for line in lines:
                line.cell = -math.inf
            return list(lines)
        pieces.sort(key=lambda p: (p[0], p[1]))
        return [piece for _, _, piece in pieces]

    def _cells(self, line) -> list:
        if not all(map(math.isfinite, (line.x0, line.x1, line.y0, line.y1))):
            line.cell = -math.inf
            return [line]
        height = max(line.y1 - line.y0, 1.0)
        left = self._border(line, line.x0, -1)
        right = self._border(line, line.x1, 1)
        # (where a cell ends, where the next begins): one rule, or two close together (the
        # borders of cells drawn apart, CSS's border-spacing)
        inner: list[tuple[float, float]] = []
        for x in self._crossing(line):
            if inner and x - inner[-1][1] <= self.SPACING:
                inner[-1] = (inner[-1][0], x)
            else:
                inner.append((x, x))
        borders: list[tuple[float, float] | None] = [
            (left, left) if left is not None else None,
            *inner,
            (right, right) if right is not None else None,
        ]
        boxed = [
            a is not None and b is not None and self._boxed(a[1], b[0], line, height)
            for a, b in zip(borders, borders[1:], strict=False)
        ]
        starts = {a: b for k, (a, b) in enumerate(inner) if boxed[k] and boxed[k + 1]}
        if not starts:  # in a cell (the next line of one cut, however far down), or no table
            inside = (
                left is not None and right is not None and self._boxed(left, right, line, math.inf)
            )
            line.cell = left if inside else -math.inf
            return [line]
        out = []
        for edge, items in _split(line, sorted(starts)):
            if any(not i.get_text().isspace() for i in items if hasattr(i, "bbox")):
                cell = starts.get(edge, left if left is not None else -math.inf)
                out.append(Piece(items, cell))
        return out

    def _near(self, line) -> tuple[list[Box], list[float]]:
        band = int((line.y0 + line.y1) / 2 // self.BAND)
        return self.upright.get(band, []), self.xs.get(band, [])

    def _crossing(self, line) -> list[float]:
        """The upright rules across the line's middle, inside it."""
        listed, xs = self._near(line)
        middle = (line.y0 + line.y1) / 2
        start = bisect.bisect_right(xs, line.x0)
        return sorted(
            {
                x
                for x, y0, _, y1 in listed[start : start + self.LOOK]
                if x < line.x1 and y0 <= middle <= y1
            }
        )

    def _border(self, line, x: float, side: int) -> float | None:
        """The nearest upright rule across the line's middle on its left (side -1) or right
        (+1) of `x`; None where there is none."""
        listed, xs = self._near(line)
        middle = (line.y0 + line.y1) / 2
        if side < 0:
            found = listed[
                max(0, bisect.bisect_right(xs, x + 0.5) - self.LOOK) : bisect.bisect_right(
                    xs, x + 0.5
                )
            ]
            found = found[::-1]
        else:
            start = bisect.bisect_left(xs, x - 0.5)
            found = listed[start : start + self.LOOK]
        for rx, y0, _, y1 in found:
            if y0 <= middle <= y1:
                return rx
        return None

    def _boxed(self, left: float, right: float, line, height: float) -> bool:
        """Whether level rules spanning from `left` to `right` run over and under the line,
        within NEAR times `height`: the line's piece between them is in a cell."""
        over = self._spanning(line.y1 - 1, line.y1 + self.NEAR * height, left, right)
        return over and self._spanning(line.y0 - self.NEAR * height, line.y0 + 1, left, right)

    def _spanning(self, low: float, high: float, left: float, right: float) -> bool:
        start = bisect.bisect_left(self.heights, low)
        stop = bisect.bisect_right(self.heights, high)
        return any(
            x0 <= left + 2 and x1 >= right - 2
            for x0, _, x1, _ in self.level[start:stop][: self.LOOK]
        )

    def between(self, upper, lower) -> bool:
        """Whether a level rule runs between two lines across both (an underline, shorter
        than the lines, does not part them)."""
        if not all(map(math.isfinite, (upper.y0, lower.y1, upper.x0, lower.x1))):
            return False
        left, right = max(upper.x0, lower.x0), min(upper.x1, lower.x1)
        return self._spanning(lower.y1 - 0.5, upper.y0 + 0.5, left, right)


def _split(line, xs: list[float]):
    """(the rule on its left or -inf, its items) for each piece of `line` cut at `xs`, each
    a gap between two words (a rule through a glyph or a word cuts nothing)."""
    from pdfminer.layout import LTChar  # noqa: PLC0415

    left, cuts = -math.inf, iter(xs)
    items: list = []
    cut = next(cuts, math.inf)
    last = None  # the last glyph that is not a space
    spaced = False  # a space after it (pdfminer's, between words): a rule within a word
    for item in line:  # (a title running on over a spreadsheet's grid) cuts nothing
        text = item.get_text()
        if isinstance(item, LTChar) and not text.isspace():
            while (item.x0 + item.x1) / 2 > cut:
                apart = last is not None and last.x1 <= cut + 0.5 and item.x0 >= cut - 0.5
                if items and apart and spaced:
                    yield left, items
                    left, items = cut, []
                cut = next(cuts, math.inf)
            last, spaced = item, False
        elif text.isspace():
            spaced = True
        items.append(item)
    if items:
        yield left, items


class Piece:
    """A part of a pdfminer text line, read as a line is (its items, box and text)."""

    def __init__(self, items: list, cell: float) -> None:
        boxes = [i for i in items if hasattr(i, "bbox")]
        self.items = items
        self.cell = cell  # the x of its cell's left border
        self.x0 = min(i.x0 for i in boxes)
        self.y0 = min(i.y0 for i in boxes)
        self.x1 = max(i.x1 for i in boxes)
        self.y1 = max(i.y1 for i in boxes)

    def __iter__(self):
        return iter(self.items)

    def get_text(self) -> str:
        return "".join(i.get_text() for i in self.items)


def _rules(path, ctm, stroke: bool) -> list[Box]:
    """The straight lines a path draws: each subpath that is a thin shape (a border drawn
    as a filled strip), and a stroked path's upright and level segments; (x0, y0, x1, y1)
    with x0 == x1 or y0 == y1, in layout space."""
    out: list[Box] = []
    start = None
    points: list[tuple[str, tuple[float, float]]] = []
    subpaths = []
    for segment in path:
        op = str(segment[0])
        if op == "m" and points:
            subpaths.append(points)
            points = []
        if op == "h":
            if start is not None:
                points.append(("l", start))
            continue
        try:
            point = _apply(ctm, float(segment[-2]), float(segment[-1]))
        except (TypeError, ValueError, IndexError):
            return out
        if op == "m":
            start = point
        points.append((op, point))
    if points:
        subpaths.append(points)
    for sub in subpaths[:MAX_RULES]:
        xs, ys = [p[0] for _, p in sub], [p[1] for _, p in sub]
        width, height = max(xs) - min(xs), max(ys) - min(ys)
        if width <= 2.5 and height >= 3:
            x = (min(xs) + max(xs)) / 2
            out.append((x, min(ys), x, max(ys)))
        elif height <= 2.5 and width >= 3:
            y = (min(ys) + max(ys)) / 2
            out.append((min(xs), y, max(xs), y))
        elif stroke:
            for (_, (ax, ay)), (op, (bx, by)) in zip(sub, sub[1:], strict=False):
                if op != "l":
                    continue
                if abs(ax - bx) <= 0.5 and abs(ay - by) >= 3:
                    out.append((ax, min(ay, by), ax, max(ay, by)))
                elif abs(ay - by) <= 0.5 and abs(ax - bx) >= 3:
                    out.append((min(ax, bx), ay, max(ax, bx), ay))
    return [r for r in out if all(map(math.isfinite, r))]


def _paragraphs(
    lines, page_width: float, marks: Marks | None = None, rules: Rules | None = None
) -> list[Paragraph]:
    groups: list[list] = []
    for line in lines:
        if not _text(line).strip():
            continue
        if groups and not _starts_paragraph(groups[-1][-1], line, marks, rules):
            groups[-1].append(line)
        else:
            groups.append([line])
    return [_paragraph(group, page_width) for group in groups]


def _chars(line) -> list:
    from pdfminer.layout import LTChar  # noqa: PLC0415

    return [c for c in line if isinstance(c, LTChar) and not c.get_text().isspace()]


def _style(line) -> tuple[float, bool]:
    chars = _chars(line)
    if not chars:
        return 0.0, False
    size = statistics.median(round(c.size, 1) for c in chars)
    bold = sum(bool(BOLD.search(c.fontname)) for c in chars) * 2 > len(chars)
    return size, bold


def _starts_paragraph(
    previous, line, marks: Marks | None = None, rules: Rules | None = None
) -> bool:
    size, bold = _style(line)
    last_size, last_bold = _style(previous)
    if bold != last_bold or abs(size - last_size) > 0.15 * max(size, last_size, 1):
        return True
    if BULLET.match(_text(line)) or (marks is not None and marks.before(line, size)):
        return True
    if getattr(previous, "cell", -math.inf) != getattr(line, "cell", -math.inf):
        return True  # another cell of a table (Rules.cut)
    if rules is not None and rules.between(previous, line):
        return True  # a row's rule between them
    gap = previous.y0 - line.y1  # a blank line's room between them
    return gap > 0.8 * max(size, 1)


def _joined(texts: list[str]) -> str:
    out = ""
    for text in texts:
        text = " ".join(text.split())
        if not out:
            out = text
        elif re.search(r"\w-$", out) and text[:1].islower():  # "transla-" "tion"
            out = out[:-1] + text
        else:
            out += " " + text
    return out


def _paragraph(lines, page_width: float) -> Paragraph:
    chars = [c for line in lines for c in _chars(line)]
    size = statistics.median(round(c.size, 1) for c in chars) if chars else 10.0
    baselines = [_baseline(line) for line in lines]
    pitches = [a - b for a, b in zip(baselines, baselines[1:], strict=False) if a > b]
    pitch = statistics.median(pitches) if pitches else 1.2 * size
    x0 = min(line.x0 for line in lines)
    x1 = max(line.x1 for line in lines)
    centre = (x0 + x1) / 2
    text = _joined([_text(line) for line in lines])
    marker = BULLET.match(text)
    colors = [repr(c.graphicstate.ncolor) for c in chars]  # a list, or a pattern's name
    return Paragraph(
        text=text[marker.end() :] if marker else text,
        marker=marker.group() if marker else "",
        x0=x0,
        y0=min(line.y0 for line in lines),
        x1=x1,
        y1=max(line.y1 for line in lines),
        size=size,
        first_baseline=baselines[0],
        pitch=pitch,
        lines=len(lines),
        bold=sum(bool(BOLD.search(c.fontname)) for c in chars) * 2 > len(chars),
        italic=sum(bool(ITALIC.search(c.fontname)) for c in chars) * 2 > len(chars),
        fontname=_most([c.fontname for c in chars]) or "",
        # the colour most of its characters have (a link's words are not the paragraph's)
        color=_color_of(chars[colors.index(_most(colors))]) if chars else None,
        centred=len(lines) == 1 and abs(centre - page_width / 2) < 0.02 * page_width,
    )


def _baseline(line) -> float:
    chars = _chars(line)
    if not chars:
        return line.y0
    return statistics.median(c.matrix[5] for c in chars)


def _most(values: list):
    """The most frequent of `values` (the first of them where several are), or None."""
    return max(Counter(values).items(), key=lambda kv: kv[1])[0] if values else None


def _color_of(char) -> tuple[str, tuple[float, ...]] | None:
    return color(char.graphicstate.ncolor, getattr(char, "ncs", None))


#: the colour spaces whose components are drawn as they are
_SPACES = {"DeviceGray": "gray", "CalGray": "gray", "DeviceRGB": "rgb", "CalRGB": "rgb"}
_SPACES |= {"DeviceCMYK": "cmyk"}


def color(value, space=None) -> tuple[str, tuple[float, ...]] | None:
    """pdfminer's fill colour as (colour space, components); None (black) for one of another
    space (a spot colour's tint, an index: their single component is no grey)."""
    name = getattr(space, "name", None)
    if name is not None and name not in _SPACES:
        return None
    if isinstance(value, (int, float)):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not all(
        isinstance(v, (int, float)) and 0 <= v <= 1 for v in value
    ):
        return None
    kind = {1: "gray", 3: "rgb", 4: "cmyk"}.get(len(value))
    return (kind, tuple(float(v) for v in value)) if kind else None
