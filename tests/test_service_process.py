"""The `mt-serve` process: start-up failures and graceful shutdown on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from app.command import setting_for
from tests.service_helpers import ROOT, free_port, serve_in_process, wait_ready


@pytest.fixture
def weights_dir(random_checkpoint, tmp_path):
    d = tmp_path / "weights"
    d.mkdir()
    shutil.copytree(random_checkpoint, d / "en-de")
    return d


def test_bad_checkpoint_stops_startup_with_one_clear_line(weights_dir, tmp_path):
    meta = json.loads((weights_dir / "en-de" / "config.json").read_text())
    meta["model"]["d_ff"] = 48
    (weights_dir / "en-de" / "config.json").write_text(json.dumps(meta))
    log = tmp_path / "server.log"
    with serve_in_process(weights_dir, log) as (_, proc):
        assert proc.wait(timeout=60) == 1
    lines = [line for line in log.read_text().splitlines() if "startup failed" in line]
    assert len(lines) == 1
    assert str(weights_dir / "en-de") in lines[0] and "has shape" in lines[0]
    assert "Traceback" not in log.read_text()


def test_bad_checkpoint_can_be_skipped_with_a_warning(weights_dir, tmp_path):
    broken = weights_dir / "de-en"
    broken.mkdir()
    (broken / "config.json").write_text("{")
    log = tmp_path / "server.log"
    with serve_in_process(weights_dir, log, skip_bad_checkpoints="true") as (url, proc):
        wait_ready(url, process=proc)
        assert httpx.get(f"{url}/health").json()["models"] == ["en-de"]
    assert "skipping bad checkpoint" in log.read_text()


def test_empty_weights_directory_is_an_error(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    log = tmp_path / "server.log"
    with serve_in_process(empty, log) as (_, proc):
        assert proc.wait(timeout=60) == 1
    assert "no loadable checkpoint" in log.read_text()


@pytest.mark.parametrize("access_log", ["true", "false"])
def test_access_log_can_be_turned_off(weights_dir, tmp_path, access_log):
    log = tmp_path / "server.log"
    with serve_in_process(weights_dir, log, access_log=access_log) as (url, proc):
        wait_ready(url, process=proc)
        body = {"q": "The cat.", "source": "en", "target": "de"}
        assert httpx.post(f"{url}/translate", json=body, timeout=60).status_code == 200
        assert httpx.get(f"{url}/metrics", timeout=60).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    text = log.read_text()
    assert "ready:" in text  # the service's own info lines stay
    assert ('"POST /translate HTTP/1.1" 200' in text) == (access_log == "true")
    # a successful probe or scrape is no line at info level (a healthcheck every 10 s and a
    # scrape every 5 s made 26,000 lines a day)
    assert '"GET /health HTTP/1.1" 200' not in text and '"GET /metrics HTTP/1.1"' not in text


def test_sigterm_answers_every_accepted_request(weights_dir, tmp_path):
    log = tmp_path / "server.log"
    # The shutdown timeout is far beyond what the work needs on any machine, however loaded:
    # the verdict is "every accepted request answered", not how fast the drain was.
    settings = {
        "max_batch_size": 1,
        "max_wait_ms": 0,
        "shutdown_timeout_s": 600,
        "request_timeout_s": 600,
    }
    with serve_in_process(weights_dir, log, **settings) as (url, proc):
        wait_ready(url, process=proc)
        # 16 sentences each, one per batch: most of the 16 are in flight when SIGTERM comes
        text = " ".join(
            f"A big red car is very fast today {i}. The dog is slow {i}." for i in range(8)
        )

        async def load():
            async with httpx.AsyncClient(timeout=900, limits=httpx.Limits(max_connections=64)) as c:
                tasks = [
                    asyncio.ensure_future(
                        c.post(
                            f"{url}/translate",
                            json={
                                "q": text,
                                "source": "en",
                                "target": "de",
                                "beam_size": 4,
                            },
                        )
                    )
                    for _ in range(16)
                ]
                await until_accepted(c, url, 16)
                proc.send_signal(signal.SIGTERM)
                # until the server has acted on the signal: /health stops answering 200
                late: int | str = 200
                deadline = time.monotonic() + 120  # bounds a failing test only
                while late == 200 and time.monotonic() < deadline:
                    try:
                        late = (await c.get(f"{url}/health")).status_code
                    except httpx.HTTPError:
                        late = "refused"
                    await asyncio.sleep(0.02)
                return await asyncio.gather(*tasks), late

        results, late = asyncio.run(load())
        assert [r.status_code for r in results] == [200] * 16
        assert all(r.json()["translatedText"] for r in results)
        assert late in (503, "refused")
        assert proc.wait(timeout=60) == 0


def accepted(metrics: str) -> int:
    """POST /translate requests the server has taken: in flight, or answered."""
    found = re.search(r"^mt_in_flight_requests (\S+)$", metrics, re.M)
    taken = int(float(found.group(1))) if found else 0
    for m in re.finditer(
        r'^mt_requests_total\{route="/translate",status="\d+"\} (\S+)$', metrics, re.M
    ):
        taken += int(float(m.group(1)))
    return taken


async def until_accepted(c: httpx.AsyncClient, url: str, count: int) -> None:
    """Waits until the server has taken `count` requests (answering the first of them before
    the last arrives does not make it wait for ever, as waiting for all in flight did)."""
    deadline = time.monotonic() + 120
    while accepted((await c.get(f"{url}/metrics")).text) < count:
        assert time.monotonic() < deadline, "the server never took all the requests"
        await asyncio.sleep(0.02)


def signalled_under_load(
    url: str, proc, count: int, *signals, sentences: int = 64
) -> list[httpx.Response]:
    """`count` requests of `sentences` sentences (an even number) at beam 4, all taken by the
    server, then `signals` to the server, 0.3 s apart; their answers. At 64 sentences each,
    one per batch, the requests take seconds on the fastest CPU: the signals come while
    most are in flight."""
    # different sentences (one repeated in a request is decoded once), without numbers (one
    # of two digits would be decoded twice: MT_KEEP_NUMBERS)
    tags = [chr(97 + i % 26) + chr(97 + i // 26) for i in range(sentences // 2)]
    text = " ".join(f"A big red car is very fast today {t}. The dog is slow {t}." for t in tags)

    async def load():
        async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=64)) as c:
            body = {"q": text, "source": "en", "target": "de", "beam_size": 4}
            tasks = [
                asyncio.ensure_future(c.post(f"{url}/translate", json=body)) for _ in range(count)
            ]
            await until_accepted(c, url, count)
            for i, sig in enumerate(signals):
                if i:
                    await asyncio.sleep(0.3)
                proc.send_signal(sig)
            return await asyncio.gather(*tasks)

    return asyncio.run(load())


def test_past_the_shutdown_timeout_the_rest_get_503_and_the_process_exits(weights_dir, tmp_path):
    """SIGTERM with more accepted work than the shutdown timeout allows: what finishes in time
    is answered, every other request gets a JSON 503 with Retry-After (never a plain 500 or
    a dropped connection), and the process exits with status 0 without finishing the rest."""
    log = tmp_path / "server.log"
    settings = {"max_batch_size": 1, "max_wait_ms": 0, "shutdown_timeout_s": 1}
    with serve_in_process(weights_dir, log, **settings) as (url, proc):
        wait_ready(url, process=proc)
        # 32 requests of 64 sentences at beam 4, one sentence per batch: several seconds of
        # work on the fastest CPU (8 sentences each could all finish within the second)
        results = signalled_under_load(url, proc, 32, signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    refused = [r for r in results if r.status_code == 503]
    assert all(r.status_code in (200, 503) for r in results)
    assert refused, "the whole backlog finished within the 1 s timeout; make it larger"
    for r in refused:
        assert "shut down before this request was translated" in r.json()["error"]
        assert r.headers["retry-after"]
    text = log.read_text()
    assert "Traceback" not in text
    assert "sentence(s) were not translated (their requests got 503)" in text


@pytest.mark.parametrize("scheduler", ["static", "continuous"])
def test_a_second_ctrl_c_quits_at_once_and_cleanly(weights_dir, tmp_path, scheduler):
    """The first SIGINT drains as SIGTERM does; a second one (uvicorn's forced quit) stops
    waiting for the accepted requests: those not translated get a JSON 503, the process exits
    with status 0 and says so in one line, without a traceback."""
    log = tmp_path / "server.log"
    settings = {"max_batch_size": 1, "max_wait_ms": 0, "scheduler": scheduler}
    with serve_in_process(weights_dir, log, **settings) as (url, proc):
        wait_ready(url, process=proc)
        results = signalled_under_load(url, proc, 16, signal.SIGINT, signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    assert all(r.status_code in (200, 503) for r in results)
    assert any(r.status_code == 503 for r in results)
    text = log.read_text()
    assert "Traceback" not in text and "ERROR" not in text, text
    assert "forced quit: " in text and "stopped" in text


def test_a_port_in_use_is_one_line_before_anything_starts(weights_dir, tmp_path):
    """A port already taken was reported by uvicorn only after the models began loading, its
    error between start-up lines and followed by "shutting down while loading the models"."""
    log = tmp_path / "server.log"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with serve_in_process(weights_dir, log, port=port) as (_, proc):
            assert proc.wait(timeout=60) == 2
    text = log.read_text()
    assert len(text.strip().splitlines()) == 1, text
    assert f"mt-serve: cannot listen on 127.0.0.1:{port}" in text and "MT_PORT" in text, text


def test_mt_serve_help_lists_the_settings_and_arguments_are_refused(tmp_path):
    """`mt-serve --help` prints the settings and exits, and an argument names the variable
    that does what it asked (both started the server, the arguments ignored)."""
    port = free_port()
    env = {**os.environ, "MT_PORT": str(port), "MT_WEIGHTS_DIR": str(tmp_path)}
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "app.main", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    shown = run("--help")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: mt-serve")
    assert "MT_PORT\n      TCP port [8000]" in shown.stdout
    assert "MT_WEIGHTS_DIR" in shown.stdout and "MT_API_KEYS_DB" in shown.stdout
    assert "Uvicorn running" not in shown.stderr and "loading the models" not in shown.stderr
    for args, hint in (
        (["--port", "9000"], "e.g. MT_PORT=9000 mt-serve"),
        (["--weights-dir=models"], "e.g. MT_WEIGHTS_DIR=models mt-serve"),
        (["serve"], "the settings are environment variables"),
    ):
        refused = run(*args)
        assert refused.returncode == 2, (args, refused.stderr)
        last = refused.stderr.splitlines()[-1]
        assert last.startswith("mt-serve: error: no arguments but --help") and hint in last
        assert "Uvicorn running" not in refused.stderr


def test_a_weights_folder_missing_or_of_one_model_is_one_line_before_anything_starts(
    weights_dir, tmp_path
):
    """mt-serve started outside the repository (weights/ not there), or MT_WEIGHTS_DIR set to
    one model's folder: one line saying what to set, status 2, before the server starts (the
    error came after uvicorn's start-up lines, the folder not named as the setting)."""

    def run(cwd, **env) -> subprocess.CompletedProcess:
        environ = {k: v for k, v in os.environ.items() if k != "MT_WEIGHTS_DIR"}
        return subprocess.run(
            [sys.executable, "-m", "app.main"],
            cwd=cwd,
            env={**environ, "PYTHONPATH": str(ROOT), "MT_PORT": str(free_port()), **env},
            capture_output=True,
            text=True,
            timeout=120,
        )

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside = run(elsewhere)
    assert outside.returncode == 2, outside.stderr
    assert outside.stderr == (
        f"mt-serve: MT_WEIGHTS_DIR weights: no such folder (in {elsewhere}); set MT_WEIGHTS_DIR "
        "to the folder that holds the model folders, or start mt-serve where it is\n"
    )
    one = run(tmp_path, MT_WEIGHTS_DIR=str(weights_dir / "en-de"))
    assert one.returncode == 2, one.stderr
    assert one.stderr == (
        f"mt-serve: MT_WEIGHTS_DIR {weights_dir / 'en-de'} is one model's folder: set "
        f"MT_WEIGHTS_DIR={weights_dir} (MT_MODELS=en-de serves that model alone)\n"
    )


@pytest.mark.parametrize(
    "name, value",
    [
        ("max_batch_size", "lots"),
        ("log_level", "bogus"),
        ("model_memory_budget_mb", "inf"),  # not "no limit": that is 0
        ("max_wait_ms", "nan"),
        ("threads", "100000"),  # (it used to start that many and die of the process limit)
        ("default_beam_size", "1000000"),  # (it used to fail allocating in the warm-up)
        ("files_dir", "FILE"),  # a file where the folder should be
        ("device", "gpu"),  # (it stopped the server with status 1 once its port was up)
        ("max_alternatives", "30"),  # a beam of 31, past MT_MAX_BEAM_SIZE (8)
        ("default_beam_size", "12"),  # past MT_MAX_BEAM_SIZE (8)
    ],
)
def test_invalid_setting_is_reported_without_a_traceback(weights_dir, tmp_path, name, value):
    log = tmp_path / "server.log"
    if value == "FILE":
        value = tmp_path / "a-file"
        value.write_text("")
    with serve_in_process(weights_dir, log, **{name: value}) as (_, proc):
        assert proc.wait(timeout=60) == 2
    text = log.read_text()
    assert "mt-serve: " in text and f"MT_{name.upper()}" in text and "Traceback" not in text
    assert len(text.strip().splitlines()) == 1, text


def test_the_preload_keywords_and_the_device_take_any_letter_case():
    from app.settings import Settings

    assert Settings(preload="ALL").preload == "all" and Settings(preload=" None").preload == "none"
    assert Settings(preload="en-de,de-en").preload == "en-de,de-en"  # models as named
    assert Settings(device="CUDA:1").device == "cuda:1" and Settings(device="Auto").device == "auto"


def test_the_log_level_takes_any_letter_case_and_misspelt_settings_are_named(weights_dir, tmp_path):
    log = tmp_path / "server.log"
    with serve_in_process(
        weights_dir, log, log_level="WARNING", sheduler="continuous", colour="blue"
    ) as (url, proc):
        wait_ready(url, process=proc)
        proc.terminate()
        assert proc.wait(timeout=60) == 0
    text = log.read_text()
    assert "ready:" not in text  # an info line: not at warning
    assert "MT_SHEDULER is not a setting: ignored (did you mean MT_SCHEDULER?)" in text
    assert "MT_COLOUR is not a setting: ignored\n" in text


def test_int8_on_a_non_float32_model_stops_startup_with_one_clear_line(weights_dir, tmp_path):
    log = tmp_path / "server.log"
    with serve_in_process(weights_dir, log, quantize="int8", dtype="bfloat16") as (_, proc):
        assert proc.wait(timeout=60) == 1
    lines = [line for line in log.read_text().splitlines() if "startup failed" in line]
    assert len(lines) == 1 and "MT_QUANTIZE=int8" in lines[0] and "float32" in lines[0]
    assert "Traceback" not in log.read_text()


def test_a_device_this_machine_lacks_stops_startup_with_one_clear_line(weights_dir, tmp_path):
    # (before: the model loader's exception was never looked at, and the server stayed up,
    # never ready, with nothing in its log)
    log = tmp_path / "server.log"
    with serve_in_process(weights_dir, log, device="cuda:99") as (_, proc):
        assert proc.wait(timeout=60) == 1
    lines = [line for line in log.read_text().splitlines() if "startup failed" in line]
    assert len(lines) == 1 and "MT_DEVICE=cuda:99" in lines[0]
    assert "Traceback" not in log.read_text()


def main_with(weights_dir, patch: str) -> subprocess.CompletedProcess:
    """`mt-serve` run to its end in a process whose app.main (`m`) `patch` changed first."""
    code = f"import sys, app.main as m\n{patch}\nsys.exit(m.main())\n"
    env = {**os.environ, "MT_WEIGHTS_DIR": str(weights_dir), "MT_PORT": str(free_port())}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_an_unforeseen_error_while_loading_stops_startup_with_its_traceback(weights_dir, tmp_path):
    # a failure no check foresaw (here injected into start_engine) still ends the process with
    # status 1 and says why, instead of leaving a server that never becomes ready
    done = main_with(
        weights_dir,
        "def start_engine(settings, metrics=None, stop=None):\n"
        "    raise OSError('the disk went away')\n"
        "m.start_engine = start_engine",
    )
    assert done.returncode == 1
    assert "startup failed: OSError while loading the models: the disk went away" in done.stderr
    assert "Traceback" in done.stderr


def test_a_language_detection_that_fails_to_build_stops_startup(weights_dir):
    # the models loaded and the batcher started, then the language detection raised: the
    # process ends with status 1 and says why, as for a model (it stayed up, never ready)
    done = main_with(
        weights_dir,
        "def detector(*args):\n    raise OSError('the detection tables went away')\n"
        "m.Detector = detector",
    )
    assert done.returncode == 1
    assert (
        "startup failed: OSError while building the language detection: the detection tables "
        "went away" in done.stderr
    )
    assert "Traceback" in done.stderr and "ready:" not in done.stderr


def test_sigterm_while_loading_loads_no_further_model(weights_dir, tmp_path):
    """A replica stopped while it starts (a rolling update, a port already in use) exits once
    the model being loaded is done, instead of loading and warming up every other model past
    its shutdown timeout. Each load is slowed down here (3 s) to make the start-up long."""
    for name in ("en-de-2", "en-de-3"):
        shutil.copytree(weights_dir / "en-de", weights_dir / name)
    code = (
        "import sys, time, app.engine as e, app.main as m\n"
        "load = e.load_translator\n"
        "def slow(*args, **kwargs):\n"
        "    print('loading a model', flush=True)\n"
        "    time.sleep(3)\n"
        "    return load(*args, **kwargs)\n"
        "e.load_translator = slow\n"
        "sys.exit(m.main())\n"
    )
    env = {
        **os.environ,
        "MT_WEIGHTS_DIR": str(weights_dir),
        "MT_PORT": str(free_port()),
        "MT_SHUTDOWN_TIMEOUT_S": "30",
    }
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + 60
            while "loading a model" not in log.read_text():
                assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
                time.sleep(0.05)
            url = f"http://127.0.0.1:{env['MT_PORT']}"
            wait_for_port(url)
            early = httpx.post(
                f"{url}/translate", json={"q": "Hi.", "source": "en", "target": "de"}
            )
            assert early.status_code == 503 and "still loading" in early.json()["error"]
            # no empty language list while loading (a client would take it as nothing served)
            for path in ("/health", "/health/ready"):  # a probe is told when to look again
                early = httpx.get(f"{url}{path}")
                assert early.status_code == 503 and early.json() == {"status": "loading"}
                assert early.headers["retry-after"] == "2", early.headers
            for path in ("/languages", "/frontend/settings", "/models"):
                early = httpx.get(f"{url}{path}")
                assert early.status_code == 503 and early.headers["retry-after"], early.text
                assert "still loading" in early.json()["error"]
            metrics = httpx.get(f"{url}/metrics").text
            assert 'mt_rejected_requests_total{reason="loading"} 4.0' in metrics
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        finally:
            proc.kill()
    text = log.read_text()
    assert "no model is loaded after this one" in text
    assert text.count("loading a model") == 1, text  # 3 models to load: the others were not
    assert "Traceback" not in text


def wait_for_port(url: str, timeout: float = 30.0) -> None:
    """Until the server answers at all (503 while it loads)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(f"{url}/health/live", timeout=2)
            return
        except httpx.HTTPError:
            assert time.monotonic() < deadline, f"{url} does not answer"
            time.sleep(0.05)


def test_an_unexpected_error_is_one_500_with_one_traceback_in_the_log(weights_dir, tmp_path):
    """A server-side failure after start-up (here the translated files' folder replaced by a
    file under the server) answers a JSON 500 naming an error id, which the log line with the traceback
    names too; the traceback is logged once (Starlette re-raises it after the answer, and
    uvicorn would log it again)."""
    files = tmp_path / "files"
    log = tmp_path / "server.log"
    with serve_in_process(weights_dir, log, files_dir=files) as (url, proc):
        wait_ready(url, process=proc)
        shutil.rmtree(files)
        files.write_text("")  # a file where the folder was
        r = httpx.post(
            f"{url}/translate_file",
            files={"file": ("a.txt", b"The cat.")},
            data={"source": "en", "target": "de"},
            timeout=60,
        )
        assert r.status_code == 500, r.text
        error_id = r.json()["error"].split("error id ")[1].rstrip(")")
        assert httpx.get(f"{url}/health").status_code == 200
        proc.terminate()
        assert proc.wait(timeout=60) == 0
    text = log.read_text()
    assert f"unexpected error, error id {error_id}" in text
    assert text.count("Traceback") == 1, text


def test_past_the_shutdown_timeout_a_file_in_translation_gets_503(weights_dir, tmp_path):
    """A file still being translated when the shutdown timeout passes gets the JSON 503 with
    Retry-After a /translate request gets (it was a plain-text 500 with a traceback)."""
    log = tmp_path / "server.log"
    settings = {"max_batch_size": 1, "max_wait_ms": 0, "shutdown_timeout_s": 1}
    data = "".join(
        f"A big red car is very fast today {i}. The dog is slow {i}.\n" for i in range(600)
    )
    data = data.encode()
    with serve_in_process(weights_dir, log, **settings) as (url, proc):
        wait_ready(url, process=proc)

        async def load():
            async with httpx.AsyncClient(timeout=120) as c:
                upload = asyncio.ensure_future(
                    c.post(
                        f"{url}/translate_file",
                        files={"file": ("long.txt", data)},
                        data={"source": "en", "target": "de"},
                    )
                )
                deadline = time.monotonic() + 120
                while not re.search(
                    r"^mt_queue_depth [1-9]", (await c.get(f"{url}/metrics")).text, re.M
                ):
                    assert time.monotonic() < deadline, "the file's sentences never queued"
                    await asyncio.sleep(0.02)
                proc.send_signal(signal.SIGTERM)
                return await upload

        r = asyncio.run(load())
        assert proc.wait(timeout=60) == 0
    assert r.status_code == 503, r.text
    assert "shut down before this file was translated" in r.json()["error"]
    assert r.headers["retry-after"]
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize(
    "argument, following, meant",
    [
        ("--port", "9000", "MT_PORT=9000"),
        ("--weights", "models", "MT_WEIGHTS_DIR=models"),  # the one setting it starts
        ("--thread", "2", "MT_THREADS=2"),  # close to one
        ("--prot=9000", None, "MT_PORT=9000"),
        ("--max", "3", None),  # starts several
        ("--colour", None, None),
    ],
)
def test_an_argument_close_to_a_setting_is_told_that_setting(argument, following, meant):
    """`mt-serve --weights models` was told "e.g. MT_PORT=9000 mt-serve", a setting it did not
    mean, where MT_WEIGHTS_DIR is the one it starts."""
    assert setting_for(argument, following) == meant


def test_health_while_draining_says_when_to_look_again_and_a_failed_start_does_not():
    """A draining replica will be gone, a loading one ready: both 503 with Retry-After; a
    failed start never recovers, so no Retry-After there."""
    from types import SimpleNamespace

    from app.routes import health_answer

    settings = SimpleNamespace(retry_after_s=7)
    draining = SimpleNamespace(draining=True, startup_error=None, ready=True, settings=settings)
    answer = health_answer(draining)
    assert answer.status_code == 503 and answer.headers["retry-after"] == "7"
    assert json.loads(answer.body) == {"status": "draining"}
    failed = SimpleNamespace(draining=False, startup_error="bad", ready=False, settings=settings)
    answer = health_answer(failed)
    assert answer.status_code == 503 and "retry-after" not in answer.headers
