"""A request's parameters, wherever the client put them, as LibreTranslate reads them.

LibreTranslate's clients send `q`, `source`, `target`, `format`, `api_key`, ... as a JSON object,
as form data (urlencoded or multipart), in the query string of a POST with an empty body, or in
the query string and a body at once. `request_params` merges them all into one dict: query
string first, then the body's fields over it. A repeated `q` (in a form or the query string)
becomes a list, as a JSON list would. One function serves every endpoint and both front ends
(the plain-ASGI fast path, app/fastpath.py, and the FastAPI routes).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request

from .translate import FORM_TYPES, ApiError, parse_json

#: fields a client may repeat to send a list (LibreTranslate takes a list only for `q`)
LIST_FIELDS = ("q",)
MAX_FIELDS = 64  # form fields and query parameters at most (a repeated `q` counts once each)


def content_type(headers: list[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if name == b"content-type":
            return value.decode("latin-1").split(";")[0].strip().lower()
    return ""


def _fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A dict from (name, value) pairs: the last value of a field wins, except a repeated
    `q`, which becomes a list."""
    if len(pairs) > MAX_FIELDS:
        raise ApiError(400, f"{len(pairs)} parameters; at most {MAX_FIELDS}")
    data: dict[str, Any] = {}
    lists: dict[str, list[Any]] = {}
    for name, value in pairs:
        data[name] = value
        if name in LIST_FIELDS:
            lists.setdefault(name, []).append(value)
    for name, values in lists.items():
        if len(values) > 1:
            data[name] = values
    return data


def query_params(scope: dict) -> dict[str, Any]:
    raw = scope.get("query_string", b"").decode("latin-1")
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise ApiError(400, "the query string is not valid UTF-8") from None
    return _fields(pairs)


async def form_params(scope: dict, raw: bytes) -> dict[str, Any]:
    """Fields of an urlencoded or multipart body already read (`raw`); a file part is
    ignored (only /translate_file takes a file, and reads it itself)."""
    sent = [False]

    async def receive() -> dict:
        if sent[0]:
            return {"type": "http.disconnect"}
        sent[0] = True
        return {"type": "http.request", "body": raw, "more_body": False}

    request = Request({**scope, "type": "http"}, receive)
    try:
        form = await request.form(max_files=1, max_fields=MAX_FIELDS)
    except MultiPartException as exc:
        raise ApiError(400, f"the multipart body is malformed ({exc.message})") from None
    except HTTPException as exc:  # Starlette's form of the same, inside an application's stack
        if exc.status_code >= 500:
            raise
        raise ApiError(400, f"the multipart body is malformed ({exc.detail})") from None
    except UnicodeDecodeError:
        raise ApiError(400, "the form body is not valid UTF-8") from None
    try:
        return _fields([(k, v) for k, v in form.multi_items() if isinstance(v, str)])
    finally:
        await form.close()


async def request_params(scope: dict, raw: bytes) -> dict[str, Any]:
    """Every parameter of a request whose body (`raw`) has been read: the query string's,
    then the body's (JSON object, urlencoded or multipart form) over them."""
    data = query_params(scope)
    ctype = content_type(scope["headers"])
    if ctype in FORM_TYPES:
        data.update(await form_params(scope, raw))
    elif raw.strip() or not data:  # an empty body is fine when the query string has it all
        data.update(parse_json(raw))
    return data
