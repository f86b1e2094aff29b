"""format=html, /translate_file and /download_file against a real uvicorn server on a loopback
port serving a real checkpoint (a random tiny model with a real sentencepiece tokenizer)."""

from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import gzip
import io
import os
import random
import shutil
import socket
import string
import threading
import time
import zipfile

import docx
import httpx
import pptx
import pytest
from odf import teletype
from odf.opendocument import load as odf_load
from odf.text import Span

from app import translate as translate_module
from tests.conftest import save_random_checkpoint
from tests.service_helpers import serve_in_thread
from tests.test_epub_format import make_book, read_book, well_formed
from tests.test_file_formats import make_docx, make_odp, make_odt, make_pptx, zip_of
from tests.test_html_format import Attrs, Tags
from tests.test_pdf_format import boxes as pdf_boxes
from tests.test_pdf_format import make_pdf, page_one
from tests.test_service import metric

MAX_FILE = 200_000
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
UPLOAD_TIMEOUT = 2.0  # file_body_timeout_s of the module's server


@pytest.fixture(scope="module")
def server(random_checkpoint, tmp_path_factory):
    weights = tmp_path_factory.mktemp("weights")
    shutil.copytree(random_checkpoint, weights / "en-de")
    files = tmp_path_factory.mktemp("files")
    with serve_in_thread(
        weights,
        files_dir=files,
        max_file_bytes=MAX_FILE,
        max_unpacked_bytes=4_000_000,
        file_body_timeout_s=UPLOAD_TIMEOUT,
    ) as (url, _):
        yield url, files


W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def text(url: str, q, **extra) -> httpx.Response:
    body = {"q": q, "source": "en", "target": "de", **extra}
    return httpx.post(f"{url}/translate", json=body, timeout=60)


def upload(url: str, name: str, data: bytes, **fields) -> httpx.Response:
    fields = {"source": "en", "target": "de", **fields}
    return httpx.post(
        f"{url}/translate_file", files={"file": (name, data)}, data=fields, timeout=60
    )


def healthy(url: str) -> bool:
    return httpx.get(f"{url}/health").status_code == 200


HTML = (
    '<div class="card"><h2 id="t">The cat is big.</h2>'
    '<p>We see <a href="/a?x=1&amp;y=2">a red car</a> today.</p>'
    '<pre>the dog is slow</pre><p translate="no">The house.</p>'
    "<script>let a = '<p>water</p>';</script></div>"
)


def test_html_is_translated_with_its_markup_kept(server):
    url, _ = server
    r = text(url, HTML, format="html")
    assert r.status_code == 200, r.text
    out = r.json()["translatedText"]
    assert Tags(out).markup == Tags(HTML).markup
    for kept in ["<pre>the dog is slow</pre>", '<p translate="no">The house.</p>'] + [
        "<script>let a = '<p>water</p>';</script>"
    ]:
        assert kept in out
    # a block's text is what format=text gives for it
    heading = text(url, "The cat is big.").json()["translatedText"]
    assert f'<h2 id="t">{heading}</h2>' in out.replace("&amp;", "&").replace("&lt;", "<")


def test_html_in_a_form_body_and_a_list(server):
    url, _ = server
    form = httpx.post(
        f"{url}/translate",
        data={"q": "<b>The dog.</b>", "source": "en", "target": "de", "format": "html"},
        timeout=60,
    )
    listed = text(url, ["<i>The dog.</i>", "<p>2024 - 42</p>"], format="html", alternatives=1)
    assert form.status_code == listed.status_code == 200
    assert form.json()["translatedText"].startswith("<b>")
    out = listed.json()
    assert out["translatedText"][0].startswith("<i>") and out["translatedText"][0].endswith("</i>")
    assert out["translatedText"][1] == "<p>2024 - 42</p>"
    # (the numbers are copied as written: no alternative to them)
    assert [len(a) for a in out["alternatives"]] == [1, 0]
    assert out["alternatives"][0][0].startswith("<i>")


def test_broken_html_is_answered_and_unknown_formats_are_400(server):
    url, _ = server
    r = text(url, '<p>The cat <b>is <div class="x', format="html")
    assert r.status_code == 200 and r.json()["translatedText"].endswith('<div class="x')
    r = text(url, "The cat.", format="pdf")
    assert r.status_code == 400 and "use 'text' or 'html'" in r.json()["error"]


def test_a_translated_page_names_the_target_language(server):
    # lang="en" stayed on the German page: a screen reader read it with English pronunciation
    url, _ = server
    page = (
        '<html lang="en"><body><p>The cat is big.</p>'
        '<p lang="en" translate="no">The house.</p></body></html>'
    )
    r = text(url, page, format="html")
    assert r.status_code == 200, r.text
    out = r.json()["translatedText"]
    assert out.startswith('<html lang="de"><body><p>')
    assert '<p lang="en" translate="no">The house.</p>' in out  # not translated: as it was
    got = download(url, upload(url, "page.html", page.encode(), target="DE"))
    assert got.content.decode().startswith('<html lang="de"><body><p>')
    same = download(url, upload(url, "page.html", page.encode(), source="de"))
    assert same.content.decode() == page  # nothing translated: the language stays


def test_a_pages_tips_and_alternative_texts_are_translated(server):
    # a page's title and alt attributes, its description, stayed in the source's language
    url, _ = server
    page = (
        '<html><head><meta name="description" content="The cat is big."></head><body>'
        '<p>We see <a href="/a" title="The dog is slow.">a red car</a> today.</p>'
        '<img src="c.png" alt="The house is old."></body></html>'
    )
    plain = text(url, ["The cat is big.", "The dog is slow.", "The house is old."]).json()
    r = text(url, page, format="html")
    assert r.status_code == 200, r.text
    got = download(url, upload(url, "page.html", page.encode()))
    for out in (r.json()["translatedText"], got.content.decode()):
        attrs = [dict(a) for a in Attrs(out).attrs]
        assert attrs[2]["content"] == plain["translatedText"][0]
        assert attrs[5] == {"href": "/a", "title": plain["translatedText"][1]}
        assert attrs[6] == {"src": "c.png", "alt": plain["translatedText"][2]}


def test_a_page_translated_into_a_right_to_left_language_is_laid_out_so(spm_model, tmp_path):
    # a model into Arabic: the page said lang="ar" but dir="ltr", its lines laid out left to
    # right, their punctuation at the wrong end
    weights = tmp_path / "weights"
    save_random_checkpoint(weights / "en-ar", spm_model, "en", "ar", seed=7)
    page = '<html lang="en" dir="ltr"><body><p>The cat is big.</p></body></html>'
    with serve_in_thread(weights, files_dir=tmp_path / "files") as (url, _):
        r = text(url, page, format="html", target="ar")
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"].startswith('<html lang="ar" dir="rtl"><body><p>')
        got = download(url, upload(url, "page.html", page.encode(), target="ar"))
        assert got.content.decode().startswith('<html lang="ar" dir="rtl"><body><p>')


@pytest.mark.parametrize("source", ["en", "auto"])
def test_html_is_read_off_the_event_loop(server, monkeypatch, source):
    """html.parser takes time quadratic in some markup ("<a" repeated): read on the event
    loop, a document held up every other request, /health included."""
    url, _ = server
    reading, answered, order = threading.Event(), threading.Event(), []
    real = translate_module.extract_all

    def held_reading(texts):
        reading.set()
        answered.wait(timeout=20)  # until /health has answered: never, on the event loop
        order.append("read")
        return real(texts)

    monkeypatch.setattr(translate_module, "extract_all", held_reading)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        job = pool.submit(text, url, "<p>The cat is big.</p>", format="html", source=source)
        assert reading.wait(timeout=60)
        health = httpx.get(f"{url}/health", timeout=60)
        order.append("health")
        answered.set()
        r = job.result()
    assert health.status_code == 200 and r.status_code == 200
    assert order[:2] == ["health", "read"]  # with "auto", read for detection first
    assert r.json()["translatedText"].startswith("<p>")


def download(url: str, answer: httpx.Response) -> httpx.Response:
    assert answer.status_code == 200, answer.text
    link = answer.json()["translatedFileUrl"]
    assert link.startswith(f"{url}/download_file/")
    return httpx.get(link, timeout=30)


@pytest.mark.parametrize(
    "name, data, content_type",
    [
        ("notes.txt", b"The cat is big.\r\n\r\nWe eat bread.\r\n", "text/plain; charset=utf-8"),
        ("page.html", HTML.encode(), "text/html; charset=utf-8"),
        ("read me.md", b"# The dog\n\n```\nthe cat\n```\n", "text/markdown; charset=utf-8"),
        (
            "film.srt",
            b"1\n00:00:01,000 --> 00:00:02,000\nThe cat.\n",
            "application/x-subrip; charset=utf-8",
        ),
    ],
)
def test_text_files_round_trip(server, name, data, content_type):
    url, files = server
    answer = upload(url, name, data)
    got = download(url, answer)
    assert got.status_code == 200
    assert got.headers["content-type"] == content_type
    expected = name.replace(" ", "_").replace(".", "_de.")
    assert got.headers["content-disposition"] == f'attachment; filename="{expected}"'
    assert answer.json()["translatedFileUrl"].endswith("/" + expected)
    assert got.content != data
    if name.endswith(".txt"):
        lines = got.content.split(b"\r\n")
        assert len(lines) == 4 and lines[1] == b"" and lines[3] == b""
    if name.endswith(".md"):
        assert got.content.startswith(b"# ") and got.content.endswith(b"\n```\nthe cat\n```\n")
    if name.endswith(".srt"):
        assert got.content.startswith(b"1\n00:00:01,000 --> 00:00:02,000\n")
    stored = [p.name for p in files.iterdir()]
    assert all(p.endswith(".mtfile") and len(p) == 24 + 7 for p in stored)


def changed_entries(src: bytes, out: bytes) -> tuple[set[str], zipfile.ZipFile]:
    """The entries of a translated archive whose bytes changed, and the archive."""
    before, after = zipfile.ZipFile(io.BytesIO(src)), zipfile.ZipFile(io.BytesIO(out))
    return {n for n in before.namelist() if before.read(n) != after.read(n)}, after


def test_docx_round_trip(server):
    url, _ = server
    src = make_docx()
    got = download(url, upload(url, "report.docx", src))
    assert got.headers["content-type"].endswith("wordprocessingml.document")
    changed, after = changed_entries(src, got.content)
    assert changed == {"word/document.xml", "word/header1.xml"}
    d = docx.Document(io.BytesIO(got.content))
    assert [r.bold for r in d.paragraphs[0].runs] == [None, True, None]
    assert d.paragraphs[0].text != "Hello bold words and more."
    # the translated text is marked with the target's language (it kept the source's)
    marks = {r._r.find(f"{W}rPr/{W}lang").get(f"{W}val") for r in d.paragraphs[0].runs}
    assert marks == {"de"}


def test_an_office_file_is_marked_with_the_language_asked_for(server):
    url, _ = server
    got = download(url, upload(url, "report.docx", make_docx(), target="de-CH"))
    d = docx.Document(io.BytesIO(got.content))
    marks = {r._r.find(f"{W}rPr/{W}lang").get(f"{W}val") for r in d.paragraphs[0].runs}
    assert marks == {"de-CH"}


def test_pptx_round_trip(server):
    url, _ = server
    src = make_pptx()
    got = download(url, upload(url, "slides.pptx", src))
    assert got.headers["content-type"].endswith("presentationml.presentation")
    changed, after = changed_entries(src, got.content)
    assert changed == {"ppt/slides/slide1.xml", "ppt/notesSlides/notesSlide1.xml"}
    slide = pptx.Presentation(io.BytesIO(got.content)).slides[0]
    runs = slide.placeholders[1].text_frame.paragraphs[1].runs
    assert [r.font.italic for r in runs] == [None, True]  # the italic run stays italic
    assert slide.shapes.title.text != "Slide title"


def test_odt_round_trip(server):
    url, _ = server
    src = make_odt()
    got = download(url, upload(url, "letter.odt", src))
    assert got.headers["content-type"] == "application/vnd.oasis.opendocument.text"
    changed, after = changed_entries(src, got.content)
    assert changed == {"content.xml"}
    assert after.infolist()[0].filename == "mimetype"
    doc = odf_load(io.BytesIO(got.content))
    spans = doc.text.getElementsByType(Span)
    assert len(spans) == 1 and spans[0].getAttribute("stylename") == "Bold"
    assert teletype.extractText(doc.text.childNodes[0]) != "A heading"


def test_odp_round_trip(server):
    url, _ = server
    src = make_odp()
    got = download(url, upload(url, "slides.odp", src))
    assert got.headers["content-type"] == "application/vnd.oasis.opendocument.presentation"
    assert got.headers["content-disposition"] == 'attachment; filename="slides_de.odp"'
    changed, after = changed_entries(src, got.content)
    assert changed == {"content.xml"}
    assert after.infolist()[0].filename == "mimetype"
    from odf.text import P

    texts = [
        teletype.extractText(e) for e in odf_load(io.BytesIO(got.content)).getElementsByType(P)
    ]
    assert len(texts) == 3 and "The slide title" not in texts and all(texts)


def test_epub_round_trip(server):
    """A book (LibreTranslate translates .epub) through the service (a model of random weights):
    its chapters, navigation, NCX and title translated, a reading system's XML throughout."""
    url, _ = server
    src = make_book()
    got = download(url, upload(url, "book.epub", src))
    assert got.headers["content-type"] == "application/epub+zip"
    assert got.headers["content-disposition"] == 'attachment; filename="book_de.epub"'
    changed, after = changed_entries(src, got.content)
    assert changed == {
        "EPUB/chap_01.xhtml",
        "EPUB/chap_02.xhtml",
        "EPUB/nav.xhtml",
        "EPUB/toc.ncx",
        "EPUB/content.opf",
    }
    assert after.infolist()[0].filename == "mimetype"
    well_formed(got.content)
    book = read_book(got.content)
    assert book.get_metadata("DC", "language")[0][0] == "de"
    assert book.get_metadata("DC", "title")[0][0] != "The Old House"
    chapter = after.read("EPUB/chap_01.xhtml").decode()
    assert "<em>" in chapter and '<a id="p1"/>' in chapter and "children" not in chapter


def test_pdf_round_trip(server):
    """A PDF file (LibreTranslate translates .pdf) through the service (a model of random
    weights): its pages' text replaced by the translation, its pages and drawings kept."""
    url, _ = server
    src = make_pdf(page_one, page_one)
    got = download(url, upload(url, "Weather.pdf", src))
    assert got.headers["content-type"] == "application/pdf"
    assert got.headers["content-disposition"] == 'attachment; filename="Weather_de.pdf"'
    before, after = pdf_boxes(src), pdf_boxes(got.content)
    assert len(after) == 2 and all(after)
    words = " ".join(t for page in after for t, _, _ in page)
    assert "weather" not in words and "rained" not in words
    # the heading's translation (the top line) starts where the heading did
    heading = next(bbox for t, bbox, _ in before[1] if t == "The weather report")
    top = max((bbox for _, bbox, _ in after[1]), key=lambda bbox: bbox[3])
    assert abs(heading[0] - top[0]) < 1 and abs(heading[3] - top[3]) < 2


def test_bad_uploads_get_4xx_and_leave_the_server_healthy(server):
    url, _ = server
    bomb = zip_of({"word/document.xml": b"<a/>", "word/media/x.bin": b"\0" * (3 << 20)})
    cases = [
        (upload(url, "tool.exe", b"MZ"), 400, "not supported"),
        (upload(url, "empty.txt", b""), 400, "is empty"),
        (upload(url, "bomb.docx", bomb), 413, "zip bomb"),
        (upload(url, "corrupt.docx", make_docx()[:3000]), 400, "not a valid zip"),
        (upload(url, "bad.odt", zip_of({"content.xml": b"<a><b></a>"})), 400, "well-formed"),
        # served as word_de.odt with the .odt media type
        (upload(url, "word.odt", make_docx()), 400, "a Word document (.docx), not what its"),
        (upload(url, "binary.txt", bytes(range(1, 256)) * 3), 400, "save it as UTF-8"),
        # UTF-16 without a byte order mark is valid UTF-8 with a NUL per letter: it was
        # translated as such and came back as garbage with a 200
        (upload(url, "utf16.txt", "The cat.\n".encode("utf-16-le")), 400, "byte order mark"),
        (upload(url, "utf16.srt", "1\n".encode("utf-16-be")), 400, "NUL characters"),
        # blank lines only: it came back unchanged, with 200
        (upload(url, "blank.srt", b"\xef\xbb\xbf\r\n\r\n"), 400, "no subtitles found"),
        (upload(url, "blank.txt", b"\n \n\t\n"), 400, "nothing to translate"),
        (upload(url, "blank.md", b"\r\n\r\n"), 400, "nothing to translate"),
        (upload(url, "blank.html", b"  \n"), 400, "nothing to translate"),
        (upload(url, "a.txt", b"The cat.", target="xx"), 400, "no model translates"),
        (upload(url, "scan.pdf", b"%PDF-1.4\n" + b"\0" * 500), 400, "cannot be read"),
        (upload(url, "word.pdf", make_docx()), 400, "not a PDF file"),
        (upload(url, "a.txt", b"The cat.", source=""), 400, "`source` is missing"),
        (upload(url, "big.txt", b"a" * (MAX_FILE + 100_000)), 413, "bytes"),
    ]
    as_field = httpx.post(
        f"{url}/translate_file",
        files={"x": ("x.txt", b"")},
        data={"file": "not a file", "source": "en", "target": "de"},
    )
    cases.append((as_field, 400, "must be a file upload"))
    as_json = httpx.post(f"{url}/translate_file", json={"file": "x", "source": "en"})
    cases.append((as_json, 400, "multipart/form-data"))
    for response, status, message in cases:
        assert response.status_code == status, response.text
        assert message in response.json()["error"]
    assert healthy(url)


def raw_form(parts: list[tuple[str, str | None, bytes]]) -> tuple[bytes, dict[str, str]]:
    """A multipart body written byte for byte: (name, file name or None, value) per part."""
    body = b""
    for name, filename, value in parts:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        body += f"--XyZ\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"
    return body + b"--XyZ--\r\n", {"content-type": "multipart/form-data; boundary=XyZ"}


@pytest.mark.parametrize("field", ["source", "target"])
def test_a_text_field_that_is_not_utf8_is_a_400_the_file_stays_bytes(server, field):
    """As on /translate: `curl -F source=$'\\xff'` is refused as not UTF-8 (Starlette read the
    field as Latin-1: "no model translates 'ÿ' to 'de'"); the file part is not text."""
    url, _ = server
    fields = {"source": b"en", "target": b"de", field: b"\xff"}
    parts = [("file", "a.txt", b"The cat."), *[(k, None, v) for k, v in fields.items()]]
    content, headers = raw_form(parts)
    r = httpx.post(f"{url}/translate_file", content=content, headers=headers, timeout=60)
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "the form body is not valid UTF-8; send UTF-8 text"
    # a file of bytes that are not UTF-8 (a zip) is translated, with UTF-8 fields beside it
    fields = [("source", None, b"en"), ("target", None, b"de")]
    content, headers = raw_form([("file", "report.docx", make_docx()), *fields])
    r = httpx.post(f"{url}/translate_file", content=content, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    assert healthy(url)


@pytest.mark.parametrize(
    ("names", "sent"),
    [
        (["file", "file"], "`file` holds 2 files"),
        (["file", "other"], "files were sent as `file` and `other`"),
        (["file", "other", "other"], "files were sent as `file` and `other`"),
        (["file"] * 20, "more than 16 files were sent"),
    ],
)
def test_several_files_are_a_400_that_says_one_file_is_taken(server, names, sent):
    """`curl -F file=@a.txt -F file=@b.txt` (it was "Too many files. Maximum number of files is
    1.", naming neither the field nor what to do)."""
    url, _ = server
    r = httpx.post(
        f"{url}/translate_file",
        files=[(name, (f"{i}.txt", b"The cat.")) for i, name in enumerate(names)],
        data={"source": "en", "target": "de"},
        timeout=60,
    )
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error.startswith(sent), error
    assert "one file per request" in error, error
    assert healthy(url)


@pytest.mark.parametrize("coding", ["gzip", "br"])
def test_a_compressed_upload_is_a_415_that_names_its_coding(server, coding):
    """As for POST /translate: an upload sent with a Content-Encoding is refused as such (it
    was read compressed: 'the multipart body is malformed')."""
    url, _ = server
    form = httpx.Request(
        "POST", url, files={"file": ("a.txt", b"The cat.")}, data={"source": "en", "target": "de"}
    )
    form.read()
    r = httpx.post(
        f"{url}/translate_file",
        content=gzip.compress(form.content),
        headers={"content-type": form.headers["content-type"], "content-encoding": coding},
        timeout=60,
    )
    assert r.status_code == 415, r.text
    assert r.headers["accept-encoding"] == "identity"
    error = r.json()["error"]
    assert f"Content-Encoding {coding}" in error and "uncompressed" in error, error


def test_an_upload_without_length_is_refused_before_it_ends(server):
    """A chunked upload passing the limit gets 413 while the client still holds the rest of
    its body back: the server answers without waiting for the end."""
    url, _ = server
    host, port = url.removeprefix("http://").split(":")
    boundary = "b0undary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    payload = head + b"a" * (MAX_FILE + 100_000)
    request = (
        f"POST /translate_file HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n\r\n"
    ).encode()
    request += f"{len(payload):x}\r\n".encode() + payload + b"\r\n"  # no final chunk: never ends
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413")
    assert healthy(url)


def test_a_utf16_text_file_comes_back_labelled_utf16(server):
    url, _ = server
    data = "The cat is big.\r\nWe eat bread.\r\n".encode("utf-16")
    got = download(url, upload(url, "wide.txt", data))
    assert got.headers["content-type"] == "text/plain; charset=utf-16"
    assert got.content.startswith(data[:2])  # the same byte order mark
    assert got.content.decode("utf-16").count("\r\n") == 2


def test_an_html_file_in_the_encoding_it_declares_comes_back_in_it(server):
    # it was refused with 400 "not valid UTF-8", though a browser reads it
    url, _ = server
    got = download(url, upload(url, "a.html", b'<meta charset="windows-1252"><p>Caf\xe9</p>'))
    assert got.headers["content-type"] == "text/html; charset=windows-1252"
    assert got.content.startswith(b'<meta charset="windows-1252"><p>')
    assert got.content.decode("cp1252").endswith("</p>")
    # declaring none, it is told as a .txt's encoding is, and comes back in UTF-8 with a byte
    # order mark (it was refused with 400 "not valid UTF-8")
    got = download(url, upload(url, "a.html", b"<p>Caf\xe9 au lait.</p>"))
    assert got.headers["content-type"] == "text/html; charset=utf-8"
    assert got.content.startswith(codecs.BOM_UTF8)
    got.content.decode("utf-8")


def stalled_upload(url: str) -> socket.socket:
    """A connection that sent the headers of a 1,000-byte upload and 40 bytes of it."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(
        f"POST /translate_file HTTP/1.1\r\nHost: {host}\r\nContent-Length: 1000\r\n"
        "Content-Type: multipart/form-data; boundary=b0undary\r\n\r\n".encode()
        + b'--b0undary\r\nContent-Disposition: form-data; name="source"\r\n'
    )
    return sock


def test_an_upload_that_stalls_gets_408_and_its_connection_closed(server):
    """An upload that stops arriving would hold its place among the requests in progress for
    as long as its client liked: after file_body_timeout_s it is answered 408 and let go."""
    url, _ = server
    before = metric(url, "mt_requests_total", 'route="/translate_file",status="408"')
    with stalled_upload(url) as sock:
        answer = b""
        while chunk := sock.recv(65536):  # until the server closes the connection
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer
    assert b"connection: close" in head.lower()
    assert b"did not arrive within 2 s" in body
    assert metric(url, "mt_requests_total", 'route="/translate_file",status="408"') == before + 1
    assert healthy(url)


def test_an_abandoned_upload_is_the_clients_doing_not_a_server_error(server):
    url, _ = server
    labels = 'route="/translate_file",status="{}"'
    gone, failed = (metric(url, "mt_requests_total", labels.format(s)) for s in (499, 500))
    stalled_upload(url).close()
    deadline = time.monotonic() + 10
    while metric(url, "mt_requests_total", labels.format(499)) == gone:
        assert time.monotonic() < deadline, "the abandoned upload was not counted as 499"
        time.sleep(0.05)
    assert metric(url, "mt_requests_total", labels.format(500)) == failed
    assert healthy(url)


def test_unknown_downloads_are_404(server):
    url, _ = server
    for path in ["x" * 24 + "/a.txt", "..%2F..%2Fetc%2Fpasswd/x", "short/a.txt"]:
        r = httpx.get(f"{url}/download_file/{path}")
        assert r.status_code == 404 and "error" in r.json()


def test_many_uploads_at_once_are_all_answered(server):
    """More uploads with `source: auto` at once than the event loop's default executor has
    threads: each is answered (they all waited for ever: every thread held a file waiting
    for its translation, which needed a thread of the same executor for language detection),
    and the server goes on detecting languages for others."""
    url, _ = server
    count = min(32, (os.cpu_count() or 1) + 4) + 2  # asyncio's default executor size, and more
    data = b"The cat is big.\nWe eat bread today.\n" * 3

    async def all_at_once():
        async with httpx.AsyncClient(timeout=120) as c:
            files = [
                c.post(
                    f"{url}/translate_file",
                    files={"file": (f"n{i}.txt", data)},
                    data={"source": "auto", "target": "de"},
                )
                for i in range(count)
            ]
            return await asyncio.gather(*files)

    answers = asyncio.run(all_at_once())
    assert [r.status_code for r in answers] == [200] * count, answers[0].text
    detected = httpx.post(f"{url}/detect", json={"q": "The cat is big."}, timeout=60)
    assert detected.status_code == 200


def test_a_formatted_file_counts_its_text_once(random_checkpoint, tmp_path):
    """A file's characters are those of its text: a paragraph with formatting, sent to the
    model whole (with placeholders) and in runs, counts once (it counted about 2.25 times,
    against `max_file_chars` and the day's characters); a file over the limit is refused as
    its text is read."""
    weights = tmp_path / "weights"
    shutil.copytree(random_checkpoint, weights / "en-de")
    line = "The cat is *very* happy today.\n\n"  # 28 characters of text
    with serve_in_thread(weights, max_file_chars=1000, char_limit_per_day=1000) as (url, _):
        fits = upload(url, "a.md", (line * 30).encode())  # 840 characters
        assert fits.status_code == 200, fits.text
        assert text(url, "x" * 160).status_code == 200  # 1000 of 1000 used
        r = text(url, "y")
        assert r.status_code == 429 and "(0 left)" in r.json()["error"], r.text
    with serve_in_thread(weights, max_file_chars=1000) as (url, _):
        # text that is not translated (numbers, whitespace between tags) does not count
        rows = "".join(f"<tr><td>{i:05}</td><td>{i * 7:07}</td></tr>\n" for i in range(200))
        page = f"<table>{rows}</table><p>The cat is big.</p>"
        assert upload(url, "t.html", page.encode()).status_code == 200
        over = upload(url, "b.md", (line * 150).encode())  # 4800 bytes, 4200 characters
        assert over.status_code == 413
        assert over.json()["error"] == "b.md: the file holds more than 1000 characters of text"
        d = docx.Document()
        for _ in range(40):
            d.add_paragraph("The cat is very happy today.")
        big = io.BytesIO()
        d.save(big)
        doc = upload(url, "c.docx", big.getvalue())
        assert doc.status_code == 413, doc.text
        assert "more than 1000 characters" in doc.json()["error"]


def test_translated_files_leave_the_disk_when_they_expire_and_at_shutdown(
    random_checkpoint, tmp_path
):
    """An expired file is removed within seconds, with no upload or download to prune it;
    the files left at shutdown are removed, and the folder the store made for itself."""
    weights = tmp_path / "weights"
    shutil.copytree(random_checkpoint, weights / "en-de")
    files = tmp_path / "files"
    with serve_in_thread(weights, files_dir=files, file_ttl_s=1) as (url, _):
        assert upload(url, "a.txt", b"The cat.").status_code == 200
        assert len(list(files.glob("*.mtfile"))) == 1
        deadline = time.monotonic() + 30
        while list(files.glob("*.mtfile")):
            assert time.monotonic() < deadline, "the expired file is still on disk"
            time.sleep(0.1)
    with serve_in_thread(weights, files_dir=files) as (url, _):
        assert upload(url, "b.txt", b"The dog.").status_code == 200
        assert len(list(files.glob("*.mtfile"))) == 1
    assert list(files.iterdir()) == []  # the operator's folder stays, empty
    with serve_in_thread(weights) as (url, app):
        assert upload(url, "c.txt", b"The cat.").status_code == 200
        made = app.state.files.directory
        assert len(list(made.glob("*.mtfile"))) == 1
    assert not made.exists()


def test_a_translated_file_larger_than_the_server_keeps_is_413_not_retry_later(
    random_checkpoint, tmp_path
):
    """One translated file over MT_FILES_MAX_TOTAL_BYTES was 503 with Retry-After, forever:
    no retry could make it fit. A file that fits is still translated."""
    weights = tmp_path / "weights"
    shutil.copytree(random_checkpoint, weights / "en-de")
    with serve_in_thread(weights, files_max_total_bytes=2000) as (url, _):
        r = upload(url, "big.txt", b"The cat is big.\n\n" * 110)  # 1870 bytes, 3300 translated
        assert r.status_code == 413, r.text
        assert "Retry-After" not in r.headers
        error = r.json()["error"]
        assert error.startswith("big.txt: the translated file is ")
        assert "more than the server keeps in all (2000 bytes" in error
        assert "raise MT_FILES_MAX_TOTAL_BYTES" in error
        assert upload(url, "small.txt", b"The cat.").status_code == 200
        assert healthy(url)


def test_a_file_the_full_store_has_no_room_for_is_refused_before_it_is_translated(
    random_checkpoint, tmp_path, caplog
):
    """With the translated files kept filling MT_FILES_MAX_TOTAL_BYTES, a file was translated
    and then refused with 503 (a retry paid again), counted in no metric and logged only as a
    client's refusal: it is refused before, counted as `files_full`, and a warning says why."""
    weights = tmp_path / "weights"
    shutil.copytree(random_checkpoint, weights / "en-de")
    with (
        caplog.at_level("WARNING", logger="app"),
        serve_in_thread(weights, max_file_bytes=900, files_max_total_bytes=1000) as (url, _),
    ):
        full = 'mt_rejected_requests_total{reason="files_full"}'
        assert metric(url, full) == 0  # there from the start
        text = b"The cat is big.\n" * 25  # 400 bytes
        kept = 0
        while True:
            before = metric(url, "mt_input_tokens_total")
            r = upload(url, "a.txt", text)
            if r.status_code != 200:
                break
            kept += 1
        assert kept >= 1 and r.status_code == 503, r.text
        assert int(r.headers["Retry-After"]) > 1000  # the first file's time left (30 minutes)
        assert metric(url, "mt_input_tokens_total") == before  # not translated
        assert metric(url, full) == 1
    warnings = [m for m in caplog.messages if "MT_FILES_MAX_TOTAL_BYTES (1000 bytes)" in m]
    assert len(warnings) == 1 and "refused with 503" in warnings[0]


def test_an_upload_larger_than_the_server_keeps_is_413_before_it_is_translated(
    random_checkpoint, tmp_path, caplog
):
    """An upload over MT_FILES_MAX_TOTAL_BYTES was translated (the model's time and the key's
    characters spent) and its translation refused with 413 after: it is refused before. Such
    settings are named in a warning at start-up."""
    weights = tmp_path / "weights"
    shutil.copytree(random_checkpoint, weights / "en-de")
    with (
        caplog.at_level("WARNING", logger="app"),
        serve_in_thread(weights, max_file_bytes=100_000, files_max_total_bytes=2000) as (url, _),
    ):
        before = metric(url, "mt_input_tokens_total")
        r = upload(url, "big.txt", b"The cat is big.\n\n" * 200)
        assert r.status_code == 413, r.text
        assert "Retry-After" not in r.headers
        assert r.json()["error"] == (
            "big.txt: the file is 3400 bytes, more than the server keeps in all (2000 bytes, "
            "MT_FILES_MAX_TOTAL_BYTES); send a smaller file, or raise MT_FILES_MAX_TOTAL_BYTES"
        )
        assert metric(url, "mt_input_tokens_total") == before  # nothing was translated
        assert upload(url, "small.txt", b"The cat.").status_code == 200
    warnings = [r.getMessage() for r in caplog.records if "MT_MAX_FILE_BYTES" in r.getMessage()]
    assert warnings == [
        "MT_MAX_FILE_BYTES (100000) is more than MT_FILES_MAX_TOTAL_BYTES (2000): an upload "
        "larger than the translated files kept in all is refused with 413"
    ]


def test_the_download_link_has_the_scheme_the_proxy_names(server):
    """Behind a proxy that ends TLS, X-Forwarded-Proto: https makes the link https (the
    browser blocks an http download from an https page)."""
    url, _ = server
    r = httpx.post(
        f"{url}/translate_file",
        files={"file": ("a.txt", b"The cat.")},
        data={"source": "en", "target": "de"},
        headers={"X-Forwarded-Proto": "https"},
        timeout=60,
    )
    assert r.status_code == 200 and r.json()["translatedFileUrl"].startswith("https://127.0.0.1:")
    plain = upload(url, "a.txt", b"The cat.")
    assert plain.json()["translatedFileUrl"].startswith("http://127.0.0.1:")


@pytest.mark.parametrize(
    ("prefix", "path"),
    [
        ("/mt", "/mt/download_file/"),
        ("/tools/mt/", "/tools/mt/download_file/"),
        ("/a%20b,/other", "/a%20b/download_file/"),  # the first proxy's
        ("", "/download_file/"),
        ("mt", "/download_file/"),  # not a path: not taken
        ("//evil.example", "/download_file/"),
        ("/mt?x=1", "/download_file/"),
        ("/m t", "/download_file/"),
    ],
)
def test_the_download_link_has_the_path_the_proxy_serves_the_service_under(server, prefix, path):
    """Behind a proxy that serves the service under a path and says so (X-Forwarded-Prefix),
    the link goes through it (it named /download_file/ at the proxy's root: a 404 there)."""
    url, _ = server
    r = httpx.post(
        f"{url}/translate_file",
        files={"file": ("a.txt", b"The cat.")},
        data={"source": "en", "target": "de"},
        headers={"X-Forwarded-Prefix": prefix},
        timeout=60,
    )
    assert r.status_code == 200
    link = httpx.URL(r.json()["translatedFileUrl"])
    assert (link.host, link.port) == ("127.0.0.1", httpx.URL(url).port)
    assert link.raw_path.decode().startswith(path), link
    # what the proxy would ask for, the prefix taken off, is the file
    got = httpx.get(f"{url}/download_file/{link.raw_path.decode().split('/download_file/')[1]}")
    assert got.status_code == 200 and got.text.strip()


@pytest.mark.parametrize(
    ("host", "want"),
    [
        ("translate.example.org", "https://translate.example.org/mt/download_file/"),
        ("translate.example.org:8443, proxy.internal", "https://translate.example.org:8443/mt/"),
        ("[2001:db8::1]:443", "https://[2001:db8::1]:443/mt/download_file/"),
        ("evil.example/path", "https://127.0.0.1:"),  # not a host: not taken
        ("user@evil.example", "https://127.0.0.1:"),
        ("", "https://127.0.0.1:"),
    ],
)
def test_the_download_link_has_the_host_the_proxy_is_reached_at(server, host, want):
    """Behind a proxy that passes the service the address it was reached at (X-Forwarded-Host,
    as Traefik and Caddy do), the link names it, with the proxy's scheme and path: it named the
    service's own address behind the proxy (https://127.0.0.1:8000/mt/download_file/...)."""
    url, _ = server
    r = httpx.post(
        f"{url}/translate_file",
        files={"file": ("a.txt", b"The cat.")},
        data={"source": "en", "target": "de"},
        headers={
            "X-Forwarded-Host": host,
            "X-Forwarded-Proto": "https",
            "X-Forwarded-Prefix": "/mt",
        },
        timeout=60,
    )
    assert r.status_code == 200, r.text
    assert r.json()["translatedFileUrl"].startswith(want), r.json()


def test_a_non_ascii_file_name_has_an_ascii_fallback(server):
    """RFC 6266: `filename` for every client (curl -OJ saved `Bericht_%C3%BCber_de.txt`),
    `filename*` with the name itself."""
    url, _ = server
    got = download(url, upload(url, "Bericht über.txt", b"The cat."))
    assert got.headers["content-disposition"] == (
        "attachment; filename=\"Bericht_uber_de.txt\"; filename*=utf-8''Bericht_%C3%BCber_de.txt"
    )


def test_a_file_name_without_latin_letters_has_a_named_ascii_fallback(server):
    """A name whose letters all drop from the ASCII `filename` (`報告.txt`) came back as
    `_de.txt`, nothing of a name; it falls back to `document`, as a file sent without a
    usable name does."""
    url, _ = server
    got = download(url, upload(url, "報告.txt", b"The cat."))
    assert got.headers["content-disposition"] == (
        "attachment; filename=\"document_de.txt\"; filename*=utf-8''%E5%A0%B1%E5%91%8A_de.txt"
    )
    got = download(url, upload(url, "Отчёт 2024.txt", b"The cat."))
    assert got.headers["content-disposition"].startswith(
        'attachment; filename="document_2024_de.txt"; '
    )


def test_a_file_named_only_by_its_extension_is_translated(server):
    """`.txt` or `notes/.MD`: Python finds no suffix in a name that starts with its only dot, and
    the file was refused with "files like '.txt' are not supported; send one of ..., .txt"."""
    url, _ = server
    for name, kept in ((".txt", "document_de.txt"), ("notes/.MD", "document_de.md")):
        answer = upload(url, name, b"The cat.")
        assert answer.status_code == 200, answer.text
        assert answer.json()["translatedFileUrl"].endswith("/" + kept)
        assert download(url, answer).status_code == 200
    assert upload(url, ".", b"The cat.").status_code == 400


def test_a_quote_in_a_file_name_comes_back_as_a_browser_sent_it(server):
    """Browsers and curl send `"weird".txt` as `filename="%22weird%22.txt"` (WHATWG HTML,
    RFC 7578 4.2); the link said `22weird_22_de.txt`."""
    url, _ = server
    body = (
        b'--b\r\nContent-Disposition: form-data; name="file"; '
        b'filename="%22weird%22 %0Aname.txt"\r\n\r\nThe cat.\r\n'
        b'--b\r\nContent-Disposition: form-data; name="source"\r\n\r\nen\r\n'
        b'--b\r\nContent-Disposition: form-data; name="target"\r\n\r\nde\r\n--b--\r\n'
    )
    r = httpx.post(
        f"{url}/translate_file",
        content=body,
        headers={"Content-Type": "multipart/form-data; boundary=b"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    assert r.json()["translatedFileUrl"].endswith("/weird_name_de.txt")


def test_markup_too_large_for_the_text_limit_is_refused_before_parsing(random_checkpoint, tmp_path):
    """A parser takes tens to hundreds of times the bytes it reads (a 4.3 MB .docx of tiny
    paragraphs took 2 GB before its text was counted): a file with more markup than the
    text limit calls for is refused before it is parsed, by its size (1 MB of a text file and
    5 MB of office XML are always allowed)."""
    weights = tmp_path / "weights"
    shutil.copytree(random_checkpoint, weights / "en-de")
    with serve_in_thread(weights, max_file_chars=100_000, max_file_bytes=20_000_000) as (url, _):
        md = upload(url, "a.md", b"abc\n\n" * 200_001)  # 1,000,005 bytes
        assert md.status_code == 413
        assert md.json()["error"] == (
            "a.md: the file has 1000005 bytes; at most 1000000 for a .md file (its markup "
            "is bounded by the characters of text allowed in a file)"
        )
        html = upload(url, "a.html", b"<p>abc</p>" * 200_001)  # 2,000,010 bytes: over 20 x
        assert html.status_code == 413 and "at most 2000000 for a .html file" in html.text
        text = upload(url, "a.html", b"<p>abc</p>" * 150_000)  # within: its text is counted
        assert text.status_code == 413 and "more than 100000 characters" in text.text
        words = random.Random(1).choices(string.ascii_letters, k=3 * 150_000)  # ratio ~10
        paragraphs = "".join(
            f"<w:p><w:r><w:t>{''.join(words[3 * i : 3 * i + 3])}</w:t></w:r></w:p>"
            for i in range(150_000)
        )
        xml = f"<w:document {W}><w:body>{paragraphs}</w:body></w:document>"
        doc = upload(url, "a.docx", zip_of({"word/document.xml": xml.encode()}))
        assert doc.status_code == 413
        assert "text parts unpack to" in doc.text and "at most 5000000" in doc.text
        assert upload(url, "b.md", b"The cat is big.\n" * 60).status_code == 200


def test_source_auto_gives_headings_and_lone_words_the_files_language(server):
    """`source: auto`: a heading or a word alone ("Title", "See") takes the language of the
    document as a whole (they were detected apart, as German, and left untranslated); a
    paragraph of another language keeps its own (tests/test_service_libre.py)."""
    url, _ = server
    doc = b"# Title\n\nSee\n\nThe cat is big and we eat bread today in the garden.\n"
    auto = download(url, upload(url, "a.md", doc, source="auto")).text
    assert auto == download(url, upload(url, "a.md", doc, source="en")).text
    assert not auto.startswith("# Title\n")


def test_a_file_of_more_texts_than_one_request_holds(server):
    """A file sent in several requests (more paragraphs than MT_MAX_TEXTS) comes back whole,
    each paragraph's translation in its place, with `source: auto` too."""
    url, _ = server
    lines = [f"The cat number {i} is big." for i in range(300)]  # 300 paragraphs, 128 a request
    data = ("\n".join(lines) + "\n").encode()
    for source in ("en", "auto"):
        got = download(url, upload(url, "many.txt", data, source=source)).text.split("\n")
        assert len(got) == 301 and got[-1] == ""
        assert all(got[:300]) and got[:300] != lines
    one = [text(url, line).json()["translatedText"] for line in (lines[0], lines[299])]
    assert [got[0], got[299]] == one


def test_a_file_of_many_short_sentences_is_sent_in_smaller_requests(random_checkpoint, tmp_path):
    """A request may queue at most MT_MAX_QUEUE_SIZE * MT_MAX_REQUEST_SHARE sentences; a
    file's texts within the request limits (128 texts, 20,000 characters) may hold more. The
    file was refused with 413 "send them in several requests", which its client cannot do."""
    weights = tmp_path / "weights"
    shutil.copytree(random_checkpoint, weights / "en-de")
    paragraphs = [" ".join(f"I ran {k}{i}." for i in range(10)) for k in range(30)]
    data = ("\n\n".join(paragraphs) + "\n").encode()  # 300 different sentences in 30 texts
    with serve_in_thread(weights, max_queue_size=200) as (url, _):  # 100 a request
        r = upload(url, "short.txt", data)
        assert r.status_code == 200, r.text
        got = download(url, r).text.split("\n\n")
        assert len(got) == 30 and all(got)


def test_a_legacy_text_file_comes_back_in_its_encoding(server):
    # the reproduction: refused with 400 "not valid UTF-8"
    url, _ = server
    got = download(url, upload(url, "a.txt", b"Caf\xe9 au lait.\n"))
    assert got.headers["content-type"] == "text/plain; charset=windows-1252"
    got.content.decode("cp1252")  # not UTF-8 with a byte order mark
    assert not got.content.startswith(codecs.BOM_UTF8)
    srt = "1\r\n00:00:01,000 --> 00:00:02,000\r\nThe cat’s café.\r\n\r\n".encode("cp1252")
    got = download(url, upload(url, "film.srt", srt))
    # named as a .txt's is (it named none: a player took it as UTF-8, or guessed)
    assert got.headers["content-type"] == "application/x-subrip; charset=windows-1252"
    assert got.content.decode("cp1252").startswith("1\r\n00:00:01,000 --> 00:00:02,000\r\n")
    answer = upload(
        url, "short.srt", "1\n00:00:01,000 --> 00:00:02,000\nПривет!\n".encode("cp1251")
    )
    assert answer.status_code == 400
    assert "its encoding could not be told" in answer.json()["error"]
