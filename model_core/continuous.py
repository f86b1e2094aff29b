"""Continuous (iteration-level) decoding: sentences join a running decode between steps and
leave it the step they finish, instead of waiting for a whole batch to end.

A `RunningBatch` holds the sentences one model decodes with one beam size (greedy is beam 1).
`join` encodes newcomers (one batched encoder call) and adds their rows; `step` runs one decoder
step for every row and returns the sentences that finished in it; `leave` drops sentences (a
deadline passed, the client went away) before the next step. Each sentence keeps its own output
limit and n-best count, so sentences with different limits share the batch.

The decoder cache has per-sentence steps (model.DecoderCache.steps): row i writes its key/value
at its own step and attends to the positions up to it, with its own position embedding, so a
sentence that joins at step 7 of the others decodes exactly as if it were alone, up to float
rounding of the padded attention. On a CPU in float32 the cache is in the slot layout of the
attention kernels (each sentence keeps its K slots and its place in the cross-attention state
from its first step to its last; a newcomer takes the places of finished ones), elsewhere in
gather mode. A newcomer gets all K beam rows at once, the K - 1 extra rows with score -inf: the
first step then selects from its one real row, as decoding.beam_search does, and in the slot
layout computes only that row.

With `fixed=True` the gather layout keeps buffers of a fixed size: places (sentences), sources
and positions in powers of two, at least what the sentences need, grown (to the next powers)
only when a newcomer does not fit, and kept while the batch is empty. A sentence keeps its
place from its first step to its last, as in the slot layout: one that finishes or leaves
frees it, and a newcomer takes the lowest free place; nothing moves. Every step then runs the
same operations on the same shapes (the captured part on the same addresses) until the buffers
grow: the decoder's layers
and output projection, the beam selection, and the rows' new tokens, scores, sequences and
steps, all for every place (a free place computes padding that nobody reads), with no value
read back to the host but one small report (which hypotheses end; the prefixes of those that
end in a second read, only when some end), and the written positions of the self-attention
buffer reordered by the beams' parents. On a GPU the decoder's part is captured once in a
CUDA graph and replayed: one launch instead of one per operation, the host's share of a step
being most of it there (docs/BENCHMARKS.md section 7); the selection and bookkeeping run
eagerly after it (`capture_selection` puts them in the graph too; off until it has run on a
GPU: its first run on an H200 failed, as each place's first row, held by the step's functions
alone, was freed after the capture and its memory reused; the batch now keeps them).
Elsewhere the same step runs eagerly (the tests' way to check it).

Memory: the self-attention buffer holds rows x the largest output limit among the sentences
(positions a row never reaches are allocated, not written); the cross-attention state holds
sentences x the longest source. `envelope` reports both in token positions, the unit the
service's admission budget counts in; `buffers` what the buffers hold room for (more, with
`fixed`); `footprint` the most a decode holds from a join to the next, its buffers and what
its joins and steps hold beside them (`Costs`), which admission counts.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import torch
import torch.nn.functional as F

from . import fused
from .decoding import STOPS, Hypothesis, force_eos, length_normalise
from .fused import beam_select, topk_logsumexp
from .model import DecoderCache, Transformer, identity_history

log = logging.getLogger(__name__)
T = TypeVar("T")
Report = tuple[torch.Tensor, torch.Tensor]  # the fixed layout's step: see RunningBatch._fixed_step


class NewcomersFailed(Exception):
    """A join failed before it changed the batch (the newcomers' encoder: out of memory, say):
    the sentences already in it go on as they were; only the newcomers did not join."""


@dataclass
class _Sentence:
    id: Hashable
    limit: int  # generated tokens at most, EOS included
    n_best: int
    source_len: int
    step: int = 0  # tokens generated so far
    finished: list[tuple[float, list[int], bool]] = field(default_factory=list)


class RunningBatch:
    """Sentences decoded together, one step at a time; see the module docstring."""

    # fixed layout on a GPU: the CUDA graph holds the beam selection and the rows' bookkeeping
    # too, not only the decoder's layers. Off until it has run on a GPU (its first run on an
    # H200 replayed freed tensors, since kept: see the module docstring); the selection then
    # runs eagerly after the decoder's graph, reading nothing back either
    capture_selection = False

    def __init__(
        self,
        model: Transformer,
        *,
        beam_size: int = 1,
        length_penalty: float = 1.0,
        stop: str = "first_k",
        fixed: bool = False,
    ):
        if stop not in STOPS:
            raise ValueError(f"stop={stop!r}: use one of {', '.join(STOPS)}")
        self.model, self.cfg, self.k = model, model.cfg, beam_size
        self.alpha = length_penalty
        # greedy (K=1) always stops at its first finished hypothesis, as greedy_search does
        self.keep_best = stop != "first_k" and beam_size > 1
        self.early = stop == "early"  # done at the step that brings K finished hypotheses
        self.sentences: list[_Sentence] = []
        self.cache: DecoderCache | None = None
        self.tokens = torch.empty(0, dtype=torch.long)  # (N,) each row's last token
        self.scores = torch.empty(0, beam_size)  # (n, K) cumulative log-probs
        self.seqs = torch.empty(0, 0, dtype=torch.long)  # (N, capacity) tokens per step
        self.slots = False  # the cache's layout: slot (attention kernels) or gather
        self.places: list[int] = []  # slot layout: each sentence's place (slots place*K...)
        self.free: list[int] = []  # slot layout: places of finished sentences, for newcomers
        self.fixed = fixed  # the gather layout in buffers of a fixed size (module docstring)
        self._idle: DecoderCache | None = None  # fixed: the buffers kept while no sentence runs
        # fixed: the buffers' tokens, scores and sequences by row (every place's), and the
        # sequences before the last step; each place's output limit and whether it is taken
        self._inputs: tuple[torch.Tensor, ...] | None = None
        self._limits = self._active = torch.empty(0)
        # fixed: the step, set up at the buffers' first (a CUDA graph and its outputs, or the
        # function run each step elsewhere)
        self._graph: tuple[torch.cuda.CUDAGraph, Any] | Callable[[], Any] | None = None
        # fixed: the beam selection and bookkeeping, where the graph holds only the decoder
        # fixed: the step's parts (_fixed_step), kept with the graph of them
        self._parts: tuple[Callable[[], Any], Any, Any] | None = None
        self._live_rows: torch.Tensor | None = None  # fixed: the rows of the places taken
        self._costs: Costs | None = None  # what it holds beside its buffers (`footprint`)

    def __len__(self) -> int:
        return len(self.sentences)

    def reset(self) -> None:
        """Forget every sentence and let go of the buffers (and the step's graph): the batch
        is as new (its next join allocates)."""
        self.sentences, self.places, self.free = [], [], []
        self.cache = self._idle = self._inputs = self._graph = self._parts = None
        self._live_rows = None
        self._limits = self._active = torch.empty(0)
        self.tokens = self.tokens.new_empty(0)
        self.scores = self.scores.new_empty((0, self.k))
        self.seqs = self.seqs.new_empty((0, 0))

    @property
    def rows(self) -> int:
        """Decoder rows (sentences x beam size; in the slot layout a newcomer's first step
        computes one of its K; the fixed layout's step also computes the free places' rows,
        not counted here)."""
        return len(self.sentences) * self.k if self._in_place else self.tokens.numel()

    @property
    def _in_place(self) -> bool:
        """The fixed gather layout: sentences keep their places from first step to last."""
        return self.fixed and not self.slots

    @property
    def partial_steps(self) -> bool:
        """Whether `step(only=...)` can step a subset of the sentences (the slot layout); in
        the gather layout every sentence steps."""
        return self.slots

    @property
    def ids(self) -> list[Hashable]:
        return [s.id for s in self.sentences]

    @property
    def layout(self) -> str:
        """The cache's layout: "slots" (the attention kernels', CPU float32), "fixed" (the
        gather layout in fixed buffers) or "gather"; before the first join, the one it will
        take."""
        if self.cache is None and self._idle is None:
            return layout_for(self.model, self.fixed)
        return "slots" if self.slots else "fixed" if self.fixed else "gather"

    def envelope(self) -> tuple[int, int]:
        """(self-attention positions, cross-attention positions) its sentences need at most
        in a step: rows x the largest output limit, with the copy a step makes of them
        (`footprint`), and sentences x the longest source."""
        if not self.sentences:
            return 0, 0
        n = len(self.sentences)
        limit = max(s.limit for s in self.sentences)
        copies = _copies(self.k, self.layout)
        return copies * n * self.k * limit, n * max(s.source_len for s in self.sentences)

    def footprint(self, sentences: int, limit: int, source: int, joining: int = 0) -> int:
        """Key/value positions the batch holds at most, from a join of `joining` newcomers
        that leaves it `sentences` sentences (the longest output limit `limit`, the longest
        source `source` tokens) to its next join: see the module function `footprint`."""
        if self._costs is None:
            self._costs = costs_for(self.model)
        return footprint(
            self.k, self.layout, self.buffers(), sentences, limit, source, self._costs, joining
        )

    def buffers(self) -> tuple[int, int, int]:
        """(sentences, positions, source width) the buffers hold room for now: in the slot
        layout the places of finished sentences stay, for newcomers; with `fixed` the buffers stay
        while no sentence runs."""
        cache = self.cache or self._idle
        if cache is None:
            return 0, 0, 0
        kv = cache.kv
        rows, positions = (kv.shape[1], kv.shape[2]) if self.slots else (kv.shape[0], kv.shape[1])
        return rows // self.k, positions, cache.src_bias.shape[-1]

    def allocated(self) -> int:
        """Self-attention positions allocated: rows x positions of the buffer, and of the
        gather layout's spare buffer, when it holds one."""
        cache = self.cache or self._idle
        if cache is None:
            return 0
        kv = cache.kv
        if self.slots:
            return kv.shape[1] * kv.shape[2]
        spare = cache.spare.shape[0] * cache.spare.shape[1] if cache.spare is not None else 0
        return kv.shape[0] * kv.shape[1] + spare

    @torch.inference_mode()
    def join(
        self,
        ids: Sequence[Hashable],
        src: torch.Tensor,
        src_mask: torch.Tensor,
        limits: Sequence[int],
        n_bests: Sequence[int],
        lengths: Sequence[int] | None = None,
    ) -> None:
        """Add sentences: src (b, S) padded ids with their (b, 1, 1, S) mask; each sentence's
        output limit and number of hypotheses to return; `lengths`: the sources' lengths, if
        the caller knows them (else read from the mask: on a GPU a wait for it)."""
        b, k, model = len(ids), self.k, self.model
        if any(not 1 <= n <= k for n in n_bests):
            raise ValueError(f"n_best must be between 1 and the beam size {k}")
        if lengths is None:
            lengths = src_mask.reshape(b, -1).sum(1).tolist()
        new = [
            _Sentence(i, int(lim), int(nb), int(sl))
            for i, lim, nb, sl in zip(ids, limits, n_bests, lengths, strict=True)
        ]
        # the newcomers' encoder and cross-attention state, before anything of the batch
        # changes: where they fail (out of memory, say), the batch is as it was
        try:
            memory = model.encode_tokens(src, src_mask)
            # the attention kernels (CPU float32) run over the slot layout; torch elsewhere
            slots = fused.attention_kernels_for(memory) if self.cache is None else self.slots
            if slots and self.cache is not None:  # only the newcomers' cross-attention state
                state = model.slot_cross_state(memory, src_mask)
            else:
                fresh = model.init_cache(memory, src_mask, 1, beams=1, gather=not slots)
        except Exception as exc:
            raise NewcomersFailed(f"the newcomers' encoder failed: {exc}") from exc
        self.slots = slots
        device = src.device
        rows_old = self.tokens.numel()
        rows = rows_old + b * k
        capacity = max(s.limit for s in self.sentences + new)
        if self.slots and self.cache is not None:
            self._join_slots(state, b, capacity)
        elif self.slots:
            self._start_slots(fresh, b, capacity)
        else:
            if self.fixed:
                self._join_fixed(new, fresh, capacity)
                return
            self._join_gather(fresh, b, capacity)
        start = torch.full((b, k), float("-inf"), device=device)
        start[:, 0] = 0.0  # one real row per newcomer until its first step picks K beams
        self.scores = torch.cat([self.scores.to(device), start])
        bos = torch.full((b * k,), self.cfg.bos_id, dtype=torch.long, device=device)
        self.tokens = torch.cat([self.tokens.to(device), bos])
        seqs = torch.zeros(
            (rows, max(capacity, self.seqs.shape[1])), dtype=torch.long, device=device
        )
        seqs[:rows_old, : self.seqs.shape[1]] = self.seqs
        self.seqs = seqs
        self.sentences.extend(new)

    def _join_gather(self, fresh: DecoderCache, b: int, capacity: int) -> None:
        """Gather layout: rows (and their cross-attention state) appended, the buffer copied."""
        cache, k = self.cache, self.k
        device = fresh.kv.device
        rows_old = self.tokens.numel()
        if cache is None:
            cache = self.cache = fresh
            cache.steps = torch.zeros(b, dtype=torch.long, device=device)
            old_kv, t = None, 0
        else:
            assert cache.steps is not None  # set at the first join
            old_kv, t = cache.kv, cache.length
            capacity = max(capacity, cache.kv.shape[1])
            width = max(cache.src_bias.shape[-1], fresh.src_bias.shape[-1])
            pads = ((cache.cross_k, fresh.cross_k, 3), (cache.cross_v, fresh.cross_v, 2))
            for old, add, dim in pads:
                for i, (a, c) in enumerate(zip(old, add, strict=True)):
                    old[i] = torch.cat([_pad_to(a, dim, width, 0.0), _pad_to(c, dim, width, 0.0)])
            cache.src_bias = torch.cat(
                [
                    _pad_to(cache.src_bias, 3, width, float("-inf")),
                    _pad_to(fresh.src_bias, 3, width, float("-inf")),
                ]
            )
            cache.steps = torch.cat([cache.steps, torch.zeros(b, dtype=torch.long, device=device)])
        cache.spare = None  # (let go first: the copy holds the old buffer and the new one)
        kv = fresh.kv.new_zeros((rows_old + b * k, capacity, *fresh.kv.shape[2:]))  # _new_kv
        if old_kv is not None:
            kv[:rows_old, :t] = old_kv[:, :t]
        cache.kv, cache.group = kv, k

    def _join_fixed(self, new: list[_Sentence], fresh: DecoderCache, capacity: int) -> None:
        """Fixed gather layout: each newcomer takes a free place (the lowest), in buffers grown
        first if they do not fit; its rows start as a newcomer's (BOS, one real beam)."""
        b, width = len(new), fresh.src_bias.shape[-1]
        cache = self.cache or self._idle
        if (
            cache is None
            or len(self.free) < b
            or width > cache.src_bias.shape[-1]
            or capacity > cache.kv.shape[1]
        ):
            cache = self._fixed_buffers(fresh, len(self.sentences) + b, width, capacity)
        self.cache, self._idle = cache, None
        self.free.sort()
        places, self.free = self.free[:b], self.free[b:]
        device, k = cache.kv.device, self.k
        index = torch.tensor(places, dtype=torch.long, device=device)
        _put_state(cache, index, fresh)
        assert cache.steps is not None  # the fixed buffers' (_fixed_buffers)
        cache.steps.index_fill_(0, index, 0)
        rows = (index[:, None] * k + torch.arange(k, device=device)).flatten()
        self.tokens.index_fill_(0, rows, self.cfg.bos_id)
        start = torch.full((b, k), float("-inf"), device=device)
        start[:, 0] = 0.0  # one real row per newcomer until its first step picks K beams
        self.scores.index_copy_(0, index, start)
        limits = torch.tensor([s.limit for s in new], dtype=torch.long, device=device)
        self._limits.index_copy_(0, index, limits)
        self._active.index_fill_(0, index, True)
        self.sentences.extend(new)
        self.places += places
        self._live_rows = None
        cache.length = max(s.step for s in self.sentences)

    def _fixed_buffers(
        self, fresh: DecoderCache, sentences: int, width: int, capacity: int
    ) -> DecoderCache:
        """New fixed buffers with room for `sentences` sentences, sources of `width` tokens and
        `capacity` positions (each the next power of two, and never less than the buffers
        before), the live sentences' state copied over in the same places; the step is set up
        anew."""
        held, k = self.cache or self._idle, self.k
        if held is not None:
            assert held.steps is not None  # the fixed buffers' (_fixed_buffers)
            sentences = max(sentences, held.steps.numel())
            width, capacity = max(width, held.src_bias.shape[-1]), max(capacity, held.kv.shape[1])
        places, width, positions = (fixed_size(x) for x in (sentences, width, capacity))
        kv = fresh.kv.new_zeros((places * k, positions, *fresh.kv.shape[2:]))
        device = kv.device
        cache = DecoderCache(
            kv=kv,
            cross_k=[x.new_zeros((places, *x.shape[1:3], width)) for x in fresh.cross_k],
            cross_v=[x.new_zeros((places, x.shape[1], width, x.shape[3])) for x in fresh.cross_v],
            # 0 for the padding places: they attend to zeros (no row of -inf, no NaN)
            src_bias=fresh.src_bias.new_zeros((places, 1, 1, width)),
            group=k,
            steps=torch.zeros(places, dtype=torch.long, device=device),
            fixed=True,
        )
        tokens = torch.zeros(places * k, dtype=torch.long, device=device)
        scores = torch.zeros((places, k), device=device)
        seqs = torch.zeros((places * k, positions), dtype=torch.long, device=device)
        limits = torch.full((places,), positions, dtype=torch.long, device=device)
        active = torch.zeros(places, dtype=torch.bool, device=device)
        if self.cache is not None:  # the live sentences, in their places
            old = self.cache
            assert old.steps is not None and cache.steps is not None  # the fixed buffers'
            n = old.steps.numel()
            t = cache.length = old.length
            cache.kv[: n * k, :t] = old.kv[:, :t]
            cache.steps[:n] = old.steps
            _put_state(cache, slice(0, n), old)
            tokens[: n * k] = self.tokens
            scores[:n] = self.scores
            seqs[: n * k, : self.seqs.shape[1]] = self.seqs
            limits[:n], active[:n] = self._limits, self._active
            self.free += range(n, places)
        else:
            self.free = list(range(places))
        self.tokens, self.scores, self.seqs = tokens, scores, seqs
        self._limits, self._active = limits, active
        self._inputs, self._graph = (tokens, scores, seqs, torch.zeros_like(seqs)), None
        self._parts = None
        return cache

    def _fixed_step(
        self,
    ) -> tuple[
        Callable[[], Any], Callable[[torch.Tensor], Report] | None, Callable[[], Any] | None
    ]:
        """The fixed layout's step over every row of the buffers, with no value read back to
        the host: the rows' steps set (each place's while it holds a sentence, else 0), the
        decoder's layers and output projection, the beam selection, and the rows' new tokens,
        scores, sequences and steps written in place. Its result: (report, parents): per
        place (P, 4K' + 1) float64, K' = min(K, 2K candidates): which of the K' best
        candidates end this step, their scores, parent rows and words, then the best running
        beam's score; and each row's parent row (P * K,), by which the caller reorders the
        self-attention buffer (its written positions only). A place's step advances only
        while it holds a sentence; the other places compute padding that nobody reads.

        Returns the step in three parts, (decode, select, set the rows' steps), the graph to
        capture being the decode alone; with `capture_selection`, (everything, None, None).
        The caller keeps them as long as it replays a graph of them: a graph reads its tensors
        (those the functions hold, such as each place's first row) by address, and a tensor
        nothing holds gives its memory to the next allocation."""
        cache, model, k, cfg = self.cache, self.model, self.k, self.cfg
        assert cache is not None and self._inputs is not None
        assert cache.steps is not None  # the fixed buffers' (_fixed_buffers)
        tokens, scores, seqs, before = self._inputs
        limits, active, steps = self._limits, self._active, cache.steps
        top, places = cache.kv.shape[1] - 1, steps.numel()
        per_row = min(2 * k, cfg.tgt_vocab_size)
        width = min(2 * k, k * per_row)
        kept = min(k, width)
        base = torch.arange(places, device=steps.device)[:, None] * k  # each place's first row
        force = cfg.force_eos_at_limit
        eos = cfg.eos_id

        row_steps = torch.zeros(places * k, dtype=torch.long, device=steps.device)

        def set_rows() -> None:  # padding places at step 0 (a free place's may be the end)
            row_steps.copy_((steps * active)[:, None].expand(places, k).reshape(-1))

        def decode() -> torch.Tensor:
            cache.length, cache.row_steps = top, row_steps  # every position; masks stop rows
            return model._decode_rows(tokens, cache)  # (P * K, V)

        def select(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            now = steps * active
            at_limit = now + 1 >= limits  # (P,)
            if force:  # the rows at their limit may only end (decoding.force_eos)
                limit_rows = at_limit[:, None].expand(places, k).reshape(-1, 1)
                logits.masked_fill_(limit_rows, float("-inf"))
                logits[:, eos].masked_fill_(limit_rows[:, 0], 0.0)
            values, words, lse = fused.topk_logsumexp_torch(logits, per_row)
            cand = (scores[:, :, None] + (values - lse).view(places, k, per_row)).view(places, -1)
            top_s, top_j = cand.topk(width, dim=1)  # (P, 2K) best first
            parents = base + top_j // per_row
            top_w = words.view(places, -1).gather(1, top_j)
            live = top_s > float("-inf")
            ending = live & ((top_w == eos) | at_limit[:, None])
            alive = top_s.masked_fill(ending | ~live, float("-inf"))
            next_s, pick = alive.topk(kept, dim=1)  # the K best that do not end
            rows = parents.gather(1, pick).flatten()
            next_w = top_w.gather(1, pick).flatten()
            parts = (ending, top_s, parents, top_w)  # each exact in float64
            report = torch.cat([x[:, :kept].double() for x in parts] + [next_s[:, :1].double()], 1)
            before.copy_(seqs)  # the parents' prefixes, for the hypotheses that end
            seqs.copy_(before.index_select(0, rows))
            seqs.scatter_(1, row_steps[:, None], next_w[:, None])
            tokens.copy_(next_w)
            scores.copy_(next_s)
            steps.add_(active)
            return report, rows

        if self.capture_selection:

            def whole() -> Report:
                set_rows()
                return select(decode())

            return whole, None, None
        return decode, select, set_rows

    def _step_fixed(self) -> list[tuple[Hashable, list[Hypothesis]]]:
        """`step` in the fixed layout: the step set up once per buffers (on a GPU captured in a
        CUDA graph and replayed: one launch), the self-attention buffer reordered, and one
        read back of the report; the prefixes of ending hypotheses in a second, only when
        some end."""
        cache, k = self.cache, self.k
        assert cache is not None and cache.steps is not None  # the fixed buffers' (_fixed_buffers)
        assert self._inputs is not None  # set with the buffers (_fixed_buffers)
        written = max(s.step for s in self.sentences) + 1  # positions written after this step
        if self._graph is None:
            self._parts = run, select, set_rows = self._fixed_step()  # (kept: see there)
            if set_rows is not None:
                set_rows()  # the decode's inputs, before its capture's runs
            self._graph = run
            if graphs_for(cache.kv.device):
                keep = self._inputs + (cache.steps,) if select is None else ()
                try:
                    self._graph = capture(run, cache.kv.device, keep=keep)
                except RuntimeError as exc:  # the step still runs, eagerly
                    log.warning("no CUDA graph of the decoder step (%s): it runs eagerly", exc)
        else:
            assert self._parts is not None  # set with the graph
            if self._parts[2] is not None:
                self._parts[2]()
        if isinstance(self._graph, tuple):
            graph, out = self._graph
            graph.replay()
        else:
            out = self._graph()
        select = self._parts[1]
        report, rows = out if select is None else select(out)
        if k > 1:  # beams follow their parents: the rows of the places taken, their written
            # positions (the copy of the rest would only grow the temporary buffer)
            if self._live_rows is None:
                index = torch.tensor(self.places, dtype=torch.long, device=rows.device)
                self._live_rows = (
                    index[:, None] * k + torch.arange(k, device=rows.device)
                ).flatten()
            kv, live = cache.kv[:, :written], self._live_rows
            kv.index_copy_(0, live, kv.index_select(0, rows.index_select(0, live)))
        kept = (report.shape[1] - 1) // 4
        table = report.cpu().numpy()
        sents, places = self.sentences, self.places
        mine = table[places]  # (n, 4K' + 1) the live sentences' rows, in their order
        ends = mine[:, :kept] > 0
        ending = cast(list[bool], ends.any(1).tolist())  # (n,) a flat list
        best = mine[:, -1].tolist()
        generated = [s.step + 1 for s in sents]
        done = [g >= s.limit for g, s in zip(generated, sents, strict=True)]
        if any(ending):
            found = [
                (j, r) for j in range(len(sents)) if ending[j] for r in range(kept) if ends[j, r]
            ]
            parents = [int(mine[j, 2 * kept + r]) for j, r in found]
            prefixes = self._inputs[3][parents, : written - 1].tolist()
            for (j, r), prefix in zip(found, prefixes, strict=True):
                total, word = float(mine[j, kept + r]), int(mine[j, 3 * kept + r])
                done[j] = self._ended(sents[j], total, prefix, word, generated[j]) or done[j]
        for j, sent in enumerate(sents):
            if self.keep_best and len(sent.finished) >= k:  # no running beam can beat them
                running = length_normalise(best[j], generated[j], self.alpha)
                done[j] = done[j] or running <= sent.finished[-1][0]
            done[j] = done[j] or best[j] == float("-inf")  # no beam left to extend
            sent.step += 1
        cache.length = written
        out = [
            (s.id, [Hypothesis(t, sc, finished=e) for sc, t, e in _best(s)])
            for s, d in zip(sents, done, strict=True)
            if d
        ]
        if out:
            self._free_places([j for j, d in enumerate(done) if d])
        return out

    def _free_places(self, gone: Sequence[int]) -> None:
        """Fixed layout: the sentences at these positions (of `sentences`) leave; their places
        are padding until newcomers take them. Nothing moves."""
        cache = self.cache
        assert cache is not None
        lost = set(gone)
        freed = [self.places[j] for j in gone]
        index = torch.tensor(freed, dtype=torch.long, device=cache.kv.device)
        self._active.index_fill_(0, index, False)
        self.free += freed
        self.sentences = [s for j, s in enumerate(self.sentences) if j not in lost]
        self.places = [p for j, p in enumerate(self.places) if j not in lost]
        self._live_rows = None
        if not self.sentences:
            self._idle, self.cache = cache, None  # kept, with its step, for the next newcomers
            cache.length = 0
        else:
            cache.length = max(s.step for s in self.sentences)

    def _start_slots(self, fresh: DecoderCache, b: int, capacity: int) -> None:
        """Slot layout, the first sentences: the cache is theirs, sentence i in place i."""
        k, device = self.k, fresh.kv.device
        cache = self.cache = fresh
        cache.kv = fresh.kv.new_empty((fresh.kv.shape[0], b * k, capacity, *fresh.kv.shape[3:]))
        cache.history = identity_history(b * k, capacity, device)
        self.places = list(range(b))
        index = torch.arange(b, device=device)
        cache.slots = torch.arange(b * k, device=device)
        cache.sentence = index.repeat_interleave(k)
        cache.steps = torch.zeros(b, dtype=torch.long, device=device)
        cache.spare, cache.group, cache.beams = None, k, k

    def _join_slots(
        self,
        state: tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor],
        b: int,
        capacity: int,
    ) -> None:
        """Slot layout: each sentence owns K slots (and one place in the cross-attention state)
        from its first step to its last; a newcomer takes those of a finished sentence, and
        the buffers grow (to exactly what is needed) only when none are free. `state`: the
        newcomers' cross-attention keys, values and bias (Transformer.slot_cross_state)."""
        cache, k = self.cache, self.k
        assert cache is not None
        # the slot layout's, set at its first join (_start_slots)
        assert cache.history is not None and cache.slots is not None
        assert cache.sentence is not None and cache.steps is not None
        add_k, add_v, add_bias = state
        device = add_bias.device
        taken = [self.free.pop() for _ in range(min(b, len(self.free)))]
        places = cache.src_bias.shape[0]
        grow = b - len(taken)
        width, new_width = cache.src_bias.shape[-1], add_bias.shape[-1]
        if new_width > width:  # every place's state widens (zeros, -inf: padding)
            for tensors in (cache.cross_k, cache.cross_v):
                for i, x in enumerate(tensors):
                    tensors[i] = _pad_to(x, 2, new_width, 0.0)
            cache.src_bias = _pad_to(cache.src_bias, 1, new_width, float("-inf"))
            width = new_width
        if grow:  # new places at the end (written below)
            for tensors in (cache.cross_k, cache.cross_v):
                for i, x in enumerate(tensors):
                    tensors[i] = torch.cat([x, x.new_empty((grow, *x.shape[1:]))])
            cache.src_bias = torch.cat([cache.src_bias, cache.src_bias.new_empty((grow, width))])
        positions = max(capacity, cache.kv.shape[2])
        if grow or positions > cache.kv.shape[2]:
            t, old = cache.length, cache.kv
            kv = old.new_empty((old.shape[0], (places + grow) * k, positions, *old.shape[3:]))
            kv[:, : old.shape[1], :t] = old[:, :, :t]
            history = identity_history((places + grow) * k, positions, device)
            history[: old.shape[1], : t + 1] = cache.history[:, : t + 1]
            cache.kv, cache.history = kv, history
        places_new = taken + list(range(places, places + grow))
        index = torch.tensor(places_new, dtype=torch.long, device=device)
        # the newcomers' state written in place: their own width, then padding to the rest
        for tensors, add in ((cache.cross_k, add_k), (cache.cross_v, add_v)):
            for x, c in zip(tensors, add, strict=True):
                x[index, :, :new_width] = c
                if new_width < width:
                    x[index, :, new_width:] = 0.0
        cache.src_bias[index, :new_width] = add_bias
        if new_width < width:
            cache.src_bias[index, new_width:] = float("-inf")
        self.places += places_new
        slots = (index[:, None] * k + torch.arange(k, device=device)).flatten()
        cache.slots = torch.cat([cache.slots, slots])
        cache.sentence = torch.cat([cache.sentence, index.repeat_interleave(k)])
        cache.steps = torch.cat([cache.steps, torch.zeros(b, dtype=torch.long, device=device)])
        cache.spare, cache.group, cache.beams = None, k, k

    @torch.inference_mode()
    def leave(self, ids: Sequence[Hashable]) -> int:
        """Drop these sentences (those still here); returns how many left."""
        gone = set(ids)
        keep = [i for i, s in enumerate(self.sentences) if s.id not in gone]
        dropped = len(self.sentences) - len(keep)
        if dropped and self._in_place:
            self._free_places([i for i, s in enumerate(self.sentences) if s.id in gone])
        elif dropped:
            device = self.tokens.device
            kept = torch.tensor(keep, dtype=torch.long, device=device)
            rows = (kept[:, None] * self.k + torch.arange(self.k, device=device)).flatten()
            tokens = self.tokens.index_select(0, rows)
            self._update(kept, rows, tokens, self.scores[kept], wrote=False)
        return dropped

    @torch.inference_mode()
    def step(
        self, only: Collection[Hashable] | None = None
    ) -> list[tuple[Hashable, list[Hypothesis]]]:
        """One decoder step for every row; returns (id, n-best hypotheses) of each sentence
        that finished in it (they have left the batch).

        `only`: in the slot layout (`partial_steps`), step only these sentences; the others
        wait, their state untouched, and take their next step in a later call as if there had
        been no pause (a sentence's result does not depend on which steps it sat out)."""
        if not self.sentences:
            return []
        if self._in_place:
            return self._step_fixed()
        cfg, k, cache = self.cfg, self.k, self.cache
        assert cache is not None and cache.steps is not None  # set at the first join
        sents = self.sentences
        device = self.tokens.device
        act = None  # the positions of the sentences that step, None: all of them
        if only is not None and self.slots:
            wanted = set(only)
            act = [i for i, s in enumerate(sents) if s.id in wanted]
            if not act:
                return []
            if len(act) == len(sents):
                act = None
        idx = range(len(sents)) if act is None else act
        stepping = [sents[i] for i in idx]
        generated = [s.step + 1 for s in stepping]  # tokens each holds after this step
        done = [g >= s.limit for g, s in zip(generated, stepping, strict=True)]  # at the limit
        at_limit = torch.tensor(done, device=device)
        # the rows computed: those of the sentences that step, less a newcomer's K - 1 extra
        # rows (score -inf) in its first step; `local`: their places among the stepping rows
        live = local = None
        first = self.slots and k > 1 and any(s.step == 0 for s in stepping)
        if act is not None or first:
            pairs = [
                (i * k + b, j * k + b)
                for j, i in enumerate(idx)
                for b in range(k if sents[i].step else 1)
            ]
            live = torch.tensor([g for g, _ in pairs], dtype=torch.long, device=device)
            local = torch.tensor([loc for _, loc in pairs], dtype=torch.long, device=device)
        logits = self.model.decode_step(self.tokens, cache, rows=live)  # (live rows, V)
        if cfg.force_eos_at_limit:
            limit_rows = at_limit.repeat_interleave(k)
            force_eos(logits, limit_rows if local is None else limit_rows[local], cfg.eos_id)
        per_row = min(2 * k, logits.shape[-1])
        row_logits, row_words, lse = topk_logsumexp(logits, per_row)  # (rows, per_row)
        n_rows = len(stepping) * k
        if local is not None and local.numel() < n_rows:  # rows not computed: no candidates
            row_logits = row_logits.new_full((n_rows, per_row), float("-inf")).index_copy_(
                0, local, row_logits
            )
            row_words = row_words.new_zeros((n_rows, per_row)).index_copy_(0, local, row_words)
            lse = lse.new_zeros((n_rows, *lse.shape[1:])).index_copy_(0, local, lse)
        act_t = None if act is None else torch.tensor(act, dtype=torch.long, device=device)
        scores = self.scores if act_t is None else self.scores.index_select(0, act_t)
        choice = beam_select(row_logits, row_words, lse, scores, at_limit, k, cfg.eos_id)
        if choice.finished:
            prefixes = self.seqs[
                [idx[row // k] * k + row % k for _, _, row, _ in choice.finished]
            ].tolist()
            for (j, total, _, word), prefix in zip(choice.finished, prefixes, strict=True):
                done[j] = self._ended(stepping[j], total, prefix, word, generated[j]) or done[j]
        if self.keep_best:  # done once no running beam can beat the worst of K finished ones
            full = [j for j, s in enumerate(stepping) if len(s.finished) >= k]
            if full:
                best = choice.scores[full, 0].tolist()
                for j, run in zip(full, best, strict=True):
                    worst = stepping[j].finished[-1][0]
                    if length_normalise(run, generated[j], self.alpha) <= worst:
                        done[j] = True
        for j, best in enumerate(choice.scores[:, 0].tolist()):
            done[j] = done[j] or best == float("-inf")  # no beam left to extend
        for s in stepping:
            s.step += 1
        if act_t is None:
            cache.steps[: len(sents)] += 1  # (fixed: the places beyond are padding)
        else:
            cache.steps.index_add_(0, act_t, torch.ones_like(act_t))
        out = [
            (s.id, [Hypothesis(t, sc, finished=e) for sc, t, e in _best(s)])
            for s, d in zip(stepping, done, strict=True)
            if d
        ]
        if act_t is None:
            if out:
                kept = torch.tensor(
                    [i for i, d in enumerate(done) if not d], dtype=torch.long, device=device
                )
                rows, words, scores = choice.rows[kept], choice.words[kept], choice.scores[kept]
                self._update(kept, rows.flatten(), words.flatten(), scores, wrote=True)
            else:
                rows, words = choice.rows.flatten(), choice.words.flatten()
                self._update(None, rows, words, choice.scores, wrote=True)
            return out
        # some sentences sat this step out: their rows stay as they are and record nothing
        n = len(sents)
        rows = torch.arange(n * k, device=device).view(n, k)
        rows[act_t] = act_t[:, None] * k + choice.rows % k  # local row j*k+b: sentence idx[j]
        words = self.tokens.view(n, k).clone()
        words[act_t] = choice.words
        scores = self.scores.clone()
        scores[act_t] = choice.scores
        wrote = torch.zeros(n, dtype=torch.bool, device=device)
        wrote[act_t] = True
        finished = {i for i, d in zip(idx, done, strict=True) if d}
        kept = torch.tensor(
            [i for i in range(n) if i not in finished], dtype=torch.long, device=device
        )
        self._update(
            kept,
            rows[kept].flatten(),
            words[kept].flatten(),
            scores[kept],
            wrote=wrote[kept].repeat_interleave(k),
        )
        return out

    def _ended(
        self, sent: _Sentence, total: float, prefix: list[int], word: int, generated: int
    ) -> bool:
        """A hypothesis of `sent` ended this step (EOS, or at its limit): cumulative log-prob
        `total`, its parent's sequence `prefix` and its last word. Returns whether the
        sentence is done by the hypotheses it now has."""
        k = self.k
        if len(sent.finished) >= k and not self.keep_best:
            return False
        is_eos = word == self.cfg.eos_id
        tokens = prefix[: sent.step] + ([] if is_eos else [word])
        sent.finished.append((length_normalise(total, generated, self.alpha), tokens, is_eos))
        if self.keep_best:  # the K best so far, as Hugging Face's beam search keeps them
            sent.finished.sort(key=lambda h: h[0], reverse=True)
            del sent.finished[k:]
            return self.early and len(sent.finished) >= k
        return len(sent.finished) >= k

    def _update(
        self,
        kept: torch.Tensor | None,
        rows: torch.Tensor,
        tokens: torch.Tensor,
        scores: torch.Tensor,
        wrote: bool | torch.Tensor,
    ) -> None:
        """The sentences `kept` stay (None: all), in that order, their rows taken from `rows`
        (beams reordered); `tokens` are the rows' next inputs, and `wrote`: also the tokens
        this step chose, recorded in each row's sequence (a bool per row: only in the rows
        that stepped)."""
        if kept is not None:
            self.sentences = [self.sentences[i] for i in kept.tolist()]
            if not self.sentences:
                self.cache = None
                self.places, self.free = [], []
                self.tokens, self.scores, self.seqs = tokens, scores, self.seqs[:0]
                return
        cache = self.cache
        assert cache is not None
        seqs = self.seqs.index_select(0, rows)
        partial = isinstance(wrote, torch.Tensor)
        if partial or wrote:  # at each row's step (its parent's: the same sentence's)
            assert cache.row_steps is not None  # set by this step (Transformer.decode_step)
            row_steps = cache.row_steps if kept is None else cache.row_steps.index_select(0, rows)
            at = torch.arange(rows.numel(), device=seqs.device)
            if partial:
                at, row_steps, tokens_written = at[wrote], row_steps[wrote], tokens[wrote]
            else:
                tokens_written = tokens
            seqs[at, row_steps] = tokens_written
        self.seqs, self.tokens, self.scores = seqs, tokens, scores
        if not self.slots:
            cache.select(rows, sentences=kept, group=self.k)
        else:  # slot layout: nothing moves; the history says where each prefix is
            # the slot layout's, set at its first join (_start_slots)
            assert cache.slots is not None and cache.history is not None
            assert cache.steps is not None
            device = rows.device
            parents = cache.slots.index_select(0, rows)
            if kept is None:  # the same sentences in the same places: the same slots
                slots = cache.slots
            else:
                kept_list = kept.tolist()
                gone = set(range(len(self.places))) - set(kept_list)
                self.free += [self.places[i] for i in gone]
                self.places = [self.places[i] for i in kept_list]
                cache.steps = cache.steps.index_select(0, kept)
                index = torch.tensor(self.places, dtype=torch.long, device=device)
                slots = (index[:, None] * self.k + torch.arange(self.k, device=device)).flatten()
                cache.slots, cache.sentence = slots, index.repeat_interleave(self.k)
            if partial:  # row j's next position follows its parent's prefix
                steps = cache.steps.repeat_interleave(self.k)
                cache.history.index_put_((slots[wrote], steps[wrote]), parents[wrote])
            elif wrote:
                steps = cache.steps.repeat_interleave(self.k)
                cache.history.index_put_((slots, steps), parents)
        if kept is not None:  # the oldest may have left (or not stepped): read no wider than needed
            cache.length = max(s.step for s in self.sentences)


def _best(sentence: _Sentence) -> list[tuple[float, list[int], bool]]:
    """A finished sentence's n-best (score, tokens, ended with EOS), best first."""
    return sorted(sentence.finished, key=lambda h: h[0], reverse=True)[: sentence.n_best]


def _pad_to(x: torch.Tensor, dim: int, size: int, value: float) -> torch.Tensor:
    """x padded with `value` at the end of `dim` to `size`."""
    missing = size - x.shape[dim]
    if missing == 0:
        return x
    pad = [0, 0] * (x.dim() - dim - 1) + [0, missing]
    return F.pad(x, pad, value=value)


def capture(
    call: Callable[[], T], device: torch.device, keep: Sequence[torch.Tensor] = ()
) -> tuple[torch.cuda.CUDAGraph, T]:
    """(graph, output): `call()` captured in a CUDA graph on `device`, after three runs on a
    side stream (as CUDA graphs need: the libraries' own set-up runs outside the capture).
    `graph.replay()` runs the captured kernels on what the tensors `call` read hold then, into
    the same output. `keep`: tensors `call` writes, holding afterwards what they held before
    (those runs are not steps). The caller keeps `call` (and so every tensor it reads) for as
    long as it replays the graph."""
    with torch.cuda.device(device):
        saved = [t.clone() for t in keep]

        def restore() -> None:
            for t, was in zip(keep, saved, strict=True):
                t.copy_(was)

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                call()
                restore()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = call()
        restore()
    return graph, out


def layout_for(model: Transformer, fixed: bool) -> str:
    """The layout a running decode of `model` takes (RunningBatch.layout): the attention
    kernels' slots where they run (float32 on a CPU, as `join` finds from the encoder's
    output: the embeddings' type), else the gather layout, in fixed buffers with `fixed`."""
    if fused.attention_kernels_for(model.src_embed.weight.detach()):
        return "slots"
    return "fixed" if fixed else "gather"


def _copies(k: int, layout: str) -> int:
    """How many self-attention buffers a step of the layout holds at its peak: two where
    the beams' rows are copied (the gather layout's spare buffer, which a step gathers into
    and a leave replaces by one of the rows kept; the fixed layout's temporary of the taken
    rows' written positions, when K > 1); one in the slot layout, where nothing moves."""
    return 2 if layout == "gather" or (layout == "fixed" and k > 1) else 1


@dataclass(frozen=True)
class Costs:
    """What a running decode of a model holds beside its key/value buffers, in key/value
    positions (one position: every decoder layer's key and value of one row, in the cache's
    type), so that one budget counts all of it: `row`, a decoder row's step (its logits and
    the search's work on them, three float32 vectors of the vocabulary, and its feed-forward
    layer); `token`, a newcomer's source token while it joins (its cross-attention state
    before it is copied into the buffers, and the encoder's work on it); `pair`, the
    attention weights of one query and one key, every head's, and their softmax."""

    row: float = 0.0
    token: float = 0.0
    pair: float = 0.0


def costs_for(model: Transformer) -> Costs:
    """`Costs` of a model, from its sizes (in float32, whatever the cache's type)."""
    cfg = model.cfg
    position = cfg.decoder_layers * 2 * cfg.d_model * model.src_embed.weight.element_size()
    return Costs(
        row=(3 * cfg.tgt_vocab_size + cfg.d_ff) * 4 / position,
        token=1 + (cfg.d_ff + 2 * cfg.d_model) * 4 / position,
        pair=2 * cfg.n_heads * 4 / position,
    )


def footprint(
    k: int,
    layout: str,
    now: tuple[int, int, int],
    sentences: int,
    limit: int,
    source: int,
    costs: Costs | None = None,
    joining: int = 0,
) -> int:
    """Key/value positions a running decode with K beams holds at most, from a join of
    `joining` newcomers that leaves it `sentences` sentences (the longest output limit
    `limit`, the longest source `source` tokens) to its next join, where its buffers had room
    for `now` = (sentences, positions, source width) before (RunningBatch.buffers). Its
    buffers have room for as much as now or as the sentences need, whichever is more (fixed:
    each the next power of two): rows (sentences x K) x positions of self-attention keys and
    values, and sentences x width of cross-attention state. The most of:
    - a step: the buffers, the copy of the self-attention buffer a step holds where the
      beams' rows move (`_copies`), and the step's work for each row of the buffers
      (`costs.row`, and the attention weights over its positions and its source's);
    - the join: the buffers, those of before too where the join grows them (they are copied
      into the new ones, and let go only then), and the newcomers' work, for each of their
      sources' positions (at the width of the longest: `costs.token`, and the encoder's
      attention weights over the source)."""
    want = (max(now[0], sentences), max(now[1], limit), max(now[2], source))
    if layout == "fixed":
        want = (fixed_size(want[0]), fixed_size(want[1]), fixed_size(want[2]))
    if not want[0]:
        return 0
    places, positions, width = want
    costs = costs or Costs()
    held = places * (k * positions + width)
    rows = places * k
    step: float = held + rows * (_copies(k, layout) - 1) * positions
    step += rows * (costs.row + costs.pair * (positions + width))
    join = held + joining * width * (costs.token + costs.pair * width)
    if any(now) and want != now:
        join += now[0] * (k * now[1] + now[2])
    return math.ceil(max(step, join))


def graphs_for(device: torch.device) -> bool:
    """Whether the fixed layout's step is captured in a CUDA graph on `device`."""
    return device.type == "cuda"


def fixed_size(n: int) -> int:
    """The fixed layout's size for `n` (sentences, source tokens or positions): the next power
    of two."""
    return 1 << max(0, n - 1).bit_length()


def _put_state(cache: DecoderCache, places: slice | torch.Tensor, state: DecoderCache) -> None:
    """Fixed layout: the cross-attention keys, values and bias of `state` (its first sentences,
    as many as `places` holds: a slice, or the places' indices) written into those places of
    `cache`, the positions beyond their width padding: bias -inf; keys and values zeros for a
    slice, as they were for indices (what a place held before: finite, and weighted 0)."""
    width = state.src_bias.shape[-1]
    # keys (n, h, hd, S), values (n, h, S, hd): the source along dims 3 and 2
    pairs = [(x, y, 3) for x, y in zip(cache.cross_k, state.cross_k, strict=True)]
    pairs += [(x, y, 2) for x, y in zip(cache.cross_v, state.cross_v, strict=True)]
    pairs.append((cache.src_bias, state.src_bias, 3))
    for x, y, dim in pairs:
        pad = 0.0 if x is not cache.src_bias else float("-inf")
        if isinstance(places, slice):
            count = places.stop - places.start
            x[places].narrow(dim, 0, width).copy_(y[:count])
            x[places].narrow(dim, width, x.shape[dim] - width).fill_(pad)
        else:  # beyond the width only the bias: a key or value there is weighted 0
            count = places.numel()
            x.narrow(dim, 0, width).index_copy_(0, places, y[:count])
            if x is cache.src_bias and width < x.shape[dim]:
                x.narrow(dim, width, x.shape[dim] - width).index_fill_(0, places, pad)
