"""The zip container of an office file: checked before anything is unpacked, its kind told
from its entries, its XML parts read and written back (used by app/formats/office.py).

The archive is checked before anything is unpacked (`open_archive`): a corrupt zip, an
encrypted entry or an unknown compression method is a 400; more than `max_entries` entries,
more than `max_unpacked_bytes` declared uncompressed in all, or an entry over 1 MiB that
inflates more than `max_ratio` times (a zip bomb) is a 413. zipfile stops every entry at its
declared size and checks its CRC, so the declared sizes bound what is unpacked. An archive of
another kind than its extension says (a Word document named `x.odt`, an OpenDocument
spreadsheet whose `mimetype` is not text) is a 400: it would be served under that extension.
So is a password-protected document, told apart from a broken one: a .docx or .pptx in the
compound file Office encrypts it into (the signature of a binary .doc or .ppt too), an .odt
whose manifest names how its parts are encrypted; and a .docx or .pptx saved as Strict Open
XML, whose text is in namespaces the handlers do not read.
"""

from __future__ import annotations

import io
import posixpath
import zipfile

from lxml import etree

from . import FormatError, Limits

BIG_ENTRY = 1 << 20
#: the signature of a Compound File (OLE2): Word 97-2003's .doc, PowerPoint's .ppt, and the
#: container Office encrypts a password-protected .docx, .pptx or .odt into
OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def open_archive(data: bytes, limits: Limits) -> zipfile.ZipFile:
    """The archive, after checking what it would unpack to (see the module docstring)."""
    if data.startswith(OLE2):
        raise FormatError(
            "the file is an older binary Office file (.doc, .ppt) or a password-protected "
            "document, not a zip archive; save it, without a password, as .docx, .pptx, .odt or .odp"
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError) as exc:
        raise FormatError(f"the file is not a valid zip archive ({exc})") from None
    except NotImplementedError as exc:  # a "version needed to extract" above zipfile's
        raise FormatError(f"the zip archive needs a newer unzip ({exc})") from None
    if len(infos) > limits.max_entries:
        raise FormatError(
            f"the archive has {len(infos)} entries; at most {limits.max_entries}", 413
        )
    total = sum(i.file_size for i in infos)
    if total > limits.max_unpacked_bytes:
        raise FormatError(
            f"the archive unpacks to {total} bytes; at most {limits.max_unpacked_bytes}", 413
        )
    for info in infos:
        if info.flag_bits & 0x1:
            raise FormatError(f"the archive entry {info.filename!r} is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise FormatError(f"the archive entry {info.filename!r} uses an unknown compression")
        if info.file_size > BIG_ENTRY and info.file_size > limits.max_ratio * max(
            info.compress_size, 1
        ):
            raise FormatError(
                f"the archive entry {info.filename!r} inflates {info.compress_size} bytes to "
                f"{info.file_size} (more than {limits.max_ratio} times): refused as a zip bomb",
                413,
            )
    return archive


def read_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    try:
        return archive.read(info)
    except Exception as exc:  # noqa: BLE001 (zlib, CRC and truncation errors alike: a broken file)
        raise FormatError(f"the archive entry {info.filename!r} is corrupt ({exc})") from None


def parse_part(name: str, raw: bytes) -> etree._Element:
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False
    )
    try:
        root = etree.fromstring(raw, parser)
    except etree.XMLSyntaxError as exc:
        raise FormatError(f"{name} is not well-formed XML ({exc})") from None
    if root.getroottree().docinfo.doctype:
        raise FormatError(f"{name} has a DOCTYPE, which office files never have")
    return root


def serialize_part(root: etree._Element, raw: bytes) -> bytes:
    info = root.getroottree().docinfo
    if not raw.lstrip().startswith(b"<?xml"):
        return etree.tostring(root, encoding="UTF-8", xml_declaration=False)
    return etree.tostring(
        root.getroottree(),
        encoding=info.encoding or "UTF-8",
        xml_declaration=True,
        standalone=info.standalone,
    )


#: the relationship of a package's main part, in _rels/.rels (transitional and strict)
OFFICE_DOCUMENT = frozenset(
    {
        "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument",
        "http://purl.oclc.org/ooxml/officeDocument/relationships/officeDocument",
    }
)


def main_part(archive: zipfile.ZipFile) -> str | None:
    """The part that _rels/.rels names as the package's main one (ECMA-376 fixes no name for
    it: Word for the web saves a .docx's as word/document2.xml), or None where it names none
    or cannot be read."""
    try:
        info = archive.getinfo("_rels/.rels")
    except KeyError:
        return None
    if info.file_size > 1 << 16:
        return None
    try:
        root = parse_part(info.filename, read_entry(archive, info))
    except FormatError:
        return None
    for rel in root:
        if rel.get("Type") in OFFICE_DOCUMENT and rel.get("TargetMode") != "External":
            target = posixpath.normpath(rel.get("Target") or "").lstrip("/")
            if target in archive.NameToInfo:
                return target
    return None


def with_main_part(kinds: list[tuple], main: str | None) -> list[tuple]:
    """`kinds` (office.py's KINDS) with the main part `main` in place of the usual name of that
    folder's main part (word/document2.xml for word/document.xml)."""
    if main is None:
        return kinds
    out = []
    for kind in kinds:
        name, required, patterns, fmt = kind
        same_folder = posixpath.dirname(main) == posixpath.dirname(required)
        if fmt is not None and main != required and "/" in required and same_folder:
            kind = (name, main, [main if p == required else p for p in patterns], fmt)
        out.append(kind)
    return out


#: what each kind is, in an error message
NAMES = {
    "docx": "a Word document (.docx)",
    "pptx": "a PowerPoint presentation (.pptx)",
    "odt": "an OpenDocument text (.odt)",
    "odp": "an OpenDocument presentation (.odp)",
    "epub": "an EPUB book (.epub)",
}
#: the OpenDocument kinds by their `mimetype` entry (every one has a content.xml)
ODF_MIMETYPES = {
    b"application/vnd.oasis.opendocument.text": "odt",
    b"application/vnd.oasis.opendocument.presentation": "odp",
}


def kind_of(archive: zipfile.ZipFile, expected: str | None, kinds: list[tuple]) -> tuple:
    """The entry of `kinds` (office.py's KINDS) the archive is (`expected`'s when it holds that kind's required
    entry); FormatError 400 when it is none, or not `expected`: a Word document sent as
    `x.odt` was translated and served as `x_de.odt`, with the .odt media type."""
    names = set(archive.namelist())
    found = [k for k in kinds if k[1] in names]
    kind = next((k for k in found if k[0] == expected), found[0] if found else None)
    if kind is None and expected is not None and "META-INF/container.xml" in names:
        raise FormatError(  # an EPUB book (app/formats/epub.py) named otherwise
            f"the file is {NAMES['epub']}, not what its extension .{expected} says; "
            "send it with its own extension"
        )
    if kind is None:
        raise FormatError(
            "the archive is not a Word, PowerPoint or OpenDocument text or presentation file "
            "(no word/document.xml, ppt/presentation.xml or content.xml)"
        )
    if kind[1] == "content.xml" and "mimetype" in names:  # which OpenDocument kind (an .ods
        # has a content.xml too)
        info = archive.getinfo("mimetype")
        mimetype = read_entry(archive, info).strip() if info.file_size <= 200 else b"?"
        odf = next((k for m, k in ODF_MIMETYPES.items() if mimetype.startswith(m)), None)
        kind = next((k for k in found if k[0] == odf), None)
        if kind is None:
            what = f"an OpenDocument file of type {mimetype.decode('ascii', 'replace')!r}"
    if kind is not None:
        what = NAMES[kind[0]]
    if expected is not None and (kind is None or kind[0] != expected):
        raise FormatError(
            f"the file is {what}, not what its extension .{expected} says; "
            "send it with its own extension"
        )
    if kind is None:
        raise FormatError(
            f"the file is {what}, not a Word, PowerPoint or OpenDocument text or presentation file"
        )
    return kind


#: the namespaces of ISO/IEC 29500 Strict, in which Word and PowerPoint save "Strict Open XML"
STRICT = "{http://purl.oclc.org/ooxml/"


def check_transitional(kind: str, root: etree._Element) -> None:
    """FormatError 400 for a .docx or .pptx saved as Strict Open XML (`root`: its main part):
    its elements are in other namespaces, where none of its text was found, and it came back
    as it was, with 200, as if translated."""
    if root.tag.startswith(STRICT):
        raise FormatError(
            "the file is saved as Strict Open XML, whose text this service does not read; "
            f"save it as {NAMES[kind]}, not Strict, and send it again"
        )


MANIFEST = "{urn:oasis:names:tc:opendocument:xmlns:manifest:1.0}"


def check_not_encrypted(archive: zipfile.ZipFile) -> None:
    """FormatError 400 for an OpenDocument file saved with a password: its manifest names how
    its parts are encrypted (it was "content.xml is not well-formed XML")."""
    try:
        info = archive.getinfo("META-INF/manifest.xml")
    except KeyError:
        return
    if info.file_size > BIG_ENTRY:  # a manifest lists the entries: a few kB
        return
    manifest = parse_part(info.filename, read_entry(archive, info))
    if next(manifest.iter(MANIFEST + "encryption-data"), None) is not None:
        raise FormatError(
            "the document is password-protected; save it without a password and send it again"
        )


def rebuild(archive: zipfile.ZipFile, replaced: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in archive.infolist():
            data = replaced.get(info.filename)
            if data is None:
                data = read_entry(archive, info)
            dst.writestr(info, data, compress_type=info.compress_type)
        dst.comment = archive.comment
    return out.getvalue()
