"""What POST /translate does once the body is parsed, free of any web framework.

Two front ends call `translate`: the plain-ASGI fast path for JSON bodies (app/fastpath.py) and
the FastAPI route, which also takes form bodies (app/routes.py). Both turn an `ApiError` into a
JSON `{"error": ...}` answer with its status and headers. `state` is the application's state
(settings, engine, batcher, metrics, ready/draining flags).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic import ValidationError
from starlette.types import Receive

from model_core.langcodes import two_letter
from model_core.symbols import spell
from model_core.translator import Translator
from model_core.truecase import upper
from model_core.verbatim import NO_PLACES, Places, has_numbers, keep, notation, places, protect

from .batcher import BatchFailed, DeadlineExceeded, QueueFull, ShuttingDown, Ticket
from .detect import named, readable
from .engine import DecodeKey, SentenceResult
from .formats.addresses import verbatim_spans
from .formats.inline import (
    SOFT_HYPHEN,
    STAND_INS,
    PlaceholderUse,
    Unit,
    UnitBuilder,
    collapse,
    placeholder_use,
)
from .html_format import HtmlDocument, HtmlError, extract_all, render_all
from .registry import ModelLoadError, ModelOutOfMemory
from .schemas import TranslateRequest
from .share import RequestShare
from .text import has_content, split_long, split_text

log = logging.getLogger("app")

#: form bodies go to the FastAPI route (it parses them); everything else is read as JSON
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class TooManySentences(ApiError):
    """413: a request holds more sentences than one request may queue (a file's texts are
    then sent in smaller requests)."""


class Deadline:
    """A request's deadline (MT_REQUEST_TIMEOUT_S), from when its first sentences are queued,
    over all its routes and legs: the second leg through the pivot language has what the
    first left of it."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._at: float | None = None

    def left(self) -> float:
        """Seconds left; the first call starts the clock."""
        now = time.monotonic()
        if self._at is None:
            self._at = now + self.seconds
        return self._at - now


@dataclass(frozen=True)
class Leg:
    """Leg `number` (0: the first) of route `route` of a request: what it counts in the
    request's `share` of the queue, and the request's `deadline`. The share is also the
    request's identity for the scheduler (its tickets' `owner`)."""

    share: RequestShare
    route: int
    number: int
    deadline: Deadline

    async def claim(self, sentences: int, pieces: int) -> str | None:
        return await self.share.claim(self.route, self.number, sentences, pieces)


def json_bytes(content: Any) -> bytes:
    """JSON as Starlette's JSONResponse writes it, so both front ends answer alike. Text that
    UTF-8 cannot hold (an unpaired surrogate a client sent, echoed in a message) is written as
    a \\u escape instead of failing the answer."""
    text = json.dumps(
        content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


def internal_error(exc: BaseException) -> str:
    """Logs a server-side failure with a fresh error id and its traceback; returns the message
    for the client, which names the id and holds no traceback."""
    error_id = uuid.uuid4().hex[:12]
    log.error("unexpected error, error id %s", error_id, exc_info=exc)
    return f"internal error (error id {error_id})"


def timed_out(state: Any) -> ApiError:
    """504: the request's deadline passed (counted once per request by `translate`)."""
    return ApiError(
        504,
        f"the translation did not finish within {state.settings.request_timeout_s} s; "
        "send less text per request or retry later",
    )


def unavailable(state: Any, why: str) -> ApiError:
    return ApiError(503, why, {"Retry-After": str(state.settings.retry_after_s)})


def still_loading(state: Any) -> ApiError:
    """503 for a request that came while the models load, counted by its reason."""
    state.metrics.rejected.labels("loading").inc()
    return unavailable(state, "the models are still loading; retry shortly")


def check_accepting(state: Any) -> None:
    """503 (with Retry-After) while the models load, the server drains, or the batcher cannot
    compute any more (its scheduler task or worker thread ended; /health says so too); each
    counted in mt_rejected_requests_total by its reason."""
    rejected = state.metrics.rejected
    if state.draining:
        rejected.labels("draining").inc()
        raise unavailable(state, "the server is shutting down; retry on another replica")
    if not state.ready:
        raise still_loading(state)
    problem = state.batcher.problem()
    if problem:
        rejected.labels("unavailable").inc()
        raise unavailable(
            state, f"the server cannot translate ({problem}); retry on another replica"
        )


SHOWN_ERRORS = 5  # problems an answer lists at most (a list `q` can hold many of the same)


#: the branches of `q`'s type (`str | list[str]`) in pydantic's error locations
_Q_BRANCHES = ("str", "list[str]")
Q_TYPE = "`q` must be a text or a list of texts"


def field_path(loc: tuple) -> str:
    """A pydantic error location as a client names it: `q[1]`, `alternatives` (not
    `q.list[str].1`: the branch of `q`'s type is left out)."""
    if loc[:1] == ("q",) and loc[1:2] and loc[1] in _Q_BRANCHES:
        loc = ("q", *loc[2:])
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
    return where.lstrip(".") or "body"


def describe_validation(exc: ValidationError) -> str:
    """The 400's message for a request that TranslateRequest refuses; a list `q` is not told
    that it is not a text (the text branch of its type)."""
    errors = [
        e for e in exc.errors() if e["loc"] != ("q", "str") or not isinstance(e["input"], list)
    ]
    parts = []
    for err in errors[:SHOWN_ERRORS]:
        parts.append(f"{field_path(err['loc'])}: {err['msg']}")
    more = len(errors) - SHOWN_ERRORS
    return "invalid request: " + "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_json(
    raw: bytes,
    fields: str = "q, source and target",
    numbers: str = "alternatives, beam_size and max_length",
) -> dict[str, Any]:
    """The JSON object of a request's body; `fields`: what the endpoint takes, and `numbers`:
    those of its fields that are numbers, for the messages of a body it cannot take."""
    try:
        data = json.loads(raw) if raw else None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the body is not valid JSON ({exc}); send JSON or form data") from None
    except RecursionError:  # the parser's nesting limit: still the client's body, not a bug
        raise ApiError(400, f"the body's JSON nests too deeply; send {fields}") from None
    except ValueError:  # Python's limit on the digits of an integer it converts
        raise ApiError(
            400,
            f"a number in the body has more than {sys.get_int_max_str_digits()} digits; "
            + (f"{numbers} are small whole numbers" if numbers else f"send {fields}"),
        ) from None
    if not isinstance(data, dict):
        raise ApiError(400, f"the body must be a JSON object with {fields}")
    return data


def quoted(value: str, limit: int = 40) -> str:
    """A client's value as an error message quotes it: cut after `limit` characters (a
    50,000-character `source` came back whole in its 400, and in the log)."""
    if len(value) <= limit:
        return f"'{value}'"
    return f"'{value[:limit]}…' ({len(value)} characters)"


def available_pairs(state: Any) -> str:
    return ", ".join(f"{s}->{t}" for s, t in sorted(state.engine.pairs))


def check_target(state: Any, target: str) -> None:
    """A 400 for a target of `auto` (it was "no model translates 'en' to 'auto'")."""
    if target == "auto":
        raise ApiError(
            400,
            "`target` cannot be 'auto': give the language to translate into; available "
            f"pairs: {available_pairs(state)}",
        )


def no_route(state: Any, source: str, target: str) -> str:
    """A 400's message for a pair no model translates, starting in LibreTranslate's words ("xx
    is not supported", which its clients look for: Dialect tells a wrong language code by
    it): the language no model knows, or else the target from that source."""
    known = {two_letter(code) for pair in state.engine.registry.pairs for code in pair}
    pairs = f"; available pairs: {available_pairs(state)}"
    if two_letter(source) not in known:
        return f"{quoted(source)} is not supported: no model translates from it{pairs}"
    if two_letter(target) not in known:
        return f"{quoted(target)} is not supported: no model translates into it{pairs}"
    pivot = state.engine.registry.pivot
    return (
        f"{quoted(target)} is not supported from {quoted(source)}: no model translates "
        f"{quoted(source)} to {quoted(target)}"
        # (no route goes through a language that is the source or the target)
        + (f", directly or through '{pivot}'" if pivot not in ("", source, target) else "")
        + pairs
    )


def resolve_route(state: Any, source: str, target: str) -> list[str]:
    """The models to run in turn for an explicit source: one, or two through the pivot
    language (app/registry.py)."""
    check_target(state, target)
    models = state.engine.registry.route(source, target)
    if models is None:
        raise ApiError(400, no_route(state, source, target))
    return models


def placeholder_use_of(state: Any, models: list[str] | None) -> PlaceholderUse | None:
    """Whether the route through `models` gives inline markup's placeholders back, as seen so
    far (app/formats/inline.py: after 32 placeholder texts and none usable, units are sent
    without them, one in 64 still with them); None for no route (`models` None)."""
    uses = getattr(state, "placeholder_uses", None)
    if uses is None or not models:
        return None
    key = tuple(models)
    if key not in uses:
        uses[key] = PlaceholderUse(" -> ".join(key))
    return uses[key]


def route_of(state: Any, source: str, target: str) -> list[str] | None:
    """The models from `source` to `target` as a client names them; None for `auto` or a pair
    not served (refused later, with its message)."""
    if state.engine is None:
        return None
    try:
        source = served_code(state, source, target=False)
        if source == "auto":
            return None
        return resolve_route(state, source, served_code(state, target, target=True))
    except ApiError:
        return None


def _code_key(code: str) -> str:
    """A language code as compared: BCP 47 codes are case-insensitive (`EN`, `pt-br`), and
    `-` and `_` separate subtags alike (`cmn-Hans`, `cmn_Hans`)."""
    return code.lower().replace("_", "-")


#: the served codes by `_code_key`, and the registry's pairs they were read from
_served: tuple[object, dict[str, str]] = (None, {})


def _served_codes(pairs: dict[tuple[str, str], str]) -> dict[str, str]:
    """The served language codes by `_code_key`, read again only when the registry's pairs are
    another dict (it makes a new one when it drops a model): a request asks twice, and with
    many models the reading was the most of the work."""
    global _served
    if _served[0] is not pairs:
        _served = (pairs, {_code_key(c): c for pair in pairs for c in pair})
    return _served[1]


def served_code(state: Any, code: str, *, target: bool) -> str:
    """The served language code that a request's `code` stands for, else `code` as sent: the
    same code in any case; a three-letter code for the two-letter one served (`DEU`); a tagged
    code no model serves itself (`en-US`, `pt_BR`, `zh-Hans`) for its base language. For the
    target (`target`) the base language is taken only when the tag adds a region, not a
    script (`zh-Hant`, `sr-Latn`): a model of the base language writes the script it was
    trained on, which the client did not ask for. `auto` in any case is `auto`."""
    key = _code_key(code)
    if key == "auto":
        return "auto"
    served = _served_codes(state.engine.registry.pairs)
    base, *subtags = key.split("-")
    candidates = [key, two_letter(key)]
    if subtags and not (target and any(len(t) == 4 and t.isalpha() for t in subtags)):
        candidates += [base, two_letter(base)]
    return next((served[c] for c in candidates if c in served), code)


def check_served(state: Any, language: str) -> None:
    """A 400 unless some served model translates from or into `language`."""
    known = {two_letter(code) for pair in state.engine.registry.pairs for code in pair}
    if two_letter(language) not in known:
        raise ApiError(
            400,
            f"{quoted(language)} is not supported: no model translates from or into it; "
            f"available pairs: "
            f"{available_pairs(state)}",
        )


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_MESSAGE = "holds an unpaired UTF-16 surrogate; send valid Unicode"
_TEXT_FIELDS = ("source", "target", "format", "api_key")


def shown(name: str, number: int) -> str:
    """`name=number` for a message, or the number's length when it is too long to read."""
    if abs(number) < 10**15:
        return f"{name}={number}"
    return f"{name} has {len(str(abs(number)))} digits"


def too_many_chars(chars: int, texts: list[str] | None, limit: int) -> ApiError:
    """413 for `q` over MT_MAX_REQUEST_CHARS; `texts`: a list `q`'s, which count together
    (LibreTranslate's current release checks each alone against its --char-limit). The message
    has LibreTranslate's words for it ("exceeds character limit"), which its clients look for."""
    together = f", its {len(texts)} texts together" if texts is not None else ""
    return ApiError(
        413,
        f"request ({chars} characters in `q`{together}) exceeds character limit "
        f"({limit} per request)",
    )


def too_many_texts(texts: int, limit: int) -> ApiError:
    """413 for a list `q` of more than MT_MAX_TEXTS texts, in LibreTranslate's words for it
    ("exceeds text limit"), which its clients look for."""
    return ApiError(413, f"request ({texts} texts in `q`) exceeds text limit ({limit} per request)")


def checked_options(state: Any, req: TranslateRequest) -> tuple[list[str], int, int, int]:
    s = state.settings
    texts = [req.q] if isinstance(req.q, str) else list(req.q)
    if isinstance(req.q, str) and not readable(req.q).strip():  # (a zero-width space alone too)
        raise ApiError(400, "`q` is empty: give the text to translate")
    if not texts:
        raise ApiError(400, "`q` is an empty list: give at least one text")
    if len(texts) > s.max_texts:
        raise too_many_texts(len(texts), s.max_texts)
    chars = sum(len(t) for t in texts)
    if chars > s.max_request_chars:
        raise too_many_chars(chars, None if isinstance(req.q, str) else texts, s.max_request_chars)
    for i, text in enumerate(texts):
        if _SURROGATE.search(text):  # JSON can escape one (\ud800); no tokenizer can take it
            where = "`q`" if isinstance(req.q, str) else f"`q[{i}]`"
            raise ApiError(400, f"{where} {_SURROGATE_MESSAGE}")
    for name in _TEXT_FIELDS:  # UTF-8 cannot hold one, so no answer could even name it
        if _SURROGATE.search(getattr(req, name) or ""):
            raise ApiError(400, f"`{name}` {_SURROGATE_MESSAGE}")
    for name, hint in (("source", " or 'auto'"), ("target", "")):
        if not getattr(req, name).strip():  # a form's unset field
            raise ApiError(400, f"`{name}` is empty: give a language code{hint}")
    if req.format not in ("text", "html"):
        raise ApiError(400, f"format {quoted(req.format)} is not supported; use 'text' or 'html'")
    if req.alternatives > s.max_alternatives:
        raise ApiError(
            400, f"{shown('alternatives', req.alternatives)}; at most {s.max_alternatives}"
        )
    beam = req.beam_size or 0  # 0: each model's default (model_beam_size)
    if beam > s.max_beam_size:
        raise ApiError(
            400, f"{shown('beam_size', beam)}; it must be between 1 and {s.max_beam_size}"
        )
    max_length = req.max_length or 0  # 0: each model's own (model_max_length)
    if max_length > s.max_output_length:
        raise ApiError(400, f"{shown('max_length', max_length)}; at most {s.max_output_length}")
    n_best = req.alternatives + 1
    return texts, beam and max(beam, n_best), n_best, max_length


def model_beam_size(settings: Any, translator: Translator) -> int:
    """The beam size of a request that gives none: the model's own (a Marian model's
    generation_config.json `num_beams`) capped by MT_MAX_BEAM_SIZE, else MT_DEFAULT_BEAM_SIZE."""
    own = translator.checkpoint.generation.get("beam_size")
    if own:
        return min(int(own), settings.max_beam_size)
    return settings.default_beam_size


def model_max_length(settings: Any, translator: Translator) -> int:
    """The output limit of a request that gives none: the model's own (a Marian model's
    generation_config.json `max_length`, as transformers applies it) capped by
    MT_MAX_OUTPUT_LENGTH, else MT_MAX_OUTPUT_LENGTH."""
    own = translator.checkpoint.generation.get("max_length")
    if own:
        return min(int(own), settings.max_output_length)
    return settings.max_output_length


async def client_gone(receive: Receive) -> None:
    """Returns when the client disconnects (the body has been read, so only that can arrive)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def wait_or_disconnect(
    state: Any, ticket, timeout: float, receive: Receive
) -> list[SentenceResult] | None:
    """Results, or None when the client went away first (its waiting sentences are dropped).
    Raises ShuttingDown when the server's shutdown timeout passed while the request waited:
    uvicorn then cancels the request's task, and the client gets a 503 instead of no answer."""
    batcher = state.batcher
    dropped: list[int] = []  # set when the client went away

    def on_gone(watcher: asyncio.Future) -> None:
        if not watcher.cancelled() and watcher.exception() is None:
            dropped.append(batcher.cancel(ticket))

    watcher = asyncio.ensure_future(client_gone(receive))
    watcher.add_done_callback(on_gone)
    try:
        return await batcher.wait(ticket, timeout)
    except asyncio.CancelledError:
        if not dropped:  # this request's task itself was cancelled, not the client gone
            if state.draining:  # the shutdown timeout passed (its queued work is removed)
                raise ShuttingDown("shutdown timeout passed") from None
            raise
    finally:
        watcher.cancel()
    # (the request is counted cancelled once, by its 499: app/main.py's MetricsMiddleware)
    state.metrics.dropped.labels("client_disconnected").inc(dropped[0])
    return None


async def translate_leg(
    state: Any,
    model: str,
    target: str,
    texts: list[str],
    beam: int,
    n_best: int,
    max_length: int,
    receive: Receive,
    leg: Leg,
) -> tuple[list[list[str]], float] | None:
    """Translate `texts` into `target` with one model through the batcher (loading the model
    first if it is not loaded; a multi-target model gets the target's token): n_best lists of
    translations, one per text, and the batches' compute seconds; None when the client went
    away first. `leg` is counted in the request's share of the queue before it is queued (a
    413 when the request is over it), and its sentences take their turns as the request's."""
    try:
        async with state.engine.registry.hold(model) as translator:
            return await _translate_with(
                state, model, translator, target, texts, beam, n_best, max_length, receive, leg
            )
    except ModelOutOfMemory:  # passing, and logged where it happened (once per load)
        state.metrics.rejected.labels("out_of_memory").inc()
        raise unavailable(
            state,
            f"the server ran out of memory loading the model '{model}'; retry after the "
            "Retry-After delay",
        ) from None
    except ModelLoadError as exc:
        log.error("model %s could not be loaded: %s", model, exc)
        raise ApiError(
            500, f"the model '{model}' could not be loaded; the server log has the details"
        ) from None


@dataclass(frozen=True)
class Sent:
    """What is sent for one request of a sentence: the indices of its pieces' results, the
    names standing in for markup that its translation keeps where it goes in capitals (else
    None: it does not), the text sent, and where it has numbers or names to keep
    (model_core/verbatim.py) the indices of the pieces of that text with stand-ins and what
    they stand for."""

    pieces: list[int]
    loud: frozenset[str] | None
    source: str
    protected: list[int]  # (filled once the request is counted in its share: `_translate_with`)
    stand_ins: dict[str, str]
    protected_text: str

    def text(
        self,
        results: Sequence[SentenceResult],
        k: int,
        write: Callable[[str], str],
        numbers: bool,
        place_names: Places,
    ) -> str:
        """Its translation, alternative `k` (or the last one there is; the first where `k`
        loses a number or a name); `write`: how a number of the source is written in it
        (`notation`), `numbers`: whether numbers are kept (MT_KEEP_NUMBERS), or names alone;
        `place_names`: the places the target language names otherwise (`places`)."""

        def joined(indices: list[int]) -> str:
            return " ".join(results[i].texts[min(k, len(results[i].texts) - 1)] for i in indices)

        text = joined(self.pieces)
        if self.stand_ins or (numbers and has_numbers(self.source)):
            stand_in_text = joined(self.protected) if self.protected else None
            text, how = keep(
                self.source, text, stand_in_text, self.stand_ins, write, numbers, place_names
            )
            if how == "lost" and k > 0:
                # an alternative that lost a number or a name is the best translation's
                # sentence instead (the alternatives alike then are one)
                return self.text(results, 0, write, numbers, place_names)
        return text if self.loud is None else upper(text, self.loud)


async def _translate_with(
    state: Any,
    model: str,
    translator: Translator,
    target: str,
    texts: list[str],
    beam: int,
    n_best: int,
    max_length: int,
    receive: Receive,
    leg: Leg,
) -> tuple[list[list[str]], float] | None:
    limit = min(state.settings.max_sentence_tokens, translator.max_source_tokens)
    beam = max(beam or model_beam_size(state.settings, translator), n_best)
    max_length = max_length or model_max_length(state.settings, translator)

    encoded: dict[str, list[int]] = {}  # each piece is tokenized once (counted, then sent)
    unread = UNREAD_QUOTES if state.settings.normalize_quotes else UNREAD

    def encode(text: str) -> list[int]:
        if text not in encoded:
            # (UNREAD: sent, they cut a word into letters and bytes for the model)
            encoded[text] = translator.encode_source(text.translate(unread), target)
        return encoded[text]

    def count(text: str) -> int:
        return len(encode(text))

    def add(text: str) -> list[int]:
        """The indices in `payloads` of the pieces of `text`: a piece already there (the same
        sentence earlier in the request) is not sent again; its one result serves each."""
        out = []
        for piece in split_long(text, count, limit):
            ids = encode(piece)
            at = sent.setdefault(tuple(ids), len(payloads))
            if at == len(payloads):
                payloads.append(ids)
            out.append(at)
        return out

    # a sentence in capitals or in Title Case: each word as the model's vocabulary writes it
    # most often, the translation of one in capitals in capitals (model_core/truecase.py)
    recaser = translator.truecaser if state.settings.recase else None
    # numbers and names the model does not know, kept as written (model_core/verbatim.py)
    keep_numbers, keep_names = state.settings.keep_numbers, state.settings.keep_names
    # currency symbols, degrees and "&" as the words the model knows (model_core/symbols.py)
    spelled = state.settings.spell_symbols
    source_language = two_letter(translator.source_language)
    write = notation(source_language, two_letter(target))
    place_names = places(source_language, two_letter(target)) if keep_names else NO_PLACES

    def added(requests: list[str]) -> list[Sent]:
        """What is sent for each request: `add`ed, recased, with numbers and names kept."""
        out = []
        for request in requests:
            sent_as, capitals = recaser.recase(request, STAND_INS) if recaser else (request, False)
            if spelled:
                sent_as = spell(sent_as, source_language)
            names = frozenset(n for n in STAND_INS if re.search(rf"\b{n}\b", request))
            # (not in a heading in Title Case or in capitals: what is not a word of the
            # vocabulary there is no more a name than a word it lacks)
            titled = keep_names and translator.truecaser.kind(request, STAND_INS) is not None
            unknown = (
                translator.truecaser.names(sent_as, STAND_INS) if keep_names and not titled else []
            )
            protected, stand_ins = protect(sent_as, keep_numbers, unknown)
            out.append(
                Sent(add(sent_as), names if capitals else None, sent_as, [], stand_ins, protected)
            )
        return out

    # per text: prefix, and per sentence (per request of its Unit, else one: what is sent;
    # the Unit that puts them together or None; separator): none sent for a sentence kept
    # as it is
    Layout = tuple[list[Sent], Unit | None, str]
    layouts: list[tuple[str, list[Layout]]] = []
    payloads: list[list[int]] = []  # each distinct piece once (decoding is deterministic)
    sent: dict[tuple[int, ...], int] = {}  # a piece's token ids -> its index in `payloads`
    for text in texts:
        prefix, sentences = split_text(text, two_letter(translator.source_language))
        layout: list[Layout] = []
        for sentence, sep in sentences:
            unit = None
            if verbatim_spans(sentence):  # URLs and e-mail addresses are copied as written
                builder = UnitBuilder()
                builder.text(sentence)
                # the words between them are translated by runs only: with placeholders
                # (`<x1/>`), a model must give them back for the whole translation to be used,
                # and the shipped models never do, so it was computed and thrown away
                unit = builder.build(whole=False)  # None: no letters beside them
                if unit is not None:
                    layout.append((added(unit.requests), unit, sep))
                    continue
            elif has_content(sentence):
                layout.append((added([sentence]), None, sep))
                continue
            # no letter (a number, `---`), or nothing but addresses: kept as sent
            layout.append(([], None, sentence + sep))
        layouts.append((prefix, layout))
    n_sentences = sum(1 for _, layout in layouts for entry in layout if entry[0])
    # the texts with stand-ins (as many as those they stand in for, at most) go in the queue
    # after those as written, outside the request's share: the server's choice, not the
    # client's, so that a request within its share as sent is never refused for them
    over = await leg.claim(n_sentences, len(payloads))
    if over:  # 503 would invite a retry that cannot work
        raise TooManySentences(413, over)
    asked = len(payloads)
    seconds = [one for _, layout in layouts for sents, _, _ in layout for one in sents]
    for one in seconds:
        if one.stand_ins:
            one.protected.extend(add(one.protected_text))
    key = DecodeKey(model, beam, n_best, max_length)
    metrics = state.metrics
    timeout = leg.deadline.left()
    if timeout <= 0:  # the first leg through the pivot language took the request's time
        raise timed_out(state)

    def submit() -> Ticket | None:
        if not payloads:
            return None
        return state.batcher.submit(key, payloads, [len(p) + 1 for p in payloads], leg.share)

    try:
        try:
            ticket = submit()
        except QueueFull:
            if len(payloads) == asked:
                raise
            # the queue has room for the texts as sent alone: without the stand-in ones
            del payloads[asked:]
            for one in seconds:
                one.protected.clear()
            ticket = submit()
    except QueueFull as exc:
        metrics.rejected.labels("queue_full").inc()
        raise unavailable(
            state, f"the server is busy ({exc}); retry after the Retry-After delay"
        ) from None
    except ShuttingDown:
        problem = state.batcher.problem()
        if problem:  # the scheduler ended since check_accepting looked
            metrics.rejected.labels("unavailable").inc()
            raise unavailable(
                state, f"the server cannot translate ({problem}); retry on another replica"
            ) from None
        metrics.rejected.labels("draining").inc()
        raise unavailable(state, "the server is shutting down; retry on another replica") from None
    try:
        results = await wait_or_disconnect(state, ticket, timeout, receive) if ticket else []
    except DeadlineExceeded as exc:  # counted as a timed-out request by `translate`
        metrics.dropped.labels("deadline").inc(exc.dropped)
        raise timed_out(state) from None
    except BatchFailed as exc:
        raise ApiError(
            500, f"translation failed (error id {exc.error_id}); the server log has the details"
        ) from None
    except ShuttingDown:
        untranslated = ticket.pending if ticket else 0
        metrics.dropped.labels("shutdown").inc(untranslated)
        state.shutdown_untranslated += untranslated
        raise unavailable(
            state,
            "the server shut down before this request was translated; retry on another replica",
        ) from None
    if results is None:
        return None
    metrics.sentences.inc(len(results))
    metrics.input_tokens.inc(sum(len(p) + 1 for p in payloads))
    metrics.generated_tokens.inc(sum(r.generated_tokens for r in results))
    outputs: list[list[str]] = [[] for _ in range(n_best)]  # per alternative, per text
    for prefix, layout in layouts:
        parts: list[list[str]] = [[prefix] for _ in range(n_best)]
        for sents, unit, sep in layout:
            for k in range(n_best):  # (none sent: `sep` is the sentence kept as sent, and its own)
                texts_k = [one.text(results, k, write, keep_numbers, place_names) for one in sents]
                if unit is not None:
                    texts_k = ["".join(t.text for t in unit.tokens(texts_k))]
                parts[k].append("".join(texts_k) + sep)
        for k in range(n_best):
            outputs[k].append("".join(parts[k]))
    return outputs, ticket.compute_s if ticket else 0.0


#: left out of what the model reads: invisible characters that only say where a word may or
#: may not break, a soft hyphen, a zero-width space, a word joiner, a zero-width no-break space
#: (U+FEFF). Sent, each cut the word it was in into letters and bytes for the model
#: ("transla\u00adtion": "tra n s l a <0xC2> ..."; a zero-width space read as a space). Zero-width
#: joiners and non-joiners stay: Persian and Indic scripts spell with them, emoji join with them.
#: Control characters (a NUL, an escape, C1 codes) are read as a space: sent, "Hello\x00world."
#: gave "Er bereitete sich die Geschwaltung zu", read so "Hallo Welt.".
UNREAD = str.maketrans(
    {
        **dict.fromkeys(SOFT_HYPHEN + "\u200b\u2060\ufeff"),
        **dict.fromkeys(
            [chr(c) for c in [*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0)]],
            " ",
        ),
    }
)
#: typographic double quotation marks, read as the straight one (`MT_NORMALIZE_QUOTES`): the
#: English side of the shipped models' corpus has none, and a sentence quoted so came out as
#: nonsense ("“Come home,” she said." gave "ER PRACHT, hat sie gesagt.", with straight
#: quotation marks "„Kommen Sie zu Hause, sagte sie."); the model writes its own in the
#: translation
QUOTES = str.maketrans(dict.fromkeys("\u201c\u201d\u201e\u201f\u00ab\u00bb\u2033", '"'))
UNREAD_QUOTES = {**UNREAD, **QUOTES}


def without_addresses(text: str) -> str:
    """`text` without its URLs and e-mail addresses (their words, `zeitung.de/nachrichten`,
    say nothing of the language the sentence is in); `text` itself when nothing else holds a
    letter."""
    spans = verbatim_spans(text)
    if not spans:
        return text
    parts, at = [], 0
    for start, end in spans:
        parts.append(text[at:start])
        at = end
    parts.append(text[at:])
    rest = " ".join(parts)
    return rest if has_content(rest) else text


def visible_texts(texts: list[str], fmt: str) -> list[str]:
    """The texts as a reader sees them, for detecting their language: plain text without its
    URLs and e-mail addresses (copied as written, never translated), an HTML document's text
    units (app/html_format.py) without its tags and attributes, which would otherwise outweigh
    its words."""
    if fmt != "html":
        return [without_addresses(t) for t in texts]
    return [doc.visible_text for doc in html_documents(texts)]


def html_documents(texts: list[str]) -> list[HtmlDocument]:
    """The HTML documents, cut into text units (app/html_format.py); a 400 for bad markup."""
    try:
        documents, _ = extract_all(texts)
    except HtmlError as exc:
        raise ApiError(400, str(exc)) from None
    return documents


def _ranked_and_unserved(
    detector: Any, texts: list[str], among: list[str], target: str
) -> tuple[list[list[tuple[str, float]]], list[tuple[str, float] | None]]:
    return detector.detect_all(texts, among, target), [detector.unserved(t) for t in texts]


def unserved_message(
    found: dict[int, tuple[str, float]], candidates: list[str], target: str, what: str | None
) -> str:
    """The 400's message for texts in a language no model translates from: `what` names the
    one text ("the text", "the file"), or None for the indices of a list `q` (the first ten)."""
    into = f"into {named(target)} this server translates from "
    into += ", ".join(named(c) for c in candidates)
    code = f"`source: {candidates[0]}`" if len(candidates) == 1 else "`source`"
    source = f"the source language ({code})"
    if what is not None:
        ((lang, _),) = found.values()
        return (
            f"{what} is in {named(lang)}, which no model here translates from; {into}. "
            f"Give {source} to translate it anyway"
        )
    shown = [f"q[{i}] in {named(lang)}" for i, (lang, _) in list(found.items())[:10]]
    if len(found) > len(shown):
        shown.append(f"and {len(found) - len(shown)} more")
    if len(found) == 1:
        return (
            f"{shown[0].replace(' in ', ' is in ', 1)}, which no model here translates from; "
            f"{into}. Leave it out, or give {source} to translate it anyway"
        )
    return (
        f"{len(found)} texts are in languages no model here translates from: "
        f"{', '.join(shown)}; {into}. Leave them out, or give {source} to translate them anyway"
    )


async def detect_sources(
    state: Any, texts: list[str], target: str, *, unserved: str | None = "the text"
) -> list[tuple[str, float]]:
    """(language, confidence) of each text, among the languages that reach `target` (directly or
    through the pivot language) and `target` itself (a text already in it is returned as it is).

    A text clearly in a language no model serves (app/detect.py: `Detector.unserved`) is a 400
    that names its language, `unserved` naming the text ("the text", "the file"), or None for
    the indices of a list `q`; with `unserved="keep"` it is given as in `target` instead, to be
    returned as it is (a paragraph quoted in another language, in a file)."""
    chosen, _ = await _detected(state, texts, target, unserved)
    return chosen


async def _detected(
    state: Any, texts: list[str], target: str, unserved: str | None
) -> tuple[list[tuple[str, float]], dict[int, tuple[str, float]]]:
    """`detect_sources`'s answer, and the language no model serves of each text found in one
    (by index)."""
    check_target(state, target)
    reachable = state.engine.registry.reachable()
    candidates = sorted(s for s, targets in reachable.items() if target in targets)
    if not candidates:
        raise ApiError(
            400,
            f"{quoted(target)} is not supported: no model translates into it; "
            f"available pairs: {available_pairs(state)}",
        )
    among = [*candidates, target]
    detector = state.detector
    ranked, foreign = await asyncio.to_thread(_ranked_and_unserved, detector, texts, among, target)
    found = {i: lang for i, lang in enumerate(foreign) if lang is not None}
    if found and unserved != "keep":
        raise ApiError(400, unserved_message(found, candidates, target, unserved))
    out = []
    for i, text_ranked in enumerate(ranked):
        if i in found:  # kept as it is: the target's language, with the confidence it has
            out.append((target, 0.0))
        elif text_ranked:  # its best language; a tie as app/detect.py `Detector.order` breaks it
            out.append(text_ranked[0])
        else:  # the detector knows none of the candidates: the only choice, if there is one
            if len(candidates) != 1:
                raise ApiError(
                    400,
                    f"cannot detect the source language among {', '.join(candidates)}; "
                    "give `source` explicitly",
                )
            out.append((candidates[0], 0.0))
    return out, found


#: what parts a plain text's paragraphs: a line break, blank lines (spaces in them), and the
#: next line break
PARAGRAPH_BREAK = re.compile(r"(\r?\n(?:[ \t]*\r?\n)+)")


#: a text of fewer words takes its document's language (`source: auto`): a heading or a word
#: alone ("Title", "See") reads as either language by chance
DETECT_WORDS = 4


def own_or_document(text: str, own: tuple[str, float], document: str, target: str) -> str:
    """The language `source: auto` takes for a text of a document: its own (`own`, from
    `detect_sources` with `unserved="keep"`) where it has DETECT_WORDS words or more or is in
    a language no model serves (kept as it is), else the document's (`document`)."""
    return own[0] if len(text.split()) >= DETECT_WORDS or own == (target, 0.0) else document


async def own_sources(
    state: Any, texts: list[str], documents: list[str], target: str
) -> list[tuple[str, str | None]]:
    """For each text of a document (`documents`: the language of each one's document), with
    `source: auto`: the language it is translated from (`own_or_document`; `target`: kept as
    it is), and the language it is kept in (None where it is translated): the target's, or the
    language no model serves that it is in (for the `lang` an HTML document gives it:
    app/html_lang.py)."""
    own, unserved = await _detected(state, texts, target, "keep")
    out: list[tuple[str, str | None]] = []
    for i, (text, found, document) in enumerate(zip(texts, own, documents, strict=True)):
        source = own_or_document(text, found, document, target)
        kept = unserved[i][0] if i in unserved else target
        out.append((source, kept if source == target else None))
    return out


async def unit_sources(
    state: Any, documents: list[HtmlDocument], languages: list[str], target: str
) -> tuple[list[str], list[list[str | None]]]:
    """The language of each text the HTML `documents` send (their units' requests, in order),
    for `source: auto`: each unit's own, as `own_or_document` takes it, the document's being
    `languages`' (a French paragraph or title attribute of an English page is not translated
    as English; one in the target language, or in a language no model serves, is kept); and
    per document, the language each of its units is kept in (`own_sources`)."""
    units = [
        (unit, lang) for doc, lang in zip(documents, languages, strict=True) for unit in doc.units
    ]
    plain = [
        " ".join(r for r in (collapse(str(i.value)) for i in unit.items if i.kind == "text") if r)
        for unit, _ in units
    ]
    own = await own_sources(state, plain, [lang for _, lang in units], target)
    out = []
    for (unit, _), (source, _) in zip(units, own, strict=True):
        out += [source] * len(unit.requests)
    kept, at = [], 0
    for doc in documents:
        kept.append([k for _, k in own[at : at + len(doc.units)]])
        at += len(doc.units)
    return out, kept


def rendered(
    documents: list[HtmlDocument],
    texts: list[str],
    sent: set[int],
    outputs: list[list[str]],
    target: str,
    kept: list[list[str | None]],
) -> list[list[str]]:
    """Per alternative, each HTML document (`texts`) rendered from its units' translations
    (`outputs`: per alternative, per text the documents send, in order), each unit kept as it
    is labelled with its language (`kept`: per document, `unit_sources`); a document none of
    whose texts was `sent` for translation is returned as it is."""
    out: list[list[str]] = [[] for _ in outputs]
    at = 0
    for doc, text, languages in zip(documents, texts, kept, strict=True):
        n = len(doc.texts)
        touched = any(i in sent for i in range(at, at + n))
        for k, translations in enumerate(outputs):
            page = doc.render(translations[at : at + n], target, languages) if touched else text
            out[k].append(page)
        at += n
    return out


class Outputs:
    """What one model's share of a request produced: per alternative, per text."""

    def __init__(self, texts: list[list[str]], compute_s: float, queued: float):
        self.texts, self.compute_s, self.queued = texts, compute_s, queued


async def run_route(
    state: Any,
    models: list[str],
    target: str,
    texts: list[str],
    fmt: str,
    options: tuple[int, int, int],
    receive: Receive,
    share: RequestShare,
    route: int,
    deadline: Deadline,
) -> Outputs | None:
    """Translates `texts` into `target` through `models` in turn (two through the pivot
    language: the first leg's best text is the second leg's input); HTML documents are cut
    into text units first and rebuilt last. Each leg is counted in the request's `share` of
    the queue as route number `route`, and waits within the request's `deadline`. None when
    the client went away first."""
    beam, n_best, max_length = options
    documents = None
    if fmt == "html":  # the documents' text, cut into units (app/html_format.py)
        try:
            # in a thread: html.parser takes time quadratic in some markup ("<a" repeated
            # 10,000 times, within the default request limit, took 0.4 s), during which
            # every other request waited on the event loop
            with placeholder_use(placeholder_use_of(state, models)):
                documents, texts = await asyncio.to_thread(extract_all, texts)
        except HtmlError as exc:
            raise ApiError(400, str(exc)) from None
    queued, compute_s = time.perf_counter(), 0.0
    outputs: list[list[str]] = [texts]
    for i, model in enumerate(models):
        last = i == len(models) - 1
        into = target if last else state.engine.registry.pivot
        result = await translate_leg(
            state,
            model,
            into,
            outputs[0],
            beam,
            n_best if last else 1,
            max_length,
            receive,
            Leg(share, route, i, deadline),
        )
        if result is None:
            return None
        outputs, seconds = result
        compute_s += seconds
    if documents is not None:
        outputs = await asyncio.to_thread(
            lambda: [render_all(documents, o, target) for o in outputs]
        )
    return Outputs(outputs, compute_s, queued)


async def run_routes(routes: Sequence[Awaitable[Outputs | None]]) -> list[Outputs | None]:
    """The routes' outputs, in order; they run side by side, and when one raises, the others
    are cancelled (their waiting sentences dropped)."""
    if len(routes) == 1:  # the usual case: one route, no task of its own to schedule
        return [await routes[0]]
    tasks = [asyncio.ensure_future(route) for route in routes]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


def distinct_alternatives(translation: str, others: list[str]) -> list[str]:
    """The alternatives of a translation as LibreTranslate gives them (its `filter_unique`):
    each once, none empty or the translation itself. A text that needs no translation (into
    its own language) has none: LibreTranslate's identity translation offers the text again and
    again, all of it filtered out."""
    seen = {translation, ""}
    kept = []
    for text in others:
        if text not in seen:
            seen.add(text)
            kept.append(text)
    return kept


async def translate(
    state: Any,
    data: dict[str, Any],
    receive: Receive,
    started: float,
    on_valid: Callable[[list[str]], None] | None = None,
) -> dict[str, Any] | None:
    """The response body for a parsed request, or None when the client went away first.
    Raises ApiError for anything the client should change or retry. `receive` is the request's
    ASGI receive channel (the body already read from it: only a disconnect can come), `started`
    when the request arrived (time.perf_counter), for the timings it reports; `on_valid` is
    called with the texts once the request is found valid, before any work (it may raise).

    With `source: "auto"` each text's language is detected (app/detect.py) and each text goes
    to the models from its language (an HTML document's units each from their own:
    `unit_sources`); a text already in the target language is returned as it is."""
    q, limit = data.get("q"), state.settings.max_texts
    if isinstance(q, list) and len(q) > limit:  # before checking each of them
        raise too_many_texts(len(q), limit)
    if "q" in data and not isinstance(q, (str, list)):  # (null too: `q` left out is named so)
        raise ApiError(400, Q_TYPE)
    try:
        req = TranslateRequest.model_validate(data)
    except ValidationError as exc:
        raise ApiError(400, describe_validation(exc)) from None
    texts, beam, n_best, max_length = checked_options(state, req)
    req.source = served_code(state, req.source, target=False)  # `EN`, `en-US`: `en`
    req.target = served_code(state, req.target, target=True)
    same = req.source != "auto" and two_letter(req.source) == two_letter(req.target)
    if same:  # nothing to translate: the texts come back as they are, in a language served
        check_served(state, req.target)
    elif req.source != "auto":  # an unknown pair is a 400 before on_valid
        explicit = resolve_route(state, req.source, req.target)
    if on_valid is not None:
        on_valid(texts)
    detected: list[tuple[str, float]] | None = None
    # HTML with `source: auto`: the documents' units, each routed from its own language (cut
    # before any route is known: with inline markup's placeholders, as a file's with `auto`)
    documents: list[HtmlDocument] | None = None
    split: list[list[str]] | None = None  # plain texts with `auto`: paragraphs and breaks
    sent: Sequence[str] = texts  # what goes to the models, and as what
    fmt = req.format
    if req.source == "auto":  # from the text a reader sees: for HTML, not its markup
        if req.format == "html":  # parsed in a thread, as run_route parses it
            documents = await asyncio.to_thread(html_documents, texts)
            visible = [doc.visible_text for doc in documents]
        else:  # (a thread would cost plain text more than its work)
            visible = visible_texts(texts, req.format)
        one = "the text" if isinstance(req.q, str) else None
        detected = await detect_sources(state, visible, req.target, unserved=one)
        sources = [lang for lang, _ in detected]
        if documents is None and any(PARAGRAPH_BREAK.search(t) for t in texts):
            # a text of paragraphs: each from its own language where it has words enough to
            # tell, as an HTML document's are (a German paragraph in an English text was
            # translated as English)
            split = [PARAGRAPH_BREAK.split(t) for t in texts]
            paragraphs = [(i, part) for i, parts in enumerate(split) for part in parts[::2]]
            sent = [part for _, part in paragraphs]
            sources = [sources[i] for i, _ in paragraphs]  # the text's, but where told
            visible = visible_texts(sent, "text")
            told = [j for j, v in enumerate(visible) if len(v.split()) >= DETECT_WORDS]
            own = await own_sources(
                state, [visible[j] for j in told], [sources[j] for j in told], req.target
            )
            for j, (source, _) in zip(told, own, strict=True):
                sources[j] = source
        if documents is not None:
            languages = sources  # each document's, as `detectedLanguage` gives it
            sources, kept = await unit_sources(state, documents, sources, req.target)
            # the units' texts, sent as run_route sends a document's after cutting it
            sent, fmt = [r for doc in documents for r in doc.texts], "text"
    else:
        sources = [req.target if same else req.source] * len(texts)
    groups: dict[tuple[str, ...], list[int]] = {}  # route -> indices of its texts
    for i, source in enumerate(sources):
        if source != req.target:
            route = explicit if req.source != "auto" else resolve_route(state, source, req.target)
            groups.setdefault(tuple(route), []).append(i)
    # the routes the answer names: those its texts took, and for an HTML document with no text
    # to send (an address alone, a number, an image), the one from its language, as a plain
    # text of an address alone takes it (and copies it): it was "none (the text is in the
    # target language)" beside a `detectedLanguage` of another
    named = list(groups)
    if documents is not None:
        for doc, language in zip(documents, languages, strict=True):
            if not doc.texts and language != req.target:
                doc_route = tuple(resolve_route(state, language, req.target))
                if doc_route not in named:
                    named.append(doc_route)
    options = (beam, n_best, max_length)
    settings = state.settings
    share = RequestShare(  # counted over all the request's routes (app/share.py)
        max(1, int(settings.max_queue_size * settings.max_request_share)),
        [list(route) for route in groups],
        state.engine.registry.pivot,
    )
    deadline = Deadline(settings.request_timeout_s)
    routes = [
        run_route(
            state,
            list(route),
            req.target,
            [sent[i] for i in idx],
            fmt,
            options,
            receive,
            share,
            number,
            deadline,
        )
        for number, (route, idx) in enumerate(groups.items())
    ]
    try:
        results = await run_routes(routes)
    except ApiError as exc:
        if exc.status == 504:  # once per request, however many of its routes ran out of time
            state.metrics.timed_out.inc()
        raise
    if any(r is None for r in results):
        return None
    outs = cast(list[Outputs], results)  # none is None (checked above)
    outputs: list[list[str]] = [list(sent) for _ in range(n_best)]  # untouched: in the target
    for idx, result in zip(groups.values(), outs, strict=True):
        for k in range(n_best):
            for j, i in enumerate(idx):
                outputs[k][i] = result.texts[k][j]
    if split is not None:  # the texts of paragraphs, put together again
        for k in range(n_best):
            parts = iter(outputs[k])
            outputs[k] = [
                "".join(next(parts) if j % 2 == 0 else p for j, p in enumerate(ps)) for ps in split
            ]
    if documents is not None:
        routed = {i for idx in groups.values() for i in idx}
        outputs = await asyncio.to_thread(
            rendered, documents, texts, routed, outputs, req.target, kept
        )
    now = time.perf_counter()
    queued = min((r.queued for r in outs), default=now)
    single = isinstance(req.q, str)
    used = list(dict.fromkeys(name for route in named for name in route))
    body: dict[str, Any] = {
        "translatedText": outputs[0][0] if single else outputs[0],
        "model": ", ".join("+".join(route) for route in named)
        # (nothing was translated: source and target the same, a text detected in the target
        # language, or none with a word; it said "the text is in the target language" of an
        # English text sent as `source: de, target: de`)
        or "none (no text needed a model)",
        "models": used,
        "timings": {
            "total_ms": round((now - started) * 1000, 2),
            "queue_and_compute_ms": round((now - queued) * 1000, 2),
            "compute_ms": round(sum(r.compute_s for r in outs) * 1000, 2),
        },
    }
    if req.alternatives:
        alts = [
            distinct_alternatives(outputs[0][i], [outputs[k][i] for k in range(1, n_best)])
            for i in range(len(outputs[0]))
        ]
        body["alternatives"] = alts[0] if single else alts
    if detected is not None:
        found = [{"language": lang, "confidence": conf} for lang, conf in detected]
        body["detectedLanguage"] = found[0] if single else found
    return body
