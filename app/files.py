"""Translated files waiting to be downloaded: kept for a limited time and total size, in one
directory, under names the server makes.

A stored file's name on disk is `<id>.mtfile`, where the id is 24 random URL-safe characters
(`secrets.token_urlsafe`); the client's file name is only ever used, sanitised, in the
download URL and the Content-Disposition header. A download looks the id up in the in-memory
index before touching the disk, so no part of a URL ever becomes a path. Files expire after
`ttl_s`; expired files are removed whenever a file is stored or fetched, and by the service
every few seconds (`prune`), and every file is removed when the service stops (`close`, which
also removes the folder when the store made it). When storing a file
would pass `max_total_bytes`, the request is refused (503 with Retry-After: the time until the
oldest file expires) rather than dropping files whose URLs were already handed out; a file
larger than `max_total_bytes` itself, which no wait would make fit, is refused as such
(`TooLarge`, a 413). Leftover `*.mtfile` files of an earlier process in the same directory are
removed when the store opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import tempfile
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path, PurePath

from .formats import extension

SUFFIX = ".mtfile"
PARTIAL = ".partial"  # a file while it is written
_ID = re.compile(r"[A-Za-z0-9_-]{24}")
_UNSAFE = re.compile(r"[^\w.-]+")


class StoreFull(Exception):
    def __init__(self, retry_after_s: int):
        super().__init__(f"retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class StoreClosed(Exception):
    """The store was closed (the server stops) while the file was written."""


class TooLarge(Exception):
    """A file larger than the store keeps in all: waiting never makes it fit."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"{size} bytes; at most {limit} kept")
        self.size, self.limit = size, limit


@dataclass
class StoredFile:
    name: str
    content_type: str
    size: int
    expires: float  # time.monotonic()


#: how browsers (WHATWG HTML's multipart/form-data encoding) and curl since 7.81.0 write the
#: three characters a quoted filename cannot hold; `%` itself is sent as it is
_FORM_ESCAPES = re.compile("%22|%0D|%0A")


def form_filename(sent: str) -> str:
    """A multipart upload's filename as the user named it: `%22`, `%0D` and `%0A` decoded
    (`"weird".txt` arrives as `%22weird%22.txt` and came back as `22weird_22_de.txt`), and no
    other escape, which the sender does not make (a name that holds `%22` itself cannot be
    told apart)."""
    return _FORM_ESCAPES.sub(lambda m: {"%22": '"', "%0D": "\r", "%0A": "\n"}[m.group()], sent)


def safe_name(filename: str, target: str) -> str:
    """`report.docx` -> `report_de.docx`: the base name only, characters other than letters,
    digits, combining marks, `.`, `-` and `_` replaced (`_sanitised`), at most 100 characters.
    The name is composed first (NFC): macOS gives names decomposed, `u` + U+0308 for `ü`, and
    the combining mark became `_` (`Bericht_u_ber_de.docx`)."""
    base = PurePath(unicodedata.normalize("NFC", filename).replace("\\", "/")).name
    suffix = extension(base)
    stem = _sanitised(base[: len(base) - len(suffix)]).strip("._" + _JOINERS)[:80] or "document"
    lang = _UNSAFE.sub("_", target)[:12]
    return f"{stem}_{lang}{suffix}"


#: zero-width non-joiner and joiner: inside Persian words (`گزارش‌ها`), and choosing a
#: letter's form in Indic scripts; no other invisible character is kept in a name
_JOINERS = "\u200c\u200d"


def _sanitised(text: str) -> str:
    """`text` with each run of characters other than letters, digits, combining marks after
    a letter, the joiners, `.`, `-` and `_` replaced by one `_`. The marks are the vowel signs
    of Devanagari, Tamil, Bengali or Thai and Hebrew's points, which no composed character
    replaces: each became `_` (`रिपोर्ट.docx` came back as `र_प_र_ट_de.docx`), as each joiner
    did; not the invisible ones (the grapheme joiner, variation selectors), nor one that
    follows no letter."""
    out: list[str] = []
    for c in text:
        if unicodedata.category(c).startswith("M"):
            shown = c not in _INVISIBLE_MARKS and out and _lettered(out[-1])
            out.append(c if shown else "\0")
        else:
            out.append(c if c in "._-" + _JOINERS or c.isalnum() else "\0")
    return re.sub("\0+", "_", "".join(out))


# combining marks that show nothing: the grapheme joiner, the variation selectors
_INVISIBLE_MARKS = frozenset(
    "\u034f"
    + "".join(map(chr, range(0x180B, 0x1810)))
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)


def _lettered(c: str) -> bool:
    """Whether a combining mark may follow `c`: a letter, a digit, a mark or a joiner."""
    return c.isalnum() or c in _JOINERS or unicodedata.category(c).startswith("M")


def ascii_name(name: str) -> str:
    """`Bericht_über_de.txt` -> `Bericht_uber_de.txt`: accents dropped, other characters that
    are not ASCII letters or digits replaced (a safe name's fallback for old clients). A name
    that starts with no ASCII letter or digit left, `報告_de.txt`, is named `document` as a
    file without a usable name is (it was `_de.txt`, nothing of a name)."""
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", plain).lstrip(".")
    if not plain[:1].isalnum():
        plain = "document" + ("_" if plain and plain[0] not in "_-" else "") + plain
    return plain


def prepare_directory(directory: Path) -> None:
    """Creates `directory` where missing; OSError when it is not a folder the process can
    write in (checked at start-up, so that no upload finds it out)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write in {directory}")


def _write_new(path: Path, data: bytes) -> None:
    """Writes a new file whole: under another name first, so that a reader never finds it
    half written; a write that fails (a full disk) leaves nothing."""
    partial = path.with_suffix(PARTIAL)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


class FileStore:
    def __init__(self, directory: Path | None, ttl_s: float, max_total_bytes: int):
        self.made = directory is None  # a folder of its own, removed by `close`
        if directory is None:
            directory = Path(tempfile.mkdtemp(prefix="mt-serve-files-"))
        prepare_directory(directory)
        self.directory = directory.resolve()
        self.ttl_s, self.max_total_bytes = ttl_s, max_total_bytes
        self.index: dict[str, StoredFile] = {}
        self._writing: set[str] = set()  # ids whose bytes a thread is writing
        self.closed = False
        for suffix in (SUFFIX, PARTIAL):  # what an earlier process left
            for leftover in self.directory.glob("*" + suffix):
                if _ID.fullmatch(leftover.stem):
                    leftover.unlink(missing_ok=True)

    def _path(self, file_id: str) -> Path:
        return self.directory / (file_id + SUFFIX)

    @property
    def used_bytes(self) -> int:
        return sum(f.size for f in self.index.values())

    def prune(self) -> None:
        now = time.monotonic()
        for file_id, f in list(self.index.items()):
            if f.expires <= now:
                del self.index[file_id]
                self._path(file_id).unlink(missing_ok=True)

    def close(self) -> None:
        """Removes every stored file (their URLs end with the process), and the folder when
        the store made it. A file still being written is removed when its write ends (its
        `put` raises StoreClosed)."""
        self.closed = True
        for file_id in list(self.index):
            self._path(file_id).unlink(missing_ok=True)
        self.index.clear()
        if self.made:
            for left in self.directory.glob("*" + PARTIAL):
                left.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # something else put there stays
                self.directory.rmdir()

    def wait_for(self, size: int) -> int | None:
        """None when `size` bytes fit in the store now; else the seconds until the first file
        kept goes (the Retry-After of StoreFull)."""
        self.prune()
        if self.used_bytes + size <= self.max_total_bytes or not self.index:
            return None
        now = time.monotonic()  # (a file being written is kept ttl_s from its end)
        # (the time left of each, not its end: now + ttl_s - now came back as 599.99...)
        left = min(min(f.expires - now, self.ttl_s) for f in self.index.values())
        return max(1, int(left) + 1)

    async def put(self, data: bytes, name: str, content_type: str) -> str:
        """Stores `data`; returns its id. Raises StoreFull when it does not fit now, TooLarge
        when it never can. The bytes are written on a thread (the event loop answers other
        requests meanwhile); their room is counted from the start, and `get` finds the file
        once it is written. A request cancelled meanwhile leaves no file behind."""
        if len(data) > self.max_total_bytes:
            raise TooLarge(len(data), self.max_total_bytes)
        self.prune()
        if self.closed:
            raise StoreClosed("the server is stopping")
        wait = self.wait_for(len(data))
        if wait is not None:
            raise StoreFull(wait)
        file_id = secrets.token_urlsafe(18)
        path = self._path(file_id)
        entry = StoredFile(name, content_type, len(data), float("inf"))  # kept while written
        self.index[file_id] = entry
        self._writing.add(file_id)
        written = asyncio.get_running_loop().run_in_executor(None, _write_new, path, data)
        try:
            await asyncio.shield(written)
            if self.closed:  # its link ends with the process: nothing is kept
                path.unlink(missing_ok=True)
                raise StoreClosed("the server stopped while the file was written")
        except BaseException as exc:
            self.index.pop(file_id, None)
            # cancelled: the thread may still be writing; what it leaves is removed after
            written.add_done_callback(lambda _: path.unlink(missing_ok=True))
            if self.closed and isinstance(exc, OSError):  # its folder went with the store
                raise StoreClosed("the server stopped while the file was written") from None
            raise
        finally:
            self._writing.discard(file_id)
        entry.expires = time.monotonic() + self.ttl_s
        return file_id

    async def get(self, file_id: str) -> tuple[StoredFile, bytes] | None:
        """The file and its bytes (read on a thread), or None for an unknown or expired id
        or a file still being written."""
        self.prune()
        entry = self.index.get(file_id) if _ID.fullmatch(file_id) else None
        if entry is None or file_id in self._writing:
            return None
        try:
            return entry, await asyncio.to_thread(self._path(file_id).read_bytes)
        except FileNotFoundError:  # removed from outside, or expired while read
            if self.index.get(file_id) is entry:
                del self.index[file_id]
            return None
