"""uvicorn's HTTP protocol (httptools), writing each short answer in one piece.

uvicorn writes an answer's status line and headers to the socket as soon as the application
sends `http.response.start`, and the body when it sends `http.response.body`: two writes, two
send calls and usually two TCP segments per answer, which the client may have to read
separately; on a network the first costs a packet and often an ACK of its own. A translation
answer is a few hundred bytes.

`CoalescingTransport` holds a write back until the next one, which goes out with it, or until
the event loop has run the rest of its current iteration's callbacks, whichever comes first.
The headers and body of an answer sent in one go leave in one write. A held write never waits
while the loop waits for I/O, so a streamed answer's headers or a `100 Continue` still leave
before the loop sleeps. A write too large to be worth copying (over JOIN_LIMIT) goes out at
once, after what is held. aiohttp's server and client coalesce headers and a small body the
same way. The protocol flushes what is held before anything can close the connection, also
when the client shuts down its side (uvloop then closes the inner transport itself).

A request that the HTTP parser cannot read (a negative Content-Length, two of them, a malformed
chunk) never reaches the application: uvicorn answers it 400 in plain text, "Invalid HTTP
request received.", and logs that line, no reason, as a warning. This protocol answers it as the
service answers every error, in JSON, with the parser's reason, and logs the client and the
reason, as a warning, in place of uvicorn's line (`WithoutParserRefusal`): one line a request.

Each answer this protocol writes itself (the 400, 431 and 408 below) carries the CORS headers
the application gives an answer to the same Origin (MT_CORS_ORIGINS: without them a page on
another origin could not read why its request was refused), as far as the request's headers were
read, and is counted in the application's metrics, status and latency, under the route
"other".

uvicorn's httptools protocol also holds a request's line and headers in memory however long
they grow (a 100 MB header was read whole). Past HEAD_LIMIT bytes this protocol answers 431
in JSON, reads and drops what the client still sends, and closes the connection once the client
has read the answer and closed its side, or after LINGER_S (a close with unread data would reset
the connection, and the client could lose the answer).

uvicorn also keeps a connection open for as long as the client likes while it sends nothing, or
a head that never ends (its keep-alive timeout starts after an answer only): a client could hold
any number of connections. This protocol closes a connection that sends nothing within uvicorn's
keep-alive timeout, as one idle between requests, and answers 408 to a head not all arrived
within HEAD_TIMEOUT_S of its first read (a head that arrives in one read, as nearly all do,
starts no timer).

Each refusal of a request pipelined behind one still being answered on the connection waits for
that answer: written first, it would be read as that request's answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

#: uvicorn's line for a request its HTTP parser refused, logged without the reason
PARSER_REFUSAL = "Invalid HTTP request received."
#: the parser's reasons for a URL holding a byte it must not (a non-ASCII letter, a control
#: character), or a space that cut the request line ("POST /translate?q=Wo ist er HTTP/1.1")
UNESCAPED_URL = ("Invalid char in url", "Expected HTTP/")
ESCAPE_URL = (
    "a URL's spaces and non-ASCII letters go %-escaped, as UTF-8: "
    "`q=Grüße` as `q=Gr%C3%BC%C3%9Fe`, a space as `%20`"
)

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is missing: uvicorn's own choice (h11) serves
    HttpToolsProtocol = None  # type: ignore[assignment,misc]  # (the class, or None)

log = logging.getLogger("app")

#: bytes of a request's line and headers at most (beyond: 431), give or take one read (nginx
#: takes 32 KiB by default, Node.js 16 KiB)
HEAD_LIMIT = 64 * 1024
#: seconds a request's line and headers may take to arrive, from the first read of them (beyond:
#: 408; nginx waits 60 s, Node.js 60 s)
HEAD_TIMEOUT_S = 30.0
#: seconds a refused connection is kept open, its data dropped, for the client to read the answer
LINGER_S = 2.0

#: a held write is joined with the next one below this size (above, the copy is not worth it)
JOIN_LIMIT = 64 * 1024


class CoalescingTransport:
    """An asyncio transport that sends a write together with the next one made in the same
    loop iteration. Everything else is the wrapped transport's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport, self._loop = transport, loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if len(data) > JOIN_LIMIT:  # not worth a copy: out at once, after what is held
            self.flush()
            self._transport.write(data)
        elif held is None:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
        else:
            self._held = None
            if len(held) + len(data) <= JOIN_LIMIT:
                self._transport.write(held + data)
            else:
                self._transport.write(held)
                self._transport.write(data)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Writes what is held back, if anything."""
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:  # what was written goes out before the connection closes
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class WithoutParserRefusal:
    """A connection's uvicorn logger, less uvicorn's line for a request its parser refused
    (PARSER_REFUSAL: the protocol logs one with the parser's reason instead). Everything else
    is the wrapped logger's."""

    def __init__(self, logger: logging.Logger):
        self._logger = logger

    def warning(self, msg: object, *args: Any, **kwargs: Any) -> None:
        if msg != PARSER_REFUSAL:
            kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1  # the caller's line
            self._logger.warning(msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)


if HttpToolsProtocol is not None:

    class HttpProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol on a `CoalescingTransport`."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.logger = WithoutParserRefusal(self.logger)  # type: ignore[assignment]

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
            # sending nothing, it is closed as a connection idle between requests is (its first
            # data cancels this, as it does after an answer)
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

        # uvicorn annotates it -> None; asyncio.Protocol's (what uvloop reads) is bool | None
        def eof_received(self) -> bool | None:  # type: ignore[override]
            # uvloop closes the inner transport itself when this returns a false value: what is
            # held goes out first
            self.transport.flush()  # type: ignore[attr-defined]
            return super().eof_received()

        #: where an answer written here is counted: app/metrics.py's Metrics (its `requests`
        #: and `latency`), set by `bound` (answers before the application, route "other")
        metrics: Any = None
        #: the CORS headers of an answer to a request's headers (app/main.py's JsonCors), set
        #: by `bound`; None without CORS
        cors_headers: Callable[[list[tuple[bytes, bytes]]], list[tuple[bytes, bytes]]] | None = None
        began = 0.0  # time.perf_counter() when the request being read began
        in_head = False  # between a request's first byte and the end of its headers
        head_bytes = 0  # bytes of the head read in whole reads since its first one
        begun = False  # a request began in the read being parsed
        refused = False  # refused: what arrives is dropped until the connection closes
        #: a refusal that waits for the answers owed before it on the connection (pipelined
        #: requests): its status, error, whether the connection lingers after it and the level
        #: its line is logged at
        owed_refusal: tuple[bytes, str, bool, int] | None = None
        head_timer: asyncio.TimerHandle | None = None  # set for a head not all in one read

        def data_received(self, data: bytes) -> None:
            if self.refused:
                return
            self.begun = False
            self.last_read = data  # (for a refusal's reason: `send_400_response`)
            super().data_received(data)
            if self.in_head and not self.transport.is_closing():
                # a read that began the request also holds the end of the one before it
                self.head_bytes = 0 if self.begun else self.head_bytes + len(data)
                if self.head_bytes > HEAD_LIMIT:
                    self.refuse_head()
                elif self.head_timer is None and (
                    self.cycle is None or self.cycle.response_complete
                ):  # (while an answer is owed, reading may be paused: it starts once read again)
                    self.head_timer = self.loop.call_later(HEAD_TIMEOUT_S, self.head_too_slow)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.in_head, self.begun, self.head_bytes = True, True, 0
            self.began = time.perf_counter()

        def on_headers_complete(self) -> None:
            self.in_head = False
            self.stop_head_timer()
            super().on_headers_complete()

        def stop_head_timer(self) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None

        def head_too_slow(self) -> None:
            """408 for a head not all arrived within HEAD_TIMEOUT_S; the connection closes."""
            self.head_timer = None
            error = (
                f"the request line and headers did not arrive within {HEAD_TIMEOUT_S:g} s; "
                "send them at once"
            )
            self.refuse(b"408 Request Timeout", error, linger=False)

        def connection_lost(self, exc: Exception | None) -> None:
            self.stop_head_timer()
            super().connection_lost(exc)

        def refuse_head(self) -> None:
            """431 for a head over HEAD_LIMIT; the connection lingers, then closes."""
            error = (
                f"the request line and headers are over {HEAD_LIMIT} bytes; send shorter "
                "headers (a cookie or a URL too long?)"
            )
            self.refuse(b"431 Request Header Fields Too Large", error, linger=True)

        def refuse(
            self, status: bytes, error: str, *, linger: bool, level: int = logging.INFO
        ) -> None:
            """Answers `status` with `error`, logged at `level`, and closes the connection
            (after LINGER_S, or once the client closed its side, with `linger`); what arrives
            meanwhile is dropped. An
            earlier request on the connection still being answered (pipelined) is answered
            first: written now, the refusal would be read as that request's answer, and that
            answer could no longer be written. (A request refused inside its own body, a
            malformed chunk, is that request's answer.)"""
            self.refused = True
            self.stop_head_timer()
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete and not cycle.more_body:
                self.owed_refusal = (status, error, linger, level)
            else:
                self.write_refusal(status, error, linger, level)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            owed = self.owed_refusal
            if owed is not None and self.cycle.response_complete:  # (pipelined: the next)
                self.owed_refusal = None
                if not self.transport.is_closing():
                    self.write_refusal(*owed)

        def write_refusal(self, status: bytes, error: str, linger: bool, level: int) -> None:
            self.write_error(status, error, level)
            if not linger or not self.transport.can_write_eof():  # (TLS) no half-close
                self.transport.close()
                return
            self.transport.write_eof()
            self.loop.call_later(LINGER_S, self.transport.close)

        def write_error(self, status: bytes, error: str, level: int = logging.INFO) -> None:
            """A JSON error answer, written before the application has seen the request (it
            is logged with the client, as the application's errors are, at `level`)."""
            client = f"{self.client[0]}:{self.client[1]} - " if self.client else ""
            log.log(level, "%s%s", client, error)
            if self.metrics is not None:
                self.metrics.requests.labels("other", status.split(b" ")[0].decode()).inc()
                began = self.began or time.perf_counter()
                self.metrics.latency.labels("other", "refused").observe(time.perf_counter() - began)
            body = json.dumps({"error": error}, separators=(",", ":")).encode()
            headers = list(self.server_state.default_headers)
            if self.cors_headers is not None:  # the headers read so far: Origin, if it came
                headers += self.cors_headers(list(self.headers or []))
            head = [b"HTTP/1.1 " + status + b"\r\n"]
            head += [name + b": " + value + b"\r\n" for name, value in headers]
            head.append(
                b"content-type: application/json\r\ncontent-length: %d\r\n"
                b"connection: close\r\n\r\n" % len(body)
            )
            self.transport.write(b"".join(head) + body)

        def wrong_version(self) -> bool:
            """Whether the request line just read has three parts, the last not an HTTP
            version (`GET / FOO/1.1`: the parser expected HTTP/ there, as after a URL cut by a
            space, but no URL is to be escaped)."""
            line = getattr(self, "last_read", b"").split(b"\n", 1)[0].rstrip(b"\r")
            parts = line.split(b" ")
            return len(parts) == 3 and not parts[2].startswith(b"HTTP/")

        def send_400_response(self, msg: str) -> None:
            """uvicorn's answer to a request its parser refused (called while the parser's
            error is handled), in JSON with the parser's reason; the connection closes."""
            exc = sys.exc_info()[1]
            why = (str(exc) if exc is not None else "") or msg.rstrip(".")
            error = f"invalid HTTP request ({why}); send a well-formed HTTP/1.1 request"
            if why.startswith(UNESCAPED_URL) and not self.wrong_version():
                error += f" ({ESCAPE_URL})"
            # a warning, as uvicorn logs its own line for it (left out: WithoutParserRefusal)
            self.refuse(b"400 Bad Request", error, linger=False, level=logging.WARNING)

    HTTP_PROTOCOL: type[asyncio.Protocol] | str = HttpProtocol
else:
    HTTP_PROTOCOL = "auto"


def bound(metrics: Any, cors_headers: Callable | None = None) -> type[asyncio.Protocol] | str:
    """The protocol for uvicorn's `http` option, counting the answers it writes itself in an
    application's `metrics` and giving them the `cors_headers` (a function of the request's
    headers) of its other answers (uvicorn's own choice when httptools is missing)."""
    if not isinstance(HTTP_PROTOCOL, type):
        return HTTP_PROTOCOL
    attributes = {
        "metrics": metrics,
        "cors_headers": staticmethod(cors_headers) if cors_headers else None,
    }
    return type("BoundHttpProtocol", (HTTP_PROTOCOL,), attributes)
