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


def test_a_tab_splits_and_is_kept_as_written():
    """Columns of plain text: each cell translated on its own, the tabs between them kept (sent
    within a sentence, a tab came back as a space)."""
    text = "Name:\tJohn Smith\nPrice: \t 5 euros. It is cheap."
    prefix, pairs = split_text(text)
    assert pairs == [
        ("Name:", "\t"),
        ("John Smith", "\n"),
        ("Price:", " \t "),
        ("5 euros.", " "),
        ("It is cheap.", ""),
    ]
    assert rejoin(prefix, pairs) == text


def count_words(text):
    return len(text.split())


def test_split_long_keeps_every_word_and_respects_the_limit():
    sentence = " ".join(f"w{i}" for i in range(25))
    pieces = split_long(sentence, count_words, 10)
    assert " ".join(pieces) == sentence
    assert all(count_words(p) <= 10 for p in pieces)
    assert split_long("short one", count_words, 10) == ["short one"]


def test_split_long_cuts_at_a_clause_break_where_there_is_one():
    """A piece ends after the last comma (semicolon, colon, dash) in its second half, not in
    the middle of a phrase where the limit falls; without one, at the limit."""
    sentence = "a b c d e f, g h i j k l m n o p q r s t"
    assert split_long(sentence, count_words, 10) == [
        "a b c d e f,",
        "g h i j k l m n o p",
        "q r s t",
    ]
    early = "a, b c d e f g h i j k l"  # the only comma in the first half: not used
    assert split_long(early, count_words, 10) == ["a, b c d e f g h i j", "k l"]


def test_split_long_cuts_a_single_overlong_word():
    word = "x" * 50
    pieces = split_long(word, len, 8)
    assert "".join(pieces) == word and all(len(p) <= 8 for p in pieces)


def test_split_long_respects_a_counter_that_also_counts_spaces():
    sentence = " ".join(f"word{i}" for i in range(40))
    pieces = split_long(sentence, len, 20)  # len("a b") > len("a") + len("b")
    assert " ".join(pieces) == sentence and all(len(p) <= 20 for p in pieces)


@pytest.mark.parametrize(
    "text",
    [("word " * 4000).strip(), "x" * 20_000, " ".join(["y" * 300] * 60)],
    ids=["many words", "one long word", "long words"],
)
def test_splitting_reads_each_character_a_bounded_number_of_times(text):
    # split_text and split_long run on the event loop: a 20,000-character request must not
    # cost them time that grows with its square (it once took ~1 s, blocking every request)
    seen = []

    def count(piece: str) -> int:
        seen.append(len(piece))
        return len(piece) // 4 + 1  # about 4 characters per token

    _, sentences = split_text(text)
    pieces = [p for s, _ in sentences for p in split_long(s, count, 50)]
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")
    assert all(count(p) <= 50 for p in pieces)
    assert sum(seen) <= 4 * len(text)


@pytest.mark.parametrize(
    "text, language, sentences",
    [
        # a German quotation ends its sentence (the next was merged in, then lost)
        ("Er sagte: „Komm her.“ Dann ging er.", "de", ["Er sagte: „Komm her.“", "Dann ging er."]),
        ("»Hilfe!« Niemand kam.", "de", ["»Hilfe!«", "Niemand kam."]),
        # a German ordinal after an article or preposition is inside its sentence
        ("Der 2. Weltkrieg war schlimm.", "de", ["Der 2. Weltkrieg war schlimm."]),
        ("Ich wohne im 3. Stock. Es ist hoch.", "de", ["Ich wohne im 3. Stock.", "Es ist hoch."]),
        ("He is 5. She is 7.", "en", ["He is 5.", "She is 7."]),
        # but not after a preposition before a number ("bis 5": merged, the second was lost)
        ("Ich zähle bis 5. Dann komme ich.", "de", ["Ich zähle bis 5.", "Dann komme ich."]),
        # "etc." and "usw." close a list, and often a sentence (the next was merged and lost)
        (
            "She bought eggs, milk, etc. Then she went home.",
            "en",
            ["She bought eggs, milk, etc.", "Then she went home."],
        ),
        ("Er kam um 10 Uhr usw. Dann ging er.", "de", ["Er kam um 10 Uhr usw.", "Dann ging er."]),
        ("Apples, pears etc. are fruit.", "en", ["Apples, pears etc. are fruit."]),
        ("Er hat u.a. Berlin besucht.", "de", ["Er hat u.a. Berlin besucht."]),
        # an ellipsis before a word in lower case goes on, as "..." does
        ("I was… um… very tired.", "en", ["I was… um… very tired."]),
        ("Wait… Then go.", "en", ["Wait…", "Then go."]),
        # a closing quote set apart by a space, as French writes it, belongs to the sentence
        # before it (it began the next one: "» Puis il est parti.")
        (
            "Il a dit : « Viens ! » Puis il est parti.",
            "fr",
            ["Il a dit : « Viens ! »", "Puis il est parti."],
        ),
        ("« C'est fini. » Elle sourit.", "fr", ["« C'est fini. »", "Elle sourit."]),
        ("Quoi ? Rien du tout.", "fr", ["Quoi ?", "Rien du tout."]),
        ("Il part. « Viens ! »", "fr", ["Il part.", "« Viens ! »"]),
        # every kind of line break breaks (\r alone merged the lines)
        ("Good morning\rHow are you", "", ["Good morning", "How are you"]),
        ("One\u2028Two\x85Three", "", ["One", "Two", "Three"]),
    ],
)
def test_quotes_ordinals_ellipses_and_line_breaks(text, language, sentences):
    prefix, pairs = split_text(text, language)
    assert rejoin(prefix, pairs) == text
    assert [s for s, _ in pairs] == sentences


def test_list_markers_are_kept_as_written_not_translated():
    """A list item's marker at the start of a line goes with the separator (as written):
    "1." was a sentence of its own, and "- apples" was sent to the model with its dash."""
    text = "1. Buy bread.\n2. Go home.\n  - apples\n  * milk\n• Call mom.\na) first\n(iv) last"
    prefix, pairs = split_text(text)
    assert rejoin(prefix, pairs) == text
    assert prefix == "1. "
    assert pairs == [
        ("Buy bread.", "\n2. "),
        ("Go home.", "\n  - "),
        ("apples", "\n  * "),
        ("milk", "\n• "),
        ("Call mom.", "\na) "),
        ("first", "\n(iv) "),
        ("last", ""),
    ]
    # a marker with nothing after it keeps its line break; a day before a month is no marker
    prefix, pairs = split_text("Shopping:\n- \n\nWe need bread.\n3. Mai ist schön.")
    assert pairs == [
        ("Shopping:", "\n"),
        ("-", " \n\n"),
        ("We need bread.", "\n"),
        ("3. Mai ist schön.", ""),
    ]
    # not markers: a negative number, a decimal, a dash inside a line
    _, pairs = split_text("-5 degrees today.\n1.5 million people. A - B.")
    assert [s for s, _ in pairs] == ["-5 degrees today.", "1.5 million people.", "A - B."]


def test_a_txt_file_takes_the_list_markers_split_text_takes():
    """A .txt line that starts a list item starts a paragraph of its own, with the markers
    split_text keeps as written: "a) " went on the paragraph before it (a lowercase start),
    and "3. Mai" (a date after a wrapped line) was taken for an item and cut the sentence."""
    from app.formats import Limits
    from app.formats.plain import translate_txt

    sent: list[str] = []

    def record(texts: list[str]) -> list[str]:
        sent.extend(texts)
        return texts

    src = (
        "Bring these from the shop on the corner, please:\na) bread and butter\nb) milk\n\n"
        "Das Fest findet in diesem Jahr in Berlin statt, und zwar am\n3. Mai um acht Uhr.\n"
        "(iv) The last item\n- and a dash\n"
    )
    assert translate_txt(src.encode(), record, Limits()) == src.encode()
    assert sent == [
        "Bring these from the shop on the corner, please:",
        "a) bread and butter",
        "b) milk",
        "Das Fest findet in diesem Jahr in Berlin statt, und zwar am 3. Mai um acht Uhr.",
        "(iv) The last item",
        "- and a dash",
    ]
    for text in sent[1:3] + sent[4:]:  # and the service keeps each marker as written
        assert split_text(text)[0] in ("a) ", "b) ", "(iv) ", "- ")
