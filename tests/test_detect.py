"""Language detection (app/detect.py) with py3langid's shipped model: how a tie is broken, and
the one loaded model both identifiers read with."""

from __future__ import annotations

import pytest
from py3langid.langid import MODEL_FILE, LanguageIdentifier

from app.detect import Detector, full_identifier

TIED = ["Tom", "ok", "Hi", "2024"]  # no evidence either way: 50% each


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector(["en", "de"], prefer="en")


def test_a_tie_puts_the_preferred_language_first_and_a_target_last(detector):
    for text in TIED:
        assert detector.rank(text) == [("en", 50.0), ("de", 50.0)], text
        assert detector.rank(text, target="de") == [("en", 50.0), ("de", 50.0)], text
        assert detector.rank(text, target="en") == [("de", 50.0), ("en", 50.0)], text
    # without a preferred language, by code; evidence outweighs the rule
    assert Detector(["en", "de"]).rank("Tom") == [("de", 50.0), ("en", 50.0)]
    assert detector.rank("Guten Morgen, wie geht es dir?", target="de")[0][0] == "de"


def test_confidences_equal_as_answered_are_a_tie(detector):
    """50.04 and 49.96 are both answered as 50.0: the rule orders them, not the digits unseen."""
    assert detector.order([("de", 50.04), ("en", 49.96)]) == [("en", 50.0), ("de", 50.0)]
    assert detector.order([("de", 50.04), ("en", 49.96)], target="en")[0] == ("de", 50.0)
    assert detector.order([("de", 60.0), ("en", 40.0)], target="de")[0] == ("de", 60.0)


TEXTS = [
    "Tom",
    "",
    "2024",
    "Wie spät ist es heute Abend?",
    "The weather is very nice today and we are going to the park.",
    "Kranken\u00adver\u00adsiche\u00adrung",
    "Je voudrais réserver une table pour deux personnes ce soir.",
    "שלום עולם, מה שלומך?",
    "北京是中国的首都，有很多历史悠久的建筑。",
    "Auf dem Schild stand: Я хотел бы заказать столик на двоих. Wir verstanden nichts.",
    "Merci beaucoup",
    "I met François Hollande in Paris.",
]


def test_the_served_languages_identifier_is_the_full_model_restricted(detector):
    """The identifier of the served languages shares the full model's loaded arrays (the model
    file was loaded twice, about 80 MB each) and ranks every text exactly as one loaded from
    the model file on its own and restricted to the same languages; the full identifier still
    ranks over all its languages."""
    full = full_identifier()
    assert detector.identifier.tk_nextmove is full.tk_nextmove
    assert detector.identifier.tk_output is full.tk_output
    loaded = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    before = [full.rank(t) for t in TEXTS]
    loaded.set_languages(["de", "en"])
    for text in TEXTS:
        assert detector.identifier.rank(text) == loaded.rank(text), text
    assert [full.rank(t) for t in TEXTS] == before
    assert len(before[0]) > 100 and before[6][0][0] == "fr"


def test_a_short_sentence_clearly_in_another_language_is_unserved(detector):
    """English and German together got 1.5e-3 of the full model for this French sentence, over
    the old UNSERVED_MASS of 1e-3: it was taken as English. A corpus line of English the full
    model cannot place (0.0065, 32% Portuguese) stays served."""
    assert detector.unserved("Nous aimons le pain et le fromage du village.") == ("fr", 99.0)
    assert detector.unserved("Tom adores me.") is None
    assert detector.unserved("Te acabo de enviar un correo electrónico.")[0] == "es"
