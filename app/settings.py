"""The one settings object of the service. Every field reads the environment variable
MT_<FIELD NAME> (e.g. MT_MAX_BATCH_SIZE=64); the README's configuration table lists them."""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MAX_THREADS = 1024  # more threads than any machine's CPUs; beyond, a process limit ends it
MAX_BEAM = 64  # a beam this wide already decodes 64 hypotheses per sentence


class Settings(BaseSettings):
    # no setting is infinite or NaN: each is a size, a count or a time something waits
    model_config = SettingsConfigDict(env_prefix="MT_", extra="ignore", allow_inf_nan=False)

    host: str = Field("127.0.0.1", description="address to listen on (0.0.0.0 in containers)")
    port: int = Field(8000, ge=1, le=65535, description="TCP port")
    weights_dir: Path = Field(
        Path("weights"), description="folder of checkpoint directories to serve"
    )
    device: str = Field("auto", description="auto (CUDA when present, else CPU), cpu, cuda, cuda:N")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto", description="auto: bfloat16/float16 on GPU, float32 on CPU"
    )
    threads: int = Field(
        0,
        ge=0,
        le=MAX_THREADS,
        description="CPU threads for inference (0: the CPUs this process may use: its affinity mask and cgroup CPU quota, fewer while other processes take them)",
    )
    linear_backend: Literal["auto", "panels", "onednn"] = Field(
        "auto",
        description="float32 CPU linear layers: panels (model_core's own AVX2 kernel), onednn "
        "(torch's oneDNN), or auto: chosen for this CPU, by instruction set and a start-up "
        "micro-benchmark cached per machine (model_core/linear_backend.py)",
    )
    tune_malloc: bool = Field(
        True,
        description="keep freed memory in glibc's heap for reuse instead of page-faulting it in "
        "again every decoding step (model_core/allocator.py)",
    )
    quantize: Literal["none", "int8"] = Field(
        "none",
        description="int8: int8 linear layers, each input row with its own scale (CPU only)",
    )
    models: str | None = Field(
        None,
        description="comma list of the directories in MT_WEIGHTS_DIR to serve (unset: all)",
    )
    preload: str = Field(
        "all",
        description="models loaded at start-up: all, none, or a comma list of served models; "
        "the others load on first use (all: those that serve a pair, as many as the memory "
        "budget holds)",
    )
    model_memory_budget_mb: float = Field(
        0,
        ge=0,
        description="weight-file megabytes of loaded models at most; beyond, the least recently "
        "used model no request is using is unloaded before another loads (0: no limit)",
    )
    pivot_language: str = Field(
        "en",
        description="language to translate through when no model translates a pair directly "
        "but two models do via this language (empty: never pivot)",
    )
    skip_bad_checkpoints: bool = Field(
        False, description="warn and skip a bad checkpoint instead of stopping"
    )
    warmup: bool = Field(
        True,
        description="decode with each model as it loads, before it serves: on a CPU one "
        "sentence at the default beam; on a GPU greedy and the default beam, static batches of "
        "1-64 sentences and a continuous decode (app/engine.py warm_up)",
    )
    scheduler: Literal["continuous", "static"] = Field(
        "static",
        description="continuous: sentences join a running decode between steps and leave it "
        "when they finish; static: batches decoded to their end (app/batcher.py)",
    )
    max_running_tokens: int = Field(
        65536,
        ge=1,
        description="continuous scheduler: key/value positions the running decodes may hold "
        "at most (per group: rows x longest output limit, twice where its steps copy the "
        "beams' rows, + sentences x longest source, + each row's logits in a step; a join "
        "counts the newcomers' encoder and, where it grows a group's buffers, the old ones)",
    )
    max_running_rows: int = Field(
        0,
        ge=0,
        description="continuous scheduler: decoder rows (sentences x beam size) one running "
        "decode steps at most, which bounds a step's time where it grows with its rows, as on a "
        "CPU (0: no bound but MT_MAX_BATCH_SIZE)",
    )
    max_step_rows: int = Field(
        0,
        ge=0,
        description="continuous scheduler: decoder rows (sentences x beam size) one step "
        "computes at most where the engine can step a subset (the CPU's slot layout); beyond, "
        "sentences that sat out 5 steps in a row go first, then those of the requests with the "
        "fewest sentences left, so a short request steps at the pace of a bounded step beside "
        "many long ones (0: every sentence steps)",
    )
    step_bound_wait_ms: float = Field(
        0.0,
        ge=0,
        description="continuous scheduler, with MT_MAX_STEP_ROWS: while a sentence has waited "
        "longer than this to join a full running decode, every running sentence steps (bounded "
        "steps finish fewer sentences per second: under overload the queue would only grow) "
        "(0: the bound always applies)",
    )
    join_every_steps: int = Field(
        4,
        ge=1,
        le=1000,
        description="continuous scheduler: a running decode takes newcomers at most every this "
        "many steps, all of those waiting together (a decode with no sentence running takes "
        "them at once); a join costs the host about as much for one newcomer as for many, on a "
        "GPU more than a step; 4 against 1 on a CPU: docs/BENCHMARKS.md section 6 (1: at every "
        "step)",
    )
    cuda_graphs: bool = Field(
        False,
        description="continuous scheduler on a GPU: each running decode keeps buffers of a "
        "fixed size (rows, sources and positions in powers of two, kept for the next decode "
        "of its model and beam size, counted in MT_MAX_RUNNING_TOKENS) and replays its decoder "
        "step from a CUDA graph, one launch instead of one per operation (docs/BENCHMARKS.md "
        "section 7)",
    )
    max_request_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="share of MT_MAX_QUEUE_SIZE one request's sentences may take; beyond: 413",
    )
    max_batch_size: int = Field(
        64, ge=1, description="sentences per batch (continuous: per running decode) at most"
    )
    max_batch_tokens: int = Field(4096, ge=1, description="padded source tokens per batch at most")
    max_wait_ms: float = Field(
        20.0,
        ge=0,
        description="how long a batch waits for more sentences at most (only while traffic is "
        "concurrent; it stops waiting once as many wait as the previous batch held)",
    )
    max_queue_size: int = Field(2048, ge=1, description="sentences waiting at most; beyond: 503")
    request_timeout_s: float = Field(60.0, gt=0, description="deadline of a request; beyond: 504")
    shutdown_timeout_s: float = Field(
        30.0, ge=0, description="time to finish accepted work on SIGTERM"
    )
    max_request_chars: int = Field(
        20_000,
        ge=1,
        description="characters per request at most, a list `q`'s texts together; beyond: 413",
    )
    max_texts: int = Field(128, ge=1, description="texts in a list `q` at most; beyond: 413")
    max_body_bytes: int = Field(
        1_000_000, ge=1, description="bytes of a /translate request body at most; beyond: 413"
    )
    body_timeout_s: float = Field(
        30.0,
        gt=0,
        description="time for a /translate request's whole body to arrive after its headers; "
        "beyond: 408 and the connection is closed",
    )
    file_body_timeout_s: float = Field(
        120.0,
        gt=0,
        description="time for a /translate_file upload to arrive in full after its headers; "
        "beyond: 408 and the connection is closed",
    )
    max_concurrency: int = Field(
        512,
        ge=1,
        description="HTTP requests in progress at most (/health, /health/* and /metrics not "
        "counted); beyond: 503 + Retry-After at once and the connection is closed",
    )
    max_sentence_tokens: int = Field(
        200, ge=8, description="longer sentences are split into pieces"
    )
    normalize_quotes: bool = Field(
        True,
        description="typographic double quotation marks (“ ” „ « ») are read as the straight "
        "one by the model (app/translate.py QUOTES); the translation keeps what the model writes",
    )
    recase: bool = Field(
        True,
        description="a sentence in capitals or in Title Case is sent with each word cased as "
        "the model's vocabulary writes it most often, and the translation of one in capitals "
        "given back in capitals (model_core/truecase.py)",
    )
    keep_numbers: bool = Field(
        True,
        description="a sentence with numbers of two digits or more is translated as written "
        "and with stand-in numbers, and the translation that keeps the source's numbers is "
        "given (model_core/verbatim.py)",
    )
    keep_names: bool = Field(
        True,
        description="a sentence with names the model's vocabulary does not know (not in a "
        "language that capitalises its nouns) is translated as written and with stand-in "
        "names, and the translation that keeps the names is given (model_core/verbatim.py)",
    )
    spell_symbols: bool = Field(
        True,
        description="currency symbols by numbers (€20, 20 €), degrees (25°C) and '&' between "
        "words are sent spelled as words of the source language (English, German), which the "
        "shipped models learned (model_core/symbols.py)",
    )
    default_beam_size: int = Field(
        4, ge=1, le=MAX_BEAM, description="beam size when the request gives none"
    )
    max_beam_size: int = Field(
        8, ge=1, le=MAX_BEAM, description="largest beam_size a request may ask for"
    )
    max_alternatives: int = Field(
        3, ge=0, description="largest `alternatives` a request may ask for"
    )
    max_output_length: int = Field(256, ge=1, description="cap on generated tokens per sentence")
    retry_after_s: int = Field(2, ge=1, description="Retry-After header on 503 answers")
    stall_timeout_s: float = Field(
        300,
        ge=0,
        description="a job of the inference thread (a batch, a decoder step, a model's load) "
        "running longer than this is taken for a hang: /health, /health/ready and "
        "/health/live answer 503 until it ends (0: never)",
    )
    files_dir: Path | None = Field(
        None,
        description="folder for translated files awaiting download (default: a new folder in "
        "the system's temporary directory)",
    )
    file_ttl_s: float = Field(
        1800.0, gt=0, description="how long a translated file can be downloaded"
    )
    max_file_bytes: int = Field(
        10_000_000, ge=1, description="bytes of an uploaded file at most; beyond: 413"
    )
    files_max_total_bytes: int = Field(
        500_000_000, ge=1, description="bytes of translated files kept at most; beyond: 503"
    )
    max_file_chars: int = Field(
        200_000,
        ge=1,
        description="characters of text in one file at most; beyond: 413 (it bounds the "
        "markup too: 20 bytes per character for a text file, 5 for .md, 50 for office XML)",
    )
    max_unpacked_bytes: int = Field(
        50_000_000,
        ge=1,
        description="bytes a .docx/.pptx/.odt/.odp/.epub may unpack to at most, and a .pdf's "
        "page contents, forms and fonts decode to; beyond: 413",
    )
    api_keys_db: Path | None = Field(
        None,
        description="SQLite database of API keys, managed with `mt-keys` (created when missing); "
        "when set, an unknown or revoked `api_key` gets 403",
    )
    api_keys_required: bool = Field(
        False, description="refuse requests without a valid `api_key` (403); needs api_keys_db"
    )
    req_limit_per_minute: int = Field(
        0,
        ge=0,
        description="requests per minute to /translate, /detect and /translate_file per API key, "
        "or per client address without one (0: no limit; a key may carry its own), a list of N "
        "texts counting N, a file one per max_request_chars of its text; beyond: 429",
    )
    char_limit_per_day: int = Field(
        0,
        ge=0,
        description="characters per day per API key or client address (0: no limit; a key may "
        "carry its own); beyond: 429",
    )
    cors_origins: str = Field(
        "*",
        description="origins allowed to call the API from a browser, comma-separated ('*': any, "
        "as LibreTranslate; empty: no CORS headers)",
    )
    frontend_timeout_ms: int = Field(
        500, ge=0, description="typing pause before a web page translates (/frontend/settings)"
    )
    log_level: Literal["debug", "info", "warning", "error", "critical"] = Field(
        "info", description="debug, info, warning, error, critical (any letter case)"
    )
    access_log: bool = Field(
        True, description="log a line per HTTP request (uvicorn's access log, at info level)"
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("preload", mode="before")
    @classmethod
    def _keywords_in_any_case(cls, value: object) -> object:
        # `ALL`, `None` as `all`, `none` (a list names the models as their folders are named)
        if isinstance(value, str) and value.strip().lower() in ("all", "none"):
            return value.strip().lower()
        return value

    @field_validator("device", mode="before")
    @classmethod
    def _a_device(cls, value: object) -> object:
        # a name no machine has (`gpu`) was taken, and stopped the server after its port was up
        if isinstance(value, str):
            value = value.strip().lower()
            if not re.fullmatch(r"auto|cpu|cuda(?::\d{1,2})?", value):
                raise ValueError(f"{value!r} is no device: give auto, cpu, cuda or cuda:N")
        return value

    @model_validator(mode="before")
    @classmethod
    def _blank_path_is_unset(cls, data: object) -> object:
        # a path setting left blank (`MT_WEIGHTS_DIR=`, `${VAR:-}` in a compose file) takes its
        # default: Path("") is the current folder. Text settings keep their blank meaning
        # (an empty MT_PIVOT_LANGUAGE: never pivot), so pydantic-settings' env_ignore_empty,
        # which would drop them all, does not fit.
        if not isinstance(data, dict):
            return data
        return {
            key: value
            for key, value in data.items()
            if not (key in PATH_SETTINGS and isinstance(value, str) and not value.strip())
        }

    @model_validator(mode="after")
    def _keys_need_a_database(self) -> Settings:
        if self.api_keys_required and self.api_keys_db is None:
            raise ValueError("MT_API_KEYS_REQUIRED=true needs MT_API_KEYS_DB (the keys database)")
        return self

    @model_validator(mode="after")
    def _beams_within_the_largest(self) -> Settings:
        # a request without beam_size decoded with MT_DEFAULT_BEAM_SIZE, and one with
        # `alternatives: n` with a beam of n + 1, whatever MT_MAX_BEAM_SIZE said
        if self.default_beam_size > self.max_beam_size:
            raise ValueError(
                f"MT_DEFAULT_BEAM_SIZE ({self.default_beam_size}) is more than MT_MAX_BEAM_SIZE "
                f"({self.max_beam_size}): a request without beam_size would decode with a beam "
                "no request may ask for"
            )
        if self.max_alternatives + 1 > self.max_beam_size:
            raise ValueError(
                f"MT_MAX_ALTERNATIVES ({self.max_alternatives}) needs a beam of "
                f"{self.max_alternatives + 1}, more than MT_MAX_BEAM_SIZE ({self.max_beam_size})"
            )
        return self


#: the settings that name a file or folder
PATH_SETTINGS = frozenset(
    name
    for name, field in Settings.model_fields.items()
    if Path in (typing.get_args(field.annotation) or (field.annotation,))
)

#: MT_ variables that are not settings of the process but are read around it
#: (docker-compose.yml: the host port)
OTHER_VARIABLES = frozenset({"MT_PUBLISHED_PORT"})


def unknown_variables(environ: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """MT_ variables of `environ` that are no setting (a misspelt name is otherwise ignored in
    silence), each with the setting it most resembles, if any."""
    known = {f"MT_{name.upper()}" for name in Settings.model_fields}
    out = []
    for name in sorted(environ):
        upper = name.upper()
        if upper.startswith("MT_") and upper not in known and upper not in OTHER_VARIABLES:
            close = difflib.get_close_matches(upper, known, n=1, cutoff=0.8)
            out.append((name, close[0] if close else None))
    return out
