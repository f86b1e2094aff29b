"""Sentences in capitals or in Title Case: recased by the source vocabulary before the model
sees them (model_core/truecase.py), the translation of one in capitals given back in
capitals; through the service with the shipped models."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from model_core.tokenizer import Tokenizer
from model_core.truecase import Truecaser, kind, upper
from tests.service_helpers import serve_in_thread

WEIGHTS = Path(__file__).resolve().parent.parent / "weights"


@pytest.fixture(scope="module")
def english() -> Truecaser:
    return Truecaser(Tokenizer(WEIGHTS / "en-de" / "spm.model").sp)


@pytest.mark.parametrize(
    ("text", "told"),
    [
        ("THE OLD HOUSE", "capitals"),
        ("WARNING: DO NOT ENTER!", "capitals"),
        ("<g1>DAS ALTE HAUS</g1> IST SCHÖN", "capitals"),  # (placeholders aside)
        ("The Old House", "title"),
        ("A Letter from My Father", "title"),
        ("How to Cook Rice", "title"),
        ("Results for the Year", "title"),  # minor words, however many
        ("The old house", None),
        ("How do I get to Park Street?", None),  # names in a sentence
        ("Excuse me. Who are you?", None),
        ("I love Tom and Mary.", None),
        ("I met Tom and Mary in New York", None),  # "met": no minor word
        ("Welcome to New York City!", None),  # a heading has no final "!" or "."
        ("VISIT Tom NOW", "capitals"),  # a name standing in for markup is no word of it
        ("USA", "capitals"),
        ("I", None),  # one letter says nothing
        ("1984", None),
    ],
)
def test_a_sentence_whose_casing_says_nothing_is_told(text, told):
    assert kind(text, names=("Tom", "Boston", "Paris")) == told


@pytest.mark.parametrize(
    ("text", "sent", "loud"),
    [
        ("THE OLD HOUSE", "The old house", True),
        ("I SAW TOM IN BOSTON.", "I saw Tom in Boston.", True),
        ("The History Of Germany", "The history of Germany", False),
        ("<g1>WARNING</g1>: DO NOT ENTER", "<g1>Warning</g1>: do not enter", True),
        # one word the vocabulary writes in capitals, or spells: an acronym, its translation
        # not in capitals ("VEREINIGTEN STAATEN"), unlike one word of text
        ("USA", "USA", False),
        ("FAQ", "FAQ", False),
        ("OK!", "OK!", False),
        ("STOP", "Stop", True),
        ("WARNING!", "Warning!", True),
        ("THE FAQ PAGE", "The FAQ page", True),  # an acronym no piece holds: as written
        ("WARNING", "Warning", True),  # a word the vocabulary cuts in pieces
        ("I SAW TOM'S CAR IN THE U.S.A.", "I saw Tom's car in the U.S.A.", True),
        ("WORLD WAR II", "World war II", True),
        ("I love Tom.", "I love Tom.", False),  # as it is
    ],
)
def test_each_word_is_cased_as_the_vocabulary_writes_it_most_often(english, text, sent, loud):
    assert english.recase(text) == (sent, loud)


def test_german_nouns_keep_their_capital_and_no_title_case_is_told():
    """German capitalises its nouns: "Der Bus in Richtung Norden" looks like Title Case ("Bus"
    became "bus", the English word being more frequent in the shared vocabulary)."""
    from model_core.translator import Translator

    german = Translator.load(WEIGHTS / "de-en", device="cpu").truecaser
    assert german.recase("DAS ALTE HAUS IST SCHÖN") == ("Das alte Haus ist schön", True)
    sentence = "Der Bus in Richtung Norden"
    assert german.recase(sentence) == (sentence, False)
    assert Truecaser(Tokenizer(WEIGHTS / "de-en" / "spm.model").sp).recase(sentence)[0] != (
        sentence
    )


def test_upper_leaves_placeholders_and_the_names_standing_in_as_they_are():
    assert upper("<g1>Straße</g1> und <x2/> hier") == "<g1>STRASSE</g1> UND <x2/> HIER"
    assert upper("Besuchen Sie Tom jetzt", keep={"Tom"}) == "BESUCHEN SIE Tom JETZT"


@pytest.mark.parametrize("recase", [True, False])
def test_the_service_translates_a_heading_in_capitals_into_capitals(recase):
    """ "THE OLD HOUSE" gave quotation marks and letters; recased, it is "DAS ALTE HAUS".
    MT_RECASE=false sends every sentence as it is written."""
    with serve_in_thread(WEIGHTS, warmup=False, recase=recase) as (url, _):
        q = ["THE OLD HOUSE", "The Old House", "The old house", "I love you."]
        q.append("VISIT https://example.com TODAY.")  # a name stands in for the address
        body = {"q": q, "source": "en", "target": "de"}
        out = httpx.post(f"{url}/translate", json=body, timeout=60).json()["translatedText"]
    if recase:
        assert out[:3] == ["DAS ALTE HAUS", "Das alte Haus", "Das alte Haus"]
        # the address where it was, the words around it in capitals
        assert "https://example.com" in out[4] and out[4] == out[4].upper().replace(
            "HTTPS://EXAMPLE.COM", "https://example.com"
        ), out[4]
    else:
        assert out[2] == "Das alte Haus" and out[0] != "DAS ALTE HAUS"
    assert out[3] == "Ich liebe dich."


def test_mt_evaluate_recases_as_the_service_does(tmp_path):
    from model_core import evaluate

    src, out = tmp_path / "src.en", tmp_path / "out.de"
    src.write_text("THE OLD HOUSE\nThe old house\n", encoding="utf-8")
    args = [str(WEIGHTS / "en-de"), "--src", str(src), "--output", str(out)]
    assert evaluate.main([*args, "--recase"]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == ["DAS ALTE HAUS", "Das alte Haus"]
    assert evaluate.main(args) == 0
    assert out.read_text(encoding="utf-8").splitlines()[0] != "DAS ALTE HAUS"


@pytest.mark.parametrize("normalize", [True, False])
def test_typographic_quotation_marks_are_read_as_straight_ones(normalize):
    """The English side of the shipped models' corpus has straight quotation marks only: "“Come
    home,” she said." gave "ER PRACHT, hat sie gesagt." (a pandoc book writes them so)."""
    with serve_in_thread(WEIGHTS, warmup=False, normalize_quotes=normalize) as (url, _):
        q = ["\u201cCome home,\u201d she said.", '"Come home," she said.']
        body = {"q": q, "source": "en", "target": "de"}
        out = httpx.post(f"{url}/translate", json=body, timeout=60).json()["translatedText"]
    assert (out[0] == out[1]) is normalize, out
