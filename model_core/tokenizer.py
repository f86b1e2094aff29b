"""A thin sentencepiece wrapper with the special ids the model config expects.

Behaviour at the edges (tested):
- "" and whitespace-only text encode to no pieces; decoding no ids gives "".
- Characters outside the vocabulary become the unk id when encoded; decoding unk yields
  " \u2047 " in sentencepiece, which `decode` drops, so output never shows the marker.
- Emoji and other rare characters are covered by byte fallback when the model was trained with
  it (our training command turns it on), so they round-trip instead of becoming unk.
- Encoding has no length limit; the Translator refuses sources longer than the model allows
  and the service splits long sentences before they reach it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import sentencepiece as spm


class SpecialIds(TypedDict):
    pad_id: int
    unk_id: int
    bos_id: int
    eos_id: int


SPECIAL_IDS: SpecialIds = {"pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3}


class Tokenizer:
    def __init__(self, model_path: str | Path):
        self.path = Path(model_path)
        self.sp = spm.SentencePieceProcessor(model_file=str(self.path))
        self.pad_id, self.unk_id = self.sp.pad_id(), self.sp.unk_id()
        self.bos_id, self.eos_id = self.sp.bos_id(), self.sp.eos_id()

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text, out_type=int)

    def encode_pieces(self, text: str) -> list[str]:
        return self.sp.encode(text, out_type=str)

    def decode(self, ids: list[int]) -> str:
        specials = {self.pad_id, self.bos_id, self.eos_id, self.unk_id}
        return self.sp.decode([i for i in ids if i not in specials])

    def id_to_piece(self, ids: list[int]) -> list[str]:
        return [self.sp.id_to_piece(i) for i in ids]

    def special_ids(self) -> SpecialIds:
        return {
            "pad_id": self.pad_id,
            "unk_id": self.unk_id,
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
        }


def train_sentencepiece(
    inputs: list[Path],
    model_prefix: Path,
    vocab_size: int,
    *,
    model_type: str = "unigram",
    input_sentence_size: int = 2_000_000,
    num_threads: int = 2,
) -> Path:
    """Train a sentencepiece model with our special ids and byte fallback; returns the .model."""
    spm.SentencePieceTrainer.train(
        input=",".join(str(p) for p in inputs),
        model_prefix=str(model_prefix),
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=1.0,
        byte_fallback=True,
        input_sentence_size=input_sentence_size,
        shuffle_input_sentence=True,
        num_threads=num_threads,
        minloglevel=2,
        **SPECIAL_IDS,
    )
    return model_prefix.with_suffix(".model")
