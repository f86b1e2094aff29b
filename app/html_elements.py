"""HTML's elements as the translation reads them: which are never translated, which sit
inside a sentence, which have no content, and the tree of open elements, with the ends a
browser implies.

An element ends where a browser ends it, also when its end tag is left out: a start tag ends the
open elements whose end HTML implies before it (a new `<li>` an open `<li>`, `<dd>`/`<dt>` an
open `<dd>`/`<dt>`, a block such as `<p>`, `<div>`, `<ul>` or `<h2>` an open `<p>`, a cell an
open cell, a row an open row, `<option>` an open `<option>`), and an end tag ends the elements
left open inside the one it closes (`<p>A <span translate="no">B</p>`), so translate="no" and
units end there too (app/html_format.py).
"""

from __future__ import annotations

#: content never translated
SKIPPED = frozenset({"script", "style", "code", "kbd", "samp", "pre", "textarea", "svg", "math"})
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
FOREIGN = frozenset({"svg", "math"})
#: inside these, no end tag is implied: foreign content follows other rules, and a
#: <textarea>'s or <title>'s content is their text (a browser parses no tags in it)
_NO_IMPLIED_ENDS = FOREIGN | {"textarea", "title"}
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


#: the searches down the open elements that implied_end makes: (the elements looked for, the
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


class OpenElements:
    """The open elements, outermost first: (name, translated, inside an element that is never
    translated, the language scope of its content: app/html_lang.py, its number in the
    document: app/html_format.py). What a start or end tag looks up in them (the nearest open <p> in button
    scope, the nearest open element of a name, ...) is kept up to date as elements are opened
    and closed, so that each tag takes constant time: searching down the elements at every tag
    made a document of deeply nested elements take time quadratic in its size (20,000 nested
    <div>s, 220 kB, took 16 s)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, bool, bool, int, int]] = []
        # per element: for each of _SEARCHES, the index of the nearest element found at or
        # below it (None: none, or the search ends first); then whether it or an element
        # around it implies no end tags (_NO_IMPLIED_ENDS)
        self._found: list[tuple] = []
        self._where: dict[str, list[int]] = {}  # the indices of the open elements of each name

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[str, bool, bool, int, int]:
        return self.items[i]

    def __bool__(self) -> bool:
        return bool(self.items)

    def push(self, item: tuple[str, bool, bool, int, int]) -> None:
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


def implied_end(stack: OpenElements, tag: str) -> int:
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


def translate_attr(attrs: list, inherited: bool) -> bool:
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
