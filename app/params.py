"""A request's parameters, wherever the client put them, as LibreTranslate reads them.

LibreTranslate's clients send `q`, `source`, `target`, `format`, `api_key`, ... as a JSON object,
as form data (urlencoded or multipart), in the query string of a POST with an empty body, or in
the query string and a body at once. `request_params` merges them all into one dict: query
string first, then the body's fields over it. A field sent twice in a form or a query string
(`target=de&target=fr`) is read as LibreTranslate's Flask reads it (`request.values.get`): its
first value. A repeated `q` becomes a list, as a JSON list would (LibreTranslate takes the first
text alone). One function serves every endpoint and both front ends
(the plain-ASGI fast path, app/fastpath.py, and the FastAPI routes).

Forms and query strings are UTF-8, as browsers send them and as LibreTranslate (Flask) reads
them: raw bytes and %-escapes alike (`curl -d 'q=Grüße'` sends the raw bytes; a query
string's raw non-ASCII bytes never come here: the HTTP parser refuses them, app/protocol.py);
what is not valid UTF-8 is a 400, not text with replacement characters (in a multipart field
too: `Utf8MultiPartParser`). A line break in a form's or a query string's `q` is read as LF:
HTML forms send a text area's lines with CRLF, as multipart (RFC 2046) writes them, and
LibreTranslate reads them as LF ("\n".join(q.splitlines())), so that a line break counts one
character against the limits, as it does in the text area. Every line break `str.splitlines`
knows is read so (a lone CR, U+2028, ...), as there; a final one is kept, where LibreTranslate
drops it, so that the text comes back with it, as a JSON text does.

A request may repeat `q` as often as a JSON list may hold texts (`max_texts`): the cap on fields
is that plus FIELD_MARGIN.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

from starlette.datastructures import Headers
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.types import Scope

from .translate import FORM_TYPES, ApiError, parse_json

#: fields a client may repeat to send a list (LibreTranslate takes a list only for `q`)
LIST_FIELDS = ("q",)
#: fields whose line breaks a form writes as CRLF, read as LF (as LibreTranslate reads `q`)
TEXT_FIELDS = ("q",)
#: the line breaks of `str.splitlines` (CRLF, LF, CR, VT, FF, FS, GS, RS, NEL, U+2028, U+2029)
LINE_BREAK = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
URLENCODED = "application/x-www-form-urlencoded"
FIELD_MARGIN = 64  # fields besides the texts of `q`: form fields and query parameters at most
# are max_texts + FIELD_MARGIN (a repeated `q` counts once each)
#: the answer to a form's text field that is not UTF-8 (`Utf8MultiPartParser`)
NOT_UTF8_FORM = "the form body is not valid UTF-8; send UTF-8 text"


def content_type(headers: list[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if name == b"content-type":
            return value.decode("latin-1").split(";")[0].strip().lower()
    return ""


def too_many(count: int | str, limit: int) -> ApiError:
    return ApiError(
        413,
        f"{count} parameters; at most {limit} (a list `q` may hold {limit - FIELD_MARGIN} "
        "texts): send fewer texts per request",
    )


def fields_of(pairs: list[tuple[str, Any]], limit: int) -> dict[str, Any]:
    """A dict from (name, value) pairs: a field's first value, as Flask's `request.values.get`
    gives it, except a repeated `q`, which becomes a list."""
    if len(pairs) > limit:
        raise too_many(len(pairs), limit)
    data: dict[str, Any] = {}
    lists: dict[str, list[Any]] = {}
    for name, value in pairs:
        if name in TEXT_FIELDS and isinstance(value, str):  # a form's line breaks: CRLF, ...
            value = LINE_BREAK.sub("\n", value)
        data.setdefault(name, value)
        if name in LIST_FIELDS:
            lists.setdefault(name, []).append(value)
    for name, values in lists.items():
        if len(values) > 1:
            data[name] = values
    return data


def field_limit(settings: Any) -> int:
    return settings.max_texts + FIELD_MARGIN


def parse_urlencoded(raw: bytes, what: str, limit: int) -> list[tuple[str, str]]:
    """(name, value) pairs of `a=1&b=2` bytes, as UTF-8 (raw or %-escaped); 400 if it is not."""
    try:
        return parse_qsl(
            raw.decode("utf-8"),
            keep_blank_values=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=limit,
        )
    except UnicodeDecodeError:
        raise ApiError(400, f"the {what} is not valid UTF-8; send UTF-8 text") from None
    except ValueError:  # parse_qsl's max_num_fields
        raise too_many(f"more than {limit}", limit) from None


def query_params(scope: Scope, limit: int) -> dict[str, Any]:
    return fields_of(parse_urlencoded(scope.get("query_string", b""), "query string", limit), limit)


def sent_as_file(name: str, filename: str | None) -> ApiError:
    """400 for a file part in a request that takes text fields only (/translate_file takes
    files, and reads its own body)."""
    example = filename or "file.txt"
    return ApiError(
        400,
        f"`{name}` was sent as a file; send its text as a form field (curl -F '{name}=<{example}' "
        "reads a file into a field), or the file to /translate_file",
    )


class Utf8MultiPartParser(MultiPartParser):
    """Starlette's multipart parser, whose text fields are in the body's charset (UTF-8 unless
    its Content-Type names another) or a UnicodeDecodeError, as an urlencoded body's are
    (Starlette reads a field that is not valid in it as Latin-1, all its letters: "Grüße"
    with one wrong byte came as "GrÃ¼Ãe")."""

    def on_part_end(self) -> None:
        part = self._current_part
        if part.file is None:  # (Starlette decodes it as this, where it can)
            bytes(part.data).decode(self._charset or "utf-8")  # raises UnicodeDecodeError
        super().on_part_end()


def json_sent_as_form(raw: bytes) -> bool:
    """Whether an urlencoded body is a JSON object or array that holds something (`curl -d
    '{"q": ...}'` sends it with curl's default Content-Type): read as a form, it has one
    field, named by all of it. An empty `{}` or `[]` asks nothing: the query string may."""
    if raw.lstrip()[:1] not in (b"{", b"["):
        return False
    try:
        return bool(json.loads(raw))
    except ValueError:  # (UnicodeDecodeError too): not JSON
        return False
    except RecursionError:
        return True  # JSON nested too deeply is still JSON


async def form_params(scope: Scope, raw: bytes, limit: int) -> dict[str, Any]:
    """Fields of an urlencoded or multipart body already read (`raw`); a file part is a 400
    (`sent_as_file`), and so is a text field that is not UTF-8, and JSON sent as a form."""
    if content_type(scope["headers"]) == URLENCODED:
        if json_sent_as_form(raw):
            raise ApiError(
                400,
                "the body is JSON, sent as a form (Content-Type: "
                f"{URLENCODED}, curl -d's default); send it with the header "
                "Content-Type: application/json",
            )
        return fields_of(parse_urlencoded(raw, "form body", limit), limit)

    async def body():
        yield raw

    # every file part is parsed, to be refused by its name (`sent_as_file`); a field is held to
    # the body's limit alone (read already), not to Starlette's 1 MiB per part
    parser = Utf8MultiPartParser(
        Headers(scope=scope),
        body(),
        max_files=limit,
        max_fields=limit,
        max_part_size=max(len(raw), 1024 * 1024),
    )
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        why = exc.message
        if why.startswith("Too many fields"):
            raise too_many(f"more than {limit}", limit) from None
        raise ApiError(400, f"the multipart body is malformed ({why})") from None
    except UnicodeDecodeError:
        raise ApiError(400, NOT_UTF8_FORM) from None
    try:
        for name, value in form.multi_items():
            if not isinstance(value, str):
                raise sent_as_file(name, value.filename)
        return fields_of(list(form.multi_items()), limit)  # type: ignore[arg-type]
    finally:
        await form.close()


async def request_params(scope: Scope, raw: bytes, limit: int) -> dict[str, Any]:
    """Every parameter of a request whose body (`raw`) has been read: the query string's,
    then the body's (JSON object, urlencoded or multipart form) over them; at most `limit`
    fields in each of the query string and a form (`field_limit`)."""
    data = query_params(scope, limit)
    ctype = content_type(scope["headers"])
    if ctype in FORM_TYPES:
        data.update(await form_params(scope, raw, limit))
    elif raw.strip() or not data:  # an empty body is fine when the query string has it all
        if scope["path"] == "/detect":
            data.update(parse_json(raw, "q", numbers=""))
        else:
            data.update(parse_json(raw))
    return data
