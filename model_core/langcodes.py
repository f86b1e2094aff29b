"""ISO 639-1 (two-letter) codes for the ISO 639-3 codes that OPUS-MT models use.

OPUS-MT multi-target models pick their output language by a `>>xxx<<` token, mostly with an
ISO 639-3 code (`>>deu<<`, `>>fra<<`, `>>cmn_Hans<<`); clients of a LibreTranslate-style API
send two-letter codes (`de`). The table maps each two-letter code to the three-letter codes
that stand for it: the ISO 639-3 code first, then the individual languages OPUS-MT uses for
a macrolanguage (`ar`: `ara`, `arb`). A small table rather than a dependency: these are the
languages of the OPUS-MT and Tatoeba-Challenge model lists.
"""

from __future__ import annotations

ISO_639_1_TO_3: dict[str, tuple[str, ...]] = {
    "af": ("afr",),
    "am": ("amh",),
    "an": ("arg",),
    "ar": ("ara", "arb"),
    "as": ("asm",),
    "az": ("aze", "azj"),
    "ba": ("bak",),
    "be": ("bel",),
    "bg": ("bul",),
    "bn": ("ben",),
    "bo": ("bod",),
    "br": ("bre",),
    "bs": ("bos",),
    "ca": ("cat",),
    "ce": ("che",),
    "co": ("cos",),
    "cs": ("ces",),
    "cv": ("chv",),
    "cy": ("cym",),
    "da": ("dan",),
    "de": ("deu",),
    "dv": ("div",),
    "el": ("ell",),
    "en": ("eng",),
    "eo": ("epo",),
    "es": ("spa",),
    "et": ("est", "ekk"),
    "eu": ("eus",),
    "fa": ("fas", "pes"),
    "fi": ("fin",),
    "fj": ("fij",),
    "fo": ("fao",),
    "fr": ("fra",),
    "fy": ("fry",),
    "ga": ("gle",),
    "gd": ("gla",),
    "gl": ("glg",),
    "gn": ("grn", "gug"),
    "gu": ("guj",),
    "gv": ("glv",),
    "ha": ("hau",),
    "he": ("heb",),
    "hi": ("hin",),
    "hr": ("hrv",),
    "ht": ("hat",),
    "hu": ("hun",),
    "hy": ("hye",),
    "ia": ("ina",),
    "id": ("ind",),
    "ie": ("ile",),
    "ig": ("ibo",),
    "io": ("ido",),
    "is": ("isl",),
    "it": ("ita",),
    "ja": ("jpn",),
    "jv": ("jav",),
    "ka": ("kat",),
    "kk": ("kaz",),
    "kl": ("kal",),
    "km": ("khm",),
    "kn": ("kan",),
    "ko": ("kor",),
    "ku": ("kur", "kmr"),
    "kv": ("kom",),
    "kw": ("cor",),
    "ky": ("kir",),
    "la": ("lat",),
    "lb": ("ltz",),
    "lg": ("lug",),
    "li": ("lim",),
    "ln": ("lin",),
    "lo": ("lao",),
    "lt": ("lit",),
    "lv": ("lav", "lvs"),
    "mg": ("mlg", "plt"),
    "mh": ("mah",),
    "mi": ("mri",),
    "mk": ("mkd",),
    "ml": ("mal",),
    "mn": ("mon", "khk"),
    "mr": ("mar",),
    "ms": ("msa", "zsm"),
    "mt": ("mlt",),
    "my": ("mya",),
    "nb": ("nob",),
    "ne": ("nep", "npi"),
    "nl": ("nld",),
    "nn": ("nno",),
    "no": ("nor",),
    "ny": ("nya",),
    "oc": ("oci",),
    "om": ("orm", "gaz"),
    "or": ("ori", "ory"),
    "os": ("oss",),
    "pa": ("pan",),
    "pl": ("pol",),
    "ps": ("pus", "pbt"),
    "pt": ("por",),
    "qu": ("que", "quz"),
    "rm": ("roh",),
    "rn": ("run",),
    "ro": ("ron",),
    "ru": ("rus",),
    "rw": ("kin",),
    "sa": ("san",),
    "sc": ("srd",),
    "sd": ("snd",),
    "se": ("sme",),
    "sg": ("sag",),
    "si": ("sin",),
    "sk": ("slk",),
    "sl": ("slv",),
    "sm": ("smo",),
    "sn": ("sna",),
    "so": ("som",),
    "sq": ("sqi", "als"),
    "sr": ("srp",),
    "st": ("sot",),
    "su": ("sun",),
    "sv": ("swe",),
    "sw": ("swa", "swh"),
    "ta": ("tam",),
    "te": ("tel",),
    "tg": ("tgk",),
    "th": ("tha",),
    "ti": ("tir",),
    "tk": ("tuk",),
    "tl": ("tgl",),
    "tn": ("tsn",),
    "to": ("ton",),
    "tr": ("tur",),
    "ts": ("tso",),
    "tt": ("tat",),
    "ty": ("tah",),
    "ug": ("uig",),
    "uk": ("ukr",),
    "ur": ("urd",),
    "uz": ("uzb", "uzn"),
    "vi": ("vie",),
    "wa": ("wln",),
    "wo": ("wol",),
    "xh": ("xho",),
    "yi": ("yid",),
    "yo": ("yor",),
    "zh": ("zho", "cmn"),
    "zu": ("zul",),
}

#: three-letter code -> two-letter code (every code of the table above)
ISO_639_3_TO_1: dict[str, str] = {
    three: two for two, threes in ISO_639_1_TO_3.items() for three in threes
}


def two_letter(code: str) -> str:
    """The two-letter code of a three-letter one the table knows (`deu` -> `de`); any other
    code (`de`, `mul`, `gmq`, `cmn_Hans`) as it is."""
    return ISO_639_3_TO_1.get(code, code)


def token_languages(codes: list[str]) -> dict[str, str]:
    """The language code to list for each `>>code<<` of a multi-target model: the two-letter
    code where exactly one of the model's codes stands for it (`deu` -> `de`; `cmn_Hans` ->
    `zh` when the model has no other Chinese token), else the code as it is. Returns
    {model's code: listed code}, the listed codes all different."""
    by_two: dict[str, list[str]] = {}
    for code in codes:
        base = code.split("_")[0]
        two = base if base in ISO_639_1_TO_3 else ISO_639_3_TO_1.get(base)
        if two is not None:
            by_two.setdefault(two, []).append(code)
    listed = {code: code for code in codes}
    for two, mine in by_two.items():
        if len(mine) == 1 and (two == mine[0] or two not in listed):
            listed[mine[0]] = two
    return listed
