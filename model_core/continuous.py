"""Continuous (iteration-level) decoding: sentences join a running decode between steps and
leave it the step they finish, instead of waiting for a whole batch to end.

A `RunningBatch` holds the sentences one model decodes with one beam size (greedy is beam 1).
`join` encodes newcomers (one batched encoder call) and adds their rows; `step` runs one decoder
step for every row and returns the sentences that finished in it; `leave` drops sentences (a
deadline passed, the client went away) before the next step. Each sentence keeps its own output
limit and n-best count, so sentences with different limits share the batch.

The decoder cache runs in gather mode with per-sentence steps (model.DecoderCache.steps): row i
writes its key/value at its own step and attends to the positions up to it, with its own position
embedding, so a sentence that joins at step 7 of the others decodes exactly as if it were alone,
up to float rounding of the padded attention. A newcomer gets all K beam rows at once, the K - 1
extra rows with score -inf: the first step then selects from its one real row, as
decoding.beam_search does.

Memory: the self-attention buffer holds rows x the largest output limit among the sentences
(positions a row never reaches are allocated, not written); the cross-attention state holds
sentences x the longest source. `envelope` reports both in token positions, the unit the
service's admission budget counts in.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .decoding import Hypothesis, force_eos, length_normalise
from .fused import beam_select, topk_logsumexp
from . import fused
from .model import DecoderCache, Transformer, identity_history


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

    def __init__(
        self,
        model: Transformer,
        *,
        beam_size: int = 1,
        length_penalty: float = 1.0,
        stop: str = "first_k",
    ):
        if stop not in ("first_k", "heuristic"):
            raise ValueError(f"stop={stop!r}: use first_k or heuristic")
        self.model, self.cfg, self.k = model, model.cfg, beam_size
        self.alpha = length_penalty
        # greedy (K=1) always stops at its first finished hypothesis, as greedy_search does
        self.keep_best = stop == "heuristic" and beam_size > 1
        self.sentences: list[_Sentence] = []
        self.cache: DecoderCache | None = None
        self.tokens = torch.empty(0, dtype=torch.long)  # (N,) each row's last token
        self.scores = torch.empty(0, beam_size)  # (n, K) cumulative log-probs
        self.seqs = torch.empty(0, 0, dtype=torch.long)  # (N, capacity) tokens per step
        self.slots = False  # the cache's layout: slot (attention kernels) or gather

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def ids(self) -> list[Hashable]:
        return [s.id for s in self.sentences]

    def envelope(self) -> tuple[int, int]:
        """(self-attention positions, cross-attention positions) allocated now: rows x the
        largest output limit, sentences x the longest source."""
        if not self.sentences:
            return 0, 0
        n = len(self.sentences)
        limit = max(s.limit for s in self.sentences)
        return n * self.k * limit, n * max(s.source_len for s in self.sentences)

    def allocated(self) -> int:
        """Self-attention positions allocated: rows x positions of the buffer."""
        if self.cache is None:
            return 0
        kv = self.cache.kv
        return kv.shape[1] * kv.shape[2] if self.slots else kv.shape[0] * kv.shape[1]

    @torch.inference_mode()
    def join(
        self,
        ids: Sequence[Hashable],
        src: torch.Tensor,
        src_mask: torch.Tensor,
        limits: Sequence[int],
        n_bests: Sequence[int],
    ) -> None:
        """Add sentences: src (b, S) padded ids with their (b, 1, 1, S) mask; each sentence's
        output limit and number of hypotheses to return."""
        b, k, model = len(ids), self.k, self.model
        if any(not 1 <= n <= k for n in n_bests):
            raise ValueError(f"n_best must be between 1 and the beam size {k}")
        lengths = src_mask.reshape(b, -1).sum(1).tolist()
        new = [
            _Sentence(i, int(lim), int(nb), int(sl))
            for i, lim, nb, sl in zip(ids, limits, n_bests, lengths, strict=True)
        ]
        memory = model.encode_tokens(src, src_mask)
        if self.cache is None:
            # the attention kernels (CPU float32) run over the slot layout; torch elsewhere
            self.slots = fused.attention_kernels_for(memory)
        fresh = model.init_cache(memory, src_mask, 1, beams=1, gather=not self.slots)
        device = src.device
        capacity = max(s.limit for s in self.sentences + new)
        rows_old = self.tokens.numel()
        rows = rows_old + b * k
        cache = self.cache
        row_dim, pos_dim, key_dim, bias_dim = (1, 2, 2, 1) if self.slots else (0, 1, 3, 3)
        if cache is None:
            cache = self.cache = fresh
            cache.steps = torch.zeros(b, dtype=torch.long, device=device)
            old_kv, t = None, 0
        else:
            old_kv, t = cache.kv, cache.length
            capacity = max(capacity, cache.kv.shape[pos_dim])
            width = max(cache.src_bias.shape[-1], fresh.src_bias.shape[-1])
            pads = ((cache.cross_k, fresh.cross_k, key_dim), (cache.cross_v, fresh.cross_v, 2))
            for old, add, dim in pads:
                for i, (a, c) in enumerate(zip(old, add, strict=True)):
                    old[i] = torch.cat([_pad_to(a, dim, width, 0.0), _pad_to(c, dim, width, 0.0)])
            cache.src_bias = torch.cat(
                [
                    _pad_to(cache.src_bias, bias_dim, width, float("-inf")),
                    _pad_to(fresh.src_bias, bias_dim, width, float("-inf")),
                ]
            )
            cache.steps = torch.cat([cache.steps, torch.zeros(b, dtype=torch.long, device=device)])
        shape = list(fresh.kv.shape)
        shape[row_dim], shape[pos_dim] = rows, capacity
        kv = fresh.kv.new_zeros(shape)  # zeros: see DecoderCache._new_kv
        if old_kv is not None:
            kv.narrow(row_dim, 0, rows_old).narrow(pos_dim, 0, t).copy_(old_kv.narrow(pos_dim, 0, t))
        cache.kv, cache.spare, cache.group = kv, None, k
        self._index_rows(rows)
        start = torch.full((b, k), float("-inf"), device=device)
        start[:, 0] = 0.0  # one real row per newcomer until its first step picks K beams
        self.scores = torch.cat([self.scores.to(device), start])
        bos = torch.full((b * k,), self.cfg.bos_id, dtype=torch.long, device=device)
        self.tokens = torch.cat([self.tokens.to(device), bos])
        seqs = torch.zeros((rows, capacity), dtype=torch.long, device=device)
        seqs[:rows_old, : self.seqs.shape[1]] = self.seqs
        self.seqs = seqs
        self.sentences.extend(new)

    @torch.inference_mode()
    def leave(self, ids: Sequence[Hashable]) -> int:
        """Drop these sentences (those still here); returns how many left."""
        gone = set(ids)
        keep = [i for i, s in enumerate(self.sentences) if s.id not in gone]
        dropped = len(self.sentences) - len(keep)
        if dropped:
            device = self.tokens.device
            kept = torch.tensor(keep, dtype=torch.long, device=device)
            rows = (kept[:, None] * self.k + torch.arange(self.k, device=device)).flatten()
            tokens = self.tokens.index_select(0, rows)
            self._update(kept, rows, tokens, self.scores[kept], wrote=False)
        return dropped

    @torch.inference_mode()
    def step(self) -> list[tuple[Hashable, list[Hypothesis]]]:
        """One decoder step for every row; returns (id, n-best hypotheses) of each sentence
        that finished in it (they have left the batch)."""
        if not self.sentences:
            return []
        cfg, k, cache = self.cfg, self.k, self.cache
        assert cache is not None
        sents = self.sentences
        generated = [s.step + 1 for s in sents]  # tokens each sentence holds after this step
        logits = self.model.decode_step(self.tokens, cache)  # (N, V)
        device = logits.device
        at_limit = torch.tensor(
            [g >= s.limit for g, s in zip(generated, sents, strict=True)], device=device
        )
        if cfg.force_eos_at_limit:
            force_eos(logits, at_limit.repeat_interleave(k), cfg.eos_id)
        per_row = min(2 * k, logits.shape[-1])
        row_logits, row_words, lse = topk_logsumexp(logits, per_row)  # (N, per_row)
        choice = beam_select(row_logits, row_words, lse, self.scores, at_limit, k, cfg.eos_id)
        done = at_limit.clone()
        if choice.finished:
            prefixes = self.seqs[[row for _, _, row, _ in choice.finished]].tolist()
            for (i, total, _, w), prefix in zip(choice.finished, prefixes, strict=True):
                sent = sents[i]
                if len(sent.finished) >= k and not self.keep_best:
                    continue
                is_eos = w == cfg.eos_id
                tokens = prefix[: sent.step] + ([] if is_eos else [w])
                sent.finished.append(
                    (length_normalise(total, generated[i], self.alpha), tokens, is_eos)
                )
                if self.keep_best:  # the K best so far, as Hugging Face's beam search keeps them
                    sent.finished.sort(key=lambda h: h[0], reverse=True)
                    del sent.finished[k:]
                elif len(sent.finished) >= k:
                    done[i] = True
        if self.keep_best:  # done once no running beam can beat the worst of K finished ones
            full = [i for i, s in enumerate(sents) if len(s.finished) >= k]
            if full:
                best = choice.scores[full, 0].tolist()
                for i, run in zip(full, best, strict=True):
                    worst = sents[i].finished[-1][0]
                    if length_normalise(run, generated[i], self.alpha) <= worst:
                        done[i] = True
        done |= choice.scores[:, 0] == float("-inf")
        for s in sents:
            s.step += 1
        cache.steps += 1
        out = []
        if bool(done.any()):
            for i in done.nonzero().squeeze(1).tolist():
                hyps = sorted(sents[i].finished, key=lambda h: h[0], reverse=True)[
                    : sents[i].n_best
                ]
                out.append((sents[i].id, [Hypothesis(t, sc, finished=e) for sc, t, e in hyps]))
            kept = (~done).nonzero().squeeze(1)
            rows, words, scores = choice.rows[kept], choice.words[kept], choice.scores[kept]
            self._update(kept, rows.flatten(), words.flatten(), scores, wrote=True)
        else:
            rows, words = choice.rows.flatten(), choice.words.flatten()
            self._update(None, rows, words, choice.scores, wrote=True)
        return out

    def _update(
        self,
        kept: torch.Tensor | None,
        rows: torch.Tensor,
        tokens: torch.Tensor,
        scores: torch.Tensor,
        wrote: bool,
    ) -> None:
        """The sentences `kept` stay (None: all), in that order, their rows taken from `rows`
        (beams reordered); `tokens` are the rows' next inputs, and `wrote`: also the tokens
        this step chose, recorded in each row's sequence."""
        if kept is not None:
            self.sentences = [self.sentences[i] for i in kept.tolist()]
            if not self.sentences:
                self.cache = None
                self.tokens, self.scores, self.seqs = tokens, scores, self.seqs[:0]
                return
        seqs = self.seqs.index_select(0, rows)
        if wrote:
            steps = [s.step - 1 for s in self.sentences for _ in range(self.k)]
            seqs[
                torch.arange(len(steps), device=seqs.device),
                torch.tensor(steps, device=seqs.device),
            ] = tokens
        self.seqs, self.tokens, self.scores = seqs, tokens, scores
        cache = self.cache
        assert cache is not None
        if not self.slots:
            cache.select(rows, sentences=kept, group=self.k)
        else:  # slot layout, each row in its own slot: the rows move, as in gather mode
            t = cache.length
            same = rows.numel() == cache.kv.shape[1] and bool(
                (rows == torch.arange(rows.numel(), device=rows.device)).all()
            )
            if not same:
                kv = cache.kv.new_zeros((cache.kv.shape[0], rows.numel(), *cache.kv.shape[2:]))
                torch.index_select(cache.kv[:, :, :t], 1, rows, out=kv[:, :, :t])
                cache.kv = kv
            if kept is not None:
                for tensors in (cache.cross_k, cache.cross_v):
                    for i, cross in enumerate(tensors):
                        tensors[i] = cross.index_select(0, kept)
                cache.src_bias = cache.src_bias.index_select(0, kept)
                cache.steps = cache.steps.index_select(0, kept)
            self._index_rows(rows.numel())
        if kept is not None:  # the oldest may have left: read no wider than the rest need
            cache.length = max(s.step for s in self.sentences)

    def _index_rows(self, rows: int) -> None:
        """Slot layout: row i in slot i (its history only points to itself) and its sentence's
        cross-attention state at i // K."""
        cache = self.cache
        if not self.slots or cache is None:
            return
        device = cache.kv.device
        cache.slots = torch.arange(rows, device=device)
        cache.sentence = torch.div(cache.slots, self.k, rounding_mode="floor")
        cache.active = torch.arange(rows // self.k, device=device)
        cache.history = identity_history(rows, cache.kv.shape[2], device)


def _pad_to(x: torch.Tensor, dim: int, size: int, value: float) -> torch.Tensor:
    """x padded with `value` at the end of `dim` to `size`."""
    missing = size - x.shape[dim]
    if missing == 0:
        return x
    pad = [0, 0] * (x.dim() - dim - 1) + [0, missing]
    return F.pad(x, pad, value=value)
