"""The XML a .docx's content controls are bound to (`w:dataBinding`), written with their
translation by app/formats/office.py.

A content control bound to a node of XML (a cover page's Abstract and Publish Date in a
customXml part, its Title, Author or Keywords in the document's properties, its Company in the
extended properties) is filled from that node by Word when it opens the document: the control's
text was translated, the node was not, and Word showed the source's text again. So where a
bound control's text changed, the node it is bound to is given the control's new text: the
store its `w:storeItemID` names (a customXml item, by the `ds:itemID` of its properties part;
docProps/core.xml; docProps/app.xml), the node its `w:xpath` names, with the prefixes of its
`w:prefixMappings`. Only a path of plain steps is followed (`/ns0:CoverPageProperties[1]/
ns0:Abstract[1]`, as Word writes them), to one element without children; any other binding
is left as it is. Only a plain text control's node is written (not a date's, a list's, a
check box's or a picture's, whose node holds a value, "2024-03-01", and the control its
display), and not one that shows its placeholder (its node is empty: the translated prompt,
"[Document title]", became the document's title); of the document's properties only the
title, subject and description, which are translated themselves (the keywords and the
author are not), and none of the extended properties (a company's, a manager's name).
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass

from lxml import etree

from . import FormatError
from .office_archive import parse_part, read_entry, serialize_part
from .office_runs import W

#: the store Word names by a fixed id: the document's core properties (its extended ones,
#: {6668398D-A668-4E3E-A5EB-62B293D839F1}, hold names: not written)
FIXED_STORES = {"{6C3C8BC8-F283-45AE-878A-BAB7291924A1}": "docProps/core.xml"}
#: the document's properties a control's translation is written into: those translated
#: themselves (app/formats/office_labels.py)
CORE = "docProps/core.xml"
CORE_WRITTEN = frozenset(
    "{http://purl.org/dc/elements/1.1/}" + name for name in ("title", "subject", "description")
)
#: a control whose node holds a value it displays otherwise (a date, a list's choice, a check
#: box's state, a picture): not written
VALUE_CONTROLS = frozenset(
    [W + t for t in ("date", "dropDownList", "comboBox", "picture", "citation", "bibliography")]
    + ["{http://schemas.microsoft.com/office/word/2010/wordml}checkbox"]
)
DS = "{http://schemas.openxmlformats.org/officeDocument/2006/customXml}"
#: a path of plain steps, each a prefixed name with an optional position
PATH = re.compile(r"(?:/[A-Za-z_][\w.-]*:[A-Za-z_][\w.-]*(?:\[\d{1,4}\])?){1,16}")
MAPPING = re.compile(r"xmlns:([A-Za-z_][\w.-]*)\s*=\s*['\"]([^'\"]*)['\"]")
#: the most bytes of a customXml item read
ITEM_BYTES = 1 << 20


def control_text(sdt: etree._Element) -> str:
    """A control's text as Word writes it into its node: its paragraphs' text, one a line."""
    content = sdt.find(W + "sdtContent")
    if content is None:
        return ""
    paragraphs = list(content.iter(W + "p")) or [content]
    return "\n".join("".join(t.text or "" for t in p.iter(W + "t")) for p in paragraphs)


@dataclass
class Binding:
    control: etree._Element
    store: str  # the store's id, in capitals
    path: str
    namespaces: dict[str, str]
    text: str  # the control's text before translation


class Bindings:
    """The bound controls of a .docx's parts, with their text as it was."""

    def __init__(self, roots: list[etree._Element]):
        self.found: list[Binding] = []
        for root in roots:
            for binding in root.iter(W + "dataBinding"):
                props = binding.getparent()
                sdt = props.getparent() if props is not None else None
                path = binding.get(W + "xpath") or ""
                if sdt is None or sdt.tag != W + "sdt" or not PATH.fullmatch(path):
                    continue
                if any(c.tag in VALUE_CONTROLS or c.tag == W + "showingPlcHdr" for c in props):
                    continue
                namespaces = dict(MAPPING.findall(binding.get(W + "prefixMappings") or ""))
                store = (binding.get(W + "storeItemID") or "").upper()
                self.found.append(Binding(sdt, store, path, namespaces, control_text(sdt)))

    def write(
        self, archive: zipfile.ZipFile, parts: dict[str, tuple[etree._Element, bytes]]
    ) -> tuple[set[str], dict[str, bytes]]:
        """Gives each node bound to a control whose text changed the control's new text:
        the names of `parts` changed, and the other parts changed (customXml items) as
        written."""
        changed = [b for b in self.found if control_text(b.control) != b.text]
        if not changed:
            return set(), {}
        stores = dict(FIXED_STORES)
        stores.update(_custom_stores(archive))
        touched: set[str] = set()
        written: set[str] = set()  # the customXml items given a node
        # each store read once (None: it cannot be; a path that found nothing in it read it
        # again for the next binding: 400 bindings, 400 parses of up to 1 MB)
        loaded: dict[str, tuple[etree._Element, bytes] | None] = {}
        for b in changed:
            name = stores.get(b.store)
            if name is None:
                continue
            if name in parts:
                root, raw = parts[name]
            else:
                if name not in loaded:
                    loaded[name] = _load(archive, name)
                item = loaded[name]
                if item is None:
                    continue
                root, raw = item
            try:
                nodes = root.getroottree().xpath(b.path, namespaces=b.namespaces)
            except etree.XPathError:
                continue
            if len(nodes) != 1 or not isinstance(nodes[0], etree._Element) or len(nodes[0]):
                continue
            if name == CORE and nodes[0].tag not in CORE_WRITTEN:
                continue
            nodes[0].text = control_text(b.control)
            (touched if name in parts else written).add(name)
        return touched, {
            name: serialize_part(*item)
            for name in sorted(written)
            if (item := loaded.get(name)) is not None
        }


def _load(archive: zipfile.ZipFile, name: str) -> tuple[etree._Element, bytes] | None:
    try:
        info = archive.getinfo(name)
    except KeyError:
        return None
    if info.file_size > ITEM_BYTES:
        return None
    raw = read_entry(archive, info)
    try:
        return parse_part(name, raw), raw
    except FormatError:
        return None


def _custom_stores(archive: zipfile.ZipFile) -> dict[str, str]:
    """The customXml items by the id their properties part gives them (`itemPropsN.xml`
    describes `itemN.xml`, as Word names them)."""
    stores = {}
    for name in archive.namelist():
        match = re.fullmatch(r"customXml/itemProps(\d+)\.xml", name)
        item = f"customXml/item{match.group(1)}.xml" if match else None
        if item is None or item not in archive.NameToInfo:
            continue
        loaded = _load(archive, name)
        if loaded is not None and loaded[0].get(DS + "itemID"):
            stores[loaded[0].get(DS + "itemID").upper()] = item
    return stores
