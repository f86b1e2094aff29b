"""Currency symbols, degrees and "&" spelled as words the model knows (model_core/symbols.py,
`MT_SPELL_SYMBOLS`): the shipped en-de model gave "Es kostete 20 Jährlich." for "It costs
€20." and "Es ist heute 25 Übel." for "It is 25°C today."."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from model_core.symbols import spell
from tests.service_helpers import serve_in_thread

WEIGHTS = Path(__file__).resolve().parent.parent / "weights"


@pytest.mark.parametrize(
    ("text", "spelled"),
    [
        ("It costs €20.", "It costs 20 euros."),
        ("It costs 20 €.", "It costs 20 euros."),
        ("It costs 20\u00a0€.", "It costs 20 euros."),
        ("Only €1 and £3.50 and ¥500.", "Only 1 euro and 3.50 pounds and 500 yen."),
        ("She earns €2,000 a month.", "She earns 2,000 euros a month."),
        ("They raised €5m, then €2 bn and €3.5 million.",
         "They raised 5 million euros, then 2 billion euros and 3.5 million euros."),
        ("It is 25°C, 77 °F, then 1°; turn it 90°.",
         "It is 25 degrees Celsius, 77 degrees Fahrenheit, then 1 degree; turn it 90 degrees."),
        ("It was -5°C.", "It was -5 degrees Celsius."),
        # between words, not in a name of initials or joined
        ("Tom & Jerry, AT&T, R&D and B & B.", "Tom and Jerry, AT&T, R&D and B & B."),
        # a sentence's full stop after a multiplier stays the sentence's
        ("It cost €5m. Then €20k, €5 k.",
         "It cost 5 million euros. Then 20 thousand euros, 5 thousand euros."),
        # dollar signs of shell or TeX, a group of digits after a space: as written
        ("Type `echo $1` for $5.", "Type `echo $1` for $5."),
        ("If $x = 5$ then $2$ holds.", "If $x = 5$ then $2$ holds."),
        ("It costs €1 000.", "It costs €1 000."),
        ("It costs $20, not $1.", "It costs 20 dollars, not 1 dollar."),
        # a symbol without a number, inside a word or joined to one: as written
        ("Prices in € vary; ref €20x, US$5.", "Prices in € vary; ref €20x, US$5."),
    ],
)  # fmt: skip
def test_english_symbols_are_spelled(text, spelled):
    assert spell(text, "en") == spelled


def test_german_symbols_are_spelled_as_german_writes_them():
    text = "Das kostet 20 €, 5 Mio. € und 2,50 £; heute 25 °C. Tom & Maria."
    assert spell(text, "de") == (
        "Das kostet 20 Euro, 5 Millionen Euro und 2,50 Pfund; heute 25 Grad Celsius. Tom und Maria."
    )


@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize(
    "times", ["k", "m", "mn", "bn", "Mio.", "Mrd.", "million", "billion", "Millionen", "Milliarden"]
)
def test_every_multiplier_is_spelled_in_either_language(language, times):
    """("€5 Millionen" in an English text was a KeyError: a 500.)"""
    for text in (f"It was €5 {times} in all.", f"It was 5 {times} € in all."):
        out = spell(text, language)
        assert "€" not in out and out.startswith("It was 5 ") and out.endswith(" in all."), out


def test_the_full_stop_after_mio_before_a_capital_stays_the_sentences():
    text = "Der Umsatz lag bei €5 Mio. Das ist viel. Es waren 5 Mio. € mehr."
    assert spell(text, "de") == (
        "Der Umsatz lag bei 5 Millionen Euro. Das ist viel. Es waren 5 Millionen Euro mehr."
    )


def test_a_language_without_the_words_is_left_as_it_is():
    assert spell("Il coûte 20 € & plus.", "fr") == "Il coûte 20 € & plus."


@pytest.mark.parametrize("spell_symbols", [True, False])
def test_the_service_translates_prices_and_temperatures(spell_symbols):
    texts = ["It costs €20.", "The bill was £20.", "It is 25°C today.", "Tom & Mary are friends."]
    with serve_in_thread(WEIGHTS, warmup=False, spell_symbols=spell_symbols) as (url, _):
        body = {"q": texts, "source": "en", "target": "de"}
        out = httpx.post(f"{url}/translate", json=body, timeout=60).json()["translatedText"]
        back = httpx.post(
            f"{url}/translate",
            json={"q": "Das kostet 20 €.", "source": "de", "target": "en"},
            timeout=60,
        ).json()["translatedText"]
    wanted = ["20 Euro", "20 Pfund", "25 Grad", "Tom und Maria"]
    held = [w in t for w, t in zip(wanted, out, strict=True)]
    if spell_symbols:
        assert all(held), out
        assert "20 euros" in back, back
    else:  # what the model gave the symbols
        assert not any(held), out
        assert "euro" not in back, back
