"""The labels of a .docx's numbered lists and headings (`w:lvlText` in word/numbering.xml:
"Chapter %1", "Article %1.%2", "Step %1 of the procedure"), translated by
app/formats/office.py with the document's text.

Word writes each paragraph's label from its level's `w:lvlText`, `%N` standing for the number
of level N: the label is no text of any paragraph, and "Chapter 1" stayed in the source's
language above a translated chapter. A label with letters is sent as one text, each `%N` an
atom (`<x1/>`, as app/formats/inline.py writes an atom), so that the model may move the
number where its language puts it ("第<x1/>章"). Its translation is taken only when every atom
comes back exactly once and no other placeholder or `%` followed by a digit is in it: a
label that lost or doubled its number would number the paragraphs wrongly, so it is then kept
as it was (a label is never translated piece by piece around its numbers). A label without
letters ("%1.", "(%1)") is not sent, nor is a bullet (`w:numFmt` "bullet": the "o" of Word's
second-level bullets is a letter in Courier New) or any label without a number. The label is
marked with the target's language in its level's run properties (`w:lvl/w:rPr/w:lang`), as
translated runs are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lxml import etree

from .inline import has_letters, split_space, text_budget_in_force
from .office_language import mark_run
from .office_runs import NOT_XML, W

PART = "word/numbering.xml"
LEVEL = re.compile(r"%[1-9]")
#: an atom as the model may give it back (spaces and capitals added); any other placeholder
#: of app/formats/inline.py's syntax refuses the translation
ATOM = re.compile(r"<\s*x\s*(\d+)\s*/?\s*>", re.IGNORECASE)
PLACEHOLDER = re.compile(r"<\s*/?\s*[gx]\s*\d+\s*/?\s*>", re.IGNORECASE)


@dataclass
class Label:
    """One `w:lvlText`: its element, its levels in the order written, and the text sent."""

    element: etree._Element
    levels: list[str]
    sent: str

    def write(self, translation: str, language: str | None) -> bool:
        """Writes `translation` back with the levels in place of its atoms, when each comes
        back once; whether the label changed."""
        value = self.element.get(W + "val")
        lead, _, trail = split_space(value)
        core = NOT_XML.sub("", translation).strip()
        numbers = [int(m.group(1)) for m in ATOM.finditer(core)]
        if sorted(numbers) != list(range(1, len(self.levels) + 1)):
            return False
        if len(PLACEHOLDER.findall(core)) != len(numbers) or LEVEL.search(ATOM.sub("", core)):
            return False
        new = lead + ATOM.sub(lambda m: self.levels[int(m.group(1)) - 1], core) + trail
        if new == value or not core:
            return False
        self.element.set(W + "val", new)
        if language is not None:
            level = self.element.getparent()
            if level.find(W + "rPr") is None:  # the last of a level's properties
                etree.SubElement(level, W + "rPr")
            mark_run(level, language)
        return True


def _bullet(label: etree._Element) -> bool:
    level = label.getparent()
    return any(f.get(W + "val") == "bullet" for f in level.iter(W + "numFmt"))


class NumberingLabels:
    """The labels of word/numbering.xml that hold letters, in document order."""

    def __init__(self, root: etree._Element):
        self.labels = numbering_labels(root)

    @property
    def texts(self) -> list[str]:
        return [label.sent for label in self.labels]

    def write(self, translations: list[str], language: str | None = None) -> bool:
        """Writes the translations back (each where its numbers came back); whether any was."""
        pairs = zip(self.labels, translations, strict=True)
        return [label.write(t, language) for label, t in pairs].count(True) > 0


def numbering_labels(root: etree._Element) -> list[Label]:
    """The labels of word/numbering.xml that hold letters, in document order."""
    labels = []
    for el in root.iter(W + "lvlText"):
        value = el.get(W + "val") or ""
        _, core, _ = split_space(value)
        levels = LEVEL.findall(core)
        words = LEVEL.sub("", core)
        if not levels or not has_letters(words) or PLACEHOLDER.search(core) or _bullet(el):
            continue
        text_budget_in_force().add(words)
        pieces = LEVEL.split(core)  # the words around each level: one more than levels
        sent = pieces[0] + "".join(f"<x{n}/>{p}" for n, p in enumerate(pieces[1:], 1))
        labels.append(Label(el, levels, sent))
    return labels
