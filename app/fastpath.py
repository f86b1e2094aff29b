"""POST /translate and POST /detect in plain ASGI, in front of the FastAPI application.

FastAPI's request handling (its middleware layers, routing, Request object and dependency
resolution) costs a fixed amount of CPU per request that is large next to a short sentence's
decoding on a small CPU: it adds to every request's latency, and under load it competes with
the engine for the same cores (docs/BENCHMARKS.md, section 2). This layer serves POST /translate
and POST /detect in every form a client sends them (JSON, form data, multipart, the query
string: app/params.py) with the same code as the FastAPI routes (app/translate.py, app/detect.py)
and the same answers; other methods and paths pass through to FastAPI, which also documents
both endpoints in the OpenAPI schema. It reads the body itself, so that a body over
`max_body_bytes` is refused (413) before it is held in memory and one that takes longer than
`body_timeout_s` to arrive gets a 408. A client that goes away before its body arrived is
answered 499 (nobody reads it; the metrics count it as the client's doing, not as a server
error).

It sits in front of FastAPI's middleware stack, inside the metrics middleware (app/main.py,
`Service`), so requests are counted and timed alike. An unexpected exception becomes a JSON 500
whose error id is in the log, as FastAPI's routes answer one.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.types import Scope

from .translate import ApiError, check_accepting, internal_error, json_bytes


def header(scope: Scope, wanted: bytes) -> str:
    for name, value in scope["headers"]:
        if name == wanted:
            return value.decode("latin-1")
    return ""


def too_slow(what: str, timeout: float, size: int) -> ApiError:
    """408 for a body (`what`) not all arrived within `timeout` s; its connection closes."""
    return ApiError(
        408,
        f"{what} did not arrive within {timeout:g} s ({size} bytes came); send it at once",
        {"Connection": "close"},
    )


def check_not_encoded(scope: Scope) -> None:
    """415 for a body sent compressed (a Content-Encoding other than identity): it is read as
    sent, and its compressed bytes would be refused as JSON or form data that is not valid."""
    coding = header(scope, b"content-encoding").strip().lower()
    if coding and coding != "identity":
        raise ApiError(
            415,
            f"the body has Content-Encoding {coding}; the server takes it uncompressed "
            "(leave out the Content-Encoding header)",
            {"Accept-Encoding": "identity"},
        )


def too_large(size: int | str, limit: int) -> ApiError:
    return ApiError(413, f"the body is {size} bytes; at most {limit} (send less text per request)")


async def read_all(scope: Scope, receive, limit: int, timeout: float) -> bytes | None:
    """The whole request body, or None when the client disconnected before sending it.
    Raises ApiError 413 as soon as it is known to pass `limit` bytes (by its Content-Length,
    before reading any of it, or while it arrives in chunks), and 408 when all of it has not
    arrived within `timeout` seconds (a body that trickles in would hold its connection and
    its place among the requests in progress for as long as the client likes)."""
    declared = header(scope, b"content-length")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(declared, limit)
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise too_large(f"more than {limit}", limit)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        raise too_slow("the body", timeout, size) from None


async def send_json(send, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    raw_headers = [(b"content-length", str(len(body)).encode())]
    if body:
        raw_headers.append((b"content-type", b"application/json"))
    for name, value in (headers or {}).items():
        raw_headers.append((name.lower().encode("latin-1"), value.encode("latin-1")))
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(send, exc: ApiError) -> None:
    await send_json(send, exc.status, json_bytes({"error": exc.message}), exc.headers)


def replay(body: bytes, receive):
    """An ASGI receive channel that gives the body already read, then the real channel's
    messages (a disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive_again() -> dict:
        return pending.pop() if pending else await receive()

    return receive_again


class TranslateFastPath:
    """Serves POST requests to the paths of `handlers` (app/endpoints.py: path -> async
    function(state, params, scope, receive, started) returning the answer's JSON body, or
    None when the client went away); hands everything else to `app`."""

    def __init__(self, app, state: Any, handlers: dict):
        self.app, self.state, self.handlers = app, state, handlers

    async def __call__(self, scope, receive, send):
        handler = self.handlers.get(scope["path"]) if scope["type"] == "http" else None
        if handler is None or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        settings = self.state.settings
        try:
            check_accepting(self.state)
            check_not_encoded(scope)
            raw = await read_all(scope, receive, settings.max_body_bytes, settings.body_timeout_s)
        except ApiError as exc:
            return await send_error(send, exc)
        if raw is None:  # the client went away before its body arrived: counted as 499
            return await send_json(send, 499, b"")
        try:
            body = await handler(self.state, scope, raw, receive, started)
        except ApiError as exc:
            return await send_error(send, exc)
        except Exception as exc:  # a server bug: the client gets an error id, the log the rest
            return await send_json(send, 500, json_bytes({"error": internal_error(exc)}))
        if body is None:  # the client went away; nobody reads this
            await send_json(send, 499, b"")
            return
        await send_json(send, 200, json_bytes(body))
