"""Helpers shared by the benchmarks: sentence sets, peak-memory sampling, tables."""

from __future__ import annotations

import gc
import os
import platform
import random
import socket
import statistics
import threading
import time
from pathlib import Path

DEFAULT_SRC = (
    Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "tatoeba" / "dev.en"
)


def read_sentences(path: Path, n: int) -> list[str]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines[:n]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """This process's peak resident memory since it started (or since its exec: unlike
    getrusage's ru_maxrss, which Linux carries over from the parent across exec, so that a
    worker started by a large parent would report at least the parent's size)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakRSS:
    """Samples this process's resident memory every few ms while active; `.peak` in bytes."""

    def __init__(self, interval: float = 0.005):
        self.interval, self.peak, self._stop = interval, 0, threading.Event()

    def __enter__(self) -> PeakRSS:
        self.peak = rss_bytes()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(self.interval)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}, Python {platform.python_version()}"
    import torch  # here, not at the top: the load generators' imports stay light

    text += f", torch {torch.__version__}"
    if torch.cuda.is_available():
        text += f", GPU {torch.cuda.get_device_name(0)}"
    return text


def sync(device) -> None:
    """Wait for a GPU's queued work, so that a host clock times it (no-op on the CPU)."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def table(headers: list[str], rows: list[list[object]]) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def add_malloc_option(parser) -> None:
    parser.add_argument(
        "--malloc",
        choices=("tuned", "default"),
        default="tuned",
        help="tuned: model_core.allocator.keep_freed_memory() in every measuring process, as "
        "the service does at start-up (default); default: glibc as it comes",
    )


def apply_malloc(choice: str) -> None:
    if choice == "tuned":
        from model_core.allocator import keep_freed_memory

        keep_freed_memory()


def freeze_gc() -> None:
    """What the service does once its models are loaded (app/engine.py): move every object
    alive now out of the garbage collector's full passes. Each measuring process calls it
    after its warm-up, for every system alike."""
    gc.collect()
    gc.freeze()


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections (Linux's default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _all_free(ports: range) -> bool:
    sockets = []
    try:
        for port in ports:
            s = socket.socket()
            sockets.append(s)
            s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for s in sockets:
            s.close()


def free_port(count: int = 1) -> int:
    """A loopback port p, free with the `count` - 1 after it, below the kernel's range for
    outgoing connections: a port the kernel gives (a bind to port 0) is in that range, where an
    outgoing connection (one that polls the port itself while nothing listens on it yet) could
    take it before the server binds it ("cannot listen on 127.0.0.1:45346: Address already in
    use")."""
    low = _ephemeral_low()
    for _ in range(1000 if low - count > 1100 else 0):
        port = random.randrange(max(1024, low - 16384), low - count)
        if _all_free(range(port, port + count)):
            return port
    for _ in range(1000):  # (no room below that range on this machine: a port the kernel gives)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if _all_free(range(port, port + count)):
            return port
    raise RuntimeError("no free loopback port")
