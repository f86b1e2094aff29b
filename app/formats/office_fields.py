"""The text a .docx's field codes show when Word updates them, translated by
app/formats/office.py with the document's text.

A field's code (`w:instrText`, a simple field's `w:instr`) is never sent with its paragraph,
and its result, the text shown, is translated there. But Word writes the result again from
the code when the field is updated (a mail merge, F9, printing): `{ IF { MERGEFIELD Gender } =
"F" "Madam" "Sir" }` gave back "Sir" in a translated letter. These quoted texts of a code are
display text, each sent as a text of its own:

- an IF field's texts for true and false (`IF expression operator expression "true"
  "false"`), never its expressions, compared with the data (`"F"`, `"Yes"`);
- a MERGEFIELD's texts written before and after the data (`\\b "Dear "`, `\\f " and family"`);
- the prompt of a FILLIN or ASK field (`FILLIN "Your name?"`), never ASK's default (`\\d`),
  which may be compared with data elsewhere.

A field nested in another's code is not read: its result is the outer field's data (`{ SET
Greeting { IF ... } }`, compared with "Sir" elsewhere). A code is only read where it is plain:
each quoted text whole in one text node, with letters, no field nested in it and no escaped
character (`\\"`); an IF's code of exactly an expression, an operator (`=`, `<>`, `<`, `<=`,
`>`, `>=`), an expression and one or two texts (general switches such as `\\* MERGEFORMAT`
after them); no tracked deletion in it. A translation with a quotation mark or a backslash in
it, which would end the quoted text or escape what follows, is not taken (the text stays as it
was). Every other code is left as it is, as are the words and switches of these. The code's
text is not marked with the target's language: it is no text shown, and the result
translated in the paragraph is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lxml import etree

from .inline import has_letters, split_space, text_budget_in_force
from .office_runs import NOT_XML, XML_SPACE, W

#: where a nested field stands in its outer field's code
NESTED = "\x00"
OPERATORS = frozenset({"=", "<>", "<", "<=", ">", ">="})
#: the general switches that may end any field's code, each with its argument
GENERAL = frozenset({"\\*", "\\#", "\\@"})
#: a translation that would end or escape its quoted text (a typographic double quotation mark
#: too, which Word may read as the straight one)
UNSAFE = re.compile('["\\\\\u201c\u201d\u201e]')

Slot = tuple[etree._Element, str]  # (element, "text" or "@" + attribute)


@dataclass
class Token:
    kind: str  # "word", "quoted" (start and end: its content's), "nested"
    start: int
    end: int


def _tokens(code: str) -> list[Token] | None:
    """A code's words, quoted texts and nested fields; None when a quote is not closed."""
    out, i = [], 0
    while i < len(code):
        c = code[i]
        if c.isspace():
            i += 1
        elif c == NESTED:
            out.append(Token("nested", i, i + 1))
            i += 1
        elif c == '"':
            j = i + 1
            while j < len(code) and code[j] != '"':
                j += 2 if code[j] == "\\" else 1
            if j >= len(code):
                return None
            out.append(Token("quoted", i + 1, j))
            i = j + 1
        else:
            j = i
            while j < len(code) and not code[j].isspace() and code[j] not in ('"', NESTED):
                j += 1
            out.append(Token("word", i, j))
            i = j
    return out


def display_texts(code: str) -> list[Token]:
    """The quoted tokens of a field's code that are text it shows (see the module docstring)."""
    tokens = _tokens(code)
    if not tokens or tokens[0].kind != "word":
        return []

    def word(t: Token) -> str:
        return code[t.start : t.end] if t.kind == "word" else ""

    while len(tokens) > 2 and word(tokens[-2]) in GENERAL:
        tokens = tokens[:-2]
    name = word(tokens[0]).upper()
    if name == "IF":
        if len(tokens) in (5, 6) and word(tokens[2]) in OPERATORS:
            return [t for t in tokens[4:] if t.kind == "quoted"]
        return []
    if name == "MERGEFIELD":
        return [
            t
            for s, t in zip(tokens, tokens[1:], strict=False)
            if word(s).lower() in ("\\b", "\\f") and t.kind == "quoted"
        ]
    if name == "FILLIN" and len(tokens) > 1 and tokens[1].kind == "quoted":
        return [tokens[1]]
    if name == "ASK" and len(tokens) > 2 and tokens[2].kind == "quoted":
        return [tokens[2]]
    return []


@dataclass
class Span:
    """A quoted text of a code: in `slot`, from `start` to `end`."""

    slot: Slot
    start: int
    end: int
    sent: str


def _get(slot: Slot) -> str:
    el, attr = slot
    return (el.get(attr[1:]) if attr[0] == "@" else el.text) or ""


def _set(slot: Slot, value: str) -> None:
    el, attr = slot
    if attr[0] == "@":
        el.set(attr[1:], value)
    else:
        el.text = value
        el.set(XML_SPACE, "preserve")


def _spans(pieces: list[Slot | None]) -> list[Span]:
    """The display texts of one code, written in `pieces` (None: a nested field)."""
    code, where = "", []  # the code, and each piece's (start, slot)
    for piece in pieces:
        where.append((len(code), piece))
        code += NESTED if piece is None else _get(piece)
    spans = []
    for t in display_texts(code):
        text = code[t.start : t.end]
        if not has_letters(text) or NESTED in text or "\\" in text:
            continue
        offset, slot = [w for w in where if w[0] <= t.start][-1]  # the piece it starts in
        if slot is None or t.end > offset + len(_get(slot)):  # over two text nodes
            continue
        spans.append(Span(slot, t.start - offset, t.end - offset, text))
    return spans


class FieldTexts:
    """The display texts of the field codes of one .docx part."""

    def __init__(self, root: etree._Element):
        self.spans: list[Span] = []
        # each open field: (its code's pieces, [in its code, read]); a field nested in another's
        # code is not read (its result is the outer field's data: SET, an IF's expression)
        stack: list[tuple[list[Slot | None], list[bool]]] = []
        for el in root.iter(W + "fldChar", W + "instrText", W + "delInstrText", W + "fldSimple"):
            in_code = bool(stack) and stack[-1][1][0]
            if el.tag == W + "fldSimple":
                if not in_code:
                    self.spans += _spans([(el, "@" + W + "instr")])
            elif el.tag == W + "instrText":
                if in_code:
                    stack[-1][0].append((el, "text"))
            elif el.tag == W + "delInstrText":
                if stack:
                    stack[-1][1][1] = False
            elif (kind := el.get(W + "fldCharType")) == "begin":
                if in_code:
                    stack[-1][0].append(None)
                stack.append(([], [True, not in_code]))
            elif kind == "separate" and stack:
                stack[-1][1][0] = False
            elif kind == "end" and stack:
                pieces, (_, usable) = stack.pop()
                if usable:
                    self.spans += _spans(pieces)
        for span in self.spans:
            text_budget_in_force().add(span.sent)

    @property
    def texts(self) -> list[str]:
        return [s.sent for s in self.spans]

    def write(self, translations: list[str], language: str | None = None) -> bool:
        """Writes the translations back (each where it is safe); whether any was."""
        changed = False
        # from the end of each text node, so that the offsets before stay right
        done = sorted(zip(self.spans, translations, strict=True), key=lambda p: -p[0].start)
        for span, translation in done:
            lead, _, trail = split_space(span.sent)
            core = NOT_XML.sub("", translation).strip()
            if not core or UNSAFE.search(core) or lead + core + trail == span.sent:
                continue
            value = _get(span.slot)
            _set(span.slot, value[: span.start] + lead + core + trail + value[span.end :])
            changed = True
        return changed
