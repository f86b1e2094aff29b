"""The models in weights/ load and translate everyday sentences into the right language.
(No BLEU here: BLEU belongs to mt-evaluate and weights/README.md.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from model_core.checkpoint import read_metadata
from model_core.translator import Translator

WEIGHTS = Path(__file__).resolve().parent.parent / "weights"
STOPWORDS = {
    "en": {
        "the",
        "i",
        "you",
        "is",
        "are",
        "a",
        "to",
        "it",
        "not",
        "we",
        "he",
        "she",
        "do",
        "my",
        "this",
        "what",
    },
    "de": {
        "der",
        "die",
        "das",
        "ich",
        "du",
        "ist",
        "nicht",
        "ein",
        "eine",
        "wir",
        "er",
        "sie",
        "es",
        "zu",
        "mein",
        "bin",
        "was",
        "hast",
        "habe",
    },
}
SENTENCES = {
    "en": [
        "I love you.",
        "Where is the train station?",
        "Tom is very tired today.",
        "We need more time.",
        "The weather is nice.",
        "Can you help me, please?",
        "I don't know what to do.",
    ],
    "de": [
        "Ich liebe dich.",
        "Wo ist der Bahnhof?",
        "Tom ist heute sehr müde.",
        "Wir brauchen mehr Zeit.",
        "Das Wetter ist schön.",
        "Kannst du mir bitte helfen?",
        "Ich weiß nicht, was ich tun soll.",
    ],
}


def language_votes(texts: list[str]) -> dict[str, int]:
    words = [w for t in texts for w in re.findall(r"[a-zäöüß']+", t.lower())]
    return {lang: sum(w in stop for w in words) for lang, stop in STOPWORDS.items()}


@pytest.mark.parametrize("pair", ["en-de", "de-en"])
def test_shipped_model_translates_into_the_target_language(pair):
    source, target = pair.split("-")
    meta = read_metadata(WEIGHTS / pair)
    assert (meta["source_language"], meta["target_language"]) == (source, target)
    assert sum(f.stat().st_size for f in (WEIGHTS / pair).iterdir()) <= 40 * 2**20
    translator = Translator.load(WEIGHTS / pair, device="cpu")
    results = translator.translate_batch(SENTENCES[source], beam_size=4)
    texts = [r.text for r in results]
    assert all(t.strip() for t in texts), texts
    votes = language_votes(texts)
    other = source
    assert votes[target] >= 5 and votes[target] > 2 * votes[other], (texts, votes)


LONE = {
    "en": ["cat", "house", "water", "book", "tree", "car", "school", "friend", "good morning"],
    "de": ["Katze", "Haus", "Wasser", "Buch", "Baum", "Auto", "Schule", "Freund", "guten Morgen"],
}


@pytest.mark.parametrize("pair", ["en-de", "de-en"])
def test_shipped_model_answers_a_lone_word_with_a_word(pair):
    """A word typed alone, without a full stop, as people type into a translation box: its
    translation is a few words at most, not the word repeated ("cat" gave "Katze Katze
    Katze.") nor a sentence made up around it ("Katze" gave "cat is a cat.", "Hund" "dog is
    taking a dog."). (de-en still adds a word or two at times: "Haus" gives "The house is".)"""
    from model_core.evaluate import repeats_a_word

    source, _ = pair.split("-")
    translator = Translator.load(WEIGHTS / pair, device="cpu")
    texts = [r.text for r in translator.translate_batch(LONE[source], beam_size=4)]
    for word, text in zip(LONE[source], texts, strict=True):
        assert not repeats_a_word(text), (word, text)
        words = re.findall(r"\w+", text)
        assert words, (word, text)  # not nothing
        assert len(words) <= len(word.split()) + 2, (word, text)  # no sentence around it
