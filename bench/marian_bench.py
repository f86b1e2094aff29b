"""Marian-shaped speed benchmark: ours and CTranslate2 on one Hugging Face Marian directory,
CTranslate2's copy made by CTranslate2's own converter (`TransformersConverter`).

`--build` first writes a random model of the OPUS-MT shape to the directory with transformers
(d_model 512, 6+6 layers, 8 heads, d_ff 2048, 58,101 vocabulary entries by default;
MarianConfig's default gelu activation, where OPUS-MT has swish at the same cost): real
sentencepiece models (BPE, as large as sentencepiece allows on the text, at most half of
`--vocab` each) trained on a few
thousand lines of `--spm-corpus`, one vocab.json over both, padded with unused entries up to
`--vocab` when the pieces are fewer; the <pad> row is zero (as Marian's, where CTranslate2
starts its decoder from a zero embedding). The output layer is its own matrix, not the
embeddings (OPUS-MT ties them; the work per step is the same): random tied weights carry each
input token through the residuals to the top of the output and repeat it for ever. Random weights never stop on their own, so EOS gets
a -1e4 logit bias and every output runs to `--max-length` tokens on both sides (no forced EOS
at the cap): the same number of decoding steps per sentence, printed for each side.

Ours loads the directory with the project's Marian loader (float32; int8 by quantize_int8);
CTranslate2 runs the float32 conversion with compute_type float32 or int8. Each configuration's
repetitions run ours and CTranslate2 back to back in fresh processes (ct2_bench's
--side-by-side); ratios are medians of the pairs.

    python -m bench.marian_bench --marian /tmp/opus-mt-random --build

Exits non-zero if any run fails or returns fewer outputs than sentences; never asserts a speed.
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.marian_bench"))

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

from .common import (
    DEFAULT_SRC,
    add_malloc_option,
    apply_malloc,
    machine,
    median,
    read_sentences,
    table,
)
from .ct2_bench import gemm_flops, paired_jobs, paired_ratios, run_jobs, timed, tok_s

DEFAULT_CORPUS = DEFAULT_SRC.parent / "train"  # train.en and train.de
EOS_BIAS = -1e4  # random weights would otherwise stop at random (or never)


def train_largest_spm(lines: list[str], prefix: Path, limit: int) -> int:
    """A BPE sentencepiece model at prefix.model with as many pieces as sentencepiece allows on
    `lines` (at most `limit`); returns its size."""
    import sentencepiece as spm

    text = prefix.with_suffix(".txt")
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def train(size: int) -> None:
        spm.SentencePieceTrainer.train(
            input=str(text),
            model_prefix=str(prefix),
            model_type="bpe",
            vocab_size=size,
            character_coverage=1.0,
            num_threads=1,
            minloglevel=2,
        )

    try:
        train(limit)
        return limit
    except RuntimeError as exc:  # "Vocabulary size too high (N). Please set it to a value <= M."
        m = re.search(r"value <= (\d+)", str(exc))
        if not m:
            raise
        train(int(m.group(1)))
        return int(m.group(1))


def build_marian_dir(
    directory: Path,
    *,
    corpus: Path = DEFAULT_CORPUS,
    lines: int = 5000,
    vocab_size: int = 58101,
    d_model: int = 512,
    layers: int = 6,
    heads: int = 8,
    d_ff: int = 2048,
    scale: float = 3.0,
    seed: int = 0,
) -> dict:
    """Write a random MarianMTModel of this shape, with its tokenizer files, to `directory`
    (replaced); returns what was built (sentencepiece sizes, real and padded vocab entries)."""
    import sentencepiece as spm
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    info: dict = {"spm_lines": lines}
    pieces: list[str] = []
    with tempfile.TemporaryDirectory() as work:
        for side, lang, name in (("source", "en", "source.spm"), ("target", "de", "target.spm")):
            text = read_sentences(corpus.with_suffix(f".{lang}"), 10**9)
            step = max(1, len(text) // lines)  # spread over the corpus, not its first lines
            prefix = Path(work) / side
            # each at most half the vocabulary, so that both fit
            info[f"{side}_spm"] = train_largest_spm(text[::step][:lines], prefix, vocab_size // 2)
            shutil.copy(prefix.with_suffix(".model"), directory / name)
            sp = spm.SentencePieceProcessor(model_file=str(prefix.with_suffix(".model")))
            pieces += [sp.id_to_piece(i) for i in range(3, sp.get_piece_size())]
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    info["real_entries"] = len(vocab) + 1  # with <pad>
    if len(vocab) + 1 > vocab_size:
        raise ValueError(f"{len(vocab) + 1} pieces do not fit a vocabulary of {vocab_size}")
    for i in range(vocab_size - 1 - len(vocab)):  # entries no sentencepiece model produces
        vocab[f"<unused{i}>"] = len(vocab)
    vocab["<pad>"] = pad = len(vocab)
    info["vocab_size"] = len(vocab)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (directory / "tokenizer_config.json").write_text(
        json.dumps({"source_lang": "en", "target_lang": "de", "model_max_length": 512})
    )
    (directory / "mt.json").write_text(
        json.dumps({"source_language": "en", "target_language": "de"})
    )
    config = MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=d_ff,
        decoder_ffn_dim=d_ff,
        max_position_embeddings=512,
        pad_token_id=pad,
        eos_token_id=0,
        bos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=None,
        scale_embedding=True,
        tie_word_embeddings=False,
        share_encoder_decoder_embeddings=True,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        # a large scale: peaked next-token distributions, so that token ids compare without
        # near ties
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue
            if p.dim() > 1:
                p.normal_(0.0, scale / p.shape[-1] ** 0.5)
            elif "layer_norm" in name and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 0.1)
        # one table for the encoder, the decoder and `shared`, as OPUS-MT's (the loop above
        # drew each of them on its own)
        shared = model.model.shared.weight
        shared[pad].zero_()
        for embed in (model.model.encoder.embed_tokens, model.model.decoder.embed_tokens):
            embed.weight.copy_(shared)
        model.final_logits_bias.normal_(0.0, 1.0)
        model.final_logits_bias[0, 0] = EOS_BIAS
    model.generation_config = GenerationConfig(
        bad_words_ids=[[pad]],
        bos_token_id=0,
        decoder_start_token_id=pad,
        eos_token_id=0,
        max_length=512,
        num_beams=4,
        pad_token_id=pad,
    )
    model.save_pretrained(directory)
    return info


def convert(directory: Path, output: Path) -> Path:
    """CTranslate2's own conversion of the Marian directory (float32 weights)."""
    from ctranslate2.converters import TransformersConverter

    return Path(TransformersConverter(str(directory)).convert(str(output), force=True))


def worker(spec: dict) -> dict:
    """Translate in this process; returns timing, output token ids and peak RSS."""
    import torch

    apply_malloc(spec["malloc"])
    torch.set_num_threads(spec["threads"])
    sentences = read_sentences(Path(spec["src"]), spec["n"])
    directory = Path(spec["marian"])
    if spec["system"] == "ct2":
        import ctranslate2
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(directory / "source.spm"))
        vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
        ct2 = ctranslate2.Translator(
            spec["ct2_dir"],
            device="cpu",
            compute_type=spec["precision"],
            intra_threads=spec["threads"],
            inter_threads=1,
        )

        def run(texts: list[str]):
            # a Transformers model's source EOS comes from the caller (as its tokenizer adds it)
            res = ct2.translate_batch(
                [sp.encode(t, out_type=str) + ["</s>"] for t in texts],
                beam_size=spec["beam"],
                max_batch_size=spec["batch"],
                max_decoding_length=spec["max_length"],
                length_penalty=1.0,
            )
            ids = [[vocab[p] for p in r.hypotheses[0]] for r in res]
            return ids, [len(i) for i in ids]
    else:
        from model_core.translator import Translator

        tr = Translator.load(
            directory,
            device="cpu",
            dtype="float32",
            linear_backend=spec["linear_backend"],
        )
        if spec["precision"] == "int8":
            tr.quantize_int8()

        def run(texts: list[str]):
            res = tr.translate_batch(
                texts,
                beam_size=spec["beam"],
                max_batch_size=spec["batch"],
                max_length=spec["max_length"],
                max_length_ratio=1e6,
                length_penalty=1.0,
            )
            ids = [r.hypotheses[0].ids for r in res]
            return ids, [len(i) for i in ids]

    return timed(run, sentences)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--marian", type=Path, required=False, help="the Marian directory")
    p.add_argument("--build", action="store_true", help="write a random model there first")
    p.add_argument("--spm-corpus", type=Path, default=DEFAULT_CORPUS, help="PREFIX.{en,de}")
    p.add_argument("--spm-lines", type=int, default=5000)
    p.add_argument("--vocab", type=int, default=58101)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--d-ff", type=int, default=2048)
    p.add_argument("--src", type=Path, default=DEFAULT_SRC)
    p.add_argument("--sentences", type=int, default=256, help="sentences for batched runs")
    p.add_argument("--small-batch-sentences", type=int, default=32, help="for batch 1 runs")
    p.add_argument("--batch-sizes", default="1,32")
    p.add_argument("--beams", default="1,4")
    p.add_argument("--precisions", default="float32,int8")
    p.add_argument("--max-length", type=int, default=24, help="tokens generated per sentence")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--linear-backend",
        choices=["auto", "panels", "onednn"],
        default="auto",
        help="our float32 linear layers, as MT_LINEAR_BACKEND (default: auto, as the service)",
    )
    add_malloc_option(p)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if args.marian is None:
        p.error("--marian DIR is required")
    unknown = set(args.precisions.split(",")) - {"float32", "int8"}
    if unknown:
        p.error(f"unknown precision(s) {sorted(unknown)}: use float32, int8")
    if args.build:
        info = build_marian_dir(
            args.marian,
            corpus=args.spm_corpus,
            lines=args.spm_lines,
            vocab_size=args.vocab,
            d_model=args.d_model,
            layers=args.layers,
            heads=args.heads,
            d_ff=args.d_ff,
        )
        print(
            f"built {args.marian}: sentencepiece BPE source {info['source_spm']} / target "
            f"{info['target_spm']} pieces (the most sentencepiece allows on {info['spm_lines']} "
            f"lines each); vocab.json {info['vocab_size']} entries, {info['real_entries']} of "
            f"them real, the rest unused padding",
            file=sys.stderr,
        )
    ct2_dir = Path(tempfile.mkdtemp()) / "ct2"
    convert(args.marian, ct2_dir)
    try:
        return report(args, ct2_dir)
    finally:
        shutil.rmtree(ct2_dir.parent, ignore_errors=True)


def report(args, ct2_dir: Path) -> int:
    import sentencepiece as spm

    from model_core.marian import _read_json

    batches = [int(b) for b in args.batch_sizes.split(",")]
    beams = [int(b) for b in args.beams.split(",")]
    precisions = args.precisions.split(",")
    keys = [(p, beam, b) for p in precisions for beam in beams for b in batches]
    raw, missing = run_jobs(
        "bench.marian_bench",
        paired_jobs(keys, args.repeats),
        args,
        max_length=args.max_length,
        marian=str(args.marian),
        ct2_dir=str(ct2_dir),
    )
    cfg = _read_json(args.marian / "config.json")
    sp = spm.SentencePieceProcessor(model_file=str(args.marian / "source.spm"))
    src = read_sentences(args.src, max(args.sentences, args.small_batch_sentences))
    pieces = [len(sp.encode(s)) + 1 for s in src]
    rows = []
    for precision, beam, batch in keys:
        ours = [r for r in raw.get(("ours", precision, beam, batch), []) if "texts" in r]
        ct2 = [r for r in raw.get(("ct2", precision, beam, batch), []) if "texts" in r]
        search = "greedy" if beam == 1 else f"beam {beam}"
        if not ours or not ct2:
            rows.append([precision, search, batch, "missing", "", "", "", "", "", "", ""])
            continue
        a, b = ours[0]["texts"], ct2[0]["texts"]
        same = sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
        ratios = paired_ratios(raw, (precision, beam, batch))
        rows.append(
            [
                precision,
                search,
                batch,
                ours[0]["n"],
                f"{ours[0]['tokens']} / {ct2[0]['tokens']}",
                median([tok_s(r) for r in ours]),
                median([tok_s(r) for r in ct2]),
                f"{median([r['peak_rss_mb'] for r in ours]):.0f} / "
                f"{median([r['peak_rss_mb'] for r in ct2]):.0f}",
                f"{same:.3f}",
                f"{median(ratios):.2f}x",
                " ".join(f"{r:.2f}" for r in ratios),
            ]
        )
    import ctranslate2

    print(
        f"\nmachine: {machine()}; {args.threads} threads each; float32 GEMM (2048^3) "
        f"{gemm_flops(args.threads) / 1e9:.1f} GFLOP/s; CTranslate2 {ctranslate2.__version__}"
    )
    print(
        f"model: {args.marian}: d_model {cfg['d_model']}, {cfg['encoder_layers']}+"
        f"{cfg['decoder_layers']} layers, {cfg['encoder_attention_heads']} heads, d_ff "
        f"{cfg['encoder_ffn_dim']}, vocabulary {cfg['vocab_size']}; source {median(pieces):.0f} "
        f"tokens per sentence (median, with EOS); {args.max_length} tokens generated per "
        f"sentence; medians of {args.repeats} back-to-back pairs\n"
    )
    print(
        table(
            [
                "precision",
                "search",
                "batch",
                "sentences",
                "tokens ours / CT2",
                "ours tok/s",
                "CT2 tok/s",
                "peak RSS MB ours / CT2",
                "same tokens",
                "ours / CT2",
                "pairs",
            ],
            rows,
        )
    )
    if args.json:
        args.json.write_text(json.dumps({" ".join(map(str, k)): v for k, v in raw.items()}))
    if missing:
        print(f"missing outputs: {missing}", file=sys.stderr)
        return 1
    return 0
