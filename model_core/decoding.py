"""Batched search on tensors: greedy and beam search over the KV cache, and the reference greedy
decoder that re-runs the whole prefix every step (kept to check the fast path against).

No strings here: token ids in, token ids and scores out. Every sentence has its own output limit
(`max_lengths`, counted in generated tokens including the end-of-sentence token); a sentence that
reaches it ends there. Finished sentences leave the active batch, so they stop costing compute.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .fused import beam_select, topk_logsumexp
from .masks import subsequent_mask
from .model import Transformer


@dataclass
class Hypothesis:
    """One output sequence: ids without BOS/EOS, its normalised score, per-token log-probs."""

    tokens: list[int]
    score: float
    token_log_probs: list[float] = field(default_factory=list)
    finished: bool = True  # ended with EOS (False: stopped at the length limit)


def length_normalise(total_log_prob: float, length: int, alpha: float) -> float:
    """Score = sum of log-probs / length**alpha (alpha=0: plain sum; 1: mean per token)."""
    return total_log_prob / (max(length, 1) ** alpha)


def force_eos(logits: torch.Tensor, rows: torch.Tensor, eos_id: int) -> torch.Tensor:
    """In place: the rows where `rows` is True may only end (EOS with log-prob 0), as
    Hugging Face's forced_eos_token_id does at the length limit."""
    if bool(rows.any()):
        logits[rows] = float("-inf")
        logits[rows, eos_id] = 0.0
    return logits


def _to_hypotheses(out, lps, lengths, ended, alpha) -> list[Hypothesis]:
    used = int(lengths.max()) if lengths.numel() else 0  # columns past it were never written
    hyps = []
    for toks, lp, n, end in zip(
        out[:, :used].tolist(),
        lps[:, :used].tolist(),
        lengths.tolist(),
        ended.tolist(),
        strict=True,
    ):
        n_out = n - 1 if end else n  # the EOS is scored but not returned
        hyps.append(
            Hypothesis(toks[:n_out], length_normalise(sum(lp[:n]), n, alpha), lp[:n], bool(end))
        )
    return hyps


@torch.inference_mode()
def greedy_search(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    max_lengths: torch.Tensor,
    length_penalty: float = 1.0,
) -> list[Hypothesis]:
    """Fast greedy: encode once, one cached decoder step per position. src (B, S) ids.

    Each step reads its words and log-probs back once (two short lists) and keeps the
    bookkeeping in Python: a handful of tensor operations per step would cost more than the
    step itself for one sentence."""
    cfg = model.cfg
    b, device = src.shape[0], src.device
    limits = max_lengths.tolist()
    capacity = max(limits)
    cache = model.init_cache(model.encode_tokens(src, src_mask), src_mask, capacity)
    out: list[list[int]] = [[] for _ in range(b)]
    lps: list[list[float]] = [[] for _ in range(b)]
    ended = [False] * b
    rows = list(range(b))  # original index of each active row
    tokens = torch.full((b,), cfg.bos_id, dtype=torch.long, device=device)
    for step in range(capacity):
        logits = model.decode_step(tokens, cache)  # (b, V)
        if cfg.force_eos_at_limit:
            at_limit = [limits[r] <= step + 1 for r in rows]
            if any(at_limit):
                force_eos(logits, torch.tensor(at_limit, device=device), cfg.eos_id)
        best_logit, best, lse = topk_logsumexp(logits, 1)  # the argmax of the log-softmax too
        best = best[:, 0]
        keep = []
        for i, (r, word, lp) in enumerate(
            zip(rows, best.tolist(), (best_logit - lse)[:, 0].tolist(), strict=True)
        ):
            out[r].append(word)
            lps[r].append(lp)
            if word == cfg.eos_id:
                ended[r] = True
            elif limits[r] > step + 1:
                keep.append(i)
        if len(keep) < len(rows):
            if not keep:
                break
            index = torch.tensor(keep, device=device)
            rows, best = [rows[i] for i in keep], best[index]
            cache.select(index, sentences=index)
        tokens = best
    hyps = []
    for toks, lp, end in zip(out, lps, ended, strict=True):
        n = len(toks)
        score = length_normalise(sum(lp), n, length_penalty)
        hyps.append(Hypothesis(toks[: n - 1] if end else toks, score, lp, end))  # EOS scored
    return hyps


@torch.inference_mode()
def reference_greedy_search(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    max_lengths: torch.Tensor,
    length_penalty: float = 1.0,
) -> list[Hypothesis]:
    """The seeds' greedy decode: the decoder re-runs the whole prefix each step (no KV cache).

    Rows run in lockstep until all have finished; positions after a row's end are ignored
    (causal attention keeps them from affecting earlier positions).
    """
    cfg = model.cfg
    b, device = src.shape[0], src.device
    max_lengths = max_lengths.to(device)
    memory = model.encode(src, src_mask)
    ys = torch.full((b, 1), cfg.bos_id, dtype=torch.long, device=device)  # (B, t)
    step_lps = []
    lengths = torch.zeros(b, dtype=torch.long, device=device)
    ended = torch.zeros(b, dtype=torch.bool, device=device)
    for step in range(int(max_lengths.max())):
        tgt_mask = subsequent_mask(ys.shape[1], device)
        hidden = model.decode(memory, src_mask, ys, tgt_mask)  # (B, t, d)
        step_lp = model.log_probs(hidden[:, -1])  # (B, V)
        if cfg.force_eos_at_limit:
            force_eos(step_lp, max_lengths <= step + 1, cfg.eos_id)
        best_lp, best = step_lp.max(dim=-1)
        ys = torch.cat([ys, best[:, None]], dim=1)
        step_lps.append(best_lp)
        newly = (lengths == 0) & ((best == cfg.eos_id) | (max_lengths <= step + 1))
        lengths[newly] = step + 1
        ended[newly] = best[newly] == cfg.eos_id
        if bool((lengths > 0).all()):
            break
    return _to_hypotheses(ys[:, 1:], torch.stack(step_lps, 1), lengths, ended, length_penalty)


#: beam_search's stopping rules (see its docstring)
STOPS = ("first_k", "heuristic", "early")


@torch.inference_mode()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    max_lengths: torch.Tensor,
    beam_size: int = 4,
    length_penalty: float = 1.0,
    n_best: int = 1,
    stop: str = "first_k",
) -> list[list[Hypothesis]]:
    """Batched beam search; returns the n_best hypotheses of each sentence, best first.

    Each step takes the 2K best continuations of a sentence's K beams: an EOS among the first K
    ends a hypothesis, the best K others extend the beams. A sentence is done once it holds K
    finished hypotheses (or reaches its length limit) and then leaves the batch. The first step
    runs one row per sentence (all beams would be identical) and then expands to K rows. The
    selection is one call (fused.beam_select: a C kernel, or torch operations); only the (rare)
    finishing candidates are read back into Python.

    `stop`: "first_k" ends a sentence at its first K finished hypotheses; "heuristic" keeps
    the K best finished ones and ends when the best running beam, normalised at its current
    length, cannot beat the worst of them (Hugging Face's default, early_stopping=False);
    "early" keeps the K best finished ones and ends at the step that brings them to K (Hugging
    Face's early_stopping=True: those finishing at that step compete for the K places).
    """
    cfg = model.cfg
    k = beam_size
    if stop not in STOPS:
        raise ValueError(f"stop={stop!r}: use one of {', '.join(STOPS)}")
    keep_best = stop != "first_k"
    b, device = src.shape[0], src.device
    limits = max_lengths.tolist()
    memory = model.encode_tokens(src, src_mask)
    cache = model.init_cache(memory, src_mask, max(limits), beams=k)
    tokens = torch.full((b,), cfg.bos_id, dtype=torch.long, device=device)
    scores = torch.zeros((b, 1), device=device)  # (n, rows per sentence): 1 row, then K
    seqs = torch.empty((b, 0), dtype=torch.long, device=device)  # (rows, t)
    active = list(range(b))  # original sentence index of each active sentence
    finished: list[list[tuple[float, list[int], bool]]] = [[] for _ in range(b)]
    for step in range(max(limits)):
        logits = model.decode_step(tokens, cache)  # (n * group, V)
        at_limit_list = [limits[s] <= step + 1 for s in active]
        at_limit = torch.tensor(at_limit_list, device=device)  # (n,)
        if cfg.force_eos_at_limit and any(at_limit_list):
            force_eos(logits, at_limit.repeat_interleave(scores.shape[1]), cfg.eos_id)
        # The 2K best of a sentence are among the 2K best words of each of its rows: take those
        # first, then normalise only them (log-softmax = logit - logsumexp).
        per_row = min(2 * k, logits.shape[-1])
        row_logits, row_words, lse = topk_logsumexp(logits, per_row)  # (n * group, per_row)
        choice = beam_select(row_logits, row_words, lse, scores, at_limit, k, cfg.eos_id)
        done = at_limit_list
        if choice.finished:
            done = list(done)
            prefix_rows = [row for _, _, row, _ in choice.finished]
            prefixes = seqs[prefix_rows].tolist() if seqs.shape[1] else [[] for _ in prefix_rows]
            for (i, total, _, w), prefix in zip(choice.finished, prefixes, strict=True):
                hyps = finished[active[i]]
                if len(hyps) >= k and not keep_best:
                    continue
                is_eos = w == cfg.eos_id
                score = length_normalise(total, step + 1, length_penalty)
                hyps.append((score, prefix if is_eos else prefix + [w], is_eos))
                if keep_best:  # the K best so far, as Hugging Face's beam search keeps them
                    hyps.sort(key=lambda h: h[0], reverse=True)
                    del hyps[k:]
                    done[i] = done[i] or (stop == "early" and len(hyps) >= k)
                elif len(hyps) >= k:
                    done[i] = True
        best = choice.scores[:, 0].tolist()  # each sentence's best running beam (-inf: none)
        keep = []
        for i, (sentence, run) in enumerate(zip(active, best, strict=True)):
            if done[i] or run == float("-inf"):
                continue
            hyps = finished[sentence]
            # heuristic: done once no running beam can beat the worst of K finished ones
            if (
                keep_best
                and len(hyps) >= k
                and length_normalise(run, step + 1, length_penalty) <= hyps[-1][0]
            ):
                continue
            keep.append(i)
        if len(keep) < len(active):
            if not keep:
                break
            index = torch.tensor(keep, device=device)
            rows, tokens = choice.rows[index].flatten(), choice.words[index].flatten()
            scores, sentences = choice.scores[index], index
            active = [active[i] for i in keep]
        else:
            rows, tokens = choice.rows.flatten(), choice.words.flatten()
            scores, sentences = choice.scores, None
        seqs = torch.cat([seqs.index_select(0, rows), tokens[:, None]], dim=1)
        cache.select(rows, sentences=sentences, group=scores.shape[1])
    results = []
    for hyps in finished:
        hyps.sort(key=lambda h: h[0], reverse=True)
        results.append(
            [Hypothesis(toks, score, finished=end) for score, toks, end in hyps[:n_best]]
        )
    return results
