"""PDF files (app/formats/pdf.py): each paragraph translated and drawn where it stood, the rest
of the page kept; broken, protected and oversized files refused with the reason. The files are
drawn by reportlab here and read back by pdfminer.six and pypdf, the libraries the handler
reads with."""

from __future__ import annotations

import io
import re
import zlib

import pytest
from pdfminer.high_level import extract_pages
from pdfminer.layout import LTChar, LTRect, LTTextBoxHorizontal, LTTextLineHorizontal
from pypdf import PdfReader, PdfWriter
from pypdf.generic import ArrayObject, FloatObject, NameObject, NumberObject
from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import simpleSplit
from reportlab.pdfgen.canvas import Canvas

from app.formats import FormatError, Limits, handler_for
from app.formats.inline import text_budget
from app.formats.pdf import translate_pdf

PARAGRAPH = (
    "It rained in the morning. The afternoon was sunny and warm. We went for a walk in "
    "the park and met some friends there."
)


def page_one(c: Canvas) -> None:
    c.setFont("Helvetica-Bold", 18)
    c.drawString(72, 770, "The weather report")
    c.setFont("Helvetica", 11)
    y = 740.0
    for line in simpleSplit(PARAGRAPH, "Helvetica", 11, 200):
        c.drawString(72, y, line)
        y -= 14
    y -= 14
    for item in ("• The first item.", "• The second item."):
        c.drawString(72, y, item)
        y -= 14
    y -= 14
    c.drawString(72, y, "We talked about the transla-")
    c.drawString(72, y - 14, "tion of the book.")
    c.setFillColorRGB(0.8, 0.1, 0.1)
    c.drawString(72, 500, "Red words here.")
    c.setFillColorRGB(0, 0, 0)
    c.rect(60, 420, 300, 40, fill=1)  # a drawing: kept
    c.drawCentredString(A4[0] / 2, 40, "3")  # no letters: drawn as it was
    c.linkURL("https://example.com/", (72, 760, 200, 790))


#: the texts `page_one` sends, in order
PAGE_ONE_SENT = [
    "The weather report",
    PARAGRAPH,
    "The first item.",
    "The second item.",
    "We talked about the translation of the book.",
    "Red words here.",
]


def make_pdf(*pages, size=A4) -> bytes:
    out = io.BytesIO()
    c = Canvas(out, pagesize=size)
    for draw in pages:
        draw(c)
        c.showPage()
    c.save()
    return out.getvalue()


def boxes(data: bytes) -> list[list[tuple[str, tuple[float, float, float, float], list[str]]]]:
    """For each page: (text, bbox, font names) of each text line pdfminer finds."""
    out = []
    for page in extract_pages(io.BytesIO(data)):
        lines = []
        for box in page:
            if isinstance(box, LTTextBoxHorizontal):
                for line in box:
                    if isinstance(line, LTTextLineHorizontal):
                        fonts = [c.fontname for c in line if isinstance(c, LTChar)]
                        lines.append((line.get_text().strip(), line.bbox, fonts))
        out.append(lines)
    return out


class Recorder:
    def __init__(self, fn=lambda t: f"<{t.upper()}>"):
        self.sent: list[str] = []
        self.fn = fn

    def __call__(self, texts: list[str]) -> list[str]:
        self.sent += texts
        return [self.fn(t) for t in texts]


def test_each_paragraph_is_translated_and_drawn_where_it_stood():
    src = make_pdf(page_one, lambda c: c.drawString(72, 700, "The cat sleeps on the sofa."))
    translate = Recorder()
    out = translate_pdf(src, translate, Limits())
    # one call for the file; lines joined into paragraphs, a word cut at a line's end joined
    # again, list markers and letterless text not sent
    assert translate.sent == [*PAGE_ONE_SENT, "The cat sleeps on the sofa."]
    before, after = boxes(src), boxes(out)
    text = [" ".join(t for t, _, _ in page) for page in after]
    assert "<THE WEATHER REPORT>" in text[0] and "• <THE FIRST ITEM.>" in text[0]
    assert "<THE CAT SLEEPS ON THE SOFA.>" in text[1]
    for original in ("weather", "rained", "first item", "talked", "cat sleeps"):
        assert original not in " ".join(text)
    assert [t for t, _, _ in after[0]].count("3") == 1  # the page number, as it was
    # each paragraph's first line starts where the original's did (to a point), and the
    # translation takes no more height than the original paragraph
    first = {t: bbox for t, bbox, _ in before[0]}
    placed = {t: bbox for t, bbox, _ in after[0]}
    heading, heading_out = first["The weather report"], placed["<THE WEATHER REPORT>"]
    assert abs(heading[0] - heading_out[0]) < 1 and abs(heading[3] - heading_out[3]) < 2
    paragraph_lines = [bbox for t, bbox, _ in after[0] if "RAINED" in t or "FRIENDS" in t]
    assert paragraph_lines and min(b[1] for b in paragraph_lines) > 740 - 4 * 14 - 4
    # the heading's weight, the red line's colour
    assert all("Bold" in f for f in dict((t, f) for t, _, f in after[0])["<THE WEATHER REPORT>"])
    red = next(
        c
        for page in extract_pages(io.BytesIO(out))
        for box in page
        if isinstance(box, LTTextBoxHorizontal) and "RED" in box.get_text()
        for line in box
        for c in line
        if isinstance(c, LTChar)
    )
    assert tuple(round(v, 2) for v in red.graphicstate.ncolor) == (0.8, 0.1, 0.1)
    # the rest of the page is kept: its size, the drawing, the link
    reader = PdfReader(io.BytesIO(out))
    assert len(reader.pages) == 2
    assert reader.pages[0].mediabox == PdfReader(io.BytesIO(src)).pages[0].mediabox
    page = next(iter(extract_pages(io.BytesIO(out))))
    assert any(isinstance(o, LTRect) and round(o.x0) == 60 for o in page)
    annots = [a.get_object() for a in reader.pages[0]["/Annots"]]
    assert annots[0]["/A"]["/URI"] == "https://example.com/"


def test_the_handler_is_the_one_for_pdf_files():
    translate = Recorder()
    out = handler_for("Report.PDF", "de")(make_pdf(page_one), translate, Limits())
    assert out.startswith(b"%PDF-") and "The weather report" in translate.sent


def test_a_longer_translation_is_drawn_smaller_within_the_room_it_has():
    """A paragraph's translation twice as long as the paragraph is drawn smaller, from the
    paragraph's top down to the next text under it at most; a line's runs to its right."""
    src = make_pdf(page_one)
    out = translate_pdf(src, Recorder(lambda t: (t + " ") * 2), Limits())
    lines = simpleSplit(PARAGRAPH, "Helvetica", 11, 200)
    before = [b for t, b, _ in boxes(src)[0] if t in lines]
    assert len(before) == len(lines) == 4
    top = max(b[3] for b in before)
    under = next(b for t, b, _ in boxes(src)[0] if t.endswith("The first item."))
    # the lines drawn between the heading and the list: the paragraph's
    after = [b for t, b, _ in boxes(out)[0] if under[3] < b[1] < top]
    assert len(after) > len(before)
    assert max(b[3] for b in after) <= top + 1 and min(b[1] for b in after) >= under[3]
    # the red line, one line long, runs on to its right (its box was 80 points wide)
    red = [b for t, b, _ in boxes(out)[0] if t.startswith("Red words here. Red")]
    assert red and red[0][2] - red[0][0] > 120
    # smaller: each line less high than the paragraph's 11-point lines
    assert all(b[3] - b[1] < 10.5 for b in after)


def upright(c: Canvas) -> None:
    c.setFont("Helvetica-Bold", 18)
    c.drawString(72, 500, "The weather report")
    c.setFont("Helvetica", 11)
    c.drawString(300, 400, "Red words here.")


def turned(rotation: int, offset: float) -> bytes:
    """A page that shows `upright` the right way up, though its /Rotate turns it and its
    media box starts at (offset, offset): the content is drawn through the inverse of the
    turn, as a scanner or a landscape layout writes it."""
    shown = (A4[1], A4[0]) if rotation in (90, 270) else A4  # the page as it is shown
    width, height = (shown[1], shown[0]) if rotation in (90, 270) else shown
    x0, y0, x1, y1 = offset, offset, offset + width, offset + height
    # the shown page's points to the page's own (PDF 32000-1 8.3.2.3 and 12.7.2 /Rotate)
    to_page = {
        0: (1, 0, 0, 1, x0, y0),
        90: (0, 1, -1, 0, x1, y0),
        180: (-1, 0, 0, -1, x1, y1),
        270: (0, -1, 1, 0, x0, y1),
    }[rotation]
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(upright, size=shown))))
    page = writer.pages[0]
    page.add_transformation(to_page)
    page[NameObject("/MediaBox")] = ArrayObject([FloatObject(v) for v in (x0, y0, x1, y1)])
    page[NameObject("/Rotate")] = NumberObject(rotation)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
def test_turned_pages_and_moved_media_boxes_keep_their_text_in_place(rotation):
    src = turned(rotation, 50.0)
    out = translate_pdf(src, Recorder(), Limits())
    before = {t: b for t, b, _ in boxes(src)[0]}
    after = {t: b for t, b, _ in boxes(out)[0]}
    assert before.keys() == {"The weather report", "Red words here."}  # read upright
    assert PdfReader(io.BytesIO(out)).pages[0].rotation == rotation
    for original, translated in [
        ("The weather report", "<THE WEATHER REPORT>"),
        ("Red words here.", "<RED WORDS HERE.>"),
    ]:
        a, b = before[original], after[translated]  # left and top edges
        assert abs(a[0] - b[0]) < 1.5 and abs(a[3] - b[3]) < 2, (original, a, b)


def test_a_page_with_only_invisible_text_is_left_as_it_is():
    """A scanned page's OCR layer is invisible text over the image: drawing its translation
    would cover the scan; the page is left as it was, and the other pages translated."""

    def scanned(c: Canvas) -> None:
        c.rect(50, 50, 400, 600, fill=1)  # the "scan"
        t = c.beginText(72, 700)
        t.setTextRenderMode(3)
        t.setFont("Helvetica", 12)
        t.textOut("The hidden words of the scan.")
        c.drawText(t)

    src = make_pdf(scanned, lambda c: c.drawString(72, 700, "The cat sleeps on the sofa."))
    translate = Recorder()
    out = translate_pdf(src, translate, Limits())
    assert translate.sent == ["The cat sleeps on the sofa."]
    reader = PdfReader(io.BytesIO(out))
    assert "The hidden words of the scan." in reader.pages[0].extract_text()
    assert "<THE CAT SLEEPS ON THE SOFA.>" in reader.pages[1].extract_text()


def stream(content: bytes, extra: bytes = b"") -> bytes:
    """A compressed stream object's body, `extra` entries in its dictionary."""
    data = zlib.compress(content)
    head = b"<< /Length %d /Filter /FlateDecode %s>>\nstream\n" % (len(data), extra)
    return head + data + b"\nendstream"


def raw_objects(*objects: bytes) -> bytes:
    """A file written byte for byte: the objects numbered from 1 (the catalog)."""
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


CATALOG = b"<< /Type /Catalog /Pages 2 0 R >>"
PAGE = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources %s >>"


def raw_pdf(content: bytes, font: bytes, *more: bytes) -> bytes:
    """A one-page file written byte for byte: its content stream (compressed), its font /F1
    (object 5) and `more` objects (6, 7, ...)."""
    return raw_objects(
        CATALOG,
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        PAGE % (4, b"<< /Font << /F1 5 0 R >> >>"),
        stream(content),
        font,
        *more,
    )


HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def bomb(size: int) -> bytes:
    """A one-page file whose content stream decodes to `size` bytes (spaces first)."""
    return raw_pdf(b" " * size + b"BT /F1 12 Tf 72 700 Td (Hi there) Tj ET", HELVETICA)


def test_a_page_whose_text_cannot_be_read_is_left_as_it_is():
    """A font of glyph numbers without a ToUnicode map reads as (cid:N) codes: the page is
    not translated (its text was neither sent as gibberish nor taken away)."""
    glyphs = b"BT /F1 12 Tf 72 700 Td <002B0048004800030046> Tj ET"
    src = raw_pdf(
        glyphs,
        b"<< /Type /Font /Subtype /Type0 /BaseFont /Xyz /Encoding /Identity-H"
        b" /DescendantFonts [6 0 R] >>",
        b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Xyz /DW 500 /FontDescriptor 7 0 R"
        b" /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> >>",
        b"<< /Type /FontDescriptor /FontName /Xyz /Flags 4 /FontBBox [0 -200 1000 800]"
        b" /ItalicAngle 0 /Ascent 800 /Descent -200 /CapHeight 700 /StemV 80 >>",
    )
    assert "(cid:" in " ".join(t for t, _, _ in boxes(src)[0])
    translate = Recorder()
    out = translate_pdf(src, translate, Limits())
    assert translate.sent == []
    assert glyphs in PdfReader(io.BytesIO(out)).pages[0].get_contents().get_data()


def test_broken_protected_and_oversized_files_are_refused_with_the_reason(monkeypatch):
    good = make_pdf(page_one, page_one, page_one)
    locked = PdfWriter(clone_from=PdfReader(io.BytesIO(good)))
    locked.encrypt("secret", algorithm="RC4-128")
    buf = io.BytesIO()
    locked.write(buf)
    cases = [
        (b"just some text", Limits(), 400, "not a PDF file"),
        (b"%PDF-1.4\n" + b"\x00garbage" * 100, Limits(), 400, "cannot be read"),
        (buf.getvalue(), Limits(), 400, "protected by a password"),
        (good, Limits(max_pdf_pages=2), 413, "has 3 pages; at most 2"),
        (bomb(3_000_000), Limits(max_unpacked_bytes=1_000_000), 413, "decode to more than"),
    ]
    for data, limits, status, message in cases:
        with pytest.raises(FormatError) as caught:
            translate_pdf(data, Recorder(), limits)
        assert caught.value.status == status and message in str(caught.value), caught.value
    # within the bound, the same kind of file is read
    translate = Recorder()
    translate_pdf(bomb(10_000), translate, Limits(max_unpacked_bytes=1_000_000))
    assert translate.sent == ["Hi there"]
    # text over the file's limit: refused while it is read, before anything is sent
    translate = Recorder()
    with text_budget(100), pytest.raises(FormatError) as caught:
        translate_pdf(good, translate, Limits())
    assert caught.value.status == 413 and translate.sent == []
    # a file that draws without end (a form drawn again and again)
    monkeypatch.setattr("app.formats.pdf_read.MAX_OPERATIONS", 20)
    with pytest.raises(FormatError) as caught:
        translate_pdf(good, Recorder(), Limits())
    assert caught.value.status == 413 and "draws more than 20 times" in str(caught.value)


def test_a_serif_or_fixed_width_text_is_drawn_in_such_a_font_in_its_most_common_colour():
    def fonts(c: Canvas) -> None:
        c.setFont("Times-Roman", 12)
        c.drawString(72, 700, "The old house stands by the river.")
        c.setFont("Courier", 12)
        c.drawString(72, 650, "The program prints the words.")
        t = c.beginText(72, 600)
        t.setFont("Helvetica", 12)
        t.setFillColorRGB(0, 0, 1)
        t.textOut("Visit")  # a link's blue word starts a black line
        t.setFillColorRGB(0, 0, 0)
        t.textOut(" our website for more of the news.")
        c.drawText(t)

    out = translate_pdf(make_pdf(fonts), Recorder(), Limits())
    drawn = {
        t: (f[0], box)
        for t, box, f in boxes(out)[0]
        if t.startswith("<")  # the translated lines
    }
    assert "Serif" in drawn["<THE OLD HOUSE STANDS BY THE RIVER.>"][0]
    assert "Mono" in drawn["<THE PROGRAM PRINTS THE WORDS.>"][0]
    chars = [
        c
        for page in extract_pages(io.BytesIO(out))
        for box in page
        if isinstance(box, LTTextBoxHorizontal) and "VISIT" in box.get_text()
        for line in box
        for c in line
        if isinstance(c, LTChar)
    ]
    assert {tuple(c.graphicstate.ncolor) for c in chars} == {(0, 0, 0)}


def test_the_fonts_of_a_long_file_are_written_once():
    """Each page's translation drawn with the same fonts: their glyphs are in the file once,
    not once per page (50 pages of 40 KB came back as 2 MB)."""
    src = make_pdf(*[page_one] * 10)
    out = translate_pdf(src, Recorder(), Limits())
    assert out.count(b"/FontFile2") == 2  # DejaVu Sans and DejaVu Sans Bold
    assert len(out) < 2 * len(src) + 100_000


@pytest.mark.parametrize(
    "language, script", [("th", "Thai"), ("hi", "Deva"), ("ka-Tibt", "Tibt"), ("am", "Ethi")]
)
def test_a_language_whose_script_cannot_be_drawn_is_refused_before_it_is_translated(
    language, script
):
    translate = Recorder()
    with pytest.raises(FormatError) as caught:
        handler_for("a.pdf", language)(make_pdf(page_one), translate, Limits())
    assert caught.value.status == 400 and f"({script})" in str(caught.value)
    assert translate.sent == []


@pytest.mark.parametrize("language", ["de", "de-CH", "ru", "el", "sr-Latn", "xx"])
def test_a_language_in_a_script_drawn_here_or_unknown_is_translated(language):
    translate = Recorder()
    handler_for("a.pdf", language)(make_pdf(page_one), translate, Limits())
    assert translate.sent


CHINESE = "天气很好，我们去公园散步。我们在那里遇到了一些朋友。"


@pytest.mark.parametrize("language", ["zh", "zh-Hant", "ja", "ko"])
def test_chinese_japanese_and_korean_are_drawn_in_a_cjk_font_broken_between_characters(
    language,
):
    """No spaces to break a line at: a line breaks between two characters and stays within
    the paragraph's room, every character drawn, in a font that has them."""
    translate = Recorder(lambda t: CHINESE * 2)
    out = translate_pdf(make_pdf(page_one), translate, Limits(), language)
    assert translate.sent == PAGE_ONE_SENT
    drawn = [(t, bbox, fonts) for t, bbox, fonts in boxes(out)[0]]
    assert "".join(t for t, _, _ in drawn).count(CHINESE) >= 2 * len(PAGE_ONE_SENT) - 1
    assert all("wqy" in f.lower() or "microhei" in f.lower() for _, _, fs in drawn for f in fs)
    # the paragraph (72 to 272 points wide) took several lines, none past the page's margin
    paragraph = [bbox for t, bbox, _ in drawn if bbox[1] > 600]
    assert len(paragraph) > 3 and max(b[2] for b in paragraph) <= A4[0] - 72 + 1


HEBREW = "מזג האוויר טוב היום (ממש). הלכנו לטייל בפארק עם 3 חברים."
ARABIC = "الطقس جميل اليوم (حقاً). ذهبنا في نزهة في الحديقة مع 3 أصدقاء."


@pytest.mark.parametrize("language, text", [("he", HEBREW), ("ar", ARABIC)])
def test_right_to_left_translations_are_drawn_from_the_right_in_reading_order(language, text):
    """Hebrew and Arabic run right to left: each line ends at the paragraph's right edge, its
    words drawn from right to left (a number and brackets as they read), Arabic letters
    joined (their contextual forms)."""
    from app.formats.pdf_draw import shape

    def paragraph(c: Canvas) -> None:
        c.setFont("Helvetica", 11)
        for n, line in enumerate(simpleSplit(PARAGRAPH, "Helvetica", 11, 200)):
            c.drawString(72, 700 - 14 * n, line)

    translate = Recorder(lambda t: text)
    out = translate_pdf(make_pdf(paragraph), translate, Limits(), language)
    lines = [(t, bbox) for t, bbox, _ in boxes(out)[0]]
    assert len(lines) > 1
    assert max(b[2] for _, b in lines) - min(b[2] for _, b in lines) < 1  # aligned right
    assert len({round(b[0]) for _, b in lines}) > 1  # ragged left
    # read from the right, line by line, the lines give the text back
    read = " ".join(
        "".join(ch if ch not in "()" else {"(": ")", ")": "("}[ch] for ch in reversed(t))
        for t, _ in lines
    )
    words = [w[::-1] if w.isdigit() else w for w in read.split()]  # digits run left to right
    logical = shape(text) if language == "ar" else text
    assert " ".join(words) == " ".join(logical.split())
    if language == "ar":
        assert all(not "\u0600" <= ch <= "\u06ff" for t, _ in lines for ch in t)  # joined forms


def test_a_wave_dash_the_cjk_font_lacks_is_drawn_as_the_full_width_tilde():
    out = translate_pdf(make_pdf(page_one), Recorder(lambda t: "9時〜17時"), Limits(), "ja")
    drawn = " ".join(t for t, _, _ in boxes(out)[0])
    assert "9時～17時" in drawn and "\u301c" not in drawn


def test_a_cjk_target_without_the_font_is_a_501_before_it_is_translated(monkeypatch):
    from app.formats import pdf_draw

    monkeypatch.setattr(pdf_draw, "CJK_FONT", pdf_draw.CJK_FONT.with_name("missing.ttc"))
    translate = Recorder()
    with pytest.raises(FormatError) as caught:
        translate_pdf(make_pdf(page_one), translate, Limits(), "ja")
    assert caught.value.status == 501 and "fonts-wqy-microhei" in str(caught.value)
    assert translate.sent == []


def texts(data: bytes) -> list[str]:
    return [page.extract_text() for page in PdfReader(io.BytesIO(data)).pages]


FORM = stream(
    b"BT /F1 12 Tf 72 600 Td (The words inside a form.) Tj ET",
    b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> ",
)
SHARED = b"<< /Font << /F1 5 0 R >> /XObject << /X 6 0 R >> >>"


def test_the_text_of_a_form_is_translated_on_every_page_that_draws_it():
    """A form (a letterhead, a footer drawn on each page) loses its text with the page's: its
    text is translated and drawn on each page that shows it, one that shows nothing else too."""
    src = raw_objects(
        CATALOG,
        b"<< /Type /Pages /Kids [3 0 R 7 0 R] /Count 2 >>",
        PAGE % (4, b"8 0 R"),
        stream(b"BT /F1 12 Tf 72 700 Td (The own words of the page.) Tj ET /X Do"),
        HELVETICA,
        FORM,
        PAGE % (9, b"8 0 R"),
        SHARED,
        stream(b"/X Do"),
    )
    translate = Recorder()
    out = translate_pdf(src, translate, Limits())
    assert translate.sent == [
        "The own words of the page.",
        "The words inside a form.",
        "The words inside a form.",
    ]
    assert texts(out) == [
        "<THE OWN WORDS OF THE PAGE.>\n<THE WORDS INSIDE A FORM.>",
        "<THE WORDS INSIDE A FORM.>",
    ]


#: objects 11 to 13: a font of glyph numbers without a ToUnicode map (its text unreadable)
UNREADABLE_FONT = (
    b"<< /Type /Font /Subtype /Type0 /BaseFont /Xyz /Encoding /Identity-H"
    b" /DescendantFonts [12 0 R] >>",
    b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Xyz /DW 500 /FontDescriptor 13 0 R"
    b" /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> >>",
    b"<< /Type /FontDescriptor /FontName /Xyz /Flags 4 /FontBBox [0 -200 1000 800]"
    b" /ItalicAngle 0 /Ascent 800 /Descent -200 /CapHeight 700 /StemV 80 >>",
)


def test_a_form_shared_with_a_page_left_as_it_is_keeps_its_text_there():
    """A page left as it is (its own text cannot be read) that draws the same form as a page
    translated keeps the form's text: the translated page draws a copy without it."""
    src = raw_objects(
        CATALOG,
        b"<< /Type /Pages /Kids [3 0 R 7 0 R] /Count 2 >>",
        PAGE % (4, b"8 0 R"),
        stream(b"BT /F2 12 Tf 72 700 Td <%s> Tj ET /X Do" % (b"002B0048004800030046" * 10)),
        HELVETICA,
        FORM,
        PAGE % (9, b"10 0 R"),
        b"<< /Font << /F1 5 0 R /F2 11 0 R >> /XObject << /X 6 0 R >> >>",
        stream(b"BT /F1 12 Tf 72 700 Td (The own words of the page.) Tj ET /X Do"),
        SHARED,
        *UNREADABLE_FONT,
    )
    translate = Recorder()
    out = translate_pdf(src, translate, Limits())
    assert translate.sent == ["The own words of the page.", "The words inside a form."]
    first, second = texts(out)
    assert "The words inside a form." in first
    assert second == "<THE OWN WORDS OF THE PAGE.>\n<THE WORDS INSIDE A FORM.>"


def test_forms_that_draw_each_other_through_the_pages_resources_lose_their_text_once():
    """Forms X and Y list the resources of the page (one dictionary for the page and its
    forms), X draws Y, and their dictionaries are equal: each loses its text on the page
    translated (pypdf's own removal skipped Y, whose text stayed under its translation), and
    the page left as it is, sharing all of it, keeps theirs."""
    form = b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources 8 0 R "
    src = raw_objects(
        CATALOG,
        b"<< /Type /Pages /Kids [3 0 R 7 0 R] /Count 2 >>",
        PAGE % (4, b"8 0 R"),
        stream(b"BT /F2 12 Tf 72 700 Td <%s> Tj ET /X Do" % (b"002B0048004800030046" * 10)),
        HELVETICA,
        stream(b"BT /F1 12 Tf 72 600 Td (Words of form X.) Tj ET /Y Do", form),
        PAGE % (9, b"8 0 R"),
        b"<< /Font << /F1 5 0 R /F2 11 0 R >> /XObject << /X 6 0 R /Y 10 0 R >> >>",
        stream(b"BT /F1 12 Tf 72 700 Td (The own words of page two.) Tj ET /X Do"),
        stream(b"BT /F1 12 Tf 72 500 Td (Words of form Y.) Tj ET", form),
        *UNREADABLE_FONT,
    )
    translate = Recorder()
    first, second = texts(translate_pdf(src, translate, Limits()))
    assert translate.sent == ["The own words of page two.", "Words of form X.", "Words of form Y."]
    assert "Words of form X." in first and "Words of form Y." in first
    assert second == "<THE OWN WORDS OF PAGE TWO.>\n<WORDS OF FORM X.>\n<WORDS OF FORM Y.>"


def test_pages_are_paired_by_object_not_by_position():
    """A page pdfminer does not list (no /Type) is left as it is, and the pages after it keep
    their own text; a page listed twice is rewritten once (not drawn over twice)."""
    first = b"<< /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources 8 0 R >>"
    src = raw_objects(
        CATALOG,
        b"<< /Type /Pages /Kids [3 0 R 6 0 R 6 0 R] /Count 3 >>",
        first,
        stream(b"BT /F1 12 Tf 72 700 Td (The first page.) Tj ET"),
        HELVETICA,
        PAGE % (7, b"8 0 R"),
        stream(b"BT /F1 12 Tf 72 700 Td (The second page.) Tj ET"),
        b"<< /Font << /F1 5 0 R >> >>",
    )
    out = translate_pdf(src, Recorder(), Limits())
    assert texts(out) == ["The first page.", "<THE SECOND PAGE.>", "<THE SECOND PAGE.>"]


def test_turned_and_invisible_glyphs_are_drawn_again_as_they_were():
    """A sideways label is not sent as loose letters but kept; a page's invisible OCR layer
    stays, invisible, under the translated visible text (a search still finds its words)."""
    content = (
        b"BT /F1 12 Tf 72 700 Td (The visible heading.) Tj ET"
        b" BT /F1 10 Tf 0 1 -1 0 300 400 Tm (Sideways label) Tj ET"
        b" BT 3 Tr /F1 10 Tf 72 300 Td (Hidden scanned words) Tj ET"
    )
    translate = Recorder()
    out = translate_pdf(raw_pdf(content, HELVETICA), translate, Limits())
    assert translate.sent == ["The visible heading."]
    words = "".join(texts(out)[0].split())  # each glyph drawn on its own
    assert "<THEVISIBLEHEADING.>" in words and "Hiddenscannedwords" in words
    page = next(iter(extract_pages(io.BytesIO(out))))
    turned = sorted((c for c in _all_chars(page) if not c.upright), key=lambda c: c.matrix[5])
    assert "".join(c.get_text() for c in turned) == "Sidewayslabel"  # upwards, as it ran
    assert round(turned[0].matrix[4]) == 300  # where it was
    data = PdfReader(io.BytesIO(out)).pages[0].get_contents().get_data()
    assert b"3 Tr" in data  # drawn invisible


def _all_chars(item):
    for child in item:
        if isinstance(child, LTChar):
            yield child
        elif hasattr(child, "__iter__"):
            yield from _all_chars(child)


@pytest.mark.parametrize(
    "content",
    [
        b"BT /F1 12 Tf 72 700 Td (Hello there) Tj ET ]",  # a stray token
        b"BT /F1 12 Tf 72 700 Td (Hello there) Tj ET (unterminated",
        b"BT /F1 12 Tf 72 700 Td (Hello there) Tj ET 1 0 R Tj",
        b"BT /F1 12 Tf 72 700 Td (Hello there) Tj ET " + b"[" * 5000,
    ],
)
def test_content_that_cannot_be_rewritten_is_a_400_before_it_is_translated(content):
    translate = Recorder()
    with pytest.raises(FormatError) as caught:
        translate_pdf(raw_pdf(content, HELVETICA), translate, Limits())
    assert caught.value.status == 400 and "cannot be" in str(caught.value)
    assert translate.sent == []


def test_a_page_dictionary_where_a_reference_belongs_is_a_400():
    inline = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>"
    src = raw_objects(
        CATALOG,
        b"<< /Type /Pages /Kids [" + inline + b"] /Count 1 >>",
        b"null",
        stream(b"BT /F1 12 Tf 72 700 Td (Hello there) Tj ET"),
    )
    with pytest.raises(FormatError) as caught:
        translate_pdf(src, Recorder(), Limits())
    assert caught.value.status == 400


def test_what_a_file_makes_pdfminer_do_is_bounded(monkeypatch):
    """Each a 413: content parsed again and again through a form; graphics states saved
    without end; a page of a million spaces; a content stream marked as an image (pdfminer
    decodes a page's contents whatever its /Subtype)."""
    fanned = raw_objects(
        CATALOG,
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        PAGE % (4, SHARED),
        stream(b"/X Do " * 200),
        HELVETICA,
        stream(
            b" " * 100_000 + b"BT /F1 12 Tf 72 600 Td (Hi) Tj ET",
            b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 5 0 R"
            b" >> >> ",
        ),
    )
    cases = [
        (fanned, Limits(max_chars=100_000), "draw more than 5000000 bytes of content"),
        (raw_pdf(b"q " * 10_000, HELVETICA), Limits(), "saves more than 256 graphics states"),
        (
            raw_pdf(b"BT /F1 1 Tf 72 700 Td (" + b" " * 60_000 + b") Tj ET", HELVETICA),
            Limits(),
            "a page of the PDF file holds more than 50000 characters",
        ),
        (
            raw_objects(
                CATALOG,
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                PAGE % (4, b"<< /Font << /F1 5 0 R >> >>"),
                stream(
                    b" " * 3_000_000 + b"BT /F1 12 Tf 72 700 Td (Hi) Tj ET", b"/Subtype /Image "
                ),
                HELVETICA,
            ),
            Limits(max_unpacked_bytes=1_000_000),
            "decode to more than 1000000 bytes",
        ),
    ]
    for data, limits, message in cases:
        with pytest.raises(FormatError) as caught:
            translate_pdf(data, Recorder(), limits)
        assert caught.value.status == 413 and message in str(caught.value), caught.value
    monkeypatch.setattr("app.formats.pdf_read.MAX_FIGURES", 50)
    with pytest.raises(FormatError) as caught:
        translate_pdf(fanned, Recorder(), Limits())
    assert caught.value.status == 413 and "draws more than 50 forms" in str(caught.value)


def test_a_line_runs_on_to_the_visible_edge_at_most():
    """The room to a line's right ends at the crop box's margin, not the media box's."""
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /CropBox [0 0 250 792]"
    src = raw_objects(
        CATALOG,
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        page + b" /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        stream(b"BT /F1 12 Tf 72 700 Td (A short line) Tj ET"),
        HELVETICA,
    )
    out = translate_pdf(src, Recorder(lambda t: t + " and a good many more words"), Limits())
    assert max(b[2] for _, b, _ in boxes(out)[0]) <= 250 - 72 + 1


def test_the_text_sent_is_counted_as_the_other_formats_count_it():
    """The file's characters for the key's quota: each paragraph's text, a run of spaces as
    one (as an office file's), not the glyphs alone."""
    with text_budget(10_000) as budget:
        translate_pdf(make_pdf(page_one), Recorder(), Limits())
    assert budget.used == sum(len(t) for t in PAGE_ONE_SENT)


def test_a_landscape_page_keeps_its_translation_where_it_lies_beyond_a4():
    """What pypdf merges onto a page is clipped to the merged page's box: the drawing's box is
    the page's own (a translation at x=650 on a landscape page was clipped away)."""
    src = make_pdf(lambda c: c.drawString(650, 500, "Far to the right."), size=(842, 595))
    out = translate_pdf(src, Recorder(), Limits())
    content = PdfReader(io.BytesIO(out)).pages[0].get_contents().get_data()
    clips = re.findall(rb"([-\d.]+) ([-\d.]+) ([-\d.]+) ([-\d.]+) re\s+W\s+n", content)
    assert clips and all(float(w) >= 842 and float(h) >= 595 for _, _, w, h in clips)


def test_a_spot_colour_is_drawn_black_not_as_its_tint_in_grey():
    """A Separation colour's one component is a tint (1: full ink), not a grey level (1:
    white): the translation was drawn white on white."""
    content = b"/CS0 cs 1 scn BT /F1 12 Tf 72 700 Td (Spot coloured words.) Tj ET"
    src = raw_objects(
        CATALOG,
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        PAGE % (4, b"<< /Font << /F1 5 0 R >> /ColorSpace << /CS0 6 0 R >> >>"),
        stream(content),
        HELVETICA,
        b"[/Separation /Spot /DeviceCMYK << /FunctionType 2 /Domain [0 1] /C0 [0 0 0 0]"
        b" /C1 [0 1 0 0] /N 1 >>]",
    )
    out = translate_pdf(src, Recorder(), Limits())
    chars = [
        c
        for page in extract_pages(io.BytesIO(out))
        for c in _all_chars(page)
        if c.get_text().strip()
    ]
    assert chars and {tuple(c.graphicstate.ncolor) for c in chars} == {(0, 0, 0)}


def test_a_file_that_needs_too_much_memory_or_time_is_a_413(monkeypatch):
    """pdfminer builds a character map of every code a range names: four billion from a file
    of a kilobyte. The work runs in a process of its own, bounded in memory and time."""
    to_unicode = stream(
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n"
        b"1 beginbfrange\n<00000000> <FFFFFFFF> <0041>\nendbfrange\nendcmap end end"
    )
    src = raw_pdf(
        b"BT /F1 12 Tf 72 700 Td (Hello there) Tj ET",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 6 0 R >>",
        to_unicode,
    )
    monkeypatch.setattr("app.formats.pdf.WORKER_MEMORY", 1 << 30)
    with pytest.raises(FormatError) as caught:
        translate_pdf(src, Recorder(), Limits())
    assert caught.value.status == 413 and "memory" in str(caught.value)
    monkeypatch.setattr("app.formats.pdf_read.MAX_SECONDS", 0.2)
    with pytest.raises(FormatError) as caught:
        translate_pdf(make_pdf(*[page_one] * 40), Recorder(), Limits())
    assert caught.value.status == 413 and "takes more than 0 s" in str(caught.value)


@pytest.mark.parametrize(
    "line, expected",
    [
        ("\uf0b7 The first item.", "• The first item."),  # Word's Symbol bullet
        ("\uf0a7\tThe second item.", "•\tThe second item."),  # its Wingdings square
        ("(cid:127) The third item.", "• The third item."),  # a glyph with no Unicode
        ("The fi(cid:31)nal word.", "The final word."),
    ],
)
def test_a_symbol_fonts_bullet_starts_a_list_item_drawn_as_a_bullet(line, expected):
    """A Symbol font's bullet (a private-use character DejaVu has no glyph for: it vanished)
    or an unreadable glyph at a line's start is a bullet: a list item's marker, drawn as •."""
    from app.formats.pdf_read import BULLET, line_text

    text = line_text(line)
    assert text == expected
    if text.startswith("•"):
        assert BULLET.match(text)


def test_text_a_box_or_a_picture_covers_is_neither_sent_nor_drawn():
    """A redaction's black box or a white box over words taken back hides them: they must not
    come back visible (or at all) in the translation. A box drawn first (a background), a
    see-through one (a highlight), a frame of two rectangles, a line struck through and a
    picture cropped away from the text hide nothing; a page whose text a picture covers entirely (a scan over its OCR
    text) is left as it is."""

    def redacted(c: Canvas) -> None:
        c.setFont("Helvetica", 12)
        c.setFillColorRGB(0.9, 0.9, 0.6)
        c.rect(60, 640, 400, 30, fill=1, stroke=0)  # a background, drawn first
        c.setFillColorRGB(0, 0, 0)
        c.drawString(72, 650, "The public sentence.")
        c.drawString(72, 600, "The secret sentence.")
        c.drawString(72, 550, "The withdrawn sentence.")
        c.drawString(72, 500, "The highlighted sentence.")
        c.drawString(72, 450, "The framed sentence.")
        c.rect(60, 590, 300, 30, fill=1, stroke=0)  # black, over the secret
        c.setFillColorRGB(1, 1, 1)
        c.rect(60, 540, 300, 30, fill=1, stroke=0)  # white, over the withdrawn
        c.setFillColorRGB(1, 1, 0)
        c.setFillAlpha(0.4)
        c.rect(60, 490, 300, 30, fill=1, stroke=0)  # a see-through highlight
        c.setFillAlpha(1)
        frame = c.beginPath()
        frame.rect(60, 440, 300, 30)
        frame.rect(62, 442, 296, 26)
        c.drawPath(frame, fill=1, stroke=0, fillMode=0)  # a frame: its inside is empty
        c.setFillColorRGB(0, 0, 0)
        c.drawString(72, 400, "The struck sentence.")
        c.rect(72, 403, 100, 1, fill=1, stroke=0)  # a line through it

    translate = Recorder()
    out = translate_pdf(make_pdf(redacted), translate, Limits())
    assert translate.sent == [
        "The public sentence.",
        "The highlighted sentence.",
        "The framed sentence.",
        "The struck sentence.",
    ]
    text = texts(out)[0]
    assert "secret" not in text.lower() and "withdrawn" not in text.lower()
    assert "<THE PUBLIC SENTENCE.>" in text

    # a scan drawn over its own text (visible, not an invisible OCR layer): left as it is
    scan = b"BT /F1 12 Tf 72 700 Td (Words under the scan.) Tj ET"
    scan += b" q 500 0 0 700 50 50 cm BI /W 1 /H 1 /CS /G /BPC 8 ID \x80 EI Q"
    translate = Recorder()
    out = translate_pdf(raw_pdf(scan, HELVETICA), translate, Limits())
    assert translate.sent == []
    assert b"Words under the scan." in PdfReader(io.BytesIO(out)).pages[0].get_contents().get_data()
    # the same picture cropped (clipped) to a corner away from the text hides nothing
    cropped = scan.replace(b"q 500", b"q 50 50 100 100 re W n 500")
    translate = Recorder()
    translate_pdf(raw_pdf(cropped, HELVETICA), translate, Limits())
    assert translate.sent == ["Words under the scan."]


#: a page whose resources name two layers: /Shown (object 6, on) and /Off (object 7, off)
LAYERED_PAGE = PAGE % (
    4,
    b"<< /Font << /F1 5 0 R >> /Properties << /Shown 6 0 R /Off 7 0 R /Either 8 0 R >>"
    b" /XObject << /X 9 0 R >> >>",
)


def layered(
    content: bytes,
    default: bytes = b"/OFF [7 0 R]",
    either: bytes = b"<< /Type /OCMD /OCGs [6 0 R 7 0 R] /P /AllOn >>",  # on when both are
    *more: bytes,
) -> bytes:
    form = stream(
        b"BT /F1 12 Tf 72 300 Td (A form on the layer that is off.) Tj ET",
        b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /OC 7 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> ",
    )
    return raw_objects(
        b"<< /Type /Catalog /Pages 2 0 R /OCProperties << /OCGs [6 0 R 7 0 R] /D << %s >> >> >>"
        % default,
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        LAYERED_PAGE,
        stream(content),
        HELVETICA,
        b"<< /Type /OCG /Name (Shown) >>",
        b"<< /Type /OCG /Name (Off) >>",
        either,
        form,
        *more,
    )


def test_text_on_a_layer_that_is_off_is_neither_sent_nor_drawn():
    """Optional content (layers) a reader does not show by default: a draft's notes, another
    language's text, a print-only watermark. Its text stays out of the translation."""
    content = (
        b"/OC /Shown BDC BT /F1 12 Tf 72 700 Td (The words on the shown layer.) Tj ET EMC"
        b" /OC /Off BDC BT /F1 12 Tf 72 600 Td (The words on the layer that is off.) Tj ET"
        b" q 1 0 0 1 0 0 cm /Span BMC BT /F1 12 Tf 72 580 Td (Nested in it.) Tj ET EMC Q EMC"
        b" /OC /Either BDC BT /F1 12 Tf 72 500 Td (The words shown when both are.) Tj ET EMC"
        b" BT /F1 12 Tf 72 400 Td (The words on no layer.) Tj ET /X Do"
    )
    translate = Recorder()
    out = translate_pdf(layered(content), translate, Limits())
    assert translate.sent == ["The words on the shown layer.", "The words on no layer."]
    assert "layer that is off" not in texts(out)[0] and "Nested" not in texts(out)[0]

    # with every layer on (no /OFF), all of it is translated, the form's text too
    translate = Recorder()
    translate_pdf(layered(content, b"/ON [6 0 R 7 0 R]"), translate, Limits())
    assert len(translate.sent) == 6
    # a file whose layers are all off (/BaseState /OFF) and has no other text: left as it is
    only_layered = b"/OC /Shown BDC BT /F1 12 Tf 72 700 Td (Only on a layer.) Tj ET EMC"
    translate = Recorder()
    out = translate_pdf(layered(only_layered, b"/BaseState /OFF"), translate, Limits())
    assert translate.sent == []
    assert b"Only on a layer." in PdfReader(io.BytesIO(out)).pages[0].get_contents().get_data()


def test_what_hides_text_is_followed_within_bounds():
    """A visibility expression that names itself (4 ** 16 terms unfolded) is followed to a
    bound and taken as shown; a cover as large as a number can be, or not a number, costs no
    more than one as large as the page."""
    from app.formats.pdf_read import Covers

    content = b"/OC /Either BDC BT /F1 12 Tf 72 500 Td (The words under the riddle.) Tj ET EMC"
    src = layered(
        content,
        b"/OFF [7 0 R]",
        b"<< /Type /OCMD /VE 10 0 R >>",
        b"[/And 10 0 R 10 0 R 10 0 R 10 0 R]",
    )
    translate = Recorder()
    translate_pdf(src, translate, Limits())
    assert translate.sent == ["The words under the riddle."]

    covers = Covers((0, 0, 612, 792))
    covers.add(5, (-1e300, -1e300, 1e300, 1e300))
    covers.add(6, (float("nan"), 0, 10, 10))
    assert len(covers.whole) + len(covers.part) <= 25 * 25  # the page's squares, no more
    assert covers.hide(4, (300, 400, 306, 410)) and not covers.hide(5, (300, 400, 306, 410))
    assert not covers.hide(4, (float("nan"), 400, 306, 410))


def test_a_list_whose_bullets_are_drawn_as_shapes_is_translated_item_by_item():
    """A browser prints a list's bullets as small discs, squares or rings (paths, not glyphs):
    each item is a paragraph of its own, and the bullets stay where they were."""

    def listed(c: Canvas) -> None:
        c.setFont("Helvetica", 12)
        c.drawString(72, 720, "Our plans are simple.")
        items = ["We visit the museum.", "We eat at a restaurant.", "We walk in the park."]
        for n, item in enumerate(items):
            y = 700 - 15 * n
            if n == 0:
                c.circle(66, y + 4, 2, stroke=0, fill=1)  # a disc
            elif n == 1:
                c.rect(64, y + 2, 4, 4, stroke=0, fill=1)  # a square
            else:
                c.circle(66, y + 4, 2, stroke=1, fill=0)  # a ring
            c.drawString(76, y, item)
        c.rect(72, 600, 300, 1, stroke=0, fill=1)  # a rule: no bullet
        c.drawString(72, 590, "A sentence that runs on")
        c.drawString(72, 575, "to a second line.")

    translate = Recorder()
    out = translate_pdf(make_pdf(listed), translate, Limits())
    assert translate.sent == [
        "Our plans are simple.",
        "We visit the museum.",
        "We eat at a restaurant.",
        "We walk in the park.",
        "A sentence that runs on to a second line.",
    ]
    page = next(iter(extract_pages(io.BytesIO(out))))
    shapes = [o for o in page if not isinstance(o, LTTextBoxHorizontal)]
    assert len([o for o in shapes if o.width < 8]) == 3  # the bullets, kept


def test_the_cells_of_a_table_are_translated_and_drawn_each_within_its_borders():
    """Cells close together are one line to pdfminer ("Fresh apples Five euros"): the table's
    borders cut it into cells and its rows apart, and each translation stays inside its cell."""

    def table(c: Canvas) -> None:
        c.setFont("Helvetica", 12)
        c.setLineWidth(0.75)
        c.grid([72, 147, 250], [705, 690, 675])  # two rows of two cells, stroked lines
        c.drawString(75, 694, "Fresh apples")  # ends at 144.4
        c.drawString(150, 694, "Five euros")
        c.drawString(75, 679, "Green pears")  # the cell beside it empty
        c.drawString(72, 640, "A sentence under the table.")

    src = make_pdf(table)
    assert [t for t, _, _ in boxes(src)[0]][0] == "Fresh apples Five euros"
    translate = Recorder()
    out = translate_pdf(src, translate, Limits())
    assert sorted(translate.sent) == sorted(
        ["Fresh apples", "Five euros", "Green pears", "A sentence under the table."]
    )
    lines = [(t, bbox) for t, bbox, _ in boxes(out)[0]]
    for cell in ("<FRESH APPLES>", "<GREEN PEARS>"):
        bbox = next(b for t, b in lines if t.startswith(cell))
        assert bbox[2] <= 147, (cell, bbox)  # left of the border, drawn smaller
    assert next(b for t, b in lines if t.startswith("<FRESH"))[1] >= 690 - 0.5  # above the rule


def read(data: bytes) -> list[list[str]]:
    """The paragraphs pdfminer's reading finds on each page (in this process: no worker)."""
    from app.formats.pdf_read import read_pages

    return [[p.text for p in page.paragraphs] for page in read_pages(data, 10**9, 10**7)]


def one_page(content: bytes, resources: bytes = b"", *more: bytes) -> bytes:
    """A page drawing `content` with the font /F1 and `resources`; `more` objects from 6."""
    return raw_objects(
        CATALOG,
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        PAGE % (4, b"<< /Font << /F1 5 0 R >> %s >>" % resources),
        stream(content),
        HELVETICA,
        *more,
    )


WORDS = b"BT /F1 24 Tf 72 700 Td (Visible words here.) Tj ET "
WHITE_PAGE = b"1 g 0 0 612 792 re f"
GROUP = b"/Type /XObject /Subtype /Form /BBox [%s] /Group << /S /Transparency >> "


@pytest.mark.parametrize(
    "content, resources, more",
    [
        # a faint veil: a transparency group drawn with /ca 0.15 (Chromium's CSS opacity), a
        # white page inside it at /ca 1
        (
            WORDS + b"q /Faint gs /G Do Q",
            b"/ExtGState << /Faint << /ca 0.15 >> >> /XObject << /G 6 0 R >>",
            [
                stream(b"/Full gs " + WHITE_PAGE, GROUP % b"0 0 612 792" + b"/Resources 7 0 R "),
                b"<< /ExtGState << /Full << /ca 1 >> >> >>",
            ],
        ),
        # a soft mask stays in force after a state that only sets /ca 1
        (
            WORDS + b"q /Masked gs /Full gs " + WHITE_PAGE + b" Q",
            b"/ExtGState << /Masked << /SMask << /S /Luminosity /G 6 0 R >> >> /Full 7 0 R >>",
            [stream(b"0 g " + WHITE_PAGE, GROUP % b"0 0 612 792"), b"<< /ca 1 >>"],
        ),
        # a form clipped to its box (a 40-point logo) whose white ground is larger
        (
            WORDS + b"/G Do",
            b"/XObject << /G 6 0 R >>",
            [stream(WHITE_PAGE, b"/Type /XObject /Subtype /Form /BBox [0 0 40 40] ")],
        ),
        # text that clips (render mode 5), then a colour painted through its glyphs
        (
            b"q BT /F1 24 Tf 5 Tr 72 700 Td (Visible words here.) Tj ET 0 0 1 rg "
            b"0 0 612 792 re f Q",
            b"",
            [],
        ),
        # a picture turned 45 degrees: the text lies in its bounding box's empty corner
        (WORDS + b"q 150 150 -150 150 380 500 cm BI /W 1 /H 1 /CS /G /BPC 8 ID \x80 EI Q", b"", []),
    ],
    ids=["group-opacity", "soft-mask", "form-box", "text-clip", "turned-picture"],
)
def test_text_a_reader_shows_is_not_taken_for_hidden(content, resources, more):
    assert read(one_page(content, resources, *more)) == [["Visible words here."]]


def test_a_redaction_drawn_after_many_small_shapes_still_hides():
    """A chart's many small bars fill the list of covers near them; the redaction box drawn
    last still counts (the latest are kept)."""

    def page(c: Canvas) -> None:
        c.setFont("Helvetica", 10)
        c.drawString(100, 760, "A chart of sales.")
        c.drawString(97, 720, "Secret")
        c.setFillColorRGB(0.8, 0.8, 0.9)
        for i in range(100):
            c.rect(97 + (i % 10) * 4.2, 736 + (i // 10) * 3.1, 3.5, 2.5, stroke=0, fill=1)
        c.setFillColorRGB(0, 0, 0)
        c.rect(95, 716, 40, 14, stroke=0, fill=1)

    assert read(make_pdf(page)) == [["A chart of sales."]]


def test_lines_and_marks_that_are_no_table_or_list_leave_a_paragraph_whole():
    """An underline under the descenders (TeX's \\underline), a word in a bordered box (a
    key, `<kbd>`), a dotted border down a quote's side and a title running on over a
    spreadsheet's grid neither cut nor part a paragraph."""

    def page(c: Canvas) -> None:
        c.setFont("Helvetica", 10)
        c.drawString(72, 760, "The rules for typing are simple and they apply to")
        start, wide = c.stringWidth("The rules for ", "Helvetica", 10), c.stringWidth("typing")
        c.rect(72 + start, 760 - 3.54, wide, 0.4, stroke=0, fill=1)  # \underline{typing}
        c.drawString(72, 748, "every document that you write in the office.")
        # a key in a box, inside a sentence
        c.drawString(72, 700, "To copy it, press")
        at = 72 + c.stringWidth("To copy it, press ")
        c.rect(at - 1.5, 697, c.stringWidth("Ctrl") + 3, 12, stroke=1, fill=0)
        c.drawString(at, 700, "Ctrl")
        c.drawString(at + c.stringWidth("Ctrl "), 700, "and C together, then move")
        c.drawString(72, 688, "to the place where it should go.")
        # a quote with a dotted border on its left
        for n in range(12):
            c.circle(66, 650 - 3 * n, 0.75, stroke=0, fill=1)
        c.drawString(72, 645, "A quote with a dotted border on its left")
        c.drawString(72, 633, "side, long enough to wrap onto two lines.")
        # a title over a spreadsheet's grid
        c.grid([72, 110, 150, 190, 230, 270], [560, 575, 590])
        c.drawString(74, 579, "Quarterly sales report for the northern region")

    assert read(make_pdf(page)) == [
        [
            "The rules for typing are simple and they apply to every document that you write "
            "in the office.",
            "To copy it, press Ctrl and C together, then move to the place where it should go.",
            "A quote with a dotted border on its left side, long enough to wrap onto two lines.",
            "Quarterly sales report for the northern region",
        ]
    ]


def test_a_cells_next_line_stays_in_its_cell():
    """The second line of a cell (aligned right, as numbers are) crosses no border: it
    belongs to the cell it lies in, not to the one whose line came before it."""

    def page(c: Canvas) -> None:
        c.setFont("Helvetica", 12)
        c.grid([72, 145, 217, 330], [705, 658])
        c.drawString(75, 694, "Fresh apples")
        c.drawRightString(215, 694, "From the old")
        c.drawRightString(215, 680, "orchard hill")
        c.drawString(260, 694, "Five euros")

    assert read(make_pdf(page)) == [["Fresh apples", "From the old orchard hill", "Five euros"]]


@pytest.mark.parametrize(
    "line, drawn",
    [
        ("הנחה של 10% על הכול", "לוכה לע 10% לש החנה"),  # a number with its percent sign
        ("בין 10 - 20 אנשים", "םישנא 20 - 10 ןיב"),  # a range, read from the right
        ("התקינו Windows (64-bit) עכשיו", "וישכע Windows (64-bit) וניקתה"),  # paired brackets
        ("הפרקים 1, 2, 3 נקראו", "וארקנ 3 ,2 ,1 םיקרפה"),
        ("ביקרתי ב-New York בשנה שעברה.", ".הרבעש הנשב New York-ב יתרקיב"),
    ],
)
def test_a_right_to_left_line_is_drawn_in_the_order_unicode_bidi_gives(line, drawn):
    """The drawing order GNU FriBidi gives each line (a right-to-left paragraph)."""
    from app.formats.pdf_draw import visual

    assert visual(line) == drawn


def test_into_hebrew_a_number_or_price_that_was_not_translated_is_drawn_as_it_was():
    def prices(c: Canvas) -> None:
        c.setFont("Helvetica", 12)
        c.drawString(72, 700, "The price is low.")
        c.drawString(72, 650, "25%")
        c.drawString(72, 600, "$5.00")

    out = translate_pdf(make_pdf(prices), Recorder(lambda t: "המחיר נמוך."), Limits(), "he")
    assert [t for t, _, _ in boxes(out)[0]][1:] == ["25%", "$5.00"]


def test_a_language_whose_letters_the_font_lacks_is_refused_before_it_is_translated():
    """Urdu is written in the Arabic script, but DejaVu Sans has no ہ: boxes in its place."""
    translate = Recorder()
    with pytest.raises(FormatError) as caught:
        translate_pdf(make_pdf(page_one), translate, Limits(), "ur")
    assert caught.value.status == 400 and "ہ" in str(caught.value)
    assert translate.sent == []


def test_text_that_clips_keeps_clipping_once_its_text_is_taken_away():
    """Text drawn as a clip (render mode 4 to 7), then a colour painted through it: without
    its glyphs the clip would be empty and the colour would cover the page."""
    content = (
        b"q BT /F1 48 Tf 4 Tr 72 600 Td (SALE) Tj ET 1 0 0 rg 0 0 612 792 re f Q "
        b"BT /F1 12 Tf 72 400 Td (Ordinary words below.) Tj ET"
    )
    out = translate_pdf(raw_pdf(content, HELVETICA), Recorder(), Limits())
    data = PdfReader(io.BytesIO(out)).pages[0].get_contents().get_data()
    assert re.search(rb"7 Tr\s*\(SALE\) Tj\s*4 Tr", data)  # still the clip, not painted
    assert b"(Ordinary words below.)" not in data


def test_a_content_stream_two_pages_share_is_rewritten_for_the_translated_one_only():
    shared = stream(b"BT /F1 12 Tf 72 700 Td (Hello there my good friend.) Tj ET")
    src = raw_objects(
        CATALOG,
        b"<< /Type /Pages /Kids [3 0 R 6 0 R] /Count 2 >>",
        PAGE % (4, b"<< /Font << /F1 5 0 R >> >>"),
        shared,
        HELVETICA,
        PAGE % (4, b"<< /Font << /F1 5 0 R >> >>"),
    )
    assert texts(translate_pdf(src, Recorder(), Limits())) == [
        "<HELLO THERE MY GOOD FRIEND.>",
        "<HELLO THERE MY GOOD FRIEND.>",
    ]


URL = "https://example.com/downloads/manuals/translation-service/version-2/complete-guide.pdf"


@pytest.mark.parametrize("language", ["de", "zh"])
def test_a_word_longer_than_its_line_is_cut_to_fit_not_run_past_the_edge(language):
    """A URL or a long compound longer than the paragraph's room is cut into pieces that fit
    (after its slashes where it has them), every character drawn, none past the room."""

    def narrow(c: Canvas) -> None:
        c.setFont("Helvetica", 11)
        c.drawString(72, 700, "Read the guide at the address")
        c.drawString(72, 686, "below, please.")
        c.drawString(300, 700, "A second column.")

    translate = Recorder(lambda t: f"Siehe {URL} bitte." if "guide" in t else t)
    out = translate_pdf(make_pdf(narrow), translate, Limits(), language)
    drawn = [(t, bbox) for t, bbox in ((t, b) for t, b, _ in boxes(out)[0]) if bbox[0] < 290]
    assert "".join(t.replace(" ", "") for t, _ in drawn) == f"Siehe{URL}bitte."
    assert len(drawn) > 3 and max(b[2] for _, b in drawn) <= 300
    # the cuts follow the address's slashes or hyphens
    assert all(t[-1] in "/-" for t, _ in drawn[1:-2])


def test_an_italic_translation_in_letters_the_italic_face_lacks_is_drawn_upright(monkeypatch):
    """Where DejaVu has no italic (fonts-dejavu-core alone), italic text was drawn in Bitstream
    Vera's, which has no Greek or Cyrillic: a translation into them came out as boxes. Such a
    translation is drawn in the family's upright face; one the italic face has stays italic."""
    import reportlab

    from app.formats import pdf_draw

    vera = pdf_draw.Path(reportlab.__file__).parent / "fonts"
    real = pdf_draw.font

    def without_dejavu_italics(family: str, bold: bool, italic: bool) -> str:
        if not italic:
            return real(family, bold, italic)
        from reportlab.pdfbase import pdfmetrics
        from reportlab.pdfbase.ttfonts import TTFont

        if "mt-test-VeraIt" not in pdfmetrics.getRegisteredFontNames():
            pdfmetrics.registerFont(TTFont("mt-test-VeraIt", str(vera / "VeraIt.ttf")))
        return "mt-test-VeraIt"

    monkeypatch.setattr(pdf_draw, "font", without_dejavu_italics)
    greek, latin = "Ο καιρός είναι καλός σήμερα.", "Das Wetter ist heute schön."
    assert not pdf_draw.has_glyphs(without_dejavu_italics("sans", False, True), greek)
    upright = pdf_draw.face_for(greek, "Helvetica-Oblique", False, True)
    assert upright == real("sans", False, False) and pdf_draw.has_glyphs(upright, greek)
    assert pdf_draw.face_for(latin, "Helvetica-Oblique", False, True) == "mt-test-VeraIt"
