"""An answer's headers and body leave in one write (app/protocol.py): the transport on its own,
and a real server read from a raw socket."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket

import pytest

from app.protocol import JOIN_LIMIT, CoalescingTransport
from tests.service_helpers import serve_in_process, wait_ready


class Recorder(asyncio.Transport):
    """A transport that records what reaches it."""

    def __init__(self):
        super().__init__()
        self.writes: list[bytes] = []
        self.calls: list[str] = []
        self.closing = False

    def write(self, data):
        assert not self.closing, "written after close"
        self.writes.append(bytes(data))

    def close(self):
        self.calls.append("close")
        self.closing = True

    def abort(self):
        self.calls.append("abort")
        self.closing = True

    def is_closing(self):
        return self.closing

    def get_write_buffer_size(self):
        return 0

    def get_extra_info(self, name, default=None):
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


async def test_a_write_goes_out_with_the_next_one_of_the_same_iteration():
    inner = Recorder()
    t = CoalescingTransport(inner, asyncio.get_running_loop())
    t.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert inner.writes == []  # held back, and counted as buffered meanwhile
    assert t.get_write_buffer_size() == 38
    t.write(b"{}")
    assert inner.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    await asyncio.sleep(0)
    assert len(inner.writes) == 1  # nothing else left over
    assert t.get_extra_info("peername") == ("127.0.0.1", 1)  # the rest is the transport's


async def test_a_lone_write_leaves_at_the_end_of_the_iteration():
    inner = Recorder()
    t = CoalescingTransport(inner, asyncio.get_running_loop())
    t.write(b"head")  # a streamed answer's headers: the body comes later
    await asyncio.sleep(0)
    assert inner.writes == [b"head"]
    t.write(b"chunk 1")
    t.write(b"chunk 2")
    t.write(b"chunk 3")
    await asyncio.sleep(0)
    assert b"".join(inner.writes) == b"headchunk 1chunk 2chunk 3"  # in order, none lost


async def test_large_writes_are_not_copied_together_and_keep_their_order():
    inner = Recorder()
    t = CoalescingTransport(inner, asyncio.get_running_loop())
    body = b"x" * JOIN_LIMIT
    t.write(b"head")
    t.write(body)
    assert inner.writes == [b"head", body]


async def test_close_sends_what_is_held_first_and_abort_drops_it():
    inner = Recorder()
    t = CoalescingTransport(inner, asyncio.get_running_loop())
    t.write(b"last answer")
    t.close()
    assert inner.writes == [b"last answer"] and inner.calls == ["close"]
    await asyncio.sleep(0)  # the scheduled flush finds nothing more to write

    inner = Recorder()
    t = CoalescingTransport(inner, asyncio.get_running_loop())
    t.write(b"never sent")
    t.abort()
    await asyncio.sleep(0)
    assert inner.writes == [] and inner.calls == ["abort"]


@pytest.fixture(scope="module")
def weights_dir(random_checkpoint, tmp_path_factory):
    d = tmp_path_factory.mktemp("weights")
    shutil.copytree(random_checkpoint, d / "en-de")
    return d


def read_answer(sock: socket.socket) -> tuple[list[bytes], bytes, bytes]:
    """(the chunks recv returned, headers, body) of one answer with a content-length."""
    chunks, data = [], b""
    while b"\r\n\r\n" not in data:
        chunks.append(sock.recv(65536))
        data += chunks[-1]
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
                 .split(b":")[1])  # fmt: skip
    while len(body) < length:
        chunks.append(sock.recv(65536))
        body += chunks[-1]
    return chunks, head, body


def test_the_server_writes_each_answer_in_one_piece(weights_dir, tmp_path):
    """In its own process (in a thread of this one, it would hold the GIL between its writes,
    and this test could never see two of them)."""
    with serve_in_process(weights_dir, tmp_path / "log") as (url, proc):
        wait_ready(url, process=proc)
        port = int(url.rsplit(":", 1)[1])
        sent = []
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            for text in ["the cat is big", "we eat bread today", "the dog"] * 4:  # one connection
                payload = json.dumps({"q": text, "source": "en", "target": "de"}).encode()
                sock.sendall(
                    b"POST /translate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(payload), payload)
                )
                chunks, head, body = read_answer(sock)
                assert head.startswith(b"HTTP/1.1 200")
                assert "translatedText" in json.loads(body)
                sent.append(len(chunks))
            # one write of the whole answer arrives whole: the first read holds all of it
            assert sent == [1] * 12
