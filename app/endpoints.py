"""POST /translate and POST /detect from a request's scope and body, for both front ends.

The plain-ASGI fast path (app/fastpath.py) calls these for every POST to the two paths; the
FastAPI routes (app/routes.py), which document them in the OpenAPI schema, call the same
functions. The parameters come from `request_params` (app/params.py: JSON, form, multipart,
query string).
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import Receive, Scope

from .access import text_chars
from .detect import readable
from .params import field_limit, request_params
from .request_cost import texts_cost
from .translate import (
    _SURROGATE,
    Q_TYPE,
    ApiError,
    too_many_chars,
    too_many_texts,
    without_addresses,
)
from .translate import translate as translate_data


async def translate_endpoint(
    state: Any, scope: Scope, raw: bytes, receive: Receive, started: float
) -> dict[str, Any] | None:
    data = await request_params(scope, raw, field_limit(state.settings))
    access = state.access
    cost = texts_cost(data.get("q"))
    grant = await access.admit(
        data, scope, cost
    )  # the key, and the request counted against its rate
    with access.charging(grant) as charge:  # a valid request's characters count, and its cost

        def on_valid(texts: list[str]) -> None:
            charge(text_chars(texts), cost)

        return await translate_data(state, data, receive, started, on_valid)


def detect_texts(state: Any, data: dict[str, Any]) -> list[str]:
    q = data.get("q")
    if "q" not in data:  # (a client that sends `text`)
        raise ApiError(400, "`q` is missing: give the text whose language to detect")
    texts = [q] if isinstance(q, str) else q
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ApiError(400, Q_TYPE)
    if not texts or not any(readable(t).strip() for t in texts):  # (a soft hyphen alone: blank)
        raise ApiError(400, "`q` is empty: give the text whose language to detect")
    s = state.settings
    if len(texts) > s.max_texts:
        raise too_many_texts(len(texts), s.max_texts)
    chars = sum(len(t) for t in texts)
    if chars > s.max_request_chars:
        raise too_many_chars(chars, None if isinstance(q, str) else texts, s.max_request_chars)
    if any(_SURROGATE.search(t) for t in texts):
        raise ApiError(400, "`q` holds an unpaired UTF-16 surrogate; send valid Unicode")
    return texts


async def detect_endpoint(
    state: Any, scope: Scope, raw: bytes, receive: Receive, started: float
) -> list[dict[str, Any]]:
    """LibreTranslate's answer: the languages of the text, best first, each with its confidence
    in percent. For a list `q`, as LibreTranslate answers it, one such list for the texts
    together (each language's confidence averaged over the texts that are not blank). A tie
    is ordered as `source: auto` breaks it (app/detect.py: `Detector.order`). A text
    in a language no model serves gives each served language the full model's confidence,
    near 0 (app/detect.py: `Detector.rank_checked`)."""
    data = await request_params(scope, raw, field_limit(state.settings))
    access = state.access
    grant = await access.admit(data, scope)
    texts = detect_texts(state, data)
    with access.charging(grant) as charge:
        charge(text_chars(texts))
        # as POST /translate detects them; a blank text has no language to count
        read = [without_addresses(t) for t in texts if readable(t).strip()]
        detector = state.detector
        ranked = await asyncio.to_thread(lambda: [detector.rank_checked(t) for t in read])
    total: dict[str, float] = {}
    for text_ranked in ranked:
        for lang, conf in text_ranked:
            total[lang] = total.get(lang, 0.0) + conf / len(ranked)
    best = state.detector.order(total.items())  # a tie as `source: auto` breaks it
    return [{"language": lang, "confidence": conf} for lang, conf in best]


HANDLERS = {"/translate": translate_endpoint, "/detect": detect_endpoint}
