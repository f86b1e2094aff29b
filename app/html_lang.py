"""The language a translated HTML document declares: its `lang` attributes, rewritten to the
target language where the text they govern was translated.

A browser, a screen reader and a search engine take the language of a piece of text from the
nearest element around it with a `lang` attribute (`xml:lang` in XHTML), else from a
`<meta http-equiv="content-language">`. Left as written, a page translated from English into
German was read out with English pronunciation. So, with the target language given:

- every element with `lang` or `xml:lang` whose own text (what no element nearer to it with
  its own `lang` holds) was translated gets the target's code in both attributes (`<html
  lang="en">` for the whole page, `<i lang="fr">` around a phrase); an element whose own text
  holds none that the document cuts into units (only further elements with `lang`, as
  MediaWiki's `<html lang="en">` around `<div lang="en">`) follows those: its `lang` changes
  when theirs does;
- text counts as translated when it came back different (spaces aside): an element whose text
  the model gave back as it was, or that `source: auto` found in the target language already
  and left alone, keeps its `lang`; so does every element that is not translated
  (`translate="no"`, `<code>`, `<pre>`, ...), whatever its content;
- `<meta http-equiv="content-language" content="...">`, and `<meta name="language">` and
  Open Graph's `<meta property="og:locale">` where its content is a language code (not a name
  such as `English`), follow the element they stand in (`<head>` in `<html lang>`, else the
  text outside every `lang`); a locale written with `_` (`en_US`) gets the target written so
  (`pt_BR` for `pt-BR`; `de` for `de`, no territory being guessed);
- what describes another document is kept: `hreflang` (the language of the page a link
  leads to), `og:locale:alternate` (the other languages the page is published in);
- a value already naming the target language (`de-CH` for `de`) is kept as written; no
  `lang` is added where none was written (but around text kept in another language: below);
- an element whose `lang` is set also gets the target's writing direction: its `dir="ltr"` or
  `dir="rtl"` is turned to the target's, and where it has none, `dir="rtl"` is added for a
  language written right to left (Arabic, Hebrew, Persian, Urdu, ...), whose text a browser
  would lay out left to right otherwise, its punctuation at the wrong end; `dir="auto"` is
  kept, and an element without `lang` gets no `dir`.

Text that `source: auto` keeps as it is (already in the target language, or in a language no
model serves: a French quote in an English page translated into German) is in its own
language, whatever the page now declares around it. The element that holds such a unit and
nothing else with letters (its `<p>`, `<li>`, `<title>`, or an inline element around all of
it) is labelled with that language where the language in force around it names another (the
page's `<html lang="de">`, or a `lang` that was wrong as written): its `lang` and `xml:lang`
set, or a `lang` added where it has none; its `dir` as above, and `dir="ltr"` added where a
left-to-right language stands in text declared in a right-to-left one. A unit that shares its
element with other text (`<p>Line<br>Ligne</p>`) is put in a `<span>` so labelled (not in a
`<title>` or an `<option>`, whose text is text only, nor where a pair of its inline markup
began before it). Nothing is labelled where the page declares no language at all, nor for an
attribute value kept (its element's `lang` is that of its text).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterator

#: the attributes that give an element's language
LANG_ATTRS = ("lang", "xml:lang")
#: an attribute in a start tag, as a browser reads it: its name, then `=` and a value
_ATTR = re.compile(r"""([^\s/>][^\s/>=]*)(\s*=\s*("[^"]*"|'[^']*'|[^\s>]*))?""")
_TAG_NAME = re.compile(r"<[^\s/>]*")
_SEPARATORS = re.compile(r"[\s/]*")
#: the languages, and the scripts (ISO 15924, lowercase), written right to left
_RTL_LANGUAGES = frozenset(
    [
        "ar",
        "arc",
        "arz",
        "ary",
        "azb",
        "ckb",
        "dv",
        "fa",
        "he",
        "iw",
        "ji",
        "ks",
        "mzn",
        "nqo",
        "pnb",
        "prs",
        "ps",
        "sd",
        "syr",
        "ug",
        "ur",
        "yi",
    ]
)
_RTL_SCRIPTS = frozenset(["adlm", "arab", "hebr", "mand", "nkoo", "rohg", "samr", "syrc", "thaa"])
#: a language code (BCP 47, or a locale written with "_"), not a language's name
_CODE = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*")

#: where a value stands in a tag: (start, end, written without a value: `<p lang>`)
Span = tuple[int, int, bool]


def _matched(pattern: re.Pattern[str], tag: str, at: int = 0) -> re.Match[str]:
    """pattern.match(tag, at) of a pattern that matches there: a start tag's name (a tag
    starts with "<"), or one that matches the empty string."""
    m = pattern.match(tag, at)
    assert m is not None
    return m


def attributes(tag: str) -> list[tuple[str, str, Span]]:
    """(name in lowercase, value, where the value stands) of each attribute of a start tag."""
    out: list[tuple[str, str, Span]] = []
    at = _matched(_TAG_NAME, tag).end()
    while True:
        at = _matched(_SEPARATORS, tag, at).end()
        m = _ATTR.match(tag, at)
        if m is None or not m.group(1):
            return out
        name, value = m.group(1).lower(), m.group(3)
        if value is None:
            out.append((name, "", (m.end(1), m.end(1), True)))
        elif value[:1] in ("'", '"'):
            out.append((name, value[1:-1], (m.start(3) + 1, m.end(3) - 1, False)))
        else:
            out.append((name, value, (m.start(3), m.end(3), False)))
        at = m.end()


def lang_spans(tag: str) -> tuple[Span, ...]:
    """Where the values of a start tag's `lang` and `xml:lang` stand."""
    return tuple(span for name, _, span in attributes(tag) if name in LANG_ATTRS)


def meta_spans(tag: str) -> tuple[Span, ...]:
    """Where the content of a `<meta>` that gives the document's language stands."""
    attrs = attributes(tag)
    named = {name: value.strip().lower() for name, value, _ in reversed(attrs)}  # the first
    pragma = named.get("http-equiv") == "content-language"
    locale = "og:locale" in (named.get("property"), named.get("name"))
    if not pragma and not locale and named.get("name") != "language":
        return ()
    for name, value, span in attrs:
        if name == "content":
            return (span,) if pragma or _CODE.fullmatch(value.strip()) else ()
    return ()


def names_language(value: str, language: str) -> bool:
    """Whether a written code names `language` (`de`, `DE`, `de-CH`, `de_AT` for `de`)."""
    return re.split(r"[-_]", value.strip(), maxsplit=1)[0].lower() == language.lower()


#: a change to a tag: the text at [start, end) replaced by the new text
Edit = tuple[int, int, str]


def edits(tag: str, spans: tuple[Span, ...], language: str) -> list[Edit]:
    """The changes that set each value of `tag` at `spans` to `language` (kept where it names
    it already)."""
    out = []
    for start, end, bare in spans:
        if not bare and names_language(tag[start:end], language):
            continue
        # a value written as a locale (`en_US`, as Open Graph writes it) gets the target so
        value = language.replace("-", "_") if "_" in tag[start:end] else language
        out.append((start, end, f'="{value}"' if bare else value))
    if out and _matched(_TAG_NAME, tag).group()[1:].lower() != "meta":
        out.extend(_direction_edits(tag, direction(language)))
    return out


def direction(language: str) -> str:
    """`rtl` for a language written right to left (by its script subtag where it has one:
    `az-Arab`, `sd-Deva`), else `ltr`."""
    subtags = re.split(r"[-_]", language.strip().lower())
    script = next((s for s in subtags[1:] if len(s) == 4 and s.isalpha()), None)
    rtl = script in _RTL_SCRIPTS if script else subtags[0] in _RTL_LANGUAGES
    return "rtl" if rtl else "ltr"


def _direction_edits(tag: str, wanted: str, around: str = "ltr") -> list[Edit]:
    """The change to the `dir` of an element whose `lang` is set to a language written in
    the direction `wanted`: a `dir` of the other direction turned, none added where `wanted`
    is not the direction `around` it (a page's: `ltr`)."""
    for name, value, (start, end, bare) in attributes(tag):
        if name == "dir":
            current = value.strip().lower()
            if bare or current not in ("ltr", "rtl") or current == wanted:
                return []  # `auto`, or already so
            return [(start, end, wanted)]
    if wanted != around:
        at = _matched(_TAG_NAME, tag).end()
        return [(at, at, f' dir="{wanted}"')]
    return []


def label_edits(
    tag: str, spans: tuple[Span, ...], language: str, around: str, xml: bool = False
) -> list[Edit]:
    """The changes that label an element whose text is kept in `language` inside text
    declared in `around`: its `lang` and `xml:lang` (at `spans`) set, or a `lang` added (in
    XHTML, `xml`, an `xml:lang` too: XHTML 1.1, in which EPUB 2 books are written, has no
    `lang`); its `dir` turned, or added where the direction differs from `around`'s."""
    out = [
        (start, end, f'="{language}"' if bare else language)
        for start, end, bare in spans
        if bare or not names_language(tag[start:end], language)
    ]
    turned = _direction_edits(tag, direction(language), direction(around))
    if not spans:  # (written before a `dir` added)
        at = _matched(_TAG_NAME, tag).end()
        added = "".join(text for start, end, text in turned if start == end == at)
        both = f' xml:lang="{language}"' if xml else ""
        out.append((at, at, f' lang="{language}"{both}{added}'))
        turned = [edit for edit in turned if edit[:2] != (at, at)]
    return out + turned


#: the language of each text a file's translate callable kept as it is (None: translated)
_kept: contextvars.ContextVar[list[str | None] | None] = contextvars.ContextVar(
    "kept_languages", default=None
)


@contextlib.contextmanager
def kept_languages() -> Iterator[list[str | None]]:
    """Collects, in this context (this thread), the language of each text the translate
    callable was given and kept as it is (None for one translated), as `note_kept` gives it;
    empty where the callable says nothing of it."""
    kept: list[str | None] = []
    token = _kept.set(kept)
    try:
        yield kept
    finally:
        _kept.reset(token)


def note_kept(languages: list[str | None]) -> None:
    """For `kept_languages`: the language each text just translated was kept in, or None."""
    kept = _kept.get()
    if kept is not None:
        kept[:] = languages


def apply(tag: str, changes: list[Edit]) -> str:
    """`tag` with `changes` (which do not overlap) made."""
    out, at = [], 0
    for start, end, text in sorted(changes):
        out.append(tag[at:start])
        out.append(text)
        at = end
    out.append(tag[at:])
    return "".join(out)


def changed_scopes(
    parents: list[int | None], source: dict[int, list[str]], output: dict[int, list[str]]
) -> set[int]:
    """The scopes (0: the document outside every `lang`; then each element with one, after the
    scope it stands in, `parents`) whose text was translated: `source` and `output` hold each
    one's own text before and after. A scope without text of its own follows its scopes."""
    changed = {
        scope
        for scope in source.keys() | output.keys()
        if _squeezed(source.get(scope, ())) != _squeezed(output.get(scope, ()))
    }
    for scope in range(len(parents) - 1, 0, -1):  # each scope after those it stands in
        parent = parents[scope]
        if scope in changed and parent is not None and parent not in source:
            changed.add(parent)
    return changed


def _squeezed(texts) -> str:
    """The texts together without any whitespace (the model may space a sentence's words
    around its markup otherwise)."""
    return "".join("".join(texts).split())
