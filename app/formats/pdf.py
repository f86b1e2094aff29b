"""PDF files: the text of each page translated where it stood, as LibreTranslate translates one.

pdfminer.six reads each page's text in blocks (its layout analysis groups characters into
lines and lines into boxes); a box is cut into paragraphs where the font's size or weight
changes or a line starts with a list bullet. pypdf then takes the page's text away and keeps
everything else (images, drawings, links and other annotations, the page's size and rotation),
and lays over it a page that reportlab draws: each paragraph's translation in the paragraph's
box, in its colour, weight and size (smaller, down to half, where the translation needs more
lines than the box has), centred where the line was centred on the page.

What is not translated: text pdfminer cannot read as Unicode (a font without a ToUnicode map:
a page where more than a tenth of the characters are such is left as it is), invisible text
(the OCR layer of a scanned page: a page with no visible text is left as it is), vertical
text and text drawn as curves or images. The translation is drawn in DejaVu (Debian's
fonts-dejavu-core, which the Docker image installs; its sans, serif or fixed-width face, as
the original's font name tells) or, where it is missing, reportlab's Bitstream Vera, left to
right: a target written in another script than Latin, Greek, Cyrillic, Armenian or Georgian
is refused before anything is translated.

Bounds: the pages (`Limits.max_pdf_pages`), every stream but images decoded
(`Limits.max_unpacked_bytes`, before pdfminer reads any: it decodes without a bound), the
drawing operations pdfminer follows (`_MAX_OPERATIONS`) and the characters of text
(`text_budget`).
"""

from __future__ import annotations

import io
import logging
import re
import statistics
import threading
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from . import FormatError, Limits, Translate
from .inline import has_letters, text_budget_in_force
from .plain import in_pieces

# pdfminer and pypdf log every oddity of a file they read at WARNING; a client's file is not
# the server's problem (a broken one is a 400 with the reason)
for _name in ("pdfminer", "pypdf"):
    logging.getLogger(_name).setLevel(logging.ERROR)

#: drawing operations (text runs, paths, images, forms) pdfminer may follow in one file:
#: a form drawn thousands of times over is read each time
_MAX_OPERATIONS = 2_000_000
#: a line starting with one of these starts a paragraph
_BULLET = re.compile(r"[•◦▪▫■□●○‣⁃∙·\-–—*]\s|\(?\d{1,3}[.)]\s|\(?[a-zA-Z][.)]\s")
_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_ITALIC = re.compile(r"italic|oblique", re.IGNORECASE)
_CID = "(cid:"
_CIDS = re.compile(r"\(cid:\d+\)")
_SHRINK = 0.5  # the smallest size a translation is drawn in, of its paragraph's


@dataclass
class Paragraph:
    """One paragraph of a page, in pdfminer's layout coordinates (origin at the bottom left
    of the page as it is shown)."""

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
    family: str  # "sans", "serif" or "mono": the original font's, as far as its name tells
    color: tuple[str, tuple[float, ...]] | None  # ("rgb" | "gray" | "cmyk", components)
    centred: bool


@dataclass
class Page:
    ctm: tuple[float, ...]  # pdfminer's: the page's space to the layout's
    paragraphs: list[Paragraph]
    readable: bool  # False: left as it is (unreadable or only invisible text)
    width: float = 0.0  # as shown
    height: float = 0.0


#: the scripts the translation can be drawn in (DejaVu's, left to right)
_DRAWN_SCRIPTS = {"Latn": "Latin", "Grek": "Greek", "Cyrl": "Cyrillic", "Armn": "Armenian"}
_DRAWN_SCRIPTS |= {"Geor": "Georgian"}


def translate_pdf(
    data: bytes, translate: Translate, limits: Limits, language: str | None = None
) -> bytes:
    """`language`: the target's tag; a language written in a script not drawn here (`ja`,
    `ar`, `zh-Hant`) is refused with 400 before anything is translated."""
    # imported with the first PDF file, not at start-up
    from pypdf import ObjectDeletionFlag, PdfWriter  # noqa: PLC0415

    reader = _open(data, limits)
    script = _script(language) if language else None
    if script is not None and script not in _DRAWN_SCRIPTS:
        raise FormatError(
            f"{language} is written in a script ({script}) a translated PDF file cannot be "
            f"drawn in: {', '.join(_DRAWN_SCRIPTS.values())} letters only, left to right; "
            "translate the file's text another way (as .txt or .docx)"
        )
    pages = _read_pages(data, len(reader.pages))
    paragraphs = [p for page in pages if page.readable for p in page.paragraphs]
    sent = [p for p in paragraphs if has_letters(p.text)]
    done = in_pieces([p.text for p in sent], translate, limits.max_request_chars) if sent else []
    translations = {id(p): t for p, t in zip(sent, done, strict=True)}
    writer = PdfWriter(clone_from=reader)
    drawn = [n for n, page in enumerate(pages) if page.readable and page.paragraphs]
    overlays = _draw([pages[n] for n in drawn], translations)
    for number, overlay in zip(drawn, overlays, strict=True):
        target = writer.pages[number]
        writer.remove_objects_from_page(target, ObjectDeletionFlag.TEXT)
        target.merge_page(overlay)
        target.compress_content_streams()
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _script(language: str) -> str | None:
    """The ISO 15924 code of the script `language` is written in: its script subtag, else the
    one CLDR deems likely (`ja`: Jpan, `sr`: Cyrl); None where CLDR does not know it."""
    from babel.core import get_global  # noqa: PLC0415

    subtags = re.split(r"[-_]", language.strip())
    for sub in subtags[1:]:
        if len(sub) == 4 and sub.isalpha():
            return sub.title()
    likely = get_global("likely_subtags").get(subtags[0].lower())
    parts = likely.split("_") if likely else []
    return parts[1] if len(parts) > 1 and len(parts[1]) == 4 else None


def _open(data: bytes, limits: Limits):
    """pypdf's reader of a readable, unencrypted (or openly encrypted) file of at most
    `max_pdf_pages` pages whose streams decode to at most `max_unpacked_bytes`."""
    from pypdf import PdfReader  # noqa: PLC0415
    from pypdf.errors import PyPdfError  # noqa: PLC0415

    if b"%PDF-" not in data[:1024]:
        raise FormatError("not a PDF file (no %PDF- header)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FormatError("the PDF file is protected by a password; send it unprotected")
        count = len(reader.pages)
        if count > limits.max_pdf_pages:
            raise FormatError(
                f"the PDF file has {count} pages; at most {limits.max_pdf_pages}", 413
            )
        _check_streams(reader, limits.max_unpacked_bytes)
    except FormatError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise FormatError(f"the PDF file cannot be read: {exc}") from None
    if count == 0:
        raise FormatError("the PDF file has no pages")
    return reader


def _check_streams(reader, most: int) -> None:
    """FormatError 413 if the file's streams, images apart, decode to more than `most` bytes
    (pypdf bounds each stream; pdfminer does not, and decodes fonts and contents)."""
    from pypdf.errors import LimitReachedError  # noqa: PLC0415
    from pypdf.generic import IndirectObject, StreamObject  # noqa: PLC0415

    total = 0
    for generation, objects in reader.xref.items():
        for number in objects:
            try:
                obj = IndirectObject(number, generation, reader).get_object()
            except Exception:  # noqa: BLE001 (a broken object: pdfminer skips it too)
                continue
            if not isinstance(obj, StreamObject) or obj.get("/Subtype") == "/Image":
                continue
            try:
                total += len(obj.get_data())
            except LimitReachedError:
                total = most + 1
            except Exception:  # noqa: BLE001 (undecodable: pdfminer reads it as empty)
                continue
            if total > most:
                raise FormatError(f"the PDF file's contents decode to more than {most} bytes", 413)


def _read_pages(data: bytes, count: int) -> list[Page]:
    from pdfminer.layout import LAParams  # noqa: PLC0415
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager  # noqa: PLC0415
    from pdfminer.pdfpage import PDFPage  # noqa: PLC0415
    from pdfminer.pdfparser import PDFSyntaxError  # noqa: PLC0415
    from pdfminer.psexceptions import PSException  # noqa: PLC0415

    device = _device(PDFResourceManager(caching=True), LAParams())
    interpreter = PDFPageInterpreter(device.rsrcmgr, device)
    pages: list[Page] = []
    try:
        for number, page in enumerate(PDFPage.get_pages(io.BytesIO(data))):
            if number >= count:  # pypdf's pages are the ones rewritten
                break
            interpreter.process_page(page)
            pages.append(_page(device.get_result(), device.page_ctm, device.unreadable))
    except FormatError:
        raise
    except (PSException, PDFSyntaxError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise FormatError(f"the PDF file cannot be read: {exc}") from None
    except RecursionError:
        raise FormatError("the PDF file cannot be read: its objects nest too deeply") from None
    pages += [Page((1, 0, 0, 1, 0, 0), [], False)] * (count - len(pages))
    return pages


def _device(rsrcmgr, laparams):
    """pdfminer's page aggregator that keeps each page's transformation, skips invisible text
    and paths (its layout does not need them) and counts what it follows."""
    from pdfminer.converter import PDFPageAggregator  # noqa: PLC0415

    class Device(PDFPageAggregator):
        operations = 0
        page_ctm: tuple[float, ...] = (1, 0, 0, 1, 0, 0)
        unreadable = 0

        def _count(self) -> None:
            self.operations += 1
            if self.operations > _MAX_OPERATIONS:
                raise FormatError(
                    f"the PDF file draws more than {_MAX_OPERATIONS} times; too much to read", 413
                )

        def begin_page(self, page, ctm) -> None:
            self.page_ctm = tuple(ctm)
            self.unreadable = 0
            super().begin_page(page, ctm)

        def begin_figure(self, name, bbox, matrix) -> None:
            self._count()
            super().begin_figure(name, bbox, matrix)

        def paint_path(self, gstate, stroke, fill, evenodd, path) -> None:
            self._count()  # not kept: no text

        def render_image(self, name, stream) -> None:
            self._count()  # not kept: no text

        def render_string(self, textstate, seq, ncs, graphicstate) -> None:
            self._count()
            if textstate.render in (3, 7):  # invisible: an OCR layer, a clip
                return
            super().render_string(textstate, seq, ncs, graphicstate)

        def render_char(self, matrix, font, fontsize, scaling, rise, cid, ncs, graphicstate):
            width = super().render_char(
                matrix, font, fontsize, scaling, rise, cid, ncs, graphicstate
            )
            char = self.cur_item._objs[-1]
            budget = text_budget_in_force()
            if char.get_text().startswith(_CID):
                self.unreadable += 1
            elif not char.get_text().isspace():
                budget.add(char.get_text())
            return width

    return Device(rsrcmgr, laparams=laparams)


def _page(layout, ctm: tuple[float, ...], unreadable: int) -> Page:
    from pdfminer.layout import LTTextBoxHorizontal, LTTextLineHorizontal  # noqa: PLC0415

    lines = [
        [line for line in box if isinstance(line, LTTextLineHorizontal)]
        for box in layout
        if isinstance(box, LTTextBoxHorizontal)
    ]
    chars = sum(len(line.get_text()) for box in lines for line in box)
    if not chars:
        return Page(ctm, [], False)
    if unreadable * 10 > chars:
        return Page(ctm, [], False)
    paragraphs = [p for box in lines for p in _paragraphs(box, layout.width)]
    return Page(ctm, paragraphs, True, layout.width, layout.height)


def _text(line) -> str:
    """A line's text; a glyph pdfminer cannot name ("(cid:127)": a symbol font's) is a bullet
    at the line's start (where such glyphs are, in a page readable otherwise), else left out."""
    text = line.get_text().strip()
    if text.startswith(_CID):
        text = _CIDS.sub("•", text, count=1)
    return _CIDS.sub("", text)


def _paragraphs(lines, page_width: float) -> list[Paragraph]:
    groups: list[list] = []
    for line in lines:
        if not _text(line).strip():
            continue
        if groups and not _starts_paragraph(groups[-1][-1], line):
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
    bold = sum(bool(_BOLD.search(c.fontname)) for c in chars) * 2 > len(chars)
    return size, bold


def _starts_paragraph(previous, line) -> bool:
    size, bold = _style(line)
    last_size, last_bold = _style(previous)
    if bold != last_bold or abs(size - last_size) > 0.15 * max(size, last_size, 1):
        return True
    if _BULLET.match(_text(line)):
        return True
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
    marker = _BULLET.match(text)
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
        bold=sum(bool(_BOLD.search(c.fontname)) for c in chars) * 2 > len(chars),
        italic=sum(bool(_ITALIC.search(c.fontname)) for c in chars) * 2 > len(chars),
        family=_family(_most([c.fontname for c in chars]) or ""),
        color=_color(chars),
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


def _color(chars) -> tuple[str, tuple[float, ...]] | None:
    """The colour most of the characters have (a link's words are not the paragraph's)."""
    if not chars:
        return None
    colors = [c.graphicstate.ncolor for c in chars]
    keys = [repr(v) for v in colors]  # a colour may be a list, or a pattern's name
    value = colors[keys.index(_most(keys))]
    if isinstance(value, (int, float)):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not all(
        isinstance(v, (int, float)) and 0 <= v <= 1 for v in value
    ):
        return None
    kind = {1: "gray", 3: "rgb", 4: "cmyk"}.get(len(value))
    return (kind, tuple(float(v) for v in value)) if kind else None


#: the DejaVu files of each family and style, best first (fonts-dejavu-core has no italics:
#: an upright face then, or Bitstream Vera's italic, which DejaVu Sans was drawn from)
_DEJAVU = Path("/usr/share/fonts/truetype/dejavu")
_FACES = {
    "sans": ("DejaVuSans", "DejaVuSans-Bold", "DejaVuSans-Oblique", "DejaVuSans-BoldOblique"),
    "serif": ("DejaVuSerif", "DejaVuSerif-Bold", "DejaVuSerif-Italic", "DejaVuSerif-BoldItalic"),
    "mono": (
        "DejaVuSansMono",
        "DejaVuSansMono-Bold",
        "DejaVuSansMono-Oblique",
        "DejaVuSansMono-BoldOblique",
    ),
}
_VERA = ("Vera", "VeraBd", "VeraIt", "VeraBI")
_SERIF = re.compile(
    r"serif|times|roman|georgia|garamond|cambria|palatino|baskerville|minion|caslon|century|"
    r"bookman|charter|cmr\d",
    re.IGNORECASE,
)
_MONO = re.compile(r"mono|courier|consol|code|cmtt", re.IGNORECASE)
_font_lock = threading.Lock()


def _family(fontname: str) -> str:
    if _MONO.search(fontname):
        return "mono"
    if _SERIF.search(fontname) and "sans" not in fontname.lower():
        return "serif"
    return "sans"


@cache
def _font(family: str, bold: bool, italic: bool) -> str:
    """reportlab's name of the font a translation of this family and style is drawn in,
    registered the first time."""
    import reportlab  # noqa: PLC0415
    from reportlab.pdfbase import pdfmetrics  # noqa: PLC0415
    from reportlab.pdfbase.ttfonts import TTFont  # noqa: PLC0415

    style = 2 * italic + bold
    vera = Path(reportlab.__file__).parent / "fonts"
    candidates = [_DEJAVU / f"{_FACES[family][style]}.ttf"]
    if italic:
        candidates += [_DEJAVU / f"{_FACES[family][bold]}.ttf"] if family != "sans" else []
        candidates += [vera / f"{_VERA[style]}.ttf"]
    candidates += [_DEJAVU / f"{_FACES['sans'][int(bold)]}.ttf", vera / f"{_VERA[int(bold)]}.ttf"]
    path = next(p for p in candidates if p.is_file())
    name = f"mt-{path.stem}"
    with _font_lock:
        if name not in pdfmetrics.getRegisteredFontNames():
            pdfmetrics.registerFont(TTFont(name, str(path)))
    return name


def _invert(m: tuple[float, ...]) -> tuple[float, ...]:
    a, b, c, d, e, f = m
    det = a * d - b * c
    ia, ib, ic, id_ = d / det, -b / det, -c / det, a / det
    return (ia, ib, ic, id_, -(e * ia + f * ic), -(e * ib + f * id_))


def _draw(pages: list[Page], translations: dict[int, str]) -> list:
    """pypdf's pages of one PDF drawn for `pages`, each with its paragraphs' translations (or
    their text, where nothing was sent) in their places; one file, so that the fonts' glyphs
    are written once for all pages."""
    from pypdf import PdfReader  # noqa: PLC0415
    from reportlab.pdfgen.canvas import Canvas  # noqa: PLC0415

    out = io.BytesIO()
    canvas = Canvas(out, pageCompression=1)
    for page in pages:
        canvas.saveState()
        # pypdf lays this page's content over the original's, in the original's user space;
        # pdfminer's layout space is the page as shown (its media box's corner at 0, 0,
        # turned as /Rotate says): its ctm's inverse takes the layout's points back
        canvas.transform(*_invert(page.ctm))
        _draw_page(canvas, page, translations)
        canvas.restoreState()
        canvas.showPage()
    canvas.save()
    return list(PdfReader(io.BytesIO(out.getvalue())).pages)


def _draw_page(canvas, page: Page, translations: dict[int, str]) -> None:
    from reportlab.lib.utils import simpleSplit  # noqa: PLC0415
    from reportlab.pdfbase.pdfmetrics import stringWidth  # noqa: PLC0415

    for p in page.paragraphs:
        text = p.marker + translations.get(id(p), p.text)
        font = _font(p.family, p.bold, p.italic)
        left, right, bottom = _room(p, page)
        # the largest size, down to _SHRINK, at which the lines fit the room the paragraph
        # has (at _SHRINK they may run past it)
        scale = 1.0
        while True:
            lines = simpleSplit(text, font, p.size * scale, right - left) or [""]
            top_to_baseline = (p.y1 - p.first_baseline) * scale
            depth = top_to_baseline + (len(lines) - 1) * p.pitch * scale + 0.25 * p.size * scale
            if p.y1 - depth >= bottom - 0.5 or scale <= _SHRINK + 0.01:
                break
            scale -= 0.05
        size = p.size * scale
        _set_color(canvas, p.color)
        text_object = canvas.beginText()
        text_object.setFont(font, size)
        for i, line in enumerate(lines):
            x = p.x0
            if p.centred:
                x = (p.x0 + p.x1) / 2 - stringWidth(line, font, size) / 2
            text_object.setTextOrigin(x, p.y1 - top_to_baseline - i * p.pitch * scale)
            text_object.textOut(line)
        canvas.drawText(text_object)


def _room(p: Paragraph, page: Page) -> tuple[float, float, float]:
    """The left and right edges and the bottom of the room `p`'s translation may take: its own
    box; a paragraph of one line also the room to its right up to the next text beside it or
    the page's right margin (as wide as its left one), a centred one as much on either side;
    and below it, half the way to the next text under it, or down to the lowest text of the
    page."""
    others = [q for q in page.paragraphs if q is not p]
    margin = min(q.x0 for q in page.paragraphs)
    left, right = p.x0, p.x1 + 1
    if p.lines == 1:
        beside = [
            q.x0
            for q in others
            if q.x0 >= p.x1 - 0.5 and q.y0 < p.y1 and q.y1 > p.y0  # to its right, level
        ]
        right = max(right, min([page.width - margin, *beside]) - 0.3 * p.size)
        if p.centred:
            half = min((p.x0 + p.x1) / 2 - margin, right - (p.x0 + p.x1) / 2)
            left, right = (p.x0 + p.x1) / 2 - half, (p.x0 + p.x1) / 2 + half
    under = [  # half the space between them kept, that paragraphs stay apart
        q.y1 + max(0.25 * p.size, (p.y0 - q.y1) / 2)
        for q in others
        if q.y1 <= p.y0 + 0.5 and q.x0 < right and q.x1 > left  # below it, across its width
    ]
    lowest = min(q.y0 for q in page.paragraphs)
    bottom = min(p.y0, max([lowest, *under]))
    return left, right, bottom


def _set_color(canvas, color) -> None:
    if color is None:
        canvas.setFillColorRGB(0, 0, 0)
    elif color[0] == "gray":
        canvas.setFillGray(color[1][0])
    elif color[0] == "rgb":
        canvas.setFillColorRGB(*color[1])
    else:
        canvas.setFillColorCMYK(*color[1])
