"""Real uvicorn servers on loopback ports for the service tests: one in a thread of the test
process (so a test can wrap the engine function), one as a subprocess (signals, exit codes)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from app.main import create_app, server_config
from app.settings import Settings
from bench.common import free_port as common_free_port

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A free loopback port, below the range the kernel takes outgoing connections' ports
    from (bench/common.py)."""
    return common_free_port()


def wait_ready(url: str, timeout: float = 60.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not become ready")


@contextlib.contextmanager
def serve_in_thread(weights_dir: Path, configure=None, **overrides):
    """Yields (base url, app) of a real uvicorn server running in a background thread;
    `configure(app)` runs before it starts."""
    port = free_port()
    settings = Settings(weights_dir=weights_dir, port=port, **overrides)
    app = create_app(settings)
    if configure is not None:
        configure(app)
    server = uvicorn.Server(server_config(app, settings, host="127.0.0.1", log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url)
        yield url, app
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextlib.contextmanager
def serve_in_process(weights_dir: Path, log_path: Path, **env_overrides):
    """Yields (base url, Popen) of `python -m app.main` with MT_* settings from the keywords."""
    port = free_port()
    env = {
        **os.environ,
        "MT_WEIGHTS_DIR": str(weights_dir),
        "MT_PORT": str(port),
        "MT_HOST": "127.0.0.1",
    }
    env.update({f"MT_{k.upper()}": str(v) for k, v in env_overrides.items()})
    log = open(log_path, "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.main"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        log.close()
