"""Sentence splitting keeps every character and the layout; long sentences split, never cut."""

import pytest

from app.text import split_long, split_text


def rejoin(prefix, pairs):
    return prefix + "".join(s + sep for s, sep in pairs)


@pytest.mark.parametrize(
    "text",
    [
        "Hello.",
        "  Hello there. How are you?  ",
        "First paragraph. Second sentence!\n\nSecond paragraph.\nA new line…\n",
        'Dr. Smith arrived. He said "Hi." Then he left.',
        "no punctuation at all",
        "\n\n  \n",
        "",
        "Wie geht's? Gut, danke! Und dir?\r\n\r\nZ.B. heute.",
    ],
)
def test_split_then_join_is_the_identity(text):
    prefix, pairs = split_text(text)
    assert rejoin(prefix, pairs) == text
    assert all(s.strip() == s and s for s, _ in pairs)


def test_sentences_and_separators():
    prefix, pairs = split_text("  Tom is here. Mary is not!\n\nWe are late?\n")
    assert prefix == "  "
    assert pairs == [("Tom is here.", " "), ("Mary is not!", "\n\n"), ("We are late?", "\n")]


def test_abbreviations_and_quotes():
    _, pairs = split_text('Dr. Smith said "Go." Then Mr. Jones left.')
    assert [s for s, _ in pairs] == ['Dr. Smith said "Go."', "Then Mr. Jones left."]


@pytest.mark.parametrize(
    "text, sentences",
    [
        ("J. R. R. Tolkien wrote it. We read it.", ["J. R. R. Tolkien wrote it.", "We read it."]),
        ("He saw the U.S. Capitol.", ["He saw the U.S. Capitol."]),
        ("See p. 5 for more. Thanks.", ["See p. 5 for more.", "Thanks."]),
        ("Apples, pears etc. and more. Good.", ["Apples, pears etc. and more.", "Good."]),
        ("Er kam am 3. Mai. Sie nicht.", ["Er kam am 3. Mai.", "Sie nicht."]),
        ("Im 19. Jahrhundert war es so.", ["Im 19. Jahrhundert war es so."]),
        # still sentence ends: a number or a word before a capital that is no month
        ("I was born in 1990. Then I moved.", ["I was born in 1990.", "Then I moved."]),
        ("He is 5. She is 7.", ["He is 5.", "She is 7."]),
        ("Wait! what?", ["Wait!", "what?"]),  # only a period waits for the next word
    ],
)
def test_a_period_inside_a_sentence_does_not_split_it(text, sentences):
    prefix, pairs = split_text(text)
    assert [s for s, _ in pairs] == sentences
    assert rejoin(prefix, pairs) == text


def test_every_line_break_splits():
    _, pairs = split_text("a line without a stop\nanother one")
    assert [s for s, _ in pairs] == ["a line without a stop", "another one"]


def count_words(text):
    return len(text.split())


def test_split_long_keeps_every_word_and_respects_the_limit():
    sentence = " ".join(f"w{i}" for i in range(25))
    pieces = split_long(sentence, count_words, 10)
    assert " ".join(pieces) == sentence
    assert all(count_words(p) <= 10 for p in pieces)
    assert split_long("short one", count_words, 10) == ["short one"]


def test_split_long_cuts_a_single_overlong_word():
    word = "x" * 50
    pieces = split_long(word, len, 8)
    assert "".join(pieces) == word and all(len(p) <= 8 for p in pieces)
