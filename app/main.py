"""The FastAPI application: `create_app(settings)` and the `mt-serve` command.

Models load in the lifespan, in the background: the port answers at once, /health says 503
"loading" until the models are on the device and warmed up, then 200. A bad checkpoint logs one
line naming the directory and the problem and the process exits with status 1. On SIGTERM the
server answers 503 to new requests, finishes the ones it accepted (up to shutdown_timeout_s),
then exits.
"""

from __future__ import annotations

if __name__ == "__main__":
    # `python -m app.main` runs as the console script does: mt_serve imports this
    # module itself, so that a Ctrl-C while torch imports is one line (status 130)
    from app.launch import mt_serve

    raise SystemExit(mt_serve())

import asyncio
import contextlib
import copy
import json
import logging
import os
import re
import signal
import socket
import sqlite3
import sys
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Scope

from model_core.langcodes import two_letter
from model_core.verbatim import places

from .access import Access
from .batcher import MicroBatcher, Worker
from .command import checked_settings, parse_arguments
from .continuous import ContinuousBatcher
from .detect import Detector
from .endpoints import HANDLERS
from .engine import StartupError, start_engine
from .fastpath import TranslateFastPath
from .file_routes import router as file_router
from .files import prepare_directory
from .keys import database_problem, install_log_redaction, redact_path
from .limits import ConcurrencyLimit, exempt
from .metrics import Metrics, outcome
from .protocol import bound
from .routes import JSONBody, health_of, router
from .settings import Settings, unknown_variables
from .translate import ApiError, internal_error
from .web import DOCS_FILES, DOCS_PATH
from .web import router as web_router

log = logging.getLogger("app")
# python-multipart warns of a malformed body ("Expected boundary character 45, got 103 at
# index 2", with no client or path): a client's mistake, which the 400's own line logs
for _name in ("python_multipart", "multipart"):  # (its name before python-multipart 0.0.13)
    logging.getLogger(_name).setLevel(logging.ERROR)


async def load_models(app: FastAPI) -> None:
    state, s = app.state, app.state.settings
    started = time.perf_counter()
    log.info("loading the models in %s: /health answers 503 until they are ready", s.weights_dir)
    # one thread does all the torch work: loading, warm-up, then every batch (see start_engine)
    worker = Worker()
    state.worker = worker  # watched by /health for a job that does not end (routes.py)
    state.metrics.worker_busy.set_function(worker.busy_for)
    stop = threading.Event()
    try:
        engine = await worker.run(start_engine, s, state.metrics, stop)
    except asyncio.CancelledError:  # shutdown while loading: the process exits once the model
        # being loaded is (its load cannot be cut short), without loading the others
        log.info("shutting down while loading the models: no model is loaded after this one")
        stop.set()
        worker.stop()
        await worker.join()
        raise
    except Exception as exc:  # noqa: BLE001 (whatever stops the models loading stops start-up)
        worker.stop()
        startup_failed(state, exc, "loading the models")
        return
    metrics: Metrics = state.metrics
    common = dict(
        max_batch_size=s.max_batch_size,
        max_queue_size=s.max_queue_size,
        on_batch=metrics.observe_batch,
        on_depth=metrics.queue_depth.set,
        worker=worker,
    )
    batcher: ContinuousBatcher | MicroBatcher
    if s.scheduler == "continuous":
        batcher = ContinuousBatcher(
            engine.open_group,
            engine.group_of,
            envelope=engine.envelope,
            budget=s.max_running_tokens,
            places=engine.places_for(s.max_running_rows),
            step_places=engine.places_for(s.max_step_rows) if s.max_step_rows else None,
            step_wait=s.step_bound_wait_ms / 1000,
            join_every=s.join_every_steps,
            on_running=metrics.running.set,
            kept=engine.kept_footprints if engine.fixed else None,
            release=engine.release_kept if engine.fixed else None,
            **common,
        )
    else:
        batcher = MicroBatcher(
            engine.run, max_batch_tokens=s.max_batch_tokens, max_wait_ms=s.max_wait_ms, **common
        )
    await batcher.start()
    engine.registry.worker_run = worker.run  # later loads run on the same thread
    languages = {lang for pair in engine.pairs for lang in pair}
    try:
        state.detector = await asyncio.to_thread(Detector, languages, s.pivot_language or None)
        if s.keep_names:  # CLDR's names of places per pair, read once here, not in a request
            await asyncio.to_thread(read_places, engine.pairs)
    except asyncio.CancelledError:  # shutdown before it is ready: nothing was queued yet
        await batcher.stop(0)  # (the lifespan stops only a batcher the state holds)
        raise
    except Exception as exc:  # noqa: BLE001 (as a model that fails to load, it stops start-up)
        await batcher.stop(0)  # and its worker thread with it
        startup_failed(state, exc, "building the language detection")
        return
    if state.detector.unknown:
        log.warning(
            "language detection cannot name %s: source 'auto' never picks them",
            ", ".join(state.detector.unknown),
        )
    state.engine, state.batcher, state.ready = engine, batcher, True
    log.info(
        "ready: %d model(s) served, in %.1f s, %d loaded (%s)",
        len(engine.registry.entries),
        time.perf_counter() - started,
        len(engine.translators),
        ", ".join(engine.translators) or "none",
    )


def startup_failed(state, exc: Exception, doing: str) -> None:
    """Start-up stops: `/health` says why, the log too, and under mt-serve the process exits
    with status 1."""
    state.startup_error = str(exc) or type(exc).__name__
    if isinstance(exc, StartupError):  # a setting or a file: the message says which
        log.error("startup failed: %s", exc)
    else:  # not foreseen: the traceback is for whoever reports it
        log.error("startup failed: %s while %s: %s", type(exc).__name__, doing, exc, exc_info=exc)
    request_exit = getattr(state, "request_exit", None)
    if request_exit is not None:  # set by mt-serve: stop the server, exit with status 1
        request_exit()


def start_draining(state) -> None:
    """New requests get 503 from now on; the shutdown timeout counts from the first call."""
    state.draining = True
    state.draining_since = state.draining_since or time.monotonic()


async def prune_files(state) -> None:
    """Expired translated files leave the disk within a few seconds of their time, not at the
    next upload or download."""
    every = max(1.0, min(10.0, state.settings.file_ttl_s / 2))
    while True:
        await asyncio.sleep(every)
        files = getattr(state, "files", None)
        if files is not None:
            try:
                files.prune()
            except OSError as exc:  # the next round tries again
                log.warning("removing expired translated files failed: %s", exc)


def read_places(pairs) -> None:
    """Reads CLDR's names of places for each pair (`verbatim.places`, cached: it gives none
    where it cannot read them), so that no request waits for them."""
    for source, target in pairs:
        places(two_letter(source), two_letter(target))


@asynccontextmanager
async def lifespan(app: FastAPI):
    s = app.state.settings
    if s.max_file_bytes > s.files_max_total_bytes:
        log.warning(
            "MT_MAX_FILE_BYTES (%d) is more than MT_FILES_MAX_TOTAL_BYTES (%d): an upload "
            "larger than the translated files kept in all is refused with 413",
            s.max_file_bytes,
            s.files_max_total_bytes,
        )
    loader = asyncio.create_task(load_models(app))
    pruner = asyncio.create_task(prune_files(app.state))
    yield
    state = app.state
    start_draining(state)
    pruner.cancel()
    if not loader.done():
        loader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loader
    if state.batcher is not None:
        # what is left of the shutdown timeout: uvicorn has already waited for the requests
        budget = state.settings.shutdown_timeout_s - (time.monotonic() - state.draining_since)
        if getattr(state, "forced", False):  # a second Ctrl-C: no time for what is left
            budget = 0.0
        await state.batcher.stop(max(budget, 0.0))
    # the translated files' links end with the process: their files go with it
    if getattr(state, "file_pool", None) is not None:
        state.file_pool.shutdown(wait=False, cancel_futures=True)
    if getattr(state, "files", None) is not None:
        state.files.close()
    if state.shutdown_untranslated:
        log.warning(
            "%s: %d sentence(s) were not translated (their requests got 503)",
            "forced quit" if getattr(state, "forced", False) else "shutdown timeout passed",
            state.shutdown_untranslated,
        )
    log.info("stopped")


#: characters of an error answer's body read for the log line that says why (errors are short)
LOGGED_ERROR_BYTES = 2048
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\ud800-\udfff]")


def one_line(text: str) -> str:
    """`text` for a log line: control characters, line separators and surrogates escaped, so
    that what a client sent cannot break the line or fake another."""
    return _UNPRINTABLE.sub(lambda m: ascii(m.group())[1:-1], text)


_ERROR_START = re.compile(r'\{"error":\s*"((?:[^"\\]|\\.)*)')


def cut_error(body: bytes) -> str:
    """The message of an error body cut at LOGGED_ERROR_BYTES (the raw JSON was logged), or
    the start of another body."""
    text = body.decode("utf-8", "replace")
    start = _ERROR_START.match(text)
    if start is None:
        return text[:200] or "(no body)"
    try:
        return json.loads(f'"{start[1]}"') + "…"
    except ValueError:  # cut inside an escape
        return json.loads(f'"{start[1][: start[1].rfind(chr(92))]}"') + "…"


def log_refusal(request: dict, client: tuple | None, status: int, body: bytes) -> None:
    """One line for an answer with an error status: the client, the request (its method and
    path as they came), the status and the error the client was sent (the access log has the
    status alone)."""
    try:
        error = json.loads(body)["error"]
    except (ValueError, TypeError, KeyError):
        error = cut_error(body)
    who = f"{client[0]}:{client[1]}" if client else "-"
    log.info(
        '%s - "%s %s" %d: %s',
        who,
        request["method"],
        one_line(redact_path(request["path"])),
        status,
        one_line(str(error)),
    )


class MetricsMiddleware:
    """Counts requests by route template and status, and times them (pure ASGI). A request the
    application ends without an answer (it raised) counts as a 500. An answer with an error
    status (4xx, 5xx) is logged with its error message (`log_refusal`)."""

    def __init__(self, app, metrics: Metrics, routes: list | None = None):
        """`routes`: the application's routes, by which a request answered before routing (the
        cap on requests in progress) is counted under its route's template."""
        self.app, self.metrics, self.routes = app, metrics, routes or []

    def template(self, request: dict) -> str:
        """The template of the route a request (its scope as it came) is for, without
        FastAPI's routing, or "other" (an unknown path: the labels stay a fixed set)."""
        if request["path"] in HANDLERS:  # the fast path's: their path is their template
            return request["path"]
        for route in self.routes:
            if route.matches(request)[0] != Match.NONE:
                return route.path
        return "other"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), 500
        # a CORS preflight asks whether a browser may send a request: it is not one
        preflight = scope["method"] == "OPTIONS" and any(
            name == b"access-control-request-method" for name, _ in scope["headers"]
        )
        translate = scope["path"] == "/translate" and scope["method"] == "POST"
        # as it came (routing into a mount changes the scope's root path)
        request = {k: scope[k] for k in ("type", "path", "method") if k in scope}
        request["root_path"] = scope.get("root_path", "")

        error_body: bytearray | None = None  # the body of an error answer, as it is sent

        async def capture(message):
            nonlocal status, error_body
            if message["type"] == "http.response.start":
                status = message["status"]
                if status >= 400 and not exempt(request["path"]):  # (a probe's 503 is a state)
                    error_body = bytearray()
            elif message["type"] == "http.response.body" and error_body is not None:
                error_body += message.get("body", b"")[: LOGGED_ERROR_BYTES - len(error_body)]
                if not message.get("more_body", False):
                    if status != 499:  # the client went away: no one was refused anything
                        log_refusal(request, scope.get("client"), status, bytes(error_body))
                    error_body = None
            await send(message)

        if translate:
            self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, capture)
        finally:
            if translate:
                self.metrics.in_flight.dec()
            route = scope.get("route")  # set by FastAPI's router (the fast path has none)
            path = route.path if route is not None else self.template(request)
            if preflight:
                path = "preflight"
            elif scope["method"] == "OPTIONS":  # asks which methods a path takes
                path = "options"
            self.metrics.requests.labels(path, str(status)).inc()
            if status == 499:  # once per request, whatever it waited on when the client went
                self.metrics.cancelled.inc()
                # (no answer went out, so the access log has no line of it: one is said here,
                # for an operator looking for the request a client gave up on)
                log_refusal(
                    request,
                    scope.get("client"),
                    499,
                    b'{"error": "the client closed the connection before its answer"}',
                )
            self.metrics.latency.labels(path, outcome(status)).observe(
                time.perf_counter() - started
            )


class HeadAsGet:
    """HEAD answered wherever GET is (RFC 9110: the same status and headers, no body): the
    application sees a GET (FastAPI's GET routes take no HEAD), and uvicorn, which still knows
    the request's method, leaves the body out. The route FastAPI matched is passed back out
    for the metrics middleware."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["method"] != "HEAD":
            return await self.app(scope, receive, send)
        inner = {**scope, "method": "GET", "sent_method": "HEAD"}  # (for the error messages)
        try:
            await self.app(inner, receive, send)
        finally:
            if "route" in inner:
                scope["route"] = inner["route"]


def allowed_methods(routes: list, scope: Scope) -> list[str]:
    """The methods the routes (`create_app`'s list) take on the scope's path, for an `Allow`
    header: HEAD wherever GET (`HeadAsGet`), and OPTIONS (`AnswerOptions`); [] for an unknown
    path."""
    methods: set[str] = set()
    for route in routes:
        if route.matches(scope)[0] == Match.NONE:
            continue
        methods |= getattr(route, "methods", None) or {"GET"}  # (a Mount: static files)
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods | {"OPTIONS"}) if methods else []


class AnswerOptions:
    """OPTIONS answered as Flask (LibreTranslate) answers it on every route: 200, no body, an
    `Allow` header naming the path's methods (an unknown path gets its 404 as any method
    does). A CORS preflight, an OPTIONS with Access-Control-Request-Method, is answered before
    this, by the CORS middleware."""

    def __init__(self, app, routes: list):
        self.app, self.routes = app, routes

    async def __call__(self, scope, receive, send):
        methods = allowed_methods(self.routes, scope) if scope["method"] == "OPTIONS" else []
        if not methods:
            return await self.app(scope, receive, send)
        headers = [(b"allow", ", ".join(methods).encode()), (b"content-length", b"0")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


class JsonCors(CORSMiddleware):
    """Starlette's CORS middleware, whose refusal of a preflight is JSON like every other
    error of the service (Starlette answers it in plain text)."""

    def answer_headers(
        self, request_headers: list[tuple[bytes, bytes]]
    ) -> list[tuple[bytes, bytes]]:
        """The headers this middleware gives an answer (not a preflight's) to a request with
        `request_headers`, for the answers app/protocol.py writes before the application
        sees the request. Starlette's own `send` adds them; it awaits nothing but the `send`
        it is given, so it runs to its end here at once."""
        message: dict = {"type": "http.response.start", "status": 400, "headers": []}

        async def keep(_: Message) -> None:
            pass

        step = self.send(message, keep, Headers(raw=request_headers))
        try:
            step.send(None)
        except StopIteration:
            return list(message["headers"])
        step.close()  # (it waited on something: no headers rather than a stalled answer)
        return []

    def preflight_response(self, request_headers):
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        headers = {
            k: v for k, v in response.headers.items() if k not in ("content-type", "content-length")
        }
        why = bytes(response.body).decode("utf-8", "replace")
        return JSONBody(
            {"error": f"CORS preflight refused: {why}"},
            status_code=response.status_code,
            headers=headers,
        )


_SLASHES = re.compile("/{2,}")


class Service(FastAPI):
    """FastAPI behind the plain-ASGI layers that every HTTP request passes first: the metrics
    middleware, CORS (Starlette's CORSMiddleware, when MT_CORS_ORIGINS is set) and the cap on
    requests in progress (app/limits.py). Inside FastAPI's middleware stack, the innermost
    middleware is the fast path for POST /translate and /detect (app/fastpath.py), which hands
    everything else to FastAPI's routing: a translation request pays for none of the routing,
    request objects and dependencies, and a middleware added with `app.add_middleware` still
    sees it."""

    front: MetricsMiddleware | None = None  # set by create_app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self.front is not None:
            path = scope["path"]
            # a base URL ending in "/" joined with "/translate": served as with one slash, as
            # LibreTranslate's Flask serves it; a POST to "/translate/" as to "/translate"
            # (Starlette redirected it to a URL of the connection's scheme, http:// behind a
            # proxy that ends TLS, where the client sent its body again, key included; a page's
            # GET is still redirected, for its relative links)
            trailing = path.endswith("/") and path != "/" and scope["method"] not in ("GET", "HEAD")
            if "//" in path or trailing:
                path = _SLASHES.sub("/", path)
                scope = {**scope, "path": (path.rstrip("/") or "/") if trailing else path}
            await self.front(scope, receive, send)
        else:  # lifespan, websockets
            await super().__call__(scope, receive, send)

    async def fastapi(self, scope, receive, send):
        """FastAPI's own handling, middleware stack and routes. Starlette re-raises a route's
        unexpected exception after the handler for it (`unexpected`) has answered the 500 and
        logged the traceback with its error id; uvicorn would log the same traceback a second
        time, without the id, so an exception this handler answered ends here."""
        try:
            await super().__call__(scope, receive, send)
        except Exception as exc:
            if not getattr(exc, "answered_500", False):
                raise


def create_app(settings: Settings | None = None) -> Service:
    settings = settings or Settings()
    app = Service(
        title="mt-serve",
        version="0.1.0",
        lifespan=lifespan,
        description="Machine translation with Transformer models; LibreTranslate-compatible API.",
        docs_url=None,  # /docs is app/web.py's, with its files served here; no ReDoc page
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.metrics = Metrics()
    app.state.ready, app.state.draining = False, False
    app.state.draining_since, app.state.shutdown_untranslated = 0.0, 0
    app.state.engine, app.state.batcher, app.state.startup_error = None, None, None
    app.state.detector = None
    app.state.placeholder_uses = {}  # per route: app.translate.placeholder_use_of
    app.state.cors_headers = None  # JsonCors.answer_headers, with MT_CORS_ORIGINS
    # the keys database and the usage counts
    app.state.access = Access(settings, app.state.metrics)
    install_log_redaction()
    routers = (router, file_router, web_router)
    for each in routers:
        app.include_router(each)
    app.mount(DOCS_PATH, DOCS_FILES, name="docs-files")
    # every route (each with .path and .matches), for the metrics of requests answered before
    # FastAPI's routing: the routers', and the app's own with a path (the mounts, and
    # /openapi.json, which was "other"; an included router is a route of the app without one)
    routes = [r for each in routers for r in each.routes]
    routes += [r for r in app.router.routes if getattr(r, "path", None)]
    # The fast path is the innermost middleware of FastAPI's own stack: a middleware added
    # later with `app.add_middleware` goes around it, so it sees POST /translate and /detect too.
    app.add_middleware(TranslateFastPath, state=app.state, handlers=HANDLERS)
    front: ASGIApp = AnswerOptions(ConcurrencyLimit(HeadAsGet(app.fastapi), app.state), routes)
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if origins:  # around the fast path too: every answer and preflight gets the same headers
        cors = JsonCors(
            front,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=["Retry-After"],
            max_age=86400,
        )
        app.state.cors_headers = cors.answer_headers
        front = cors
    app.front = MetricsMiddleware(front, app.state.metrics, routes)
    # read at each scrape: 0 as soon as /health would answer 503, whatever the reason
    app.state.metrics.ready.set_function(lambda: float(health_of(app.state)[0] == 200))

    @app.exception_handler(ApiError)
    async def api_error(request, exc: ApiError):
        return JSONBody({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request, exc: RequestValidationError):
        where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return JSONBody({"error": f"invalid request: {where}"}, status_code=400)

    schema_of = app.openapi

    def openapi() -> dict[str, Any]:
        """FastAPI's schema without the 422 it gives each route with parameters: a request
        FastAPI cannot validate is a 400 with an `{"error": ...}` body here (the handler
        above), listed with the route's other errors."""
        schema = app.openapi_schema
        if schema is None:  # (made once, then kept by FastAPI)
            schema = schema_of()
            for operations in schema["paths"].values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, exc: StarletteHTTPException):
        method = request.scope.get("sent_method", request.method)  # HEAD, served as GET
        message = {
            404: f"no such path: {request.url.path}",
            405: f"method {method} is not allowed on {request.url.path}",
        }
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:  # every method the path takes, HEAD and OPTIONS included
            headers["Allow"] = ", ".join(allowed_methods(routes, request.scope))
        return JSONBody(
            {"error": message.get(exc.status_code, str(exc.detail))},
            status_code=exc.status_code,
            headers=headers,
        )

    @app.exception_handler(Exception)
    async def unexpected(request, exc: Exception):
        body = JSONBody({"error": internal_error(exc)}, status_code=500)
        # logged, with its error id: Service.fastapi ends it there
        exc.answered_500 = True  # type: ignore[attr-defined]  # a mark set on the exception
        return body

    return app


class Server(uvicorn.Server):
    """uvicorn's server, marking the app as draining as soon as a shutdown signal arrives."""

    def __init__(self, config: uvicorn.Config, app: FastAPI):
        super().__init__(config)
        self.fastapi_app = app
        app.state.request_exit = self.request_exit

    def request_exit(self) -> None:
        self.should_exit = True

    def handle_exit(self, sig, frame):
        start_draining(self.fastapi_app.state)
        super().handle_exit(sig, frame)
        # uvicorn re-raises the captured signals after shutting down, so the process would die
        # by SIGTERM, or raise KeyboardInterrupt for SIGINT (with a traceback, and in the middle
        # of the shutdown after a second Ctrl-C); a completed drain is a normal exit (status 0)
        captured = getattr(self, "_captured_signals", None)
        if captured:
            captured[:] = [s for s in captured if s not in (signal.SIGTERM, signal.SIGINT)]
        if self.force_exit:  # a second Ctrl-C: no time left for what waits (the lifespan's
            self.fastapi_app.state.forced = True  # shutdown reads it)

    async def shutdown(self, sockets=None):
        await super().shutdown(sockets=sockets)
        done = getattr(self.lifespan, "shutdown_event", None)
        if self.force_exit and self.started and done is not None and not done.is_set():
            # a second Ctrl-C before the application's shutdown: uvicorn cut the wait for the
            # requests short and skipped it, which would leave the batcher and the worker thread
            # to be torn down with the event loop (a traceback); it still runs, with no time
            # left for the sentences that wait (the batch in progress ends)
            await self.lifespan.shutdown()


def log_config() -> dict:
    """uvicorn's logging, its lines with the time as the service's own lines have it."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    for formatter in config["formatters"].values():
        formatter["fmt"] = "%(asctime)s " + formatter["fmt"]
    return config


def server_config(app: FastAPI, settings: Settings, **overrides) -> uvicorn.Config:
    """uvicorn's configuration of the service (`overrides`: other uvicorn.Config options)."""
    options = {
        "log_config": log_config(),
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "access_log": settings.access_log,
        # uvicorn waits this long for the requests, then cancels those left; they answer 503
        "timeout_graceful_shutdown": settings.shutdown_timeout_s,
        "workers": 1,
        # an answer's headers and body in one write; a request HTTP cannot parse answered in
        # JSON, with the CORS headers, and counted (app/protocol.py)
        "http": bound(app.state.metrics, app.state.cors_headers),
        # the client address (limits, the access log) is the connection's peer: uvicorn would
        # otherwise take it from any X-Forwarded-For header sent from the same host
        "proxy_headers": False,
        **overrides,
    }
    return uvicorn.Config(app, **options)


def port_problem(host: str, port: int) -> str | None:
    """Why the server cannot listen on host:port (in use, not an address of this machine),
    or None. Checked before anything starts: uvicorn would fail only after the models began
    loading, its error between the start-up lines."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return str(exc)
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            try:
                sock.bind(address)
            except OSError as exc:
                return exc.strerror or str(exc)
    return None


def weights_problem(weights_dir: Path) -> str | None:
    """Why MT_WEIGHTS_DIR cannot be the folder of models (missing, a file, or one model's own
    folder), or None. Checked before anything starts, as the port is: the registry would say
    so only after the server had started, between its start-up lines."""
    where = "" if weights_dir.is_absolute() else f" (in {Path.cwd()})"
    if not weights_dir.exists():
        return (
            f"MT_WEIGHTS_DIR {weights_dir}: no such folder{where}; set MT_WEIGHTS_DIR to the "
            "folder that holds the model folders, or start mt-serve where it is"
        )
    if not weights_dir.is_dir():
        return f"MT_WEIGHTS_DIR {weights_dir}: not a folder{where}"
    if (weights_dir / "config.json").is_file() and not any(
        (p / "config.json").is_file() for p in weights_dir.iterdir()
    ):  # a model's folder, where a folder of models is wanted
        parent = weights_dir.parent
        return (
            f"MT_WEIGHTS_DIR {weights_dir} is one model's folder: set MT_WEIGHTS_DIR={parent} "
            f"(MT_MODELS={weights_dir.name} serves that model alone)"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    parse_arguments(argv)  # (--help started the server, as did any other argument)
    settings = checked_settings()
    if settings is None:
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for name, close in unknown_variables(os.environ):
        log.warning(
            "%s is not a setting: ignored%s", name, f" (did you mean {close}?)" if close else ""
        )
    if problem := port_problem(settings.host, settings.port):
        print(
            f"mt-serve: cannot listen on {settings.host}:{settings.port}: {problem} "
            "(MT_HOST and MT_PORT choose another)",
            file=sys.stderr,
        )
        return 2
    if problem := weights_problem(settings.weights_dir):
        print(f"mt-serve: {problem}", file=sys.stderr)
        return 2
    if settings.files_dir is not None:
        try:
            prepare_directory(settings.files_dir)
        except OSError as exc:
            print(f"mt-serve: MT_FILES_DIR {settings.files_dir}: {exc}", file=sys.stderr)
            return 2
    try:
        app = create_app(settings)
    except (OSError, sqlite3.Error) as exc:  # (SQLite says only 'unable to open database
        # file' for a folder, or a path in no folder: database_problem names which)
        path = settings.api_keys_db
        problem = (database_problem(path) if path is not None else None) or f"{path}: {exc}"
        print(f"mt-serve: MT_API_KEYS_DB {problem}", file=sys.stderr)
        return 2
    config = server_config(app, settings)
    Server(config, app).run()
    return 1 if app.state.startup_error else 0
