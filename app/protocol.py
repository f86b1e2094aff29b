"""uvicorn's HTTP protocol (httptools), writing each short answer in one piece.

uvicorn writes an answer's status line and headers to the socket as soon as the application
sends `http.response.start`, and the body when it sends `http.response.body`: two writes, so
two TCP segments for every answer. On loopback each write runs the receiving side's network
stack and wakes the client, who reads the headers alone and then waits again for the body; on
a network it costs a packet and often an ACK. A translation answer is a few hundred bytes,
and its second write costs about as much as the first (docs/BENCHMARKS.md, section 6).

`CoalescingTransport` holds a write back until the next one, which goes out with it, or until
the end of the event loop's current iteration, whichever comes first. The headers and body of
an answer sent in one go leave in one write; a streamed answer's headers still leave before the
loop waits for anything, so nothing is delayed beyond the iteration that wrote it. aiohttp's
server and client coalesce headers and a small body the same way.
"""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is missing: uvicorn's own choice (h11) serves
    HttpToolsProtocol = None

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
        if held is None:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
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


if HttpToolsProtocol is not None:

    class HttpProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol on a `CoalescingTransport`."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]

    HTTP_PROTOCOL: type[asyncio.Protocol] | str = HttpProtocol
else:
    HTTP_PROTOCOL = "auto"
