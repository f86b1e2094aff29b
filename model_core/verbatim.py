"""Numbers and names kept as the source writes them.

Corpora of everyday sentences write few numbers in digits (1% of the Tatoeba pairs the shipped
models learned from) and few names but the same dozen ("Tom", "Mary"), and a small model
copies what it has not learned badly: the shipped en-de model gave "in 2099" for "in 2019",
"125 Dollar" for "12.50 dollars", "um 552" for "at 555-1234", "zweiundzwanzig Minuten in drei
Minuten" for "27 points in 36 minutes", "Jano" for "Jane Doe" and "Da und Läkan" for "Anna and
Lukas". A model copies a number or a name it knows well more reliably than one it has to
spell, and the sentence around it keeps its grammar when a number or a name still stands
where one was.

So a sentence with such numbers or names is translated twice, as written and with each number
of two digits or more (or with a sign or separators: "-5", "2:30", "12.50", "555-1234",
"5-10") replaced by a stand-in number of `STAND_INS`, and each name the model's vocabulary
does not know (`Truecaser.names`: "Jane Doe", "Hoffmann" in "Professor Hoffmann") by a stand-in
name of `NAME_STAND_INS`, each one it does not hold; and of the two translations (`keep`):

1. the one as written, where it holds each such number of the source and no other (compared
   by value, `_key`: "12,50" for "12.50", "3.400" for "3,400" and "2.30 Uhr" for "2:30"
   count, as the model may write a number as its language does; "275" for "2.75" does not),
   and each such name as written;
2. else the stand-in translation, where each stand-in comes back exactly once (and the
   numbers then hold as in 1.): each is replaced by what it stands for, as the source writes
   it;
3. else the one as written with its numbers put back (`put_back`: each that is one of the
   source's by value stays, the others take the source's missing numbers in order, where as
   many are missing), where it holds each name;
4. else the stand-in translation with the stand-ins that came back once given back and its
   other numbers put back so, where each stand-in name came back once;
5. else the one as written with its numbers put back;
6. else the one as written.

With names alone kept (numbers left to the model): the one as written where it holds the
names, else the stand-in one where each came back once, else the one as written.

A number given back (2. to 5.) is written as the target language writes numbers, where its
decimal and thousands' marks differ from the source language's (`notation`: English to
German, "12.50" as "12,50" and "3,400" as "3.400"; German to English, "3.400" as "3,400",
which an English reader would read as 3.4).

A place the target language names otherwise (`places`: a country, a region or a city that
names a time zone in the Unicode CLDR) is held by a translation that names it so ("Wir wohnen
in Schweden." holds "Sweden": the model knew it), and a city of one word given back from a
stand-in is given in the target language's name ("Wien" for "Vienna").

docs/BENCHMARKS.md section 9 measures it on sentences written for the purpose
(bench/data/*_eval.*).

A number of one digit is left to the model (a stand-in would change "1 dollar" into a plural);
one inside a word ("MP3", "2nd", "COVID-19"), or a placeholder's (`<x1/>`), is no number here.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

#: the names that stand in for names the model does not know (Truecaser.names): those the
#: shipped models copied most reliably (docs/BENCHMARKS.md section 8; app/formats/inline.py
#: has them stand in for markup)
NAME_STAND_INS = ("Tom", "Paris", "Boston")
#: the numbers that stand in for the source's: two-digit numbers the shipped models copied
#: in 19 or 20 of 20 sentence frames each ("It costs {} dollars.", "I was born in {}.", ...),
#: in both directions, where others (100, 300, 1990) came back as words or misspelt
STAND_INS = ("38", "70", "78", "42", "72", "35", "16", "27")
#: a number: digits, with a sign before them (not after a letter or a digit) and separators
#: between groups of them ("12.50", "3,400", "2:30", "555-1234", "14/03/2024", "5-10", "12 500"
#: with a narrow space, "+49 30 1234567", "0171 2345678"); not inside a word, a decimal or a
#: placeholder
NUMBER = re.compile(
    r"(?<![\w.,:/'\u2019+\-\u2212])"
    # a telephone number, its groups apart: international ("+49 30 1234567") or with the
    # trunk prefix 0 and nine digits or more ("0171 2345678", "030 123 45 67"; not "0900 15")
    r"(?:\+\d{1,3}(?: \d{2,})+|0(?=(?:\d ?){8})\d{2,4}(?: \d{2,})+"
    # or digits, their groups joined by marks, or by a narrow or no-break space before three
    r"|[-+\u2212]?\d+(?:(?:[.,:/'\u2019-]|[\u00a0\u202f\u2009](?=\d{3}(?!\d)))\d+)*)"
    r"(?![\w]|[.,:/'\u2019-]\d)"
)


def _key(number: str) -> str:
    """A number's value as a key: its sign and digits, a group of three after a separator a
    thousands' group ("3,400" and "3.400": "3400"), any other separator a decimal mark
    ("12.50", "12,50" and "12:50": "12.50"), so that a number written as another language
    writes it is the same number, and "2.75" is not "275"."""
    sign = "-" if number[0] in "-\u2212" else ""
    groups = re.split(r"[^\d]+", number.lstrip("+-\u2212"))
    out = groups[0]
    for group in groups[1:]:
        # (after a lone 0, no thousands: "0,125" is a decimal)
        out += group if len(group) == 3 and out != "0" else "." + group
    return sign + out


def _guarded(number: str) -> bool:
    """Whether a number of the source gets a stand-in: two digits or more, or a sign."""
    return not (len(number) == 1 and number.isdigit())


def has_numbers(text: str) -> bool:
    """Whether `text` holds a number to keep (two digits or more, or a sign)."""
    return any(_guarded(n) for n in NUMBER.findall(text))


def protect(
    text: str, numbers: bool = True, names: Sequence[tuple[int, int]] = ()
) -> tuple[str, dict[str, str]]:
    """`text` with each number of two digits or more (`numbers`) and each span of `names`
    (Truecaser.names) replaced by a stand-in it does not hold (while any is left), and
    {stand-in: what it stands for, as written}; ({}: nothing to replace)."""
    held = set(re.findall(r"\d+", text))
    free = [s for s in STAND_INS if s not in held]
    free_names = [n for n in NAME_STAND_INS if not _as_word(n).search(text)]
    stand_ins: dict[str, str] = {}
    spans = [(*span, "name") for span in names]
    if numbers:
        spans += [(*m.span(), "number") for m in NUMBER.finditer(text) if _guarded(m.group())]
    out, at = [], 0
    for start, end, what in sorted(spans):
        pool = free if what == "number" else free_names
        if start < at or not pool:
            continue
        stand_in = pool.pop(0)
        stand_ins[stand_in] = text[start:end]
        out += [text[at:start], stand_in]
        at = end
    return ("".join(out) + text[at:], stand_ins) if stand_ins else (text, {})


def _as_word(name: str) -> re.Pattern[str]:
    """`name` as a word of a text (not inside another, nor joined to one by a hyphen)."""
    return re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")


def _keys(text: str) -> list[str]:
    """The keys of the numbers to keep in `text`, sorted."""
    return sorted(_key(n) for n in NUMBER.findall(text) if _guarded(n))


def holds_numbers(source: str, translation: str) -> bool:
    """Whether `translation` holds each number of two digits or more that `source` does (by
    `_key`: "12,50" holds "12.50", "275" does not hold "2.75")."""
    return not Counter(_keys(source)) - Counter(_keys(translation))


def same_numbers(source: str, translation: str) -> bool:
    """Whether `translation` holds the numbers to keep of `source`, and no others."""
    return _keys(source) == _keys(translation)


class Places(NamedTuple):
    """The places a target language names otherwise than the source language (`places`):
    `known`, {the source's name: the target's}, and of those `given`, the names a translation
    gives where the model lost the place and a stand-in kept it."""

    known: Mapping[str, str]
    given: Mapping[str, str]


NO_PLACES = Places({}, {})


@functools.lru_cache(maxsize=1024)
def places(source: str, target: str) -> Places:
    """The places whose names differ between the languages `source` and `target` (ISO 639
    codes), from the Unicode CLDR (Babel): countries, regions and continents ("Sweden":
    "Schweden"), and the cities that name time zones ("Vienna": "Wien", "Prague": "Prag").
    A model that knows such a name translates it ("Wir wohnen in Schweden."), and its
    translation then holds the place: the name as written is no better. Given where the model
    lost it (`Places.given`): the cities of one word; not a country or an island group, whose
    name takes an article in some languages where a city's does not ("in der Schweiz": the
    stand-in's "in Paris" would give "in Schweiz"), where the source's name is kept. None for
    a language CLDR does not know, or where its data cannot be read (the names are then kept
    as written)."""
    try:
        return _places(source, target)
    except Exception:  # noqa: BLE001 (a dependency's data: without it, names as written)
        return NO_PLACES


def _places(source: str, target: str) -> Places:
    from babel import Locale  # (its data is read on the first call, at start-up)
    from babel.core import get_global

    src, tgt = Locale.parse(source), Locale.parse(target)
    if src.language == tgt.language:
        return NO_PLACES

    def clean(name: str) -> str:
        return name.replace("\u00ad", "")  # CLDR's soft hyphens ("Reyk\u00adja\u00advík")

    known: dict[str, str] = {}
    territories = set()
    for code, name in src.territories.items():
        other = tgt.territories.get(code)
        if code in ("001", "ZZ") or not other or re.search(r"[(),&]", name + other):
            continue  # the world, an unknown region; "Congo (DRC)", "Bosnia & Herzegovina"
        territories.update(clean(other).split())
        if clean(other) != clean(name):
            known[clean(name)] = clean(other)
    given: dict[str, str] = {}
    for zone in get_global("zone_territories"):
        if zone.startswith("Etc/"):
            continue

        def city(locale: Locale, zone: str = zone) -> str:
            names = locale.time_zones.get(zone, {})
            return clean(names.get("city") or zone.rsplit("/", 1)[-1].replace("_", " "))

        name, other = city(src), city(tgt)
        if name == other or name in known:
            continue
        known[name] = other
        # a city of one word; not an island, a research station or a country named by its
        # zone ("Atlantic/Azores", "Antarctica/Troll", "Indian/Maldives", "Europe/Vatican")
        city_zone = zone.split("/", 1)[0] in ("Africa", "America", "Asia", "Australia", "Europe")
        if (
            city_zone
            and " " not in name + other
            and not any(word.startswith(other) for word in territories)
        ):
            given[name] = other
    return Places(MappingProxyType(known), MappingProxyType(given))  # (cached: read-only)


def _named(place: str | None, translation: str) -> bool:
    """Whether `translation` holds the name `place`, as a word (or its genitive in "s")."""
    return place is not None and bool(
        re.search(rf"(?<![\w-]){re.escape(place)}s?(?![\w-])", translation)
    )


def holds_names(names: Iterable[str], translation: str, place_names: Places = NO_PLACES) -> bool:
    """Whether `translation` holds each of `names` as written, as a word, or a place's name
    as the target language writes it (`place_names`: `places`)."""
    return all(
        _as_word(name).search(translation) or _named(place_names.known.get(name), translation)
        for name in names
    )


def _found(translation: str, stand_ins: dict[str, str]) -> list[tuple[int, int, str, str]]:
    """(start, end, stand-in, suffix) of each stand-in in `translation`, in order; a stand-in
    name with an "s" after it is the name's genitive ("Toms Brief": "Priyas Brief")."""
    found = [(m.start(), m.end(), m.group(), "") for m in NUMBER.finditer(translation)]
    found = [f for f in found if f[2] in stand_ins]
    for name in (k for k in stand_ins if not k[0].isdigit()):
        pattern = rf"(?<![\w-]){re.escape(name)}(s?)(?![\w-])"
        found += [(m.start(), m.end(), name, m.group(1)) for m in re.finditer(pattern, translation)]
    return sorted(found)


def _replaced(
    translation: str,
    found: list[tuple[int, int, str, str]],
    stand_ins: dict[str, str],
    write: Callable[[str], str],
    place_names: Places = NO_PLACES,
) -> str:
    out, at = [], 0
    for start, end, stand_in, suffix in found:
        was = stand_ins[stand_in]
        # (a city as the target language names it: "Wien" for "Vienna")
        was = write(was) if stand_in[0].isdigit() else place_names.given.get(was, was)
        if suffix and was[-1:].lower() in "sxzß":  # German writes "Marcus' Auto"
            suffix = "'"
        out += [translation[at:start], was + suffix]
        at = end
    return "".join(out) + translation[at:]


def restore(
    translation: str,
    stand_ins: dict[str, str],
    write: Callable[[str], str] = str,
    place_names: Places = NO_PLACES,
) -> str | None:
    """`translation` with each stand-in replaced by what it stands for (a number as `write`
    writes it: `notation`; a city as the target language names it: `place_names`), or None when one
    of them is not in it exactly once."""
    found = _found(translation, stand_ins)
    if sorted(f[2] for f in found) != sorted(stand_ins) or _debris(translation, found, stand_ins):
        return None
    return _replaced(translation, found, stand_ins, write, place_names)


def _debris(translation: str, found, stand_ins: dict[str, str]) -> bool:
    """Whether a stand-in number is in `translation` but where it was found, misspelt into a
    word or another number ("3888s" for "38")."""
    rest, at = [], 0
    for start, end, _, _ in found:
        rest.append(translation[at:start])
        at = end
    rest.append(translation[at:])
    text = " ".join(rest)
    return any(k in text for k in stand_ins if k[0].isdigit())


def restore_some(
    translation: str,
    stand_ins: dict[str, str],
    write: Callable[[str], str] = str,
    place_names: Places = NO_PLACES,
) -> str | None:
    """`translation` with each stand-in that is in it exactly once replaced by what it stands
    for (a number's lost or misspelt stand-in left to `put_back`); None where a stand-in name
    is not in it exactly once."""
    found = _found(translation, stand_ins)
    counts = Counter(f[2] for f in found)
    if any(counts.get(k) != 1 for k in stand_ins if not k[0].isdigit()):
        return None
    found = [f for f in found if counts[f[2]] == 1]
    return _replaced(translation, found, stand_ins, write, place_names)


#: a number with a word of magnitude after it, which a translation may write out in digits
#: ("5 million euros": "5.000.000 Euro", which put back would make "5 Euro")
_MAGNITUDE = re.compile(
    r"\d\s*(?:thousands?|millions?|billions?|trillions?|tausend|millionen|milliarden|mio|mrd"
    r"|bn|mn|k)\b",
    re.IGNORECASE,
)


def put_back(source: str, translation: str, write: Callable[[str], str] = str) -> str:
    """`translation` with the numbers that are none of the source's (by `_key`) replaced, in
    order, by the source's numbers it lacks (as `write` writes them), where there are as many
    of each; else as it is (the same object): also where a number of the source has a word of
    magnitude after it ("5 million"). (One digit too: the shipped models misspell those as
    well; a number the model converted, "18 Uhr" for "6 pm", is then put back.)"""
    if _MAGNITUDE.search(source):
        return translation
    wanted = NUMBER.findall(source)
    by_key: dict[str, list[int]] = {}  # the source's numbers of each key, by index, in order
    for i, number in enumerate(wanted):
        by_key.setdefault(_key(number), []).append(i)
    odd, held = [], set()
    for m in NUMBER.finditer(translation):
        same = by_key.get(_key(m.group()))
        if same:
            held.add(same.pop(0))
        else:
            odd.append(m)
    missing = [number for i, number in enumerate(wanted) if i not in held]
    if not odd or len(odd) != len(missing):
        return translation
    out, at = [], 0
    for m, number in zip(odd, missing, strict=True):
        out += [translation[at : m.start()], write(number)]
        at = m.end()
    return "".join(out) + translation[at:]


def keep(
    source: str,
    translation: str,
    stand_in_translation: str | None,
    stand_ins: dict[str, str],
    write: Callable[[str], str] = str,
    numbers: bool = True,
    place_names: Places = NO_PLACES,
) -> tuple[str, str]:
    """Of a translation of `source` as written and one of it with `stand_ins` (`protect`), the
    one that keeps the source's numbers and names (the module's docstring), and which it is:
    "as written", "stand-ins", "put back" (numbers, into the one as written), "put back in
    stand-ins" (into the other, its names given back) or "lost" (the one as written, which
    does not hold them). The numbers it writes are written by `write` (`notation`); with
    `numbers` False (names alone kept), the translation as written where it holds the names,
    else the stand-in one where each came back once, else the one as written. A place the
    translation names as the target language does (`place_names`, `places`: "Schweden" for
    "Sweden") is held as a name as written is."""
    names = {k: v for k, v in stand_ins.items() if not k[0].isdigit()}
    if not numbers:
        names_only = holds_names(names.values(), translation, place_names)
        restored = (
            None
            if names_only or not stand_in_translation
            else restore(stand_in_translation, stand_ins, place_names=place_names)
        )
        if restored is not None:
            return restored, "stand-ins"
        return translation, "as written" if names_only else "lost"
    fixed = _fixed(source)
    write = _but(write, fixed)
    # a number the model copied as the source writes it is written as the target language does
    translation = _localized(source, translation, write)
    named_as_written = holds_names(names.values(), translation, place_names)
    if named_as_written and same_numbers(source, translation):
        return translation, "as written"
    if stand_in_translation is not None and stand_ins:
        restored = restore(stand_in_translation, stand_ins, write, place_names)
        if restored is not None and same_numbers(source, restored):
            return restored, "stand-ins"
    # numbers put back: into the translation as written where it holds the names, else first
    # into the stand-in one with its names given back
    put = put_back(source, translation, write)
    if named_as_written and put is not translation:
        return put, "put back"
    some = (
        restore_some(stand_in_translation, stand_ins, write, place_names)
        if stand_in_translation
        else None
    )
    if some is not None and stand_ins:
        put_some = put_back(source, some, write)
        if same_numbers(source, put_some):
            return put_some, "put back in stand-ins"
    if put is not translation:
        return put, "put back"
    return translation, "lost"


def _but(write: Callable[[str], str], fixed: set[str]) -> Callable[[str], str]:
    """`write`, but for the numbers of `fixed`, written as they are."""
    return lambda number: number if number in fixed else write(number)


def _localized(source: str, translation: str, write: Callable[[str], str]) -> str:
    """`translation` with each number written exactly as `source` writes one written as
    `write` writes it ("1,200" copied into German: "1.200")."""
    numbers = set(NUMBER.findall(source))
    return NUMBER.sub(
        lambda m: write(m.group()) if m.group() in numbers else m.group(), translation
    )


#: words before a time ("at 7.45"), in English and German
_TIME_BEFORE = frozenset(
    ["at", "by", "until", "till", "from", "to", "between", "and", "around", "about", "before"]
    + ["after", "um", "ab", "bis", "gegen", "von", "zwischen", "und", "vor", "nach"]
)
#: what follows a time ("7.45 pm", "7.45 Uhr")
_TIME_AFTER = re.compile(r"\s*(?:[ap]\.?m\b\.?|uhr\b|h\b|o'clock\b|hrs?\b)", re.IGNORECASE)
#: words before the number of a version or a part ("version 3.12", "section 4.12")
_LABELS = frozenset(
    ["version", "v", "release", "section", "chapter", "part", "figure", "fig", "table"]
    + ["article", "paragraph", "step", "no", "nr", "kapitel", "abschnitt", "teil", "abbildung"]
    + ["abb", "tabelle", "artikel", "schritt", "absatz", "ziffer", "punkt"]
)


def _fixed(source: str) -> set[str]:
    """The numbers of `source` with one mark that are a time or a version rather than a
    decimal number, written as they are in any language: "7.45" after "at" or before "pm",
    "3.12" after "version", "section" or a name ("Python 3.12")."""
    fixed = set()
    for m in NUMBER.finditer(source):
        number = m.group()
        if not re.fullmatch(r"\d+[.,]\d+", number):
            continue
        words = re.findall(r"[^\W\d_][\w'.]*", source[: m.start()])
        word = words[-1].rstrip(".") if words else ""
        whole, part = re.split(r"[.,]", number)
        time = len(part) == 2 and int(whole) <= 24 and int(part) < 60
        time = time and (word.lower() in _TIME_BEFORE or bool(_TIME_AFTER.match(source, m.end())))
        right_before = source[: m.start()].endswith(" " + words[-1] + " ") if words else False
        named = right_before and word[:1].isupper() and len(words) > 1
        if time or word.lower() in _LABELS or named:
            fixed.add(number)
    return fixed


#: languages that write a decimal comma and group thousands with a point or a space (ISO 639-1)
DECIMAL_COMMA = frozenset([
    "de", "fr", "es", "it", "pt", "nl", "ru", "pl", "cs", "sk", "sl", "hr", "sr", "bs", "bg",
    "ro", "hu", "el", "tr", "uk", "be", "lt", "lv", "et", "fi", "sv", "da", "nb", "nn", "no",
    "is", "id", "vi", "ca", "eu", "gl", "af", "az", "ka", "kk", "mk", "sq", "lb",
])  # fmt: skip
#: languages that write a decimal point and group thousands with a comma
DECIMAL_POINT = frozenset([
    "en", "zh", "ja", "ko", "he", "th", "hi", "ms", "tl", "ga", "mt", "ur", "bn", "ta", "te",
    "mr", "gu", "kn", "ml", "si",
])  # fmt: skip
#: a number written with a thousands' mark and a decimal mark only
_MARKED = re.compile(r"[-+\u2212]?\d+(?:[.,]\d+)*")


def notation(source: str, target: str) -> Callable[[str], str]:
    """How a number of a `source` text is written in a `target` text: the decimal and
    thousands' marks swapped between a language of `DECIMAL_POINT` and one of
    `DECIMAL_COMMA` (en -> de: "12.50" as "12,50", "3,400" as "3.400"); where the number is
    not plainly written so (a time "7.45" in German, a version "2.13.0", a date), or the
    languages write alike or are not known here, as it is."""
    src, tgt = source.lower()[:2], target.lower()[:2]
    if (src in DECIMAL_POINT and tgt in DECIMAL_COMMA) or (
        src in DECIMAL_COMMA and tgt in DECIMAL_POINT
    ):
        point, comma = (".", ",") if src in DECIMAL_POINT else (",", ".")  # decimal, thousands
        return lambda number: _swapped(number, point, comma)
    return str


def _swapped(number: str, decimal: str, thousands: str) -> str:
    """`number` with its `decimal` and `thousands` marks swapped, where it is written with
    them plainly: thousands' marks each before three digits, then one decimal mark at most."""
    if not _MARKED.fullmatch(number) or ("," not in number and "." not in number):
        return number
    parts = re.split(r"([.,])", number)
    marks = parts[1::2]
    if marks.count(decimal) > 1 or (decimal in marks and marks[-1] != decimal):
        return number
    groups = parts[2::2]
    if any(m == thousands and len(g) != 3 for m, g in zip(marks, groups, strict=True)):
        return number
    return number.translate(str.maketrans(decimal + thousands, thousands + decimal))
