"""POST /translate with a JSON body in plain ASGI, in front of the FastAPI application.

FastAPI's request handling (its middleware layers, routing, Request object and dependency
resolution) costs a fixed amount of CPU per request that is large next to a short sentence's
decoding on a small CPU: at one client it showed up as a sizable share of the latency the
service adds to the engine, and under load it competes with the engine for the same cores
(docs/BENCHMARKS.md, section 2). This layer serves the common request, a JSON body, with the
same code as the FastAPI route (app/translate.py) and the same answers; everything else (form
bodies, other methods and paths) passes through to FastAPI, which also documents /translate in
the OpenAPI schema.

It sits inside the metrics middleware, so requests are counted and timed alike, and inside
Starlette's error middleware: an unexpected exception still becomes a JSON 500 with an error id.
"""

from __future__ import annotations

import time
from typing import Any

from .translate import FORM_TYPES, ApiError, check_accepting, error_body, json_bytes, parse_json
from .translate import translate as translate_data

PATH = "/translate"


def content_type(scope: dict) -> str:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.decode("latin-1").split(";")[0].strip().lower()
    return ""


async def read_all(receive) -> bytes | None:
    """The whole request body, or None when the client disconnected before sending it."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def send_json(send, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    raw_headers = [(b"content-length", str(len(body)).encode())]
    if body:
        raw_headers.append((b"content-type", b"application/json"))
    for name, value in (headers or {}).items():
        raw_headers.append((name.lower().encode("latin-1"), value.encode("latin-1")))
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


class TranslateFastPath:
    def __init__(self, app, state: Any):
        self.app, self.state = app, state

    async def __call__(self, scope, receive, send):
        if (
            scope["type"] != "http"
            or scope["path"] != PATH
            or scope["method"] != "POST"
            or content_type(scope) in FORM_TYPES
        ):
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        try:
            check_accepting(self.state)
            raw = await read_all(receive)
            if raw is None:  # the client went away before its body arrived
                return
            body = await translate_data(self.state, parse_json(raw), receive, started)
        except ApiError as exc:
            await send_json(send, exc.status, error_body(exc.message), exc.headers)
            return
        if body is None:  # the client went away; nobody reads this
            await send_json(send, 499, b"")
            return
        await send_json(send, 200, json_bytes(body))
