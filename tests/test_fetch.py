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

from model_core.translator import Translator
from tests.marian_helpers import make_marian_dir

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
SHA = "0123456789abcdef0123456789abcdef01234567"


def hub_server(repo: str, files: dict[str, bytes], requested: list[str]) -> ThreadingHTTPServer:
    class Hub(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _file(self) -> bytes | None:
            prefix = f"/{repo}/resolve/"
            if not self.path.startswith(prefix):
                return None
            name = self.path[len(prefix) :].split("/", 1)[1].split("?")[0]
            return files.get(name)

        def _headers(self, body: bytes, content_type: str = "application/octet-stream"):
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Repo-Commit", SHA)
            self.send_header("ETag", '"' + hashlib.sha256(body).hexdigest() + '"')
            self.end_headers()

        def do_HEAD(self):
            body = self._file()
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self._headers(body)

        def do_GET(self):
            if self.path.startswith(f"/api/models/{repo}/tree/"):  # the file listing
                tree = [
                    {"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                    for f, b in files.items()
                ]
                body = json.dumps(tree).encode()
                self.send_response(200)
                self._headers(body, "application/json")
                self.wfile.write(body)
                return
            if self.path.startswith(f"/api/models/{repo}"):  # model info
                body = json.dumps(
                    {"id": repo, "sha": SHA, "siblings": [{"rfilename": f} for f in files]}
                ).encode()
                self.send_response(200)
                self._headers(body, "application/json")
                self.wfile.write(body)
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


def mt_fetch(tmp_path: Path, endpoint: str, weights: Path) -> subprocess.CompletedProcess:
    """The mt-fetch command in a fresh process (huggingface_hub reads HF_ENDPOINT on import)."""
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf-home")}
    env.pop("HF_HUB_OFFLINE", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "model_core.fetch",
            "Helsinki-NLP/opus-mt-en-de",
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


def test_fetch_reports_errors(tmp_path):
    done = mt_fetch(tmp_path, "http://127.0.0.1:9", tmp_path / "weights")  # nothing listens
    assert done.returncode == 2
    assert done.stderr.startswith("mt-fetch: error:") and "Traceback" not in done.stderr
