"""Language identification for POST /detect and `source: "auto"`, with py3langid.

py3langid (BSD-3-Clause; a maintained fork of langid.py) was chosen over lingua-language-detector
(Apache-2.0) for its size and its plain dependencies: the whole package is 4.5 MB installed,
needs only numpy, and its one model is an .npz read with allow_pickle=False (nothing is
unpickled); it loaded in 1.1 s on the 2-core test machine (2026-11-24), once, at start-up.
lingua is more accurate on very short texts, but carries a compiled extension and its n-gram
models for every language it knows. Here the choice is only between the few languages the
loaded models serve, which py3langid tells apart well once a text has a few words. The
identifier is restricted to the languages the models serve (as sources or targets) and its
probabilities are renormalised over them; a request can restrict it further (the sources that
have a model to its target, and the target itself).

A text is read without its invisible format characters (Unicode category Cf: the soft hyphen,
zero-width spaces and joiners, word joiners, direction marks, a byte order mark): py3langid reads
bytes, and a soft hyphen or a zero-width space inside a word cut it into pieces that read as
another language ("Kranken\u00adver\u00adsiche\u00adrung" was 48% German, 98% without them).
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from collections.abc import Iterable

from py3langid.langid import MODEL_FILE, LanguageIdentifier


@functools.cache
def _format_characters() -> dict[int, None]:
    """str.translate's table that removes every character of Unicode category Cf."""
    cf = (c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf")
    return dict.fromkeys(cf)


def readable(text: str) -> str:
    """`text` as language detection reads it: without its invisible format characters."""
    return text.translate(_format_characters())


class Detector:
    def __init__(self, languages: Iterable[str]):
        self.identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        _format_characters()  # built once, at start-up
        known = set(self.identifier.labels)
        wanted = set(languages)
        self.languages = sorted(wanted & known)
        self.unknown = sorted(wanted - known)  # served, but py3langid cannot name them
        if self.languages:
            self.identifier.set_languages(self.languages)

    def rank(self, text: str, among: Iterable[str] | None = None) -> list[tuple[str, float]]:
        """(language, confidence in percent) best first, over `among` (default: every language
        the detector knows), of the text as `readable` gives it. Confidences sum to 100."""
        text = readable(text)
        allowed = set(self.languages if among is None else among) & set(self.languages)
        if not allowed:
            return []
        if len(self.languages) == 1:
            scores = [(self.languages[0], 1.0)]
        else:
            scores = [(lang, p) for lang, p in self.identifier.rank(text) if lang in allowed]
        total = sum(p for _, p in scores)
        if total <= 0:  # no feature in the text: every language as likely
            return [(lang, round(100.0 / len(scores), 1)) for lang, _ in scores]
        ranked = sorted(((lang, 100.0 * p / total) for lang, p in scores), key=lambda x: -x[1])
        return [(lang, round(conf, 1)) for lang, conf in ranked]

    def detect_all(
        self, texts: list[str], among: Iterable[str] | None = None
    ) -> list[list[tuple[str, float]]]:
        among = None if among is None else list(among)
        return [self.rank(t, among) for t in texts]
