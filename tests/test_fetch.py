"""mt-fetch against a local HTTP server that answers like the Hugging Face Hub (HF_ENDPOINT):
huggingface_hub's real download path, then the fetched directory loads and translates."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from model_core.fetch import default_weights_dir
from model_core.translator import Translator
from tests.marian_helpers import make_marian_dir

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
SHA = "0123456789abcdef0123456789abcdef01234567"


def hub_server(
    repo: str,
    files: dict[str, bytes],
    requested: list[str],
    failing: frozenset[str] = frozenset(),
    **more: dict[str, bytes],
) -> ThreadingHTTPServer:
    """A Hub serving `repo` with `files`, and more repositories as `more` (the name after
    Helsinki-NLP/ -> files); a download of a file named in `failing` gets a 403 (a 500,
    huggingface_hub retries for about 20 s before it gives up)."""
    repos = {repo: files, **{f"Helsinki-NLP/{name}": f for name, f in more.items()}}

    class Hub(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _repo(self, prefix: str) -> tuple[str, dict[str, bytes]]:
            for name, repo_files in repos.items():
                if self.path.startswith(prefix.format(name)):
                    return name, repo_files
            return "", {}

        def _file(self) -> bytes | None:
            repo, files = self._repo("/{}/resolve/")
            prefix = f"/{repo}/resolve/"
            if not repo:
                return None
            name = self.path[len(prefix) :].split("/", 1)[1].split("?")[0]
            return files.get(name)

        def _headers(self, body: bytes, content_type: str = "application/octet-stream"):
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Repo-Commit", SHA)
            self.send_header("ETag", '"' + hashlib.sha256(body).hexdigest() + '"')
            self.end_headers()

        def _failing(self) -> bool:
            if self.path.split("?")[0].rsplit("/", 1)[1] in failing:
                self.send_error(403)
                return True
            return False

        def do_HEAD(self):
            if self._failing():
                return
            body = self._file()
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self._headers(body)

        def do_GET(self):
            repo, files = self._repo("/api/models/{}")
            if repo and self.path.startswith(f"/api/models/{repo}/tree/"):  # the file listing
                tree = [
                    {"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                    for f, b in files.items()
                ]
                body = json.dumps(tree).encode()
                self.send_response(200)
                self._headers(body, "application/json")
                self.wfile.write(body)
                return
            if repo:  # model info
                body = json.dumps(
                    {"id": repo, "sha": SHA, "siblings": [{"rfilename": f} for f in files]}
                ).encode()
                self.send_response(200)
                self._headers(body, "application/json")
                self.wfile.write(body)
                return
            if self._failing():
                return
            body = self._file()
            if body is None:
                self.send_error(404)
                return
            requested.append(self.path.rsplit("/", 1)[1])
            self.send_response(200)
            self._headers(body)
            self.wfile.write(body)

    return ThreadingHTTPServer(("127.0.0.1", 0), Hub)


def mt_fetch(
    tmp_path: Path, endpoint: str, weights: Path, *models: str
) -> subprocess.CompletedProcess:
    """The mt-fetch command in a fresh process (huggingface_hub reads HF_ENDPOINT on import)."""
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf-home")}
    env.pop("HF_HUB_OFFLINE", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "model_core.fetch",
            *(models or ["Helsinki-NLP/opus-mt-en-de"]),
            "--weights-dir",
            str(weights),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_fetch_from_a_local_hub(tmp_path, monkeypatch):
    source = make_marian_dir(tmp_path / "src" / "opus-mt-en-de", seed=5)
    files = {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()}
    files["pytorch_model.bin"] = b"not wanted: model.safetensors is there"
    files["tf_model.h5"] = b"not wanted either"
    requested: list[str] = []
    server = hub_server("Helsinki-NLP/opus-mt-en-de", files, requested)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    weights = tmp_path / "weights"
    try:
        done = mt_fetch(tmp_path, f"http://127.0.0.1:{server.server_address[1]}", weights)
        assert done.returncode == 0, done.stderr
    finally:
        server.shutdown()
    out = weights / "opus-mt-en-de"
    assert "model.safetensors" in requested
    assert "pytorch_model.bin" not in requested and "tf_model.h5" not in requested
    for name in ("config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json"):
        assert (out / name).read_bytes() == files[name]
    t = Translator.load(out, device="cpu")
    assert (t.source_language, t.target_language) == ("en", "de")
    assert t.translate_batch(["Cat dog."], beam_size=2, max_length=5)[0].output_tokens <= 5


def marian_files(tmp_path: Path, seed: int = 5) -> dict[str, bytes]:
    source = make_marian_dir(tmp_path / f"src-{seed}" / "opus-mt-en-de", seed=seed)
    return {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()}


def fetch_from(tmp_path: Path, files: dict[str, bytes], failing=frozenset()):
    server = hub_server("Helsinki-NLP/opus-mt-en-de", files, [], failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        return mt_fetch(tmp_path, f"http://127.0.0.1:{server.server_address[1]}", tmp_path / "w")
    finally:
        server.shutdown()


def current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def test_a_failed_or_refused_fetch_leaves_no_folder_and_keeps_the_one_before(tmp_path):
    """A download that fails half-way, or a repository that is no Marian model, leaves
    nothing in the weights folder (the service would refuse to start on a partial model);
    a model fetched before stays as it was, and a successful fetch replaces it whole."""
    weights, files = tmp_path / "w", marian_files(tmp_path)
    failed = fetch_from(tmp_path, files, failing=frozenset({"vocab.json"}))
    assert failed.returncode == 1  # (2 is for a mistake on the command line)
    assert failed.stderr.strip().splitlines()[-1].startswith("mt-fetch: error:")
    assert list(weights.iterdir()) == []  # nothing, hidden or not
    bert = {**files, "config.json": json.dumps({"model_type": "bert"}).encode()}
    refused = fetch_from(tmp_path, bert)
    assert refused.returncode == 1 and "is a bert model, not a Marian one" in refused.stderr
    assert list(weights.iterdir()) == []
    assert fetch_from(tmp_path, files).returncode == 0
    # the folder has the usual mode (not a temporary folder's 0700): readable by other users
    assert (weights / "opus-mt-en-de").stat().st_mode & 0o777 == 0o777 & ~current_umask()
    first = (weights / "opus-mt-en-de" / "model.safetensors").read_bytes()
    assert fetch_from(tmp_path, files, failing=frozenset({"source.spm"})).returncode == 1
    assert [p.name for p in weights.iterdir()] == ["opus-mt-en-de"]
    assert (weights / "opus-mt-en-de" / "model.safetensors").read_bytes() == first
    other = marian_files(tmp_path, seed=6)
    assert fetch_from(tmp_path, other).returncode == 0
    assert [p.name for p in weights.iterdir()] == ["opus-mt-en-de"]
    assert (weights / "opus-mt-en-de" / "model.safetensors").read_bytes() == other[
        "model.safetensors"
    ]


def test_fetch_reports_errors(tmp_path):
    done = mt_fetch(tmp_path, "http://127.0.0.1:9", tmp_path / "weights")  # nothing listens
    assert done.returncode == 1  # (2 is for a mistake on the command line)
    assert done.stderr.startswith("mt-fetch: error:") and "Traceback" not in done.stderr
    # each model is tried, and those not fetched are named (the first failure skipped the rest)
    two = mt_fetch(tmp_path, "http://127.0.0.1:9", tmp_path / "weights", "a/opus-mt-en-de", "b/x")
    assert two.returncode == 1
    lines = two.stderr.strip().splitlines()
    assert [line.split(":")[1] for line in lines[:2]] == [" error", " error"], two.stderr
    assert lines[-1] == "mt-fetch: 2 of 2 models not fetched: a/opus-mt-en-de, b/x"


def test_readme_recipe_fetch_two_models_into_their_own_directory_then_serve(tmp_path):
    """README's two commands: mt-fetch both OPUS-MT models into a directory of their own,
    serve that directory: both pairs come from the fetched models (the shipped demo models
    in weights/ are not in it, so nothing shadows them)."""
    import httpx

    from tests.service_helpers import serve_in_thread

    en_de = make_marian_dir(tmp_path / "src" / "opus-mt-en-de", seed=5)
    de_en = make_marian_dir(tmp_path / "src" / "opus-mt-de-en", seed=6, languages=("de", "en"))
    requested: list[str] = []
    files = {
        d.name: {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()} for d in (en_de, de_en)
    }
    server = hub_server(
        "Helsinki-NLP/opus-mt-en-de",
        files["opus-mt-en-de"],
        requested,
        **{"opus-mt-de-en": files["opus-mt-de-en"]},
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    opus = tmp_path / "opus-mt"
    try:
        done = mt_fetch(
            tmp_path,
            f"http://127.0.0.1:{server.server_address[1]}",
            opus,
            "Helsinki-NLP/opus-mt-en-de",
            "Helsinki-NLP/opus-mt-de-en",
        )
        assert done.returncode == 0, done.stderr
    finally:
        server.shutdown()
    assert sorted(p.name for p in opus.iterdir()) == ["opus-mt-de-en", "opus-mt-en-de"]
    with serve_in_thread(opus, device="cpu", preload="none") as (url, _app):
        langs = {x["code"]: x["targets"] for x in httpx.get(f"{url}/languages").json()}
        assert langs == {"de": ["en"], "en": ["de"]}
        for source, target in (("en", "de"), ("de", "en")):
            r = httpx.post(
                f"{url}/translate",
                json={"q": "Cat dog.", "source": source, "target": target, "max_length": 5},
                timeout=60,
            )
            assert r.status_code == 200, r.text
            assert r.json()["model"] == f"opus-mt-{source}-{target}"


def test_two_directories_for_one_pair_mt_models_order_decides(tmp_path):
    """The shipped weights/en-de next to a fetched opus-mt-en-de: the first named in MT_MODELS
    serves en->de; MT_MODELS unset, the first in sorted order (en-de)."""
    import shutil

    from app.registry import Registry, discover

    weights = tmp_path / "weights"
    shutil.copytree(ROOT / "weights" / "en-de", weights / "en-de")
    make_marian_dir(weights / "opus-mt-en-de", seed=5)

    def serving(models: str | None) -> list[str] | None:
        return Registry(discover(weights, models), load=lambda path: None).route("en", "de")

    assert serving("opus-mt-en-de,en-de") == ["opus-mt-en-de"]
    assert serving("en-de,opus-mt-en-de") == ["en-de"]
    assert serving("opus-mt-en-de") == ["opus-mt-en-de"]
    assert serving(None) == ["en-de"]


@pytest.mark.parametrize(
    "value, expected", [(None, "weights"), ("", "weights"), ("  ", "weights"), ("models", "models")]
)
def test_mt_fetch_writes_where_the_service_reads(monkeypatch, value, expected):
    """A blank MT_WEIGHTS_DIR means weights/ for mt-fetch as for the service (it was the
    current folder: `MT_WEIGHTS_DIR= mt-fetch ...` wrote the model into ./)."""
    if value is None:
        monkeypatch.delenv("MT_WEIGHTS_DIR", raising=False)
    else:
        monkeypatch.setenv("MT_WEIGHTS_DIR", value)
    assert default_weights_dir() == Path(expected)
