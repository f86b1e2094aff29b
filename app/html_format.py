"""Translating an HTML document or fragment while keeping its markup exactly, free of any model.

The document is read with the standard library's tokenizer (html.parser, which never fails on
broken markup) for its markup; character references in the text are read here as a browser
reads them (`AT&T` and `&#` are text, `&copy2023` is "\u00a92023"). Every token's source
text is recorded (from the tokenizer's positions), so everything that is not translated is
written back byte for byte: tags with their attributes and quoting, comments, doctype,
whitespace, entities, and the content of elements that are never translated:

- `<script>`, `<style>`, `<code>`, `<pre>`, `<textarea>`, `<svg>`, `<math>`;
- every element marked `translate="no"`, with its descendants (HTML's translate attribute is
  inherited; a block inside it marked `translate="yes"` is translated again, as the standard
  says, but not inside the never-translated elements above, nor inside an inline element kept
  whole), or, without that attribute, of the class `notranslate`.

An element ends where a browser ends it, also when its end tag is left out: a start tag ends the
open elements whose end HTML implies before it (a new `<li>` an open `<li>`, `<dd>`/`<dt>` an
open `<dd>`/`<dt>`, a block such as `<p>`, `<div>`, `<ul>` or `<h2>` an open `<p>`, a cell an
open cell, a row an open row, `<option>` an open `<option>`), and an end tag ends the elements
left open inside the one it closes (`<p>A <span translate="no">B</p>`), so translate="no" and
units end there too.

Text is cut into units at block boundaries: any tag that is not an inline (phrasing) element,
and `<br>`; a comment after text in a unit is an atom in it (React writes `<!-- -->` between
two pieces of a sentence), a comment before any is not in a unit. Inside a unit, inline
elements (`<b>`, `<a href>`, `<em>`, `<span>`, ...) are pairs and inline elements that are not
translated (`<code>`, `<img>`, `<span translate="no">`) are atoms, and so are URLs and e-mail
addresses in the text (copied as written); app/formats/inline.py translates the unit whole
with placeholders when the model keeps them, else text run by text run (see there). Whitespace
inside a unit is collapsed to one space for the model (HTML displays it so); whitespace before
and after a unit or a run is kept as written. Soft hyphens (`&shy;`, U+00AD) and `<wbr>` are
left out of the text the model sees: they mark where a word of the document's language may
break, a place the translation does not have (sent, they cut the word in two); a translated
unit comes back without them, and an address keeps them (it is copied as written).

A `<` is the start of a tag only when a letter, `/`, `!` or `?` follows it (as html.parser and
browsers read it): `<3` and `< 5` are text, translated with the rest. After the last tag, such a
`<` without its `>` is a tag cut off by the end of the input, copied as it is with what follows
(where no `>` follows, at once: html.parser took time quadratic in its length). A tag that
html.parser cannot read (`<p class='x</b>`, its quote left open) is copied as it is too, never
taken for text.

Translated text is escaped for HTML: a character the unit wrote as an entity (`&copy;`,
`&nbsp;`, `&#169;`) is written with that same entity when it comes back (with a `;`, which a
legacy `&copy` may lack), `<` is written `&lt;`, and `&` is written `&amp;` unless a space
follows it. Given the language the translation is in, the `lang` attributes of what was
translated are set to it (app/html_lang.py).
"""

from __future__ import annotations

import html
import html.entities
import re
from collections.abc import Callable
from html.parser import HTMLParser
from typing import NamedTuple

from .formats.inline import (
    SOFT_HYPHEN,
    Token,
    Unit,
    UnitBuilder,
    collapse,
    distribute,
    translate_units,
)
from .html_lang import LANG_ATTRS, Span, changed_scopes, lang_spans, meta_spans, rewrite

#: what html.parser may read as the start of a tag, comment or declaration
_TAG_OPEN = re.compile(r"<[A-Za-z/!?]")
#: where html.parser looks for a token after text (its `interesting`): only at "<", so that
#: character references stay in the text
_TAG_START = re.compile("<")
#: a character reference as html.unescape finds one (HTML's rules for text): numeric, or a
#: name, with or without ";" (legacy names such as "&copy" may end without one)
_CHARREF = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")
#: content never translated
SKIPPED = frozenset({"script", "style", "code", "pre", "textarea", "svg", "math"})
#: phrasing elements that may sit inside a sentence
INLINE = frozenset(
    [
        "a",
        "abbr",
        "acronym",
        "b",
        "bdi",
        "bdo",
        "big",
        "cite",
        "data",
        "del",
        "dfn",
        "em",
        "font",
        "i",
        "ins",
        "kbd",
        "label",
        "mark",
        "q",
        "s",
        "samp",
        "small",
        "span",
        "strike",
        "strong",
        "sub",
        "sup",
        "time",
        "tt",
        "u",
        "var",
        "code",
    ]
)
#: inline elements without content: atoms inside a sentence
INLINE_VOID = frozenset({"img", "input"})
VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
        "keygen",
    ]
)


#: start tags that close an open <p> (HTML: "close a p element" when one is in button scope);
#: not <table>, which does so only in a document with a doctype (outside quirks mode)
_CLOSES_P = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "center",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "li",
        "dd",
        "dt",
        "listing",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "plaintext",
        "pre",
        "search",
        "section",
        "summary",
        "ul",
        "xmp",
    ]
)
_FOREIGN = frozenset({"svg", "math"})
#: inside these, no end tag is implied: foreign content follows other rules, and a
#: <textarea>'s or <title>'s content is their text (a browser parses no tags in it)
_NO_IMPLIED_ENDS = _FOREIGN | {"textarea", "title"}
_HEADINGS = frozenset(["h1", "h2", "h3", "h4", "h5", "h6"])
#: HTML's "special" elements, which stop the search for an open <li>, <dd> or <dt> (except
#: address, div and p)
_SPECIAL = frozenset(
    [
        "applet",
        "area",
        "article",
        "aside",
        "base",
        "basefont",
        "bgsound",
        "blockquote",
        "body",
        "br",
        "button",
        "caption",
        "center",
        "col",
        "colgroup",
        "details",
        "dir",
        "dl",
        "embed",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "frame",
        "frameset",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "head",
        "header",
        "hgroup",
        "hr",
        "html",
        "iframe",
        "img",
        "input",
        "keygen",
        "li",
        "link",
        "listing",
        "main",
        "marquee",
        "menu",
        "meta",
        "nav",
        "noembed",
        "noframes",
        "noscript",
        "object",
        "ol",
        "param",
        "plaintext",
        "pre",
        "script",
        "search",
        "section",
        "select",
        "source",
        "style",
        "summary",
        "table",
        "tbody",
        "td",
        "template",
        "textarea",
        "tfoot",
        "th",
        "thead",
        "title",
        "tr",
        "track",
        "ul",
        "wbr",
        "xmp",
        "dd",
        "dt",
    ]
)
#: elements that end the scope a <p> is looked for in ("button scope")
_BUTTON_SCOPE = frozenset(
    [
        "applet",
        "caption",
        "html",
        "table",
        "td",
        "th",
        "marquee",
        "object",
        "template",
        "button",
        "svg",
        "math",
    ]
)
#: elements that end the scope a table row or cell is looked for in ("table scope")
_TABLE_SCOPE = frozenset({"html", "table", "template"})
_CELLS = frozenset({"td", "th"})
_SECTIONS = frozenset({"tbody", "thead", "tfoot"})


#: the searches down the open elements that _implied_end makes: (the elements looked for, the
#: elements that end the search); an <li>, <dd> or <dt> is looked for up to a special element
#: other than <address>, <div> and <p>
_SEARCHES = (
    (frozenset({"p"}), _BUTTON_SCOPE),
    (frozenset({"li"}), _SPECIAL - {"address", "div", "p"}),
    (frozenset({"dd", "dt"}), _SPECIAL - {"address", "div", "p"}),
    (_CELLS, _TABLE_SCOPE),
    (frozenset({"tr"}), _TABLE_SCOPE),
    (_SECTIONS, _TABLE_SCOPE),
)
_P, _LI, _DD, _CELL, _TR, _SECTION = range(len(_SEARCHES))
_TABLE_ENDS = {
    "td": [_CELL],
    "th": [_CELL],
    "tr": [_TR, _CELL],
    **dict.fromkeys(_SECTIONS, [_SECTION, _TR, _CELL]),
}


class _OpenElements:
    """The open elements, outermost first: (name, translated, inside an element that is never
    translated, the language scope of its content: app/html_lang.py). What a start or end tag looks up in them (the nearest open <p> in button
    scope, the nearest open element of a name, ...) is kept up to date as elements are opened
    and closed, so that each tag takes constant time: searching down the elements at every tag
    made a document of deeply nested elements take time quadratic in its size (20,000 nested
    <div>s, 220 kB, took 16 s)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, bool, bool, int]] = []
        # per element: for each of _SEARCHES, the index of the nearest element found at or
        # below it (None: none, or the search ends first); then whether it or an element
        # around it implies no end tags (_NO_IMPLIED_ENDS)
        self._found: list[tuple] = []
        self._where: dict[str, list[int]] = {}  # the indices of the open elements of each name

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[str, bool, bool, int]:
        return self.items[i]

    def __bool__(self) -> bool:
        return bool(self.items)

    def push(self, item: tuple[str, bool, bool, int]) -> None:
        name, at = item[0], len(self.items)
        prev = self._found[-1] if self._found else (None,) * len(_SEARCHES) + (False,)
        found = [
            at if name in wanted else None if name in stop else before
            for (wanted, stop), before in zip(_SEARCHES, prev, strict=False)
        ]
        self._found.append((*found, prev[-1] or name in _NO_IMPLIED_ENDS))
        self.items.append(item)
        self._where.setdefault(name, []).append(at)

    def truncate(self, keep: int) -> None:
        """Closes every element from index `keep` on."""
        for name, *_ in self.items[keep:]:
            self._where[name].pop()
        del self.items[keep:], self._found[keep:]

    def find(self, search: int) -> int | None:
        """The index of the nearest element of _SEARCHES[search], or None."""
        return self._found[-1][search] if self._found else None

    def implies_ends(self) -> bool:
        """Whether a start tag may end open elements here (not inside <svg>, <math>,
        <textarea> or <title>)."""
        return not (self._found and self._found[-1][-1])

    def last(self, name: str) -> int | None:
        """The index of the innermost open element named `name`, or None."""
        where = self._where.get(name)
        return where[-1] if where else None


def _implied_end(stack: _OpenElements, tag: str) -> int:
    """How many of the open elements a start tag `tag` leaves open: the elements whose end
    tag HTML implies before it (a new <li> ends an open <li>, a block ends an open <p>, a cell
    an open cell, ...), for the common cases of the HTML standard's tree construction."""
    keep = len(stack)
    if tag in ("li", "dd", "dt"):
        found = stack.find(_LI if tag == "li" else _DD)
        if found is not None:
            keep = found
    elif tag in _TABLE_ENDS:
        # a cell ends an open cell; a row an open row (or a cell outside one); a section an
        # open section
        for search in _TABLE_ENDS[tag]:
            found = stack.find(search)
            if found is not None:
                keep = found
                break
    elif tag in ("option", "optgroup"):
        while keep and stack[keep - 1][0] == "option":
            keep -= 1
        if tag == "optgroup" and keep and stack[keep - 1][0] == "optgroup":
            keep -= 1
    elif tag in ("rb", "rtc"):
        while keep and stack[keep - 1][0] in ("rb", "rp", "rt", "rtc"):
            keep -= 1
    elif tag in ("rt", "rp"):
        while keep and stack[keep - 1][0] in ("rb", "rp", "rt"):
            keep -= 1
    if tag in _CLOSES_P:
        p = stack.find(_P)
        if p is not None:
            keep = min(keep, p)
    if tag in _HEADINGS and keep and stack[keep - 1][0] in _HEADINGS:
        keep -= 1
    return keep


def _references(text: str):
    """(start, end, characters) of each character reference in `text`, as a browser reads it:
    a known name (the longest a legacy name without ";" allows: `&copy2023` is "\u00a9"
    and "2023") or a number; `&T` in `AT&T` is no reference."""
    for m in _CHARREF.finditer(text):
        name = m.group(1)
        if name[0] == "#" or name in html.entities.html5:
            yield m.start(), m.end(), html.unescape(m.group())
            continue
        for end in range(len(name) - 1, 1, -1):  # as html.unescape: a legacy name's prefix
            if name[:end] in html.entities.html5:
                yield m.start(), m.start() + 1 + end, html.entities.html5[name[:end]]
                break


class HtmlError(ValueError):
    """The document could not be read at all (never for merely broken markup)."""


class _RawTextEnd:
    """Where the content of a <script> or <style> ends, as a browser finds it, for html.parser
    (its `interesting` pattern): at "</script" followed by whitespace, "/" or ">", but in a
    script not between a "<script" and the next "-->" after a "<!--" (HTML's "script data
    double escaped" state: `<!-- document.write("<script>...</script>"); -->` is all script).
    html.parser ended a script at the first "</script>" in it, and the rest of the script
    was translated as text."""

    _TOKENS = re.compile(r"<!--|-->|</?script(?=[\s/>])", re.IGNORECASE)

    def __init__(self, elem: str):
        self._end = re.compile(rf"</{elem}(?=[\s/>])", re.IGNORECASE)
        self._script = elem == "script"
        # how far the content has been read, and the state there (html.parser searches again
        # from further on after an end tag it cannot read yet, a "</script" without ">")
        self._at: int | None = None
        self._escaped = self._double = False

    def search(self, rawdata: str, i: int) -> re.Match[str] | None:
        if not self._script:
            return self._end.search(rawdata, i)
        at = i if self._at is None else self._at
        escaped, double = self._escaped, self._double
        while m := self._TOKENS.search(rawdata, at):
            token, at = m.group().lower(), m.end()
            if token == "<!--":
                escaped = escaped or not double
                at = m.start() + 2  # "<!-->" opens and closes
            elif token == "-->":
                escaped = double = False
            elif token == "<script":
                double = double or escaped
            elif double:  # "</script" in the double escaped state ends that state
                double = False
            elif m.start() >= i:
                self._at, self._escaped, self._double = m.start(), escaped, double
                return m
        self._at, self._escaped, self._double = at, escaped, double
        return None


class _Tokenizer(HTMLParser):
    """Records (kind, name, attrs, start offset) for every token. Character references are
    left in the text (HtmlDocument reads them): html.parser took `&T` in `AT&T` for a
    reference, dropped a `&` at the very end, and after a `&#` that starts none (`&# `) it gave
    the rest of the document, tags and all, as text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=False)
        starts, at = [0], 0
        while (at := text.find("\n", at) + 1) > 0:
            starts.append(at)
        self._line_starts = starts
        self.events: list[tuple[str, str, list, int]] = []
        self._last_gt: int | None = None  # set by close()

    def _add(self, kind: str, name: str = "", attrs: list | None = None) -> None:
        line, col = self.getpos()
        self.events.append((kind, name, attrs or [], self._line_starts[line - 1] + col))

    def handle_starttag(self, tag, attrs):
        self._add("start", tag, attrs)

    def handle_startendtag(self, tag, attrs):
        self._add("startend", tag, attrs)

    def handle_endtag(self, tag):
        self._add("end", tag)

    def handle_data(self, data):
        self._add("data", data)

    def handle_comment(self, data):
        self._add("comment")

    def handle_decl(self, decl):
        self._add("other")

    def handle_pi(self, data):
        self._add("other")

    def unknown_decl(self, data):
        self._add("other")

    def reset(self):
        super().reset()
        self.interesting = _TAG_START

    #: as html.parser reads them on every Python version: newer releases (gh-118350,
    #: gh-137836) also read <title> and <textarea> as escapable raw text and <xmp>, <iframe>,
    #: <noembed>, <noframes> and <plaintext> as raw text, calling set_cdata_mode with an
    #: `escapable` this tokenizer did not take (a TypeError: every page with a <title> was
    #: refused); HtmlDocument gives those elements' content its own reading (_NO_IMPLIED_ENDS,
    #: SKIPPED)
    CDATA_CONTENT_ELEMENTS = ("script", "style")
    RCDATA_CONTENT_ELEMENTS = ()

    def set_cdata_mode(self, elem, **_):
        if elem.lower() not in self.CDATA_CONTENT_ELEMENTS:
            return
        super().set_cdata_mode(elem)
        self.interesting = _RawTextEnd(self.cdata_elem)

    def clear_cdata_mode(self):
        super().clear_cdata_mode()
        self.interesting = _TAG_START

    def close(self):
        # (what feed could not read: it stops at the first tag it cannot complete)
        self._last_gt = self.rawdata.rfind(">")
        super().close()

    def _rest_as_text(self, i: int) -> int | None:
        """In close(): when no ">" follows `i`, no tag, comment or declaration can end after
        it, and html.parser would give the rest as text, a piece after each "<", searching
        the whole rest again for each one: time quadratic in the rest's size ("<a " repeated:
        24 kB took 8 s, a 2 MB .html file hours). The rest is given at once."""
        if self._last_gt is None or i <= self._last_gt:
            return None
        self.handle_data(self.rawdata[i:])
        return len(self.rawdata)

    def parse_starttag(self, i):
        return self._rest_as_text(i) or super().parse_starttag(i)

    def parse_comment(self, i, report=1):
        return self._rest_as_text(i) or super().parse_comment(i, report)

    def parse_pi(self, i):
        return self._rest_as_text(i) or super().parse_pi(i)

    def parse_html_declaration(self, i):
        return self._rest_as_text(i) or super().parse_html_declaration(i)

    def parse_endtag(self, i):
        if (rest := self._rest_as_text(i)) is not None:
            return rest
        # the end of a <script> or <style> as a browser reads it ("</script >", "</style/>",
        # "</script foo>"): html.parser took only "</script>" and "</script >"
        if self.cdata_elem is not None and re.match(
            rf"</{self.cdata_elem}[\s/>]", self.rawdata[i : i + len(self.cdata_elem) + 3], re.I
        ):
            end = self.rawdata.find(">", i)
            if end < 0:
                return -1
            self.handle_endtag(self.cdata_elem)
            self.clear_cdata_mode()
            return end + 1
        return super().parse_endtag(i)

    def parse_marked_section(self, i, report=1):
        at = self.getpos()
        try:
            return super().parse_marked_section(i, report)
        except AssertionError:
            self.lineno, self.offset = at  # moved to where the name was expected
            # a "<![" that opens no marked section html.parser knows ("<![0]", "<![ if ...]>"),
            # which made it raise (the document was refused with 400): a bogus comment up to
            # the next ">", as a browser reads any "<![" in HTML content
            end = self.rawdata.find(">", i + 3)
            if end < 0:
                return -1  # the rest of the input: text, as for any markup cut off
            self._add("other")
            return end + 1


def _translate_attr(attrs: list, inherited: bool) -> bool:
    """Whether an element's text is translated: its `translate` attribute, else a class
    `notranslate` (the convention of Google's page translation, which CMS plugins write)
    says no, else as its parent."""
    for name, value in attrs:
        if name == "translate":
            value = (value or "").strip().lower()
            if value == "no":
                return False
            if value in ("", "yes"):
                return True
    for name, value in attrs:
        if name == "class" and "notranslate" in (value or "").lower().split():
            return False
    return inherited


class _Ref(NamedTuple):
    """Markup or text as written, in the language scope it stands in (for a start tag: the
    scope of its content); `spans`: where the language it declares stands in it
    (app/html_lang.py)."""

    raw: str
    scope: int
    spans: tuple[Span, ...] = ()


class _HtmlUnit:
    """A unit plus the entity spellings its text used, the language scope it starts in and
    its text in each scope."""

    def __init__(
        self, unit: Unit, spellings: dict[str, str], scope: int, texts: list[tuple[int, str]]
    ):
        self.unit, self.spellings, self.scope, self.texts = unit, spellings, scope, texts


class HtmlDocument:
    """`texts` to translate, then `render(translations)` gives the translated document."""

    def __init__(self, text: str, atoms: re.Pattern[str] | None = None):
        """`atoms`: what in the text is markup of another kind, kept as it is (the override
        tags of subtitles, `{\\an8}`)."""
        self.pieces: list[str | _Ref | _HtmlUnit] = []
        self._atoms = atoms
        # the language scopes (app/html_lang.py): 0 is the document outside every lang
        # attribute, then one per element with one, after the scope it stands in; `_scope`:
        # where the token being read stands, `_unit_scope`: where the unit being built began
        self._parents: list[int | None] = [None]
        self._scope = self._unit_scope = self._run_scope = 0
        self._texts: list[tuple[int, str]] = []  # (scope, text) of the unit being built
        self._builder = UnitBuilder()
        self._raw_items: list[str] = []  # the raw text of the unit being built, in order
        self._run: list[tuple[str, str]] = []  # (text, raw text) of the text not added yet
        self._spellings: dict[str, str] = {}
        try:
            tokenizer = _Tokenizer(text)
            tokenizer.feed(text)
            tokenizer.close()
        except Exception as exc:  # noqa: BLE001 (html.parser raises little, but anything here is "cannot read")
            raise HtmlError(f"the HTML could not be read ({type(exc).__name__}: {exc})") from None
        events = tokenizer.events
        if events and events[0][3] != 0:
            # should html.parser report nothing for the start of the input, it is kept as it is
            events.insert(0, ("data", "", [], 0))
        offsets = [e[3] for e in events] + [len(text)]
        if offsets != sorted(offsets):
            raise HtmlError("the HTML could not be read (tokenizer positions out of order)")
        self._walk(text, events, offsets)
        self._flush()

    @property
    def units(self) -> list[Unit]:
        return [p.unit for p in self.pieces if isinstance(p, _HtmlUnit)]

    @property
    def texts(self) -> list[str]:
        return [r for u in self.units for r in u.requests]

    @property
    def visible_text(self) -> str:
        """The document's text as a reader sees it: its units' text runs, without the
        markup."""
        runs = (collapse(str(i.value)) for u in self.units for i in u.items if i.kind == "text")
        return " ".join(r for r in runs if r)

    def render(self, translations: list[str], language: str | None = None) -> str:
        return self.render_tokens(distribute(self.units, translations), language=language)

    def render_tokens(
        self, all_tokens: list[list[Token]], plain: bool = False, language: str | None = None
    ) -> str:
        """The document with each unit's tokens; `plain` writes translated text unescaped
        (for markup inside text files, such as subtitles' <i>); `language`: the code the
        translation is in, for the lang attributes of what was translated
        (app/html_lang.py)."""
        changed = self._changed(all_tokens) if language else set()

        def markup(ref: _Ref) -> str:
            if ref.spans and ref.scope in changed:
                return rewrite(ref.raw, ref.spans, language)
            return ref.raw

        it = iter(all_tokens)
        out = []
        for piece in self.pieces:
            if isinstance(piece, str):
                out.append(piece)
                continue
            if isinstance(piece, _Ref):
                out.append(markup(piece))
                continue
            for tok in next(it):
                if tok.kind != "text":
                    out.append(markup(tok.ref))
                elif tok.translated:
                    out.append(tok.text if plain else escape(tok.text, piece.spellings))
                else:  # the original, as written (whitespace around a unit has no ref)
                    out.append(tok.text if tok.ref is None else tok.ref.raw)
        return "".join(out)

    def _changed(self, all_tokens: list[list[Token]]) -> set[int]:
        """The language scopes whose text the tokens translate (app/html_lang.py)."""
        source: dict[int, list[str]] = {}
        output: dict[int, list[str]] = {}
        units = (p for p in self.pieces if isinstance(p, _HtmlUnit))
        for piece, tokens in zip(units, all_tokens, strict=True):
            for scope, text in piece.texts:
                source.setdefault(scope, []).append(text)
            # the scope each piece of the translation stands in: a text run's own, else that
            # of the pairs around it (translated whole, a unit's pairs are balanced)
            scopes = [piece.scope]
            for tok in tokens:
                if tok.kind == "open":
                    scopes.append(tok.ref.scope)
                elif tok.kind == "close" and len(scopes) > 1:
                    scopes.pop()
                elif tok.kind == "text":
                    scope = scopes[-1] if tok.ref is None else tok.ref.scope
                    output.setdefault(scope, []).append(tok.text)
        return changed_scopes(self._parents, source, output)

    # -- building ----------------------------------------------------------------------------
    def _flush(self) -> None:
        self._end_run()
        builder = self._builder
        if builder.empty():
            return
        unit = builder.build()
        if unit is None:
            self.pieces.append("".join(self._raw_items))
        else:
            self.pieces.append(_HtmlUnit(unit, self._spellings, self._unit_scope, self._texts))
        self._builder, self._raw_items, self._spellings = UnitBuilder(), [], {}
        self._texts = []

    def _raw(self, raw: str | _Ref) -> None:
        self._flush()
        self.pieces.append(raw if isinstance(raw, str) or raw.spans else raw.raw)

    def _text(self, text: str, raw: str) -> None:
        if not self._run:
            self._run_scope = self._scope
            if self._builder.empty():
                self._unit_scope = self._scope
        self._run.append((text, raw))  # one text item per run between markup: see _end_run
        self._raw_items.append(raw)

    def _end_run(self) -> None:
        if not self._run:
            return
        pieces, self._run = self._run, []
        decoded, raw = "".join(t for t, _ in pieces), "".join(r for _, r in pieces)
        # where each character of the text starts in the raw text (for the raw text of a URL)
        starts: list[int] = []
        at = 0
        for t, r in pieces:
            if t == r:
                starts.extend(range(at, at + len(t)))
            elif t:  # a character reference: its characters start at it, then after it
                starts.extend([at] + [at + len(r)] * (len(t) - 1))
            at += len(r)
        starts.append(at)
        scope = self._run_scope  # (no markup in a run: the scope it began in)
        self._builder.text(
            decoded, _Ref(raw, scope), lambda s, e: _Ref(raw[starts[s] : starts[e]], scope)
        )
        self._texts.append((scope, decoded))

    def _data(self, raw: str) -> None:
        at = 0
        for m in self._atoms.finditer(raw) if self._atoms else ():
            if m.start() > at:
                self._chars(raw[at : m.start()])
            self._item("atom", m.group())
            at = m.end()
        if at < len(raw):
            self._chars(raw[at:])

    def _chars(self, raw: str) -> None:
        """Text as written, its character references read as a browser reads them, without
        its soft hyphens (see the module docstring)."""
        at = 0
        for start, end, decoded in _references(raw):
            if start > at:
                self._plain(raw[at:start])
            ref = raw[start:end]
            if not decoded.isascii() or decoded in ("&", "<", ">", '"', "'"):
                # written back with its ";": "&copy" before a translated "2023" is still
                # "\u00a92023", but "&not" before "in;" would be "&notin;"
                self._spellings.setdefault(decoded, ref if ref.endswith(";") else ref + ";")
            self._text("" if decoded == SOFT_HYPHEN else decoded, ref)
            at = end
        if at < len(raw):
            self._plain(raw[at:])

    def _plain(self, raw: str) -> None:
        """Text without character references."""
        for part in re.split(f"({SOFT_HYPHEN})", raw):
            if part:
                self._text("" if part == SOFT_HYPHEN else part, part)

    def _walk(self, text: str, events: list, offsets: list[int]) -> None:
        # open elements: (name, translated, inside an element that is never translated, the
        # language scope of its content)
        stack = _OpenElements()
        atom: list[str] | None = None  # raw text of an inline element kept whole
        atom_depth = 0
        # after the last tag, the first "<" given as text that may open a tag (a letter, "/",
        # "!" or "?" follows it) starts a tag cut off by the end of the input: from there on
        # everything is copied as it is; any other "<" ("<3", "< 5") is text
        last_tag = max((i for i, e in enumerate(events) if e[0] != "data"), default=-1)
        cut_off = min(
            (i for i, e in enumerate(events) if i > last_tag and _TAG_OPEN.match(text, e[3])),
            default=len(events),
        )
        for index, ((kind, name, attrs, start), end) in enumerate(
            zip(events, offsets[1:], strict=True)
        ):
            raw = text[start:end]
            if (
                kind == "startend"
                and name not in VOID
                and name not in _FOREIGN
                and all(stack.last(f) is None for f in _FOREIGN)
            ):
                kind = "start"  # `<div/>`: HTML ignores the slash (only SVG and MathML close)
            if kind in ("start", "startend") and stack.implies_ends():
                # the end tags HTML implies here (not inside <svg> or <math>, whose content
                # follows other rules, nor in a <textarea> or <title>)
                stack.truncate(_implied_end(stack, name))
                if atom is not None and len(stack) < atom_depth:
                    self._item("atom", "".join(atom))  # it ended before this tag
                    atom = None
            self._scope = stack[-1][3] if stack else 0
            tag: str | _Ref = raw  # as it is written back where it is markup of the unit's
            translating = stack[-1][1] if stack else True
            closed = stack.last(name) if kind == "end" else None
            if atom is not None and closed is not None and closed < atom_depth - 1:
                # an end tag of an element around an inline element kept whole and left open
                # (`<p>A <span translate="no">B</p>C`): a browser ends it there, so the atom
                # ends before this tag, which then ends the unit as it would have (it was
                # taken into the atom, and the text after it joined the paragraph's unit)
                self._item("atom", "".join(atom))
                atom, translating = None, stack[closed][1]
            if kind == "start" and name not in VOID:
                hard = (stack[-1][2] if stack else False) or name in SKIPPED
                translated = not hard and _translate_attr(attrs, translating)
                scope, spans = self._scope, ()
                if any(a in LANG_ATTRS for a, _ in attrs):  # a language scope of its own
                    self._parents.append(scope)
                    scope = len(self._parents) - 1
                    spans = lang_spans(raw) if translated else ()
                stack.push((name, translated, hard, scope))
                tag = _Ref(raw, scope, spans)
            elif closed is not None:
                stack.truncate(closed)
            elif name == "meta" and kind in ("start", "startend") and translating:
                tag = _Ref(raw, self._scope, meta_spans(raw))
            if atom is not None:  # inside an inline element kept whole
                atom.append(raw)
                if len(stack) < atom_depth:
                    self._item("atom", "".join(atom))
                    atom = None
                continue
            if not translating:
                # the element that stops translation began with a boundary or an atom; a unit
                # still open here was inside an element marked translate="yes" that has just
                # ended (its end tag written or implied): it ends here, before this markup
                self._raw(tag)
                continue
            if kind == "data":
                if index >= cut_off or raw != name or _TAG_OPEN.match(raw):
                    # (the last: a tag html.parser could not read, `<p class='x</b>` with
                    # its quote left open, which it gives as text: markup for a browser, it
                    # was translated and escaped into text on the page)
                    self._raw(raw)
                else:
                    self._data(raw)
                continue
            if kind == "start" and name in INLINE:
                if stack[-1][1]:
                    self._item("open", tag, name)
                else:  # <code>, <span translate="no">: the whole element is one atom
                    atom, atom_depth = [raw], len(stack)
            elif kind in ("start", "startend") and name == "wbr" and stack.last("title") is None:
                # where a browser may break a word or an address, as a soft hyphen: the text
                # runs on (an atom, it cut "inter<wbr>national" in two, and sent the pieces
                # of an address to the model); in a <title>, text a browser shows as it is
                self._text("", raw)
            elif kind in ("start", "startend") and name in INLINE_VOID | INLINE:
                self._item("atom", raw)
            elif kind == "end" and name in INLINE:
                self._item("close", raw, name)
            elif kind == "comment" and (self._run or not self._builder.empty()):
                # a comment after text, where the sentence may go on (React writes "<!-- -->"
                # between two pieces of text): an atom, as a Word bookmark is (it ended the
                # unit, and the sentence was sent in two)
                self._item("atom", raw)
            else:  # block tags, <br>, comments before any text, doctype: unit boundaries
                self._raw(tag)
        if atom is not None:  # an inline element kept whole that the document never closed
            self._item("atom", "".join(atom))

    def _item(self, kind: str, raw: str | _Ref, name: str = "") -> None:
        self._end_run()
        if self._builder.empty():
            self._unit_scope = self._scope
        ref = raw if isinstance(raw, _Ref) else _Ref(raw, self._scope)
        if kind == "atom":
            self._builder.atom(ref)
        else:
            getattr(self._builder, kind)(name, ref)
        self._raw_items.append(ref.raw)


def escape(text: str, spellings: dict[str, str]) -> str:
    """Translated text as HTML; see the module docstring."""
    # the spellings by their first character, longest first: a unit may hold a thousand
    # different entities, and trying each at every character took time in their product
    by_first: dict[str, list[str]] = {}
    for key in sorted(spellings, key=len, reverse=True):
        by_first.setdefault(key[0], []).append(key)
    out = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        key = next((k for k in by_first.get(ch, ()) if text.startswith(k, i)), None)
        if key is not None:
            out.append(spellings[key])
            i += len(key)
            continue
        if ch == "<":
            out.append("&lt;")
        elif ch == "&":
            out.append("&" if i + 1 < n and text[i + 1] in " \t\n" else "&amp;")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def translate_html(
    text: str, translate_texts: Callable[[list[str]], list[str]], language: str | None = None
) -> str:
    """`text` translated with `translate_texts` (one call for the whole document) into
    `language` (for its lang attributes: app/html_lang.py)."""
    doc = HtmlDocument(text)
    return doc.render_tokens(translate_units(doc.units, translate_texts), language=language)


def render_all(
    documents: list[HtmlDocument], translations: list[str], language: str | None = None
) -> list[str]:
    """Each document rendered from its share of `translations` (texts of all, in order),
    which are in `language`."""
    out, at = [], 0
    for doc in documents:
        n = len(doc.texts)
        out.append(doc.render(translations[at : at + n], language))
        at += n
    return out


def extract_all(texts: list[str]) -> tuple[list[HtmlDocument], list[str]]:
    documents = [HtmlDocument(t) for t in texts]
    return documents, [r for d in documents for r in d.texts]
