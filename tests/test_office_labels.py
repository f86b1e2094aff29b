"""Office text outside paragraphs (app/formats/office_labels.py): alternative text, document
properties, legacy comments and chart names are translated; authors, keywords, file names and
numbers are not."""

from __future__ import annotations

import io
import struct
import zlib

import docx
import pptx
from lxml import etree
from odf.dc import Creator, Description, Subject, Title
from odf.meta import Keyword
from odf.opendocument import OpenDocumentText
from odf.text import P

from app.formats.office import translate_office
from tests.test_file_formats import LIMITS, entries, make_docx, make_pptx, upper, zip_of


def png() -> bytes:
    """A 1x1 white PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\xff\xff")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def test_alternative_text_of_pictures_and_shapes_is_translated():
    """Screen readers read it: it was copied untranslated (.docx `wp:docPr`, `pic:cNvPr`;
    .pptx `p:cNvPr`). A description that is only the image's file name stays."""
    d = docx.Document()
    d.add_paragraph("A photo follows.")
    d.add_picture(io.BytesIO(png()))
    buf = io.BytesIO()
    d.save(buf)
    parts = entries(buf.getvalue())
    body = parts["word/document.xml"].decode()
    assert body.count("<wp:docPr ") == 1 and body.count("<pic:cNvPr ") == 1
    body = body.replace("<wp:docPr ", '<wp:docPr descr="A red house by a lake" title="House" ')
    body = body.replace("<pic:cNvPr ", '<pic:cNvPr descr="A red house by a lake" ')
    parts["word/document.xml"] = body.encode()
    out = entries(translate_office(zip_of(parts), upper, LIMITS, "docx"))["word/document.xml"]
    assert out.count(b'descr="A RED HOUSE BY A LAKE"') == 2 and b'title="HOUSE"' in out
    assert b'name="Picture ' in out  # a shape's name is no text a reader is shown

    prs = pptx.Presentation(io.BytesIO(make_pptx()))
    slide = prs.slides[0]
    pic = slide.shapes.add_picture(io.BytesIO(png()), 0, 0)
    named = slide.shapes.add_picture(io.BytesIO(png()), 0, 0)
    pic._element.nvPicPr.cNvPr.set("descr", "Sales by region")
    pic._element.nvPicPr.cNvPr.set("title", "Chart picture")
    named._element.nvPicPr.cNvPr.set("descr", "photo_2023.JPG")
    buf = io.BytesIO()
    prs.save(buf)
    out = entries(translate_office(buf.getvalue(), upper, LIMITS, "pptx"))
    slide_xml = out["ppt/slides/slide1.xml"]
    assert b'descr="SALES BY REGION"' in slide_xml and b'title="CHART PICTURE"' in slide_xml
    assert b'descr="photo_2023.JPG"' in slide_xml


def test_alternative_text_of_a_picture_in_a_tracked_deletion_is_not_translated():
    parts = entries(make_docx())
    body = parts["word/document.xml"].decode()
    drawing = (
        '<w:r><w:drawing><wp:inline xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/'
        'wordprocessingDrawing"><wp:docPr id="9" name="Picture 9" descr="{}"/></wp:inline>'
        "</w:drawing></w:r>"
    )
    deleted = '<w:del w:id="1" w:author="Tom">' + drawing.format("An old logo") + "</w:del>"
    body = body.replace(
        "<w:r><w:t>Before a tab",
        drawing.format("A new logo") + deleted + "<w:r><w:t>Before a tab",
        1,
    )
    assert "An old logo" in body
    parts["word/document.xml"] = body.encode()
    out = entries(translate_office(zip_of(parts), upper, LIMITS, "docx"))["word/document.xml"]
    assert b'descr="A NEW LOGO"' in out and b'descr="An old logo"' in out


def test_document_title_subject_and_description_are_translated_not_keywords_or_author():
    """A viewer shows the title in its window or tab: it stayed in the source language."""
    d = docx.Document(io.BytesIO(make_docx()))
    props = d.core_properties
    props.title, props.subject, props.comments = "Annual report", "Sales", "Figures for 2024"
    props.keywords, props.author, props.category = "sales, report", "Tom Smith", "Finance"
    buf = io.BytesIO()
    d.save(buf)
    out = translate_office(buf.getvalue(), upper, LIMITS, "docx")
    got = docx.Document(io.BytesIO(out)).core_properties
    assert (got.title, got.subject, got.comments) == ("ANNUAL REPORT", "SALES", "FIGURES FOR 2024")
    assert (got.keywords, got.author, got.category) == ("sales, report", "Tom Smith", "Finance")

    prs = pptx.Presentation(io.BytesIO(make_pptx()))
    prs.core_properties.title, prs.core_properties.author = "Quarterly review", "Ann Lee"
    buf = io.BytesIO()
    prs.save(buf)
    out = translate_office(buf.getvalue(), upper, LIMITS, "pptx")
    got = pptx.Presentation(io.BytesIO(out)).core_properties
    assert (got.title, got.author) == ("QUARTERLY REVIEW", "Ann Lee")

    doc = OpenDocumentText()
    doc.meta.addElement(Title(text="Meeting notes"))
    doc.meta.addElement(Subject(text="Planning"))
    doc.meta.addElement(Description(text="Notes of the weekly meeting"))
    doc.meta.addElement(Keyword(text="planning"))
    doc.meta.addElement(Creator(text="Tom Smith"))
    doc.text.addElement(P(text="Hello world."))
    buf = io.BytesIO()
    doc.save(buf)
    meta = entries(translate_office(buf.getvalue(), upper, LIMITS, "odt"))["meta.xml"].decode()
    for text in ("MEETING NOTES", "PLANNING", "NOTES OF THE WEEKLY MEETING"):
        assert f">{text}</dc:" in meta
    assert "<meta:keyword>planning</meta:keyword>" in meta and ">Tom Smith</dc:creator>" in meta


PML = "http://schemas.openxmlformats.org/presentationml/2006/main"
P188 = "http://schemas.microsoft.com/office/powerpoint/2018/8/main"
DML = "http://schemas.openxmlformats.org/drawingml/2006/main"


def test_comments_are_translated_never_their_authors():
    """.pptx comments, legacy (`p:text`) and modern (DrawingML paragraphs, replies too), were
    copied untranslated, though a .docx's are translated; no author's name is sent."""
    parts = entries(make_pptx())
    parts["ppt/commentAuthors.xml"] = (
        f'<p:cmAuthorLst xmlns:p="{PML}"><p:cmAuthor id="0" name="Tom Smith" initials="TS" '
        'lastIdx="1" clrIdx="0"/></p:cmAuthorLst>'
    ).encode()
    parts["ppt/comments/comment1.xml"] = (
        f'<p:cmLst xmlns:p="{PML}"><p:cm authorId="0" dt="2024-01-01T10:00:00.000" idx="1">'
        '<p:pos x="10" y="10"/><p:text>Check this number</p:text></p:cm></p:cmLst>'
    ).encode()
    body = '<p188:txBody><a:bodyPr/><a:p><a:r><a:rPr lang="en-US"/><a:t>{}</a:t></a:r></a:p>'
    parts["ppt/authors.xml"] = (
        f'<p188:authorLst xmlns:p188="{P188}"><p188:author id="{{1}}" name="Ann Lee" '
        'initials="AL" userId="Ann Lee" providerId="None"/></p188:authorLst>'
    ).encode()
    parts["ppt/comments/modernComment_100_1.xml"] = (
        f'<p188:cmLst xmlns:p188="{P188}" xmlns:a="{DML}"><p188:cm id="{{2}}" authorId="{{1}}">'
        + body.format("Is this right?")
        + '</p188:txBody><p188:replyLst><p188:reply id="{3}" authorId="{1}">'
        + body.format("Yes, it is.")
        + "</p188:txBody></p188:reply></p188:replyLst></p188:cm></p188:cmLst>"
    ).encode()
    sent: list[str] = []
    out = entries(
        translate_office(zip_of(parts), lambda ts: sent.extend(ts) or upper(ts), LIMITS, "pptx")
    )
    assert b"<p:text>CHECK THIS NUMBER</p:text>" in out["ppt/comments/comment1.xml"]
    modern = out["ppt/comments/modernComment_100_1.xml"]
    assert b"<a:t>IS THIS RIGHT?</a:t>" in modern and b"<a:t>YES, IT IS.</a:t>" in modern
    assert out["ppt/commentAuthors.xml"] == parts["ppt/commentAuthors.xml"]
    assert out["ppt/authors.xml"] == parts["ppt/authors.xml"]
    assert not [t for t in sent if "Tom" in t or "Ann" in t]

    d = docx.Document(io.BytesIO(make_docx()))
    d.add_comment(
        [d.paragraphs[0].runs[0]], text="Which weather?", author="Tom Smith", initials="TS"
    )
    buf = io.BytesIO()
    d.save(buf)
    sent.clear()
    out = translate_office(buf.getvalue(), lambda ts: sent.extend(ts) or upper(ts), LIMITS)
    comment = docx.Document(io.BytesIO(out)).comments
    assert [(c.text, c.author, c.initials) for c in comment] == [
        ("WHICH WEATHER?", "Tom Smith", "TS")
    ]
    assert not [t for t in sent if "Tom" in t]


def make_chart_pptx() -> bytes:
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE

    prs = pptx.Presentation(io.BytesIO(make_pptx()))
    data = CategoryChartData()
    data.categories = ["North", "South", "2024"]
    data.add_series("Revenue", (1.5, 2.5, 3.5))
    data.add_series("2023", (1.0, 2.0, 3.0))
    chart = (
        prs.slides[0].shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, 0, 0, 100, 100, data).chart
    )
    chart.has_title = True
    chart.chart_title.text_frame.text = "Sales by region"
    chart.value_axis.has_title = True
    chart.value_axis.axis_title.text_frame.text = "Millions of euros"
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def test_chart_titles_and_series_and_category_names_are_translated():
    """They were copied untranslated (.pptx, .docx). A name that is a number stays, and so
    does every number; the embedded workbook is left as it is."""
    src = make_chart_pptx()
    out = translate_office(src, upper, LIMITS, "pptx")
    chart = pptx.Presentation(io.BytesIO(out)).slides[0].shapes[-1].chart
    assert chart.chart_title.text_frame.text == "SALES BY REGION"
    assert chart.value_axis.axis_title.text_frame.text == "MILLIONS OF EUROS"
    assert list(chart.plots[0].categories) == ["NORTH", "SOUTH", "2024"]
    assert [s.name for s in chart.plots[0].series] == ["REVENUE", "2023"]
    assert list(chart.plots[0].series[0].values) == [1.5, 2.5, 3.5]
    a, b = entries(src), entries(out)
    assert "ppt/charts/chart1.xml" in {n for n in a if a[n] != b[n]}
    assert (
        a["ppt/embeddings/Microsoft_Excel_Sheet1.xlsx"]
        == b["ppt/embeddings/Microsoft_Excel_Sheet1.xlsx"]
    )
    # a series name written as literal text, and the same chart in a Word document
    xml = a["ppt/charts/chart1.xml"].replace(
        b'<c:tx><c:strRef><c:f>Sheet1!$B$1</c:f><c:strCache><c:ptCount val="1"/><c:pt idx="0">'
        b"<c:v>Revenue</c:v></c:pt></c:strCache></c:strRef></c:tx>",
        b"<c:tx><c:v>Revenue</c:v></c:tx>",
    )
    assert b"<c:tx><c:v>Revenue</c:v></c:tx>" in xml
    parts = entries(make_docx())
    parts["word/charts/chart1.xml"] = xml
    got = entries(translate_office(zip_of(parts), upper, LIMITS, "docx"))["word/charts/chart1.xml"]
    for text in (b"SALES BY REGION", b"MILLIONS OF EUROS", b"NORTH", b"<c:v>2024</c:v>"):
        assert text in got
    assert b"<c:tx><c:v>REVENUE</c:v></c:tx>" in got and b"<c:v>1.5</c:v>" in got


def test_pptx_section_names_are_translated():
    """PowerPoint shows them over their slides in the slide pane: they were copied as they
    were."""
    parts = entries(make_pptx())
    p14 = "http://schemas.microsoft.com/office/powerpoint/2010/main"
    sections = (
        '<p:extLst><p:ext uri="{521415D9-36F7-43E2-AB2F-B90AF26B5E84}">'
        f'<p14:sectionLst xmlns:p14="{p14}">'
        '<p14:section name="Introduction" id="{A1}"><p14:sldIdLst><p14:sldId id="256"/>'
        '</p14:sldIdLst></p14:section><p14:section name="2024" id="{A2}"><p14:sldIdLst/>'
        "</p14:section></p14:sectionLst></p:ext></p:extLst></p:presentation>"
    )
    xml = parts["ppt/presentation.xml"].decode()
    assert "<p:extLst>" not in xml
    parts["ppt/presentation.xml"] = xml.replace("</p:presentation>", sections).encode()
    out = entries(translate_office(zip_of(parts), upper, LIMITS, "pptx"))
    assert b'name="INTRODUCTION"' in out["ppt/presentation.xml"]
    assert b'name="2024"' in out["ppt/presentation.xml"]
    assert pptx.Presentation(io.BytesIO(zip_of(out))).slides[0].shapes.title.text == "SLIDE TITLE"


def test_docx_vml_picture_alternative_text_is_translated():
    """A picture of a document from Word 2007 or earlier is a VML shape, whose alternative
    text is its `alt` attribute: it was copied untranslated."""
    parts = entries(make_docx())
    body = parts["word/document.xml"].decode()
    pict = (
        '<w:r><w:pict><v:shape xmlns:v="urn:schemas-microsoft-com:vml" id="Picture 1" '
        'alt="A map of the old town" style="width:100pt;height:50pt"/></w:pict></w:r>'
    )
    body = body.replace("<w:r><w:t>Before a tab", pict + "<w:r><w:t>Before a tab", 1)
    assert pict in body
    parts["word/document.xml"] = body.encode()
    out = entries(translate_office(zip_of(parts), upper, LIMITS, "docx"))["word/document.xml"]
    assert b'alt="A MAP OF THE OLD TOWN"' in out and b'id="Picture 1"' in out


def test_broken_document_properties_are_copied_not_refused():
    """A document whose properties part is broken (or has a DOCTYPE) still opens in Word and
    was translated before its title was: it is translated, its properties copied as they are."""
    parts = entries(make_docx())
    for broken in (b"<cp:coreProperties", b'<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>'):
        parts["docProps/core.xml"] = broken
        out = entries(translate_office(zip_of(parts), upper, LIMITS, "docx"))
        assert out["docProps/core.xml"] == broken
        assert b"HELLO " in out["word/document.xml"]


def test_link_tips_are_translated_not_their_addresses():
    """The tip a link shows when pointed at, which screen readers read with it, was copied
    untranslated (.pptx `a:hlinkClick/@tooltip`, .docx `w:hyperlink/@w:tooltip`)."""
    prs = pptx.Presentation(io.BytesIO(make_pptx()))
    run = prs.slides[0].placeholders[1].text_frame.paragraphs[0].runs[0]
    run.hyperlink.address = "https://example.com/prices"
    run.hyperlink._hlinkClick.set("tooltip", "Open the price list")
    buf = io.BytesIO()
    prs.save(buf)
    out = entries(translate_office(buf.getvalue(), upper, LIMITS, "pptx"))
    assert b'tooltip="OPEN THE PRICE LIST"' in out["ppt/slides/slide1.xml"]
    assert b"https://example.com/prices" in out["ppt/slides/_rels/slide1.xml.rels"]

    parts = entries(make_docx())
    body = parts["word/document.xml"].decode()
    link = (
        '<w:hyperlink w:anchor="top" w:tooltip="Back to the start">'
        "<w:r><w:t>Top of page</w:t></w:r></w:hyperlink>"
    )
    body = body.replace("<w:r><w:t>Before a tab", link + "<w:r><w:t>Before a tab", 1)
    assert link in body
    parts["word/document.xml"] = body.encode()
    out = entries(translate_office(zip_of(parts), upper, LIMITS, "docx"))["word/document.xml"]
    assert b'w:tooltip="BACK TO THE START"' in out and b'w:anchor="top"' in out


def test_a_text_that_comes_back_in_a_file_is_sent_once():
    """A chart's categories are written again in each of its series, a picture's description
    in two places: each copy was sent to the model."""
    sent: list[str] = []
    out = translate_office(
        make_chart_pptx(), lambda ts: sent.extend(ts) or upper(ts), LIMITS, "pptx"
    )
    assert sent.count("North") == 1 and len(sent) == len(set(sent))
    chart = pptx.Presentation(io.BytesIO(out)).slides[0].shapes[-1].chart
    assert [list(s.values) for s in chart.plots[0].series] == [[1.5, 2.5, 3.5], [1.0, 2.0, 3.0]]
    assert entries(out)["ppt/charts/chart1.xml"].count(b"<c:v>NORTH</c:v>") == 2


CX = "http://schemas.microsoft.com/office/drawing/2014/chartex"


def chartex(layout: str, categories: list[str]) -> bytes:
    """An Office 2016 chart as PowerPoint writes it: its data (categories, values), a title
    with its formatted copy, a series, an axis title and a legend."""
    pts = "".join(f'<cx:pt idx="{i}">{c}</cx:pt>' for i, c in enumerate(categories))
    values = "".join(f'<cx:pt idx="{i}">{i + 1.5}</cx:pt>' for i in range(len(categories)))

    def title(text: str) -> str:
        return (
            '<cx:title pos="t" align="ctr" overlay="0"><cx:tx><cx:txData>'
            f"<cx:v>{text}</cx:v></cx:txData></cx:tx><cx:txPr><a:bodyPr/><a:lstStyle/><a:p>"
            f'<a:pPr><a:defRPr/></a:pPr><a:r><a:rPr lang="en-US" sz="1400"/><a:t>{text}</a:t>'
            "</a:r></a:p></cx:txPr></cx:title>"
        )

    return (
        f'<cx:chartSpace xmlns:a="{DML}" xmlns:r="http://schemas.openxmlformats.org/'
        f'officeDocument/2006/relationships" xmlns:cx="{CX}"><cx:chartData>'
        '<cx:externalData r:id="rId1" cx:autoUpdate="0"/><cx:data id="0">'
        f'<cx:strDim type="cat"><cx:f>Sheet1!$A$2:$A$4</cx:f><cx:lvl ptCount="{len(categories)}">'
        f"{pts}</cx:lvl></cx:strDim>"
        f'<cx:numDim type="val"><cx:f>Sheet1!$B$2:$B$4</cx:f><cx:lvl ptCount="{len(categories)}" '
        f'formatCode="General">{values}</cx:lvl></cx:numDim></cx:data></cx:chartData>'
        "<cx:chart>" + title("Cash flow") + "<cx:plotArea><cx:plotAreaRegion>"
        f'<cx:series layoutId="{layout}" uniqueId="{{1}}"><cx:tx><cx:txData>'
        "<cx:f>Sheet1!$B$1</cx:f><cx:v>Amount</cx:v></cx:txData></cx:tx>"
        '<cx:dataLabels pos="outEnd"><cx:visibility seriesName="0" categoryName="1" value="1"/>'
        '</cx:dataLabels><cx:dataId val="0"/></cx:series></cx:plotAreaRegion><cx:axis id="0">'
        "<cx:catScaling/>" + title("Quarter") + "<cx:tickLabels/></cx:axis>"
        '</cx:plotArea><cx:legend pos="b" align="ctr" overlay="0"><cx:txPr><a:bodyPr/>'
        '<a:lstStyle/><a:p><a:pPr><a:defRPr/></a:pPr><a:endParaRPr lang="en-US"/></a:p>'
        "</cx:txPr></cx:legend></cx:chart></cx:chartSpace>"
    ).encode()


def test_office_2016_chart_titles_series_and_categories_are_translated():
    """A waterfall, treemap or funnel chart (chartEx) was copied untranslated, its data labels
    showing the source's category names; a map chart's regions are looked up by their names
    and stay."""
    from app.formats import handler_for

    parts = entries(make_pptx())
    parts["ppt/charts/chartEx1.xml"] = chartex("waterfall", ["Start", "Sales", "2024"])
    parts["ppt/charts/chartEx2.xml"] = chartex("regionMap", ["Germany", "France"])
    out = entries(handler_for("a.pptx", "de")(zip_of(parts), upper, LIMITS))
    waterfall = out["ppt/charts/chartEx1.xml"]
    for text in ("CASH FLOW", "QUARTER"):  # a title's text, and its formatted copy
        assert f"<cx:v>{text}</cx:v><".encode() in waterfall
        assert f"<a:t>{text}</a:t>".encode() in waterfall
    assert b"<cx:v>AMOUNT</cx:v>" in waterfall  # the series' name
    assert (
        b'<cx:pt idx="0">START</cx:pt><cx:pt idx="1">SALES</cx:pt><cx:pt idx="2">2024' in waterfall
    )
    assert b'<cx:pt idx="0">1.5</cx:pt>' in waterfall and b"Sheet1!$A$2:$A$4" in waterfall
    assert b'lang="en-US"' not in waterfall  # the titles' runs, the legend's properties
    regions = out["ppt/charts/chartEx2.xml"]
    assert b'<cx:pt idx="0">Germany</cx:pt><cx:pt idx="1">France</cx:pt>' in regions
    assert b"<cx:v>CASH FLOW</cx:v>" in regions


VT = "http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes"


def test_pptx_slide_titles_listed_in_its_properties_are_the_translated_titles():
    """PowerPoint lists each slide's title in docProps/app.xml, which Windows shows in the
    file's properties: the list kept the source's titles. An entry that is no slide's title as
    sent (an untitled slide's, a list older than the slides' order) stays."""
    prs = pptx.Presentation(io.BytesIO(make_pptx()))
    second = prs.slides.add_slide(prs.slide_layouts[5])
    frame = second.shapes.title.text_frame
    frame.text = "Results"
    frame.add_paragraph().text = "for 2024"
    prs.slides.add_slide(prs.slide_layouts[6])  # blank: no title
    prs.slides.add_slide(prs.slide_layouts[5]).shapes.title.text = "Summary"
    ids = prs.slides._sldIdLst
    ids.insert(0, ids[1])  # "Results" first
    buf = io.BytesIO()
    prs.save(buf)
    parts = entries(buf.getvalue())
    listed = ["Results\nfor 2024", "Slide title", "PowerPoint Presentation", "Old summary"]
    groups = [("Fonts Used", 1), ("Theme", 1), ("Slide Titles", 4)]
    pairs = "".join(
        f"<vt:variant><vt:lpstr>{n}</vt:lpstr></vt:variant><vt:variant><vt:i4>{c}</vt:i4>"
        "</vt:variant>"
        for n, c in groups
    )
    titles = "".join(f"<vt:lpstr>{t}</vt:lpstr>" for t in ["Arial", "Office Theme", *listed])
    parts["docProps/app.xml"] = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Properties xmlns="http://'
        'schemas.openxmlformats.org/officeDocument/2006/extended-properties" '
        f'xmlns:vt="{VT}"><Slides>4</Slides><HeadingPairs><vt:vector size="6" '
        f'baseType="variant">{pairs}</vt:vector></HeadingPairs><TitlesOfParts>'
        f'<vt:vector size="6" baseType="lpstr">{titles}</vt:vector></TitlesOfParts>'
        "</Properties>"
    ).encode()
    src = zip_of(parts)
    out = entries(translate_office(src, upper, LIMITS, "pptx"))["docProps/app.xml"]
    got = [el.text for el in etree.fromstring(out).iter(f"{{{VT}}}lpstr")]
    assert got == [
        "Fonts Used", "Theme", "Slide Titles",  # the groups' names, in PowerPoint's language
        "Arial", "Office Theme", "RESULTS FOR 2024", "SLIDE TITLE", "PowerPoint Presentation",
        "Old summary",
    ]  # fmt: skip
    assert out.startswith(b"<?xml version='1.0' encoding='UTF-8' standalone='yes'?>")
    same = entries(translate_office(src, lambda ts: ts, LIMITS, "pptx"))
    assert same["docProps/app.xml"] == parts["docProps/app.xml"]


def test_pptx_whose_properties_list_no_group_of_its_slides_is_translated():
    """python-pptx's template lists 0 "Slide Titles" and saving does not update it, nor does
    any tool that adds slides without PowerPoint: with two slides or more no group had as many
    entries as slides, and the file was a 500 (zip() of no entries with the slides' titles)."""
    prs = pptx.Presentation(io.BytesIO(make_pptx()))
    prs.slides.add_slide(prs.slide_layouts[5]).shapes.title.text = "Results"
    buf = io.BytesIO()
    prs.save(buf)
    src = buf.getvalue()
    out = translate_office(src, upper, LIMITS, "pptx")
    assert entries(out)["docProps/app.xml"] == entries(src)["docProps/app.xml"]
    assert pptx.Presentation(io.BytesIO(out)).slides[1].shapes.title.text == "RESULTS"


def test_chart_data_labels_taken_from_cells_are_translated():
    """A data label showing a cell's text (PowerPoint's "Value From Cells") was copied
    untranslated; the cells' address is kept."""
    c15 = "http://schemas.microsoft.com/office/drawing/2012/chart"
    cache = '<c:ptCount val="2"/><c:pt idx="0"><c:v>Best month</c:v></c:pt><c:pt idx="1"><c:v>12</c:v></c:pt>'
    ext = (
        '<c:extLst><c:ext uri="{02D57815-91ED-43cb-92C2-25804820EDAC}" '
        f'xmlns:c15="{c15}"><c15:datalabelsRange><c15:f>Sheet1!$D$2:$D$3</c15:f>'
        f"<c15:dlblRangeCache>{cache}</c15:dlblRangeCache></c15:datalabelsRange>"
        "<c15:dlblFieldTable><c15:dlblFTEntry><c15:txfldGUID>{A1}</c15:txfldGUID>"
        '<c15:f>Sheet1!$E$1</c15:f><c15:dlblFieldTableCache><c:ptCount val="1"/>'
        '<c:pt idx="0"><c:v>Target</c:v></c:pt></c15:dlblFieldTableCache></c15:dlblFTEntry>'
        "</c15:dlblFieldTable></c:ext></c:extLst></c:ser>"
    )
    parts = entries(make_chart_pptx())
    parts["ppt/charts/chart1.xml"] = parts["ppt/charts/chart1.xml"].replace(
        b"</c:ser>", ext.encode(), 1
    )
    out = entries(translate_office(zip_of(parts), upper, LIMITS, "pptx"))["ppt/charts/chart1.xml"]
    for text in (b"<c:v>BEST MONTH</c:v>", b"<c:v>12</c:v>", b"<c:v>TARGET</c:v>", b"$D$2:$D$3"):
        assert text in out


def test_a_tables_alternative_text_is_translated():
    """A .docx table's title and description (Table Properties > Alt Text), which screen
    readers read as a picture's alternative text, were copied untranslated."""
    parts = entries(make_docx())
    body = parts["word/document.xml"].decode()
    alt = '<w:tblCaption w:val="Prices"/><w:tblDescription w:val="The prices of the year"/>'
    body = body.replace("</w:tblPr>", alt + "</w:tblPr>", 1)
    assert alt in body
    parts["word/document.xml"] = body.encode()
    out = entries(translate_office(zip_of(parts), upper, LIMITS, "docx"))["word/document.xml"]
    assert b'<w:tblCaption w:val="PRICES"/>' in out
    assert b'<w:tblDescription w:val="THE PRICES OF THE YEAR"/>' in out
