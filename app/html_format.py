"""Translating an HTML document or fragment while keeping its markup exactly, free of any model.

The document is read with the standard library's tokenizer (html.parser, which never fails on
broken markup: app/html_tokenizer.py) for its markup; character references in the text are
read as a browser reads them (app/html_text.py). Every token's source
text is recorded (from the tokenizer's positions), so everything that is not translated is
written back byte for byte: tags with their attributes and quoting, comments, doctype,
whitespace, entities, and the content of elements that are never translated:

- `<script>`, `<style>`, `<code>`, `<pre>`, `<textarea>`, `<svg>`, `<math>`;
- every element marked `translate="no"`, with its descendants (HTML's translate attribute is
  inherited; a block inside it marked `translate="yes"` is translated again, as the standard
  says, but not inside the never-translated elements above, nor inside an inline element kept
  whole), or, without that attribute, of the class `notranslate`.

An element ends where a browser ends it, also when its end tag is left out (`<p>A <li>B`, the
tree of open elements: app/html_elements.py), so translate="no" and units end there too.

Text is cut into units at block boundaries: any tag that is not an inline (phrasing) element,
and `<br>`; a comment after text in a unit is an atom in it (React writes `<!-- -->` between
two pieces of a sentence), a comment before any is not in a unit. Inside a unit, inline
elements (`<b>`, `<a href>`, `<em>`, `<span>`, ...) are pairs and inline elements that are not
translated (`<code>`, `<img>`, `<span translate="no">`) are atoms, and so are URLs and e-mail
addresses in the text (copied as written); app/formats/inline.py translates the unit whole
with placeholders when the model keeps them, else as plain text with each pair placed on the
translation (see there). Whitespace
inside a unit is collapsed to one space for the model (HTML displays it so); whitespace before
and after a unit or a run is kept as written. Soft hyphens (`&shy;`, U+00AD) and `<wbr>` are
left out of the text the model sees: they mark where a word of the document's language may
break, a place the translation does not have (sent, they cut the word in two); a translated
unit comes back without them, and an address keeps them (it is copied as written), as does a
unit the model gives back as it was sent (app/formats/inline.py: written as it was).

A `<` is the start of a tag only when a letter, `/`, `!` or `?` follows it (as html.parser and
browsers read it): `<3` and `< 5` are text, translated with the rest. After the last tag, such a
`<` without its `>` is a tag cut off by the end of the input, copied as it is with what follows
(where no `>` follows, at once: html.parser took time quadratic in its length). A tag that
html.parser cannot read (`<p class='x</b>`, its quote left open) is copied as it is too, never
taken for text.

Translated text is escaped for HTML, a character written as an entity coming back as that
entity (app/html_text.py). Given the language the translation is in, the `lang` attributes of
what was translated are set to it, and given the language of each unit kept as it is, the
element that holds it alone is labelled with it (app/html_lang.py). With `attributes`, the attribute values
that are text for people (`title`, `alt`, `placeholder`, ...: app/html_attrs.py) are units too,
after the text's, and are written back into their tags in place of the value alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from .formats.inline import (
    SOFT_HYPHEN,
    Token,
    Unit,
    UnitBuilder,
    collapse,
    distribute,
    has_letters,
    translate_units,
)
from .html_attrs import AttrText, attribute_texts
from .html_elements import (
    FOREIGN,
    INLINE,
    INLINE_VOID,
    SKIPPED,
    VOID,
    OpenElements,
    implied_end,
    translate_attr,
)
from .html_lang import (
    LANG_ATTRS,
    Span,
    apply,
    changed_scopes,
    edits,
    label_edits,
    lang_spans,
    meta_spans,
    names_language,
)
from .html_text import escape, references
from .html_tokenizer import HtmlError, tokenize

__all__ = ["HtmlDocument", "HtmlError", "escape", "extract_all", "render_all", "translate_html"]

#: what html.parser may read as the start of a tag, comment or declaration
_TAG_OPEN = re.compile(r"<[A-Za-z/!?]")
#: where a <span> around text is not an element of the page (their text is text only, or a
#: table's text is moved before it)
_NO_SPAN = frozenset(
    ["title", "option", "optgroup", "select", "textarea", "table", "tbody", "thead", "tfoot", "tr"]
)
#: a unit's text as written: the whitespace around it, and what is between
_AROUND = re.compile(r"(\s*)(.*?)(\s*)", re.DOTALL)


class _Ref(NamedTuple):
    """Markup or text as written, in the language scope it stands in (for a start tag: the
    scope of its content); `spans`: where the language it declares stands in it
    (app/html_lang.py); `attrs`: (start, end, quote, index among the document's attribute
    texts) of each attribute value in it to translate (app/html_attrs.py); `element`: for a
    start tag, the element it opens (its number)."""

    raw: str
    scope: int
    spans: tuple[Span, ...] = ()
    attrs: tuple[tuple[int, int, str, int], ...] = ()
    element: int | None = None


class _HtmlUnit:
    """A unit plus the entity spellings its text used, the language scope it starts in, its
    text in each scope, its number among what holds letters (`HtmlDocument._marks`) and the
    element that may hold it alone (app/html_lang.py: a unit kept as it is), and whether it
    may be put in a `<span>` where none does."""

    def __init__(
        self,
        unit: Unit,
        spellings: dict[str, str],
        scope: int,
        texts: list[tuple[int, str]],
        mark: int | None = None,
        owner: int | None = None,
        wrap: bool = False,
    ):
        self.unit, self.spellings, self.scope, self.texts = unit, spellings, scope, texts
        self.mark, self.owner, self.wrap = mark, owner, wrap


class HtmlDocument:
    """`texts` to translate, then `render(translations)` gives the translated document."""

    def __init__(
        self,
        text: str,
        atoms: re.Pattern[str] | None = None,
        limit: int | None = None,
        attributes: bool = False,
        xml: bool = False,
    ):
        """`atoms`: what in the text is markup of another kind, kept as it is (the override
        tags of subtitles, `{\\an8}`); `limit`: the characters one text sent may have
        (`UnitBuilder.build`); `attributes`: whether the attribute values that are text for
        people are translated too (app/html_attrs.py); `xml`: the document is XHTML, read as
        XML is (`<div/>` and `<script src="s.js"/>` end where they start, where HTML ignores
        the slash and took the rest of the page for the script's, never translated; no end tag
        implied) and its translated text written as XML (app/html_text.py)."""
        self.pieces: list[str | _Ref | _HtmlUnit] = []
        self._atoms, self._limit, self._with_attrs = atoms, limit, attributes
        self._xml = xml
        # the attribute values to translate, in document order: their units follow the text's
        self._attr_texts: list[AttrText] = []
        # the language scopes (app/html_lang.py): 0 is the document outside every lang
        # attribute, then one per element with one, after the scope it stands in; `_scope`:
        # where the token being read stands, `_unit_scope`: where the unit being built began
        self._parents: list[int | None] = [None]
        self._scope = self._unit_scope = self._run_scope = 0
        self._texts: list[tuple[int, str]] = []  # (scope, text) of the unit being built
        self._builder = UnitBuilder()
        # the raw text of the unit being built, in order (a _Ref: markup with attribute values)
        self._raw_items: list[str | _Ref] = []
        self._run: list[tuple[str, str]] = []  # (text, raw text) of the text not added yet
        self._spellings: dict[str, str] = {}
        # the language each scope declares as written, and whether it is set to the target
        # where its text is translated; for scope 0, a <meta http-equiv="content-language">'s
        self._declares: list[tuple[str, bool] | None] = [None]
        # what holds letters, counted in document order (each unit once, and each run of text
        # outside the units): an element holds a unit alone where the unit is the one thing
        # counted between its start and its end. Per element: (the count at its start, at its
        # end, whether no unit was under way at its start)
        self._marks = 0
        self._elements: list[list] = []
        self._unit_mark: int | None = None  # the unit under way's number, once it has letters
        # the elements that ended while the unit under way was in them alone, innermost first
        self._ended: list[int] = []
        self._stack = OpenElements()
        self._unit_in = ""  # the element the unit under way's letters begin in
        self._walk(text, *tokenize(text))
        self._flush()

    @property
    def units(self) -> list[Unit]:
        """The text's units, in document order, then those of the attribute values."""
        return self._text_units + [a.unit for a in self._attr_texts]

    @property
    def _text_units(self) -> list[Unit]:
        return [p.unit for p in self.pieces if isinstance(p, _HtmlUnit)]

    @property
    def texts(self) -> list[str]:
        return [r for u in self.units for r in u.requests]

    @property
    def visible_text(self) -> str:
        """The document's text as a reader sees it: its units' text runs, without the
        markup (nor its attributes, which say little of the language its text is in)."""
        units = self._text_units
        runs = (collapse(str(i.value)) for u in units for i in u.items if i.kind == "text")
        return " ".join(r for r in runs if r)

    def render(
        self,
        translations: list[str],
        language: str | None = None,
        kept: list[str | None] | None = None,
    ) -> str:
        return self.render_tokens(
            distribute(self.units, translations), language=language, kept=kept
        )

    def render_tokens(
        self,
        all_tokens: list[list[Token]],
        plain: bool = False,
        language: str | None = None,
        kept: list[str | None] | None = None,
    ) -> str:
        """The document with each unit's tokens; `plain` writes translated text unescaped
        (for markup inside text files, such as subtitles' <i>); `language`: the code the
        translation is in, for the lang attributes of what was translated, and `kept`: per
        unit, the language of one kept as it is (None: translated), for its element's
        (app/html_lang.py)."""
        n = len(all_tokens) - len(self._attr_texts)
        all_tokens, attr_tokens = all_tokens[:n], all_tokens[n:]
        changed = self._changed(all_tokens, attr_tokens) if language else set()
        labels, wraps = self._labels(kept or [], changed, language) if language else ({}, {})

        def markup(ref: _Ref) -> str:
            changes = []
            if ref.element in labels:
                changes = label_edits(ref.raw, ref.spans, *labels[ref.element], self._xml)
            elif ref.spans and ref.scope in changed:
                assert language is not None  # `changed` is empty without one
                changes = edits(ref.raw, ref.spans, language)
            for start, end, quote, k in ref.attrs:
                value = self._attr_texts[k].written(attr_tokens[k], quote, self._xml)
                if value is not None:
                    changes.append((start, end, value))
            return apply(ref.raw, changes) if changes else ref.raw

        it = iter(all_tokens)
        out = []
        for piece in self.pieces:
            if isinstance(piece, str):
                out.append(piece)
                continue
            if isinstance(piece, _Ref):
                out.append(markup(piece))
                continue
            at = len(out)
            for tok in next(it):
                if tok.kind != "text":
                    out.append(markup(tok.ref))
                elif tok.translated:
                    out.append(tok.text if plain else escape(tok.text, piece.spellings, self._xml))
                else:  # the original, as written (whitespace around a unit has no ref)
                    out.append(tok.text if tok.ref is None else tok.ref.raw)
            if id(piece) in wraps:  # kept, in its own language, in a <span> around its text
                written = _AROUND.fullmatch("".join(out[at:]))
                assert written is not None  # it matches any text
                span = apply("<span>", label_edits("<span>", (), *wraps[id(piece)], self._xml))
                out[at:] = [written[1], span, written[2], "</span>", written[3]]
        return "".join(out)

    def unit_languages(self, per_text: list[str | None], part: bool = False) -> list[str | None]:
        """Per unit, the language it was kept in, from that of each text it sent (`per_text`,
        as `units`' requests; its first, the whole unit's: app/html_lang.py `note_kept`); none
        where no unit was translated (the document comes back as it was, as /translate gives
        back a document none of whose text it sent), unless the document is a `part` of a file
        whose other text was (an .md file's HTML block: labelled as the same HTML in an .html
        file is)."""
        out, at = [], 0
        for unit in self.units:
            out.append(per_text[at] if at < len(per_text) else None)
            at += len(unit.requests)
        return out if part or None in out else []

    def _labels(
        self, kept: list[str | None], changed: set[int], language: str
    ) -> tuple[dict[int, tuple[str, str]], dict[int, tuple[str, str]]]:
        """The elements to label (app/html_lang.py), each with (the language of the unit kept
        as it is that it holds alone, the language declared around it once translated); and
        the units (by id) kept so that no element holds them alone, to put in a `<span>`."""
        labels: dict[int, tuple[str, str]] = {}
        wraps: dict[int, tuple[str, str]] = {}
        units = (p for p in self.pieces if isinstance(p, _HtmlUnit))
        for piece, own in zip(units, kept, strict=False):
            if own is None or piece.mark is None:
                continue
            scope, alone = piece.scope, False
            if piece.owner is not None:
                opened, ended, alone, scope = self._elements[piece.owner]
                if ended is None:
                    ended = self._marks  # (never ended: open to the end of the document)
                alone = alone and opened == piece.mark - 1 and ended == piece.mark
                scope = scope if alone else piece.scope
            if not alone and not piece.wrap:
                continue
            declared = self._declares[scope]
            if declared is None:
                continue  # the page declares no language
            written, follows = declared
            around = language if follows and scope in changed else written
            if not names_language(around, own):
                if alone:
                    assert piece.owner is not None  # alone only in an element of its own
                    labels[piece.owner] = (own, around)
                else:
                    wraps[id(piece)] = (own, around)
        return labels, wraps

    def _changed(self, all_tokens: list[list[Token]], attr_tokens: list[list[Token]]) -> set[int]:
        """The language scopes whose text the tokens translate (app/html_lang.py); an
        attribute's value counts in the scope of its element."""
        source: dict[int, list[str]] = {}
        output: dict[int, list[str]] = {}
        for attr, tokens in zip(self._attr_texts, attr_tokens, strict=True):
            source.setdefault(attr.scope, []).append(attr.text)
            output.setdefault(attr.scope, []).append(attr.output(tokens))
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
        unit = builder.build(limit=self._limit)
        if unit is None:  # as written (an atom with attribute values to translate: a _Ref)
            for item in self._raw_items:
                if isinstance(item, str) and self.pieces and isinstance(self.pieces[-1], str):
                    self.pieces[-1] += item
                else:
                    self.pieces.append(item)
        else:
            # the innermost element that ended with the unit in it alone, else the innermost
            # still open (`_labels` checks that nothing else counted is in it)
            stack = self._stack
            owner = self._ended[0] if self._ended else stack[-1][4] if stack else None
            # (a <span> is markup where the text is: not in a <title> or an <option>)
            wrap = unit.balanced and self._unit_in not in _NO_SPAN
            piece = _HtmlUnit(unit, self._spellings, self._unit_scope, self._texts)
            piece.mark, piece.owner, piece.wrap = self._unit_mark, owner, wrap
            self.pieces.append(piece)
        self._builder, self._raw_items, self._spellings = UnitBuilder(), [], {}
        self._texts, self._unit_mark, self._ended = [], None, []

    def _marked(self) -> None:
        """The unit under way holds letters: counted once; the elements that ended in it
        before this hold part of it only."""
        if self._unit_mark is None:
            self._marks += 1
            self._unit_mark = self._marks
            self._unit_in = self._stack[-1][0] if self._stack else ""
        self._ended = []

    def _close(self, stack: OpenElements, keep: int) -> None:
        """Ends the open elements from index `keep` on, noting the count at each one's end."""
        if keep >= len(stack):
            return
        self._end_run()
        for item in reversed(stack.items[keep:]):
            element = self._elements[item[4]]
            element[1] = self._marks
            if self._unit_mark is not None and element[0] == self._unit_mark - 1:
                self._ended.append(item[4])
        stack.truncate(keep)

    def _raw(self, raw: str | _Ref) -> None:
        self._flush()
        if isinstance(raw, str) or raw.spans or raw.attrs or raw.element is not None:
            self.pieces.append(raw)
        else:
            self.pieces.append(raw.raw)

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
        if has_letters(decoded):
            self._marked()
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
        for start, end, decoded in references(raw):
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
        # language scope of its content, its number among `_elements`)
        stack = self._stack = OpenElements()
        # raw text of an inline element kept whole (its start tag: with the attribute values
        # to translate)
        atom: list[str | _Ref] | None = None
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
            if self._xml and name.rpartition(":")[2] in FOREIGN:
                name = name.rpartition(":")[2]  # `<m:math>`, `<svg:svg>`: XML may prefix them
            if (
                kind == "startend"
                and not self._xml
                and name not in VOID
                and name not in FOREIGN
                and all(stack.last(f) is None for f in FOREIGN)
            ):
                kind = "start"  # `<div/>`: HTML ignores the slash (only SVG and MathML close)
            if kind in ("start", "startend") and not self._xml and stack.implies_ends():
                # the end tags HTML implies here (not inside <svg> or <math>, whose content
                # follows other rules, nor in a <textarea> or <title>)
                self._close(stack, implied_end(stack, name))
                if atom is not None and len(stack) < atom_depth:
                    self._item("atom", self._whole(atom), word=True)  # it ended before this tag
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
                self._item("atom", self._whole(atom), word=True)
                atom, translating = None, stack[closed][1]
            # the attribute values to translate: where the element's text would be, and on an
            # element whose content is never translated, but not inside one
            inside_skipped = stack[-1][2] if stack else False
            with_attrs = (
                self._with_attrs
                and kind in ("start", "startend")
                and atom is None
                and not inside_skipped
                and translate_attr(attrs, translating)
            )
            if kind == "start" and name not in VOID:
                hard = inside_skipped or name in SKIPPED
                translated = not hard and translate_attr(attrs, translating)
                scope = self._scope
                spans: tuple[Span, ...] = ()
                if any(a in LANG_ATTRS for a, _ in attrs):  # a language scope of its own
                    self._parents.append(scope)
                    scope = len(self._parents) - 1
                    spans = lang_spans(raw) if translated else ()
                    written: dict[str, str] = dict(
                        reversed([(a, v or "") for a, v in attrs if a in LANG_ATTRS])
                    )
                    value = written.get("lang", written.get("xml:lang", ""))
                    self._declares.append((value, bool(spans)))
                if atom is None and (not translating or name not in INLINE):
                    self._flush()  # a boundary (below): the unit before it ends here
                self._end_run()  # (what came before it is not in it)
                alone = self._unit_mark is None  # (no letters of a unit under way)
                self._elements.append([self._marks, None, alone, scope])
                element = len(self._elements) - 1
                stack.push((name, translated, hard, scope, element))
                values = self._attributes(with_attrs, raw, name, attrs, scope)
                tag = _Ref(raw, scope, spans, values, element)
            elif closed is not None:
                self._close(stack, closed)
            elif kind in ("start", "startend"):  # an element without content
                spans = meta_spans(raw) if name == "meta" and translating else ()
                if name == "meta" and self._scope == 0 and self._declares[0] is None:
                    named = {a: (v or "").strip() for a, v in reversed(attrs)}
                    if named.get("http-equiv", "").lower() == "content-language":
                        self._declares[0] = (named.get("content", ""), bool(spans))
                values = self._attributes(with_attrs, raw, name, attrs, self._scope)
                if spans or values:
                    tag = _Ref(raw, self._scope, spans, values)
            if atom is not None:  # inside an inline element kept whole
                atom.append(raw)
                if len(stack) < atom_depth:
                    self._item("atom", self._whole(atom), word=True)
                    atom = None
                continue
            if not translating:
                if kind == "data" and has_letters(raw):
                    self._marks += 1  # text outside the units
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
                    self._marks += 1
                else:
                    self._data(raw)
                continue
            if kind == "start" and name in INLINE:
                if stack[-1][1]:
                    self._item("open", tag, name)
                else:  # <code>, <span translate="no">: the whole element is one atom
                    atom, atom_depth = [tag], len(stack)
            elif kind in ("start", "startend") and name == "wbr" and stack.last("title") is None:
                # where a browser may break a word or an address, as a soft hyphen: the text
                # runs on (an atom, it cut "inter<wbr>national" in two, and sent the pieces
                # of an address to the model); in a <title>, text a browser shows as it is
                self._text("", raw)
            elif kind in ("start", "startend") and name in INLINE_VOID | INLINE:
                # an image or a form field stands where a word would (see Unit._stand_in_text)
                self._item("atom", tag, word=name in INLINE_VOID)
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
            self._item("atom", self._whole(atom), word=True)

    def _attributes(
        self, wanted: bool, raw: str, name: str, attrs: list, scope: int
    ) -> tuple[tuple[int, int, str, int], ...]:
        """(start, end, quote, index among `_attr_texts`) of each value of a start tag to
        translate (app/html_attrs.py); none where `wanted` is false."""
        if not wanted:
            return ()
        out = []
        for start, end, quote, value in attribute_texts(raw, name, attrs, scope, self._limit):
            out.append((start, end, quote, len(self._attr_texts)))
            self._attr_texts.append(value)
        return tuple(out)

    def _whole(self, atom: list[str | _Ref]) -> str | _Ref:
        """An inline element kept whole, as one atom's markup (its start tag's attribute values
        translated: they stand at the start)."""
        raw = "".join(a if isinstance(a, str) else a.raw for a in atom)
        first = atom[0]
        return _Ref(raw, self._scope, (), first.attrs) if isinstance(first, _Ref) else raw

    def _item(self, kind: str, raw: str | _Ref, name: str = "", word: bool = False) -> None:
        self._end_run()
        if self._builder.empty():
            self._unit_scope = self._scope
        ref = raw if isinstance(raw, _Ref) else _Ref(raw, self._scope)
        if kind == "atom":
            self._marked()
            self._builder.atom(ref, word=word)
        else:
            getattr(self._builder, kind)(name, ref)
        self._raw_items.append(ref if ref.attrs else ref.raw)


def translate_html(
    text: str, translate_texts: Callable[[list[str]], list[str]], language: str | None = None
) -> str:
    """`text` translated with `translate_texts` (one call for the whole document) into
    `language` (for its lang attributes: app/html_lang.py)."""
    doc = HtmlDocument(text, attributes=True)
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
    documents = [HtmlDocument(t, attributes=True) for t in texts]
    return documents, [r for d in documents for r in d.texts]
