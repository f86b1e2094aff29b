"""POST /translate_file and GET /download_file/..., as LibreTranslate answers them.

The upload (multipart: one `file`, `source`, `target`, optional `api_key`, the text fields UTF-8
as on /translate: app/params.py's `Utf8MultiPartParser`) is refused with 413 as
soon as it is known to pass `max_file_bytes` (by its Content-Length, or while it arrives), and
with 408 when it has not all arrived within `file_body_timeout_s`; a client that goes away
before it arrived is counted as 499. The
format's handler (app/formats/) runs in a worker thread, off the event loop; its texts are
translated through the same path as POST /translate (app/translate.py), in requests of at
most `max_texts` texts and `max_request_chars` characters, one after the other. The result is
stored (app/files.py) and the answer is `{"translatedFileUrl": ".../download_file/<id>/<name>"}`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import time
from collections.abc import Callable
from contextlib import aclosing
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers, UploadFile
from starlette.formparsers import MultiPartException
from starlette.requests import ClientDisconnect

from .fastpath import check_not_encoded, too_slow
from .files import (
    FileStore,
    StoreClosed,
    StoreFull,
    TooLarge,
    ascii_name,
    form_filename,
    safe_name,
)
from .formats import (
    FormatError,
    Limits,
    check_text_file,
    content_type,
    handler_for,
    supported,
)
from .formats.inline import placeholder_use, text_budget, text_budget_in_force
from .formats.office_language import tag
from .html_lang import note_kept
from .params import NOT_UTF8_FORM, Utf8MultiPartParser, field_limit, fields_of, query_params
from .request_cost import file_cost
from .schemas import TranslateFileResponse, error_responses
from .translate import (
    ApiError,
    TooManySentences,
    check_accepting,
    detect_sources,
    own_sources,
    placeholder_use_of,
    route_of,
    served_code,
    unavailable,
)
from .translate import translate as translate_data

log = logging.getLogger(__name__)
router = APIRouter()
FORM_OVERHEAD = 64 * 1024  # multipart headers and the small fields around the file
#: file parts of an upload that are read, to be refused by their names (more: refused unnamed)
FILE_PARTS = 16
FORM_FIELDS = 16  # text fields of an upload at most
DETECT_CHARS = 10_000  # of a file's text, from its start, to detect its language with
PLACEHOLDER = re.compile(r"</?[gx]\d+/?>")  # a formatted paragraph's markup, sent to the model


def store(state: Any) -> FileStore:
    if getattr(state, "files", None) is None:
        s = state.settings
        state.files = FileStore(s.files_dir, s.file_ttl_s, s.files_max_total_bytes)
    return state.files


#: at most this many files are read and written at once (each in a thread of its own, with
#: the memory its parser takes); more wait for a turn
FILE_THREADS = 2


def file_pool(state: Any) -> concurrent.futures.ThreadPoolExecutor:
    """The threads the format handlers run in. Not the event loop's default executor: a
    handler's thread waits for its texts' translation on the event loop, which needs that
    executor itself (language detection, key lookups); with as many uploads as it has threads
    every one of them waited for ever."""
    if getattr(state, "file_pool", None) is None:
        state.file_pool = concurrent.futures.ThreadPoolExecutor(
            FILE_THREADS, thread_name_prefix="mt-file"
        )
    return state.file_pool


def public_base(request: Request) -> str:
    """The service's address as the client reached it, for the download link: the scheme an
    `X-Forwarded-Proto` header names (a proxy that ends TLS in front of the service), else the
    request's, and the path an `X-Forwarded-Prefix` header names (a proxy that serves the
    service under a path: nginx `location /mt/ { proxy_pass http://mt/; proxy_set_header
    X-Forwarded-Prefix /mt; }`), and the host (with its port) an `X-Forwarded-Host` header
    names (the address clients reach the proxy at, which Traefik and Caddy send, where the
    request's Host is the service's own behind it: the link named `127.0.0.1:8000`). The
    headers only change the client's own link; a prefix that is not a plain absolute path
    ("//host", a query, a space), a host that is not a plain host name or address with an
    optional port, is not taken."""
    base = str(request.base_url).rstrip("/")
    scheme, rest = base.split("://", 1)
    host = request.headers.get("x-forwarded-host", "").split(",")[0].strip()
    if HOST.fullmatch(host):
        rest = host + rest[len(rest.split("/", 1)[0]) :]
    proto = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    if proto in ("http", "https"):
        scheme = proto
    base = f"{scheme}://{rest}"
    prefix = request.headers.get("x-forwarded-prefix", "").split(",")[0].strip().rstrip("/")
    if PREFIX.fullmatch(prefix):
        base += prefix
    return base


#: a host name or an IPv4 address, or an IPv6 address in brackets, with an optional port
HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?"
)
# path segments of RFC 3986's unreserved and sub-delimiter characters, %-escapes, ":" and "@"
PREFIX = re.compile(r"(/(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})+)+")


def chunks(texts: list[str], max_texts: int, max_chars: int) -> list[list[str]]:
    out: list[list[str]] = [[]]
    size = 0
    for text in texts:
        if out[-1] and (len(out[-1]) >= max_texts or size + len(text) > max_chars):
            out.append([])
            size = 0
        out[-1].append(text)
        size += len(text)
    return out


async def translate_texts(
    state: Any,
    texts: list[str],
    source: str,
    target: str,
    receive,
    charge: Callable[[int], None],
    total: int,
    per_request: int | None = None,
) -> tuple[list[str], list[str | None]]:
    """The translations, and the language each text kept as it is is in (None for one
    translated: `own_sources`). `total`: the file's characters of text (what is charged), which
    may be fewer than the texts sent hold (a formatted paragraph is sent whole with
    placeholders, and as plain text with the words of each tag pair alone); `per_request`: the
    characters a text may have at most (the key's own where fewer than `max_request_chars`)."""
    s = state.settings
    per_request = per_request or s.max_request_chars
    if total > s.max_file_chars:
        raise ApiError(
            413, f"the file holds {total} characters of text; at most {s.max_file_chars}"
        )
    longest = max((len(t) for t in texts), default=0)
    if longest > per_request:
        raise ApiError(
            413,
            f"the file has a paragraph of {longest} characters; at most {per_request}",
        )
    uncharged = [total]

    def on_valid(_: list[str]) -> None:  # the whole file's characters, once its first
        # request is found valid (a file refused for its language pair costs nothing)
        if uncharged:
            charge(uncharged.pop())

    # the served codes (`AUTO`, `EN`, `en-US`: `auto`, `en`), as /translate takes them
    source = served_code(state, source, target=False)
    target = served_code(state, target, target=True)
    sources = [source] * len(texts)
    kept: list[str | None] = [None] * len(texts)
    if source == "auto" and texts:
        sources, kept = map(list, zip(*await file_sources(state, texts, target), strict=True))

    async def request(chunk: list[str], language: str) -> list[str]:
        data = {"q": chunk, "source": language, "target": target}
        try:
            body = await translate_data(state, data, receive, time.perf_counter(), on_valid)
        except TooManySentences:
            # short sentences: more of them than one request may queue (MT_MAX_QUEUE_SIZE *
            # MT_MAX_REQUEST_SHARE) in texts within the request's limits; in two halves
            if len(chunk) == 1:
                raise
            half = len(chunk) // 2
            return await request(chunk[:half], language) + await request(chunk[half:], language)
        if body is None:
            raise ApiError(499, "the client went away")
        return body["translatedText"]

    out: list[str] = [""] * len(texts)
    for language in dict.fromkeys(sources):  # each language's texts, in their order
        where = [i for i, lang in enumerate(sources) if lang == language]
        done = 0
        for chunk in chunks([texts[i] for i in where], s.max_texts, s.max_request_chars):
            translated = await request(chunk, language)
            for i, text in zip(where[done : done + len(chunk)], translated, strict=True):
                out[i] = text
            done += len(chunk)
    return out, kept


async def file_sources(state: Any, texts: list[str], target: str) -> list[tuple[str, str | None]]:
    """Each text's language for `source: auto`: its own where it has words enough to tell
    (a paragraph of another language in a document is translated from that language), the
    document's as a whole (from its first DETECT_CHARS characters) for the others (a heading
    or a word alone, "Title", "See", was detected as German in an English document). A document
    in a language no model serves is a 400 that names it; a paragraph in one (a quote) within a
    document in a served language is kept as it is (app/detect.py). With each, the language
    it is kept in (None: translated; `own_sources`)."""
    plain = [PLACEHOLDER.sub("", t) for t in texts]
    whole = [" ".join(plain)[:DETECT_CHARS]]
    ((document, _),) = await detect_sources(state, whole, target, unserved="the file")
    return await own_sources(state, plain, [document] * len(plain), target)


def limited(receive, limit: int, timeout: float):
    """The request's receive channel, raising 413 once more than `limit` bytes arrived and 408
    once the body has taken more than `timeout` seconds in all (the multipart parser reads
    from it as the body arrives, spooling a large file to disk)."""
    seen = 0
    deadline = asyncio.get_running_loop().time() + timeout

    async def receive_limited() -> dict:
        nonlocal seen
        try:
            async with asyncio.timeout_at(deadline):
                message = await receive()
        except TimeoutError:
            raise too_slow("the upload", timeout, seen) from None
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise ApiError(413, f"the upload is over {limit} bytes; send a smaller file")
        return message

    return receive_limited


async def read_upload(
    request: Request, limit: int, timeout: float
) -> tuple[bytes, str, dict[str, str]] | None:
    """(file bytes, file name (`form_filename`), the other fields) from the multipart body, or
    None when the client went away before sending it all; `source`, `target` and `api_key` may
    also come in the query string (the form's fields win). As the fast path reads a /translate body
    (app/fastpath.py): 413 as soon as the upload passes the limit, 408 when it has not all
    arrived within `timeout` seconds (an upload that stalls would hold its place among the
    requests in progress for as long as the client likes)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "multipart/form-data":
        raise ApiError(400, "send multipart/form-data with the fields file, source and target")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit + FORM_OVERHEAD:
        raise ApiError(413, f"the upload is {declared} bytes; a file may have at most {limit}")
    reader = Request(request.scope, limited(request.receive, limit + FORM_OVERHEAD, timeout))
    try:  # text fields as UTF-8, as on /translate (Starlette's own parser falls back to Latin-1)
        async with aclosing(reader.stream()) as stream:
            parser = Utf8MultiPartParser(
                Headers(scope=request.scope), stream, max_files=FILE_PARTS, max_fields=FORM_FIELDS
            )
            form = await parser.parse()
    except ClientDisconnect:
        return None
    except UnicodeDecodeError:
        raise ApiError(400, NOT_UTF8_FORM) from None
    except MultiPartException as exc:
        if exc.message.startswith("Too many files"):
            raise several_files(None) from None
        if exc.message.startswith("Too many fields"):
            raise ApiError(
                400,
                f"more than {FORM_FIELDS} form fields were sent; send file, source, target and "
                "api_key",
            ) from None
        raise ApiError(400, f"the multipart body is malformed ({exc.message})") from None
    try:
        files = [name for name, value in form.multi_items() if not isinstance(value, str)]
        if len(files) > 1:
            raise several_files(files)
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiError(400, "`file` must be a file upload (multipart/form-data)")
        most = field_limit(request.app.state.settings)
        fields = query_params(request.scope, most)
        texts = [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
        fields.update(fields_of(texts, most))  # a repeated field: its first value
        for name in ("source", "target"):
            value = fields.get(name)
            if not isinstance(value, str) or not value:
                raise ApiError(400, f"`{name}` is missing: give a language code")
        data = await upload.read(limit + 1)
        if len(data) > limit:
            raise ApiError(413, f"the file is over {limit} bytes; send a smaller file")
        return data, form_filename(upload.filename or ""), fields
    finally:
        await form.close()


def several_files(names: list[str] | None) -> ApiError:
    """400 for an upload of more than one file (`names`: the fields they came in; None: more
    than FILE_PARTS)."""
    unique = [f"`{name}`" for name in dict.fromkeys(names or [])]
    if names is None:
        sent = f"more than {FILE_PARTS} files were sent"
    elif len(unique) == 1:
        sent = f"{unique[0]} holds {len(names)} files"
    else:
        sent = f"files were sent as {', '.join(unique[:-1])} and {unique[-1]}"
    return ApiError(
        400,
        f"{sent}; /translate_file translates one file per request, sent as `file`: send each "
        "file in a request of its own",
    )


UPLOAD_SCHEMA = {
    "type": "object",
    "required": ["file", "source", "target"],
    "properties": {
        "file": {"type": "string", "format": "binary", "description": "; ".join(supported())},
        "source": {"type": "string", "description": "source language code, or 'auto'"},
        "target": {"type": "string", "description": "target language code"},
        "api_key": {"type": "string", "description": "API key (when the server has keys)"},
    },
}


@router.post(
    "/translate_file",
    responses={
        200: {"model": TranslateFileResponse},
        **error_responses(400, 403, 408, 413, 415, 429, 500, 503, 504),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"multipart/form-data": {"schema": UPLOAD_SCHEMA}},
        }
    },
)
async def translate_file(request: Request):
    """Translate a file (LibreTranslate-compatible): .txt, .html, .md, .srt, .docx, .pptx, .odt,
    .odp, .epub, .pdf."""
    state = request.app.state
    check_accepting(state)
    check_not_encoded(request.scope)  # 415, as for POST /translate
    s = state.settings
    upload = await read_upload(request, s.max_file_bytes, s.file_body_timeout_s)
    if upload is None:  # the client went away before its upload arrived: counted as 499
        return Response(status_code=499)
    data, filename, fields = upload
    grant = await state.access.admit(fields, request.scope)
    source, target = fields["source"], fields["target"]
    # the tag the translated text is marked with (app/html_lang.py, app/formats/office_language.py)
    # and the download is named with
    language = tag(target, served_code(state, target, target=True))
    handler = handler_for(filename, language)
    if handler is None:
        raise ApiError(
            400,
            f"files like {filename!r} are not supported; send one of {', '.join(supported())}",
        )
    if not data:
        raise ApiError(400, f"{filename!r} is empty")
    if len(data) > s.files_max_total_bytes:
        # its translation would be refused once made, after the model's time and the
        # characters of the key's quota were spent on it
        raise ApiError(413, too_large_to_keep(filename, "file", len(data), s.files_max_total_bytes))
    # no room for a translation of its size now: refused before the model's time and the key's
    # characters are spent on one that could not be kept (a retry paid for it again)
    wait = store(state).wait_for(len(data))
    if wait is not None:
        raise files_full(state, wait)
    loop = asyncio.get_running_loop()
    # the file's characters are given back if it then fails (not if the client went away)
    with state.access.charging(grant) as charge:
        # the characters one request may hold (the key's own where fewer): what a file
        # counts as requests is its text's characters divided by them
        per_request = min(s.max_request_chars, grant.chars_per_request or s.max_request_chars)

        def charge_file(chars: int) -> None:  # its characters, and its cost in requests
            charge(chars, file_cost(chars, per_request), file=True)

        def translate(texts: list[str]) -> list[str]:  # runs in the handler's thread
            # the units' text, as counted while the handler built them; a format without
            # units (.txt, .srt) sends its text as it is
            total = text_budget_in_force().used or sum(len(t) for t in texts)
            job = translate_texts(
                state, texts, source, target, request.receive, charge_file, total, per_request
            )
            future = asyncio.run_coroutine_threadsafe(job, loop)
            while True:  # not for ever if the event loop closes first (the process exits)
                try:
                    out, kept = future.result(timeout=1.0)
                    note_kept(kept)  # for the lang of an .html file's (app/html_lang.py)
                    return out
                except concurrent.futures.TimeoutError:
                    if loop.is_closed():
                        raise FormatError("the server stopped", 503) from None

        # whether the route gives placeholders back (unknown for `auto`: sent)
        use = placeholder_use_of(state, route_of(state, source, target))

        def run_handler() -> bytes:  # its units' text is counted while they are built
            with text_budget(s.max_file_chars), placeholder_use(use):
                limits = Limits(
                    max_unpacked_bytes=s.max_unpacked_bytes,
                    max_chars=s.max_file_chars,
                    max_request_chars=per_request,  # a key's own, where fewer
                )
                check_text_file(filename, data, limits)
                return handler(data, translate, limits)

        try:
            out = await loop.run_in_executor(file_pool(state), run_handler)
        except FormatError as exc:
            raise ApiError(exc.status, f"{filename}: {exc}") from None
        except asyncio.CancelledError:
            if not state.draining:
                raise
            # the shutdown timeout passed while the file was translated: uvicorn cancels this
            # request's task; the client gets the 503 a /translate request would get
            raise unavailable(
                state,
                "the server shut down before this file was translated; retry on another replica",
            ) from None
        name = safe_name(filename, language)
        try:
            file_id = await store(state).put(out, name, content_type(filename, out))
        except (asyncio.CancelledError, StoreClosed):
            if not state.draining:
                raise
            # the shutdown timeout passed (or the store closed) while the file was written
            raise unavailable(
                state,
                "the server shut down before this file was kept; retry on another replica",
            ) from None
        except TooLarge as exc:
            # it was 503 with Retry-After, though no retry could ever make it fit
            raise ApiError(
                413, too_large_to_keep(filename, "translated file", exc.size, exc.limit)
            ) from None
        except StoreFull as exc:
            raise files_full(state, exc.retry_after_s) from None
    url = f"{public_base(request)}/download_file/{file_id}/{quote(name)}"
    # the file is kept by this process alone: a balancer in front of several sends its
    # download here by this header (docker/haproxy/haproxy.cfg)
    return JSONResponse({"translatedFileUrl": url}, headers={"X-File-Id": file_id})


#: when the last warning that the store was full was logged (time.monotonic; one a minute)
_warned_full = [-float("inf")]


def files_full(state: Any, retry_after_s: int) -> ApiError:
    """The 503 of a translated file the store has no room for now (MT_FILES_MAX_TOTAL_BYTES):
    counted in mt_rejected_requests_total (`files_full`), and logged as a warning, once a
    minute at most (it was an INFO line of the client's refusal alone)."""
    state.metrics.rejected.labels("files_full").inc()
    now = time.monotonic()
    if now - _warned_full[0] >= 60:
        _warned_full[0] = now
        log.warning(
            "the translated files kept fill MT_FILES_MAX_TOTAL_BYTES (%d bytes): file "
            "translations are refused with 503 until the oldest goes in %d s",
            state.settings.files_max_total_bytes,
            retry_after_s,
        )
    return ApiError(
        503,
        "the server keeps too many translated files right now; retry later",
        {"Retry-After": str(retry_after_s)},
    )


def too_large_to_keep(filename: str, what: str, size: int, limit: int) -> str:
    return (
        f"{filename}: the {what} is {size} bytes, more than the server keeps in all ({limit} "
        "bytes, MT_FILES_MAX_TOTAL_BYTES); send a smaller file, or raise "
        "MT_FILES_MAX_TOTAL_BYTES"
    )


@router.get(
    "/download_file/{file_id}/{name}",
    response_class=Response,  # (the file: not JSON)
    responses={
        200: {
            "description": "The file, with its Content-Type and a Content-Disposition",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        },
        **error_responses(404),
    },
)
async def download_file(request: Request, file_id: str, name: str):
    """A translated file, while it is kept (`file_ttl_s`)."""
    found = await store(request.app.state).get(file_id)
    if found is None:
        raise ApiError(404, "no such file: the link is wrong or the file expired")
    entry, data = found
    # RFC 6266: an ASCII name for every client, the name itself for those that read filename*
    # (curl -OJ, for one, takes the first: a name with %-escapes otherwise)
    fallback = ascii_name(entry.name)
    disposition = f'attachment; filename="{fallback}"'
    if fallback != entry.name:
        disposition += f"; filename*=utf-8''{quote(entry.name)}"
    return Response(
        data, media_type=entry.content_type, headers={"Content-Disposition": disposition}
    )
