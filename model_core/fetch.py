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
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .cli import interruptible

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
    """Download `repo_id` into weights_dir/<name after the slash>; returns that directory.

    The files arrive in a hidden folder beside it (the service skips names with a leading
    dot), which takes the directory's place only once every file is there and its config.json
    says it is a Marian model: a failed or refused download leaves nothing the service would
    try to load, and a model fetched before stays as it was."""
    from huggingface_hub import HfApi, snapshot_download

    files = {s.rfilename for s in HfApi().model_info(repo_id, revision=revision).siblings or []}
    weights = "model.safetensors" if "model.safetensors" in files else "pytorch_model.bin"
    if weights not in files:
        raise ValueError(f"{repo_id} has neither model.safetensors nor pytorch_model.bin")
    weights_dir = Path(weights_dir)
    weights_dir.mkdir(parents=True, exist_ok=True)
    target = weights_dir / repo_id.split("/")[-1]
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=weights_dir))
    # mkdtemp makes it private (0700); the model's folder gets the usual mode, so that a
    # service running as another user (the image's) can read it
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)
    try:
        snapshot_download(
            repo_id,
            revision=revision,
            local_dir=staging,
            allow_patterns=[*SERVED_FILES, weights],
        )
        check_marian(staging, repo_id)
        old = None
        if target.exists():  # replaced as a whole: the old one out of the way first
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=weights_dir))
            target.rename(old / target.name)
        staging.rename(target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # (gone already when it took the place)
    return target


def check_marian(directory: Path, repo_id: str) -> None:
    """ValueError unless directory/config.json is a Marian model's (the architecture of the
    OPUS-MT models, which the service reads from their Hugging Face files)."""
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{repo_id}: no readable config.json ({exc})") from None
    kind = config.get("model_type") if isinstance(config, dict) else None
    if kind != "marian":
        raise ValueError(
            f"{repo_id} is a {kind or 'model of no stated type'} model, not a Marian one: "
            "the service serves Marian (OPUS-MT) models"
        )


def default_weights_dir() -> Path:
    """$MT_WEIGHTS_DIR, or weights where it is unset or blank (as the service reads it: a blank
    value was the current folder)."""
    return Path(os.environ.get("MT_WEIGHTS_DIR", "").strip() or "weights")


@interruptible("mt-fetch", ": the model being downloaded was not kept")
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mt-fetch", description=__doc__.split("\n")[0])
    p.add_argument(
        "models", nargs="+", metavar="model", help="Hub model names: Helsinki-NLP/opus-mt-en-de"
    )
    p.add_argument(
        "--weights-dir",
        type=Path,
        default=default_weights_dir(),
        help="where the service reads models (default: $MT_WEIGHTS_DIR or weights)",
    )
    p.add_argument("--revision", help="a branch, tag or commit of the model repository")
    args = p.parse_args(argv)
    # status 2 is for a mistake on the command line (argparse's); a model that could not be
    # fetched is 1, after the others were tried (the first failure skipped the rest, unsaid)
    failed = []
    for model in args.models:
        try:
            out = fetch(model, args.weights_dir, args.revision)
        except ImportError:
            print(
                "mt-fetch: error: needs huggingface_hub (pip install huggingface_hub)",
                file=sys.stderr,
            )
            return 1
        except Exception as exc:  # network, authentication, missing repository: one line
            print(f"mt-fetch: error: {model}: {type(exc).__name__}: {exc}", file=sys.stderr)
            failed.append(model)
            continue
        print(f"wrote {out}")
    if failed and len(args.models) > 1:
        print(
            f"mt-fetch: {len(failed)} of {len(args.models)} models not fetched: "
            f"{', '.join(failed)}",
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
