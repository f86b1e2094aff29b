"""The decoding step's CPU kernels (`_kernels.c`, an optional C extension built by
`pip install`), each beside the torch operations it replaces:

- `topk_logsumexp`: each row's best few words and its log-normaliser (log-softmax = logit -
  logsumexp) in two passes over the vocabulary, where torch needs three with a temporary each;
- `attend_cached`: a step's self-attention over the slot cache (model.DecoderCache), following
  each hypothesis's back-pointers, with this position's keys/values written in the same call;
- `attend_cross`: each row's attention over its sentence's keys/values (decoder beams over the
  encoder memory, encoder tokens over their own sentence);
- `beam_select`: beam search's choice of finished hypotheses and next beams;
- `PackedWeight`: a linear layer on model_core's own GEMM, with the LayerNorm before it, the
  bias, ReLU and the residual add in the same call (model.PackedLinear's default backend).

They run on float32 CPU tensors; the top-k, attention and linear kernels spread their work over
OpenMP threads and release the GIL. Where the extension is missing, on a GPU or in other dtypes,
the torch paths compute the same results (the linear layers up to float rounding; tests compare
the two; docs/BENCHMARKS.md, section 3, measures them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

try:
    from . import _kernels  # type: ignore[attr-defined]  # the C extension: no stub
except ImportError:  # built without a C compiler: the torch path below serves
    _kernels = None


def kernel_available() -> bool:
    return _kernels is not None


ATTENTION_KERNELS = True  # tests turn this off to compare with the torch path


def attention_kernels_for(x: torch.Tensor) -> bool:
    """Whether decoding on tensors like `x` (the encoder memory) can use the attention
    kernels: built, enabled, and float32 on the CPU."""
    return (
        ATTENTION_KERNELS
        and _kernels is not None
        and x.device.type == "cpu"
        and x.dtype == torch.float32
        and not x.requires_grad
    )


def _check(t: torch.Tensor, dtype: torch.dtype) -> None:
    if t.dtype != dtype or t.device.type != "cpu" or not t.is_contiguous():
        raise ValueError(f"kernel input must be a contiguous CPU {dtype} tensor")


def attend_cached(
    qkv: torch.Tensor,
    kv: torch.Tensor,
    history: torch.Tensor,
    slots: torch.Tensor,
    length: int,
    layer: int,
    row_steps: torch.Tensor | None = None,
) -> torch.Tensor:
    """Self-attention of one decoding step over the slot cache (model.DecoderCache).

    qkv (N, 3d): this step's fused q|k|v; its k|v are written to kv[layer, slots, length].
    kv (layers, slots, capacity, 2, heads, head_dim); history (slots, capacity): the slot of
    the previous position of the hypothesis stored at (slot, position). Returns (N, d): each
    row's attention over positions 0..length of its own hypothesis, heads side by side.
    `row_steps` (N,) int64: each row's own position instead of `length` (each <= length).
    """
    n, three_d = qkv.shape
    d = three_d // 3
    _check(kv, torch.float32)
    _check(history, torch.int64)
    _check(slots, torch.int64)
    if qkv.dtype != torch.float32 or qkv.stride(1) != 1 or slots.numel() != n:
        raise ValueError("qkv must be float32 rows with unit column stride, one per slot")
    layers, n_slots, capacity, two, heads, hd = kv.shape
    if two != 2 or heads * hd != d or history.shape != (n_slots, capacity) or length >= capacity:
        raise ValueError(
            "kv must be (layers, slots, capacity, 2, h, hd), history (slots, capacity)"
        )
    if row_steps is not None:
        _check(row_steps, torch.int64)
        if row_steps.numel() != n:
            raise ValueError("row_steps: one per row")
    out = torch.empty((n, d), dtype=torch.float32)
    if n:
        _kernels.attend_cached(
            qkv.data_ptr(), qkv.stride(0), n, heads, hd,
            kv.data_ptr(), n_slots, capacity, layers, layer, length,
            slots.data_ptr(), history.data_ptr(), hd**-0.5, out.data_ptr(),
            0 if row_steps is None else row_steps.data_ptr(), torch.get_num_threads(),
        )  # fmt: skip
    return out


def attend_cross(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    bias: torch.Tensor,
    sentence: torch.Tensor,
    scale: float = 1.0,
) -> torch.Tensor:
    """Each row of q (N, d) attends over the keys/values of its sentence: decoder beams over
    the encoder memory, or encoder tokens over their own sentence.

    keys and values (sentences, heads, S, head_dim), views with the same strides and a unit
    stride within a head; scores are scale * q.k + bias, bias (sentences, S) -inf at padding;
    sentence (N,) each row's sentence. Returns (N, d).
    """
    n, d = q.shape
    _check(bias, torch.float32)
    _check(sentence, torch.int64)
    sentences, heads, src_len, hd = keys.shape
    if (
        q.dtype != torch.float32
        or keys.dtype != torch.float32
        or values.dtype != torch.float32
        or keys.device.type != "cpu"
        or q.stride(1) != 1
        or heads * hd != d
        or values.shape != keys.shape
        or values.stride() != keys.stride()
        or keys.stride(3) != 1
        or bias.shape != (sentences, src_len)
        or sentence.numel() != n
    ):
        raise ValueError("attend_cross: inconsistent shapes")
    out = torch.empty((n, d), dtype=torch.float32)
    if n:
        _kernels.attend_cross(
            q.data_ptr(), q.stride(0), n, heads, hd,
            keys.data_ptr(), values.data_ptr(), keys.stride(0), keys.stride(1), keys.stride(2),
            scale, bias.data_ptr(), src_len, sentence.data_ptr(), out.data_ptr(),
            torch.get_num_threads(),
        )  # fmt: skip
    return out


LINEAR_PANEL = 16  # output features per panel of a packed weight (LIN_NR in _kernels.c)


def _linear_max_isa() -> int:
    """The widest code the linear kernel may use: 2 (AVX-512 tiles as well as AVX2) where torch
    itself runs AVX-512, else 1 (AVX2/FMA where the CPU has them, scalar code elsewhere);
    `ATEN_CPU_CAPABILITY=avx2` thus narrows both. Every level gives the same bits except the
    scalar code."""
    try:
        return 2 if torch.backends.cpu.get_cpu_capability() == "AVX512" else 1
    except (AttributeError, RuntimeError):
        return 1


LINEAR_MAX_ISA = _linear_max_isa()  # tests lower it to compare the code paths


def pack_linear(weight: torch.Tensor) -> torch.Tensor:
    """A linear layer's (out, in) weight in the panel layout of `linear`: (panels, in, 16),
    panel p holding output features 16p..16p+15 (zeros past `out`)."""
    out_features, in_features = weight.shape
    panels = -(-out_features // LINEAR_PANEL)
    padded = weight.new_zeros((panels * LINEAR_PANEL, in_features), dtype=torch.float32)
    padded[:out_features] = weight.detach()
    return padded.view(panels, LINEAR_PANEL, in_features).transpose(1, 2).contiguous()


def unpack_linear(packed: torch.Tensor, out_features: int) -> torch.Tensor:
    """The (out, in) weight back from `pack_linear`'s layout."""
    panels, in_features, width = packed.shape
    return packed.transpose(1, 2).reshape(panels * width, in_features)[:out_features].clone()


class PackedWeight:
    """A linear layer's weight in `pack_linear`'s panels, with its bias, checked once; calling
    it runs model_core's GEMM kernel (float32, CPU):

        out = [LayerNorm](x) W^T (+ bias) (ReLU) (+ residual)

    in one call. Every output is the same chain of multiply-adds whatever the batch, so a row
    gets the same bits in any batch, at any place in it, on any number of threads.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        if _kernels is None:
            raise RuntimeError("PackedWeight needs model_core's C kernels")
        if weight.dim() != 2 or weight.device.type != "cpu":
            raise ValueError("PackedWeight takes a 2-D weight on the CPU (the kernel is CPU only)")
        self.out_features, self.in_features = weight.shape
        self.panels = pack_linear(weight.detach().float())
        self.bias = None if bias is None else bias.detach().float().contiguous().clone()
        if self.bias is not None and (
            self.bias.shape != (self.out_features,) or self.bias.device.type != "cpu"
        ):
            raise ValueError("bias must be (out_features,) on the CPU")
        # the tensors above are never replaced or resized, so their addresses stay valid
        self._w = self.panels.data_ptr()
        self._b = 0 if self.bias is None else self.bias.data_ptr()
        self._norm: tuple | None = None  # the last LayerNorm used: (weight, bias, its args)

    def _norm_args(self, norm: torch.nn.LayerNorm) -> tuple[int, int, float]:
        """The LayerNorm's (gamma, beta) addresses and eps, checked on first use. The cache
        holds the parameter tensors themselves, so the addresses stay valid, and a norm whose
        parameters were replaced since is checked again."""
        weight, bias = norm.weight, norm.bias
        cached = self._norm
        if cached is not None and cached[0] is weight and cached[1] is bias:
            return cached[2]
        k = self.in_features
        if (
            norm.normalized_shape != (k,)
            or weight is None
            or bias is None
            or weight.shape != (k,)
            or bias.shape != (k,)
        ):
            raise ValueError(f"linear: norm must be an affine LayerNorm over {k} features")
        _check(weight, torch.float32)
        _check(bias, torch.float32)
        args = (weight.data_ptr(), bias.data_ptr(), float(norm.eps))
        self._norm = (weight, bias, args)
        return args

    def dense(self) -> torch.Tensor:
        """The (out, in) weight."""
        return unpack_linear(self.panels, self.out_features)

    def __call__(
        self,
        x: torch.Tensor,
        relu: bool = False,
        residual: torch.Tensor | None = None,
        norm: torch.nn.LayerNorm | None = None,
    ) -> torch.Tensor:
        """x (..., in) float32 on the CPU; residual shaped like the output; `norm` a LayerNorm
        over `in` features (with its affine weights) applied to x first."""
        # a decoding step makes ~20 of these calls: the common case (2-D rows with unit column
        # stride) takes as few torch calls as possible
        k, n = self.in_features, self.out_features
        if x.dtype is not torch.float32 or not x.is_cpu or x.shape[-1] != k:
            raise ValueError(f"linear: x must be (..., {k}) float32 on the CPU")
        shape = None
        if x.dim() != 2:
            shape = (*x.shape[:-1], n)
            x = x.reshape(-1, k)
        rows = x.shape[0]
        x_stride, col_stride = x.stride()
        if col_stride != 1 or x_stride < k:
            x = x.contiguous()
            x_stride = k
        res_ptr = res_stride = 0
        if residual is not None:
            if residual.dim() != 2:
                residual = residual.reshape(-1, n)
            if (
                residual.shape != (rows, n)
                or residual.dtype is not torch.float32
                or not residual.is_cpu
            ):
                raise ValueError(
                    "linear: residual must be float32 on the CPU and shaped like the output"
                )
            res_stride, col_stride = residual.stride()
            if col_stride != 1:
                residual = residual.contiguous()
                res_stride = n
            res_ptr = residual.data_ptr()
        gamma = beta = 0
        eps = 0.0
        if norm is not None:
            gamma, beta, eps = self._norm_args(norm)
        out = torch.empty((rows, n), dtype=torch.float32)
        _kernels.linear(
            x.data_ptr(), x_stride, rows, k, self._w, n, self._b, res_ptr, res_stride,
            int(relu), out.data_ptr(), n, torch.get_num_threads(), gamma, beta, eps,
            LINEAR_MAX_ISA,
        )  # fmt: skip
        return out if shape is None else out.view(shape)


def topk_logsumexp_torch(logits: torch.Tensor, k: int):
    values, indices = logits.topk(k, dim=-1)
    row_max = values[:, :1]
    lse = (logits - row_max).exp_().sum(dim=-1, keepdim=True).log_().add_(row_max)
    return values, indices, lse


def topk_logsumexp(
    logits: torch.Tensor, k: int, use_kernel: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows, V) logits -> the k best values (rows, k) best first, their indices (rows, k),
    and each row's logsumexp (rows, 1)."""
    if (
        use_kernel
        and _kernels is not None
        and logits.device.type == "cpu"
        and logits.dtype == torch.float32
        and logits.dim() == 2
        and logits.stride(1) == 1
        and not logits.requires_grad
    ):
        rows, vocab = logits.shape
        values = torch.empty((rows, k), dtype=torch.float32)
        indices = torch.empty((rows, k), dtype=torch.long)
        lse = torch.empty((rows, 1), dtype=torch.float32)
        if rows:
            _kernels.topk_logsumexp(
                logits.data_ptr(),
                rows,
                vocab,
                logits.stride(0),
                k,
                values.data_ptr(),
                indices.data_ptr(),
                lse.data_ptr(),
                torch.get_num_threads() if rows >= 4 else 1,
            )
        return values, indices, lse
    return topk_logsumexp_torch(logits, k)


@dataclass
class BeamChoice:
    """One beam-search step's choice for n sentences (see beam_select)."""

    scores: torch.Tensor  # (n, K') cumulative log-probs of the next beams, best first (-inf: none)
    rows: torch.Tensor  # (n, K') the row each next beam extends
    words: torch.Tensor  # (n, K') the word it appends
    finished: list[tuple[int, float, int, int]]  # (sentence, score, row, word), rank order


def beam_select(
    values: torch.Tensor,
    words: torch.Tensor,
    lse: torch.Tensor,
    scores: torch.Tensor,
    at_limit: torch.Tensor,
    k: int,
    eos_id: int,
    use_kernel: bool = True,
) -> BeamChoice:
    """Beam search's selection for n sentences of g rows each.

    values/words (n * g, P): each row's P best logits and their words, best first (from
    topk_logsumexp); lse (n * g, 1) the rows' logsumexp; scores (n, g) the rows' cumulative
    log-probs; at_limit (n,) bool: the sentence reaches its length limit with this word. Of a
    sentence's min(2K, g * P) best continuations, those that end (EOS, or at the limit) and rank
    among the first K are `finished`; the K best that do not end are the next beams.
    """
    n, g = scores.shape
    per_row = values.shape[1]
    if not (
        use_kernel
        and _kernels is not None
        and all(t.device.type == "cpu" and t.is_contiguous() for t in (values, words, lse, scores))
        and values.dtype == lse.dtype == scores.dtype == torch.float32
        and words.dtype == torch.int64
    ):
        return beam_select_torch(values, words, lse, scores, at_limit, k, eos_id)
    width = min(2 * k, g * per_row)
    keep = min(k, width)
    next_s = torch.empty((n, keep), dtype=torch.float32)
    next_r = torch.empty((n, keep), dtype=torch.int64)
    next_w = torch.empty((n, keep), dtype=torch.int64)
    fin_count = torch.empty(n, dtype=torch.int64)
    fin_s = torch.empty((n, k), dtype=torch.float32)
    fin_r = torch.empty((n, k), dtype=torch.int64)
    fin_w = torch.empty((n, k), dtype=torch.int64)
    limit = at_limit.to(torch.uint8).contiguous()
    total = _kernels.beam_select(
        values.data_ptr(), words.data_ptr(), lse.data_ptr(), n, g, per_row,
        scores.data_ptr(), limit.data_ptr(), k, eos_id,
        next_s.data_ptr(), next_r.data_ptr(), next_w.data_ptr(),
        fin_count.data_ptr(), fin_s.data_ptr(), fin_r.data_ptr(), fin_w.data_ptr(),
    )  # fmt: skip
    finished: list[tuple[int, float, int, int]] = []
    if total:
        counts = fin_count.tolist()
        fs, fr, fw = fin_s.tolist(), fin_r.tolist(), fin_w.tolist()
        for i, c in enumerate(counts):
            finished.extend((i, fs[i][j], fr[i][j], fw[i][j]) for j in range(c))
    return BeamChoice(next_s, next_r, next_w, finished)


def beam_select_torch(values, words, lse, scores, at_limit, k, eos_id) -> BeamChoice:
    """beam_select with torch operations (any device)."""
    n, g = scores.shape
    per_row = values.shape[1]
    cand = (scores[:, :, None] + (values - lse).view(n, g, per_row)).view(n, -1)
    width = min(2 * k, cand.shape[1])
    top_s, top_j = cand.topk(width, dim=1)  # (n, 2K), best first
    rows = torch.arange(n, device=scores.device)[:, None] * g + top_j // per_row
    top_w = words.view(n, -1).gather(1, top_j)
    live = top_s > float("-inf")
    ending = live & ((top_w == eos_id) | at_limit[:, None])
    finishing = ending & (torch.arange(width, device=scores.device) < k)
    finished = []
    if bool(finishing.any()):
        sent, rank = finishing.nonzero(as_tuple=True)
        finished = list(
            zip(
                sent.tolist(),
                top_s[sent, rank].tolist(),
                rows[sent, rank].tolist(),
                top_w[sent, rank].tolist(),
                strict=True,
            )
        )
    alive_s = top_s.masked_fill(ending | ~live, float("-inf"))
    next_s, pos = alive_s.topk(min(k, width), dim=1)  # the K best that do not end
    return BeamChoice(next_s, rows.gather(1, pos), top_w.gather(1, pos), finished)
