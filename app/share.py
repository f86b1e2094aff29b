"""One request's share of the queue (MT_MAX_REQUEST_SHARE of MT_MAX_QUEUE_SIZE), counted over
all the models it goes to.

With `source: auto` a request's texts can be detected in several languages, and each
language's texts take their own route (a model, or two through the pivot language) side by
side; each route tokenizes and queues its pieces on its own. Counted per route, a request
could queue its share once per route. So the routes' first legs are counted together: each
one, once tokenized, waits here until every route's first leg is counted, and the request is
refused when their sum is over the share. The second leg of a route through the pivot
language is known only once the first is translated: its pieces are counted then, in place
of the first leg's where they are more, beside the other routes' counts. What the request is
refused for is so the sum over its routes of the most pieces each queues at once (its larger
leg), whatever order its legs end in.

No torch and no HTTP: `claim` says why the request is over its share, the caller answers it.
"""

from __future__ import annotations

import asyncio

#: how a request's sentences become more pieces than sentences (the queue holds pieces)
PIECES_WHY = (
    "a sentence too long for the model is cut, and the words between URLs or e-mail "
    "addresses are translated apart; a piece repeated is counted once"
)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def too_many_pieces(sentences: int, pieces: int, share: int) -> str:
    """Why a request of `sentences` to decode in `pieces` is over its `share` of the queue,
    in the words of what the client sent."""
    said = plural(sentences, "sentence")
    if pieces == sentences:
        return (
            f"`q` holds {said}; the server takes at most {share} from one request (send them "
            "in several requests)"
        )
    return (
        f"`q` holds {said} to translate in {pieces} pieces ({PIECES_WHY}); the server takes "
        f"at most {plural(share, 'piece')} from one request (send the text in several requests)"
    )


class RequestShare:
    """The pieces one request's routes claim; `limit`: the most it may queue, `routes`: the
    models of each route (one, or two through the `pivot` language)."""

    def __init__(self, limit: int, routes: list[list[str]], pivot: str = ""):
        self.limit, self.routes, self.pivot = limit, routes, pivot
        self._sentences = [0] * len(routes)  # each route's sentences (its first leg's text)
        self._pieces: list[int | None] = [None] * len(routes)  # each route's larger leg so far
        self._counted = asyncio.Event()  # every route's first leg is counted

    @property
    def total(self) -> int:
        return sum(p or 0 for p in self._pieces)

    async def claim(self, route: int, leg: int, sentences: int, pieces: int) -> str | None:
        """Counts `pieces` (from `sentences`) of leg `leg` (0: the first) of route `route`;
        returns why the request is then over its share, or None. A first leg returns once
        every route's first leg is counted (a route that fails before is cancelled with the
        request, and its waiting routes with it)."""
        if leg == 0:
            self._sentences[route], self._pieces[route] = sentences, pieces
            if None in self._pieces:
                await self._counted.wait()
            else:
                self._counted.set()
            if self.total <= self.limit:
                return None
            if len(self.routes) == 1:
                return too_many_pieces(sentences, pieces, self.limit)
            return self._over_routes()
        self._pieces[route] = max(self._pieces[route] or 0, pieces)
        if self.total <= self.limit:
            return None
        return self._over_pivot(route, pieces)

    def _over_routes(self) -> str:
        sentences, total = sum(self._sentences), self.total
        each = ", ".join(
            f"{'+'.join(models)}: {pieces}"
            for models, pieces in zip(self.routes, self._pieces, strict=True)
        )
        why = "" if total == sentences else f" ({PIECES_WHY})"
        return (
            f"`q` holds {plural(sentences, 'sentence')} whose texts go to {len(self.routes)} "
            f"models side by side, by their language ({each} pieces): {total} pieces in "
            f"all{why}; the server takes at most {plural(self.limit, 'piece')} from one "
            "request, over all its models (send the texts in several requests)"
        )

    def _over_pivot(self, route: int, pieces: int) -> str:
        models = self.routes[route]
        others = self.total - (self._pieces[route] or 0)
        beside = f", beside {others} for its other texts" if others else ""
        return (
            f"`q`, translated into '{self.pivot}' by {models[0]} on the way to {models[-1]}, is "
            f"{plural(pieces, 'piece')} to translate again{beside}; the server takes at most "
            f"{plural(self.limit, 'piece')} from one request (send the text in several "
            "requests)"
        )
