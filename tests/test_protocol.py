"""An answer's headers and body leave in one write (app/protocol.py): the transport on its own,
and a real server read from a raw socket."""

from __future__ import annotations

import asyncio
import json
import logging
import select
import shutil
import socket
import threading

import httpx
import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from app.protocol import HEAD_LIMIT, JOIN_LIMIT, CoalescingTransport, HttpProtocol
from tests.service_helpers import serve_in_process, serve_in_thread, wait_ready


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


async def test_a_write_too_large_to_join_goes_out_at_once_after_what_is_held():
    inner = Recorder()
    t = CoalescingTransport(inner, asyncio.get_running_loop())
    big = b"y" * (JOIN_LIMIT + 1)
    t.write(big)
    assert inner.writes == [big]  # not held for the rest of the iteration
    t.write(b"head")
    t.write(big)
    assert inner.writes == [big, b"head", big]


async def test_what_is_held_goes_out_when_the_client_shuts_its_side():
    """uvloop closes the inner transport itself after eof_received returns a false value (the
    client shut down its writing side): the held write must be out by then."""
    inner = Recorder()
    protocol = HttpProtocol(
        config=Config(app=None), server_state=ServerState(), app_state={},
        _loop=asyncio.get_running_loop(),
    )  # fmt: skip
    protocol.connection_made(inner)
    protocol.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert inner.writes == []
    protocol.eof_received()
    assert inner.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]


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


def test_every_answer_reaches_the_socket_in_one_write(weights_dir, monkeypatch):
    """Counted at the transport under the coalescing one, in a server of this process."""
    counters = []

    class Counting:
        def __init__(self, inner):
            self.inner, self.writes = inner, []
            counters.append(self)

        def write(self, data):
            self.writes.append(bytes(data))
            self.inner.write(data)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    wrap = CoalescingTransport.__init__
    monkeypatch.setattr(
        CoalescingTransport, "__init__", lambda self, t, loop: wrap(self, Counting(t), loop)
    )
    with serve_in_thread(weights_dir) as (url, _), httpx.Client(timeout=60) as client:
        texts = ["the cat is big", "we eat bread today", "the dog"]
        for text in texts:
            r = client.post(f"{url}/translate", json={"q": text, "source": "en", "target": "de"})
            assert r.status_code == 200
        head = client.head(f"{url}/health")  # no body: its headers leave alone, at once
        assert head.status_code in (200, 405)
    writes = [w for c in counters for w in c.writes]
    answers = [w for w in writes if b"translatedText" in w]
    assert len(answers) == len(texts)
    assert all(w.startswith(b"HTTP/1.1 200") for w in answers)  # headers and body together
    assert not any(w.startswith(b'{"translatedText"') for w in writes)  # never a body alone


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /translate HTTP/1.1\r\nhost: x\r\ncontent-length: -5\r\n\r\n",
        b"POST /translate HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ncontent-length: 7\r\n\r\n",
        b"POST /translate HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"post /translate HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n",
    ],
    ids=["negative-length", "two-lengths", "bad-chunk", "lowercase-method"],
)
def test_a_request_http_cannot_parse_gets_a_json_400_that_says_why(
    weights_dir, caplog, request_bytes
):
    """uvicorn answers it in plain text ("Invalid HTTP request received.") and logs no reason;
    every other error of the service is JSON."""
    with (
        serve_in_thread(weights_dir) as (url, _),
        caplog.at_level("INFO", logger="app"),
        socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as sock,
    ):
        sock.sendall(request_bytes)
        _, head, body = read_answer(sock)
        assert sock.recv(1) == b""  # and the connection is closed
        scraped = httpx.get(f"{url}/metrics").text
    assert head.startswith(b"HTTP/1.1 400")
    assert b"content-type: application/json" in head.lower()
    error = json.loads(body)["error"]
    assert error.startswith("invalid HTTP request (") and len(error) > 26, error
    (line,) = [m for m in caplog.messages if "invalid HTTP request" in m]
    assert "127.0.0.1:" in line and error in line
    # counted, as every request answered is (under the route of unknown paths)
    assert 'mt_requests_total{route="other",status="400"} 1.0' in scraped


class Records(logging.Handler):
    """The log records that reach the loggers it is added to."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.mark.parametrize(
    ("request_bytes", "reason"),
    [
        (
            "POST /translate?q=Grüße&source=de&target=en HTTP/1.1\r\nhost: x\r\n\r\n".encode(),
            "Invalid char in url",
        ),
        (b"POST /translate HTTP/1.1\r\nhost: x\r\ncontent-length: -5\r\n\r\n", "Content-Length"),
    ],
    ids=["non-ascii-url", "negative-length"],
)
def test_a_request_http_cannot_parse_is_logged_once_with_its_reason(
    weights_dir, request_bytes, reason
):
    """uvicorn logged it too, as "Invalid HTTP request received.", without the reason, before
    the service's own line."""
    records = Records()
    loggers = [logging.getLogger("uvicorn"), logging.getLogger("app")]
    app_level = loggers[1].level
    with serve_in_thread(weights_dir) as (url, _):  # (its logging is configured as it starts)
        for logger in loggers:
            logger.addHandler(records)
        loggers[1].setLevel(logging.INFO)
        try:
            with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), 30) as sock:
                sock.sendall(request_bytes)
                _, head, _ = read_answer(sock)
                assert sock.recv(1) == b""  # closed: the refusal is written, and logged
        finally:
            loggers[1].setLevel(app_level)
            for logger in loggers:
                logger.removeHandler(records)
    assert head.startswith(b"HTTP/1.1 400")
    about = [r for r in records.records if "invalid http request" in r.getMessage().lower()]
    assert len(about) == 1, [r.getMessage() for r in about]
    assert reason in about[0].getMessage() and "127.0.0.1:" in about[0].getMessage()
    assert about[0].levelno == logging.WARNING  # as uvicorn logged it


@pytest.mark.parametrize(
    "target",
    ["/translate?q=Grüße&source=de&target=de", "/translate?q=Wo ist er&source=de&target=de"],
    ids=["non-ascii", "space"],
)
def test_a_url_with_a_character_to_escape_is_a_400_that_says_to_escape_it(weights_dir, target):
    """`curl -X POST 'localhost:8000/translate?q=Grüße&...'` sends the URL's UTF-8 bytes as
    they are, which the HTTP parser refuses: the answer says what to do (it was "invalid HTTP
    request (Invalid char in url query)" alone)."""
    with (
        serve_in_thread(weights_dir) as (url, _),
        socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as sock,
    ):
        sock.sendall(b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n" % target.encode())
        _, head, body = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 400")
    error = json.loads(body)["error"]
    assert error.startswith("invalid HTTP request (") and "%-escape" in error, error
    assert "Gr%C3%BC%C3%9Fe" in error, error


@pytest.mark.parametrize("line", [b"GET / FOO/1.1", b"GET /languages HTTPS/1.1"])
def test_a_request_line_with_another_protocol_is_not_told_to_escape_its_url(weights_dir, line):
    """The parser's reason is the one of a URL cut by a space ("Expected HTTP/"): the advice to
    %-escape the URL was given too."""
    with (
        serve_in_thread(weights_dir) as (url, _),
        socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as sock,
    ):
        sock.sendall(line + b"\r\nhost: x\r\n\r\n")
        _, head, body = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 400")
    error = json.loads(body)["error"]
    assert error.startswith("invalid HTTP request (") and "escape" not in error, error


def send_header_of(sock: socket.socket, size: int, headers: bytes = b"") -> None:
    """A GET /languages (with `headers` first) whose X-Big header holds `size` bytes, sent in
    pieces until the server answers (it may answer before all of it is sent)."""
    sock.sendall(b"GET /languages HTTP/1.1\r\nhost: x\r\n" + headers + b"x-big: ")
    piece = b"a" * 16384
    for _ in range(size // len(piece)):
        if select.select([sock], [], [], 0)[0]:  # answered already
            return
        sock.sendall(piece)
    sock.sendall(b"\r\n\r\n")


def test_headers_over_the_limit_get_a_json_431_and_are_not_held(weights_dir, caplog):
    """uvicorn's httptools protocol read a head of any length into memory (100 MB whole)."""
    with (
        serve_in_thread(weights_dir) as (url, _),
        caplog.at_level("INFO", logger="app"),
        socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as sock,
    ):
        send_header_of(sock, 8 * 1024 * 1024)
        _, head, body = read_answer(sock)
        assert head.startswith(b"HTTP/1.1 431")
        assert b"content-type: application/json" in head.lower()
        error = json.loads(body)["error"]
        assert f"over {HEAD_LIMIT} bytes" in error, error
        assert sock.recv(1) == b""  # the server closed its side
        assert any(error in m and "127.0.0.1:" in m for m in caplog.messages)
        scraped = httpx.get(f"{url}/metrics").text
        assert 'mt_requests_total{route="other",status="431"} 1.0' in scraped
        # a header within the limit is served
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), 30) as ok:
            send_header_of(ok, HEAD_LIMIT // 2)
            _, head, body = read_answer(ok)
            assert head.startswith(b"HTTP/1.1 200") and json.loads(body)


def answers_of(data: bytes) -> list[tuple[bytes, bytes]]:
    """(headers, body) of each answer in `data`, all of them with a content-length."""
    out = []
    while data:
        head, data = data.split(b"\r\n\r\n", 1)
        length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
                     .split(b":")[1])  # fmt: skip
        out.append((head, data[:length]))
        data = data[length:]
    return out


@pytest.mark.parametrize(
    ("refused", "status"),
    [
        (
            b"GET /languages HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * (1024 * 1024) + b"\r\n\r\n",
            431,
        ),
        (b"POST /translate HTTP/1.1\r\nhost: x\r\ncontent-length: -5\r\n\r\n", 400),
    ],
    ids=["431", "400"],
)
def test_a_request_refused_behind_one_being_answered_is_answered_after_it(
    weights_dir, refused, status
):
    """Pipelined on one connection: the refusal was written at once, read as the first
    request's answer, and the first request's answer was lost (after a 431, written after
    the server's end of the connection: a RuntimeError and a 500)."""
    with serve_in_thread(weights_dir) as (url, app):
        inner, started, gate = app.state.batcher.fn, threading.Event(), threading.Event()

        def held(key, payloads):  # the first request's batch waits for the refusal
            started.set()
            assert gate.wait(60)
            return inner(key, payloads)

        app.state.batcher.fn = held
        body = json.dumps({"q": "The cat.", "source": "en", "target": "de"}).encode()
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), 30) as sock:
            sock.sendall(
                b"POST /translate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
            assert started.wait(60)
            sock.sendall(refused)
            gate.set()
            data = b""
            while chunk := sock.recv(65536):  # until the server closes the connection
                data += chunk
        scraped = httpx.get(f"{url}/metrics").text
    (first_head, first), (second_head, second) = answers_of(data)
    assert first_head.startswith(b"HTTP/1.1 200") and json.loads(first)["translatedText"]
    assert second_head.startswith(b"HTTP/1.1 %d" % status), second_head
    assert json.loads(second)["error"]
    assert 'mt_requests_total{route="/translate",status="200"} 1.0' in scraped
    assert f'mt_requests_total{{route="other",status="{status}"}} 1.0' in scraped


def test_a_connection_sending_nothing_or_a_head_that_never_ends_is_not_held(
    weights_dir, monkeypatch
):
    """uvicorn kept both open for as long as the client liked (its keep-alive timeout starts
    after an answer only): a client could hold any number of connections."""
    import app.protocol
    import tests.service_helpers

    configure = tests.service_helpers.server_config
    monkeypatch.setattr(
        tests.service_helpers,
        "server_config",
        lambda *args, **options: configure(*args, timeout_keep_alive=1, **options),
    )
    monkeypatch.setattr(app.protocol, "HEAD_TIMEOUT_S", 0.5, raising=False)
    with serve_in_thread(weights_dir) as (url, _):
        address = ("127.0.0.1", int(url.rsplit(":", 1)[1]))
        with socket.create_connection(address, timeout=10) as idle:
            assert idle.recv(1) == b""  # closed, as a connection idle between requests
        with socket.create_connection(address, timeout=10) as slow:
            slow.sendall(b"GET /languages HTTP/1.1\r\nhost: x\r\n")  # and no end
            _, head, body = read_answer(slow)
            assert head.startswith(b"HTTP/1.1 408"), head
            error = json.loads(body)["error"]
            assert "request line and headers did not arrive within 0.5 s" in error, error
            assert slow.recv(1) == b""
        scraped = httpx.get(f"{url}/metrics").text
        assert 'mt_requests_total{route="other",status="408"} 1.0' in scraped
        with socket.create_connection(address, timeout=10) as pieces:  # in time: served
            pieces.sendall(b"GET /languages HTTP/1.1\r\n")
            pieces.sendall(b"host: x\r\n\r\n")
            _, head, body = read_answer(pieces)
            assert head.startswith(b"HTTP/1.1 200") and json.loads(body)


def head_fields(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}


def send_refused(sock: socket.socket, status: int, origin: bytes) -> None:
    """A request from `origin` that the protocol refuses with `status` before the application."""
    if status == 400:
        sock.sendall(b"POST /translate HTTP/1.1\r\nhost: x\r\norigin: %s\r\n" % origin)
        sock.sendall(b"content-length: -5\r\n\r\n")
    elif status == 431:
        send_header_of(sock, 8 * 1024 * 1024, b"origin: %s\r\n" % origin)
    else:  # 408: a head that never ends (the parser gives a header once the next one begins)
        sock.sendall(b"GET /languages HTTP/1.1\r\nhost: x\r\norigin: %s\r\naccept: *" % origin)


@pytest.mark.parametrize("cors_origins", ["https://a.example", "*"])
def test_a_refusal_before_the_application_carries_its_cors_headers_and_is_timed(
    weights_dir, monkeypatch, cors_origins
):
    """A page on another origin could not read why its request was refused (400, 431, 408
    written by the protocol had no Access-Control-Allow-Origin), and those answers were counted
    in mt_requests_total but not in mt_request_latency_seconds."""
    import app.protocol

    monkeypatch.setattr(app.protocol, "HEAD_TIMEOUT_S", 0.5)
    with serve_in_thread(weights_dir, cors_origins=cors_origins) as (url, _):
        address = ("127.0.0.1", int(url.rsplit(":", 1)[1]))
        for status in (400, 431, 408):
            for origin, allowed in (("https://a.example", True), ("https://b.example", False)):
                with socket.create_connection(address, timeout=30) as sock:
                    send_refused(sock, status, origin.encode())
                    _, head, body = read_answer(sock)
                assert head.startswith(b"HTTP/1.1 %d" % status), head
                assert json.loads(body)["error"]
                fields = head_fields(head)
                # as the application answers a request from that origin (here a 404)
                same = httpx.get(f"{url}/nope", headers={"Origin": origin}).headers
                for name in ("access-control-allow-origin", "access-control-expose-headers"):
                    assert fields.get(name) == same.get(name), (status, origin, name)
                if cors_origins == "*" or allowed:
                    assert fields["access-control-allow-origin"] in (origin, "*")
                else:
                    assert "access-control-allow-origin" not in fields
        scraped = httpx.get(f"{url}/metrics").text
    for status in (400, 431, 408):
        assert f'mt_requests_total{{route="other",status="{status}"}} 2.0' in scraped
    # each answer timed too (with the 404s above, also under "other")
    counted = sum(
        float(line.rsplit(" ", 1)[1])
        for line in scraped.splitlines()
        if line.startswith('mt_requests_total{route="other",')
    )
    assert counted == 12
    assert (
        f'mt_request_latency_seconds_count{{outcome="refused",route="other"}} {counted}' in scraped
    )
