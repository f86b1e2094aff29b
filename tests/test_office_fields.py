"""The texts a .docx's field codes show when Word updates them (app/formats/office_fields.py):
an IF's true and false texts, a MERGEFIELD's text before and after, a FILLIN's or ASK's
prompt are translated; the expressions compared, the switches and every other code are not."""

from __future__ import annotations

import pytest
from lxml import etree

from app.formats.office import translate_office
from app.formats.office_fields import display_texts
from tests.test_file_formats import LIMITS, docx_body, entries, upper

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def field(code: str, result: str = "-") -> str:
    """A complex field in runs; `{...}` in `code` is a nested MERGEFIELD. Its `result` holds
    no letters, so that only the code's texts are sent."""
    fld = '<w:r><w:fldChar w:fldCharType="{}"/></w:r>'.format
    runs = [fld("begin")]
    for i, piece in enumerate(code.split("{...}")):
        if i:
            runs += [fld("begin"), "<w:r><w:instrText> MERGEFIELD Gender </w:instrText></w:r>",
                     fld("separate"), "<w:r><w:t>F</w:t></w:r>", fld("end")]  # fmt: skip
        runs.append(f'<w:r><w:instrText xml:space="preserve">{piece}</w:instrText></w:r>')
    runs += [fld("separate"), f"<w:r><w:t>{result}</w:t></w:r>", fld("end")]
    return "".join(runs)


def codes(data: bytes) -> list[str]:
    """Each field's code as written: its text nodes joined (a nested field as `{}`)."""
    root = etree.fromstring(entries(data)["word/document.xml"])
    out, depth = [], 0
    for el in root.iter(W + "fldChar", W + "instrText", W + "fldSimple"):
        if el.tag == W + "fldSimple":
            out.append(el.get(W + "instr"))
        elif el.tag == W + "instrText":
            out[-1] += el.text if depth == 1 else ""
        elif el.get(W + "fldCharType") == "begin":
            depth += 1
            if depth == 1:
                out.append("")
            else:
                out[-1] += "{}"
        elif el.get(W + "fldCharType") == "end":
            depth -= 1
    return out


def test_the_texts_a_field_shows_are_translated_its_expressions_and_switches_not():
    """A mail merge wrote "Sir" and "Dear " in a translated letter: Word writes an IF's or a
    MERGEFIELD's result again from its code, which was not translated."""
    src = docx_body(
        "<w:p>"
        + field(' IF {...} = "F" "Madam" "Sir" \\* MERGEFORMAT ')
        + field(' MERGEFIELD Name \\b "Dear " \\f ", welcome" ')
        + field(' FILLIN "Your department?" \\d "Sales" ')
        + field(' ASK Client "Name of the client?" \\d "None" ')
        + field(' IF {...} = "Yes" "We will call you." ')
        + field(' DATE \\@ "dddd, MMMM d" ')
        + field(" REF Total \\* Upper ")
        + '<w:fldSimple w:instr=\' IF 1 &gt; 2 "Wrong" "Right" \'><w:r><w:t>-</w:t></w:r>'
        + "</w:fldSimple></w:p>"
    )
    sent: list[str] = []
    out = translate_office(src, lambda ts: sent.extend(ts) or upper(ts), LIMITS, "docx")
    assert codes(out) == [
        ' IF {} = "F" "MADAM" "SIR" \\* MERGEFORMAT ',
        ' MERGEFIELD Name \\b "DEAR " \\f ", WELCOME" ',
        ' FILLIN "YOUR DEPARTMENT?" \\d "Sales" ',
        ' ASK Client "NAME OF THE CLIENT?" \\d "None" ',
        ' IF {} = "Yes" "WE WILL CALL YOU." ',
        ' DATE \\@ "dddd, MMMM d" ',
        " REF Total \\* Upper ",
        ' IF 1 > 2 "WRONG" "RIGHT" ',
    ]
    assert sent == [
        "Madam", "Sir", "Dear ", ", welcome", "Your department?", "Name of the client?",
        "We will call you.", "Wrong", "Right",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "code",
    [
        ' IF {...} = "F" "Dear {...}" "Sir" ',  # a text with a field in it: only "Sir"
        ' IF {...} = "F" "Say \\"hi\\"" "Sir" ',  # an escaped quote: only "Sir"
        ' IF {...} "F" "Madam" "Sir" ',  # no operator: not an IF read
        ' IF {...} = "F" "Madam" "Sir" "extra" ',
        ' IF {...} = "F" "Madam',  # not closed
    ],
)
def test_codes_that_are_not_plain_keep_their_texts(code):
    src = docx_body("<w:p>" + field(code) + "</w:p>")
    sent: list[str] = []
    out = translate_office(src, lambda ts: sent.extend(ts) or upper(ts), LIMITS, "docx")
    expected = code.replace("{...}", "{}")
    if "Madam" not in code and '"Sir"' in code:
        expected = expected.replace('"Sir"', '"SIR"')
    assert codes(out) == [expected]
    assert sent == (["Sir"] if '"SIR"' in expected else [])


def test_a_translation_that_would_end_its_quoted_text_is_not_taken():
    src = docx_body("<w:p>" + field(' IF {...} = "F" "Madam" "Sir" ') + "</w:p>")
    model = {"Madam": 'Frau "Doktor"', "Sir": "Herr \\ Dr."}
    out = translate_office(src, lambda ts: [model.get(t, t) for t in ts], LIMITS, "docx")
    assert codes(out) == [' IF {} = "F" "Madam" "Sir" ']
    quoted = translate_office(src, lambda ts: [f"„{t}“" for t in ts], LIMITS, "docx")
    assert codes(quoted) == [' IF {} = "F" "Madam" "Sir" ']


def test_display_texts_are_the_quoted_texts_a_field_shows():
    def texts(code: str) -> list[str]:
        return [code[t.start : t.end] for t in display_texts(code)]

    assert texts('IF x <> "a" "b" "c"') == ["b", "c"]
    assert texts('if x >= 3 "big"') == ["big"]
    assert texts('MERGEFIELD x \\B "b" \\f "f" \\m') == ["b", "f"]
    assert texts('QUOTE "text"') == []  # not read
    assert texts('IF x = "a" "b" "c" \\* Caps \\* MERGEFORMAT') == ["b", "c"]


def test_a_field_in_another_fields_code_or_with_a_deletion_in_its_code_keeps_its_texts():
    """An IF inside a SET gives the bookmark its value, which other fields may compare with
    "Sir": its texts are data, not shown."""
    fld = '<w:r><w:fldChar w:fldCharType="{}"/></w:r>'.format
    code = '<w:r><w:instrText xml:space="preserve">{}</w:instrText></w:r>'.format
    nested = (
        fld("begin") + code(" SET Greeting ") + fld("begin")
        + code(' IF 1 = 1 "Sir" "Madam" ') + fld("separate") + "<w:r><w:t>-</w:t></w:r>"
        + fld("end") + fld("separate") + fld("end")
    )  # fmt: skip
    deleted = (
        fld("begin") + code(' IF 1 = 1 "Hello" "Bye" ')
        + '<w:del w:id="1" w:author="A"><w:r><w:delInstrText> \\* Upper</w:delInstrText></w:r>'
        + "</w:del>" + fld("separate") + fld("end")
    )  # fmt: skip
    sent: list[str] = []
    src = docx_body("<w:p>" + nested + deleted + "</w:p>")
    out = translate_office(src, lambda ts: sent.extend(ts) or upper(ts), LIMITS, "docx")
    assert sent == []
    assert entries(out)["word/document.xml"] == entries(src)["word/document.xml"]
