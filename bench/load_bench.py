"""Load benchmark of the HTTP service on 127.0.0.1: sentences/s and p50/p95/p99 latency at
several concurrencies, with batching on (the default max_batch_size) and off (max_batch_size=1),
same model and sentences, in one run: two servers side by side, the levels alternating between
them, with the mean batch size and the engine's busy time that each server's metrics recorded
at each level, and where the CPU time went per request: the server's event loop (its main
thread: HTTP, JSON, tokenization), its other threads (the worker thread and the threads it
computes on; nothing else runs there under this load) and the load generator itself, which
shares the machine. Also the engine's own rates alone, in this process while the servers
idle (in batches: `--engine-repeats` passes after an untimed one, as many between levels and
after the last; each level's rate with batching on is compared with the median of the passes
on either side of it, since the machine's speed drifts), and what HTTP + the batcher add to
each request's engine time at concurrency 1, in three parts by the timings each answer
carries (outside the translate handler, the handler, the batcher around the engine). At
concurrency 1 it also sends `--no-engine-requests` whose text is already in the target
language (answered as it is: the request path without the batcher and the engine), back to
back and then each after a pause as long as a translation's engine time. The load generator
is a minimal HTTP/1.1 client: on asyncio streams for concurrent levels, on a blocking socket at
concurrency 1.

    python -m bench.load_bench --weights weights --concurrency 1,4,16,64,256

Traffic goes only to the servers this command starts on loopback ports; every level is bounded
in requests and seconds. It measures; it asserts nothing about speed.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.load_bench"))

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import torch

from model_core.translator import Translator

from . import launch
from .common import (
    DEFAULT_SRC,
    add_malloc_option,
    apply_malloc,
    freeze_gc,
    machine,
    median,
    read_sentences,
    table,
)

ROOT = Path(__file__).resolve().parent.parent


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def request_bytes(host: str, path: str, payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def parse_head(headers: bytes) -> tuple[int, int]:
    """(status, content length) of a response head."""
    status, length = int(headers.split(b" ", 2)[1]), 0
    for line in headers.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return status, length


class Connection:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams. The load generator shares the
    machine with the server, so it spends as little CPU per request as it can (a full client
    library cost several milliseconds per request here, which the latencies then included)."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post_json(self, path: str, payload: dict) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        try:
            self.writer.write(request_bytes(self.host, path, payload))
            headers = await self.reader.readuntil(b"\r\n\r\n")
            status, length = parse_head(headers)
            data = await self.reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            await self.close()
            raise
        if b"connection: close" in headers.lower():
            await self.close()
        return status, data

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None


class BlockingConnection:
    """The same client on a blocking socket, for one request at a time: no event loop between
    the response arriving and its latency being taken, so that at concurrency 1 the latency is
    as close to the server's own as a client on this machine can measure."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.sock: socket.socket | None = None
        self.buffer = b""

    def post_json(self, path: str, payload: dict) -> tuple[int, bytes]:
        if self.sock is None:
            self.sock = socket.create_connection((self.host, self.port))
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.buffer = b""
        try:
            self.sock.sendall(request_bytes(self.host, path, payload))
            while (end := self.buffer.find(b"\r\n\r\n")) < 0:
                self.receive()
            status, length = parse_head(self.buffer[:end])
            while len(self.buffer) < end + 4 + length:
                self.receive()
        except OSError:
            self.close()
            raise
        headers, data = self.buffer[:end], self.buffer[end + 4 : end + 4 + length]
        self.buffer = self.buffer[end + 4 + length :]
        if b"connection: close" in headers.lower():
            self.close()
        return status, data

    def receive(self) -> None:
        assert self.sock is not None
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class Tally:
    """What one level's requests came to."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.computes: list[float] = []  # the server's engine time for them (worker-timed)
        # the server's own timings (seconds): from the request reaching the translate handler
        # to its answer built, and the part of that spent in the batcher (from the text's
        # split into sentences to the translations back)
        self.handled: list[float] = []
        self.batched: list[float] = []
        self.failures: dict[str, int] = {}
        self.start = time.perf_counter()

    def fail(self, kind: str) -> None:  # counted, with its kind; never fatal to the run
        self.failures[kind] = self.failures.get(kind, 0) + 1

    def answered(self, status: int, data: bytes, latency: float) -> None:
        if status == 200:
            timings = json.loads(data)["timings"]
            self.latencies.append(latency)
            self.computes.append(timings["compute_ms"] / 1e3)
            self.handled.append(timings["total_ms"] / 1e3)
            self.batched.append(timings["queue_and_compute_ms"] / 1e3)
        else:
            self.fail(str(status))


def payload(sentences: list[str], i: int, beam: int, source: str = "en") -> dict:
    """An en->de request; with source "de" the text comes back as it is, without the engine."""
    return {"q": sentences[i % len(sentences)], "source": source, "target": "de", "beam_size": beam}


async def level(
    host: str,
    port: int,
    sentences: list[str],
    concurrency: int,
    max_requests: int,
    max_seconds: float,
    beam: int,
) -> dict:
    tally = Tally()
    counter = iter(range(max_requests))

    async def worker() -> None:
        conn = Connection(host, port)
        for i in counter:
            if time.perf_counter() - tally.start > max_seconds:
                break
            body = payload(sentences, i, beam)
            t0 = time.perf_counter()
            try:
                status, data = await conn.post_json("/translate", body)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                tally.fail(type(exc).__name__)
                continue
            tally.answered(status, data, time.perf_counter() - t0)
        await conn.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return summary(tally)


def sequential(
    host: str,
    port: int,
    sentences: list[str],
    max_requests: int,
    max_seconds: float,
    beam: int,
    source: str = "en",
    pause: float = 0.0,
) -> dict:
    """Concurrency 1 on a blocking socket (BlockingConnection); `pause` seconds (untimed)
    before each request."""
    tally = Tally()
    conn = BlockingConnection(host, port)
    for i in range(max_requests):
        if time.perf_counter() - tally.start > max_seconds:
            break
        if pause:
            time.sleep(pause)
        body = payload(sentences, i, beam, source)
        t0 = time.perf_counter()
        try:
            status, data = conn.post_json("/translate", body)
        except (OSError, ValueError) as exc:
            tally.fail(type(exc).__name__)
            continue
        tally.answered(status, data, time.perf_counter() - t0)
    conn.close()
    return summary(tally)


def median_gap(longer: list[float], shorter: list[float]) -> float:
    """The median of the per-request differences, in ms (the lists in seconds)."""
    return percentile([a - b for a, b in zip(longer, shorter, strict=True)], 0.5) * 1e3


def summary(tally: Tally) -> dict:
    wall = time.perf_counter() - tally.start
    latencies, computes, failures = tally.latencies, tally.computes, tally.failures
    return {
        "requests": len(latencies),
        "errors": sum(failures.values()),
        "failures": failures,
        "sent_s": len(latencies) / wall,
        "wall": wall,
        "p50": percentile(latencies, 0.5) * 1e3,
        "p95": percentile(latencies, 0.95) * 1e3,
        "p99": percentile(latencies, 0.99) * 1e3,
        "compute_p50": percentile(computes, 0.5) * 1e3,
        # per request: what HTTP + the batcher added to that request's own engine time
        "added_p50": median_gap(latencies, computes),
        "added_ratio_p50": percentile(
            [a / b - 1 for a, b in zip(latencies, computes, strict=True) if b], 0.5
        ),
        # the added time in three parts: outside the handler (HTTP both ways, the ASGI
        # layers, the answer's JSON, the client); the handler outside the batcher (reading
        # and checking the request, building the answer); the batcher around the engine
        # (splitting, tokenizing, the scheduler, the hand-offs to the worker thread and back)
        "outside_p50": median_gap(latencies, tally.handled),
        "handler_p50": median_gap(tally.handled, tally.batched),
        "batcher_p50": median_gap(tally.batched, computes),
    }


def run(coroutine):
    """The load generator's own event loop: uvloop (installed with uvicorn[standard]) where
    available, since its CPU time per request is taken from the server on the same machine."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def server_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds so far of process `pid`: (its main thread, all its other threads, those
    that ended included), from /proc (Linux); NaN where that cannot be read."""
    tick = os.sysconf("SC_CLK_TCK")

    def seconds(stat: str) -> float:
        fields = stat.rsplit(")", 1)[1].split()  # from the state on: utime, stime at 11, 12
        return (int(fields[11]) + int(fields[12])) / tick

    try:
        main = seconds(Path(f"/proc/{pid}/task/{pid}/stat").read_text())
        total = seconds(Path(f"/proc/{pid}/stat").read_text())
    except OSError:
        return float("nan"), float("nan")
    return main, total - main  # a tick of the main thread between the reads counts here


def batch_totals(url: str) -> tuple[float, float, float]:
    """From the server's metrics so far: sentences batched, batches, and seconds the engine
    spent computing them."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = dict(
        re.findall(r"^mt_batch_(size_sum|size_count|compute_seconds_sum) ([0-9.e+]+)$", text, re.M)
    )
    sentences, batches, seconds = (
        float(found.get(k, 0.0)) for k in ("size_sum", "size_count", "compute_seconds_sum")
    )
    return sentences, batches, seconds


def start_server(
    weights: Path, port: int, batch: int, threads: int, malloc: str, **settings: str
) -> subprocess.Popen:
    """A server on 127.0.0.1:port; `settings` (MT_... variables) override the caller's."""
    env = {
        "MT_THREADS": str(threads),
        "MT_TUNE_MALLOC": str(malloc == "tuned").lower(),
        **os.environ,
        **settings,
        "MT_WEIGHTS_DIR": str(weights),
        "MT_PORT": str(port),
        "MT_HOST": "127.0.0.1",
        "MT_MAX_BATCH_SIZE": str(batch),
        "MT_LOG_LEVEL": "warning",
        "MT_MAX_QUEUE_SIZE": "4096",
    }
    return launch.start([sys.executable, "-m", "app.main"], cwd=ROOT, env=env)


def wait_ready(url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(url)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weights", type=Path, default=Path("weights"))
    p.add_argument("--model", default="en-de", help="model directory used for the engine baseline")
    p.add_argument("--src", type=Path, default=DEFAULT_SRC)
    p.add_argument("--sentences", type=int, default=512)
    p.add_argument("--concurrency", default="1,4,16,64,256")
    p.add_argument("--max-requests", type=int, default=768, help="per level")
    p.add_argument("--max-seconds", type=float, default=40.0, help="per level")
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64, help="max_batch_size with batching on")
    p.add_argument(
        "--port", type=int, default=8765, help="batching on; batching off uses the next port"
    )
    p.add_argument(
        "--threads", type=int, default=0, help="MT_THREADS for the server and the engine baseline"
    )
    p.add_argument("--warm-requests", type=int, default=16, help="untimed, per server")
    p.add_argument("--warm-concurrency", type=int, default=4)
    p.add_argument(
        "--warm-engine",
        action="store_true",
        help="an untimed pass of one sentence at a time before the engine baseline too",
    )
    p.add_argument(
        "--engine-repeats",
        type=int,
        default=3,
        help="timed passes of the engine in batches before the first level (after an untimed "
        "one), between levels and after the last",
    )
    p.add_argument(
        "--no-engine-requests",
        type=int,
        default=300,
        help="with concurrency 1: also this many requests one at a time whose text is already "
        "in the target language (answered as it is: the whole request path but the batcher "
        "and the engine), to the server with batching on after the levels",
    )
    p.add_argument("--device", default="auto", help="MT_DEVICE for the servers and the baseline")
    p.add_argument("--dtype", default="auto", help="MT_DTYPE for the servers and the baseline")
    add_malloc_option(p)
    args = p.parse_args(argv)
    if args.no_engine_requests < 0:
        p.error("--no-engine-requests: give 0 (none) or more")
    apply_malloc(args.malloc)  # the engine baseline below, like the servers
    sentences = read_sentences(args.src, args.sentences)
    levels = [int(c) for c in args.concurrency.split(",")]

    if args.threads:
        torch.set_num_threads(args.threads)
    tr = Translator.load(args.weights / args.model, device=args.device, dtype=args.dtype)
    tr.translate_batch(sentences[:4], beam_size=args.beam_size)
    if args.warm_engine:  # an untimed pass of the one-at-a-time measurement below: on a GPU
        # a decode path's first call pays one-time costs (docs/BENCHMARKS.md section 7)
        for s in sentences[: args.max_requests]:
            tr.translate_batch([s], beam_size=args.beam_size)

    def batched_pass(tr: Translator) -> tuple[float, float]:
        """The engine's own rate on the same sentences in batches of max_batch_size, as they
        arrive (unsorted across batches): sentences/s and CPU ms per sentence."""
        t0, cpu0 = time.perf_counter(), time.process_time()
        for start in range(0, len(sentences), args.batch_size):
            chunk = sentences[start : start + args.batch_size]
            tr.translate_batch(chunk, beam_size=args.beam_size)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        return len(sentences) / seconds, cpu * 1e3 / len(sentences)

    # untimed: a first pass can run slower on a CPU too (caches, the allocator's first
    # requests), which would lower the ceiling the service is compared with
    batched_pass(tr)
    freeze_gc()
    engine_lat = []
    # the sentences a level at one client sends (it goes round them), unless time runs out first
    for s in sentences[: args.max_requests]:
        t0 = time.perf_counter()
        tr.translate_batch([s], beam_size=args.beam_size)
        engine_lat.append(time.perf_counter() - t0)
    engine_p50 = median(engine_lat) * 1e3
    # the engine's own rates on the same sentences: one at a time (above), and in
    # batches (the median of the timed passes): the most batching on / off could reach
    # without HTTP and the batcher
    engine_one_rate = len(engine_lat) / sum(engine_lat)
    repeats = max(args.engine_repeats, 1)
    groups = [[batched_pass(tr) for _ in range(repeats)]]  # before, between and after levels

    # Both servers run side by side and the levels alternate between them (on, off, on, ...),
    # so that each on / off pair is measured within seconds of each other: this machine's
    # speed drifts over minutes. The idle server only waits; its threads sleep.
    modes = {"on": (args.batch_size, args.port), "off": (1, args.port + 1)}
    servers = {
        mode: start_server(
            args.weights,
            port,
            batch,
            args.threads,
            args.malloc,
            MT_DEVICE=args.device,
            MT_DTYPE=args.dtype,
        )  # fmt: skip
        for mode, (batch, port) in modes.items()
    }
    results = {}
    bare: list[dict] = []  # at one client: requests answered without the engine
    pause = 0.0
    host = "127.0.0.1"
    try:
        for _, port in modes.values():
            wait_ready(f"http://{host}:{port}")
            warm = (args.warm_requests, 60.0, args.beam_size)  # untimed
            run(level(host, port, sentences, args.warm_concurrency, *warm))
        for i, c in enumerate(levels):
            if i:  # (the first level follows the passes above); the servers idle meanwhile
                groups.append([batched_pass(tr) for _ in range(repeats)])
            for mode, (_, port) in modes.items():
                url = f"http://{host}:{port}"
                before = batch_totals(url)
                cpu_before = (*server_cpu(servers[mode].pid), time.process_time())
                budget = (max(args.max_requests, c), args.max_seconds, args.beam_size)
                if c == 1:
                    r = sequential(host, port, sentences, *budget)
                else:
                    r = run(level(host, port, sentences, c, *budget))
                cpu_after = (*server_cpu(servers[mode].pid), time.process_time())
                after = batch_totals(url)
                per_request = 1e3 / max(r["requests"] + r["errors"], 1)
                # the kernel counts in ticks (10 ms): the two reads of server_cpu may split one
                # between its columns differently before and after, so a column can come out
                # a tick short, never less than 0
                r["cpu_loop"], r["cpu_engine"], r["cpu_client"] = (
                    max(b - a, 0.0) * per_request
                    for a, b in zip(cpu_before, cpu_after, strict=True)
                )
                batches = after[1] - before[1]
                r["mean_batch"] = (after[0] - before[0]) / batches if batches else float("nan")
                # the share of the level's time the engine was computing (idle otherwise)
                r["busy"] = 100 * (after[2] - before[2]) / r["wall"]
                results[(mode, c)] = r
                print(
                    f"batching {mode}, concurrency {c}: {r['sent_s']:.1f} sentences/s"
                    + (f", failures {r['failures']}" if r["failures"] else ""),
                    file=sys.stderr,
                )
        if ("on", 1) in results and args.no_engine_requests:
            # back to back, then each after a pause as long as a translation's engine time
            # (the event loop and the client idle that long before a translated answer)
            pause = results[("on", 1)]["compute_p50"] / 1e3
            bare = [
                sequential(
                    host,
                    modes["on"][1],
                    sentences,
                    args.no_engine_requests,
                    args.max_seconds,
                    args.beam_size,
                    source="de",
                    pause=wait,
                )
                for wait in (0.0, pause)
            ]
        groups.append([batched_pass(tr) for _ in range(repeats)])
    finally:
        launch.stop(servers.values())

    # the ceiling: the median of every timed pass; each level's share against the median of
    # the passes on either side of it, where the machine's speed was nearest that level's
    def middle(runs: list[tuple[float, float]]) -> tuple[float, float]:  # (the upper one)
        return sorted(runs)[len(runs) // 2]

    passes = [p for group in groups for p in group]
    engine_batched_rate, engine_batched_cpu = middle(passes)
    beside = {c: (middle(groups[i])[0], middle(groups[i + 1])[0]) for i, c in enumerate(levels)}
    rows = [
        [
            f"{mode} (max_batch_size={modes[mode][0]})",
            c,
            r["requests"],
            r["errors"],
            r["sent_s"],
            r["mean_batch"],
            r["busy"],
            r["p50"],
            r["p95"],
            r["p99"],
            r["cpu_loop"],
            r["cpu_engine"],
            r["cpu_client"],
        ]
        for mode in modes
        for c in levels
        for r in [results[(mode, c)]]
    ]
    print(
        f"\nmachine: {machine()}; beam {args.beam_size}; {len(sentences)} distinct sentences; "
        f"at most {args.max_requests} requests or {args.max_seconds:.0f} s per level\n"
    )
    print(
        table(
            [
                "batching",
                "concurrency",
                "requests",
                "errors",
                "sentences/s",
                "mean batch",
                "engine busy %",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "CPU ms/req: event loop",
                "other threads",
                "load generator",
            ],
            rows,
        )
    )
    print(
        f"\nengine alone, one sentence at a time: p50 {engine_p50:.1f} ms, "
        f"{engine_one_rate:.1f} sentences/s; in batches of {args.batch_size} in arrival order: "
        f"{engine_batched_rate:.1f} sentences/s ({engine_batched_rate / engine_one_rate:.2f}x), "
        f"{engine_batched_cpu:.2f} CPU ms per sentence (median of {len(passes)} passes, "
        f"{repeats} before the first level, between levels and after the last: "
        + " | ".join(", ".join(f"{rate:.1f}" for rate, _ in group) for group in groups)
        + ")"
    )
    for c in levels:
        if ("on", c) in results and c > 1:
            rate, (before, after) = results[("on", c)]["sent_s"], beside[c]
            print(
                f"batching on, concurrency {c}: {rate / before:.0%} / {rate / after:.0%} of the "
                f"engine alone in batches just before / after the level ({before:.1f} / "
                f"{after:.1f} sentences/s)"
            )
    if ("on", 1) in results:
        on1 = results[("on", 1)]
        print(
            f"HTTP + batcher overhead at concurrency 1, against the server's own engine time "
            f"for the same request (timed on the worker thread): median {on1['added_p50']:.2f} ms"
            f", {on1['added_ratio_p50'] * 100:+.1f}% (median of per-request ratios); p50 latency "
            f"against p50 engine time ({on1['compute_p50']:.1f} ms): "
            f"{(on1['p50'] / on1['compute_p50'] - 1) * 100:+.1f}%; against the engine alone "
            f"in this process (p50 {engine_p50:.1f} ms): {(on1['p50'] / engine_p50 - 1) * 100:+.1f}%"
        )
        print(
            f"the overhead at concurrency 1 in parts (medians, ms): outside the translate handler "
            f"(HTTP both ways, the ASGI layers, the answer's JSON, the client) "
            f"{on1['outside_p50']:.3f}; the handler outside the batcher (reading and checking the "
            f"request, building the answer) {on1['handler_p50']:.3f}; the batcher around the "
            f"engine (splitting, tokenizing, scheduling, the hand-offs to the worker thread and "
            f"back) {on1['batcher_p50']:.3f}"
        )
        whens = ("back to back", f"each after a pause of {pause * 1e3:.1f} ms")
        for r, when in zip(bare, whens, strict=False):  # (none without --no-engine-requests)
            print(
                f"the same requests with a text already in the target language (answered as it "
                f"is, without the batcher and the engine), {r['requests']} one at a time, "
                f"{when}: p50 {r['p50']:.3f} ms; outside the translate handler "
                f"{r['outside_p50']:.3f}, the handler {r['handler_p50']:.3f}"
                + (f"; failures: {r['failures']}" if r["failures"] else "")
            )
    for c in levels:
        if ("on", c) in results and ("off", c) in results:
            print(
                f"concurrency {c}: batching on / off = "
                f"{results[('on', c)]['sent_s'] / results[('off', c)]['sent_s']:.2f}x sentences/s"
            )
    return 0
