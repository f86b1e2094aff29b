"""The bridge between the batcher and model_core: list and load the models (app/registry.py),
and the function the batcher's worker thread calls for each batch."""

from __future__ import annotations

import gc
import logging
import sys
import threading
import traceback
import weakref
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch

from model_core.allocator import keep_freed_memory
from model_core.continuous import (
    NewcomersFailed,
    RunningBatch,
    costs_for,
    footprint,
    layout_for,
)
from model_core.decoding import Hypothesis
from model_core.int8 import int8_available
from model_core.linear_backend import available_backends
from model_core.threads import SharedCpuThreads, available_cpus
from model_core.translator import Translator, resolve_device

from .continuous import NewcomersFailed as JoinFailed
from .metrics import Metrics
from .registry import (
    ModelLoadError,
    ModelOutOfMemory,
    Registry,
    RegistryError,
    discover,
    parse_names,
)
from .settings import Settings

log = logging.getLogger("app.engine")


class StartupError(Exception):
    """The models could not be loaded; the message names the directory and the problem."""


class OutOfMemoryLoad(StartupError):
    """A model could not be made ready for want of memory: at start-up that stops the
    server as another StartupError does, but on first use the next request tries again
    (memory may have been freed since), where a setting that does not fit is remembered."""


def out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is an allocation failure (torch raises a plain RuntimeError for the CPU)."""
    text = str(exc)
    return isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or (
        "can't allocate memory" in text or "out of memory" in text.lower()
    )


def let_go(exc: BaseException) -> None:
    """Clear the frames of `exc`'s traceback and of those of its causes, so that what their
    locals hold (a model half loaded, or loaded and not warmed up) is freed with them."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        traceback.clear_frames(current.__traceback__)
        current = current.__cause__ or current.__context__


@dataclass(frozen=True)
class DecodeKey:
    """Sentences share a batch only when all of these agree."""

    model: str
    beam_size: int
    n_best: int
    max_length: int


@dataclass
class SentenceResult:
    texts: list[str]  # best first; more than one when alternatives were asked for
    generated_tokens: int


def load_translator(
    path: Path,
    *,
    device: torch.device,
    dtype: str,
    quantize: str = "none",
    linear_backend: str = "auto",
) -> Translator:
    """One checkpoint directory on the device, int8 when asked."""
    try:
        translator = Translator.load(
            path, device=device, dtype=dtype, linear_backend=linear_backend
        )
    except (RuntimeError, MemoryError) as exc:  # (torch.OutOfMemoryError is a RuntimeError)
        if not out_of_memory(exc):
            raise
        detail = str(exc) or type(exc).__name__
        raise OutOfMemoryLoad(f"{path.name}: out of memory while loading: {detail}") from exc
    if quantize == "int8":
        try:
            translator.quantize_int8()
        except ValueError as exc:  # the device or dtype: a setting's mistake, not the files'
            raise StartupError(f"MT_QUANTIZE=int8 for {path.name}: {exc}") from exc
        except (RuntimeError, MemoryError) as exc:
            if out_of_memory(exc):  # passing: not the setting's mistake, nor the model's
                raise OutOfMemoryLoad(
                    f"MT_QUANTIZE=int8 for {path.name}: out of memory while quantizing: {exc}"
                ) from exc
            if not int8_available():  # this torch build: a setting's mistake here
                raise StartupError(f"MT_QUANTIZE=int8 for {path.name}: {exc}") from exc
            raise StartupError(  # this model's layers, the same at every try
                f"MT_QUANTIZE=int8 for {path.name}: quantizing the model failed: {exc}"
            ) from exc
    return translator


def preload_names(s: Settings, registry: Registry) -> list[str]:
    """The models MT_PRELOAD names ("all", "none", or a comma list of served models)."""
    value = s.preload.strip()
    if value == "all":  # those that serve a pair (not one another model serves already)
        serving = set(registry.pairs.values())
        return [name for name in registry.entries if name in serving]
    if value == "none":
        return []
    names = list(dict.fromkeys(parse_names(value)))  # each once
    unknown = [n for n in names if n not in registry.entries]
    if unknown:
        raise StartupError(
            f"MT_PRELOAD names {', '.join(unknown)}, not a served model "
            f"(served: {', '.join(registry.entries)})"
        )
    return names


WARM_UP_TEXTS = (  # the first, long, still runs when the others join it
    "The weather was cold, so we stayed at home and read books all afternoon.",
    "Hello world.",
    "Good morning, how are you?",
)


def warm_up(
    translator: Translator,
    beam_sizes: tuple[int, ...] = (1, 4),
    every_path: bool | None = None,
    fixed: bool = False,
) -> None:
    """Decode before the first requests do, so that they do not pay for one-time work.

    On a GPU (`every_path`, by default where the model is on CUDA) the first decode took
    0.54 s on an H200 against 18-50 ms for later ones (kernels are loaded at their first use;
    docs/BENCHMARKS.md section 7), so there greedy and each of `beam_sizes` (the service
    passes 1 and its default beam) run in static batches of 1, 2, 8 and 64 sentences and in a
    continuous decode that 63 sentences join while it runs. Other beam sizes and n-best
    counts are not run. On a CPU a path's first call cost at most about 2 ms more than later
    ones (the shipped en-de model on the 2-core machine, `bench.first_call_bench`), so there
    one sentence is decoded at the largest of `beam_sizes`, and a load on a request's path
    stays short. `fixed`: the continuous decode in fixed buffers (MT_CUDA_GRAPHS)."""
    if every_path is None:
        every_path = translator.device.type == "cuda"
    # a model of few positions (or pieces) may not take the long one whole
    sources = [translator.encode_source(t)[: translator.max_source_tokens] for t in WARM_UP_TEXTS]
    if not every_path:
        translator.translate_ids(sources[:1], beam_size=max(beam_sizes), max_length=16)
        return
    sizes = (1, 2, 8, 64)
    ids = [sources[i % len(sources)] for i in range(max(sizes))]
    for beam in sorted(set(beam_sizes)):
        for size in sizes:
            translator.translate_ids(ids[:size], beam_size=beam, max_length=16)
        decode_continuously(translator, ids, beam, max_length=16, fixed=fixed)


def decode_continuously(
    translator: Translator, ids: list[list[int]], beam: int, max_length: int, fixed: bool = False
) -> None:
    """A continuous decode of `ids`: the first alone, the others joining after its first
    step, until all are done (the warm-up's; bench.first_call_bench times it)."""
    running = translator.running_batch(beam, fixed=fixed)
    translator.join(running, [0], ids[:1], [max_length], [1])
    steps = 0
    while len(running):
        running.step()
        steps += 1
        if steps == 1 and len(ids) > 1:  # the others join a running decode
            rest = list(range(1, len(ids)))
            translator.join(running, rest, ids[1:], [max_length] * len(rest), [1] * len(rest))


class LoadingStopped(Exception):
    """Start-up was asked to stop (a shutdown signal) between two models."""


def start_engine(
    s: Settings, metrics: Metrics | None = None, stop: threading.Event | None = None
) -> Engine:
    """Set the thread count, list the served models, load those to preload, warm up: all of it
    on the calling thread, which must be the thread that then runs every batch and every later
    load. torch's OpenMP runtime keeps a team of threads per calling thread; a second thread
    that once ran torch work leaves more threads than cores, and OpenMP then stops spinning
    between parallel regions, which made each small operation several times slower on a
    2-core machine (docs/BENCHMARKS.md)."""
    threads = s.threads or available_cpus()
    torch.set_num_threads(threads)
    log.info("threads: %d%s", threads, "" if s.threads else " (the CPUs this process may use)")
    if s.tune_malloc:
        log.info("allocator: freed memory kept for reuse: %s", keep_freed_memory())
    try:
        dev = resolve_device(s.device)
    except ValueError as exc:
        raise StartupError(f"MT_DEVICE={s.device}: {exc}") from exc
    if s.linear_backend != "auto" and s.linear_backend not in available_backends():
        raise StartupError(
            f"MT_LINEAR_BACKEND={s.linear_backend}: not built here "
            f"(available: {', '.join(available_backends()) or 'none'})"
        )
    try:
        entries = discover(s.weights_dir, s.models, skip_bad=s.skip_bad_checkpoints)
    except RegistryError as exc:
        raise StartupError(str(exc)) from exc
    engine = Engine(
        Registry(
            entries,
            load=lambda path: load_translator(
                path,
                device=dev,
                dtype=s.dtype,
                quantize=s.quantize,
                linear_backend=s.linear_backend,
            ),
            budget_bytes=int(s.model_memory_budget_mb * 1_000_000),
            pivot=s.pivot_language,
            on_load=metrics.model_loaded if metrics else None,
            on_unload=metrics.model_unloaded if metrics else None,
        ),
        device=dev,
        warmup=s.warmup,
        warmup_beams=(1, s.default_beam_size),
        # MT_THREADS=0 on a CPU: fewer threads while other processes take CPUs (threads.py)
        threads=SharedCpuThreads(threads) if not s.threads and dev.type == "cpu" else None,
        cuda_graphs=s.cuda_graphs,
    )
    budget = engine.registry.budget_bytes
    used = 0
    for name in preload_names(s, engine.registry):
        if stop is not None and stop.is_set():  # a model's load cannot be cut short; the next
            raise LoadingStopped(name)  # is not started
        size = engine.registry.entries[name].size_bytes
        if budget and used + size > budget:
            log.warning(
                "MT_PRELOAD: %s left to load on first use: it would exceed the memory budget", name
            )
            continue
        try:
            engine.load(name, "MT_PRELOAD")
        except OutOfMemoryLoad as exc:
            if not s.skip_bad_checkpoints:
                raise
            # not the files' fault: the model stays served, loaded by its first request (which
            # gets 503 with Retry-After if memory is still short), as one past the budget is
            log.warning("MT_PRELOAD: %s; %s left to load on first use", exc, name)
            let_go(exc)  # the frames hold what was allocated so far
            continue
        except ModelLoadError as exc:
            if not s.skip_bad_checkpoints:
                raise StartupError(f"bad checkpoint {exc}") from exc
            log.warning("skipping bad checkpoint %s", exc)
            engine.registry.drop(name)
        used += size
    if not engine.registry.entries:
        raise StartupError(f"{s.weights_dir}: no loadable checkpoint directory")
    # Everything loaded so far lives as long as the process: keep it out of the cyclic garbage
    # collector's full passes, which otherwise walk it all (~0.1 s each) in the middle of batches.
    gc.collect()
    gc.freeze()
    engine.freeze_loads = True
    return engine


@dataclass
class _BatchWork:
    work: float | None = None  # None: not known (the thread policy then judges by preemptions)


class Engine:
    """The served models (a Registry); `run` is the batcher's function and `load` loads a
    model: both are called on the worker thread only."""

    def __init__(
        self,
        registry: Registry,
        *,
        device: torch.device,
        warmup: bool = True,
        warmup_beams: tuple[int, ...] = (1, 4),
        threads: SharedCpuThreads | None = None,
        cuda_graphs: bool = False,
    ):
        self.registry, self.device, self.warmup = registry, device, warmup
        # continuous decodes in fixed buffers, replayed from CUDA graphs (on a GPU only), and
        # each group's decode kept when it empties, with its buffers and graph, for the next
        self.fixed = cuda_graphs and device.type == "cuda"
        self.kept: dict[tuple[str, int], RunningBatch] = {}
        registry.before_unload = self._unloading
        registry.load_on_demand = self.load_on_demand  # with its warm-up, as at start-up
        self.warmup_beams = warmup_beams
        self.threads = threads  # None: the thread count stays as set (MT_THREADS > 0, a GPU)
        self.loaded_on = threading.get_ident()  # the thread that must run every batch
        self.freeze_loads = False  # set once started: see `load`
        # the continuous scheduler's running groups, while it holds them
        self.groups: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    @property
    def translators(self) -> dict[str, Translator]:
        """The loaded models by name."""
        return self.registry.loaded

    @property
    def pairs(self) -> dict[tuple[str, str], str]:
        """(source, target) -> the model that translates it directly."""
        return self.registry.pairs

    def load(self, name: str, reason: str) -> Translator:
        """Load a model (unloading others beyond the budget) and warm it up; a warm-up that
        ran out of memory unloads the model and is an OutOfMemoryLoad, as such a load is."""
        assert threading.get_ident() == self.loaded_on, "torch work belongs to the worker thread"
        translator = self.registry.load(name, reason)
        if self.warmup:
            try:
                warm_up(translator, self.warmup_beams, fixed=self.fixed)
            except (RuntimeError, MemoryError) as exc:
                if not out_of_memory(exc):
                    raise
                error = f"{name}: out of memory while warming up after its load: {exc}"
                let_go(exc)  # the traceback's frames hold the model (warm_up's locals)
                del translator, exc
                self.registry.unload(name, "its warm-up failed", label="warm_up_failed")
                raise OutOfMemoryLoad(error) from None
        self._freeze()
        return translator

    def _freeze(self) -> None:
        if self.freeze_loads:  # as start_engine does for the models loaded at start-up. A
            # model holds no reference cycles, so once unloaded it is freed by reference
            # counting, frozen or not.
            gc.collect()
            gc.freeze()

    def load_on_demand(self, name: str, reason: str) -> Translator:
        """`load` for a request (a model's first use): what keeps the model from serving is a
        ModelLoadError, which the request answers as such. A setting that does not fit the
        model (a StartupError at start-up) is remembered as a bad checkpoint is, so that the
        next request does not load it again only to fail the same way; a load that ran out of
        memory (OutOfMemoryLoad) is not; a model whose warm-up failed (out of memory, say) is
        unloaded, and the next request tries again. Out of memory, either way, is a
        ModelOutOfMemory (503, logged here once however many requests wait for the load)."""
        assert threading.get_ident() == self.loaded_on, "torch work belongs to the worker thread"
        try:
            translator = self.registry.load(name, reason)
        except OutOfMemoryLoad as exc:  # not remembered: the next request tries again
            log.error("%s; the next request for %s loads it again", exc, name)
            error = str(exc)
            # the tracebacks' frames hold what was allocated so far: let go of it
            let_go(exc)
            del exc
            raise ModelOutOfMemory(error) from None
        except StartupError as exc:
            self.registry.remember_failure(name, str(exc))
            raise ModelLoadError(str(exc)) from exc
        if not self.warmup:
            return translator
        try:
            warm_up(translator, self.warmup_beams, fixed=self.fixed)
        except Exception as exc:
            log.exception("%s: the warm-up after its load failed", name)
            error = f"{name}: the warm-up after its load failed: {exc}"
            kind = ModelOutOfMemory if out_of_memory(exc) else ModelLoadError
            # the traceback's frames hold the model (warm_up's locals): let go of it first
            let_go(exc)
            del translator, exc
            self.registry.unload(name, "its warm-up failed", label="warm_up_failed")
            raise kind(error) from None
        self._freeze()
        return translator

    def translator(self, model: str) -> Translator:
        translator = self.registry.entries[model].translator
        assert translator is not None, f"{model} is held by its requests, so it is loaded"
        return translator

    @contextmanager
    def threads_for_batch(self):
        """The thread count for the next batch or step (MT_THREADS=0 on a CPU: fewer while
        other processes take CPUs). The body sets `.work` on what it yields: the batch's
        decoder rows x steps plus its source tokens, by which fewer threads are judged."""
        batch = _BatchWork()
        if self.threads is not None:
            wanted = self.threads.before_batch()
            if wanted != torch.get_num_threads():
                torch.set_num_threads(wanted)
        yield batch  # a batch that raised is not reported: its time says nothing of its work
        if self.threads is not None:
            self.threads.after_batch(batch.work)

    def run(self, key: DecodeKey, payloads: list[list[int]]) -> list[SentenceResult]:
        translator = self.translator(key.model)
        with self.threads_for_batch() as batch:
            hyps = translator.translate_ids(
                payloads, beam_size=key.beam_size, n_best=key.n_best, max_length=key.max_length
            )
            batch.work = sum(map(len, payloads)) + key.beam_size * sum(
                len(sent[0].tokens) + 1 for sent in hyps if sent
            )
        return [sentence_result(translator, sent) for sent in hyps]

    # The continuous scheduler's side (app/continuous.py): a group is one model and beam size.

    @staticmethod
    def places_for(max_rows: int) -> Callable[[tuple[str, int]], int]:
        """The continuous scheduler's bound on a group's sentences (running, or in one step)
        for a bound on its decoder rows, sentences x beam size (0: none)."""
        if not max_rows:
            return lambda group: sys.maxsize
        return lambda group: max(1, max_rows // group[1])

    @staticmethod
    def group_of(key: DecodeKey) -> tuple[str, int]:
        return key.model, key.beam_size

    def open_group(self, group: tuple[str, int]) -> RunningGroup:
        model, beam_size = group
        translator = self.translator(model)
        kept = self.kept.pop(group, None)
        if kept is None or len(kept) or kept.model is not translator.model:
            kept = translator.running_batch(beam_size, fixed=self.fixed)
        if self.fixed:
            self.kept[group] = kept
        running = RunningGroup(self, translator, kept)
        self.groups[group] = running
        return running

    def kept_footprints(self) -> dict[tuple[str, int], int]:
        """Key/value positions the kept decodes of the groups hold (MT_CUDA_GRAPHS), by group:
        the scheduler counts those of the groups not running against its budget. Those of a
        model no longer loaded are dropped (their buffers and the model with them)."""
        loaded = self.registry.loaded
        for group, batch in list(self.kept.items()):
            translator = loaded.get(group[0])
            if translator is None or batch.model is not translator.model:
                self.release_kept(group)
        return {group: self.envelope(group, []) for group in self.kept}

    def release_kept(self, group: tuple[str, int]) -> None:
        """Let go of a group's kept decode and its memory (the scheduler needs the memory for
        another group, or its model is unloaded)."""
        batch = self.kept.pop(group, None)
        if batch is not None:
            batch.reset()  # its buffers go now, whoever still refers to the batch

    def _unloading(self, model: str) -> None:
        """The registry is about to unload `model`: its kept decodes go first."""
        for group in [g for g in self.kept if g[0] == model]:
            self.release_kept(group)

    def envelope(self, group: tuple[str, int], members: list[tuple[DecodeKey, int]]) -> int:
        """Key/value positions a running group of these (key, source tokens) sentences holds
        at most, as model_core.continuous.footprint counts them for its RunningBatch: room for
        its sentences times (beam size x the longest output limit for self-attention, with the
        copy a step makes of it where the layout moves the beams' rows, + the longest source
        for cross-attention), or the room its buffers already hold, if more (in fixed buffers,
        MT_CUDA_GRAPHS, each rounded up to its power of two); with what a step's work holds per
        row, or what the join holds (the buffers of before, where these sentences need more
        room, while it copies them; the newcomers' encoder work), whichever is more."""
        model, beam_size = group
        most: dict[int, int] = {}
        longest = 0
        running = self.groups.get(group)
        batch = running.running if running is not None else self.kept.get(group)
        if not members and batch is None:
            return 0
        if members:
            translator = self.translator(model)
            opts = translator.options(beam_size=beam_size, n_best=1)
            # the limit grows with the source and with max_length: the longest source of each
            # max_length gives the longest limit (admission calls this for every candidate)
            for key, cost in members:
                if cost > most.get(key.max_length, 0):
                    most[key.max_length] = cost
            ratio, extra = opts.max_length_ratio, opts.max_length_extra
            longest = max(
                translator.max_output_length(cost, limit, ratio, extra)
                for limit, cost in most.items()
            )
        sizes = (len(members), longest, max(most.values(), default=0))
        if batch is not None:  # (the members it does not hold yet join now)
            return batch.footprint(*sizes, joining=max(0, len(members) - len(batch)))
        net = translator.model
        costs = costs_for(net)
        return footprint(
            beam_size, layout_for(net, self.fixed), (0, 0, 0), *sizes, costs, len(members)
        )


def sentence_result(translator: Translator, hyps: list[Hypothesis]) -> SentenceResult:
    decode = translator.target_tokenizer.decode
    return SentenceResult([decode(h.tokens) for h in hyps], len(hyps[0].tokens) + 1)


class RunningGroup:
    """One model's continuous decode at one beam size, for the continuous scheduler: sentences
    join and leave between steps; each keeps its own key's max_length and n_best."""

    def __init__(self, engine: Engine, translator: Translator, running: RunningBatch):
        self.engine, self.translator, self.running = engine, translator, running

    @contextmanager
    def _failing(self):
        """A call that raises leaves the decode part-way (the scheduler then fails its
        sentences): it is reset, so that nothing reuses it as it is (MT_CUDA_GRAPHS keeps it);
        but a join whose newcomers failed before it changed anything leaves it as it was, and
        the scheduler fails those alone."""
        try:
            yield
        except NewcomersFailed as exc:
            raise JoinFailed(str(exc)) from exc
        except BaseException:
            self.running.reset()
            raise

    def join(self, entries: list[tuple[int, DecodeKey, list[int]]]) -> None:
        """The newcomers join together; where that fails before the decode changed (their
        encoder out of memory, say), each tries alone, so that one newcomer too large for
        the memory left fails alone (JoinFailed naming those that did not join)."""
        try:
            self._join(entries)
        except JoinFailed:
            if len(entries) == 1:
                raise
            failed, cause = [], None
            for entry in entries:
                try:
                    self._join([entry])
                except JoinFailed as exc:
                    failed.append(entry[0])
                    cause = exc
            if failed:
                raise JoinFailed(
                    f"{len(failed)} of {len(entries)} newcomers could not join", failed
                ) from cause

    def _join(self, entries: list[tuple[int, DecodeKey, list[int]]]) -> None:
        with self._failing(), self.engine.threads_for_batch() as batch:
            batch.work = sum(len(payload) for _, _, payload in entries)
            self.translator.join(
                self.running,
                [sid for sid, _, _ in entries],
                [payload for _, _, payload in entries],
                [key.max_length for _, key, _ in entries],
                [key.n_best for _, key, _ in entries],
            )

    @property
    def partial_steps(self) -> bool:
        return self.running.partial_steps

    def step(self, only: list[int] | None = None) -> list[tuple[int, SentenceResult]]:
        with self._failing(), self.engine.threads_for_batch() as batch:
            batch.work = self.running.rows if only is None else len(only) * self.running.k
            finished = self.running.step(only)
        # the ids are those `join` was given: ints
        return [(cast(int, sid), sentence_result(self.translator, hyps)) for sid, hyps in finished]

    def leave(self, ids: list[int]) -> None:
        with self._failing():
            self.running.leave(ids)
