"""The labels of a .docx's numbered lists and headings (app/formats/office_numbering.py):
their words are translated, their numbers (`%1`) kept exactly, or the label as it was."""

from __future__ import annotations

import re

from lxml import etree

from app.formats import handler_for
from app.formats.office import translate_office
from tests.test_file_formats import LIMITS, entries, make_docx, upper, zip_of

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
LABELS = ["Chapter %1", "Article %1.%2", "Step %1 of %2", "(%1)", "Annex %1"]


def docx_with_labels() -> dict[str, bytes]:
    """make_docx's numbering, its first levels' labels replaced by LABELS."""
    parts = entries(make_docx())
    xml = parts["word/numbering.xml"].decode()
    labels = iter(LABELS)
    xml = re.sub(
        r'<w:lvlText w:val="%1\."/>', lambda m: f'<w:lvlText w:val="{next(labels, "%1.")}"/>', xml
    )
    xml = xml.replace('w:val="\uf0b7"', 'w:val="o"', 1)  # Word's bullet in Courier New
    parts["word/numbering.xml"] = xml.encode()
    assert all(f'w:val="{label}"' in xml for label in LABELS)
    return parts


def labels(xml: bytes) -> list[str]:
    """The labels that were LABELS (the others are "%1." and bullets)."""
    values = [el.get(W + "val") for el in etree.fromstring(xml).iter(W + "lvlText")]
    return [v for v in values if v != "%1." and "%" in v]


def test_numbering_labels_are_translated_their_numbers_kept():
    """Word writes "Chapter 1" from the label "Chapter %1": it stayed in the source's language
    above a translated chapter."""
    sent: list[str] = []
    out = entries(
        translate_office(
            zip_of(docx_with_labels()), lambda ts: sent.extend(ts) or upper(ts), LIMITS, "docx"
        )
    )
    assert labels(out["word/numbering.xml"]) == [
        "CHAPTER %1", "ARTICLE %1.%2", "STEP %1 OF %2", "(%1)", "ANNEX %1"
    ]  # fmt: skip
    assert "Chapter <x1/>" in sent and "Article <x1/>.<x2/>" in sent
    assert not [t for t in sent if "%" in t or t in ("<x1/>.", "(<x1/>)")]  # nothing to translate
    assert b'<w:lvlText w:val="o"/>' in out["word/numbering.xml"] and "o" not in sent


def test_a_label_whose_numbers_do_not_come_back_once_each_is_kept():
    """A label that lost or doubled a number would number the paragraphs wrongly."""

    def model(texts: list[str]) -> list[str]:
        done = {
            "Chapter <x1/>": "Kapitel",  # lost
            "Article <x1/>.<x2/>": "Artikel <x1/>.<x1/>",  # doubled, one lost
            "Step <x1/> of <x2/>": "Schritt <X 2/> von <x1 />",  # in another order: taken
            "Annex <x1/>": "Anhang <x1/> %2",  # a number of its own
        }
        return [done.get(t, t.upper()) for t in texts]

    out = entries(translate_office(zip_of(docx_with_labels()), model, LIMITS, "docx"))
    assert labels(out["word/numbering.xml"]) == [
        "Chapter %1", "Article %1.%2", "Schritt %2 von %1", "(%1)", "Annex %1"
    ]  # fmt: skip


def test_a_translated_label_is_marked_with_the_target_language():
    out = entries(handler_for("a.docx", "de")(zip_of(docx_with_labels()), upper, LIMITS))
    levels = {
        el.get(W + "val"): el.getparent()
        for el in etree.fromstring(out["word/numbering.xml"]).iter(W + "lvlText")
    }
    chapter = levels["CHAPTER %1"]
    assert chapter[-1].tag == W + "rPr"  # the last of a level's properties
    assert chapter.find(f"{W}rPr/{W}lang").get(W + "val") == "de"
    assert levels["(%1)"].find(f"{W}rPr") is None  # not translated
