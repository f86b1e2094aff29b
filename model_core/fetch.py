"""Fetch a Marian (OPUS-MT) model from the Hugging Face Hub into the weights directory.

    mt-fetch Helsinki-NLP/opus-mt-en-de            # -> $MT_WEIGHTS_DIR/opus-mt-en-de
    mt-fetch Helsinki-NLP/opus-mt-en-de Helsinki-NLP/opus-mt-de-en --weights-dir opus-mt

Only the files the service reads are downloaded (config, generation config, the weights --
model.safetensors where the repository has it, else pytorch_model.bin -- the two
sentencepiece models, the vocabularies, the model card), with huggingface_hub's progress bars.
HF_ENDPOINT, HF_TOKEN and the other huggingface_hub variables apply as usual.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

SERVED_FILES = [
    "config.json",
    "generation_config.json",
    "source.spm",
    "target.spm",
    "vocab.json",
    "target_vocab.json",
    "tokenizer_config.json",
    "README.md",
]


def fetch(repo_id: str, weights_dir: str | Path, revision: str | None = None) -> Path:
    """Download `repo_id` into weights_dir/<name after the slash>; returns that directory."""
    from huggingface_hub import HfApi, snapshot_download

    files = {s.rfilename for s in HfApi().model_info(repo_id, revision=revision).siblings or []}
    weights = "model.safetensors" if "model.safetensors" in files else "pytorch_model.bin"
    if weights not in files:
        raise ValueError(f"{repo_id} has neither model.safetensors nor pytorch_model.bin")
    target = Path(weights_dir) / repo_id.split("/")[-1]
    snapshot_download(
        repo_id,
        revision=revision,
        local_dir=target,
        allow_patterns=[*SERVED_FILES, weights],
    )
    return target


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mt-fetch", description=__doc__.split("\n")[0])
    p.add_argument(
        "models", nargs="+", metavar="model", help="Hub model names: Helsinki-NLP/opus-mt-en-de"
    )
    p.add_argument(
        "--weights-dir",
        type=Path,
        default=Path(os.environ.get("MT_WEIGHTS_DIR", "weights")),
        help="where the service reads models (default: $MT_WEIGHTS_DIR or weights)",
    )
    p.add_argument("--revision", help="a branch, tag or commit of the model repository")
    args = p.parse_args(argv)
    for model in args.models:
        try:
            out = fetch(model, args.weights_dir, args.revision)
        except ImportError:
            print(
                "mt-fetch: error: needs huggingface_hub (pip install huggingface_hub)",
                file=sys.stderr,
            )
            return 2
        except Exception as exc:  # network, authentication, missing repository: one line
            print(f"mt-fetch: error: {model}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
