"""The one owner of the device: load a checkpoint and translate batches of sentences.

    translator = Translator.load("weights/en-de", device="auto", dtype="auto")
    results = translator.translate_batch(["Hello!"], beam_size=4)
    results[0].text

`device="auto"` picks CUDA when present, else the CPU; `dtype="auto"` is bfloat16 on GPUs that
support it (float16 otherwise) and float32 on the CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch

from .checkpoint import Checkpoint, load_checkpoint
from .continuous import NewcomersFailed, RunningBatch
from .decoding import Hypothesis, beam_search, greedy_search, reference_greedy_search
from .int8 import int8_available, quantize_linears
from .langcodes import two_letter
from .linear_backend import choose_linear_backend
from .marian import MarianTokenizer
from .masks import pad_mask
from .model import count_parameters, packed_linear_available
from .truecase import NOUN_CAPITALS, Truecaser

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """ "auto" (CUDA when present, else the CPU), "cpu", "cuda" or "cuda:N"; ValueError for a
    device this machine does not have."""
    name = str(device)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r}: no CUDA GPU is usable here (use auto or cpu)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s)"
            )
    return dev


def resolve_dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if dtype not in _DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of auto, {', '.join(_DTYPES)}")
    return _DTYPES[dtype]


@dataclass
class TranslationHypothesis:
    text: str
    tokens: list[str]
    ids: list[int]
    score: float
    # its tokens (and EOS) reached the output limit: cut there, or ended by the EOS a Marian
    # model's decoding forces there; either way, often a model repeating itself
    at_limit: bool = False


@dataclass
class TranslationResult:
    hypotheses: list[TranslationHypothesis]  # best first
    source_tokens: int

    @property
    def text(self) -> str:
        return self.hypotheses[0].text if self.hypotheses else ""

    @property
    def output_tokens(self) -> int:
        return len(self.hypotheses[0].ids) if self.hypotheses else 0


@dataclass(frozen=True)
class DecodingOptions:
    """How to decode; `Translator.translate_batch` and `translate_ids` take these as keywords.

    beam_size: 1 is greedy search. n_best: hypotheses returned per sentence (<= beam_size).
    length_penalty: alpha of score = log-prob / length**alpha. Output limit per sentence, in
    generated tokens including EOS: min(max_length, max_length_ratio * source tokens +
    max_length_extra). reference: the reference greedy decoder (whole prefix every step).
    """

    beam_size: int = 4
    n_best: int = 1
    length_penalty: float = 1.0
    max_length: int = 256
    max_length_ratio: float = 2.0
    max_length_extra: int = 10
    reference: bool = False

    def __post_init__(self) -> None:
        if self.beam_size < 1 or not 1 <= self.n_best <= self.beam_size:
            raise ValueError("need beam_size >= 1 and 1 <= n_best <= beam_size")
        if self.reference and self.beam_size != 1:
            raise ValueError("the reference decoder is greedy: use beam_size=1")


class Translator:
    """A loaded model with its tokenizers on one device."""

    def __init__(
        self,
        checkpoint: Checkpoint,
        device: torch.device,
        dtype: torch.dtype,
        packed: bool | None = None,
        linear_backend: str | None = None,
    ):
        """`packed`: packed weights for the linear layers (model.PackedLinear; None: on CPU
        float32 where a backend is available). Outputs are the same up to float rounding.
        `linear_backend`: "auto" (chosen for this CPU, linear_backend.py), "panels", "onednn",
        or None: the first available (panels where the C kernels are built)."""
        self.checkpoint, self.device, self.dtype = checkpoint, device, dtype
        self.model, self.config = checkpoint.model, checkpoint.config
        self.source_tokenizer = checkpoint.source_tokenizer
        self.target_tokenizer = checkpoint.target_tokenizer
        self.source_language = checkpoint.source_language
        self.target_language = checkpoint.target_language
        self.target_languages = checkpoint.target_languages or [checkpoint.target_language]
        self.target_tokens = checkpoint.target_tokens  # multi-target models: ">>xxx<<" tokens
        self.parameters = count_parameters(self.model)
        self.quantized = False
        if packed is None:
            packed = device.type == "cpu" and dtype == torch.float32 and packed_linear_available()
        self.packed = packed
        backend = None
        if packed and linear_backend is not None:
            backend = choose_linear_backend(linear_backend, self.linear_shapes)
        self.linear_backend = backend
        self.model.prepare_for_inference(packed=packed, backend=backend)
        if device.type == "cuda":
            # cuDNN's attention builds a plan for each new shape of its inputs, and a decode
            # step's keys grow by one position per step, so nearly every step of a batch of a
            # new size pays that build; the other backends of scaled_dot_product_attention
            # build nothing per shape, though at a shape seen before they can be slower
            # (docs/BENCHMARKS.md section 7; torch's setting is per process)
            torch.backends.cuda.enable_cudnn_sdp(False)

    @classmethod
    def load(
        cls,
        path: str | Path,
        device: str | torch.device = "auto",
        dtype: str | torch.dtype = "auto",
        packed: bool | None = None,
        linear_backend: str | None = None,
    ) -> Translator:
        dev = resolve_device(device)
        dt = resolve_dtype(dtype, dev)
        checkpoint = load_checkpoint(path, device=dev, dtype=dt)
        return cls(checkpoint, dev, dt, packed=packed, linear_backend=linear_backend)

    def quantize_int8(self) -> Translator:
        """int8 linear layers (CPU, float32 model only; int8.Int8Linear): weights per output
        feature, each input row with its own scale, so a sentence translates the same in any
        batch. Returns self."""
        if self.device.type != "cpu" or self.dtype != torch.float32:
            raise ValueError("int8 quantization runs on the CPU, from a float32 model")
        if not int8_available():
            raise RuntimeError("this torch build has no quantized CPU linear op (fbgemm/x86)")
        self.model = quantize_linears(self.model.unpack())
        self.quantized, self.packed, self.linear_backend = True, False, None
        return self

    @property
    def linear_shapes(self) -> tuple[tuple[int, int], ...]:
        """The model's linear layers as (out, in) shapes, as linear_backend.py measures them."""
        cfg = self.config
        d, ff = cfg.d_model, cfg.d_ff
        return ((3 * d, d), (d, d), (ff, d), (d, ff), (cfg.tgt_vocab_size, d))

    @property
    def precision(self) -> str:
        """float32 / float16 / bfloat16, or int8 after quantize_int8()."""
        return "int8" if self.quantized else str(self.dtype).replace("torch.", "")

    @property
    def name(self) -> str:
        return self.checkpoint.path.name

    @property
    def max_source_tokens(self) -> int:
        """Longest source (pieces) the model accepts; one position is kept for EOS."""
        return self.config.max_positions - 1

    @functools.cached_property
    def truecaser(self) -> Truecaser:
        """Recases a source sentence in capitals or in Title Case (model_core/truecase.py) by
        the source tokenizer's pieces."""
        title = two_letter(self.source_language) not in NOUN_CAPITALS
        return Truecaser(self.source_tokenizer.sp, title=title)

    def encode_source(self, text: str, target: str | None = None) -> list[int]:
        """Source ids; a multi-target model gets the `target` language's token first (its
        first target language when `target` is None)."""
        ids = self.source_tokenizer.encode(text)
        if self.target_tokens and ids:
            code = target or self.target_language
            # a code of the same language as a listed one (`cmn`, `zho` for a model's `zh`)
            token = self.target_tokens.get(code) or self.target_tokens.get(two_letter(code))
            if token is None:
                raise ValueError(
                    f"this model translates to {', '.join(self.target_languages)}, not {target!r}"
                )
            # target tokens come with Marian checkpoints (checkpoint.load_marian)
            source = cast(MarianTokenizer, self.source_tokenizer)
            ids = [source.vocab[token], *ids]
        return ids

    def max_output_length(self, source_len: int, max_length: int, ratio: float, extra: int) -> int:
        """Output limit (generated tokens incl. EOS): relative to the source, capped absolutely."""
        return max(1, min(max_length, int(ratio * source_len) + extra, self.config.max_positions))

    def translate_batch(
        self,
        texts: list[str],
        *,
        max_batch_size: int = 64,
        target: str | None = None,
        progress: Callable[[int], None] | None = None,
        **options,
    ) -> list[TranslationResult]:
        """Translate `texts` (one sentence each), in order; `options` are DecodingOptions'
        fields (beam_size=4, n_best=1, length_penalty=1.0, max_length=256, ...; a Marian
        model's generation_config.json sets its own defaults). `target`: the target language
        of a multi-target model. `progress`: called with the number of texts translated
        after each chunk.

        Sentences are sorted by length and decoded in chunks of `max_batch_size`. Empty or
        whitespace-only text translates to "" without running the model.
        """
        opts = DecodingOptions(**{**self.checkpoint.generation, **options})
        encoded = [self.encode_source(t, target) for t in texts]
        for i, ids in enumerate(encoded):
            if len(ids) > self.max_source_tokens:
                raise ValueError(
                    f"sentence {i} has {len(ids)} tokens; this model accepts at most "
                    f"{self.max_source_tokens} (split it into shorter sentences)"
                )
        results: list[TranslationResult | None] = [None] * len(texts)
        todo = [i for i, ids in enumerate(encoded) if ids]
        for i, ids in enumerate(encoded):
            if not ids:
                results[i] = TranslationResult([TranslationHypothesis("", [], [], 0.0)], 0)
        todo.sort(key=lambda i: len(encoded[i]))
        for start in range(0, len(todo), max_batch_size):
            chunk = todo[start : start + max_batch_size]
            sources = [encoded[i] for i in chunk]
            hyps = self.decode_ids(sources, opts)
            limits = self.output_limits(sources, [opts.max_length] * len(sources), opts)
            for i, sent_hyps, limit in zip(chunk, hyps, limits, strict=True):
                results[i] = TranslationResult(
                    [self._hypothesis(h, limit) for h in sent_hyps], len(encoded[i]) + 1
                )
            if progress is not None:
                progress(len(chunk))
        return [r for r in results if r is not None]

    def _hypothesis(self, h: Hypothesis, limit: int) -> TranslationHypothesis:
        tok = self.target_tokenizer
        at_limit = len(h.tokens) + h.finished >= limit  # (h.finished: it ended with EOS)
        return TranslationHypothesis(
            tok.decode(h.tokens), tok.id_to_piece(h.tokens), h.tokens, h.score, at_limit
        )

    def batch_tensors(self, sources: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Pad source ids (+EOS) into (B, S) on the device, with the (B, 1, 1, S) pad mask."""
        cfg = self.config
        width = max(len(s) for s in sources) + 1
        eos, pad = [cfg.eos_id], cfg.pad_id
        rows = [ids + eos + [pad] * (width - 1 - len(ids)) for ids in sources]
        src = torch.tensor(rows, dtype=torch.long).to(self.device)  # one op: on the hot path
        return src, pad_mask(src, cfg.pad_id)

    def translate_ids(self, sources: list[list[int]], **options) -> list[list[Hypothesis]]:
        """One padded batch of source ids -> n_best hypotheses per sentence; `options` are
        DecodingOptions' fields, over the model's own defaults (`checkpoint.generation`: a
        Marian model's generation_config.json) as in translate_batch."""
        return self.decode_ids(sources, self.options(**options))

    def options(self, **overrides) -> DecodingOptions:
        """DecodingOptions over the model's own defaults (`checkpoint.generation`)."""
        return DecodingOptions(**{**self.checkpoint.generation, **overrides})

    def decode_ids(self, sources: list[list[int]], opts: DecodingOptions) -> list[list[Hypothesis]]:
        """translate_ids with its options already checked."""
        src, mask = self.batch_tensors(sources)
        limits = torch.tensor(self.output_limits(sources, [opts.max_length] * len(sources), opts))
        alpha = opts.length_penalty
        if opts.reference:
            return [[h] for h in reference_greedy_search(self.model, src, mask, limits, alpha)]
        if opts.beam_size == 1:
            return [[h] for h in greedy_search(self.model, src, mask, limits, alpha)]
        stop = self.checkpoint.beam_stop
        return beam_search(
            self.model, src, mask, limits, opts.beam_size, alpha, opts.n_best, stop=stop
        )

    def output_limits(
        self, sources: list[list[int]], max_lengths: list[int], opts: DecodingOptions
    ) -> list[int]:
        """Each sentence's output limit (generated tokens, EOS included) for its max_length."""
        return [
            self.max_output_length(len(s) + 1, m, opts.max_length_ratio, opts.max_length_extra)
            for s, m in zip(sources, max_lengths, strict=True)
        ]

    def running_batch(self, beam_size: int, fixed: bool = False) -> RunningBatch:
        """An empty continuous decode with this model (model_core/continuous.py), with the
        model's length penalty; `fixed`: in buffers of a fixed size (CUDA graphs on a GPU)."""
        return RunningBatch(
            self.model,
            beam_size=beam_size,
            length_penalty=self.options(beam_size=beam_size, n_best=1).length_penalty,
            stop=self.checkpoint.beam_stop,
            fixed=fixed,
        )

    def join(
        self,
        running: RunningBatch,
        ids: list,
        sources: list[list[int]],
        max_lengths: list[int],
        n_bests: list[int],
        opts: DecodingOptions | None = None,
    ) -> None:
        """Source ids join `running` at its next step, each with its own max_length and n-best
        count (the other options from `opts`)."""
        opts = opts or self.options(beam_size=running.k, n_best=1)
        try:  # (nothing of `running` changed yet: see RunningBatch.join)
            src, mask = self.batch_tensors(sources)
            limits = self.output_limits(sources, max_lengths, opts)
        except Exception as exc:
            raise NewcomersFailed(f"the newcomers' sources failed: {exc}") from exc
        running.join(ids, src, mask, limits, n_bests, [len(s) + 1 for s in sources])  # +EOS
