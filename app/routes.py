"""HTTP routes. Every error is JSON {"error": "..."} that says what to change."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError

from .batcher import BatchFailed, DeadlineExceeded, QueueFull, ShuttingDown
from .engine import DecodeKey, SentenceResult
from .schemas import LANGUAGE_NAMES, ErrorResponse, Language, TranslateRequest, TranslateResponse
from .text import split_long, split_text

router = APIRouter()


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def unavailable(request: Request, why: str) -> ApiError:
    retry = str(request.app.state.settings.retry_after_s)
    return ApiError(503, why, {"Retry-After": retry})


def describe_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "invalid request: " + "; ".join(parts)


async def read_body(request: Request) -> dict[str, Any]:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.form()
        data: dict[str, Any] = {k: v for k, v in form.items() if isinstance(v, str)}
        qs = [v for v in form.getlist("q") if isinstance(v, str)]
        if len(qs) > 1:
            data["q"] = qs
        return data
    raw = await request.body()
    try:
        data = json.loads(raw) if raw else None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the body is not valid JSON ({exc}); send JSON or form data") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object with q, source and target")
    return data


def available_pairs(request: Request) -> str:
    return ", ".join(f"{s}->{t}" for s, t in sorted(request.app.state.engine.pairs))


def resolve_model(request: Request, source: str, target: str) -> tuple[str, str]:
    """(model name, source language); 'auto' works when one source can reach the target."""
    pairs = request.app.state.engine.pairs
    if source == "auto":
        sources = [s for s, t in pairs if t == target]
        if len(sources) != 1:
            raise ApiError(
                400,
                f"cannot pick a source language for target '{target}'; "
                f"give `source` explicitly (available pairs: {available_pairs(request)})",
            )
        source = sources[0]
    if (source, target) not in pairs:
        raise ApiError(
            400,
            f"no model translates '{source}' to '{target}'; available pairs: "
            f"{available_pairs(request)}",
        )
    return pairs[(source, target)], source


def checked_options(request: Request, req: TranslateRequest) -> tuple[list[str], int, int, int]:
    s = request.app.state.settings
    texts = [req.q] if isinstance(req.q, str) else list(req.q)
    if isinstance(req.q, str) and not req.q.strip():
        raise ApiError(400, "`q` is empty: give the text to translate")
    if not texts:
        raise ApiError(400, "`q` is an empty list: give at least one text")
    if len(texts) > s.max_texts:
        raise ApiError(413, f"{len(texts)} texts in `q`; at most {s.max_texts} per request")
    chars = sum(len(t) for t in texts)
    if chars > s.max_request_chars:
        raise ApiError(413, f"{chars} characters in `q`; at most {s.max_request_chars} per request")
    if req.format != "text":
        raise ApiError(400, f"format '{req.format}' is not supported; use 'text'")
    if req.alternatives > s.max_alternatives:
        raise ApiError(400, f"alternatives={req.alternatives}; at most {s.max_alternatives}")
    beam = req.beam_size or s.default_beam_size
    if beam > s.max_beam_size:
        raise ApiError(400, f"beam_size={beam}; it must be between 1 and {s.max_beam_size}")
    max_length = req.max_length or s.max_output_length
    if max_length > s.max_output_length:
        raise ApiError(400, f"max_length={max_length}; at most {s.max_output_length}")
    n_best = req.alternatives + 1
    return texts, max(beam, n_best), n_best, max_length


async def _client_gone(request: Request) -> None:
    """Returns when the client disconnects (the body has been read, so only that can arrive)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def wait_or_disconnect(
    request: Request, ticket, timeout: float
) -> list[SentenceResult] | None:
    """Results, or None when the client went away (its waiting sentences are dropped)."""
    state = request.app.state
    waiter = asyncio.ensure_future(state.batcher.wait(ticket, timeout))
    gone = asyncio.ensure_future(_client_gone(request))
    try:
        await asyncio.wait({waiter, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if waiter.done():
        return waiter.result()
    dropped = state.batcher.cancel(ticket)
    waiter.cancel()
    state.metrics.cancelled.inc()
    state.metrics.dropped.labels("client_disconnected").inc(dropped)
    return None


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
    """Translate text (LibreTranslate-compatible); long text is split into sentences."""
    state = request.app.state
    if state.draining:
        raise unavailable(request, "the server is shutting down; retry on another replica")
    if not state.ready:
        raise unavailable(request, "the models are still loading; retry shortly")
    started = time.perf_counter()
    try:
        req = TranslateRequest.model_validate(await read_body(request))
    except ValidationError as exc:
        raise ApiError(400, describe_validation(exc)) from None
    texts, beam, n_best, max_length = checked_options(request, req)
    model, source = resolve_model(request, req.source, req.target)
    translator = state.engine.translators[model]
    limit = min(state.settings.max_sentence_tokens, translator.max_source_tokens)

    encoded: dict[str, list[int]] = {}  # each piece is tokenized once (counted, then sent)

    def encode(text: str) -> list[int]:
        if text not in encoded:
            encoded[text] = translator.encode_source(text)
        return encoded[text]

    def count(text: str) -> int:
        return len(encode(text))

    layouts, payloads = [], []  # per text: prefix, [(number of pieces, separator)]
    for text in texts:
        prefix, sentences = split_text(text)
        layout = []
        for sentence, sep in sentences:
            pieces = split_long(sentence, count, limit)
            payloads.extend(encode(p) for p in pieces)
            layout.append((len(pieces), sep))
        layouts.append((prefix, layout))
    key = DecodeKey(model, beam, n_best, max_length)
    metrics = state.metrics
    try:
        ticket = (
            state.batcher.submit(key, payloads, [len(p) + 1 for p in payloads])
            if payloads
            else None
        )
    except QueueFull as exc:
        metrics.rejected.labels("queue_full").inc()
        raise unavailable(
            request, f"the server is busy ({exc}); retry after the Retry-After delay"
        ) from None
    except ShuttingDown:
        metrics.rejected.labels("draining").inc()
        raise unavailable(
            request, "the server is shutting down; retry on another replica"
        ) from None
    queued = time.perf_counter()
    try:
        results = (
            await wait_or_disconnect(request, ticket, state.settings.request_timeout_s)
            if ticket
            else []
        )
    except DeadlineExceeded as exc:
        metrics.timed_out.inc()
        metrics.dropped.labels("deadline").inc(exc.dropped)
        raise ApiError(
            504,
            f"the translation did not finish within {state.settings.request_timeout_s} s; "
            "send less text per request or retry later",
        ) from None
    except BatchFailed as exc:
        raise ApiError(
            500, f"translation failed (error id {exc.error_id}); the server log has the details"
        ) from None
    except ShuttingDown:
        raise unavailable(
            request, "the server shut down before this request was translated"
        ) from None
    if results is None:
        return Response(status_code=499)
    metrics.sentences.inc(len(results))
    metrics.input_tokens.inc(sum(len(p) + 1 for p in payloads))
    metrics.generated_tokens.inc(sum(r.generated_tokens for r in results))
    outputs: list[list[str]] = [[] for _ in range(n_best)]
    it = iter(results)
    for prefix, layout in layouts:
        parts: list[list[str]] = [[prefix] for _ in range(n_best)]
        for n_pieces, sep in layout:
            chunk = [next(it) for _ in range(n_pieces)]
            for k in range(n_best):
                parts[k].append(" ".join(r.texts[min(k, len(r.texts) - 1)] for r in chunk) + sep)
        for k in range(n_best):
            outputs[k].append("".join(parts[k]))
    single = isinstance(req.q, str)
    body: dict[str, Any] = {
        "translatedText": outputs[0][0] if single else outputs[0],
        "model": model,
        "timings": {
            "total_ms": round((time.perf_counter() - started) * 1000, 2),
            "queue_and_compute_ms": round((time.perf_counter() - queued) * 1000, 2),
            "compute_ms": round(ticket.compute_s * 1000, 2) if ticket else 0.0,
        },
    }
    if req.alternatives:
        alts = [[outputs[k][i] for k in range(1, n_best)] for i in range(len(texts))]
        body["alternatives"] = alts[0] if single else alts
    if req.source == "auto":
        body["detectedLanguage"] = {"language": source, "confidence": 100.0}
    return JSONResponse(body)


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
                "parameters": t.parameters,
                "device": str(t.device),
                "dtype": t.precision,
                "config": t.config.to_dict(),
                "dev_bleu": training.get("dev_bleu"),
                "trained_steps": training.get("steps"),
            }
        )
    return out


def health_body(request: Request) -> tuple[int, dict[str, Any]]:
    state = request.app.state
    if state.draining:
        return 503, {"status": "draining"}
    if state.startup_error:
        return 503, {"status": "failed", "error": state.startup_error}
    if not state.ready:
        return 503, {"status": "loading"}
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
    """200 when the models are loaded and requests are taken; 503 while loading or draining."""
    status, body = health_body(request)
    return JSONResponse(body, status_code=status)


@router.get("/health/ready")
async def ready(request: Request):
    """Readiness (same as /health)."""
    status, body = health_body(request)
    return JSONResponse(body, status_code=status)


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
