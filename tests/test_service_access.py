"""API keys (the `mt-keys` command and the 403s), per-key and per-address limits (429 +
Retry-After), CORS and /frontend/settings, against real uvicorn servers on loopback ports
serving a real checkpoint. Every check is made on the plain-ASGI fast path (JSON /translate,
/detect) and on the FastAPI routes (/translate_file) alike."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.keys import KeyStore
from tests.service_helpers import ROOT, serve_in_process, serve_in_thread, wait_ready
from tests.test_service import metric

TEXT = "The cat is big."
FIELDS = {"source": "en", "target": "de"}


@pytest.fixture(scope="module")
def weights(random_checkpoint, tmp_path_factory):
    d = tmp_path_factory.mktemp("weights")
    shutil.copytree(random_checkpoint, d / "en-de")
    return d


def mt_keys(db, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.keys", "--db", str(db), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def translate(url: str, **kwargs) -> httpx.Response:
    if not kwargs:
        kwargs = {"json": {"q": TEXT, "source": "en", "target": "de"}}
    return httpx.post(f"{url}/translate", timeout=60, **kwargs)


def with_key(key: str | None, q: str = TEXT) -> dict:
    body = {"q": q, "source": "en", "target": "de"}
    if key is not None:
        body["api_key"] = key
    return body


def upload(url: str, key: str | None) -> httpx.Response:
    fields = {"source": "en", "target": "de", **({"api_key": key} if key else {})}
    return httpx.post(
        f"{url}/translate_file", files={"file": ("a.txt", b"The dog.")}, data=fields, timeout=60
    )


# --- the keys command ------------------------------------------------------------------------


def test_mt_keys_adds_lists_and_revokes(tmp_path):
    db = tmp_path / "keys.sqlite"
    added = mt_keys(db, "add", "alice", "--req-per-minute", "7")
    assert added.returncode == 0, added.stderr
    key = added.stdout.strip()
    assert key.startswith("mt-") and len(key) > 30
    listed = mt_keys(db, "list")
    assert listed.returncode == 0
    row = [line.split("\t") for line in listed.stdout.splitlines()][1]
    key_id, name, _, status, per_minute = row[:5]
    assert (name, status, per_minute) == ("alice", "active", "7")
    assert key not in listed.stdout
    assert key.encode() not in db.read_bytes()  # only its digest is stored
    assert KeyStore(db).lookup(key).id == key_id
    assert mt_keys(db, "revoke", key_id).returncode == 0
    assert "revoked" in mt_keys(db, "list").stdout
    assert KeyStore(db).lookup(key) is None
    assert mt_keys(db, "revoke", key_id).returncode == 1  # nothing left to revoke
    assert mt_keys(db, "add", "bob", "--chars-per-day", "0").returncode == 2


def test_mt_keys_needs_a_database(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "app.keys", "list"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 2
    assert "MT_API_KEYS_DB" in r.stderr


def test_mt_keys_mistakes_are_one_line_each(tmp_path):
    """An operator's mistake is one `mt-keys:` line and a non-zero status, not a traceback; a
    name that would break `list`'s tab-separated lines is refused."""
    db = tmp_path / "keys.sqlite"
    not_db = tmp_path / "notes.txt"
    not_db.write_text("not a database\n" * 100)
    cases = [
        (db, ["add", "big", "--chars-per-day", "99999999999999999999"], 2, "from 1 to"),
        (db, ["add", "x", "--req-per-minute", "ten"], 2, "not a whole number"),
        (db, ["add", "tab\tname"], 2, "printable"),
        (db, ["add", "line\nbreak"], 2, "printable"),
        (tmp_path / "no" / "such" / "k.sqlite", ["list"], 1, "unable to open database file"),
        (not_db, ["list"], 1, "file is not a database"),
    ]
    for path, args, status, message in cases:
        r = mt_keys(path, *args)
        assert r.returncode == status, (args, r.stderr)
        assert message in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr, (args, r.stderr)
    assert not db.exists()  # nothing was added, and no database made
    # a misspelt path: no database made there, listed as empty or revoked from
    for args in (["list"], ["revoke", "0000zzzz"]):
        r = mt_keys(tmp_path / "kyes.sqlite", *args)
        assert r.returncode == 1 and "no keys database there" in r.stderr, r.stderr
    assert not (tmp_path / "kyes.sqlite").exists()


def test_mt_keys_says_what_is_missing_or_unknown(tmp_path):
    """An empty name or id is asked for, not called unprintable; an unknown id and a key
    revoked already are told apart; an id is taken in any letter case; a second active key
    of one name is added (a key is replaced so) with a note naming the first; a folder, or a
    path in no folder, is named as such."""
    db = tmp_path / "keys.sqlite"
    r = mt_keys(db, "add", "")
    assert r.returncode == 2 and "a name is required" in r.stderr and "printable" not in r.stderr
    assert "a name is required" in mt_keys(db, "add", "  ").stderr
    first = mt_keys(db, "add", "team A")
    first_id = first.stderr.split()[1].rstrip(":")
    second = mt_keys(db, "add", "team A")
    assert second.returncode == 0 and second.stdout.startswith("mt-")
    assert f"1 other active key(s) named 'team A': {first_id}" in second.stderr
    r = mt_keys(db, "revoke", "")
    assert r.returncode == 2 and "an id is required" in r.stderr
    r = mt_keys(db, "revoke", "0000zzzz")
    assert r.returncode == 1
    assert r.stderr == "mt-keys: error: no key with id '0000zzzz': `mt-keys list` shows the ids\n"
    assert mt_keys(db, "revoke", f" {first_id.upper()} ").returncode == 0
    r = mt_keys(db, "revoke", first_id)
    assert r.returncode == 1 and r.stderr == f"mt-keys: error: key {first_id} is revoked already\n"
    r = mt_keys(db, "add", "team B", "--req-per-minute", "0")
    assert r.returncode == 2 and "leave the option out for the server's limit" in r.stderr
    r = mt_keys(tmp_path, "list")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "it is a folder" in r.stderr
    r = mt_keys(tmp_path / "no" / "k.sqlite", "list")
    assert r.returncode == 1 and f"there is no folder {tmp_path / 'no'}" in r.stderr


def test_mt_keys_ctrl_c_is_one_line(tmp_path, monkeypatch, capsys):
    """Ctrl-C (while the database is locked, say): one line and status 130, not a
    KeyboardInterrupt traceback."""
    from app import keys

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(KeyStore, "add", interrupted)
    try:
        code = keys.main(["--db", str(tmp_path / "k.sqlite"), "add", "team A"])
    except KeyboardInterrupt:
        code = "a KeyboardInterrupt traceback"
    assert code == 130
    assert capsys.readouterr().err == (
        "mt-keys: interrupted: `mt-keys list` shows what the database holds\n"
    )


def test_mt_keys_reads_only_its_own_setting(tmp_path):
    """Another setting's mistake is the server's to report; an empty MT_API_KEYS_DB is unset."""
    db = tmp_path / "keys.sqlite"
    KeyStore(db)  # (an empty database; a path with none is refused)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "MT_PORT": "abc"}
    run = lambda extra: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "app.keys", "list"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env | extra,
    )
    listed = run({"MT_API_KEYS_DB": str(db), "MT_API_KEYS_REQUIRED": "true"})
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("id\tname")
    lower = run({"mt_api_keys_db": str(db)})  # any letter case, as the server reads it
    assert lower.returncode == 0, lower.stderr
    blank = run({"MT_API_KEYS_DB": " "})
    assert blank.returncode == 2 and "give --db or set MT_API_KEYS_DB" in blank.stderr


def test_the_server_counts_its_active_keys_and_warns_when_none_is_there_to_require(
    tmp_path, caplog
):
    """A misspelt MT_API_KEYS_DB with keys required made a new, empty database and the server
    started without a word, to refuse every client with 403."""
    from app.access import Access
    from app.settings import Settings

    db = tmp_path / "kyes.sqlite"
    with caplog.at_level("INFO", logger="app"):
        Access(Settings(api_keys_db=db, api_keys_required=True))
    (warning,) = [r for r in caplog.records if r.levelname == "WARNING"]
    assert f"MT_API_KEYS_DB {db} holds no active key, and keys are required" in warning.message
    KeyStore(db).add("alice")
    caplog.clear()
    with caplog.at_level("INFO", logger="app"):
        Access(Settings(api_keys_db=db, api_keys_required=True))
    assert [r.message for r in caplog.records] == [f"API keys: 1 active in {db}"]


def test_a_blank_path_setting_is_unset(monkeypatch):
    """Every path setting left blank (`MT_WEIGHTS_DIR=`, `${VAR:-}` in a compose file) takes
    its default: MT_WEIGHTS_DIR= was the current folder ('bad checkpoint app'). A blank text
    setting keeps its own meaning (an empty MT_PIVOT_LANGUAGE: never pivot)."""
    from app.settings import Settings

    monkeypatch.setenv("MT_API_KEYS_DB", "")
    monkeypatch.setenv("MT_FILES_DIR", " ")
    monkeypatch.setenv("MT_WEIGHTS_DIR", "")
    monkeypatch.setenv("MT_PIVOT_LANGUAGE", "")
    settings = Settings()
    assert settings.api_keys_db is None and settings.files_dir is None
    assert settings.weights_dir == Path("weights")
    assert settings.pivot_language == ""
    assert Settings(weights_dir=" \t").weights_dir == Path("weights")


# --- keys on the server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def keyed(weights, tmp_path_factory):
    db = tmp_path_factory.mktemp("keys") / "keys.sqlite"
    store = KeyStore(db)
    with serve_in_thread(weights, api_keys_db=db, api_keys_required=True) as (url, _):
        yield url, store


@pytest.mark.parametrize("key", [None, "", "not-a-key"])
def test_a_missing_or_unknown_key_is_403_everywhere(keyed, key):
    url, _ = keyed
    message = "Invalid API key" if key else "Please contact the server operator to get an API key"
    params = {"q": TEXT, "source": "en", "target": "de"} | ({"api_key": key} if key else {})
    answers = [
        translate(url, json=with_key(key)),  # the fast path
        translate(url, data=with_key(key)),
        translate(url, params=params),
        httpx.post(f"{url}/detect", json={"q": TEXT} | ({"api_key": key} if key else {})),
        upload(url, key),
    ]
    for r in answers:
        assert r.status_code == 403, r.text
        assert r.json() == {"error": message}


def test_a_valid_key_is_served_until_it_is_revoked(keyed):
    url, store = keyed
    key, info = store.add("carol")
    assert translate(url, json=with_key(key)).status_code == 200
    assert translate(url, data=with_key(key)).status_code == 200
    assert translate(url, params=with_key(key)).status_code == 200  # in the query string
    mixed = translate(url, params={"api_key": key}, json=with_key(None))
    assert mixed.status_code == 200, mixed.text
    assert httpx.post(f"{url}/detect", json={"q": TEXT, "api_key": key}).status_code == 200
    assert upload(url, key).status_code == 200
    store.revoke(info.id)
    r = translate(url, json=with_key(key))
    assert r.status_code == 403
    assert r.json() == {"error": "Invalid API key"}


@pytest.mark.parametrize("key", [5, ["a"], {"k": 1}])
def test_a_key_of_the_wrong_type_is_400(keyed, key):
    url, _ = keyed
    r = translate(url, json=with_key(key))
    assert r.status_code == 400
    assert "api_key" in r.json()["error"]


def test_keys_required_without_a_database_is_a_setting_error(weights, tmp_path):
    with serve_in_process(weights, tmp_path / "log", api_keys_required="true") as (_, proc):
        assert proc.wait(timeout=60) == 2
    assert "mt-serve: invalid setting(s): MT_API_KEYS_REQUIRED=true needs MT_API_KEYS_DB" in (
        (tmp_path / "log").read_text()
    )


def test_a_keys_database_in_no_folder_or_a_folder_is_named_as_such(weights, tmp_path):
    """MT_API_KEYS_DB a folder, or in a folder that does not exist: one line saying which
    (SQLite's 'unable to open database file' alone), status 2."""
    for db, message in (
        (tmp_path, "unable to open database file: it is a folder; give a file in it"),
        (
            tmp_path / "no" / "k.sqlite",
            f"unable to open database file: there is no folder {tmp_path / 'no'}",
        ),
    ):
        log = tmp_path / "log"
        with serve_in_process(weights, log, api_keys_db=db) as (_, proc):
            assert proc.wait(timeout=60) == 2
        assert f"mt-serve: MT_API_KEYS_DB {db}: {message}" in log.read_text()


def test_keys_and_texts_in_the_query_string_are_not_logged(weights, tmp_path):
    db = tmp_path / "keys.sqlite"
    key, _ = KeyStore(db).add("dave")
    log = tmp_path / "log"
    with serve_in_process(weights, log, api_keys_db=db, access_log="true") as (url, proc):
        wait_ready(url, process=proc)
        assert translate(url, params=with_key(key)).status_code == 200
        assert translate(url, params=with_key("wrong-key-123")).status_code == 403
        # the same name %-escaped (read as api_key: the key is checked and accepted), or in
        # capitals (another parameter: no key given, and none is required here)
        escaped = f"{url}/translate?q=Secret+words&source=en&target=de&api%5Fkey={key}"
        assert httpx.post(escaped, timeout=60).status_code == 200
        capitals = f"{url}/translate?q=Secret+words&source=en&target=de&API_KEY=wrong-key-456"
        assert httpx.post(capitals, timeout=60).status_code == 200
        # a translated file's link is all it takes to download it while it is kept
        uploaded = httpx.post(
            f"{url}/translate_file",
            files={"file": ("Jane_medical_notes.txt", b"The cat.")},
            data={"source": "en", "target": "de", "api_key": key},
            timeout=60,
        )
        link = uploaded.json()["translatedFileUrl"]
        assert httpx.get(link).status_code == 200
        file_id = link.split("/download_file/")[1].split("/")[0]
        assert httpx.get(link.replace(file_id, file_id[::-1])).status_code == 404
        proc.terminate()
        proc.wait(timeout=60)
    text = log.read_text()
    assert "api_key=[redacted]" in text and "api%5Fkey=[redacted]" in text
    assert key not in text and "wrong-key-123" not in text and "wrong-key-456" not in text
    assert "Secret" not in text and TEXT.split()[0] not in text  # nor the texts: q=[redacted]
    assert file_id not in text and file_id[::-1] not in text and "Jane" not in text
    assert text.count('"GET /download_file/[redacted] HTTP/1.1" 200') == 1
    assert '"GET /download_file/[redacted]" 404' in text  # the refusal's own line


# --- limits ----------------------------------------------------------------------------------


def assert_slow_down(r: httpx.Response, needle: str) -> None:
    assert r.status_code == 429, r.text
    assert r.json()["error"].startswith("Slowdown: ")
    assert needle in r.json()["error"]
    assert int(r.headers["Retry-After"]) >= 1


@pytest.fixture
def limited(weights, tmp_path, request):
    db = tmp_path / "keys.sqlite"
    store = KeyStore(db)
    with serve_in_thread(weights, api_keys_db=db, **request.param) as (url, _):
        yield url, store


@pytest.mark.parametrize("limited", [{"req_limit_per_minute": 3}], indirect=True)
def test_requests_per_minute_per_address_and_per_key(limited):
    url, store = limited
    for _ in range(2):
        assert translate(url).status_code == 200  # the fast path
    assert httpx.post(f"{url}/detect", json={"q": TEXT}).status_code == 200
    assert_slow_down(translate(url), "3 requests per minute")
    assert_slow_down(translate(url, data=with_key(None)), "3 requests per minute")
    assert_slow_down(httpx.post(f"{url}/detect", json={"q": TEXT}), "per minute")
    assert_slow_down(upload(url, None), "per minute")
    assert httpx.get(f"{url}/languages").status_code == 200  # not limited
    assert httpx.get(f"{url}/health").status_code == 200
    key, _ = store.add("eve", req_per_minute=5)  # a key counts apart, with its own limit
    for _ in range(5):
        assert translate(url, json=with_key(key)).status_code == 200
    assert_slow_down(translate(url, json=with_key(key)), "5 requests per minute")


@pytest.mark.parametrize(
    "limited", [{"req_limit_per_minute": 5, "max_request_chars": 40}], indirect=True
)
def test_a_list_or_a_file_counts_as_several_requests(limited):
    """As LibreTranslate charges them: a list `q` of N texts counts as N requests, a file as one
    per characters-per-request of its text (each counted once, three lists of 50 texts passed a
    limit of 2 requests per minute); one that costs more than the whole limit is a 413 naming
    its cost, an invalid one counts once. The same with a key's own limit."""
    url, store = limited
    three = with_key(None) | {"q": ["Hi."] * 3}
    assert translate(url, json=three).status_code == 200  # 3 of 5
    r = translate(url, json=three)
    assert_slow_down(r, "5 requests per minute; this request counts as 3 and 2 fit now")
    assert translate(url, json=with_key(None) | {"q": ["Hi."] * 2}).status_code == 200  # 5 of 5
    assert_slow_down(translate(url), "5 requests per minute")
    # the window full, a request that no window can take is a 413 (it was told to retry in a
    # minute, and refused with 413 then)
    over = translate(url, json=with_key(None) | {"q": ["Hi."] * 6})
    assert over.status_code == 413 and "Retry-After" not in over.headers, over.text
    assert over.json()["error"].startswith("the 6 texts of `q` count as 6 requests; at most 5")
    key, _ = store.add("gina", req_per_minute=9)
    six = with_key(key) | {"q": ["Hi."] * 6}
    refused = translate(url, json=six | {"target": "xx"})  # invalid: counts once
    assert refused.status_code == 400, refused.text
    assert translate(url, json=six).status_code == 200  # 7 of 9
    too_many = translate(url, json=with_key(key) | {"q": ["Hi."] * 10})
    assert too_many.status_code == 413, too_many.text
    assert too_many.json()["error"] == (
        "the 10 texts of `q` count as 10 requests; at most 9 requests per minute: send at "
        "most 9 texts per request"
    )
    assert_slow_down(translate(url, json=with_key(key) | {"q": ["Hi."] * 3}), "counts as 3")
    file_key, _ = store.add("hal", req_per_minute=4)
    lines = b"The dog is here.\nThe cat is big.\nThe sun is up.\nThe tea is hot.\n"
    fields = FIELDS | {"api_key": file_key}

    def send(data: bytes) -> httpx.Response:
        return httpx.post(
            f"{url}/translate_file", files={"file": ("a.txt", data)}, data=fields, timeout=60
        )

    assert send(lines).status_code == 200  # 60 characters of text: 1 request per 40, 1 of 4
    big = send(lines * 3)  # 180 characters: 4 requests; it counts the one for reading it
    assert_slow_down(big, "4 requests per minute; this request counts as 4 and 2 fit now")
    # each try is read, parsed and its languages found before its cost is known: each counts
    assert_slow_down(send(lines * 3), "this request counts as 4 and 1 fit now")
    huge = send(lines * 4)
    assert huge.status_code == 413, huge.text
    assert "240 characters of text count as 6 requests (one per 40" in huge.json()["error"]
    assert "at most 4 requests per minute" in huge.json()["error"]


@pytest.mark.parametrize("limited", [{"char_limit_per_day": 100}], indirect=True)
def test_characters_per_day_and_per_request(limited):
    url, store = limited
    invalid = with_key(None, "x" * 90) | {"target": "xx"}
    assert translate(url, json=invalid).status_code == 400  # refused: its characters not counted
    for fields in ({"source": "en", "target": "xx"}, {"source": "xx", "target": "de"}):
        refused = httpx.post(  # a file refused for its pair costs nothing either
            f"{url}/translate_file", files={"file": ("a.txt", b"x" * 90)}, data=fields, timeout=60
        )
        assert refused.status_code == 400, refused.text
    assert translate(url, json=with_key(None, "x" * 60)).status_code == 200
    assert_slow_down(translate(url, json=with_key(None, "x" * 60)), "100 characters per day")
    assert translate(url, json=with_key(None, "x" * 30)).status_code == 200  # 90 of 100
    too_big = translate(url, json=with_key(None, "x" * 101))
    assert too_big.status_code == 413  # could never pass: no point in retrying
    key, _ = store.add("frank", chars_per_request=10, chars_per_day=1000)
    assert translate(url, json=with_key(key, "x" * 200)).status_code == 413
    assert translate(url, json=with_key(key, "x" * 10)).status_code == 200


@pytest.mark.parametrize("limited", [{"max_request_chars": 1000}], indirect=True)
def test_a_keys_characters_per_request_bound_each_text_of_a_file(limited):
    """A key's own characters per request hold each text of a file, as MT_MAX_REQUEST_CHARS
    does (they held the whole file: a key allowing 40 could not have a file of four short
    lines translated, which a server allowing 40 translates)."""
    url, store = limited
    key, _ = store.add("ivy", chars_per_request=40)
    fields = FIELDS | {"api_key": key}
    lines = b"The dog is here.\nThe cat is big.\nThe sun is up.\nThe tea is hot.\n"  # 60
    long = b"The dog is here and the cat is big and the sun is up. The tea is hot.\n"

    def send(name: str, data: bytes) -> httpx.Response:
        return httpx.post(
            f"{url}/translate_file", files={"file": (name, data)}, data=fields, timeout=60
        )

    r = send("a.txt", lines)
    assert r.status_code == 200, r.text
    for name in ("a.txt", "a.md"):  # a longer paragraph: cut at its sentences, as for the server's
        assert send(name, long).status_code == 200, name
    assert translate(url, json=with_key(key, "x" * 41)).status_code == 413  # /translate: as before


@pytest.mark.parametrize(
    "limited", [{"char_limit_per_day": 40, "max_queue_size": 4}], indirect=True
)
def test_characters_are_given_back_when_the_server_refuses_the_request(limited):
    """A request the server refuses after counting its characters (here 413: more sentences
    than one request may queue) does not use up the day's characters: the client that splits
    it as told is served (it was locked out for a day). The same for a file."""
    url, _ = limited
    three = "I am here. You go. We eat."  # 26 characters, 3 sentences: at most 2 per request
    r = translate(url, json=with_key(None, three))
    assert r.status_code == 413 and "at most 2" in r.json()["error"], r.text
    refused = httpx.post(
        f"{url}/translate_file", files={"file": ("a.txt", three.encode())}, data=FIELDS, timeout=60
    )
    assert refused.status_code == 413, refused.text
    assert translate(url, json=with_key(None, "I am here. You go.")).status_code == 200  # 18
    assert translate(url, json=with_key(None, "We eat.")).status_code == 200  # 25 of 40
    assert_slow_down(translate(url, json=with_key(None, "x" * 16)), "40 characters per day")


@pytest.mark.parametrize("limited", [{"req_limit_per_minute": 2}], indirect=True)
def test_a_forwarded_for_header_does_not_choose_the_client_address(limited):
    """Limits count the connection's peer: a client on the same host cannot pick a fresh
    address for each request with X-Forwarded-For (uvicorn believes it from 127.0.0.1 by
    default), and the access log shows the peer."""
    url, _ = limited
    answers = [
        translate(url, json=with_key(None), headers={"X-Forwarded-For": f"10.0.0.{i}"})
        for i in range(3)
    ]
    assert [r.status_code for r in answers] == [200, 200, 429]


def test_a_locked_or_missing_keys_database_is_a_503_that_stalls_nothing_else(
    weights, tmp_path, caplog, monkeypatch
):
    """The keys database held locked by another process (a backup, an open sqlite3 shell):
    requests with keys get 503 with Retry-After after a second, while the rest of the server
    goes on answering (the lookup blocked the event loop for 5 s, then answered 500); a
    removed database is a 503 too, and is not recreated empty."""
    db = tmp_path / "keys.sqlite"
    key, _ = KeyStore(db).add("ann")
    # the pause after a failure, long enough that the second request surely falls in it
    monkeypatch.setattr("app.access.KEYS_RETRY_S", 30)
    with serve_in_thread(weights, api_keys_db=db) as (url, app):
        assert translate(url, json=with_key(key)).status_code == 200
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")

        async def while_locked():
            async with httpx.AsyncClient(timeout=60) as c:
                keyed = asyncio.ensure_future(c.post(f"{url}/translate", json=with_key(key)))
                await asyncio.sleep(0.05)  # the keyed request is waiting for the lock
                live = await c.get(f"{url}/health/live")
                done_first = keyed.done()
                first = await keyed
                again = await c.post(f"{url}/translate", json=with_key(key))
                return live, done_first, first, again

        with caplog.at_level("ERROR", logger="app.access"):
            try:
                live, keyed_done_first, keyed, again = asyncio.run(while_locked())
            finally:
                holder.rollback()
                holder.close()
        assert live.status_code == 200 and not keyed_done_first
        for r in (keyed, again):
            assert r.status_code == 503, r.text
            assert r.json()["error"] == "the server cannot check API keys right now; retry later"
            assert r.headers["Retry-After"] == "30"
        # the second was answered without waiting for the lock again: one lookup failed
        assert caplog.text.count("cannot be read") == 1
        app.state.access.keys_down_until = 0.0  # the pause over
        assert translate(url, json=with_key(key)).status_code == 200  # unlocked
        db.unlink()
        gone = translate(url, json=with_key(key))
        assert gone.status_code == 503, gone.text
        assert not db.exists()
        assert translate(url, json=with_key(None)).status_code == 200  # no key: no lookup
        # each 503 is counted by its reason, as every other refusal with 503 is
        scraped = httpx.get(f"{url}/metrics").text
        assert 'mt_rejected_requests_total{reason="keys_unavailable"} 3.0' in scraped


# --- CORS and /frontend/settings -------------------------------------------------------------


@pytest.fixture(scope="module")
def cors(weights, tmp_path_factory):
    db = tmp_path_factory.mktemp("keys") / "keys.sqlite"
    with serve_in_thread(
        weights, cors_origins="https://a.example, https://b.example", api_keys_db=db
    ) as (url, _):
        yield url


def test_cors_preflight_and_the_json_fast_path(cors):
    origin = {"Origin": "https://b.example"}
    pre = httpx.options(
        f"{cors}/translate",
        headers=origin
        | {
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert pre.status_code == 200
    assert pre.headers["access-control-allow-origin"] == "https://b.example"
    assert "POST" in pre.headers["access-control-allow-methods"]
    for r in (
        translate(cors, json=with_key(None), headers=origin),  # the fast path
        translate(cors, data=with_key(None), headers=origin),
        httpx.post(f"{cors}/detect", json={"q": TEXT}, headers=origin),
        translate(cors, json=with_key("wrong"), headers=origin),  # a 403 too
        httpx.get(f"{cors}/languages", headers=origin),
    ):
        assert r.headers["access-control-allow-origin"] == "https://b.example", r.text
    other = translate(cors, json=with_key(None), headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


def test_preflights_are_counted_apart_and_refused_in_json(cors):
    """A preflight only asks whether a browser may send a request: the metrics do not count it
    as one; a refused preflight says why in JSON, as every other error does."""
    ask = {"Access-Control-Request-Method": "POST"}
    translations = metric(cors, "mt_requests_total", 'route="/translate",status="200"')
    preflights = metric(cors, "mt_requests_total", 'route="preflight",status="200"')
    for path in ("/translate", "/detect"):
        r = httpx.options(f"{cors}{path}", headers={"Origin": "https://a.example"} | ask)
        assert r.status_code == 200
    refused = httpx.options(f"{cors}/translate", headers={"Origin": "https://evil.example"} | ask)
    assert refused.status_code == 400
    assert refused.headers["content-type"] == "application/json"
    assert "CORS preflight refused: Disallowed CORS origin" in refused.json()["error"]
    assert metric(cors, "mt_requests_total", 'route="/translate",status="200"') == translations
    assert metric(cors, "mt_requests_total", 'route="preflight",status="200"') == preflights + 2
    assert metric(cors, "mt_requests_total", 'route="preflight",status="400"') >= 1


def test_cors_default_allows_any_origin(weights):
    with serve_in_thread(weights) as (url, _):
        r = translate(url, headers={"Origin": "https://x.example"}, json=with_key(None))
        assert r.headers["access-control-allow-origin"] == "*"
    with serve_in_thread(weights, cors_origins="") as (url, _):
        r = translate(url, headers={"Origin": "https://x.example"}, json=with_key(None))
        assert "access-control-allow-origin" not in r.headers


def test_frontend_settings_report_the_limits(weights, tmp_path):
    db = tmp_path / "keys.sqlite"
    with serve_in_thread(
        weights,
        api_keys_db=db,
        api_keys_required=True,
        req_limit_per_minute=9,
        char_limit_per_day=999,
        max_request_chars=1234,
    ) as (url, _):
        r = httpx.get(f"{url}/frontend/settings")
    assert r.status_code == 200
    s = r.json()
    assert s["charLimit"] == 1234
    assert s["apiKeys"] is True and s["keyRequired"] is True
    assert s["suggestions"] is False and s["filesTranslation"] is True
    assert ".docx" in s["supportedFilesFormat"] and ".txt" in s["supportedFilesFormat"]
    assert s["language"]["source"] == {"code": "auto", "name": "Auto Detect"}
    assert s["language"]["target"] == {"code": "de", "name": "German"}
    assert s["frontendTimeout"] == 500
    assert (s["reqLimitPerMinute"], s["charLimitPerDay"]) == (9, 999)


def test_frontend_settings_for_a_key_report_its_own_limits(weights, tmp_path):
    """POST /frontend/settings with a key in the body answers the key's own limits (a web page
    showed the server's characters per request against a key that allows fewer); a key
    without limits of its own gets the server's, an unknown key the 403 of /translate, and no
    key the server's settings."""
    db = tmp_path / "keys.sqlite"
    store = KeyStore(db)
    small, _ = store.add("small", chars_per_request=40, chars_per_day=500, req_per_minute=3)
    large, _ = store.add("large", chars_per_request=5000)
    plain, _ = store.add("plain")
    limits = {"req_limit_per_minute": 9, "char_limit_per_day": 999, "max_request_chars": 1234}
    with serve_in_thread(weights, api_keys_db=db, **limits) as (url, _):
        get = httpx.get(f"{url}/frontend/settings").json()
        said = {}
        for name, key in [("small", small), ("large", large), ("plain", plain)]:
            r = httpx.post(f"{url}/frontend/settings", json={"api_key": key})
            assert r.status_code == 200, r.text
            said[name] = r.json()
        form = httpx.post(f"{url}/frontend/settings", data={"api_key": small}).json()
        unknown = httpx.post(f"{url}/frontend/settings", json={"api_key": "mt-nothing"})
        none = httpx.post(f"{url}/frontend/settings")
        wrong = httpx.post(f"{url}/frontend/settings", content=b"[1]")
        huge = httpx.post(f"{url}/frontend/settings", content=b" " * 2_000_000)
        # the key's limit is the one /translate applies
        over = translate(url, json={**with_key(small), "q": "x" * 41})
    limited = ("charLimit", "charLimitPerDay", "reqLimitPerMinute")
    assert [said["small"][k] for k in limited] == [40, 500, 3]
    assert form == said["small"]
    assert [said["large"][k] for k in limited] == [1234, 999, 9]  # the server's is lower
    assert said["plain"] == get
    assert {k: v for k, v in said["small"].items() if k not in limited} == {
        k: v for k, v in get.items() if k not in limited
    }
    assert (unknown.status_code, unknown.json()) == (403, {"error": "Invalid API key"})
    assert (none.status_code, none.json()) == (200, get)
    assert wrong.status_code == 400
    assert wrong.json() == {"error": "the body must be a JSON object with api_key"}
    assert huge.status_code == 413  # the body is not read past the server's limit
    assert over.status_code == 413
    assert "at most 40 per request" in over.json()["error"]
