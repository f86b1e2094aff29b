"""The attributes of an HTML element whose values are text for people, translated with the
document's text (app/html_format.py).

A page shows or reads out more text than its elements' content: a link's or an image's tip
(`title`), an image's alternative text (`alt`), a field's `placeholder`, a button's `value`, the
names screen readers say (`aria-label`, ...), and what search engines and link previews show
(`<meta name="description">`, Open Graph's and Twitter's title and description). These are
translated, each value one text sent with the document's others (in the same call):

- on any element: `title` (not the `title` of a style sheet, which names a set of style sheets
  to choose from, nor the `title` and `aria-label` of a page break, `role="doc-pagebreak"` or
  `epub:type="pagebreak"`, which give the printed page's number: `xii`), `aria-label`,
  `aria-description`, `aria-roledescription`, `aria-placeholder` and `aria-valuetext`;
- `alt` of `<img>`, `<area>` and `<input type="image">`; `placeholder` of `<input>` and
  `<textarea>`; `value` of `<input type="button">`, `"submit"` and `"reset"`; `label` of
  `<track>`, `<optgroup>` and `<option>`; `abbr` of `<th>`;
- `content` of `<meta>` whose name or property is `description`, `og:title`,
  `og:description`, `og:image:alt`, `twitter:title`, `twitter:description` or
  `twitter:image:alt` (`keywords` is not translated, as an office file's keywords are not: a
  list of search terms that a model, which translates sentences, turns into a sentence).

An element's attributes are translated where its own text would be, by its `translate`
attribute and the class `notranslate` (inherited as HTML's translate is); an element whose
content is never translated (`<code>`, `<pre>`, `<textarea>`, `<svg>`, ...) has its own
attributes translated (`<textarea placeholder>`), but not the elements inside it.

A value is read as a browser reads it (a legacy entity without ";" before "=" or a letter or
digit is text: `?a=1&copy=2`); the translation is written back within the quotes it had, with
`&`, `<` and the quote escaped, an entity the value wrote coming back as written, and an
unquoted value quoted. Everything else in the tag stays as written.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from .formats.inline import SOFT_HYPHEN, Token, Unit, UnitBuilder
from .html_lang import attributes
from .html_text import escape, references

#: attributes whose value is text for people on any element
_ANY = frozenset(
    [
        "title",
        "aria-label",
        "aria-description",
        "aria-roledescription",
        "aria-placeholder",
        "aria-valuetext",
    ]
)
#: on these elements, these attributes too
_OWN = {
    "img": {"alt"},
    "area": {"alt"},
    "input": {"placeholder"},
    "textarea": {"placeholder"},
    "track": {"label"},
    "optgroup": {"label"},
    "option": {"label"},
    "th": {"abbr"},
}
_BUTTONS = frozenset({"button", "submit", "reset"})
#: the <meta> whose content is translated, by their name or property (Open Graph's and
#: Twitter's are written with either)
_META = frozenset(
    [
        "description",
        "og:title",
        "og:description",
        "og:image:alt",
        "twitter:title",
        "twitter:description",
        "twitter:image:alt",
    ]
)


def text_attributes(name: str, attrs: Sequence[tuple[str, str | None]]) -> set[str]:
    """The names of the attributes of a start tag `name` whose values are text for people."""
    first: dict[str, str] = {}
    for a, v in attrs:
        first.setdefault(a, (v or "").strip().lower())
    if name == "meta":
        named = first.get("name") in _META or first.get("property") in _META
        return {"content"} if named else set()
    out = set(_ANY) | _OWN.get(name, set())
    if name == "input":
        kind = first.get("type", "")
        if kind == "image":
            out.add("alt")
        elif kind in _BUTTONS:
            out.add("value")
    elif name == "style" or (name == "link" and "stylesheet" in first.get("rel", "").split()):
        out.discard("title")
    if (
        "doc-pagebreak" in first.get("role", "").split()
        or "pagebreak" in first.get("epub:type", "").split()
    ):
        out -= {"title", "aria-label"}  # a printed page's number, "xii"
    return out & first.keys()


def read_value(raw: str) -> tuple[str, dict[str, str]]:
    """An attribute's value as a browser reads it, and the spellings of the characters it
    wrote as entities (app/html_text.py's `escape` writes them back so)."""
    out: list[str] = []
    spellings: dict[str, str] = {}
    at = 0
    for start, end, decoded in references(raw):
        ref = raw[start:end]
        if not ref.endswith(";") and end < len(raw) and (raw[end] == "=" or raw[end].isalnum()):
            continue  # in an attribute, a legacy name before "=" or a letter is text
        out.append(raw[at:start])
        if not decoded.isascii() or decoded in ("&", "<", ">", '"', "'"):
            spellings.setdefault(decoded, ref if ref.endswith(";") else ref + ";")
        out.append(decoded)
        at = end
    out.append(raw[at:])
    return "".join(out), spellings


class AttrText:
    """One attribute value to translate: its unit (one text, its addresses kept), the entity
    spellings it used, the language scope it stands in (app/html_lang.py) and its text."""

    def __init__(self, unit: Unit, spellings: dict[str, str], scope: int, text: str):
        self.unit, self.spellings, self.scope, self.text = unit, spellings, scope, text

    def written(self, tokens: list[Token], quote: str, xml: bool = False) -> str | None:
        """The translated value as written between `quote` (`"`, `'`, or "" where it had
        none: then quoted), or None where nothing was translated (written as it was); `xml`:
        escaped for XHTML (app/html_text.py)."""
        if not any(t.translated for t in tokens):
            return None
        out = escape("".join(t.text for t in tokens), self.spellings, xml)
        q = quote or '"'
        out = out.replace(q, "&quot;" if q == '"' else "&#39;")
        return out if quote else f'"{out}"'

    def output(self, tokens: list[Token]) -> str:
        return "".join(t.text for t in tokens)


def attribute_texts(
    raw: str, name: str, attrs: Sequence[tuple[str, str | None]], scope: int, limit: int | None
) -> list[tuple[int, int, str, AttrText]]:
    """(start, end, quote, text) of each value of the start tag `raw` to translate: where the
    value stands in `raw`, between which quote. A value without letters is not sent; only
    the first of two attributes of one name counts (as for a browser)."""
    wanted = text_attributes(name, attrs)
    if not wanted:
        return []
    parsed: dict[str, str | None] = {}
    for a, v in attrs:
        parsed.setdefault(a, v)
    out, seen = [], set()
    for attr, value, (start, end, bare) in attributes(raw):
        if attr in seen or bare:
            continue
        seen.add(attr)
        if attr not in wanted or html.unescape(value) != parsed.get(attr):
            continue  # (where html.parser read the tag otherwise, it is left as written)
        text, spellings = read_value(value)
        text = text.replace(SOFT_HYPHEN, "")
        builder = UnitBuilder()
        builder.text(text)
        unit = builder.build(limit=limit)
        if unit is None:
            continue
        quote = raw[start - 1] if start > 0 and raw[start - 1] in "\"'" else ""
        out.append((start, end, quote, AttrText(unit, spellings, scope, text)))
    return out
