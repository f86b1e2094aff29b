"""The work app/formats/pdf.py does on a PDF file in a process of its own (`_work`).

`python -m app.formats.pdf_worker read|write MEMORY` reads a JSON line and the file's bytes
from stdin, bounds its own address space to MEMORY bytes, and writes a JSON line (with
`error` and `status` for a file it refuses), then for `write` the translated file's bytes.

- `read`: opens the file (`limits`), bounds what pdfminer will decode, reads each page's
  paragraphs and glyphs (pdf_read.py), and tries taking the text away (an error there is a
  400 before anything is translated): `{"pages": [a page or null, for each of pypdf's]}`.
- `write`: takes the text away from the pages drawn and lays each `pages` entry's drawing
  (pdf_draw.py; its paragraphs' `text` is the translation by then, in the `script` of the
  target language) over it.
"""

from __future__ import annotations

import dataclasses
import io
import json
import resource
import sys

from . import FormatError, Limits, pdf, pdf_draw, pdf_read


def read(header: dict, data: bytes) -> tuple[dict, bytes]:
    limits = Limits(**header["limits"])
    reader = pdf.open_pdf(data, limits)
    with pdf.unreadable("read"):
        copy, ids = pdf.copy_for_pdfminer(reader, limits.max_unpacked_bytes)
        found = pdf_read.read_pages(copy, limits.max_xml_bytes, 2 * limits.max_chars + 10_000)
    by_id = {page.pageid: page for page in found}
    # each page object once (a page listed twice in the tree is one object: rewritten once)
    pages = [by_id.pop(i, None) for i in ids]
    drawn = [n for n, page in enumerate(pages) if page is not None and page.drawn]
    with pdf.unreadable("rewritten"):
        pdf.without_text(reader, drawn)
    return {"pages": [dataclasses.asdict(p) if p else None for p in pages]}, b""


def write(header: dict, data: bytes) -> tuple[dict, bytes]:
    reader = pdf.open_pdf(data, Limits(max_pdf_pages=2**31))
    pages = [pdf_read.Page.from_dict(p) if p else None for p in header["pages"]]
    drawn = [n for n, page in enumerate(pages) if page is not None and page.drawn]
    overlays = pdf_draw.draw([pages[n] for n in drawn], header.get("script"))  # type: ignore[misc]
    with pdf.unreadable("rewritten"):
        writer = pdf.without_text(reader, drawn)
        for n, overlay in zip(drawn, overlays, strict=True):
            target = writer.pages[n]
            # pypdf clips what it merges to the merged page's media box: the target's
            overlay.mediabox = target.mediabox
            target.merge_page(overlay)
            target.compress_content_streams()
        out = io.BytesIO()
        writer.write(out)
    return {}, out.getvalue()


def main() -> int:
    task, memory = sys.argv[1], int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    head, _, data = sys.stdin.buffer.read().partition(b"\n")
    header = json.loads(head)
    for name, value in header.get("bounds", {}).items():
        if name in pdf_read.BOUNDS:
            setattr(pdf_read, name, value)
    try:
        answer, out = {"read": read, "write": write}[task](header, data)
    except FormatError as exc:
        answer, out = {"error": str(exc), "status": exc.status}, b""
    except MemoryError:
        answer = {"error": f"the PDF file takes more than {memory >> 30} GB of memory to read"}
        answer["status"], out = 413, b""
    sys.stdout.buffer.write(json.dumps(answer).encode() + b"\n" + out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
