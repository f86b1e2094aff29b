"""The language marks of a translated office file (app/formats/office_language.py): the
translated text is marked with the target's language, what was not translated keeps its own."""

from __future__ import annotations

import io

import docx
import pptx
import pytest
from lxml import etree

from app.formats import Limits, handler_for
from app.formats.office_language import tag
from tests.test_file_formats import entries, make_docx, make_odt, make_pptx, upper, zip_of

LIMITS = Limits()
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
FO = "{urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
C = "http://schemas.openxmlformats.org/drawingml/2006/chart"
CODE = "print(x)"


def upper_but_code(texts: list[str]) -> list[str]:
    """A model that translates everything but code, which comes back as it was sent."""
    return [t if CODE in t else t.upper() for t in texts]


def translate(data: bytes, name: str, language: str = "de") -> bytes:
    return handler_for(name, language)(data, upper_but_code, LIMITS)


def languages(xml: bytes, text_tag: str, lang_of) -> dict[str, str | None]:
    """Each run's text and its language mark."""
    root = etree.fromstring(xml)
    return {t.text: lang_of(t.getparent()) for t in root.iter(text_tag) if t.text}


def docx_lang(run) -> str | None:
    lang = run.find(f"{W}rPr/{W}lang")
    return None if lang is None else lang.get(W + "val")


def test_docx_translated_runs_are_marked_with_the_target_others_keep_their_language():
    """Word spell-checked the translation as English (`w:lang w:val="en-US"` was kept) and
    screen readers read it with an English voice."""
    src = entries(make_docx())
    body = src["word/document.xml"].decode()
    en = '<w:rPr><w:b/><w:lang w:val="en-US"/><w:rPrChange w:id="1" w:author="A"><w:rPr/>'
    en += "</w:rPrChange></w:rPr>"
    body = body.replace(
        "<w:r><w:rPr><w:b/></w:rPr><w:t>bold words</w:t></w:r>",
        f"<w:r>{en}<w:t>bold words</w:t></w:r>",
    ).replace(
        "<w:r><w:t>Before a tab</w:t><w:tab/><w:t>after it.</w:t></w:r>",
        f'<w:r><w:rPr><w:lang w:val="en-US"/></w:rPr><w:t>{CODE}</w:t></w:r>'
        f'<w:del w:id="2" w:author="A"><w:r><w:rPr><w:lang w:val="en-US"/></w:rPr>'
        "<w:delText>gone</w:delText></w:r></w:del>",
    )
    assert "bold words</w:t>" in body and CODE in body
    src["word/document.xml"] = body.encode()
    out = entries(translate(zip_of(src), "a.docx"))
    got = languages(out["word/document.xml"], W + "t", docx_lang)
    assert got["HELLO "] == "de"  # a run without properties is given them
    assert got["BOLD WORDS"] == "de"
    assert got[CODE] == "en-US"  # not translated
    deleted = languages(out["word/document.xml"], W + "delText", docx_lang)
    assert deleted == {"gone": "en-US"}
    # the properties stay in the order Word reads them: w:lang before w:rPrChange
    d = docx.Document(io.BytesIO(zip_of(out)))
    props = d.paragraphs[0].runs[1]._r.find(W + "rPr")
    assert [c.tag.split("}")[1] for c in props] == ["b", "lang", "rPrChange"]
    assert out["word/styles.xml"] == src["word/styles.xml"]  # the defaults, for untranslated text


def test_docx_the_language_goes_before_the_extensions_of_later_word_versions():
    """Word 365 ends a run's properties with `w14:ligatures` (its Aptos font), Text Effects with
    `w14:textFill`: extensions, after every w: element. The mark was written after them."""
    w14 = "http://schemas.microsoft.com/office/word/2010/wordml"
    src = entries(make_docx())
    body = src["word/document.xml"].decode()
    props = f'<w:rPr><w:b/><w14:ligatures xmlns:w14="{w14}" w14:val="standardContextual"/></w:rPr>'
    body = body.replace(
        "<w:r><w:rPr><w:b/></w:rPr><w:t>bold words</w:t></w:r>",
        f"<w:r>{props}<w:t>bold words</w:t></w:r>",
    )
    assert props in body
    src["word/document.xml"] = body.encode()
    out = entries(translate(zip_of(src), "a.docx"))
    d = docx.Document(io.BytesIO(zip_of(out)))
    props_out = d.paragraphs[0].runs[1]._r.find(W + "rPr")
    assert [etree.QName(c).localname for c in props_out] == ["b", "lang", "ligatures"]


def test_docx_east_asian_and_right_to_left_targets_are_marked_for_their_script_too():
    for language, attribute in [("ja", "eastAsia"), ("ar", "bidi")]:
        out = entries(translate(make_docx(), "a.docx", language))["word/document.xml"]
        lang = etree.fromstring(out).find(f".//{W}r/{W}rPr/{W}lang")
        assert lang.get(W + "val") == language
        assert lang.get(W + attribute) == language


def pptx_lang(run) -> str | None:
    props = run.find(A + "rPr")
    return None if props is None else props.get("lang")


def test_pptx_translated_runs_are_marked_with_the_target_fields_and_code_keep_theirs():
    src = entries(make_pptx())
    slide = src["ppt/slides/slide1.xml"].decode()
    slide = slide.replace(
        "<a:r><a:t>First point</a:t></a:r>",
        '<a:r><a:rPr lang="en-US" altLang="ja-JP" b="1"/><a:t>Slide </a:t></a:r>'
        '<a:fld id="{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}" type="slidenum">'
        '<a:rPr lang="en-US"/><a:t>1</a:t></a:fld><a:endParaRPr lang="en-US" altLang="ja-JP"/>',
    ).replace(
        "<a:r><a:t>Slide title</a:t></a:r>", f'<a:r><a:rPr lang="en-US"/><a:t>{CODE}</a:t></a:r>'
    )
    src["ppt/slides/slide1.xml"] = slide.encode()
    out = entries(translate(zip_of(src), "a.pptx"))
    got = languages(out["ppt/slides/slide1.xml"], A + "t", pptx_lang)
    assert got == {CODE: "en-US", "SLIDE ": "de", "1": "en-US", "MIXED ": "de", "ITALIC PART": "de"}
    props = etree.fromstring(out["ppt/slides/slide1.xml"]).find(f".//{A}r/{A}rPr[@b='1']")
    assert props.get("altLang") is None  # the source's pairing for East Asian text
    end = etree.fromstring(out["ppt/slides/slide1.xml"]).find(f".//{A}endParaRPr")
    assert dict(end.attrib) == {"lang": "de"}  # the language of text typed at the end
    notes = languages(out["ppt/notesSlides/notesSlide1.xml"], A + "t", pptx_lang)
    assert notes == {"SPEAKER NOTES": "de"}
    assert pptx.Presentation(io.BytesIO(zip_of(out))).slides[0].shapes.title.text == CODE


def odt_language(root, el) -> tuple[str | None, str | None]:
    """The language of a paragraph's or span's automatic style, or its common style's name."""
    name = el.get(TEXT + "style-name")
    for s in root.iter(STYLE + "style"):
        if s.get(STYLE + "name") == name:
            props = s.find(STYLE + "text-properties")
            if props is not None and props.get(FO + "language"):
                return props.get(FO + "language"), props.get(FO + "country")
            return "inherits", s.get(STYLE + "parent-style-name")
    return "common", name


def test_odt_translated_paragraphs_get_a_style_in_the_target_and_meta_names_it():
    src = entries(make_odt())
    content = src["content.xml"].decode()
    en = '<style:text-properties fo:language="en" fo:country="US" fo:font-weight="bold"/>'
    content = (
        content.replace('<style:text-properties fo:font-weight="bold"/>', en)
        .replace(
            "</office:automatic-styles>",
            '<style:style style:name="P1" style:family="paragraph" '
            'style:parent-style-name="Standard">'
            '<style:text-properties fo:language="en" fo:country="US"/></style:style>'
            "</office:automatic-styles>",
        )
        .replace(
            "<text:p>Before a tab<text:tab/>after it</text:p>",
            f'<text:p text:style-name="P1">{CODE}</text:p>'
            '<text:p text:style-name="P1">More text.</text:p>',
        )
    )
    src["content.xml"] = content.encode()
    src["meta.xml"] = (
        src["meta.xml"]
        .decode()
        .replace(
            "<meta:generator>",
            '<dc:language xmlns:dc="http://purl.org/dc/elements/1.1/">en-US</dc:language>'
            "<meta:generator>",
        )
        .encode()
    )
    out = entries(translate(zip_of(src), "a.odt", "pt-BR"))
    root = etree.fromstring(out["content.xml"])
    paragraphs = {p.xpath("string()"): p for p in root.iter(TEXT + "p", TEXT + "h")}
    assert set(paragraphs) == {"A HEADING", "HELLO BOLD WORDS AND MORE.", CODE, "MORE TEXT."}
    assert odt_language(root, paragraphs[CODE]) == ("en", "US")  # not translated: P1 kept
    assert paragraphs[CODE].get(TEXT + "style-name") == "P1"
    assert odt_language(root, paragraphs["MORE TEXT."]) == ("pt", "BR")  # a copy of P1
    heading = paragraphs["A HEADING"]  # no style of its own: one that inherits the default
    assert odt_language(root, heading) == ("pt", "BR")
    span = next(root.iter(TEXT + "span"))
    assert odt_language(root, span) == ("pt", "BR")
    bold = [
        s
        for s in root.iter(STYLE + "style")
        if s.get(STYLE + "name") == span.get(TEXT + "style-name")
    ]
    assert bold[0].find(STYLE + "text-properties").get(FO + "font-weight") == "bold"
    meta = etree.fromstring(out["meta.xml"])
    assert meta.findtext(".//{http://purl.org/dc/elements/1.1/}language") == "pt-BR"


def test_without_a_target_the_marks_are_kept():
    src = make_docx()
    assert entries(handler_for("a.docx")(src, upper, LIMITS))["word/document.xml"].count(
        b"w:lang"
    ) == src.count(b"w:lang")


@pytest.mark.parametrize(
    ("asked", "served", "expected"),
    [
        ("de", "de", "de"),
        ("DEU", "de", "de"),  # a three-letter code for the served two-letter one
        ("pt_br", "pt", "pt-BR"),  # the region asked for
        ("zh-hant", "zh-Hant", "zh-Hant"),
        ("de-CH", "de", "de-CH"),
        ("xx<y>", "de", "de"),
    ],
)
def test_the_mark_is_the_tag_asked_for_when_it_names_the_language_served(asked, served, expected):
    assert tag(asked, served) == expected


def test_a_translated_chart_is_marked_with_the_target_its_labels_properties_too():
    """A chart's language (`c:lang`) and the text properties its labels, legend and axes are
    drawn with (`c:txPr`) kept the source's after its title and names were translated."""
    from tests.test_office_labels import make_chart_pptx

    src = entries(make_chart_pptx())
    xml = src["ppt/charts/chart1.xml"].decode()
    xml = xml.replace('<c:date1904 val="0"/>', '<c:date1904 val="0"/><c:lang val="en-US"/>')
    xml = xml.replace(
        "<a:r><a:t>Sales by region</a:t></a:r>",
        '<a:r><a:rPr lang="en-US"/><a:t>Sales by region</a:t></a:r>'
        '<a:endParaRPr lang="en-US" altLang="ja-JP"/>',
    )
    xml = xml.replace('<a:defRPr sz="1800"/>', '<a:defRPr sz="1800" lang="en-US"/>')
    assert xml.count('lang="en-US"') == 4
    src["ppt/charts/chart1.xml"] = xml.encode()
    out = entries(translate(zip_of(src), "a.pptx"))["ppt/charts/chart1.xml"]
    root = etree.fromstring(out)
    assert root.find(f"{{{C}}}lang").get("val") == "de"
    marks = [el.get("lang") for el in root.iter(A + "rPr", A + "defRPr", A + "endParaRPr")]
    assert marks == ["de"] * 5  # the two titles' runs, the title's end, the labels' properties
    assert b"altLang" not in out and b"SALES BY REGION" in out

    # a chart whose text comes back as it was sent keeps its language
    same = entries(handler_for("a.pptx", "de")(zip_of(src), lambda ts: ts, LIMITS))
    assert same["ppt/charts/chart1.xml"] == src["ppt/charts/chart1.xml"]
