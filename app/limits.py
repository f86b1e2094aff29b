"""The cap on HTTP requests in progress (`max_concurrency`), in plain ASGI.

Beyond the cap a request is answered at once with 503, a Retry-After header and a JSON error,
and its connection is closed, so that a crowd of slow or stuck clients cannot hold an unbounded
number of sockets and requests in memory. uvicorn's own `limit_concurrency` was not used: it
answers a plain-text 503 without Retry-After, counts idle keep-alive connections as well, and
answers before the application sees the request, so it would not be counted in the metrics.

Probes and scrapes (/health, /health/*, /metrics) are never refused: an orchestrator must still
see a busy server as alive and ready, and monitoring must still see why it is busy.
"""

from __future__ import annotations

from typing import Any

from .fastpath import send_json
from .translate import json_bytes

EXEMPT = ("/health", "/metrics")


def exempt(path: str) -> bool:
    return path in EXEMPT or path.startswith("/health/")


class ConcurrencyLimit:
    def __init__(self, app, state: Any):
        self.app, self.state = app, state
        self.in_progress = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or exempt(scope["path"]):
            return await self.app(scope, receive, send)
        settings = self.state.settings
        if self.in_progress >= settings.max_concurrency:
            self.state.metrics.rejected.labels("concurrency").inc()
            return await self.refuse(send, settings)
        self.in_progress += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_progress -= 1

    @staticmethod
    async def refuse(send, settings) -> None:
        message = (
            f"the server is serving its limit of {settings.max_concurrency} requests at once; "
            "retry after the Retry-After delay"
        )
        headers = {"Retry-After": str(settings.retry_after_s), "Connection": "close"}
        await send_json(send, 503, json_bytes({"error": message}), headers)
