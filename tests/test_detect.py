"""Language detection (app/detect.py) with py3langid's shipped model: how a tie is broken."""

from __future__ import annotations

import pytest

from app.detect import Detector

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
