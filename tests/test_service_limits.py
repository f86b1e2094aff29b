"""Clients that go away, trickle their body in or come in crowds, and a batcher whose scheduler
or worker thread has died: against a real uvicorn server, with raw sockets where an HTTP client
library would not behave badly enough (h11 writes and reads the HTTP/1.1 messages)."""

from __future__ import annotations

import contextlib
import json
import select
import shutil
import socket
import time
from urllib.parse import urlsplit

import h11
import httpx
import pytest

from tests.service_helpers import serve_in_thread

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
TRANSLATE = {"q": "The cat.", "source": "en", "target": "de", "beam_size": 1}


@pytest.fixture(scope="module")
def weights_dir(random_checkpoint, tmp_path_factory):
    d = tmp_path_factory.mktemp("limits-weights")
    shutil.copytree(random_checkpoint, d / "en-de")
    return d


def metric(url: str, name: str, labels: str = "") -> float:
    """One series of a metric as exported (0 when it is not there yet)."""
    head = f"{name}{{{labels}}}" if labels else name
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        if line.rsplit(" ", 1)[0] == head:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def counted(url: str, status: int) -> float:
    return metric(url, "mt_requests_total", f'route="/translate",status="{status}"')


def wait_until(condition, what: str, timeout: float = 60.0) -> None:
    """Until condition() holds; the timeout only bounds a test that fails."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.02)


class RawClient:
    """One HTTP/1.1 connection on a plain socket: headers and body sent when the test says."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=60)
        self.conn = h11.Connection(h11.CLIENT)

    def start(self, content_type: str, length: int, first: bytes = b"") -> None:
        """Request headers announcing `length` bytes of body, then the first of them."""
        headers = [("Host", "127.0.0.1"), ("Content-Type", content_type)]
        headers.append(("Content-Length", str(length)))
        self.sock.sendall(
            self.conn.send(h11.Request(method="POST", target="/translate", headers=headers))
        )
        if first:
            self.send(first)

    def send(self, data: bytes) -> None:
        self.sock.sendall(self.conn.send(h11.Data(data=data)))

    def answered(self, wait: float) -> bool:
        """Whether the server has written something (or closed) within `wait` seconds."""
        return bool(select.select([self.sock], [], [], wait)[0])

    def response(self) -> tuple[int, dict[str, str], bytes]:
        status, headers, body = 0, {}, b""
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(self.sock.recv(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
                headers = {k.decode().lower(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                return status, headers, body

    def closed_by_server(self) -> bool:
        with contextlib.suppress(OSError):
            return self.sock.recv(1) == b""
        return True

    def close(self) -> None:
        self.sock.close()


def test_a_client_gone_before_its_body_arrived_is_counted_499_not_500(weights_dir, caplog):
    with serve_in_thread(weights_dir) as (url, _), caplog.at_level("INFO", logger="app"):
        for content_type in (JSON, FORM):
            before = {s: counted(url, s) for s in (499, 500)}
            client = RawClient(url)
            client.start(content_type, 100, b'{"q": "The')  # 100 bytes announced, 10 sent
            client.close()
            wait_until(lambda b=before: counted(url, 499) == b[499] + 1, "the request is counted")
            assert counted(url, 500) == before[500]
            assert metric(url, "mt_cancelled_requests_total") == counted(url, 499)
        # a line each (no answer went out: the access log has none)
        gone = [m for m in caplog.messages if '"POST /translate" 499' in m]
        assert len(gone) == 2 and all(
            m.endswith(": the client closed the connection before its answer") for m in gone
        ), caplog.messages
        assert httpx.post(f"{url}/translate", json=TRANSLATE, timeout=60).status_code == 200


@pytest.mark.parametrize("content_type", [JSON, FORM])
def test_a_body_that_trickles_in_gets_408_and_the_connection_closes(weights_dir, content_type):
    with serve_in_thread(weights_dir, body_timeout_s=0.5) as (url, _):
        client = RawClient(url)
        client.start(content_type, 100_000, b"q=")
        deadline = time.monotonic() + 60  # bounds a failing test only
        while not client.answered(0.02):  # one byte at a time, never idle for long
            assert time.monotonic() < deadline, "no answer to a body that never completes"
            client.send(b"a")
        status, headers, body = client.response()
        assert status == 408 and headers["content-type"] == JSON
        assert "did not arrive within 0.5 s" in json.loads(body)["error"]
        assert headers["connection"] == "close" and client.closed_by_server()
        client.close()
        assert counted(url, 408) == 1
        # a body sent at once is not affected
        assert httpx.post(f"{url}/translate", json=TRANSLATE, timeout=60).status_code == 200


def test_beyond_max_concurrency_requests_get_503_with_retry_after(weights_dir):
    with serve_in_thread(weights_dir, max_concurrency=2, retry_after_s=3) as (url, _):
        holders = [RawClient(url) for _ in range(2)]
        for h in holders:  # two requests in progress, waiting for the rest of their bodies
            h.start(JSON, 100, b'{"q": "The')
        wait_until(lambda: metric(url, "mt_in_flight_requests") == 2, "both are in progress")

        r = httpx.post(f"{url}/translate", json=TRANSLATE, timeout=60)
        assert r.status_code == 503 and r.headers["Retry-After"] == "3"
        assert "limit of 2 requests" in r.json()["error"]
        assert r.headers["connection"] == "close"
        assert httpx.get(f"{url}/languages", timeout=60).status_code == 503
        # probes and scrapes are never refused: a busy server is alive and ready
        assert httpx.get(f"{url}/health", timeout=60).status_code == 200
        assert httpx.get(f"{url}/health/live", timeout=60).status_code == 200
        assert metric(url, "mt_rejected_requests_total", 'reason="concurrency"') == 2
        # counted under their routes, though refused before FastAPI routed them
        for route in ("/translate", "/languages"):
            labels = f'route="{route}",status="503"'
            assert metric(url, "mt_requests_total", labels) == 1, route

        for h in holders:
            h.close()
        wait_until(lambda: metric(url, "mt_in_flight_requests") == 0, "the holders are gone")
        assert httpx.post(f"{url}/translate", json=TRANSLATE, timeout=60).status_code == 200
        assert counted(url, 503) == 1 and counted(url, 499) == 2


def check_not_ready(url: str, reason: str) -> None:
    for path in ("/health", "/health/ready"):
        r = httpx.get(f"{url}{path}", timeout=60)
        assert r.status_code == 503 and r.json() == {"status": "failed", "error": reason}
    # not alive either: a restart brings such a process back (it answered 200 for ever)
    live = httpx.get(f"{url}/health/live", timeout=60)
    assert live.status_code == 503 and live.json() == {"status": "failed", "error": reason}
    assert metric(url, "mt_ready") == 0
    r = httpx.post(f"{url}/translate", json=TRANSLATE, timeout=60)  # not left to time out
    assert r.status_code == 503 and reason in r.json()["error"] and "Retry-After" in r.headers
    r = httpx.post(f"{url}/translate", data=TRANSLATE, timeout=60)
    assert r.status_code == 503 and reason in r.json()["error"]


def test_health_fails_when_the_batch_scheduler_has_died(weights_dir):
    with serve_in_thread(weights_dir) as (url, app):
        assert metric(url, "mt_ready") == 1
        task = app.state.batcher._task
        task.get_loop().call_soon_threadsafe(task.cancel)
        wait_until(task.done, "the scheduler task has ended")
        check_not_ready(url, "the batch scheduler stopped")


def test_health_fails_when_the_worker_thread_has_died(weights_dir):
    with serve_in_thread(weights_dir) as (url, app):
        worker = app.state.batcher._worker
        worker.stop()
        worker.thread.join(60)
        assert not worker.thread.is_alive()
        check_not_ready(url, "the inference worker thread stopped")


def test_a_busy_continuous_decode_is_not_taken_for_a_hung_thread():
    """The continuous scheduler's loop of decoder steps is one job of the inference thread
    for as long as work keeps coming: after MT_STALL_TIMEOUT_S of steady load a healthy server
    said "stalled" (and /health/live had it restarted). Each pass of the loop is progress."""
    import threading
    from pathlib import Path

    weights = Path(__file__).resolve().parent.parent / "weights"
    settings = dict(scheduler="continuous", stall_timeout_s=1, models="en-de", warmup=False)
    with serve_in_thread(weights, **settings) as (url, app):
        done = threading.Event()
        answered = []

        def client() -> None:
            with httpx.Client(timeout=60) as http:
                while not done.is_set():
                    body = {**TRANSLATE, "q": "The weather was cold, so we stayed at home."}
                    answered.append(http.post(f"{url}/translate", json=body).status_code)

        clients = [threading.Thread(target=client) for _ in range(4)]
        for c in clients:
            c.start()
        try:
            lives = []
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                lives.append(httpx.get(f"{url}/health/live", timeout=60).status_code)
                time.sleep(0.1)
        finally:
            done.set()
            for c in clients:
                c.join(60)
        assert set(answered) == {200} and len(answered) > 10
        assert set(lives) == {200}, lives


def test_health_fails_while_the_inference_thread_seems_hung(weights_dir):
    """A job of the inference thread that never ended left /health, /health/ready and
    /health/live at 200 while every request timed out: past MT_STALL_TIMEOUT_S each is 503
    ("stalled"), mt_worker_busy_seconds says how long it has run, and all is well again once
    the job ends."""
    import threading

    with serve_in_thread(weights_dir, stall_timeout_s=1, request_timeout_s=2) as (url, app):
        release = threading.Event()
        app.state.worker.put(release.wait, 60)  # a batch that does not end
        try:
            time.sleep(1.5)
            for path in ("/health", "/health/ready", "/health/live"):
                r = httpx.get(f"{url}{path}", timeout=60)
                assert r.status_code == 503, (path, r.text)
                assert r.json()["status"] == "stalled"
                assert "past MT_STALL_TIMEOUT_S (1 s)" in r.json()["error"]
            assert metric(url, "mt_worker_busy_seconds") > 1
            assert metric(url, "mt_ready") == 0
            r = httpx.post(f"{url}/translate", json=TRANSLATE, timeout=60)
            assert r.status_code == 504  # (queued behind the job, past its deadline)
        finally:
            release.set()
        wait_until(lambda: metric(url, "mt_worker_busy_seconds") == 0, "the job's end")
        for path in ("/health", "/health/live"):
            assert httpx.get(f"{url}{path}", timeout=60).status_code == 200
        assert httpx.post(f"{url}/translate", json=TRANSLATE, timeout=60).status_code == 200
