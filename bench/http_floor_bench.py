"""The HTTP floor: what one request costs through uvicorn on this machine when the application
does nothing, with the same HTTP protocol class as the service (app/protocol.py), the same
client as bench.load_bench at concurrency 1 (a blocking socket) and the same request bodies.
The application reads the body, parses its JSON and answers a fixed JSON body of a translation's
size. Set beside bench.load_bench's overhead at one client (what the service adds to a
request's engine time), it says how much of that overhead HTTP itself accounts for.

    python -m bench.http_floor_bench --requests 2000

Traffic goes only to the server this command starts on a loopback port. It measures; it asserts
nothing about speed.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.http_floor_bench"))

import argparse
import json
import sys
import time
from pathlib import Path

import uvicorn

from app.protocol import HTTP_PROTOCOL

from .common import DEFAULT_SRC, machine, median, read_sentences
from .launch import start, stop
from .load_bench import BlockingConnection, payload, percentile, wait_ready

ROOT = Path(__file__).resolve().parent.parent
ANSWER = json.dumps(
    {"translatedText": "Der Hund bellt laut im Garten hinter dem Haus.", "timings": {}}
).encode()


async def bare_app(scope, receive, send) -> None:
    """Reads the body, parses it, answers ANSWER (GET /health too, for wait_ready)."""
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if body:
        json.loads(body)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(ANSWER))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": ANSWER})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--src", type=Path, default=DEFAULT_SRC)
    p.add_argument("--requests", type=int, default=2000, help="timed, after --warm untimed")
    p.add_argument("--warm", type=int, default=200)
    p.add_argument("--beam-size", type=int, default=4, help="in the bodies, as load_bench's")
    p.add_argument("--port", type=int, default=8785)
    p.add_argument("--serve", action="store_true", help="(internal) run the bare server")
    args = p.parse_args(argv)
    if args.serve:
        uvicorn.run(
            bare_app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False,
            http=HTTP_PROTOCOL,
        )  # fmt: skip
        return 0
    sentences = read_sentences(args.src, 512)
    server = start(
        [sys.executable, "-m", "bench.http_floor_bench", "--serve", "--port", str(args.port)],
        cwd=ROOT,
    )
    try:
        wait_ready(f"http://127.0.0.1:{args.port}")
        conn = BlockingConnection("127.0.0.1", args.port)
        latencies = []
        for i in range(args.warm + args.requests):
            t0 = time.perf_counter()
            status, _ = conn.post_json("/translate", payload(sentences, i, args.beam_size))
            if status != 200:
                raise RuntimeError(f"the bare server answered {status}")
            if i >= args.warm:
                latencies.append(time.perf_counter() - t0)
        conn.close()
    finally:
        stop([server])
    print(f"machine: {machine()}")
    print(
        f"bare uvicorn round trip, {len(latencies)} requests one at a time: "
        f"p50 {median(latencies) * 1e3:.3f} ms, p90 {percentile(latencies, 0.9) * 1e3:.3f} ms, "
        f"p99 {percentile(latencies, 0.99) * 1e3:.3f} ms"
    )
    return 0
