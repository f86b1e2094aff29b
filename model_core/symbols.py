"""Symbols a model of everyday sentences never learned, spelled as the words it knows.

The shipped models learned from sentences that write "20 euros" and "25 degrees", not "€20",
"20 €" or "25°C": given those, the en-de model wrote "Es kostete 20 Jährlich." (it has a
piece for "€" but saw it too rarely), "Die Rechnung wurde zwährlich anschwänglich." for "The
bill was £20." (the vocabulary has no "£": its bytes), "Es ist heute 25 Übel." for "It is 25°C
today." and "Tom ist in Jerry, um Freunde zu sein." for "Tom & Jerry are friends."; the de-en
model dropped the currency of "Das kostet 20 €.". Spelled, the same sentences come back as
"Es kostet 20 Euro.", "Die Rechnung war 20 Pfund.", "Es ist heute 25 Grad Celsius." and "Tom
und Jerry sind Freunde.", which is how a translator writes them in words.

`spell` rewrites, in a text of a language it has the words for (English, German):

- a currency symbol before or after a number ("€20", "20 €", "£3.50", "$20", "¥500", "€5m",
  "€20k") as the number and the currency's word after it ("20 euros", "3.50 pounds", "5
  million euros", "20 thousand euros"; "It costs $20." gave "Es kostet zweihundert Dollar.",
  "20 dollars" "20 Dollar"); not one joined to a word before it ("US$20", "A$5");
- degrees after a number ("25°C", "25 °F", "90°") as words ("25 degrees Celsius");
- an ampersand between words, with spaces around it ("Tom & Jerry"), as "and"; not between
  two capitals alone ("H & M", "B & B"), nor joined ("AT&T").

Not a dollar sign in a sentence that looks like shell or TeX: with a backquote, or with "$"
after a word, a digit or "}" ("echo `$1`", "$x = 5$", "US$5": then no "$" of the sentence).
A number with a multiplier, which a model may write out in digits ("20.000 Euro" for "20
thousand euros"), is never put back (`verbatim.put_back`). Texts in other languages are sent
as written. Models trained on larger
corpora (OPUS-MT's) know the symbols, and read the words as well; `MT_SPELL_SYMBOLS=false`
sends the symbols as written.
"""

from __future__ import annotations

import re

#: per language: each currency symbol's word, singular and plural
_CURRENCIES: dict[str, dict[str, tuple[str, str]]] = {
    "en": {
        "$": ("dollar", "dollars"),
        "€": ("euro", "euros"),
        "£": ("pound", "pounds"),
        "¥": ("yen", "yen"),
        "₹": ("rupee", "rupees"),
        "₽": ("rouble", "roubles"),
        "₩": ("won", "won"),
        "₺": ("lira", "lira"),
        "₪": ("shekel", "shekels"),
        "₴": ("hryvnia", "hryvnias"),
        "₱": ("peso", "pesos"),
    },
    "de": {
        "$": ("Dollar", "Dollar"),
        "€": ("Euro", "Euro"),
        "£": ("Pfund", "Pfund"),
        "¥": ("Yen", "Yen"),
        "₹": ("Rupie", "Rupien"),
        "₽": ("Rubel", "Rubel"),
        "₩": ("Won", "Won"),
        "₺": ("Lira", "Lira"),
        "₪": ("Schekel", "Schekel"),
        "₴": ("Hrywnja", "Hrywnja"),
        "₱": ("Peso", "Pesos"),
    },
}
#: an amount's multiplier as written ("€5m", "€2 bn", "5 Mio. €", "€3.5 million") -> its power
_POWERS = {
    "k": 3,
    "m": 6,
    "mn": 6,
    "mio": 6,
    "million": 6,
    "millionen": 6,
    "bn": 9,
    "mrd": 9,
    "billion": 9,
    "milliarden": 9,
}
#: per language: the words for a multiplier (by its power), for degrees and for "&"
_WORDS: dict[str, dict[str | int, str]] = {
    "en": {
        3: "thousand",
        6: "million",
        9: "billion",
        "°": "degrees",
        "°1": "degree",
        "C": "Celsius",
        "F": "Fahrenheit",
        "&": "and",
    },
    "de": {
        3: "tausend",
        6: "Millionen",
        9: "Milliarden",
        "°": "Grad",
        "°1": "Grad",
        "C": "Celsius",
        "F": "Fahrenheit",
        "&": "und",
    },
}
_SYMBOLS = "$€£¥₹₽₩₺₪₴₱"
#: an amount: digits, with groups of three after a mark or a narrow space, and decimals; not
#: one before a group of digits after a space ("€1 000": left as written), nor one starting
#: inside another's groups (each group of "1\u00a0000\u00a0000..." tried as a start took
#: seconds)
_NUMBER = (
    r"(?<![\w.,])(?<!\d[\u00a0\u202f'\u2019])"
    r"\d+(?:[.,'\u2019\u00a0\u202f]\d{3})*(?:[.,]\d+)?(?![.,]?\d| \d)"
)
#: a multiplier after an amount: "€20k", "€5m", "€2 bn", "€3.5 million", "5 Mio. €" (the dot
#: of German's "Mio."/"Mrd." only before a currency, a word in lower case or a digit: before a
#: capital, as before the text's end, it may end the sentence)
_TIMES = (
    r"(?:\s?(?P<times>k|m|mn|bn|mio|mrd)"
    rf"(?:(?<=[od])\.(?=[ \u00a0]*(?-i:[a-zäöüß\d]|[{re.escape(_SYMBOLS)}])))?(?![\w])"
    r"|\s(?P<word>million|billion|millionen|milliarden)\b)?"
)
#: a dollar sign of shell or TeX rather than a price: in a text with a backquote or with "$"
#: right after a word or a digit ("$x = 5$", "print $2}")
_NOT_DOLLARS = re.compile(r"`|[\w}]\$")
_BEFORE = re.compile(
    rf"(?<![\w$])(?P<symbol>[{re.escape(_SYMBOLS)}])\s?(?P<number>{_NUMBER}){_TIMES}(?![\w}}])",
    re.I,
)
_AFTER = re.compile(
    rf"(?P<number>{_NUMBER}){_TIMES}[ \u00a0\u202f]?(?P<symbol>[{re.escape(_SYMBOLS)}])(?![\w])",
    re.I,
)
_DEGREES = re.compile(
    rf"(?P<number>{_NUMBER})[ \u00a0\u202f]?(?:°[ \u00a0\u202f]?(?P<scale>[CF])?"
    rf"|(?P<unit>[℃℉]))(?![\w])"
)
#: "&" between words, but between two capitals alone ("H & M", "R & D": a name's)
_AMPERSAND = re.compile(r"(?<=\w) & (?=\w)")
_INITIALS = re.compile(r"(?<!\w)[A-Z] & [A-Z](?!\w)")
#: any character `spell` may spell (most texts have none: returned at once)
_ANY = re.compile(rf"[{re.escape(_SYMBOLS)}°℃℉&]")


def spell(text: str, language: str) -> str:
    """`text` with currency symbols by numbers, degrees and "&" between words spelled as
    `language`'s words (the module's docstring); as it is in another language."""
    language = language[:2].lower()
    words = _WORDS.get(language)
    if words is None or not _ANY.search(text):
        return text
    currencies = _CURRENCIES[language]
    if _NOT_DOLLARS.search(text):
        currencies = {k: v for k, v in currencies.items() if k != "$"}

    def amount(m: re.Match[str]) -> str:
        number = m.group("number")
        times = (m.group("times") or m.group("word") or "").lower()
        if m.group("symbol") not in currencies:
            return m.group()
        one, many = currencies[m.group("symbol")]
        if times:
            return f"{number} {words[_POWERS[times]]} {many}"
        return f"{number} {one if number == '1' else many}"

    def degrees(m: re.Match[str]) -> str:
        number = m.group("number")
        scale = m.group("scale") or {"℃": "C", "℉": "F"}.get(m.group("unit") or "")
        out = f"{number} {words['°1' if number == '1' else '°']}"
        return f"{out} {words[scale]}" if scale else out

    text = _BEFORE.sub(amount, text)
    text = _AFTER.sub(amount, text)
    text = _DEGREES.sub(degrees, text)
    initials = {m.start() + 1 for m in _INITIALS.finditer(text)}
    return _AMPERSAND.sub(lambda m: m.group() if m.start() in initials else f" {words['&']} ", text)
