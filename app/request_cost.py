"""What a request costs against the requests per minute, and the moving window that counts it.

A request costs what LibreTranslate charges for it against `--req-limit`: one for a text, N for
a list `q` of N texts (N translations; LibreTranslate's `req_cost = max(1, len(q))`), and for a
file one per characters-per-request of its text, at least one (a file as long as N requests of
the longest text allowed). LibreTranslate divides the file's bytes by `--char-limit`, "assuming
a plain text file"; the text is counted here, so that neither a .docx's markup and compression
nor the extra bytes of UTF-8 count. /detect costs one, a list too, as in LibreTranslate.

The window is the `limits` library's moving window in memory, as for LibreTranslate's
Flask-Limiter, with two things the library's interface lacks: the entry a request was counted
with is given back when the request is then refused for a cost that does not fit (a client
that retried after its Retry-After would find its refused tries still counted, and be refused
again), and the time the window has room for a cost of N (a cost of N fits once the entry that
holds the window's Nth place from its end leaves; the window's reset time is when the first
leaves). Both read the memory storage's entries, newest first, under their key's lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter


@dataclass(frozen=True)
class Cost:
    """What a request counts as against the requests per minute, and why (for its 413)."""

    requests: int
    why: str  # what counts: "the 6 texts of `q`"
    detail: str = ""  # how it counts, after the count
    advice: str = ""  # what to send instead, given the limit (`{limit}` in it)

    def too_much(self, limit: int) -> str:
        advice = self.advice.format(limit=limit)
        return (
            f"{self.why} count as {self.requests} requests{self.detail}; at most {limit} "
            f"requests per minute{advice}"
        )


def texts_cost(q: Any) -> Cost | None:
    """A list `q` of N texts counts as N requests, as LibreTranslate counts it (a text: one)."""
    if isinstance(q, list) and len(q) > 1:
        advice = ": send at most {limit} texts per request"
        return Cost(len(q), f"the {len(q)} texts of `q`", "", advice)
    return None


def file_cost(chars: int, per_request: int) -> Cost:
    """A file counts as one request per `per_request` characters of its text, at least one."""
    return Cost(
        max(1, chars // per_request),
        f"the file's {chars} characters of text",
        f" (one per {per_request}, the characters one request may hold)",
    )


class RequestWindow:
    """Requests per minute, per client, in a moving window of the process's memory."""

    def __init__(self, storage: MemoryStorage):
        self.storage = storage
        self.limiter = MovingWindowRateLimiter(storage)

    def hit(self, limit: int, who: str, cost: int = 1) -> object | None:
        """Counts `cost` requests; the entry they were counted with (for `give_back`), or
        None when the window has no room for them (nothing counted)."""
        item = RateLimitItemPerMinute(limit)
        key = item.key_for(who)
        with self.storage.locks[key]:
            if not self.limiter.hit(item, who, cost=cost):
                return None
            return self.storage.events[key][0]

    def fits(self, limit: int, who: str, cost: int) -> bool:
        return self.limiter.test(RateLimitItemPerMinute(limit), who, cost=cost)

    def give_back(self, limit: int, who: str, entry: object | None) -> None:
        """Takes out of the window the requests counted with `entry` (if still there)."""
        if entry is None:
            return
        key = RateLimitItemPerMinute(limit).key_for(who)
        with self.storage.locks[key]:
            entries = self.storage.events.get(key)
            if entries:
                entries[:] = [e for e in entries if e is not entry]

    def left(self, limit: int, who: str) -> int:
        """Requests the window has room for now."""
        return self.limiter.get_window_stats(RateLimitItemPerMinute(limit), who).remaining

    def room_at(self, limit: int, who: str, cost: int = 1) -> float:
        """When (time.time()) the window has room for `cost` requests."""
        item = RateLimitItemPerMinute(limit)
        soonest = self.limiter.get_window_stats(item, who).reset_time
        key = item.key_for(who)
        with self.storage.locks[key]:
            entries = self.storage.events.get(key, [])
            place = limit - cost  # the entry that a cost of `cost` needs gone
            if 0 <= place < len(entries):
                return max(soonest, entries[place].expiry)
        return soonest
