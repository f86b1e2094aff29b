"""Numbers kept as the source writes them.

Corpora of everyday sentences write few numbers in digits (1% of the Tatoeba pairs the shipped
models learned from), and a small model copies digits badly: the shipped en-de model gave
"in 2099" for "in 2019", "125 Dollar" for "12.50 dollars", "um 552" for "at 555-1234", and
"zweiundzwanzig Minuten in drei Minuten" for "27 points in 36 minutes". A model copies a
number it knows well as a unit of its vocabulary more reliably than an arbitrary one, and the
sentence around it keeps its grammar when a number still stands where the number was.

So a sentence with numbers is translated twice, as written and with each number of two digits
or more (or with a sign or separators: "-5", "2:30", "12.50", "555-1234", "5-10") replaced by a
stand-in number of `STAND_INS` that it does not hold, and of the two translations
(`keep_numbers`):

1. the one as written, where it holds each such number of the source (compared by sign and
   digits, so that "12,50" for "12.50" and "2.30 Uhr" for "2:30" count: the model may write a
   number as its language does);
2. else the stand-in translation, where each stand-in comes back exactly once: each is
   replaced by the number it stands for, as the source writes it;
3. else the one as written with its numbers replaced, in order, by the source's, where it
   holds as many numbers as the source (all of them, one digit too);
4. else the stand-in translation so, where it holds as many;
5. else the one as written.

On 120 sentences with numbers written for the purpose (bench/data/numbers_eval.*), the shipped
models' translations held each number of the source (by sign and digits) in 25 (en-de) and 28
(de-en) of the 119 that have one to keep, and 86 and 95 with this, of which 43 and 46 by
putting numbers back in order, which may put one in the wrong place (docs/BENCHMARKS.md
section 9).

A number of one digit is left to the model (a stand-in would change "1 dollar" into a plural);
one inside a word ("MP3", "2nd", "COVID-19"), or a placeholder's (`<x1/>`), is no number here.
"""

from __future__ import annotations

import re

#: the numbers that stand in for the source's: two-digit numbers the shipped models copied
#: most reliably in 20 sentence frames each, in both directions (docs/BENCHMARKS.md section 9)
STAND_INS = ("38", "70", "78", "42", "72", "35", "16", "27")
#: a number: digits, with a sign before them (not after a letter or a digit) and separators
#: between groups of them ("12.50", "3,400", "2:30", "555-1234", "14/03/2024", "5-10"); not
#: inside a word, a decimal or a placeholder
NUMBER = re.compile(
    r"(?<![\w.,:/'\u2019+\-\u2212])[-+\u2212]?\d+(?:[.,:/'\u2019-]\d+)*(?![\w]|[.,:/'\u2019-]\d)"
)


def _key(number: str) -> str:
    """A number's sign and digits: "12,50" and "12.50" are one number."""
    sign = "-" if number[0] in "-\u2212" else ""
    return sign + re.sub(r"\D", "", number)


def _guarded(number: str) -> bool:
    """Whether a number of the source gets a stand-in: two digits or more, or a sign."""
    return not (len(number) == 1 and number.isdigit())


def protect(text: str) -> tuple[str, dict[str, str]]:
    """`text` with each number of two digits or more replaced by a stand-in it does not hold
    (while any is left), and {stand-in: the number as written}; ({}: nothing to replace)."""
    held = set(re.findall(r"\d+", text))
    free = [s for s in STAND_INS if s not in held]
    stand_ins: dict[str, str] = {}

    def replace(m: re.Match[str]) -> str:
        number = m.group()
        if not free or not _guarded(number):
            return number
        stand_in = free.pop(0)
        stand_ins[stand_in] = number
        return stand_in

    protected = NUMBER.sub(replace, text)
    return (protected, stand_ins) if stand_ins else (text, {})


def holds_numbers(source: str, translation: str) -> bool:
    """Whether `translation` holds each number of two digits or more that `source` does."""
    have = [_key(n) for n in NUMBER.findall(translation)]
    for number in NUMBER.findall(source):
        if not _guarded(number):
            continue
        key = _key(number)
        if key not in have:
            return False
        have.remove(key)
    return True


def restore(translation: str, stand_ins: dict[str, str]) -> str | None:
    """`translation` with each stand-in replaced by its number, or None when one of them is
    not in it exactly once."""
    found = [m for m in NUMBER.finditer(translation) if m.group() in stand_ins]
    if sorted(m.group() for m in found) != sorted(stand_ins):
        return None
    out, at = [], 0
    for m in found:
        out += [translation[at : m.start()], stand_ins[m.group()]]
        at = m.end()
    return "".join(out) + translation[at:]


def put_back(source: str, translation: str) -> str:
    """`translation` with its numbers replaced in order by those of `source`, where both hold
    as many; else as it is."""
    numbers = NUMBER.findall(source)
    if not numbers or len(NUMBER.findall(translation)) != len(numbers):
        return translation
    it = iter(numbers)
    return NUMBER.sub(lambda m: next(it), translation)


def keep_numbers(
    source: str, translation: str, stand_in_translation: str | None, stand_ins: dict[str, str]
) -> tuple[str, str]:
    """Of a translation of `source` as written and one of it with `stand_ins` (`protect`), the
    one that keeps the source's numbers (the module's docstring), and which it is: "as
    written", "stand-ins", "put back" (into the one as written), "put back in stand-ins" (into
    the other) or "lost" (the one as written, which does not hold them); `translation` itself,
    "as written", where the source has none to keep."""
    if not stand_ins or holds_numbers(source, translation):
        return translation, "as written"
    if stand_in_translation is not None:
        restored = restore(stand_in_translation, stand_ins)
        if restored is not None:
            return restored, "stand-ins"
    put = put_back(source, translation)
    if put is not translation:
        return put, "put back"
    if stand_in_translation is not None:
        put = put_back(source, stand_in_translation)
        if put is not stand_in_translation:
            return put, "put back in stand-ins"
    return translation, "lost"
