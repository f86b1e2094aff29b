"""Which checkpoint directories the service serves, which of them are loaded, and routing a
language pair to one model or, through a pivot language, to two.

Every directory under MT_WEIGHTS_DIR (or those named in MT_MODELS) is *served*: its language
pairs come from `model_core.checkpoint.describe`, which reads metadata only, so /languages and
/models list it before its weights are read. When several served directories translate the
same pair, the first of them in MT_MODELS serves it (MT_MODELS unset: the first in sorted
order), and the log says so. MT_PRELOAD names those loaded at start-up; the
others load on first use. Beyond MT_MODEL_MEMORY_BUDGET_MB (weight-file bytes of the loaded
models) the least recently used models are unloaded before another loads; a model that a
request holds (`hold`) is never unloaded.

Threads: loading and unloading run on the worker thread that runs every batch (see
app/engine.py, start_engine); `hold`, `route` and the in-use counts live on the event loop. The
one lock guards what both sides touch: the in-use counts and the set of loaded models.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from model_core.allocator import release_freed_memory
from model_core.checkpoint import CheckpointError, describe, weights_bytes
from model_core.langcodes import two_letter
from model_core.translator import Translator

log = logging.getLogger("app.registry")


class RegistryError(Exception):
    """A setting or a directory that stops the service from starting; the message says which."""


class ModelLoadError(Exception):
    """A served model failed to load on first use (its directory changed or is broken)."""


class ModelOutOfMemory(ModelLoadError):
    """A model's first-use load or warm-up ran out of memory: passing (the next request tries
    again), so its requests are answered 503 with Retry-After rather than 500."""


@dataclass
class ModelEntry:
    """One served checkpoint directory."""

    name: str
    path: Path
    pairs: list[tuple[str, str]]
    size_bytes: int  # weight-file bytes: the model's share of the memory budget
    translator: Translator | None = None
    in_use: int = 0  # requests holding the model (never unloaded while > 0)
    last_used: float = 0.0  # time.monotonic() of the last hold, for least-recently-used
    failed: tuple[tuple, str] | None = None  # (its files as they were, the error) of a failed load

    @property
    def loaded(self) -> bool:
        return self.translator is not None


def parse_names(value: str) -> list[str]:
    """'a, b,c' -> ['a', 'b', 'c']."""
    return [n.strip() for n in value.split(",") if n.strip()]


def discover(
    weights_dir: Path, selected: str | None = None, *, skip_bad: bool = False
) -> list[ModelEntry]:
    """The served directories: all under `weights_dir`, or those named in `selected` (comma
    list), each with its language pairs and size, read without loading weights."""
    if not weights_dir.is_dir():
        raise RegistryError(f"{weights_dir}: weights directory not found")
    found = sorted(p for p in weights_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    names = parse_names(selected or "")
    if names:
        by_name = {p.name: p for p in found}
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise RegistryError(
                f"MT_MODELS names {', '.join(unknown)}, not a directory in {weights_dir} "
                f"(there: {', '.join(sorted(by_name)) or 'none'})"
            )
        found = [by_name[n] for n in dict.fromkeys(names)]
    entries = []
    for path in found:
        try:
            pairs = describe(path)
        except CheckpointError as exc:
            if not skip_bad:
                raise RegistryError(f"bad checkpoint {path}: {exc}") from exc
            log.warning("skipping bad checkpoint %s: %s", path, exc)
            continue
        entries.append(ModelEntry(path.name, path, pairs, weights_bytes(path)))
    if not entries:
        raise RegistryError(
            f"{weights_dir}: no loadable checkpoint directory (config.json + model.safetensors)"
        )
    return entries


def files_state(directory: Path) -> tuple:
    """What changes when a model's files are replaced (even by a copy that keeps the
    times): each file's name, inode, size and change times."""
    try:
        stats = [(p.name, p.stat()) for p in directory.iterdir()]
    except OSError:
        return ()
    return tuple(sorted((n, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for n, s in stats))


#: a model loaded past the memory budget is unloaded once no request has used it this long
TRIM_IDLE_S = 5.0


class Registry:
    """The served models, the loaded ones among them, and the routes between languages."""

    def __init__(
        self,
        entries: list[ModelEntry],
        *,
        load: Callable[[Path], Translator],
        budget_bytes: int = 0,
        pivot: str = "en",
        on_load: Callable[[ModelEntry, float], None] | None = None,
        on_unload: Callable[[ModelEntry, str], None] | None = None,
        idle_s: float = TRIM_IDLE_S,
    ):
        """`load`: path -> Translator (called on the worker thread); `budget_bytes`: 0 for no
        limit; `on_load(entry, seconds)` / `on_unload(entry, reason)`: for metrics."""
        self.entries = {e.name: e for e in entries}
        self._load, self.budget_bytes, self.pivot = load, budget_bytes, pivot
        self.on_load, self.on_unload = on_load, on_unload
        # called with a model's name before it is unloaded (on the worker thread), so that
        # whatever else holds it lets go first (the engine's kept decodes)
        self.before_unload: Callable[[str], None] | None = None
        # the direct routes; once built, replaced and never changed in place (app/translate.py
        # keeps the codes it read from it until it is another dict)
        self.pairs: dict[tuple[str, str], str] = {}
        for e in entries:
            for pair in e.pairs:
                if pair in self.pairs:
                    log.warning(
                        "%s and %s both translate %s->%s; %s serves it (the first in MT_MODELS, "
                        "else in sorted order: set MT_MODELS to choose)",
                        self.pairs[pair],
                        e.name,
                        *pair,
                        self.pairs[pair],
                    )
                else:
                    self.pairs[pair] = e.name
        self._lock = threading.Lock()
        self._loading: dict[str, asyncio.Future] = {}  # event loop side: loads under way
        self.worker_run: Callable | None = None  # set by the service: awaits fn on the worker
        # what a request's load runs on the worker (the engine's: the load and its warm-up)
        self.load_on_demand: Callable[[str, str], Translator] = self.load
        self._trimming = False  # a trim to the budget is scheduled
        self.idle_s = idle_s  # a model loaded past the budget goes once unused this long

    def drop(self, name: str) -> None:
        """Stop serving a model (one that failed to load at start-up)."""
        self.entries.pop(name)
        self.pairs = {pair: n for pair, n in self.pairs.items() if n != name}

    # --- routing (event loop) -------------------------------------------------------------

    def route(self, source: str, target: str) -> list[str] | None:
        """The model names that translate source->target: one, or two through the pivot
        language; None when there is no way. A three-letter code with a two-letter one
        (`deu`) finds the routes listed under that (`de`)."""
        found = self._route(source, target)
        if found is None and (two_letter(source), two_letter(target)) != (source, target):
            found = self._route(two_letter(source), two_letter(target))
        return found

    def _route(self, source: str, target: str) -> list[str] | None:
        if (source, target) in self.pairs:
            return [self.pairs[(source, target)]]
        x = self.pivot
        if x not in (source, target) and (source, x) in self.pairs and (x, target) in self.pairs:
            return [self.pairs[(source, x)], self.pairs[(x, target)]]
        return None

    def reachable(self) -> dict[str, list[str]]:
        """Every source language -> the targets it can reach, directly or through the pivot."""
        sources = sorted({s for s, _ in self.pairs})
        targets = sorted({t for _, t in self.pairs})
        return {s: [t for t in targets if t != s and self.route(s, t) is not None] for s in sources}

    # --- holding and lazy loading (event loop) -------------------------------------------

    @property
    def loaded(self) -> dict[str, Translator]:
        """The loaded models by name."""
        return {n: e.translator for n, e in self.entries.items() if e.translator is not None}

    def loaded_bytes(self) -> int:
        return sum(e.size_bytes for e in self.entries.values() if e.loaded)

    @contextlib.asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[Translator]:
        """The model, loaded if it is not (on the worker thread), and kept loaded until the
        block ends."""
        entry = self.entries[name]
        with self._lock:
            entry.in_use += 1
            entry.last_used = time.monotonic()
        try:
            translator = entry.translator
            if translator is None:
                translator = await self._load_once(name)
            yield translator
        finally:
            with self._lock:
                entry.in_use -= 1
                over = (
                    self.budget_bytes
                    and self.loaded_bytes() > self.budget_bytes
                    and not self._trimming
                    and self.worker_run is not None
                )
                if over:
                    self._trimming = True
            if over:  # loaded past the budget while others were in use: back within it once
                # the models past it have been idle a while (at once would reload them in turn
                # under traffic that alternates between them)
                asyncio.get_running_loop().call_later(self.idle_s, self._trim_soon)

    async def _load_once(self, name: str) -> Translator:
        """One load per model however many requests wait for it; a request that goes away
        does not cancel the load the others wait for."""
        future = self._loading.get(name)
        if future is None:
            assert self.worker_run is not None, "the service sets worker_run before serving"
            future = asyncio.ensure_future(
                self.worker_run(self.load_on_demand, name, "a first request")
            )
            self._loading[name] = future
            future.add_done_callback(lambda _: self._loading.pop(name, None))
        return await asyncio.shield(future)

    # --- loading and unloading (worker thread) -------------------------------------------

    def load(self, name: str, reason: str) -> Translator:
        """Load `name` (if it is not), first unloading the least recently used models that no
        request holds while the budget would be exceeded."""
        entry = self.entries[name]
        if entry.translator is not None:
            return entry.translator
        if entry.failed is not None and entry.failed[0] == files_state(entry.path):
            # failed before, its files unchanged: fails again at once, unloading nothing
            raise ModelLoadError(entry.failed[1])
        self._unload(self._make_room(entry), f"memory budget: {name} needed room")
        started = time.perf_counter()
        try:
            translator = self._load(entry.path)
        except CheckpointError as exc:
            entry.failed = (files_state(entry.path), f"{name}: {exc}")
            raise ModelLoadError(f"{name}: {exc}") from exc
        entry.failed = None
        seconds = time.perf_counter() - started
        entry.translator = translator
        if self.on_load:
            self.on_load(entry, seconds)
        log.info(
            "loaded %s for %s (%s, %.1f MB of weights) in %.2f s on %s as %s, linear layers: "
            "%s; %d model(s), %.1f MB loaded%s",
            name,
            reason,
            ", ".join(f"{s}->{t}" for s, t in entry.pairs),
            entry.size_bytes / 1e6,
            seconds,
            translator.device,
            translator.precision,
            translator.linear_backend or "torch",
            len(self.loaded),
            self.loaded_bytes() / 1e6,
            f" of a {self.budget_bytes / 1e6:.1f} MB budget" if self.budget_bytes else "",
        )
        return translator

    def remember_failure(self, name: str, error: str) -> None:
        """(Worker thread.) `name` cannot be loaded as its files are: `load` fails again at
        once with `error`, unloading nothing, until they change."""
        entry = self.entries[name]
        entry.failed = (files_state(entry.path), error)

    def unload(self, name: str, reason: str, label: str) -> None:
        """(Worker thread.) Unload `name` if it is loaded and no other reference holds it;
        `label`: the reason counted in the metrics."""
        entry = self.entries[name]
        with self._lock:
            translator, entry.translator = entry.translator, None
        if translator is not None:
            self._unload([(entry, translator)], reason, label)

    def _trim_soon(self) -> None:
        """(Event loop.) The trim on the worker thread, its failure logged."""
        self._trimming = False
        if self.loaded_bytes() <= self.budget_bytes or self.worker_run is None:
            return

        def trim_logged() -> None:
            try:
                self.trim()
            except Exception:  # noqa: BLE001 (logged: the next load makes room as usual)
                log.exception("unloading models back within the memory budget failed")

        asyncio.ensure_future(self.worker_run(trim_logged))

    def trim(self) -> None:
        """(Worker thread.) Unload the least recently used models no request holds and none
        used for `idle_s` while the loaded ones pass the budget (a load that found the others
        in use went past it); the most recently used one stays (a model larger than the
        budget alone is not unloaded after each request)."""
        with self._lock:
            victims: list[tuple[ModelEntry, Translator]] = []
            total = self.loaded_bytes()
            loaded = sorted(
                (e for e in self.entries.values() if e.loaded), key=lambda e: e.last_used
            )
            now = time.monotonic()
            for other in loaded[:-1]:
                if total <= self.budget_bytes:
                    break
                if other.in_use or now - other.last_used < self.idle_s:
                    continue
                held = other.translator
                assert held is not None  # one of the loaded models (under the lock)
                victims.append((other, held))
                other.translator = None
                total -= other.size_bytes
        self._unload(victims, "memory budget: loaded past it while other models were in use")

    def _unload(
        self,
        victims: list[tuple[ModelEntry, Translator]],
        reason: str,
        label: str = "memory_budget",
    ) -> None:
        """(Worker thread.) Free the detached models (`_make_room`, `trim`, `unload`)."""
        while victims:
            victim, translator = victims.pop(0)
            if self.before_unload:
                self.before_unload(victim.name)
            del translator  # the last reference: the model's memory is freed here
            self._free(victim, reason, label)

    def _make_room(self, entry: ModelEntry) -> list[tuple[ModelEntry, Translator]]:
        """Detach the models to unload so that `entry` fits the budget (least recently used
        first, never one in use); the caller frees them."""
        if not self.budget_bytes:
            return []
        victims: list[tuple[ModelEntry, Translator]] = []
        with self._lock:
            total = self.loaded_bytes()
            candidates = sorted(
                (e for e in self.entries.values() if e.loaded and e is not entry),
                key=lambda e: e.last_used,
            )
            for other in candidates:
                if total + entry.size_bytes <= self.budget_bytes:
                    break
                if other.in_use:
                    continue
                held = other.translator
                assert held is not None  # one of the loaded models (under the lock)
                victims.append((other, held))
                other.translator = None  # from here on a request loads it afresh
                total -= other.size_bytes
        if total + entry.size_bytes > self.budget_bytes:
            log.warning(
                "loading %s exceeds the memory budget (%.1f MB needed, %.1f MB of %.1f MB "
                "held by models in use or too large a model)",
                entry.name,
                entry.size_bytes / 1e6,
                total / 1e6,
                self.budget_bytes / 1e6,
            )
        return victims

    def _free(self, entry: ModelEntry, reason: str, label: str) -> None:
        """After the last reference to an unloaded model is gone: collect, hand the memory
        back to the kernel, count and log."""
        gc.collect()
        release_freed_memory()
        if self.on_unload:
            self.on_unload(entry, label)
        log.info(
            "unloaded %s (%.1f MB of weights): %s; %d model(s), %.1f MB loaded",
            entry.name,
            entry.size_bytes / 1e6,
            reason,
            len(self.loaded),
            self.loaded_bytes() / 1e6,
        )
