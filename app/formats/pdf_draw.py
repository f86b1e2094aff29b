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

import bisect
import io
import itertools
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
_NO_START = "、。，．・：；？！）」』】〕〉》〙〗”’ーゝゞヽヾ々ぁぃぅぇぉっゃゅょゎァィゥェォッャュョヮヵヶ,.!?;:)]}…‥〜～"
#: what may not end a line (opening brackets and quotes): it goes with the character after it
_NO_END = "「『（【〔〈《〘〖“‘([{"
#: a token a line is not broken within: an opening bracket with what follows it, a run of
#: full-width digits, one CJK character, or a word of another script, each with the closing
#: punctuation after it; or spaces
_CJK_TOKEN = re.compile(
    rf"[{re.escape(_NO_END)}]*(?:[\uff10-\uff19]+|[{_CJK_CHAR}]|[^\s{_CJK_CHAR}]+)"
    rf"[{re.escape(_NO_START)}]*|\s+"
)
_CJK_GLYPH = re.compile(f"[{_CJK_CHAR}]")
#: characters the CJK font has no glyph for, drawn as the one it has that Japanese writes in
#: their place (the wave dash and the wavy dash as the full-width tilde)
_CJK_STAND_INS = str.maketrans({"\u301c": "\uff5e", "\u3030": "\uff5e"})
_SERIF = re.compile(
    r"serif|times|roman|georgia|garamond|cambria|palatino|baskerville|minion|caslon|century|"
    r"bookman|charter|cmr\d",
    re.IGNORECASE,
)
# (not Monotype Corsiva, nor Arial Unicode MS: "mono" and "code" in other faces' names)
_MONO = re.compile(r"mono(?!type)|courier|consol|(?<!uni)code|cmtt", re.IGNORECASE)
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


def has_glyphs(name: str, text: str) -> bool:
    """Whether the registered font `name` has a glyph for each character of `text` drawn."""
    from reportlab.pdfbase import pdfmetrics  # noqa: PLC0415

    cmap = pdfmetrics.getFont(name).face.charToGlyph
    return all(ord(c) in cmap for c in set(text) if not c.isspace())


def face_for(text: str, fontname: str, bold: bool, italic: bool) -> str:
    """The font a translation is drawn in: the face nearest to the original (`font`), or,
    where that face lacks some of its letters (Bitstream Vera's italic, the fallback where
    DejaVu has no italic, has no Greek or Cyrillic: they were drawn as boxes), the family's
    upright face."""
    name = font(family(fontname), bold, italic)
    if italic and not has_glyphs(name, text):
        upright = font(family(fontname), bold, False)
        if has_glyphs(upright, text):
            return upright
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


#: Unicode's paired brackets (BidiBrackets.txt) that translations use
_BRACKETS = {
    "(": ")",
    "[": "]",
    "{": "}",
    "\u2045": "\u2046",
    "\u207d": "\u207e",
    "\u2329": "\u232a",
}
_BRACKETS |= {"\u3008": "\u3009", "\uff08": "\uff09", "\uff3b": "\uff3d", "\uff5b": "\uff5d"}
_STRONG = {"L": "L", "R": "R", "EN": "R", "AN": "R"}  # to neutrals, numbers act as R (N1)


def visual(line: str) -> str:
    """A right-to-left line in the order its glyphs are drawn, left to right: Unicode's bidi
    algorithm (UAX #9) for one line of a right-to-left paragraph without embeddings or
    isolates: its weak types resolved (a number after Arabic letters is Arabic; "10%", "$5",
    "10-20" and "3.5" are one number each; a number after Latin letters is Latin: "Windows
    10"), paired brackets (N0) and the neutrals between them (N1, N2: numbers act as right to
    left there, so "1, 2, 3" and "10 - 20" read from the right), then levels 1 and 2 reversed
    and brackets mirrored at level 1."""
    types = [unicodedata.bidirectional(c) for c in line]
    last, previous = "R", "R"  # the last strong type (the paragraph's R to start), the last type
    for i, kind in enumerate(types):  # W1, W2, W3
        if kind == "NSM":
            kind = previous
        if kind == "EN" and last == "AL":
            kind = "AN"
        if kind in ("L", "R", "AL"):
            last = kind
        types[i] = previous = "R" if kind == "AL" else kind
    for i in range(1, len(types) - 1):  # W4: one separator between two numbers
        before, after = types[i - 1], types[i + 1]
        if types[i] == "ES" and before == after == "EN":
            types[i] = "EN"
        elif types[i] == "CS" and before == after and before in ("EN", "AN"):
            types[i] = before
    for i, kind in enumerate(types):  # W5: terminators ($, %, #) beside a number
        if kind == "ET":
            j = i
            while j < len(types) and types[j] == "ET":
                j += 1
            if (i > 0 and types[i - 1] == "EN") or (j < len(types) and types[j] == "EN"):
                for k in range(i, j):
                    types[k] = "EN"
    last = "R"
    for i, kind in enumerate(types):  # W6, W7
        if kind in ("ES", "ET", "CS"):
            types[i] = "ON"
        elif kind in ("L", "R"):
            last = kind
        elif kind == "EN" and last == "L":
            types[i] = "L"
    _pair_brackets(line, types)
    next_strong, following = ["R"] * len(types), "R"  # the direction of the next strong type
    for i in range(len(types) - 1, -1, -1):
        next_strong[i] = following
        if types[i] in _STRONG:
            following = _STRONG[types[i]]
    preceding = "R"
    for i, kind in enumerate(types):  # N1, N2: a neutral between two of one direction takes it
        if kind in _STRONG:
            preceding = _STRONG[kind]
        else:
            types[i] = preceding if preceding == next_strong[i] else "R"
    levels = [1 if kind == "R" else 2 for kind in types]
    out = list(line)[::-1]  # level 1: the whole line reversed, then each level-2 run back
    levels = levels[::-1]
    i = 0
    while i < len(out):
        if levels[i] == 2:
            j = i
            while j < len(out) and levels[j] == 2:
                j += 1
            out[i:j] = out[i:j][::-1]
            i = j
        else:
            out[i] = out[i].translate(_MIRRORED)
            i += 1
    return "".join(out)


def _pair_brackets(line: str, types: list[str]) -> None:
    """N0: each pair of brackets takes the direction of what it holds where that is the
    line's (right to left), else that of the text before it where what it holds runs left to
    right ("Windows (64-bit)")."""
    closing = {v: k for k, v in _BRACKETS.items()}
    stack: list[tuple[str, int]] = []
    pairs = []
    for i, char in enumerate(line):
        if types[i] != "ON":
            continue
        if char in _BRACKETS and len(stack) < 63:
            stack.append((char, i))
        elif char in closing:
            for depth in range(len(stack) - 1, -1, -1):
                if stack[depth][0] == closing[char]:
                    pairs.append((stack[depth][1], i))
                    del stack[depth:]
                    break
    for start, stop in sorted(pairs):
        inside = {_STRONG[k] for k in types[start + 1 : stop] if k in _STRONG}
        if "R" in inside:
            direction = "R"
        elif "L" in inside:
            before = [_STRONG[k] for k in types[:start] if k in _STRONG][-1:] or ["R"]
            direction = before[0]
        else:
            continue
        types[start] = types[stop] = direction


def wrap_cjk(text: str, name: str, size: float, width: float) -> list[str]:
    """`text` in lines at most `width` wide, broken between any two CJK characters (closing
    punctuation kept with the character before it, opening brackets with the one after) and
    at spaces; a word of another script is not cut here (one longer than a line is cut by
    `_cut_long_words`, as in every script)."""
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


#: where a word too long for its line is best cut: after a URL's or a path's separators, a
#: hyphen or a dash
_CUT_AFTER = re.compile(r"[/\\\-_.?&=#:;,\u2010-\u2014]")


def _cut_long_words(lines: list[str], name: str, size: float, width: float) -> list[str]:
    """`lines` with each line wider than `width` (a word alone: a URL, a path, a German
    compound at a narrow cell) cut into pieces that fit: after the last separator that leaves
    at least a third of the width filled, or else after the last character that fits. Each
    character is measured once (a line's width is the sum of its characters', as reportlab
    measures it): measuring each start again took seconds for a word of 50,000 letters."""
    from reportlab.pdfbase.pdfmetrics import stringWidth  # noqa: PLC0415

    out: list[str] = []
    for line in lines:
        if stringWidth(line, name, size) <= width or len(line) <= 1:
            out.append(line)
            continue
        widths = {c: stringWidth(c, name, size) for c in set(line)}
        ends = list(itertools.accumulate(map(widths.__getitem__, line), initial=0.0))  # of [:i]
        start = 0
        while start < len(line) and line[start].isspace():
            start += 1
        while start < len(line):
            if ends[-1] - ends[start] <= width:
                out.append(line[start:].rstrip())
                break
            # the longest piece that fits (one character at least)
            stop = max(bisect.bisect_right(ends, ends[start] + width) - 1, start + 1)
            cut = stop
            for m in _CUT_AFTER.finditer(line, start, stop):
                if m.end() < stop and ends[m.end()] - ends[start] >= width / 3:
                    cut = m.end()
            out.append(line[start:cut].rstrip())
            start = cut
            while start < len(line) and line[start].isspace():
                start += 1
    return [piece for piece in out if piece] or out[:1]


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

    # right to left where the text has letters that run so (a price or a number, never
    # translated, is drawn as it was)
    rtl = script in RTL_SCRIPTS and any(unicodedata.bidirectional(c) in ("R", "AL") for c in text)
    if script in CJK_SCRIPTS:
        name, split = cjk_font(), wrap_cjk
        text = text.translate(_CJK_STAND_INS)
    elif rtl:
        name, split = font("sans", p.bold, False), simpleSplit
        text = shape(text) if script == "Arab" else text
    else:
        name, split = face_for(text, p.fontname, p.bold, p.italic), simpleSplit
    left, right, bottom = edges
    scale = 1.0
    while True:  # the largest size, down to SHRINK, at which the lines fit the room
        lines = split(text, name, p.size * scale, right - left)
        lines = _cut_long_words(lines, name, p.size * scale, right - left) or [""]
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
    bold, italic = bool(BOLD.search(glyph.fontname)), bool(ITALIC.search(glyph.fontname))
    if _CJK_GLYPH.search(glyph.text) and CJK_FONT.is_file():  # a sideways Chinese label
        name = cjk_font()
    elif any(unicodedata.bidirectional(c) in ("R", "AL") for c in glyph.text):
        name = font("sans", bold, False)  # the DejaVu face with Hebrew and Arabic letters
    else:
        name = font(family(glyph.fontname), bold, italic)
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
