"""API keys: a SQLite database (MT_API_KEYS_DB) and the `mt-keys` command that manages it.

SQLite (Python's own sqlite3) rather than a keys file: `mt-keys add` and `mt-keys revoke` change
it while the server runs, and the server sees each change at the next request without a reload
or a file watcher; SQLite's transactions make every change whole (a half-written keys file
would lock every client out), and several replicas on one host can share it.

Only a SHA-256 digest of each key is stored: a copy of the database gives no usable key. A key
is looked up by its digest, and the stored digest is compared with `hmac.compare_digest`. Each
key has a short public id (the first 8 hex digits of its digest) that `list` shows and `revoke`
takes; the key itself is printed once, by `add`, and never logged. A key may carry its own
limits (requests per minute, characters per request and per day); where it has none, the
server's settings apply.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import logging
import os
import re
import secrets
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote_plus

from model_core.cli import interruptible

SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    digest TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    created REAL NOT NULL,
    revoked REAL,
    req_per_minute INTEGER,
    chars_per_request INTEGER,
    chars_per_day INTEGER
)
"""


def digest_of(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class KeyInfo:
    id: str
    name: str
    created: float
    revoked: float | None
    req_per_minute: int | None
    chars_per_request: int | None
    chars_per_day: int | None


class KeyStore:
    """The keys database; every method opens its own short connection (the server calls
    `lookup` from the event loop, the command from another process)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        with self._connect() as db:
            db.execute(SCHEMA)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection for one transaction (committed when the block ends), then closed."""
        db = sqlite3.connect(self.path, timeout=5.0)
        db.row_factory = sqlite3.Row
        try:
            with db:
                yield db
        finally:
            db.close()

    @staticmethod
    def _info(row: sqlite3.Row) -> KeyInfo:
        return KeyInfo(
            row["id"],
            row["name"],
            row["created"],
            row["revoked"],
            row["req_per_minute"],
            row["chars_per_request"],
            row["chars_per_day"],
        )

    def add(
        self,
        name: str,
        *,
        req_per_minute: int | None = None,
        chars_per_request: int | None = None,
        chars_per_day: int | None = None,
    ) -> tuple[str, KeyInfo]:
        """A new key (returned once, never stored) and what is stored about it."""
        key = "mt-" + secrets.token_urlsafe(24)
        digest = digest_of(key)
        with self._connect() as db:
            db.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?, NULL, ?, ?, ?)",
                (digest, digest[:8], name, time.time(), req_per_minute, chars_per_request,
                 chars_per_day),
            )  # fmt: skip
            row = db.execute("SELECT * FROM api_keys WHERE digest = ?", (digest,)).fetchone()
        return key, self._info(row)

    def list(self) -> list[KeyInfo]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM api_keys ORDER BY created").fetchall()
        return [self._info(r) for r in rows]

    def revoke(self, key_id: str) -> int:
        """Revokes the keys whose id is `key_id`; returns how many."""
        with self._connect() as db:
            cur = db.execute(
                "UPDATE api_keys SET revoked = ? WHERE id = ? AND revoked IS NULL",
                (time.time(), key_id),
            )
            return cur.rowcount

    def lookup(self, key: str) -> KeyInfo | None:
        """The key's record when it is known and not revoked, else None. The database is
        opened read-only (a removed file is an error, not a new empty database), and a lock
        another process holds is waited for a second at most; sqlite3.Error otherwise."""
        digest = digest_of(key)
        db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
        db.row_factory = sqlite3.Row
        with contextlib.closing(db):
            row = db.execute(
                "SELECT * FROM api_keys WHERE digest = ? AND revoked IS NULL", (digest,)
            ).fetchone()
        if row is None or not hmac.compare_digest(row["digest"], digest):
            return None
        return self._info(row)


#: query-string parameters whose values the access log never shows: API keys, and the texts a
#: client sends in the query string (as some LibreTranslate clients do)
REDACTED = frozenset({"api_key", "q"})


def redact_query(path: str) -> str:
    """`path` with the value of each REDACTED parameter of its query string replaced by
    `[redacted]`, however the client spelled the name (%-escapes, `+`, any letter case)."""
    head, sep, query = path.partition("?")
    if not sep:
        return path
    parts = []
    for part in query.split("&"):
        name, eq, _ = part.partition("=")
        if eq and unquote_plus(name, errors="replace").strip().lower() in REDACTED:
            part = f"{name}=[redacted]"
        parts.append(part)
    return head + sep + "&".join(parts)


#: a translated file's link: its id is all it takes to download the file (and its name is the
#: client's file's)
_DOWNLOAD = re.compile(r"(/download_file/)[^?\s]+")


def redact_path(path: str) -> str:
    """`path` with its query string redacted (`redact_query`), and the id and name of a
    translated file's download link replaced by `[redacted]`: anyone who read the log could
    download the file while it was kept."""
    return _DOWNLOAD.sub(r"\1[redacted]", redact_query(path))


class RedactKeys(logging.Filter):
    """Hides the values of API keys and texts in the query strings of uvicorn's access log
    lines, and translated files' links (`redact_path`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                redact_path(a) if isinstance(a, str) and ("?" in a or "/download_file/" in a) else a
                for a in record.args
            )
        return True


#: the paths of probes and scrapes, whose successful requests are logged at debug level only
PROBES = frozenset({"/health", "/health/ready", "/health/live", "/metrics"})


class QuietProbes(logging.Filter):
    """Drops uvicorn's access line of a successful health check or metrics scrape unless the
    log level is debug: a healthcheck every 10 s and a scrape every 5 s made 26,000 lines a
    day, and the only switch, MT_ACCESS_LOG=false, dropped every request's line with them. A
    probe that fails (503) is still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        _, _, path, _, status = args
        if status == 200 and isinstance(path, str) and path.split("?")[0] in PROBES:
            return logging.getLogger("app").isEnabledFor(logging.DEBUG)
        return True


def install_log_redaction() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactKeys) for f in access.filters):
        access.addFilter(RedactKeys())
    if not any(isinstance(f, QuietProbes) for f in access.filters):
        access.addFilter(QuietProbes())


SQLITE_INT_MAX = 2**63 - 1


def limit_value(text: str) -> int:
    """A limit option: a whole number from 1 to what SQLite stores."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= SQLITE_INT_MAX:
        raise argparse.ArgumentTypeError(
            f"{value}: give a whole number from 1 to {SQLITE_INT_MAX} "
            "(leave the option out for the server's limit)"
        )
    return value


def key_name(text: str) -> str:
    """A key's name: printable, as `list` shows it in one tab-separated line."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            'a name is required: who or what the key is for ("team A")'
        )
    if not text.isprintable():
        raise argparse.ArgumentTypeError(
            "a name must be printable text (no tabs, line breaks or other control characters)"
        )
    return text


def key_id(text: str) -> str:
    """A key's id as `list` shows it (8 hex digits; any letter case, spaces around it)."""
    value = text.strip().lower()
    if not value:
        raise argparse.ArgumentTypeError("an id is required: `mt-keys list` shows them")
    return value


def database_problem(path: Path) -> str | None:
    """Why `path` cannot be the keys database, where SQLite would only say that it is
    'unable to open database file'; None when it may be."""
    if path.is_dir():
        return f"{path}: unable to open database file: it is a folder; give a file in it"
    if not path.parent.is_dir():
        return f"{path}: unable to open database file: there is no folder {path.parent}"
    return None


# Ctrl-C (waiting for the database's lock, say) is one line, not a traceback
@interruptible("mt-keys", ": `mt-keys list` shows what the database holds")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mt-keys", description="Create, list and revoke the service's API keys."
    )
    parser.add_argument(
        "--db", type=Path, help="the keys database (default: the MT_API_KEYS_DB setting)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="create a key and print it (it is shown only once)")
    add.add_argument("name", type=key_name, help="who or what the key is for")
    add.add_argument("--req-per-minute", type=limit_value, help="requests per minute at most")
    add.add_argument("--chars-per-request", type=limit_value, help="characters per request at most")
    add.add_argument("--chars-per-day", type=limit_value, help="characters per day at most")
    sub.add_parser("list", help="list the keys (ids, names, limits; never the keys)")
    revoke = sub.add_parser("revoke", help="revoke a key by the id `list` shows")
    revoke.add_argument("id", type=key_id, help="the key's id, as `list` shows it")
    args = parser.parse_args(argv)
    path = args.db
    if path is None:  # the server's setting, read alone (another setting's mistake is the
        # server's to report)
        value = next(
            (v for k, v in os.environ.items() if k.upper() == "MT_API_KEYS_DB"), ""
        )  # as the server reads it: any letter case, blank is unset
        path = Path(value) if value.strip() else None
    if path is None:
        print("mt-keys: error: give --db or set MT_API_KEYS_DB", file=sys.stderr)
        return 2
    problem = database_problem(path)
    if problem is not None:
        print(f"mt-keys: error: {problem}", file=sys.stderr)
        return 1
    if args.command != "add" and not path.exists():
        # a misspelt path listed an empty table (status 0) and made a new database there
        print(
            f"mt-keys: error: {path}: no keys database there (`mt-keys add` makes one); check "
            "the path",
            file=sys.stderr,
        )
        return 1
    try:
        return run(args, KeyStore(path))
    except sqlite3.Error as exc:  # locked for longer than 5 s, not a database, no folder
        print(f"mt-keys: error: {path}: {exc}", file=sys.stderr)
        return 1


def run(args: argparse.Namespace, store: KeyStore) -> int:
    if args.command == "add":
        same = [k.id for k in store.list() if k.name == args.name and not k.revoked]
        key, info = store.add(
            args.name,
            req_per_minute=args.req_per_minute,
            chars_per_request=args.chars_per_request,
            chars_per_day=args.chars_per_day,
        )
        print(key)
        print(f"id {info.id}: keep the key above; it is not stored and not shown again",
              file=sys.stderr)  # fmt: skip
        if same:  # allowed (a key is replaced by adding the new one, then revoking the old)
            print(f"mt-keys: note: {len(same)} other active key(s) named {args.name!r}: "
                  f"{', '.join(same)}; `mt-keys revoke ID` once it is no longer used",
                  file=sys.stderr)  # fmt: skip
        return 0
    if args.command == "list":
        print("id\tname\tcreated\tstatus\treq/min\tchars/request\tchars/day")
        for k in store.list():
            created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(k.created))
            status = "revoked" if k.revoked else "active"
            limits = (k.req_per_minute, k.chars_per_request, k.chars_per_day)
            shown = "\t".join("-" if v is None else str(v) for v in limits)
            print(f"{k.id}\t{k.name}\t{created}\t{status}\t{shown}")
        return 0
    if store.revoke(args.id) == 0:
        known = [k for k in store.list() if k.id == args.id]
        if known:
            print(f"mt-keys: error: key {args.id} is revoked already", file=sys.stderr)
        else:
            print(f"mt-keys: error: no key with id {args.id!r}: `mt-keys list` shows the ids",
                  file=sys.stderr)  # fmt: skip
        return 1
    print(f"revoked {args.id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
