"""HTTP routes. Every error is JSON {"error": "..."} that says what to change."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .endpoints import detect_endpoint, translate_endpoint
from .fastpath import check_not_encoded, read_all
from .formats import CONTENT_TYPES as FILE_EXTENSIONS
from .keys import KeyInfo
from .params import content_type, field_limit, form_params
from .schemas import (
    LANGUAGE_NAMES,
    Detection,
    DetectRequest,
    FrontendSettings,
    Language,
    TranslateRequest,
    TranslateResponse,
    error_responses,
)
from .translate import FORM_TYPES, check_accepting, json_bytes, parse_json, still_loading

router = APIRouter()


class JSONBody(JSONResponse):
    """Starlette's JSONResponse, written as the fast path writes JSON (never fails on text
    that UTF-8 cannot hold)."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


@router.post(
    "/translate",
    response_model=TranslateResponse,
    responses=error_responses(400, 403, 408, 413, 415, 429, 500, 503, 504),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": TranslateRequest.model_json_schema()},
                "application/x-www-form-urlencoded": {
                    "schema": TranslateRequest.model_json_schema()
                },
                "multipart/form-data": {"schema": TranslateRequest.model_json_schema()},
            },
        }
    },
)
async def translate(request: Request):
    """Translate text (LibreTranslate-compatible); long text is split into sentences.

    The parameters may come as JSON, form data, multipart or in the query string (or the query
    string and a body together). The plain-ASGI fast path in front of the app serves these
    requests (app/fastpath.py) with the same code and less per-request work."""
    started = time.perf_counter()
    state = request.app.state
    check_accepting(state)
    body = await translate_endpoint(
        state, request.scope, await request.body(), request.receive, started
    )
    if body is None:
        return Response(status_code=499)
    return JSONBody(body)


@router.post(
    "/detect",
    response_model=list[Detection],
    responses=error_responses(400, 403, 408, 413, 415, 429, 503),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": DetectRequest.model_json_schema()},
                "application/x-www-form-urlencoded": {"schema": DetectRequest.model_json_schema()},
            },
        }
    },
)
async def detect(request: Request):
    """The language of `q`, best first, among those the loaded models serve (LibreTranslate's
    /detect). Served by the fast path (app/fastpath.py) with the same code."""
    state = request.app.state
    check_accepting(state)
    raw = await request.body()
    return JSONBody(
        await detect_endpoint(state, request.scope, raw, request.receive, time.perf_counter())
    )


def started_engine(state: Any):
    """The engine, once start-up has listed and loaded the models; until then 503 (an empty
    language list with 200 would tell a client that nothing is served)."""
    engine = getattr(state, "engine", None)
    if engine is None:
        raise still_loading(state)
    return engine


@router.get("/languages", response_model=list[Language], responses=error_responses(503))
async def languages(request: Request):
    """LibreTranslate's language list: every served model's languages (loaded or not), with
    the targets each source reaches directly or through the pivot language; 503 while the
    server starts. Also answered to POST (not in the schema): LibreTranslate took both until
    its 1.3 releases, and clients written for them still post (argos-translate's
    LibreTranslateAPI sends its request with a body)."""
    reachable = started_engine(request.app.state).registry.reachable()
    return [
        Language(code=s, name=LANGUAGE_NAMES.get(s, s), targets=targets)
        for s, targets in reachable.items()
    ]


router.post("/languages", include_in_schema=False)(languages)


@router.get(
    "/frontend/settings", responses={200: {"model": FrontendSettings}, **error_responses(503)}
)
async def frontend_settings(request: Request):
    """LibreTranslate's settings for web pages: limits, keys, file formats, default languages
    (and this server's per-minute and per-day limits, which LibreTranslate does not report)."""
    return settings_for(request.app.state, None)


@router.post(
    "/frontend/settings",
    responses={200: {"model": FrontendSettings}, **error_responses(400, 403, 503)},
)
async def frontend_settings_for_key(request: Request):
    """The same settings as they apply to the key sent in the body (`api_key`, as JSON or form
    data, never in the URL): the key's own limits where it has them (`charLimit`, the lower of
    the key's and the server's). Not counted as a request; a key that is not one is a 403, as
    on /translate. (An addition of this server's: LibreTranslate has GET only.)"""
    state = request.app.state
    s, scope = state.settings, request.scope
    check_not_encoded(scope)  # 415, as /translate answers a compressed body
    raw = await read_all(scope, request.receive, s.max_body_bytes, s.body_timeout_s)
    if raw is None:  # the client went away
        return Response(status_code=499)
    if content_type(scope["headers"]) in FORM_TYPES:
        params = await form_params(scope, raw, field_limit(state.settings))
    else:
        params = parse_json(raw, "api_key", numbers="") if raw.strip() else {}
    return settings_for(state, await state.access.key_info(params))


def settings_for(state: Any, key: KeyInfo | None) -> dict[str, Any]:
    """/frontend/settings' answer, with the limits of `key` where it has its own."""
    s = state.settings
    targets = sorted({t for _, t in started_engine(state).pairs})
    target = next((t for t in targets if t != "en"), targets[0] if targets else "")
    chars = min(s.max_request_chars, (key and key.chars_per_request) or s.max_request_chars)
    return {
        "charLimit": chars,
        "frontendTimeout": s.frontend_timeout_ms,
        "apiKeys": state.access.keys is not None,
        "keyRequired": s.api_keys_required,
        "suggestions": False,
        "filesTranslation": True,
        "supportedFilesFormat": list(FILE_EXTENSIONS),
        "language": {
            "source": {"code": "auto", "name": "Auto Detect"},
            "target": {"code": target, "name": LANGUAGE_NAMES.get(target, target)},
        },
        "reqLimitPerMinute": (key and key.req_per_minute) or s.req_limit_per_minute,
        "charLimitPerDay": (key and key.chars_per_day) or s.char_limit_per_day,
        "batchLimit": s.max_texts,
    }


SUGGESTIONS_DISABLED = "Suggestions are disabled on this server."


@router.post("/suggest", status_code=403, responses=error_responses(403))
async def suggest():
    """LibreTranslate's suggestion of a better translation: not taken (/frontend/settings says
    `suggestions: false`); refused as a LibreTranslate server without suggestions refuses it."""
    return JSONBody({"error": SUGGESTIONS_DISABLED}, status_code=403)


@router.get("/spec", include_in_schema=False)
async def spec(request: Request):
    """The OpenAPI schema (/openapi.json) where LibreTranslate serves its API's, titled as
    LibreTranslate titles it: the title names the API, and LibreTranslate's clients check it
    (Dialect adds a server only if /spec's title is "LibreTranslate")."""
    schema = request.app.openapi()
    info = schema["info"]
    return JSONBody(
        {
            **schema,
            "info": {
                **info,
                "title": "LibreTranslate",
                "description": f"{info['title']} {info['version']}: {info['description']}",
            },
        }
    )


@router.get("/models", responses=error_responses(503))
async def models(request: Request):
    """Each served model: name, languages, whether it is loaded, its weight bytes; once loaded
    also parameters, device, dtype, config and training summary."""
    engine = started_engine(request.app.state)  # 503 while the models load, as /languages
    out = []
    for name, entry in engine.registry.entries.items():
        source, target = entry.pairs[0]
        item: dict[str, Any] = {
            "name": name,
            "source": source,
            "target": target,
            "targets": [t for _, t in entry.pairs],  # several for a multi-target model
            "pairs": [{"source": s, "target": t} for s, t in entry.pairs],
            "loaded": entry.loaded,
            "weights_bytes": entry.size_bytes,
        }
        t = entry.translator
        if t is not None:
            training = t.checkpoint.training
            item.update(
                {
                    "parameters": t.parameters,
                    "device": str(t.device),
                    "dtype": t.precision,
                    "config": t.config.to_dict(),
                    "dev_bleu": training.get("dev_bleu"),
                    "trained_steps": training.get("steps"),
                }
            )
        out.append(item)
    return out


HEALTH_503 = (
    'Not ready: {"status": "loading"}, {"status": "draining"}, {"status": "failed", '
    '"error": ...} or {"status": "stalled", "error": ...}'
)


def stalled(state: Any) -> str | None:
    """Why the inference thread seems hung (its job has run past MT_STALL_TIMEOUT_S), or None:
    a hung thread left every health check at 200 while each request timed out."""
    worker, limit = getattr(state, "worker", None), state.settings.stall_timeout_s
    if worker is None or not limit:
        return None
    busy = worker.busy_for()
    if busy <= limit:
        return None
    return (
        f"the inference thread has run one job (a batch, a decoder step or a model's load) "
        f"for {busy:.0f} s, past MT_STALL_TIMEOUT_S ({limit:g} s)"
    )


def health_of(state: Any) -> tuple[int, dict[str, Any]]:
    """Readiness: 200 when requests can be translated; else 503 and why."""
    if state.draining:
        return 503, {"status": "draining"}
    if state.startup_error:
        return 503, {"status": "failed", "error": state.startup_error}
    if not state.ready:
        return 503, {"status": "loading"}
    problem = state.batcher.problem()
    if problem:  # the scheduler task or the worker thread ended: nothing would be translated
        return 503, {"status": "failed", "error": problem}
    hung = stalled(state)
    if hung:
        return 503, {"status": "stalled", "error": hung}
    engine = state.engine
    return 200, {
        "status": "ok",
        "models": sorted(engine.registry.entries),
        "loaded_models": sorted(engine.translators),
        "device": str(engine.device),
        "queue_depth": state.batcher.depth,
    }


def health_answer(state: Any) -> JSONBody:
    """`health_of` as an answer: while loading or draining, with Retry-After (the models
    will be ready, or another replica takes the requests); a failed start never recovers."""
    status, body = health_of(state)
    passing = body["status"] in ("loading", "draining")
    headers = {"Retry-After": str(state.settings.retry_after_s)} if passing else None
    return JSONBody(body, status_code=status, headers=headers)


@router.get("/health", responses={503: {"description": HEALTH_503}})
async def health(request: Request):
    """200 when the models are loaded and requests are taken; 503 while loading or draining
    (with Retry-After), after a failed start, or when the batcher's scheduler or worker thread
    has ended."""
    return health_answer(request.app.state)


@router.get("/health/ready", responses={503: {"description": HEALTH_503}})
async def ready(request: Request):
    """Readiness (same as /health)."""
    return health_answer(request.app.state)


@router.get(
    "/health/live",
    responses={503: {"description": 'Not alive: {"status": "failed" or "stalled", "error": ...}'}},
)
async def live(request: Request):
    """Liveness: 200 while the process answers and can still translate; 503 when the batcher's
    scheduler or worker thread has ended, or the worker seems hung (MT_STALL_TIMEOUT_S): a
    restart is what brings such a process back (it answered 200, and was never restarted)."""
    state = request.app.state
    if state.draining or not state.ready:  # (a model's load at start-up may take long)
        return {"status": "alive"}
    problem = state.batcher.problem()
    if problem:
        return JSONBody({"status": "failed", "error": problem}, status_code=503)
    hung = stalled(state)
    if hung:
        return JSONBody({"status": "stalled", "error": hung}, status_code=503)
    return {"status": "alive"}


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
async def metrics(request: Request):
    """Prometheus text format."""
    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
