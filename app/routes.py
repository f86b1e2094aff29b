"""HTTP routes. Every error is JSON {"error": "..."} that says what to change."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .schemas import LANGUAGE_NAMES, ErrorResponse, Language, TranslateRequest, TranslateResponse
from .translate import FORM_TYPES, check_accepting, json_bytes, parse_json
from .translate import translate as translate_data

router = APIRouter()


class JSONBody(JSONResponse):
    """Starlette's JSONResponse, written as the fast path writes JSON (never fails on text
    that UTF-8 cannot hold)."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


async def read_body(request: Request) -> dict[str, Any]:
    """A form body (LibreTranslate clients send these; a repeated `q` becomes a list), or JSON."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype in FORM_TYPES:
        form = await request.form()
        data: dict[str, Any] = {k: v for k, v in form.items() if isinstance(v, str)}
        qs = [v for v in form.getlist("q") if isinstance(v, str)]
        if len(qs) > 1:
            data["q"] = qs
        return data
    return parse_json(await request.body())


@router.post(
    "/translate",
    response_model=TranslateResponse,
    responses={
        400: {"model": ErrorResponse},
        413: {"model": ErrorResponse},
        503: {"model": ErrorResponse},
        504: {"model": ErrorResponse},
        500: {"model": ErrorResponse},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": TranslateRequest.model_json_schema()},
                "application/x-www-form-urlencoded": {
                    "schema": TranslateRequest.model_json_schema()
                },
            },
        }
    },
)
async def translate(request: Request):
    """Translate text (LibreTranslate-compatible); long text is split into sentences.

    JSON bodies are served by the plain-ASGI fast path in front of the app (app/fastpath.py),
    which does the same with less per-request work; form bodies arrive here."""
    started = time.perf_counter()
    state = request.app.state
    check_accepting(state)
    body = await translate_data(state, await read_body(request), request.receive, started)
    if body is None:
        return Response(status_code=499)
    return JSONBody(body)


@router.get("/languages", response_model=list[Language])
async def languages(request: Request):
    """LibreTranslate's language list, from the loaded models."""
    engine = getattr(request.app.state, "engine", None)
    pairs = engine.pairs if engine else {}
    sources = sorted({s for s, _ in pairs})
    return [
        Language(
            code=s, name=LANGUAGE_NAMES.get(s, s), targets=sorted(t for x, t in pairs if x == s)
        )
        for s in sources
    ]


@router.get("/models")
async def models(request: Request):
    """Each loaded model: name, languages, parameters, device, dtype, training summary."""
    engine = getattr(request.app.state, "engine", None)
    out = []
    for name, t in engine.translators.items() if engine else []:
        training = t.checkpoint.training
        out.append(
            {
                "name": name,
                "source": t.source_language,
                "target": t.target_language,
                "targets": t.target_languages,
                "parameters": t.parameters,
                "device": str(t.device),
                "dtype": t.precision,
                "config": t.config.to_dict(),
                "dev_bleu": training.get("dev_bleu"),
                "trained_steps": training.get("steps"),
            }
        )
    return out


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
    engine = state.engine
    devices = sorted({str(t.device) for t in engine.translators.values()})
    return 200, {
        "status": "ok",
        "models": sorted(engine.translators),
        "device": ", ".join(devices),
        "queue_depth": state.batcher.depth,
    }


@router.get("/health")
async def health(request: Request):
    """200 when the models are loaded and requests are taken; 503 while loading or draining,
    after a failed start, or when the batcher's scheduler or worker thread has ended."""
    status, body = health_of(request.app.state)
    return JSONBody(body, status_code=status)


@router.get("/health/ready")
async def ready(request: Request):
    """Readiness (same as /health)."""
    status, body = health_of(request.app.state)
    return JSONBody(body, status_code=status)


@router.get("/health/live")
async def live():
    """Liveness: the process answers."""
    return {"status": "alive"}


@router.get("/metrics")
async def metrics(request: Request):
    """Prometheus text format."""
    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
