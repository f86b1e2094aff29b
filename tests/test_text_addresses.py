"""URLs, e-mail addresses, file names and emoji in a text: copied as written, and the punctuation and spacing
that touch them kept, however the model treats the words beside them."""

from __future__ import annotations

import re

import pytest

from app.formats.addresses import verbatim_spans
from app.formats.inline import UnitBuilder


def words_only(text: str) -> str:
    """What a small model does to a short run: its words, in capitals, without the punctuation
    and spacing at its edges (and never a placeholder, so a unit is translated by runs)."""
    return " ".join(re.findall(r"\w+", text)).upper()


def by_runs(sentence: str) -> str:
    builder = UnitBuilder()
    builder.text(sentence)
    unit = builder.build()
    assert unit is not None
    return "".join(t.text for t in unit.tokens([words_only(r) for r in unit.requests]))


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Go to https://x.org, then www.y.org!", "GO TO https://x.org, THEN www.y.org!"),
        (
            "See (https://example.com/a) and [www.python.org].",
            "SEE (https://example.com/a) AND [www.python.org].",
        ),
        ("Email: <anna@example.org> now.", "EMAIL: <anna@example.org> NOW"),
        ("Read https://x.org/a.pdf; then sleep.", "READ https://x.org/a.pdf; THEN SLEEP"),
        ("Hello\u00a0https://x.org\u00a0now.", "HELLO\u00a0https://x.org\u00a0NOW"),
        ("Write to a@b.de or c@d.de today.", "WRITE TO a@b.de OR c@d.de TODAY"),
    ],
)
def test_punctuation_and_spacing_beside_an_address_are_kept(sentence, expected):
    """A run ", then " went to the model whole: it dropped the comma and the space, and the
    address ran into the next word ("https://x.orgDann"); brackets around an address were lost."""
    assert by_runs(sentence) == expected


@pytest.mark.parametrize(
    ("sentence", "address"),
    [
        ("Contact: mailto:anna@example.org please.", "mailto:anna@example.org"),
        ("Clone ssh://git@github.com/a/b.git today.", "ssh://git@github.com/a/b.git"),
        ("Open file:///etc/hosts now.", "file:///etc/hosts"),
        ("Try sftp://files.example.com/in now.", "sftp://files.example.com/in"),
        ("Use wss://example.com/socket now.", "wss://example.com/socket"),
    ],
)
def test_an_address_with_any_scheme_or_mailto_is_kept_whole(sentence, address):
    """Only http, https and ftp were recognised: "mailto:" was translated (and lost), and in
    ssh://git@github.com/a/b.git only the "e-mail address" in the middle was kept."""
    spans = verbatim_spans(sentence)
    assert [sentence[a:b] for a, b in spans] == [address]
    assert address in by_runs(sentence)


@pytest.mark.parametrize("after", ["\u2026", "\u201c", "\u201d", "\u00bb", "\u2019", "\u00ab"])
def test_an_ellipsis_or_a_typographic_quote_after_an_address_is_not_part_of_it(after):
    text = f"Siehe \u201ehttps://x.org/a{after} und mehr"
    assert [text[a:b] for a, b in verbatim_spans(text)] == ["https://x.org/a"]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Open setup.py and edit it.", ["setup.py"]),
        ("Read README.md.", ["README.md"]),
        ("Edit src/app/main.py, then run it.", ["src/app/main.py"]),
        ("The archive (data.tar.gz) is big.", ["data.tar.gz"]),
        ("Send the report.final.docx and photo.JPG files.", ["report.final.docx", "photo.JPG"]),
        ("Node.js is fast.", ["Node.js"]),
        ("d.h. es geht, z.B. hier, e.g. this, i.e. that.", []),  # abbreviations
        ("Visit example.com or example.net.", []),  # domains: words a model keeps anyway
        ("Version 3.14 weighs 2.5 GB.", []),
        ("See www.example.com/a.pdf now.", ["www.example.com/a.pdf"]),  # one address
    ],
)
def test_a_file_name_is_kept_as_written(text, found):
    """A model translated a file's name as words: "Open setup.py and edit it." gave "Öffnen
    Sie sich.", and an EPUB chapter titled by its file, "ch001.xhtml", "Knöcher."."""
    assert [text[a:b] for a, b in verbatim_spans(text)] == found
    for name in found:
        assert name in by_runs(text)
    builder = UnitBuilder()
    builder.text("ch001.xhtml")
    assert builder.build() is None  # nothing to send


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Ping 192.168.0.1 now.", ["192.168.0.1"]),
        ("Connect to 10.0.0.7:8080, then wait.", ["10.0.0.7:8080"]),
        ("Version 1.2.3 is out.", []),  # three numbers: a version, not an address
        ("Section 1.2.3.4.5 says so.", []),
    ],
)
def test_an_ipv4_address_is_kept_as_written(text, found):
    """The model turned "Ping 192.168.0.1 now." into "Im 198 99."."""
    assert [text[a:b] for a, b in verbatim_spans(text)] == found
    for address in found:
        assert f" {address}" in by_runs(text)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Write to user@localhost today.", ["user@localhost"]),
        ("Ask admin@intranet, then wait.", ["admin@intranet"]),
        ("Mail first.last@intranet now.", ["first.last@intranet"]),
        ("Contact mailto:it@hq please.", ["mailto:it@hq"]),
        ("Open http://intranet/wiki now.", ["http://intranet/wiki"]),  # as before
        ("Thanks @anna and @bob for this.", []),  # mentions: no local part
        ("The pair a@b is fine, so is x@yz.", []),  # too short to be an address
        ("Hola amig@s, tod@s y l@s niñ@s.", []),  # Spanish for both genders
        ("Pay 3@5 euros, not 2@home.", []),  # from a digit, or a one-character local part
    ],
)
def test_an_e_mail_address_whose_host_has_no_dot_is_kept_as_written(text, found):
    """user@example.com was copied as written, user@localhost and admin@intranet translated
    (while http://intranet/ was kept); words with an @ in prose are still translated."""
    assert [text[a:b] for a, b in verbatim_spans(text)] == found
    for address in found:
        assert f" {address}" in by_runs(text)


def test_a_word_before_a_url_is_not_taken_for_its_scheme():
    text = "See.https://x.org now"
    assert [text[a:b] for a, b in verbatim_spans(text)] == ["https://x.org"]


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("I am here. https://www.zeitung.de/nachrichten/politik/bundestag-wahl-heute-abend", "en"),
        ("Ich bin hier: https://www.example.com/the-quick-brown-fox-jumps-over-the-lazy-dog", "de"),
        ("Please write to hans.mueller.bundesverwaltungsamt@verwaltung.bund.de", "en"),
    ],
)
def test_an_address_does_not_decide_the_language_of_a_text(text, language):
    """With source "auto" the words of a URL outweighed the sentence: "I am here. <a German
    newspaper's URL>" was taken for German and came back untranslated."""
    from app.detect import Detector
    from app.translate import visible_texts

    detector = Detector(["en", "de"])
    assert detector.rank(visible_texts([text], "text")[0])[0][0] == language
    assert visible_texts(["https://x.org"], "text") == ["https://x.org"]  # nothing else: as is


def test_a_trademark_sign_after_a_word_without_a_capital_is_copied_alone():
    text = "Our brand™ is great."
    assert [text[a:b] for a, b in verbatim_spans(text)] == ["™"]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("I love 🍕 and 👩\u200d👩\u200d👧.", ["🍕", "👩\u200d👩\u200d👧"]),  # a family: one
        ("Thank you 🙏🏽!", ["🙏🏽"]),  # with its skin tone
        ("🇩🇪 and 🇫🇷 are neighbours.", ["🇩🇪", "🇫🇷"]),  # flags: two regional indicators
        ("Press 1\ufe0f\u20e3 or #\ufe0f\u20e3 now", ["1\ufe0f\u20e3", "#\ufe0f\u20e3"]),
        ("Love ❤\ufe0f, coffee ☕ and ⌛.", ["❤\ufe0f", "☕", "⌛"]),
        ("Happy birthday 🎉🎂 to you, 😀 😀!", ["🎉🎂", "😀 😀"]),  # side by side: one span
        ("©\ufe0f 2024 and © 2024, ▶\ufe0f play", ["©\ufe0f", "©", "▶\ufe0f"]),  # with U+FE0F
        # marks the vocabularies lack: ©, notes, and ® or ™ with the name they mark; a
        # section's sign is text
        ("Windows® and iPhone™ too ♪ see § 5", ["Windows®", "iPhone™", "♪"]),
        ("Das Hotel hat 5★ und ist toll.", []),  # a star without it is text, as before
        ("Press 1\u20e3 now", ["1\u20e3"]),  # a keycap without U+FE0F
        (
            "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f rocks",
            ["🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"],
        ),
        ("See https://x.org/🍕 and 🍕🍺", ["https://x.org/🍕", "🍕🍺"]),  # the URL's own
        ("See https://x.org/🍕 🍕 now", ["https://x.org/🍕", "🍕"]),  # and one after it
        ("Grüße aus Köln — 10 € · 5 % → fertig", []),  # letters, currency, dashes: words
    ],
)
def test_emoji_are_copied_as_written(text, found):
    """A model of words has no token for an emoji: a small one read its bytes as the start of a
    word ("I love pizza 🍕." gave "Ich liebe Pizzaschreibbungsbeschreibung.")."""
    assert [text[a:b] for a, b in verbatim_spans(text)] == found
    if found:
        words = by_runs(text)
        assert [words[a:b] for a, b in verbatim_spans(words)] == found


@pytest.mark.parametrize(
    "sentence", ["⚠\ufe0f The door is open.", "✅ Done.", "🔥 Hot deals today!", "😀 😀 Hi there."]
)
def test_an_emoji_before_the_words_is_not_named_in_the_sentence(sentence):
    """A name stands in for an emoji inside the words ("I love Tom and Boston."), not before
    them: "Tom The door is open." gave "Tom schloss die Tür." (as for an icon's markup)."""
    builder = UnitBuilder()
    builder.text(sentence)
    unit = builder.build(whole=False)
    assert unit is not None
    words = sentence.split(" ", 1 + sentence.startswith("😀"))[-1]
    assert unit.requests == [words]
    # nor after a list's bullet or number: they are no words ("• Tom Done.")
    for lead in ("• ", "1. ", "- ", "(2) ", "» "):
        builder = UnitBuilder()
        builder.text(lead + sentence)
        listed = builder.build(whole=False)
        assert listed is not None and listed.requests == [words]


def test_an_emoji_after_a_count_stands_in_the_sentence():
    """A number before an emoji counts it ("5 🍕 for the team"): the sentence goes whole, a
    name in the emoji's place, as for one inside the words."""
    builder = UnitBuilder()
    builder.text("5 🍕 for the team.")
    unit = builder.build(whole=False)
    assert unit is not None and unit.requests[0] == "5 Tom for the team."


@pytest.mark.parametrize("kept", ["https://x.org", "🍕", "<code>x</code>"])
def test_the_space_between_a_pair_and_what_is_kept_after_it_stays(kept):
    """Translated by runs (the model gives back no name for what is kept), the space after a
    closing tag and before an address, an emoji or an atom stayed out ("Ich liebe
    <b>Pizza</b>🍕 und Tee.")."""
    from app.html_format import translate_html

    def runs(texts: list[str]) -> list[str]:
        return [words_only(t) for t in texts]

    out = translate_html(f"<p>I love <b>pizza</b> {kept} and tea.</p>", runs)
    assert out == f"<p>I LOVE <b>PIZZA</b> {kept} AND TEA</p>"
    out = translate_html(f"<p>I love <b>pizza</b>{kept} and tea.</p>", runs)
    assert out == f"<p>I LOVE <b>PIZZA</b>{kept} AND TEA</p>"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Dear <FirstName>, thank you for your order.", ["<FirstName>"]),
        ("You have {count} new messages.", ["{count}"]),
        ("Hello {{ user.name }}!", ["{{ user.name }}"]),
        ("Total: {0} of {total:.2f} EUR.", ["{0}", "{total:.2f}"]),
        ("Hi ${name}, see %s and %(count)d or %1$s.", ["${name}", "%s", "%(count)d", "%1$s"]),
        # a percentage, a bracket of words, an empty pair, code: no placeholder
        ("We are 100% sure, 50%s off.", []),
        ("Braces {like this} or {} stay text.", []),
        ("call f(x) {return 1}", []),
        # the inline placeholders app/formats/inline.py sends are its own
        ("A <g1>bold</g1> word <x2/>.", []),
    ],
)
def test_a_templates_placeholder_is_kept_as_written(text, found):
    """A placeholder that software fills in was translated as words, or its brackets read as
    bytes: "Dear <FirstName>, thank you for your order." gave "Streiche HABEN TOM, danke für
    Ihre Bestellung." with weights/en-de; now "Gut <FirstName>, danke für Ihre Bestellung."."""
    assert [text[a:b] for a, b in verbatim_spans(text)] == found
    if found:
        out = by_runs(text)
        for placeholder in found:
            assert out.count(placeholder) == 1, out
