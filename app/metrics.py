"""Prometheus metrics (prefix mt_), in a registry per app so that tests can build many apps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    disable_created_metrics,
)

from .batcher import BatchReport

if TYPE_CHECKING:
    from .registry import ModelEntry

# a request: a file's translation may take minutes (its upload alone may take 120 s)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# a batch, or a continuous decoder step (a GPU's take 1-3 ms)
COMPUTE_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# up to MT_MAX_RUNNING_TOKENS' default (65,536) and beyond
TOKEN_BUCKETS = (16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
#: the reasons of the labelled counters, each series there (at 0) from the start: a series
#: created at its first event reads as no increase (`rate()`, `increase()`), and alerts on it
#: missed the first burst
REJECTED = (
    "queue_full",
    "draining",
    "loading",
    "unavailable",
    "out_of_memory",
    "concurrency",
    "keys_unavailable",
    "files_full",
)
DROPPED = ("client_disconnected", "deadline", "shutdown")
UNLOADED = ("memory_budget", "warm_up_failed")

# no `_created` series beside each counter and histogram (one per label set: they doubled
# the scrape and nothing here reads them)
disable_created_metrics()


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        # the process's own (process_resident_memory_bytes, process_cpu_seconds_total, open
        # file descriptors; python_gc_*, python_info), as prometheus_client's default registry
        # has them: read at each scrape, one set per process whatever the apps in it
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            r.register(collector)
        self.requests = Counter(
            "mt_requests_total",
            "HTTP requests by route and status",
            ["route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "mt_request_latency_seconds",
            "HTTP request latency by route and outcome: answered (status below 400), refused"
            " (4xx, 503: quick; mixed with the answers they pulled the quantiles down when the"
            " server refused work), failed (500, 504 and other server errors) or cancelled"
            " (499: the client went away)",
            ["route", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_wait = Histogram(
            "mt_queue_wait_seconds",
            "time a sentence waited for its batch",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge("mt_queue_depth", "sentences waiting for a batch", registry=r)
        self.running = Gauge(
            "mt_running_sentences",
            "sentences in running decodes (continuous scheduler)",
            registry=r,
        )
        self.in_flight = Gauge(
            "mt_in_flight_requests", "translate requests being served", registry=r
        )
        self.batch_size = Histogram(
            "mt_batch_size",
            "sentences per batch (continuous scheduler: per decoder step)",
            buckets=SIZE_BUCKETS,
            registry=r,
        )
        self.batch_tokens = Histogram(
            "mt_batch_padded_tokens",
            "padded source tokens per batch (continuous: key/value positions allocated)",
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.batch_compute = Histogram(
            "mt_batch_compute_seconds",
            "time to translate one batch (continuous: one decoder step, with the joins and leaves"
            " since the last; also the last leaves of a running decode that ended, on their own)",
            buckets=COMPUTE_BUCKETS,
            registry=r,
        )
        self.batch_failures = Counter(
            "mt_batch_failures_total", "batches whose engine call raised", registry=r
        )
        self.input_tokens = Counter("mt_input_tokens_total", "source tokens translated", registry=r)
        self.generated_tokens = Counter(
            "mt_generated_tokens_total", "target tokens generated", registry=r
        )
        self.sentences = Counter(
            "mt_sentences_total",
            "texts decoded (each piece of a long sentence, a text sent whole and in pieces"
            " both ways, a text with numbers or names to keep as written and with stand-ins,"
            " each leg of a pivot; a piece repeated within a request once)",
            registry=r,
        )
        self.rejected = Counter(
            "mt_rejected_requests_total", "requests refused with 503", ["reason"], registry=r
        )
        self.timed_out = Counter(
            "mt_timed_out_requests_total", "requests past their deadline (504)", registry=r
        )
        self.dropped = Counter(
            "mt_dropped_sentences_total",
            "sentences removed before their decode ended: waiting ones, and with the continuous"
            " scheduler running ones",
            ["reason"],
            registry=r,
        )
        self.cancelled = Counter(
            "mt_cancelled_requests_total",
            "requests whose client went away before the answer (the 499s of mt_requests_total)",
            registry=r,
        )
        self.model_info = Info("mt_model", "a loaded model", ["model"], registry=r)
        self.model_loads = Counter(
            "mt_model_loads_total", "models loaded (at start-up or on first use)", registry=r
        )
        self.model_unloads = Counter(
            "mt_model_unloads_total", "models unloaded, by reason", ["reason"], registry=r
        )
        for counter, reasons in (
            (self.rejected, REJECTED),
            (self.dropped, DROPPED),
            (self.model_unloads, UNLOADED),
        ):
            for reason in reasons:
                counter.labels(reason)
        self.model_load_seconds = Histogram(
            "mt_model_load_seconds",
            "time to load one model (read, move to the device, prepare)",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.models_loaded = Gauge("mt_models_loaded", "models loaded now", registry=r)
        self.models_loaded_bytes = Gauge(
            "mt_models_loaded_bytes",
            "weight-file bytes of the models loaded now (what MT_MODEL_MEMORY_BUDGET_MB counts)",
            registry=r,
        )
        self.worker_busy = Gauge(
            "mt_worker_busy_seconds",
            "how long the inference thread's job running now (a batch, a decoder step, a "
            "model's load) has run; 0 while it waits (past MT_STALL_TIMEOUT_S, /health fails)",
            registry=r,
        )
        self.ready = Gauge(
            "mt_ready", "1 when the models are loaded and the server takes requests", registry=r
        )

    def observe_batch(self, report: BatchReport) -> None:
        if report.size or report.failed:  # (size 0: the leaves that ended a group, no batch)
            self.batch_size.observe(report.size)
            self.batch_tokens.observe(report.padded_tokens)
        self.batch_compute.observe(report.compute_s)
        for wait in report.queue_waits_s:
            self.queue_wait.observe(wait)
        if report.failed:
            self.batch_failures.inc()

    def model_loaded(self, entry: ModelEntry, seconds: float) -> None:
        t = entry.translator
        assert t is not None
        self.model_loads.inc()
        self.model_load_seconds.observe(seconds)
        self.models_loaded.inc()
        self.models_loaded_bytes.inc(entry.size_bytes)
        self.model_info.labels(entry.name).info(
            {
                "source": t.source_language,
                "target": t.target_language,
                "device": str(t.device),
                "dtype": t.precision,
                "parameters": str(t.parameters),
            }
        )

    def model_unloaded(self, entry: ModelEntry, reason: str) -> None:
        self.model_unloads.labels(reason).inc()
        self.models_loaded.dec()
        self.models_loaded_bytes.dec(entry.size_bytes)
        self.model_info.remove(entry.name)


def outcome(status: int) -> str:
    """mt_request_latency_seconds' `outcome` of an answer of this status: "answered" (below
    400), "cancelled" (499: the client went away), "failed" (a server error but 503, a
    deadline passed: 500, 504, the slowest), else "refused" (a client's mistake, a limit,
    a 503: quick)."""
    if status < 400:
        return "answered"
    if status == 499:
        return "cancelled"
    if status >= 500 and status != 503:
        return "failed"
    return "refused"
