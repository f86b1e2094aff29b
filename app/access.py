"""API keys and usage limits of /translate, /detect and /translate_file, as LibreTranslate
applies them.

With a keys database (MT_API_KEYS_DB, app/keys.py) an unknown or revoked key is refused with
403 `{"error": "Invalid API key"}`; with MT_API_KEYS_REQUIRED a request without a key is refused
too (403; LibreTranslate answers this one with a 400). Limits count per key, or per client
address for requests without one: requests per minute (a moving window) and characters per day
(a window of 24 hours from the first request); a key's own limits replace the settings'. Over
a limit: 429, a `Retry-After` header (seconds until the window lets the request through) and
LibreTranslate's error shape `{"error": "Slowdown: ..."}`. The counting is the `limits`
library's (the one behind LibreTranslate's Flask-Limiter), in this process's memory: each
replica counts its own requests, and a restart starts every count afresh. The client address is
the connection's peer (an X-Forwarded-For header is not believed); behind a proxy every client
shares the proxy's address unless keys tell them apart.

A request counts against the requests per minute by its cost, as LibreTranslate charges it
(app/request_cost.py: N for a list of N texts, a file by its characters): one when it arrives
(a request then refused as invalid too), the rest once it is found valid, before any work,
never given back when the server then fails it (the limit bounds the work clients ask for). A
request whose cost does not fit in the window now is a 429 and is not counted (a file: the one
it counted on arrival stays, as the server has read and parsed it to know its cost); one that costs
more than the whole limit is a 413 naming its cost (no wait would let it through; LibreTranslate
takes it, and counts nothing for it, as its cost cannot fit in its window).

A request's characters are charged once it is found valid, and given back when the server then
answers it with an error (a full queue, a deadline, a model that could not be loaded, ...): a
client pays only for translations it got, or that it went away from. Keys are looked up on
threads of their own, so that a keys database that another process holds locked stalls only
the requests with keys (503 with Retry-After after a second; for the next two seconds, at
once), not the server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import math
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, cast

from limits import RateLimitItemPerDay
from limits.storage import MemoryStorage
from limits.strategies import FixedWindowRateLimiter
from starlette.types import Scope

from .keys import KeyInfo, KeyStore
from .request_cost import Cost, RequestWindow
from .translate import ApiError

log = logging.getLogger(__name__)

INVALID_KEY = "Invalid API key"
KEYS_RETRY_S = 2  # Retry-After while the keys database cannot be read
KEY_NEEDED = "Please contact the server operator to get an API key"


@dataclass(frozen=True)
class Grant:
    """Who a request counts for, and its limits (0: none)."""

    who: str
    req_per_minute: int
    chars_per_request: int
    chars_per_day: int
    counted: object = field(default=None, compare=False, repr=False)  # its request's entry


def keys_unavailable() -> ApiError:
    return ApiError(
        503,
        "the server cannot check API keys right now; retry later",
        {"Retry-After": str(KEYS_RETRY_S)},
    )


def slow_down(limit: str, reset_time: float) -> ApiError:
    wait = max(1, math.ceil(reset_time - time.time()))
    return ApiError(
        429,
        f"Slowdown: {limit}; retry in {wait} s",
        {"Retry-After": str(wait)},
    )


class Access:
    def __init__(self, settings: Any, metrics: Any = None):
        """`metrics`: app/metrics.py's, where a 503 for the keys database is counted."""
        self.settings, self.metrics = settings, metrics
        path = settings.api_keys_db
        self.keys = KeyStore(path) if path is not None else None
        if self.keys is not None:
            self.say_keys()
        # key lookups on threads of their own (a lookup may wait a second for a lock; the
        # default executor's threads serve language detection), and a pause after a failure
        self.lookups = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="mt-keys")
        self.keys_down_until = 0.0
        storage = MemoryStorage()
        self.requests = RequestWindow(storage)
        self.chars = FixedWindowRateLimiter(storage)

    def say_keys(self) -> None:
        """The database's active keys, counted in the start-up log; a warning when keys are
        required and none is active (a misspelt MT_API_KEYS_DB made a new, empty database, and
        the server started without a word, to answer every client 403)."""
        assert self.keys is not None
        try:
            active = sum(not k.revoked for k in self.keys.list())
        except sqlite3.Error:  # (told at each request that needs it)
            return
        if active == 0 and self.settings.api_keys_required:
            log.warning(
                "MT_API_KEYS_DB %s holds no active key, and keys are required "
                "(MT_API_KEYS_REQUIRED): every request is refused until `mt-keys add` makes one",
                self.keys.path,
            )
        else:
            log.info("API keys: %d active in %s", active, self.keys.path)

    def _lookup(self, key: str) -> KeyInfo | None:
        """(A lookup thread.) The key's record; after a failure, for KEYS_RETRY_S, the same
        failure at once (the lookups queued behind a locked database do not each wait for
        it a second)."""
        assert self.keys is not None
        if time.monotonic() < self.keys_down_until:
            raise sqlite3.OperationalError("the keys database failed a moment ago")
        try:
            return self.keys.lookup(key)
        except sqlite3.Error as exc:
            log.error("the API keys database %s cannot be read: %s", self.keys.path, exc)
            self.keys_down_until = time.monotonic() + KEYS_RETRY_S
            raise

    def keys_unavailable(self) -> ApiError:
        """503 for a key that cannot be checked, counted in mt_rejected_requests_total."""
        if self.metrics is not None:
            self.metrics.rejected.labels("keys_unavailable").inc()
        return keys_unavailable()

    @property
    def key_required(self) -> bool:
        return self.settings.api_keys_required

    async def key_info(self, params: dict[str, Any]) -> KeyInfo | None:
        """The record of the request's key (None without a key, or without a keys database);
        403 for a key that is not one, 503 when the database cannot be read."""
        key = params.get("api_key")
        if key is not None and not isinstance(key, str):
            raise ApiError(400, "`api_key` must be a text")
        if not key or self.keys is None:
            return None
        if time.monotonic() < self.keys_down_until:  # it failed a moment ago
            raise self.keys_unavailable()
        try:
            loop = asyncio.get_running_loop()
            info = await loop.run_in_executor(self.lookups, self._lookup, key)
        except sqlite3.Error as exc:  # locked by another process, removed, damaged
            raise self.keys_unavailable() from exc
        if info is None:
            raise ApiError(403, INVALID_KEY)
        return info

    async def admit(self, params: dict[str, Any], scope: Scope, cost: Cost | None = None) -> Grant:
        """Checks the request's key and counts it against its requests per minute; `cost`,
        where it is known from the parameters, is refused first (413) when it is more than
        the whole limit (a full window answered 429 and a retry after it then 413)."""
        s = self.settings
        info = await self.key_info(params)
        if info is None and self.key_required:
            raise ApiError(403, KEY_NEEDED)
        if info is not None:
            who = f"key:{info.id}"
            grant = Grant(
                who,
                info.req_per_minute or s.req_limit_per_minute,
                info.chars_per_request or 0,
                info.chars_per_day or s.char_limit_per_day,
            )
        else:
            client = scope.get("client") or ("unknown", 0)
            grant = Grant(f"addr:{client[0]}", s.req_limit_per_minute, 0, s.char_limit_per_day)
        if grant.req_per_minute:
            if cost is not None and cost.requests > grant.req_per_minute:
                raise ApiError(413, cost.too_much(grant.req_per_minute))
            counted = self.requests.hit(grant.req_per_minute, grant.who)
            if counted is None:
                raise slow_down(
                    f"{grant.req_per_minute} requests per minute",
                    self.requests.room_at(grant.req_per_minute, grant.who),
                )
            grant = replace(grant, counted=counted)
        return grant

    @contextlib.contextmanager
    def charging(self, grant: Grant) -> Iterator[Callable[..., None]]:
        """Yields `charge(chars, cost=None, file=False)`, which counts characters against the
        grant's limits, and a request's `cost` (a `Cost`) against its requests per minute (429
        or 413 over them); the characters it charged are given back when the block raises,
        unless the client went away (499): the server refused or failed the request."""
        charged = 0

        def charge(chars: int, cost: Cost | None = None, file: bool = False) -> None:
            nonlocal charged
            self.charge(grant, chars, cost, file=file)
            charged += chars

        try:
            yield charge
        except BaseException as exc:
            if charged and grant.chars_per_day and getattr(exc, "status", None) != 499:
                item = RateLimitItemPerDay(grant.chars_per_day)
                # the limiter's storage is the MemoryStorage of __init__
                storage = cast(MemoryStorage, self.chars.storage)
                storage.decr(item.key_for(grant.who), charged)
            raise

    def charge(
        self, grant: Grant, chars: int, cost: Cost | None = None, *, file: bool = False
    ) -> None:
        """Counts a request's characters against the grant's limits (`charging` gives them
        back if the request then fails), and the rest of its cost against its requests per
        minute (`admit` counted one); nothing is counted when either is refused. A file's
        characters are not held to the key's characters per request: each of its texts is,
        as to the server's (app/file_routes.py)."""
        extra = self.check_cost(grant, cost, give_back=not file) if cost is not None else 0
        self.check_chars(grant, chars, per_request=not file)
        if extra:
            self.requests.hit(grant.req_per_minute, grant.who, extra)
        if grant.chars_per_day:
            self.chars.hit(RateLimitItemPerDay(grant.chars_per_day), grant.who, cost=chars)

    def check_cost(self, grant: Grant, cost: Cost, give_back: bool = True) -> int:
        """The requests beyond the one `admit` counted that `cost` still takes from the
        grant's requests per minute: 413 when it is more than the whole limit, 429 when the
        window has no room for it now (and the one `admit` counted is given back, unless not
        `give_back`: a file's cost is known once the server has read and parsed it)."""
        limit = grant.req_per_minute
        if not limit or cost.requests <= 1:
            return 0
        if cost.requests > limit:
            raise ApiError(413, cost.too_much(limit))
        extra = cost.requests - 1
        if not self.requests.fits(limit, grant.who, extra):
            if give_back:
                self.requests.give_back(limit, grant.who, grant.counted)
            raise slow_down(
                f"{limit} requests per minute; this request counts as {cost.requests} and "
                f"{self.requests.left(limit, grant.who)} fit now",
                self.requests.room_at(limit, grant.who, cost.requests),
            )
        return extra

    def check_chars(self, grant: Grant, chars: int, per_request: bool = True) -> None:
        """413 or 429 when `chars` are over the grant's characters per request or per day."""
        if per_request and grant.chars_per_request and chars > grant.chars_per_request:
            raise ApiError(
                413,
                f"{chars} characters in this request; this key allows at most "
                f"{grant.chars_per_request} per request",
            )
        if grant.chars_per_day:
            item = RateLimitItemPerDay(grant.chars_per_day)
            if chars > grant.chars_per_day:
                raise ApiError(
                    413,
                    f"{chars} characters in this request; at most {grant.chars_per_day} per day",
                )
            if not self.chars.test(item, grant.who, cost=chars):
                stats = self.chars.get_window_stats(item, grant.who)
                raise slow_down(
                    f"{grant.chars_per_day} characters per day ({stats.remaining} left)",
                    stats.reset_time,
                )


def text_chars(q: Any) -> int:
    """Characters of `q` (a text or a list of texts; anything else counts 0 and is refused
    later by the request's validation)."""
    if isinstance(q, str):
        return len(q)
    if isinstance(q, list):
        return sum(len(t) for t in q if isinstance(t, str))
    return 0
