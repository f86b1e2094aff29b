"""Translated paragraphs drawn by reportlab, one page for each page rewritten (app/formats/pdf.py
lays each over its page once the page's text is taken away).

Each translation starts at its paragraph's top left corner (centred where the line was
centred on the page), in the DejaVu face nearest to the original font's name (serif, sans or
fixed width; bold, italic), in the colour most of its characters had, at its size and line
pitch, scaled down in steps of 5% until it fits the paragraph's room (`rooms`); at half size it
is drawn as it is. Glyphs set apart when the page was read (turned or invisible) are drawn
again one by one as they were. All pages go into one file, so that each font's glyphs are
written once.
"""

from __future__ import annotations

import io
import re
import threading
import unicodedata
from functools import cache
from pathlib import Path

from .pdf_read import BOLD, ITALIC, Glyph, Page, Paragraph

SHRINK = 0.5  # the smallest size a translation is drawn in, of its paragraph's

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
#: Chinese, Japanese and Korean text is drawn in WenQuanYi Micro Hei (TrueType outlines, which
#: reportlab embeds; Noto CJK's are CFF, which it cannot), one face for every style
CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
CJK_SCRIPTS = {"Hans", "Hant", "Hani", "Jpan", "Kore", "Hang"}
#: a character a line may break before or after (no spaces between words): Han, kana, Hangul,
#: CJK punctuation and full-width forms
_CJK_CHAR = "\u1100-\u11ff\u2e80-\u30ff\u3100-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
#: what may not start a line (closing punctuation, small kana, the prolonged sound mark): it
#: stays with the character before it
_NO_START = "、。，．・：；？！）」』】〕〉》〙〗”’ーゝゞヽヾ々ぁぃぅぇぉっゃゅょゎァィゥェォッャュョヮヵヶ,.!?;:)]}"
#: what may not end a line (opening brackets and quotes): it goes with the character after it
_NO_END = "「『（【〔〈《〘〖“‘([{"
_CJK_TOKEN = re.compile(
    rf"[{re.escape(_NO_END)}]*[{_CJK_CHAR}][{re.escape(_NO_START)}]*"
    rf"|[^\s{_CJK_CHAR}]+[{re.escape(_NO_START)}]*|\s+"
)
_SERIF = re.compile(
    r"serif|times|roman|georgia|garamond|cambria|palatino|baskerville|minion|caslon|century|"
    r"bookman|charter|cmr\d",
    re.IGNORECASE,
)
_MONO = re.compile(r"mono|courier|consol|code|cmtt", re.IGNORECASE)
_font_lock = threading.Lock()


def family(fontname: str) -> str:
    if _MONO.search(fontname):
        return "mono"
    if _SERIF.search(fontname) and "sans" not in fontname.lower():
        return "serif"
    return "sans"


@cache
def font(family: str, bold: bool, italic: bool) -> str:
    """reportlab's name of the font text of this family and style is drawn in, registered the
    first time."""
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


@cache
def cjk_font() -> str:
    """reportlab's name of the CJK font (CJK_FONT), registered the first time."""
    from reportlab.pdfbase import pdfmetrics  # noqa: PLC0415
    from reportlab.pdfbase.ttfonts import TTFont  # noqa: PLC0415

    name = "mt-wqy-microhei"
    with _font_lock:
        if name not in pdfmetrics.getRegisteredFontNames():
            pdfmetrics.registerFont(TTFont(name, str(CJK_FONT), subfontIndex=0))
    return name


#: right-to-left scripts, drawn in DejaVu Sans (the only face with Arabic and Hebrew letters):
#: Arabic shaped by arabic-reshaper, both put in drawing order by `visual`
RTL_SCRIPTS = {"Arab", "Hebr"}
RTL_FONT = _DEJAVU / "DejaVuSans.ttf"
_MIRRORED = str.maketrans("()[]{}<>«»‹›", ")(][}{><»«›‹")


@cache
def _shaping() -> tuple:
    """arabic-reshaper set up for DejaVu Sans (the ligatures whose glyphs it has), and the
    letter forms it lacks (Arabic Presentation Forms-A: Persian and Urdu letters' joined forms)
    mapped back to their letters."""
    import arabic_reshaper  # noqa: PLC0415
    from arabic_reshaper.letters import LETTERS_ARABIC  # noqa: PLC0415
    from arabic_reshaper.ligatures import LIGATURES  # noqa: PLC0415
    from reportlab.pdfbase.ttfonts import TTFontFile  # noqa: PLC0415

    has = TTFontFile(str(RTL_FONT)).charToGlyph
    config = {name: all(ord(f) in has for f in forms if f) for name, (_, forms) in LIGATURES}
    reshaper = arabic_reshaper.ArabicReshaper(configuration=config)
    back = {
        ord(form): letter
        for letter, forms in LETTERS_ARABIC.items()
        for form in forms
        if form and ord(form) not in has
    }
    return reshaper, back


def shape(text: str) -> str:
    """Arabic letters in their joined forms (logical order still)."""
    reshaper, back = _shaping()
    return reshaper.reshape(text).translate(back)


def visual(line: str) -> str:
    """A right-to-left line in the order its glyphs are drawn, left to right: Unicode's bidi
    algorithm for one right-to-left paragraph, simplified: runs of left-to-right letters and
    of numbers (with what lies between two of them: "New York", "3.5", "10:30") keep their
    order, the rest is reversed, brackets mirrored."""
    kinds = []
    for char in line:
        kind = unicodedata.bidirectional(char)
        kinds.append("L" if kind in ("L", "EN", "AN") else "R" if kind in ("R", "AL") else "")
    strong = [i for i, k in enumerate(kinds) if k]
    for before, after in zip(strong, strong[1:], strict=False):  # neutrals between two L
        if kinds[before] == kinds[after] == "L":
            for i in range(before + 1, after):
                kinds[i] = "L"
    runs: list[list] = []
    for char, kind in zip(line, kinds, strict=True):
        kind = kind or "R"
        if runs and runs[-1][0] == kind:
            runs[-1][1] += char
        else:
            runs.append([kind, char])
    return "".join(
        text if kind == "L" else text[::-1].translate(_MIRRORED) for kind, text in runs[::-1]
    )


def wrap_cjk(text: str, name: str, size: float, width: float) -> list[str]:
    """`text` in lines at most `width` wide, broken between any two CJK characters (closing
    punctuation kept with the character before it, opening brackets with the one after) and
    at spaces; a word of another script is not cut."""
    from reportlab.pdfbase.pdfmetrics import stringWidth  # noqa: PLC0415

    lines: list[str] = []
    line, taken = "", 0.0
    for token in _CJK_TOKEN.findall(text):
        if token.isspace():
            if line and not line.endswith(" "):
                line, taken = line + " ", taken + stringWidth(" ", name, size)
            continue
        wide = stringWidth(token, name, size)
        if line.strip() and taken + wide > width:
            lines.append(line.rstrip())
            line, taken = "", 0.0
        line, taken = line + token, taken + wide
    if line.strip():
        lines.append(line.rstrip())
    return lines


def _invert(m: tuple[float, ...]) -> tuple[float, ...]:
    a, b, c, d, e, f = m
    det = a * d - b * c
    ia, ib, ic, id_ = d / det, -b / det, -c / det, a / det
    return (ia, ib, ic, id_, -(e * ia + f * ic), -(e * ib + f * id_))


def draw(pages: list[Page], script: str | None = None) -> list:
    """pypdf's pages of one PDF drawn for `pages`, each with its paragraphs' text (by then
    their translations) and its glyphs; `script`: the translations' (ISO 15924: in
    CJK_SCRIPTS, drawn in the CJK font, lines broken between characters; in RTL_SCRIPTS,
    shaped, right to left, aligned right)."""
    from pypdf import PdfReader  # noqa: PLC0415
    from reportlab.pdfgen.canvas import Canvas  # noqa: PLC0415

    out = io.BytesIO()
    canvas = Canvas(out, pageCompression=1)
    for page in pages:
        canvas.saveState()
        # pypdf lays this page's content over the original's, in the original's own space;
        # pdfminer's layout space is the page as shown (its media box's corner at 0, 0,
        # turned as /Rotate says): its ctm's inverse takes the layout's points back
        canvas.transform(*_invert(page.ctm))
        for p, edges in zip(page.paragraphs, rooms(page), strict=True):
            _paragraph(canvas, p, p.marker + p.text, edges, script)
        for glyph in page.glyphs:
            _glyph(canvas, glyph)
        canvas.restoreState()
        canvas.showPage()
    canvas.save()
    return list(PdfReader(io.BytesIO(out.getvalue())).pages)


def _paragraph(
    canvas, p: Paragraph, text: str, edges: tuple[float, float, float], script: str | None
) -> None:
    from reportlab.lib.utils import simpleSplit  # noqa: PLC0415
    from reportlab.pdfbase.pdfmetrics import stringWidth  # noqa: PLC0415

    rtl = script in RTL_SCRIPTS
    if script in CJK_SCRIPTS:
        name, split = cjk_font(), wrap_cjk
    elif rtl:
        name, split = font("sans", p.bold, False), simpleSplit
        text = shape(text) if script == "Arab" else text
    else:
        name, split = font(family(p.fontname), p.bold, p.italic), simpleSplit
    left, right, bottom = edges
    scale = 1.0
    while True:  # the largest size, down to SHRINK, at which the lines fit the room
        lines = split(text, name, p.size * scale, right - left) or [""]
        top_to_baseline = (p.y1 - p.first_baseline) * scale
        depth = top_to_baseline + (len(lines) - 1) * p.pitch * scale + 0.25 * p.size * scale
        if p.y1 - depth >= bottom - 0.5 or scale <= SHRINK + 0.01:
            break
        scale -= 0.05
    size = p.size * scale
    _set_color(canvas, p.color)
    text_object = canvas.beginText()
    text_object.setFont(name, size)
    widths = [stringWidth(line, name, size) for line in lines]
    # right to left: the lines end at the paragraph's right edge, or where the widest ends
    end = min(right, max(p.x1, left + max(widths)))
    for i, (line, wide) in enumerate(zip(lines, widths, strict=True)):
        x = p.x0
        if p.centred:
            x = (p.x0 + p.x1) / 2 - wide / 2
        elif rtl:
            x = end - wide
        if rtl:
            line = visual(line)
        text_object.setTextOrigin(x, p.y1 - top_to_baseline - i * p.pitch * scale)
        text_object.textOut(line)
    canvas.drawText(text_object)


def _glyph(canvas, glyph: Glyph) -> None:
    name = font(
        family(glyph.fontname),
        bool(BOLD.search(glyph.fontname)),
        bool(ITALIC.search(glyph.fontname)),
    )
    _set_color(canvas, glyph.color)
    text_object = canvas.beginText()
    text_object.setTextRenderMode(3 if glyph.invisible else 0)
    text_object.setTextTransform(*glyph.matrix)
    text_object.setFont(name, glyph.size)
    text_object.textOut(glyph.text)
    canvas.drawText(text_object)


#: a page with more paragraphs draws each in its own box (finding the room beside and under
#: each compares it with every other)
MAX_NEIGHBOURS = 1_000


def rooms(page: Page) -> list[tuple[float, float, float]]:
    """For each paragraph of `page`, the left and right edges and the bottom of the room its
    translation may take: its own box; a paragraph of one line also the room to its right up
    to the next text beside it or the visible page's right margin (as wide as its left one), a
    centred one as much on either side; and below it, half the way to the next text under it,
    or down to the lowest text of the page. A straight line drawn on the page (a table's
    border) ends the room too."""
    paragraphs = page.paragraphs
    if not paragraphs:  # a page of turned glyphs only
        return []
    if len(paragraphs) > MAX_NEIGHBOURS:
        return [(p.x0, p.x1 + 1, p.y0) for p in paragraphs]
    x0, _, x1, _ = page.visible
    margin = max(0.0, min(q.x0 for q in paragraphs) - x0)
    lowest = min(q.y0 for q in paragraphs)
    upright = [r for r in page.rules if r[0] == r[2]]  # a table's borders: a room ends there
    level = [r for r in page.rules if r[1] == r[3]]
    out = []
    for p in paragraphs:
        left, right = p.x0, p.x1 + 1
        middle = (p.y0 + p.y1) / 2
        if p.lines == 1:
            beside = [
                q.x0
                for q in paragraphs
                if q is not p and q.x0 >= p.x1 - 0.5 and q.y0 < p.y1 and q.y1 > p.y0  # level
            ]
            beside += [
                rx for rx, ry0, _, ry1 in upright if rx >= p.x1 - 0.5 and ry0 <= middle <= ry1
            ]
            right = max(right, min([x1 - margin, *beside]) - 0.3 * p.size)
            if p.centred:
                centre = (p.x0 + p.x1) / 2
                half = min(centre - (x0 + margin), right - centre)
                left, right = centre - half, centre + half
        under = [  # half the space between them kept, that paragraphs stay apart
            q.y1 + max(0.25 * p.size, (p.y0 - q.y1) / 2)
            for q in paragraphs
            if q is not p and q.y1 <= p.y0 + 0.5 and q.x0 < right and q.x1 > left  # below
        ]
        under += [  # a cell's border under it (an underline, shorter, is none)
            ry + 0.15 * p.size
            for rx0, ry, rx1, _ in level
            if ry <= p.y0 + 0.5 and rx0 <= p.x0 + 2 and rx1 >= min(p.x1, right) - 2
        ]
        out.append((left, right, min(p.y0, max([lowest, *under]))))
    return out


def _set_color(canvas, color) -> None:
    if color is None:
        canvas.setFillColorRGB(0, 0, 0)
    elif color[0] == "gray":
        canvas.setFillGray(color[1][0])
    elif color[0] == "rgb":
        canvas.setFillColorRGB(*color[1])
    else:
        canvas.setFillColorCMYK(*color[1])
