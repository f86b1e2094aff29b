"""Language identification for POST /detect and `source: "auto"`, with py3langid.

py3langid (BSD-3-Clause; a maintained fork of langid.py) was chosen over lingua-language-detector
(Apache-2.0) for its size and its plain dependencies: the whole package is 4.5 MB installed,
needs only numpy, and its one model is an .npz read with allow_pickle=False (nothing is
unpickled); it loaded in 1.1 s on the 2-core test machine (2026-11-24), once, at start-up.
lingua is more accurate on very short texts, but carries a compiled extension and its n-gram
models for every language it knows. Here the choice is only between the few languages the
loaded models serve, which py3langid tells apart well once a text has a few words. The
identifier is restricted to the languages the models serve (as sources or targets) and its
probabilities are renormalised over them; a request can restrict it further (the sources that
have a model to its target, and the target itself).

A tie (confidences equal once rounded to 0.1, as they are answered: a name, a number, a word
of both languages, with no evidence either way) is broken by one rule, `Detector.order`, for
POST /detect and `source: "auto"` alike: the request's target language last (`source: auto`
only: a tie is no reason to return a text untranslated, as if it were already in the target),
then the preferred language (the server's pivot language, MT_PIVOT_LANGUAGE) first, then by
code. "Tom", 50% each, is [en, de] to /detect and English to `source: auto` into German; into
English it is German, the one tied language that can be translated. (/detect named German
first, py3langid's order of its labels, while `source: auto` into German took English.)

A text is read without its invisible format characters (Unicode category Cf: the soft hyphen,
zero-width spaces and joiners, word joiners, direction marks, a byte order mark): py3langid reads
bytes, and a soft hyphen or a zero-width space inside a word cut it into pieces that read as
another language ("Kranken\u00adver\u00adsiche\u00adrung" was 48% German, 98% without them).

Restricted to the served languages, the identifier names one of them for any text: a Hebrew or
French text was "detected" as German or English and translated into nonsense. So a text is also
read by py3langid's full model (`full_identifier`: all its 140 languages, loaded once, at
start-up: 1 s and about 80 MB; the Turkish check of app/formats/text_charset.py reads with the
same one; the identifier of the served languages is a copy of it restricted to their columns,
sharing its other arrays: a second load of the model file took another 80 MB), and
`Detector.unserved` names its language when it is clearly none of the served ones: the full
model gives the served languages together less than UNSERVED_MASS, its best language at least
NAMED_CONFIDENCE, and no part of the text (between sentence ends, quotes, brackets, or where
the script changes) of two words or more gives them SERVED_PART or more.

Before those masses, `Detector.unserved` looks at the letters' scripts: a text none of whose
letters is in a script a served language is written in (LANGUAGE_SCRIPTS; "Привет", "東京" with
English and German served) cannot be in a served language, however its n-grams read (the full
model gave "Привет" 25% Serbian, and it was translated into German nonsense). Its language is
named where the full model is sure of it (NAMED_CONFIDENCE, and written in that script), else
its script, as BCP 47's undetermined language in it ("und-Cyrl": "the Cyrillic script"). None
of the 397,654 lines of tatoeba and multi30k is refused by it. A served language whose scripts
are not listed turns the check off.

UNSERVED_MASS was measured with `nice -n 19 python -m bench.detect_eval --mass 1e-3 2e-3 3e-3
5e-3 1e-2 --data ../shared/data` (2026-11-27; the results are in docs/DESIGN.md). Over the
397,654 lines of tatoeba and multi30k (all their splits, en and de), and over the 132,552
paragraphs of 2 to 4 consecutive lines of the same files, every one of these values refuses one
line, and it is Spanish ("Te acabo de enviar un correo electrónico.", 3.3e-5), no paragraph. The
least masses of genuine lines were 0.0065 ("Tom adores me.", best Portuguese at 32%) and 0.0093
('Say "aah."', 33%), every other more than 0.011; of 23 English and German sentences with
foreign names, words and quotes, "Hasta la vista, baby." gave 0.0044 (under 5e-3, but its best
language, Spanish, at 9% is not named) and "Der Film heißt «Le fabuleux destin d'Amélie
Poulain»." 0.012 (88% French), and the one refused at every value is "Coq au vin and crème
brûlée." (0.001, 74% French). Of 103 everyday sentences of 3 to 12 words in 8 other languages
(18 French, 16 each of Spanish, Italian, Dutch and Portuguese, 7 each of Polish, Turkish and
Swedish), 1e-3 refused 84 and took 19 as English or German, among them "Nous aimons le pain et
le fromage du village." (0.0015, 99% French; translated into nonsense: "Es ist keine Schmerzen
von dem Dorf.") and "De kinderen spelen in de tuin." (0.0031, 96% Dutch); 2e-3 refused 90, 3e-3
95, 5e-3 100 (every French, Dutch, Portuguese, Polish and Swedish one), 1e-2 101. 5e-3 is taken:
below the least mass of any genuine line, where the next value tried gained one sentence and
comes within 1.2x of a German sentence quoting a French title. The three it lets through are
"Mia nonna cucina benissimo." (34% Italian: not named), "Tren istasyonu nerede?" (0.014, 76%
Turkish) and "Mi madre cocina muy bien." (0.0075, 75% Spanish). NAMED_CONFIDENCE keeps the short
lines the full model cannot place from being refused: each corpus line under 0.01 but the
Spanish one had its best language at 34% or less; so do "Спасибо" (24% Uzbek) and "Hakuna
matata" (45% Quechua), translated as before. The parts keep a German or English text with a
quote in another language ("Auf dem Schild stand: Я хотел бы ... Wir verstanden nichts.", 1e-8
as a whole) from being refused: its own parts gave en and de 0.15 to 0.95 ("He said", "Wir
verstanden nichts"), no part of the 103 foreign sentences above more than 0.013.
"""

from __future__ import annotations

import copy
import functools
import re
import sys
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable

from py3langid.langid import MODEL_FILE, LanguageIdentifier

#: the full model gives the served languages together less than this: a text none of them
#: (1e-3 let short French sentences through, 1.5e-3 at 99% French; the least of a genuine
#: English or German line was 6.5e-3: see the module docstring and bench/detect_eval.py)
UNSERVED_MASS = 5e-3
#: ... and its best language at least this: the language is named, not guessed ("Спасибо" was
#: 24% Uzbek, "Hakuna matata" 45% Quechua)
NAMED_CONFIDENCE = 0.5
#: a part of two words or more that gives the served languages this much is in one of them
SERVED_PART = 0.1
#: where a text is cut into parts: sentence ends, quotes, brackets, colons, a dash between spaces
_PART_BREAKS = re.compile(r"[.!?…:;()\[\]{}\"«»„“”‚‘’‹›「」『』。！？、，\n]+|\s[-–—]\s")
#: English names of the languages the full model tells apart, as far as they are named here
NAMES = {
    "af": "Afrikaans", "ar": "Arabic", "ary": "Moroccan Arabic", "arz": "Egyptian Arabic",
    "be": "Belarusian", "bg": "Bulgarian", "bn": "Bengali", "bs": "Bosnian", "ca": "Catalan",
    "cs": "Czech", "cy": "Welsh", "da": "Danish", "de": "German", "el": "Greek", "en": "English",
    "eo": "Esperanto", "es": "Spanish", "et": "Estonian", "eu": "Basque", "fa": "Persian",
    "fi": "Finnish", "fr": "French", "ga": "Irish", "gl": "Galician", "he": "Hebrew",
    "hbo": "Ancient Hebrew", "hi": "Hindi", "hr": "Croatian", "hu": "Hungarian",
    "hy": "Armenian", "id": "Indonesian", "is": "Icelandic", "it": "Italian", "ja": "Japanese",
    "ka": "Georgian", "kk": "Kazakh", "ko": "Korean", "la": "Latin", "lb": "Luxembourgish",
    "lt": "Lithuanian", "lv": "Latvian", "mk": "Macedonian", "ms": "Malay", "mt": "Maltese",
    "nl": "Dutch", "nn": "Norwegian Nynorsk", "no": "Norwegian", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sl": "Slovenian",
    "sq": "Albanian", "sr": "Serbian", "sv": "Swedish", "sw": "Swahili", "ta": "Tamil",
    "th": "Thai", "tl": "Tagalog", "tr": "Turkish", "uk": "Ukrainian", "ur": "Urdu",
    "uz": "Uzbek", "vi": "Vietnamese", "yue": "Cantonese", "zh": "Chinese",
}  # fmt: skip
_full: list[LanguageIdentifier] = []
_full_lock = threading.Lock()


def full_identifier() -> LanguageIdentifier:
    """py3langid over every language it knows (probabilities), loaded once per process."""
    with _full_lock:
        if not _full:
            _full.append(LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True))
        return _full[0]


#: the script of a letter, by the first word of its Unicode name: (ISO 15924 code, name)
SCRIPTS = {
    "LATIN": ("Latn", "the Latin script"), "CYRILLIC": ("Cyrl", "the Cyrillic script"),
    "GREEK": ("Grek", "the Greek script"), "ARMENIAN": ("Armn", "the Armenian script"),
    "GEORGIAN": ("Geor", "the Georgian script"), "HEBREW": ("Hebr", "the Hebrew script"),
    "ARABIC": ("Arab", "the Arabic script"), "DEVANAGARI": ("Deva", "the Devanagari script"),
    "BENGALI": ("Beng", "the Bengali script"), "TAMIL": ("Taml", "the Tamil script"),
    "THAI": ("Thai", "the Thai script"), "CJK": ("Hani", "Chinese characters"),
    "HIRAGANA": ("Hrkt", "Japanese kana"), "KATAKANA": ("Hrkt", "Japanese kana"),
    "HANGUL": ("Hang", "the Korean script"), "ETHIOPIC": ("Ethi", "the Ethiopic script"),
}  # fmt: skip
#: a text in a script no served language is written in, as its language: BCP 47's tag of an
#: undetermined language in that script ("und-Cyrl"; a kept paragraph is labelled with it)
SCRIPT_NAMES = {f"und-{code}": name for code, name in SCRIPTS.values()}
#: the scripts a language is written in, for the languages a model commonly serves; a served
#: language not listed here turns the script check off (`Detector.unserved`)
LANGUAGE_SCRIPTS = {
    **dict.fromkeys(
        [
            "af", "az", "bs", "ca", "cs", "cy", "da", "de", "en", "eo", "es", "et", "eu", "fi",
            "fr", "ga", "gl", "hr", "hu", "id", "is", "it", "la", "lb", "lt", "lv", "ms", "mt",
            "nl", "nn", "no", "nb", "pl", "pt", "ro", "sk", "sl", "sq", "sv", "sw", "tl", "tr",
            "uz", "vi",
        ],
        {"Latn"},
    ),
    **dict.fromkeys(["ru", "uk", "be", "bg", "mk", "kk", "ky", "tg", "mn"], {"Cyrl"}),
    "sr": {"Cyrl", "Latn"}, "el": {"Grek"}, "hy": {"Armn"}, "ka": {"Geor"},
    "he": {"Hebr"}, "yi": {"Hebr"}, "ar": {"Arab"}, "fa": {"Arab"}, "ur": {"Arab"},
    "hi": {"Deva"}, "mr": {"Deva"}, "ne": {"Deva"}, "bn": {"Beng"}, "ta": {"Taml"},
    "th": {"Thai"}, "zh": {"Hani"}, "yue": {"Hani"}, "ja": {"Hani", "Hrkt"},
    "ko": {"Hang", "Hani"}, "am": {"Ethi"},
}  # fmt: skip


#: two letters side by side: a word in an alphabet, for the script check (a letter of one
#: alone is a symbol as often: "π ≈ 3.14", "Ω = 5"); a character of the other scripts, a
#: syllable or a word ("猫", "눈", "का"), is enough
_WORD = re.compile(r"[^\W\d_]{2}")
ALPHABETS = frozenset({"Latn", "Cyrl", "Grek", "Armn", "Geor", "Hebr", "Arab"})


def script_counts(text: str) -> Counter[str]:
    """How many letters of `text` each script (ISO 15924 code) SCRIPTS knows holds."""
    counts: Counter[str] = Counter()
    for ch in text:
        if ch.isalpha():
            script = SCRIPTS.get(unicodedata.name(ch, "").split(" ")[0])
            if script is not None:
                counts[script[0]] += 1
    return counts


def named(code: str) -> str:
    """ "Hebrew (he)", a script's name ("the Cyrillic script"), or the code alone where no
    name is known."""
    if code in SCRIPT_NAMES:
        return SCRIPT_NAMES[code]
    name = NAMES.get(code)
    return f"{name} ({code})" if name else code


def _parts(text: str) -> list[str]:
    """The text's parts of two words or more: between sentence ends, quotes, brackets and
    colons, and where the words change from the Latin script to another or back."""
    parts = []
    for piece in _PART_BREAKS.split(text):
        run: list[str] = []
        latin = None
        for word in piece.split():
            letters = [c for c in word if c.isalpha()]
            kind = any(ord(c) < 0x250 for c in letters) if letters else latin
            if run and kind != latin:
                parts.append(run)
                run = []
            run.append(word)
            latin = kind
        parts.append(run)
    return [" ".join(run) for run in parts if len(run) >= 2]


@functools.cache
def _format_characters() -> dict[int, None]:
    """str.translate's table that removes every character of Unicode category Cf."""
    cf = (c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf")
    return dict.fromkeys(cf)


def readable(text: str) -> str:
    """`text` as language detection reads it: without its invisible format characters."""
    return text.translate(_format_characters())


class Detector:
    def __init__(self, languages: Iterable[str], prefer: str | None = None):
        """`prefer`: the language a tie goes to first where it is among the tied (`order`)."""
        # the full model's arrays, restricted below to the served languages: `set_languages`
        # rebinds the copy's own attributes to the served columns and leaves the full
        # identifier as it is, so the model is read and held once, not twice
        self.identifier = copy.copy(full_identifier())
        _format_characters()  # built once, at start-up
        known = set(self.identifier.labels)
        wanted = set(languages)
        self.languages = sorted(wanted & known)
        self.unknown = sorted(wanted - known)  # served, but py3langid cannot name them
        self.prefer = prefer
        if self.languages:
            self.identifier.set_languages(self.languages)

    def order(
        self, scores: Iterable[tuple[str, float]], target: str | None = None
    ) -> list[tuple[str, float]]:
        """(language, confidence in percent) best first, confidences rounded to 0.1 as they are
        answered. Equal ones (a tie: a name, a number, a word of both languages, with no
        evidence either way) follow one rule, the same for POST /detect and `source: auto`:
        `target` last (a tie is no reason to take a text as already in the language it is to
        be translated into, and return it untranslated), then `prefer` first, then by code."""

        def key(item: tuple[str, float]) -> tuple[float, bool, bool, str]:
            lang, conf = item
            return -conf, lang == target, lang != self.prefer, lang

        return sorted(((lang, round(conf, 1)) for lang, conf in scores), key=key)

    def rank(
        self, text: str, among: Iterable[str] | None = None, target: str | None = None
    ) -> list[tuple[str, float]]:
        """(language, confidence in percent) best first (`order`, with `target`), over `among`
        (default: every language the detector knows), of the text as `readable` gives it.
        Confidences sum to 100."""
        text = readable(text)
        allowed = set(self.languages if among is None else among) & set(self.languages)
        if not allowed:
            return []
        if len(self.languages) == 1:
            scores = [(self.languages[0], 1.0)]
        else:
            scores = [(lang, p) for lang, p in self.identifier.rank(text) if lang in allowed]
        total = sum(p for _, p in scores)
        if total <= 0:  # no feature in the text: every language as likely
            return self.order(((lang, 100.0 / len(scores)) for lang, _ in scores), target)
        return self.order(((lang, 100.0 * p / total) for lang, p in scores), target)

    def unserved(self, text: str) -> tuple[str, float] | None:
        """(language, confidence in percent) of a text clearly in a language that is not among
        the detector's (see the module docstring), else None."""
        if self.unknown or not self.languages:  # a served language it cannot name: never sure
            return None
        text = readable(text)
        full = full_identifier()
        ranked = full.rank(text)
        best, confidence = ranked[0]
        script = self.unserved_script(text)
        if script is not None:  # none of its letters in a served language's script
            # (named where the full model is sure: "こんにちは" Japanese at 100%; else its
            # script: "Привет" was 25% Serbian, and translated into German nonsense)
            if confidence >= NAMED_CONFIDENCE and LANGUAGE_SCRIPTS.get(best, set()) & {script}:
                return best, round(100.0 * confidence, 1)
            return f"und-{script}", 0.0
        served = set(self.languages)
        if sum(p for lang, p in ranked if lang in served) >= UNSERVED_MASS:
            return None
        if best == "zxx" or confidence < NAMED_CONFIDENCE:  # (zxx: no language)
            return None
        for part in _parts(text):
            if sum(p for lang, p in full.rank(part) if lang in served) >= SERVED_PART:
                return None
        return best, round(100.0 * confidence, 1)

    def unserved_script(self, text: str) -> str | None:
        """The script (ISO 15924 code) of a text whose letters are all in scripts none of the
        served languages is written in (LANGUAGE_SCRIPTS; the most frequent where there are
        several), else None; None too where a served language's scripts are not known."""
        served: set[str] = set()
        for lang in self.languages:
            if lang not in LANGUAGE_SCRIPTS:
                return None
            served |= LANGUAGE_SCRIPTS[lang]
        counts = script_counts(text)
        if not counts or counts.keys() & served:
            return None
        if counts.keys() <= ALPHABETS and not _WORD.search(text):
            return None  # (a letter alone is no word: "π ≈ 3.14", "Ω = 5")
        return max(sorted(counts), key=counts.__getitem__)

    def rank_checked(self, text: str) -> list[tuple[str, float]]:
        """`rank` over every served language, but for a text in a language none of them is
        (`unserved`): then each one's confidence is the full model's (near 0), not a share of
        100 among languages the text is in none of."""
        ranked = self.rank(text)
        if self.unserved(text) is None:
            return ranked
        full = dict(full_identifier().rank(readable(text)))
        return self.order((lang, 100.0 * full.get(lang, 0.0)) for lang, _ in ranked)

    def detect_all(
        self, texts: list[str], among: Iterable[str] | None = None, target: str | None = None
    ) -> list[list[tuple[str, float]]]:
        """`rank` of each text; the first of each is the language `source: auto` takes."""
        among = None if among is None else list(among)
        return [self.rank(t, among, target) for t in texts]
