"""URLs, IPv4 addresses, e-mail addresses, file names, templates' placeholders and emoji in text, which every format
copies as written (app/formats/inline.py, app/formats/markdown.py, and plain text in app/translate.py).

An address is found by `_VERBATIM`, then trimmed of the punctuation after it that is not
part of it (a full stop, a closing quote, a bracket it did not open); an e-mail address whose
host has no dot is one only as `_DOTLESS_HOST` says.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

#: the extensions of the files a text names (`setup.py`, `README.md`, `report.pdf`), which a
#: model translated as words ("Open setup.py and edit it." gave "Öffnen Sie sich.", a chapter
#: titled "ch001.xhtml" "Knöcher."); not `.com` or `.net` (domains), nor one letter (`c`,
#: `h`: "d.h." is German for "i.e.")
FILE_TYPES = sorted([
    "txt", "md", "markdown", "rst", "html", "htm", "xhtml", "xml", "json", "jsonl", "yaml", "yml",
    "toml", "ini", "cfg", "conf", "csv", "tsv", "log", "pdf", "doc", "docx", "odt", "ods", "odp",
    "xls", "xlsx", "ppt", "pptx", "rtf", "epub", "srt", "py", "ipynb", "js", "mjs", "ts", "tsx",
    "jsx", "java", "kt", "cpp", "hpp", "cc", "cs", "go", "rs", "rb", "php", "sh", "bash", "ps1",
    "bat", "sql", "css", "scss", "png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "mp3",
    "mp4", "wav", "mov", "mkv", "zip", "tar", "gz", "tgz", "bz2", "xz", "7z", "rar", "exe", "dll",
    "so", "dmg", "apk", "deb", "rpm", "jar", "whl", "safetensors", "onnx",
], key=len, reverse=True)  # fmt: skip
# (the longest first: `.json` before `.js`)
#: a template's placeholder, which software fills in: `{name}`, `{0}`, `{price:.2f}`,
#: `{{name}}`, `${name}`, `%s`, `%d`, `%(name)s`, `%1$s`, `<FirstName>` (a model read them as
#: words, or their brackets as bytes: "Dear <FirstName>, thank you for your order." gave
#: "Streiche HABEN TOM, danke für Ihre Bestellung.")
_PLACEHOLDER = (
    r"\{\{\s*[A-Za-z_][\w.]*\s*\}\}"
    r"|\$?\{(?:[A-Za-z_][\w.]*|\d{1,3})(?::[^{}\s]{1,20})?\}"
    r"|(?<![\w%])%(?:\([A-Za-z_]\w*\)|\d\$)?[-+#0]?\d{0,3}(?:\.\d{1,3})?[sdif@](?!\w)"
    # (not app/formats/inline.py's own placeholders, `<g1>`, nor an HTML tag in a text, whose
    # closing tag would not be kept with it)
    r"|<(?!(?:[gx]\d+|b|i|u|s|q|p|a|em|strong|span|div|br|hr|li|ul|ol|code|pre|sub|sup|small"
    r"|mark|h[1-6]|img|table|tr|td|th|tt|big|font|center|label|button|html|head|body|title"
    r"|script|style|kbd|var|samp|del|ins|abbr|cite|dfn|time|nav|main|section|article)>)"
    r"[A-Za-z_][\w.-]*>"
)
_IS_PLACEHOLDER = re.compile(_PLACEHOLDER)
#: URLs, e-mail addresses, file names and placeholders, kept as written (their end trimmed by
#: `verbatim_spans`)
_VERBATIM = re.compile(
    r"(?:\b[a-z][a-z0-9+-]{1,15}://|\bwww\.)[^\s<>\"]+"
    r"|(?:\bmailto:)?(?<![\w.+-])[\w.+-]{1,64}@[\w-]+(?:\.[\w-]+)*"
    r"|(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?(?![\w.]\w)"  # an IPv4 address
    # a file's name, in its folders: two characters or more, and an extension of FILE_TYPES
    rf"|(?<![\w./@-])(?:[\w.-]+/)*[\w-]{{2,}}(?:\.[\w-]+)*\.(?:{'|'.join(FILE_TYPES)})"
    r"(?![\w.]\w|[\w-])"
    rf"|{_PLACEHOLDER}",
    re.IGNORECASE,
)
_CLOSING = {")": "(", "]": "[", "}": "{"}
#: an e-mail address's host name without a dot (`user@localhost`, `admin@intranet`): three
#: characters or more, from a letter; an address only after a local part of two or more
#: (`a@b`, `amig@s` and `tod@s`, as Spanish writes for both genders, are words)
_DOTLESS_HOST = re.compile(r"[A-Za-z][A-Za-z0-9-]{2,}")
#: what ends a sentence or closes a quote after an address, not part of it
_TRAILING = ".,;:!?'\")]}\u2026\u201c\u201d\u00bb\u00ab\u2019\u2018\u203a\u2039\u201e"


#: a pictograph shown as an emoji without a variation selector: the blocks of U+1F000 whole
#: (the emoji, with the regional indicators of flags and the skin tones, and the game,
#: alchemical and other symbols beside them), and the older symbols Unicode shows as emoji
#: (Emoji_Presentation: a watch, a coffee, a check mark, a star, ...)
_PICTOGRAPH = (
    "[\U0001f000-\U0001faff\u231a\u231b\u23e9-\u23ec\u23f0\u23f3\u25fd\u25fe\u2614\u2615"
    "\u2648-\u2653\u267f\u2693\u26a1\u26aa\u26ab\u26bd\u26be\u26c4\u26c5\u26ce\u26d4\u26ea"
    "\u26f2\u26f3\u26f5\u26fa\u26fd\u2705\u270a\u270b\u2728\u274c\u274e\u2753-\u2755\u2757"
    "\u2795-\u2797\u27b0\u27bf\u2b1b\u2b1c\u2b50\u2b55]"
)
#: a symbol shown as an emoji with U+FE0F after it (a heart, a sun, (c), an arrow): as text
#: without it (a star in "5★", an arrow in a sentence go to the model as before)
_SYMBOL = (
    "[\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u2199\u21a9\u21aa\u2300-\u23ff\u24c2"
    "\u25aa-\u25fe\u2600-\u27bf\u2934\u2935\u2b00-\u2bff\u3030\u303d\u3297\u3299]"
)
#: marks copied as written with or without U+FE0F, which the shipped vocabularies lack (their
#: bytes read as a word's: "Our Brand™ is great." gave "Unser BrandMMMAL ist großartig.", "♪
#: Music ♪" "Im Allgemeinen Übung ..."): ©, the musical notes, and ®, ™ or ℠, with the name
#: they mark where it has a capital ("Windows®", "iPhone™")
_MARK = (
    "(?:(?<![\\w'\u2019-])(?=[\\w'\u2019-]*[A-Z\u00c0-\u00de])[^\\W\\d_][\\w'\u2019-]*)?"
    "[\u00ae\u2122\u2120]|[\u00a9\u2669-\u266c]"
)
#: one emoji: a flag (two regional indicators), a pictograph, a symbol with U+FE0F or a skin
#: tone, a mark, or a keycap (1\ufe0f\u20e3); with its skin tone, variation selectors, keycap
#: mark and tags (a subdivision's flag), and the pictographs it joins with U+200D (a family)
_ONE_EMOJI = (
    f"(?:[\U0001f1e6-\U0001f1ff]{{2}}|{_PICTOGRAPH}|{_SYMBOL}(?=[\ufe0f\U0001f3fb-\U0001f3ff])"
    f"|{_MARK}|[0-9#*]\ufe0f?\u20e3)"
    f"(?:[\U0001f3fb-\U0001f3ff\ufe0e\ufe0f\u20e3\U000e0020-\U000e007f]"
    f"|\u200d(?:{_PICTOGRAPH}|{_SYMBOL}))*"
)
#: emoji side by side, or with spaces between them, as one span ("🎉🎂": each alone cut the
#: sentence there, its stand-in names run together)
_EMOJI = re.compile(f"{_ONE_EMOJI}(?:[ \u00a0]*{_ONE_EMOJI})*")


def is_emoji(text: str) -> bool:
    """Whether `text` is emoji alone (a span `verbatim_spans` gives that is not an address)."""
    return _EMOJI.fullmatch(text) is not None


def verbatim_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each URL, e-mail address and run of emoji in `text`, in order, an
    address without the punctuation after it (a full stop, a comma, a closing bracket that it
    did not open). Emoji are copied as written, as addresses are: a model of words has no
    token for them, and a small one read their bytes as the start of a word ("I love pizza
    🍕." gave "Ich liebe Pizzaschreibbungsbeschreibung.")."""
    addresses = list(iter_verbatim(text))
    if text.isascii():  # (no emoji: the common case, found at once)
        return addresses
    spans: list[tuple[int, int]] = []
    at = 0
    for start, end in addresses:  # emoji between the addresses (one inside one is its own)
        spans += [m.span() for m in _EMOJI.finditer(text, at, start)]
        spans.append((start, end))
        at = end
    return spans + [m.span() for m in _EMOJI.finditer(text, at)]


def iter_verbatim(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int]]:
    """The spans of `verbatim_spans` that start in text[start:end] and end by `end`, as they are
    found (what is before `start` still decides where a word begins)."""
    for m in _VERBATIM.finditer(text, start, len(text) if end is None else end):
        found = trim_address(text, *m.span())
        if found is not None:
            yield found


def trim_address(text: str, start: int, end: int, extra: str = "") -> tuple[int, int] | None:
    """text[start:end] without the punctuation at its end (a closing bracket only when the
    address did not open it; `extra`: more characters to drop there), or None when what is
    left is no address."""
    trailing = _TRAILING + extra
    while end > start and text[end - 1] in trailing:
        ch = text[end - 1]
        if ch in _CLOSING and text.count(_CLOSING[ch], start, end) >= text.count(ch, start, end):
            break
        end -= 1
    return (start, end) if _is_address(text[start:end]) else None


def _is_address(span: str) -> bool:
    """Whether a match of _VERBATIM, trimmed, is an address: a URL, an IPv4 address or a file
    name, an e-mail address whose host has a dot, or one whose host has none under the rule of
    _DOTLESS_HOST (any, after `mailto:`). A `@mention` never matches: an address needs a local
    part."""
    if "://" in span or span[:4].lower() == "www." or _IS_PLACEHOLDER.fullmatch(span):
        return True
    local, at, host = span.rpartition("@")
    if not at:  # an IPv4 address or a file name
        return "." in span
    if "." in host:
        return True
    if local[:7].lower() == "mailto:":
        return bool(host)
    return len(local) >= 2 and _DOTLESS_HOST.fullmatch(host) is not None
