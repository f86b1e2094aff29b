"""PDF files: the text of each page translated where it stood, as LibreTranslate translates one.

pypdf opens the file (decrypting one protected by an empty password) and writes a copy of it,
which pdfminer.six then reads (app/formats/pdf_read.py): both see the same objects and pages,
whatever pdfminer would have made of a broken cross-reference table, and its pages pair with
pypdf's by their object numbers. pypdf then takes each page's text away, in the forms it draws
too, and keeps everything else (images, drawings, links and other annotations, the page's
size and turn), and lays over it a page that reportlab draws (app/formats/pdf_draw.py): each
paragraph's translation in the paragraph's place, and the page's turned and invisible glyphs
as they were.

Left as they are: a page whose text pdfminer cannot read as Unicode (a font without a
ToUnicode map: more than a tenth of its glyphs), a page with only invisible text (a scanned
page's OCR layer), a page pdfminer does not list; text drawn as curves or pictures is no
text. Text the page hides (on a layer that is off, under a later opaque box or picture) is
neither sent nor drawn again (pdf_read.py). A glyph pdfminer cannot read on a page otherwise
readable is lost (a bullet where it starts a line). The translation is drawn in DejaVu's
letters (Latin, Greek, Cyrillic, Armenian, Georgian; Hebrew and Arabic right to left, the
latter's letters joined), or for Chinese, Japanese and Korean in WenQuanYi Micro Hei
(fonts-wqy-microhei); a 501 where the server lacks the font. A target written in another
script (Thai, Devanagari, ...: reportlab cannot shape them) is refused before anything is
translated.

Bounds (FormatError 413): the pages (`Limits.max_pdf_pages`); what the streams pdfminer will
decode (pages' contents, forms, fonts, character maps) decode to (`Limits.max_unpacked_bytes`,
checked with pypdf, which bounds each stream: pdfminer does not); the content pdfminer parses
(`Limits.max_xml_bytes`, a form counted each time it is drawn), the drawing operations, the
characters and the graphics states (pdf_read.py); the text sent (`text_budget`). The reading
and the writing each run in a process of their own (pdf_worker.py), bounded in memory
(`WORKER_MEMORY`) and time (`pdf_read.MAX_SECONDS`): costs no count foresees stay there.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from . import FormatError, Limits, Translate
from .inline import has_letters, text_budget_in_force
from .plain import in_pieces

# pdfminer and pypdf log every oddity of a file they read at WARNING; a client's file is not
# the server's problem (a broken one is a 400 with the reason)
for _name in ("pdfminer", "pypdf"):
    logging.getLogger(_name).setLevel(logging.ERROR)

#: the scripts the translation can be drawn in: DejaVu's (Hebrew and Arabic right to left:
#: pdf_draw.RTL_SCRIPTS), and those of Chinese, Japanese and Korean (pdf_draw.CJK_SCRIPTS)
_DRAWN_SCRIPTS = {"Latn": "Latin", "Grek": "Greek", "Cyrl": "Cyrillic", "Armn": "Armenian"}
_DRAWN_SCRIPTS |= {"Geor": "Georgian", "Hans": "Chinese", "Hant": "Chinese", "Hani": "Chinese"}
_DRAWN_SCRIPTS |= {"Jpan": "Japanese", "Kore": "Korean", "Hang": "Korean", "Hira": "Japanese"}
_DRAWN_SCRIPTS |= {"Kana": "Japanese", "Hrkt": "Japanese", "Bopo": "Chinese"}
_DRAWN_SCRIPTS |= {"Arab": "Arabic", "Hebr": "Hebrew"}
_MAX_DEPTH = 32  # page tree and resource nesting followed


def translate_pdf(
    data: bytes, translate: Translate, limits: Limits, language: str | None = None
) -> bytes:
    """`language`: the target's tag; a language written in a script not drawn here (`th`,
    `hi`, `am`), or in one whose letters the font lacks (`ur`), is refused with 400 before
    anything is translated."""
    from . import pdf_read  # noqa: PLC0415 (pdfminer's types: with the first PDF file)

    if b"%PDF-" not in data[:1024]:
        raise FormatError("not a PDF file (no %PDF- header)")
    script = _script(language) if language else None
    if script is not None and script not in _DRAWN_SCRIPTS:
        raise FormatError(
            f"{language} is written in a script ({script}) a translated PDF file cannot be "
            f"drawn in: {', '.join(sorted(set(_DRAWN_SCRIPTS.values())))} only; translate "
            "the file's text another way (as .txt or .docx)"
        )
    needed = _font_needed(script)
    if language and script is not None and needed is not None:
        if not needed[0].is_file():
            raise FormatError(
                f"this server cannot draw {_DRAWN_SCRIPTS[script]} text in a PDF file: it "
                f"lacks the font {needed[0]} (Debian's {needed[1]})",
                501,
            )
        if missing := _letters_missing(language, needed[0]):
            raise FormatError(
                f"{language}'s letters {' '.join(missing)} are not in the font a translated "
                "PDF file is drawn in; translate the file's text another way (as .txt or .docx)"
            )
    bounds = {name: getattr(pdf_read, name) for name in pdf_read.BOUNDS}
    found, _ = _work("read", {"limits": dataclasses.asdict(limits), "bounds": bounds}, data)
    pages = [pdf_read.Page.from_dict(p) if p else None for p in found["pages"]]
    sent = [p for page in pages if page and page.drawn for p in page.paragraphs]
    sent = [p for p in sent if has_letters(p.text)]
    budget = text_budget_in_force()  # counted as the other formats count (a file's quota)
    for p in sent:
        budget.add(p.text)
    done = in_pieces([p.text for p in sent], translate, limits.max_request_chars) if sent else []
    for p, translation in zip(sent, done, strict=True):
        p.text = translation
    pages_out = [dataclasses.asdict(page) if page else None for page in pages]
    header = {"pages": pages_out, "bounds": bounds, "script": script}
    _, out = _work("write", header, data)
    return out


def _font_needed(script: str | None):
    """The font file a translation in `script` is drawn in where its letters are in no other,
    and the Debian package that has it; None where the fallback fonts do."""
    from . import pdf_draw  # noqa: PLC0415

    if script in pdf_draw.CJK_SCRIPTS:
        return pdf_draw.CJK_FONT, "fonts-wqy-microhei"
    if script in pdf_draw.RTL_SCRIPTS:
        return pdf_draw.RTL_FONT, "fonts-dejavu-core"
    return None


@cache
def _letters_missing(language: str, path) -> list[str]:
    """The letters of `language` that the font at `path` has no glyph for, as far as CLDR's
    names of its months and days in it show them (Urdu's ہ and ے are not in DejaVu Sans);
    none where CLDR does not know the language."""
    import unicodedata  # noqa: PLC0415

    from babel import Locale, UnknownLocaleError  # noqa: PLC0415
    from reportlab.pdfbase.ttfonts import TTFontFile  # noqa: PLC0415

    try:
        locale = Locale.parse(language.replace("-", "_"))
    except (UnknownLocaleError, ValueError, TypeError):
        return []
    names = [*locale.months["format"]["wide"].values(), *locale.days["format"]["wide"].values()]
    letters = {c for name in names for c in name if unicodedata.category(c).startswith("L")}
    has = TTFontFile(str(path), subfontIndex=0).charToGlyph
    return sorted(c for c in letters if ord(c) not in has)


#: what a worker may take: address space, and time (pdf_read.MAX_SECONDS)
WORKER_MEMORY = 2 << 30


def _work(task: str, header: dict, data: bytes) -> tuple[dict, bytes]:
    """Runs `task` of app/formats/pdf_worker.py on `data` in a process of its own: what pypdf
    and pdfminer make of a crafted file (a character map of four billion entries, a layout
    analysis quadratic in a page's glyphs) costs that process its memory and time, which are
    bounded, not the server's. Its answer: a JSON line, then bytes."""
    from . import pdf_read  # noqa: PLC0415

    command = [sys.executable, "-m", "app.formats.pdf_worker", task, str(WORKER_MEMORY)]
    try:
        done = subprocess.run(  # noqa: S603 (our own module, with this interpreter)
            command,
            input=json.dumps(header).encode() + b"\n" + data,
            capture_output=True,
            timeout=pdf_read.MAX_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise FormatError(
            f"the PDF file takes more than {pdf_read.MAX_SECONDS:.0f} s to read or rewrite", 413
        ) from None
    line, _, rest = done.stdout.partition(b"\n")
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        if b"MemoryError" in done.stderr or done.returncode in (-9, 137):
            raise FormatError(
                f"the PDF file takes more than {WORKER_MEMORY >> 30} GB of memory to read", 413
            )
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no answer"]
        raise FormatError(f"the PDF file cannot be read: {tail[0]}")
    if "error" in answer:
        raise FormatError(answer["error"], answer.get("status", 400))
    return answer, rest


@contextmanager
def unreadable(what: str) -> Iterator[None]:
    """Any error of pypdf's or pdfminer's on the file (they raise what they raise: parse
    errors, assertions, recursion, a dictionary where an object was expected) as a 400."""
    try:
        yield
    except (FormatError, MemoryError):
        raise
    except RecursionError:
        raise FormatError(f"the PDF file cannot be {what}: its objects nest too deeply") from None
    except Exception as exc:  # noqa: BLE001 (see above)
        reason = str(exc) or type(exc).__name__
        raise FormatError(f"the PDF file cannot be {what}: {reason}") from None


def _script(language: str) -> str | None:
    """The ISO 15924 code of the script `language` is written in: its script subtag, else the
    one CLDR deems likely (`ja`: Jpan, `sr`: Cyrl); None where CLDR does not know it."""
    from babel.core import get_global  # noqa: PLC0415

    subtags = re.split(r"[-_]", language.strip())
    for sub in subtags[1:]:
        if len(sub) == 4 and sub.isalpha():
            return sub.title()
    likely = get_global("likely_subtags").get(subtags[0].lower())
    parts = likely.split("_") if likely else []
    return parts[1] if len(parts) > 1 and len(parts[1]) == 4 else None


def open_pdf(data: bytes, limits: Limits):
    """pypdf's reader of a readable, unencrypted (or openly encrypted) file of at most
    `max_pdf_pages` pages."""
    from pypdf import PdfReader  # noqa: PLC0415

    with unreadable("read"):
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FormatError("the PDF file is protected by a password; send it unprotected")
        count = len(reader.pages)
    if count > limits.max_pdf_pages:
        raise FormatError(f"the PDF file has {count} pages; at most {limits.max_pdf_pages}", 413)
    if count == 0:
        raise FormatError("the PDF file has no pages")
    return reader


def copy_for_pdfminer(reader, most: int) -> tuple[bytes, list[int]]:
    """The file as pypdf writes it, and its pages' object numbers in order; FormatError 413
    if the streams pdfminer will decode in it decode to more than `most` bytes."""
    from pypdf import PdfWriter  # noqa: PLC0415
    from pypdf.errors import LimitReachedError  # noqa: PLC0415

    writer = PdfWriter(clone_from=reader)
    total, seen = 0, set()
    for page in writer.pages:
        for stream in _decoded_by_pdfminer(page):
            ref = stream.indirect_reference
            key = (ref.idnum, ref.generation) if ref is not None else id(stream)
            if key in seen:
                continue
            seen.add(key)
            try:
                total += len(stream.get_data())  # pypdf refuses a stream over 75 MB
            except LimitReachedError:
                total = most + 1
            if total > most:
                raise FormatError(
                    f"the PDF file's pages, forms and fonts decode to more than {most} bytes",
                    413,
                )
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue(), [getattr(p.indirect_reference, "idnum", -1) for p in writer.pages]


def _decoded_by_pdfminer(page):
    """The streams pdfminer decodes to read `page`: its contents, the forms it draws (pdfminer
    reads a form by its /Subtype, an image it never decodes) and its fonts' programs and
    character maps, with what their resources hold in turn."""
    from pypdf.generic import ArrayObject, DictionaryObject, StreamObject  # noqa: PLC0415

    def resolved(obj):
        return obj.get_object() if obj is not None else None

    contents = resolved(page.get("/Contents"))
    for item in contents if isinstance(contents, ArrayObject) else [contents]:
        if isinstance(resolved(item), StreamObject):
            yield resolved(item)
    resources, node = None, page
    for _ in range(_MAX_DEPTH):  # inherited from the page tree where the page has none
        if node is None or not isinstance(node, DictionaryObject):
            break
        resources = resolved(node.get("/Resources"))
        if resources is not None:
            break
        node = resolved(node.get("/Parent"))
    pending, visited = [(resources, 0)], set()
    while pending:
        res, depth = pending.pop()
        if not isinstance(res, DictionaryObject) or id(res) in visited or depth > _MAX_DEPTH:
            continue
        visited.add(id(res))
        xobjects = resolved(res.get("/XObject"))
        for xobject in xobjects.values() if isinstance(xobjects, DictionaryObject) else []:
            form = resolved(xobject)
            if isinstance(form, StreamObject) and form.get("/Subtype") == "/Form":
                yield form
                pending.append((resolved(form.get("/Resources")), depth + 1))
        fonts = resolved(res.get("/Font"))
        for value in fonts.values() if isinstance(fonts, DictionaryObject) else []:
            yield from _font_streams(resolved(value), pending, depth)


def _font_streams(font, pending: list, depth: int):
    from pypdf.generic import ArrayObject, DictionaryObject, StreamObject  # noqa: PLC0415

    fonts = [font]
    descendants = font.get("/DescendantFonts") if isinstance(font, DictionaryObject) else None
    if isinstance(descendants, ArrayObject):
        fonts += [d.get_object() for d in descendants[:4]]
    for f in fonts:
        if not isinstance(f, DictionaryObject):
            continue
        descriptor = f.get("/FontDescriptor")
        descriptor = descriptor.get_object() if descriptor is not None else None
        found = [f.get(k) for k in ("/ToUnicode", "/Encoding")]
        if isinstance(descriptor, DictionaryObject):
            found += [descriptor.get(k) for k in ("/FontFile", "/FontFile2", "/FontFile3")]
        procs = f.get("/CharProcs")  # a Type 3 font's glyphs: content streams
        procs = procs.get_object() if procs is not None else None
        if isinstance(procs, DictionaryObject):
            found += list(procs.values())
            resources = f.get("/Resources")
            pending.append((resources.get_object() if resources is not None else None, depth + 1))
        for item in found:
            stream = item.get_object() if item is not None else None
            if isinstance(stream, StreamObject):
                yield stream


#: the operators that show text: taken away (the text state around them is kept)
_SHOW_TEXT = (b"Tj", b"TJ", b"'", b'"')


def without_text(reader, numbers: list[int]):
    """pypdf's writer of the file with the text taken away from the pages `numbers` and from
    the forms they draw, each form once. A form is one object for every page that draws it: a
    form drawn by these pages and by a page left as it is is first copied for these. (pypdf's
    own `remove_objects_from_page` skipped a form drawn by another whose dictionary was
    equal to it, so that its text stayed under the translation.)"""
    from pypdf import PdfWriter  # noqa: PLC0415
    from pypdf.generic import ContentStream, NameObject, StreamObject  # noqa: PLC0415

    writer = PdfWriter(clone_from=reader)
    chosen = set(numbers)
    kept = [p for n, p in enumerate(writer.pages) if n not in chosen]
    rewritten = [writer.pages[n] for n in numbers]
    if kept:
        shared = _forms(kept) & _forms(rewritten)
        if shared:
            _copy_forms(writer, rewritten, shared)
    drawing: dict[int, set[int]] = {}  # a content stream's object: the pages drawing it
    for page in writer.pages:
        for number in _content_streams(page):
            drawing.setdefault(number, set()).add(_page_id(page))
    for page in rewritten:
        content = page.get_contents() if "/Contents" in page else None
        if content is None:
            continue
        _drop_text(content)
        if any(drawing[n] - {_page_id(page)} for n in _content_streams(page)):
            # another page draws it too (one left as it is, or one with its own drawing)
            page[NameObject("/Contents")] = writer._add_object(content)  # noqa: SLF001
        else:  # (a page listed twice in the tree is one object: changed once, for both)
            page.replace_contents(content)
    for number in sorted(_forms(rewritten)):
        form = writer.get_object(number)
        if not isinstance(form, StreamObject):  # (_forms lists streams only)
            continue
        content = ContentStream(form, writer)
        for key, value in form.items():
            if key not in ("/Length", "/Filter", "/DecodeParms"):
                content[key] = value
        _drop_text(content)
        writer._replace_object(number, content)  # noqa: SLF001 (as pypdf's own removal does)
    return writer


def _page_id(page) -> int:
    ref = getattr(page, "indirect_reference", None)
    return ref.idnum if ref is not None else id(page)


def _content_streams(page) -> list[int]:
    """The object numbers of a page's content streams (and of the array listing them)."""
    from pypdf.generic import ArrayObject, IndirectObject  # noqa: PLC0415

    contents = page.get("/Contents")
    numbers = [contents.idnum] if isinstance(contents, IndirectObject) else []
    listed = contents.get_object() if contents is not None else None
    if isinstance(listed, ArrayObject):
        numbers += [r.idnum for r in listed if isinstance(r, IndirectObject)]
    return numbers


def _drop_text(content) -> None:
    """Takes the text out of `content`; text that clips (render modes 4 to 7: what is painted
    next shows through its glyphs) keeps clipping, in mode 7 (clip only, not painted)."""
    from pypdf.generic import NumberObject  # noqa: PLC0415

    mode, saved, out = 0, [], []
    for operands, operator in content.operations:
        if operator == b"Tr" and operands and isinstance(operands[0], (int, float)):
            mode = int(operands[0])
        elif operator == b"q":
            saved.append(mode)
        elif operator == b"Q" and saved:
            mode = saved.pop()
        if operator not in _SHOW_TEXT:
            out.append((operands, operator))
        elif mode >= 4:  # the glyphs are (part of) the clip: kept, not painted
            out += [([NumberObject(7)], b"Tr"), (operands, operator)]
            out.append(([NumberObject(mode)], b"Tr"))
    content.operations = out
    content.get_data()  # written again from its operations


def _resources(page):
    """A page's resources, its own or those it inherits from the page tree."""
    from pypdf.generic import DictionaryObject  # noqa: PLC0415

    node = page
    for _ in range(_MAX_DEPTH):
        if not isinstance(node, DictionaryObject):
            return None
        resources = node.get("/Resources")
        if resources is not None:
            return resources.get_object()
        parent = node.get("/Parent")
        node = parent.get_object() if parent is not None else None
    return None


def _xobjects(resources):
    """The XObject dictionary of a resources dictionary, or None."""
    from pypdf.generic import DictionaryObject  # noqa: PLC0415

    xobjects = resources.get("/XObject") if isinstance(resources, DictionaryObject) else None
    xobjects = xobjects.get_object() if xobjects is not None else None
    return xobjects if isinstance(xobjects, DictionaryObject) else None


def _form_entries(resources):
    """(name, reference, form) for each form a resources dictionary lists."""
    from pypdf.generic import IndirectObject, StreamObject  # noqa: PLC0415

    for name, ref in (_xobjects(resources) or {}).items():
        form = ref.get_object()
        is_form = isinstance(form, StreamObject) and form.get("/Subtype") == "/Form"
        if isinstance(ref, IndirectObject) and is_form:
            yield name, ref, form


def _forms(pages) -> set[int]:
    """The object numbers of the forms `pages` draw, and the forms those draw in turn."""
    return _reachable([_resources(page) for page in pages])


def _reachable(resources_list) -> set[int]:
    """The object numbers of the forms resources dictionaries list, and of those the forms
    list in turn."""
    found: set[int] = set()
    pending = [(resources, 0) for resources in resources_list]
    seen: set[int] = set()
    while pending:
        resources, depth = pending.pop()
        if resources is None or id(resources) in seen or depth > _MAX_DEPTH:
            continue
        seen.add(id(resources))
        for _, ref, form in _form_entries(resources):
            if ref.idnum not in found:
                found.add(ref.idnum)
                resources_of = form.get("/Resources")
                pending.append((resources_of.get_object() if resources_of else None, depth + 1))
    return found


def _copy_forms(writer, pages, shared: set[int]) -> None:
    """Points `pages` at copies of the `shared` forms (one copy of each, for all of them):
    their resources, and the forms' resources on the way, are copied where they lead to one."""
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject  # noqa: PLC0415

    copies: dict[int, object] = {}  # a shared form's object number: its copy's reference
    variants: dict[int, object] = {}  # a resources dictionary: the one leading to copies

    def variant(resources, depth: int):
        """`resources` itself where no shared form is reachable from it, else its copy,
        whose forms lead to copies only (a copy is made before the forms are followed, so a
        form listing the resources that list it leads back to the copy)."""
        if not isinstance(resources, DictionaryObject) or depth > _MAX_DEPTH:
            return resources
        if id(resources) in variants:
            return variants[id(resources)]
        if not _reachable([resources]) & shared:
            variants[id(resources)] = resources
            return resources
        out = DictionaryObject(resources)
        xobjects = DictionaryObject(_xobjects(resources))
        out[NameObject("/XObject")] = xobjects
        variants[id(resources)] = out
        for name, ref, form in list(_form_entries(resources)):
            if ref.idnum in shared:
                xobjects[name] = copy(ref, form, depth)
            else:  # drawn by the rewritten pages only: changed in place
                inner = form.get("/Resources")
                inner = inner.get_object() if inner is not None else None
                led = variant(inner, depth + 1)
                if led is not inner:
                    form[NameObject("/Resources")] = led
        return out

    def copy(ref, form, depth: int):
        if ref.idnum not in copies:
            duplicate = DecodedStreamObject()
            duplicate.set_data(form.get_data())
            for key, value in form.items():
                if key not in ("/Length", "/Filter", "/DecodeParms"):
                    duplicate[NameObject(key)] = value
            copies[ref.idnum] = writer._add_object(duplicate)  # noqa: SLF001 (pypdf's own way)
            inner = form.get("/Resources")
            inner = inner.get_object() if inner is not None else None
            led = variant(inner, depth + 1)
            if led is not inner:
                duplicate[NameObject("/Resources")] = led
        return copies[ref.idnum]

    for page in pages:
        resources = _resources(page)
        led = variant(resources, 0)
        if led is not resources:
            page[NameObject("/Resources")] = led
