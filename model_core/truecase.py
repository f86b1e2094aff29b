"""Casing for a sentence whose casing says nothing about its words: one in capitals ("WARNING:
DO NOT ENTER") or in Title Case ("The Old House").

Corpora of sentences have few of either, and a model trained on them translates such a
sentence badly: the shipped en-de model of the third training run gave "Der Alte Hosus" for
"The Old House" (and "Das alte Haus" for "The old house"), and quotation marks and letters
for "THE OLD HOUSE"; the fourth run's, trained on such sentences for an hour, still scores 1.75
BLEU on the sentences of tatoeba/dev in capitals as written, and 42.17 recased so
(weights/README.md). Each word of such a sentence is sent as the source tokenizer's vocabulary
writes it most often: among the word as written, in lower case and capitalised, the one that
is a whole-word piece of the sentencepiece model with the highest score (its log-probability in
the unigram model: how often the word was seen so). A word in capitals none of whose forms is a
piece goes in lower case (a word the vocabulary cuts in two or three, "warning"), but where it
has a digit ("MP3") or three letters or more that the vocabulary spells a piece a letter in
lower case too (an acronym, "FAQ"): kept as written, as is a Roman numeral ("II"); a word
with an apostrophe is recased before it ("TOM'S": "Tom's"). The first word is capitalised.
"THE OLD HOUSE" is sent as "The old house", "DAS ALTE HAUS" as "Das alte Haus" (German writes
"Haus" capitalised more often), "I SAW TOM" as "I saw Tom", "The History of Germany" as "The
history of Germany".

A sentence is in Title Case where, after its first word, each word is capitalised or one of the
minor words English titles keep in lower case ("of", "the", "and": `MINOR_WORDS`), one at least
is capitalised, and it does not end with `.` or `!` (a heading does not;
"Welcome to New York City!" is a sentence with names). German capitalises its nouns, so that many
of its sentences look so: only its sentences in capitals are recased (`NOUN_CAPITALS`).

Placeholders (`<g1>`, `</g1>`, `<x2/>`: app/formats/inline.py) are left as they are, and so are
the names that stand in for markup in a text sent (`names`: "Tom" in "VISIT Tom NOW" is no word
of the sentence, neither for telling its case nor in its translation, where `upper` keeps it so
that it is found). The translation of a sentence in capitals is given back in capitals.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

#: the languages that capitalise their nouns (ISO 639-1): no Title Case is told in them
NOUN_CAPITALS = frozenset({"de", "lb"})
#: the words English titles keep in lower case inside a title (articles, conjunctions and
#: short prepositions, as most style guides have it)
MINOR_WORDS = frozenset(
    ["a", "an", "the", "and", "but", "or", "nor", "for", "so", "yet", "as", "at", "by", "in"]
    + ["of", "off", "on", "per", "to", "up", "via", "with", "from", "into"]
)
#: a placeholder of app/formats/inline.py, never recased
_PLACEHOLDER = re.compile(r"</?[gx]\d+/?>")
#: a word: letters, with the apostrophes and hyphens inside it
_WORD = re.compile(r"[^\W\d_](?:[\w'\u2019-]*\w)?")
_ROMAN = re.compile(r"[IVXLCDM]{2,}")


def _text_parts(text: str) -> list[tuple[bool, str]]:
    """(is text, part) of `text`, its placeholders apart."""
    out, at = [], 0
    for m in _PLACEHOLDER.finditer(text):
        if m.start() > at:
            out.append((True, text[at : m.start()]))
        out.append((False, m.group()))
        at = m.end()
    if at < len(text):
        out.append((True, text[at:]))
    return out


def upper(text: str, keep: Collection[str] = ()) -> str:
    """`text` in capitals, but for its placeholders and the words in `keep`."""

    def word(m: re.Match[str]) -> str:
        return m.group() if m.group() in keep else m.group().upper()

    return "".join(_WORD.sub(word, part) if t else part for t, part in _text_parts(text))


def _cased(word: str) -> bool:
    return any(c.isupper() or c.islower() for c in word)


def kind(text: str, names: Collection[str] = ()) -> str | None:
    """ "capitals" for a sentence in capitals (two cased letters or more, none in lower case),
    "title" for one in Title Case (see the module docstring), else None; `names`: words that
    stand in for markup, not counted."""
    words = [
        w
        for is_text, part in _text_parts(text)
        if is_text
        for w in _WORD.findall(part)
        if w not in names
    ]
    cased = [c for w in words for c in w if c.isupper() or c.islower()]
    if len(cased) >= 2 and not any(c.islower() for c in cased):
        return "capitals"
    rest = [w for w in words[1:] if len(w) > 1 and _cased(w)]
    if not rest or text.rstrip()[-1:] in (".", "!"):
        return None
    if any(not w[0].isupper() and w.lower() not in MINOR_WORDS for w in rest):
        return None
    return "title" if any(w[0].isupper() for w in rest) else None


class Truecaser:
    """Recases sentences in capitals or in Title Case by a sentencepiece model's pieces."""

    def __init__(self, sp: Any, title: bool = True):
        """`sp`: a sentencepiece.SentencePieceProcessor; `title`: whether Title Case is
        recased (not for a language that capitalises its nouns)."""
        self.sp, self.title = sp, title
        self.scores: dict[str, float] = {}
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if piece.startswith("\u2581") and len(piece) > 1:
                self.scores[piece[1:]] = sp.get_score(i)

    def kind(self, text: str, names: Collection[str] = ()) -> str | None:
        """`kind`, but None for Title Case where it is not recased."""
        found = kind(text, names)
        return None if found == "title" and not self.title else found

    def _best(self, word: str, capitals: bool) -> str:
        split = re.split(r"(['\u2019])", word, maxsplit=1)
        if len(split) == 3 and split[0]:  # "TOM'S": "Tom" and "'s"
            base, apostrophe, rest = split
            return self._best(base, capitals) + apostrophe + (rest.lower() if capitals else rest)
        forms = [word, word.lower(), word[:1].upper() + word[1:].lower()]
        scored = [(self.scores[f], -n, f) for n, f in enumerate(forms) if f in self.scores]
        if scored:
            return max(scored)[2]
        if not capitals or _ROMAN.fullmatch(word):
            return word
        # (an acronym, "FAQ", the vocabulary spells a letter a piece in lower case too; a word
        # with a digit, "MP3", is a name)
        spelled = len(self.sp.encode(word.lower(), out_type=str)) >= len(word) >= 3
        return word if spelled or any(c.isdigit() for c in word) else word.lower()

    def recase(self, text: str, names: Collection[str] = ()) -> tuple[str, bool]:
        """`text` to send, and whether its translation goes back in capitals (`upper`, with
        `names` kept); `text` itself where its casing says something of its words."""
        found = self.kind(text, names)
        if found is None:
            return text, False
        capitals = found == "capitals"
        first = [True]

        def word(m: re.Match[str]) -> str:
            if m.group() in names or (
                len(m.group()) == 1 and m.string[m.end() : m.end() + 1] == "."
            ):
                return m.group()  # (a name standing in for markup; an initial, "U.S.A.")
            out = self._best(m.group(), capitals)
            if first:
                first.clear()
                out = out[:1].upper() + out[1:]
            return out

        out = "".join(
            _WORD.sub(word, part) if is_text else part for is_text, part in _text_parts(text)
        )
        words = [w for is_text, part in _text_parts(text) if is_text for w in _WORD.findall(part)]
        words = [w for w in words if w not in names]
        if capitals and len(words) == 1 and self._best(words[0], True) == words[0]:
            # one word the vocabulary writes in capitals, or spells letter by letter: an
            # acronym ("OK", "USA", "FAQ"), no text in capitals ("USA" gave "VEREINIGTEN
            # STAATEN")
            return text, False
        return out, capitals

    def _known(self, word: str) -> bool:
        """Whether `word` is a common word: a whole-word piece of the vocabulary as written or in
        lower case, or so without a plural's "s" ("Italians"), a people's adjective of a place
        that is one ("Korean"), or one of `_COMMON_CAPITALS` (a month, "Asian")."""
        forms = (word, word.lower())
        if any(f in self.scores for f in forms) or word in _COMMON_CAPITALS:
            return True
        if word.endswith("s") and (
            word[:-1] in _COMMON_CAPITALS or any(f[:-1] in self.scores for f in forms)
        ):
            return True
        # a people's adjective of a place the vocabulary knows ("Korean": "Korea")
        return word.endswith("n") and len(word) > 4 and word[:-1] in self.scores

    def names(self, text: str, known: Collection[str] = ()) -> list[tuple[int, int]]:
        """(start, end) of each name in `text` the vocabulary does not know: a run of
        capitalised words (or acronyms) none of which the vocabulary knows (`_known`), side by
        side with single spaces (a possessive's "'s" after it not part of it), with the
        vocabulary's capitalised words beside them ("Greenfield Bank", "Mount Fuji"). None: a run of
        one word at the start of the sentence (where any word is capitalised) but before another
        name's ("Jane Doe"; not "If Apple"), one word before a title ("Prime Minister"), a
        month, a day or an article beside a name ("On Monday Priya": "Priya"), a title itself ("Grandpa", "Mrs."; "Professor Hoffmann",
        "Mr Smith": "Hoffmann", "Smith"), a
        word joined to digits ("MP3", "COVID-19"), a word of `known` (the names standing in
        for markup), placeholders; and any in a language that capitalises its nouns (`title`
        False). "Jane Doe wrote it." gives "Jane Doe", "Consequently, ..." nothing."""
        if not self.title:
            return []
        words: list[tuple[int, int, str]] = []  # each word: (start, end, what it is)
        at = 0
        for is_text, part in _text_parts(text):
            for m in _NAME_WORD.finditer(part) if is_text else ():
                word, start, end = m.group(), at + m.start(), at + m.end()
                if _CLITIC.search(word):  # "Priya's", "I'm": the word before the apostrophe
                    word = _CLITIC.sub("", word)
                    end = start + len(word)
                if not word[0].isupper() or len(word) < 2 or word in known:
                    kind_ = "word"
                elif word.lower() in _ROLE_WORDS:  # (no title: "Microsoft CEO")
                    kind_ = "role"
                elif word in _TITLES or word.lower() in _TITLE_WORDS:
                    kind_ = "title"
                elif text[start - 1 : start].isdigit() or re.match(r"-?\d", text[end : end + 2]):
                    kind_ = "word"  # (joined to digits: a model's or product's name)
                elif self._known(word):
                    # a word of the vocabulary, capitalised: one of a name beside it, but a
                    # month, a day, a people's adjective, an article ("On Monday Priya ...")
                    common = word in _COMMON_CAPITALS or word.lower() in _NEVER_IN_NAMES
                    kind_ = "word" if common else "capital"
                else:
                    kind_ = "name"
                words.append((start, end, kind_))
            at += len(part)
            words.append((at, at, "word"))  # (a placeholder breaks a run)
        spans = []
        k = 0
        while k < len(words):
            if words[k][2] != "name":
                k += 1
                continue
            first = k
            # the run, with the vocabulary's capitalised words beside its names ("Greenfield
            # Bank", "Mount Fuji"), but one that begins the sentence
            while k + 1 < len(words) and words[k + 1][2] in ("name", "capital"):
                if text[words[k][1] : words[k + 1][0]] != " ":
                    break
                k += 1
            while (
                first
                and words[first - 1][2] == "capital"
                and text[words[first - 1][1] : words[first][0]] == " "
                and not _sentence_start(text, words[first - 1][0])
            ):
                first -= 1
            # a word at the sentence's start, where any word is capitalised, is a name's only
            # before another ("Jane Doe"; not "If Apple", "Click Save")
            if _sentence_start(text, words[first][0]) and not (
                first < k and words[first + 1][2] == "name"
            ):
                first += 1
            names = [w for w in words[first : k + 1] if w[2] == "name"]
            start, end = words[first][0] if first <= k else 0, words[k][1]
            after = words[k + 1] if k + 1 < len(words) else None
            # one word before a title's ("Prime Minister"): the title's
            titled = (
                len(names) == 1
                and first == k
                and after is not None
                and after[2] == "title"
                and text[after[0] : after[1]].lower() in _TITLE_WORDS
                and text[end : after[0]] == " "
            )
            if names and not titled:
                spans.append((start, end))
            k += 1
        return spans


#: an English clitic or possessive after a word ("'s", "'m", "'ll", "'d", "'ve", "'re", "'t")
_CLITIC = re.compile(r"['\u2019](?:s|m|ll|d|ve|re|t)$", re.IGNORECASE)
#: capitalised words of English that are no names: the months and the days, and adjectives of
#: peoples, languages and religions ("an Asian man", "Two Indian men"; the shipped vocabulary
#: has few as pieces); a word of a place's name with "n" after it is one too (`_known`)
_COMMON_CAPITALS = frozenset(
    ["January", "February", "March", "April", "May", "June", "July", "August", "September"]
    + ["October", "November", "December", "Monday", "Tuesday", "Wednesday", "Thursday"]
    + ["Friday", "Saturday", "Sunday", "American", "African", "Asian", "European"]
    + ["Indian", "Chinese", "Japanese", "Korean", "Vietnamese", "Thai", "Filipino", "Indonesian"]
    + ["Australian", "Canadian", "Mexican", "Brazilian", "Argentine", "Argentinian", "Chilean"]
    + ["Colombian", "Peruvian", "Cuban", "British", "English", "Scottish", "Irish", "Welsh"]
    + ["French", "German", "Italian", "Spanish", "Portuguese", "Dutch", "Belgian", "Swiss"]
    + ["Austrian", "Swedish", "Norwegian", "Danish", "Finnish", "Icelandic", "Polish", "Czech"]
    + ["Slovak", "Hungarian", "Romanian", "Bulgarian", "Greek", "Turkish", "Russian", "Ukrainian"]
    + ["Serbian", "Croatian", "Arab", "Arabic", "Egyptian", "Moroccan", "Nigerian", "Kenyan"]
    + ["Ethiopian", "Israeli", "Iranian", "Persian", "Iraqi", "Afghan", "Pakistani", "Nepalese"]
    + ["Tibetan", "Mongolian", "Latin", "Hispanic", "Oriental", "Western", "Eastern", "Northern"]
    + ["Southern", "Mayan", "Aztec", "Roman", "Catholic", "Christian", "Muslim", "Jewish"]
    + ["Buddhist", "Hindu", "Islamic", "Olympic"]
)
#: a word a name may be: letters, with hyphens or apostrophes inside ("Jean-Luc", "O'Neill")
_NAME_WORD = re.compile(r"[^\W\d_]+(?:[-'\u2019][^\W\d_]+)*")
#: titles written before a name, abbreviated
_TITLES = frozenset(["Mr", "Mrs", "Ms", "Dr", "Prof", "St", "Jr", "Sr", "Mt", "Rev", "Gen", "Capt"])
#: capitalised words of the vocabulary that are no name's, beside one (in lower case)
_NEVER_IN_NAMES = (
    frozenset(
        ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
        + ["christmas", "easter", "this", "that", "these", "those", "my", "our", "your", "his"]
        + ["her", "its", "their", "we", "i", "you", "he", "she", "it", "they", "next", "last"]
        + ["every", "each", "some", "any", "no", "not", "if", "when", "while", "after", "before"]
        + ["please", "dear", "best", "thanks", "thank", "yes", "mr", "mrs", "ms", "dr"]
    )
    | MINOR_WORDS
)
#: words of English written before a name, or in its place, that are no names
_TITLE_WORDS = frozenset(
    ["mister", "miss", "madam", "sir", "lady", "lord", "professor", "doctor", "queen", "king"]
    + ["prince", "princess", "president", "chancellor", "senator", "governor", "mayor"]
    + ["minister", "judge", "captain", "saint", "pope", "uncle", "aunt", "grandpa", "grandma"]
    + ["granddad", "grandmother", "grandfather", "mom", "mum", "dad", "god", "bible", "dear"]
    + ["hi", "hello", "hey"]
)
#: words of English for a role in a company, no names and no part of one, but unlike a title
#: not taking the name before them ("Microsoft CEO Satya Nadella": "Microsoft", "Satya Nadella")
_ROLE_WORDS = frozenset(["ceo", "cfo", "cto", "coo", "chairman", "chairwoman", "director"])


def _sentence_start(text: str, at: int) -> bool:
    """Whether the word at `at` begins its sentence: nothing but quotes, brackets, dashes or
    a list's marks before it in `text`, or a sentence's end."""
    before = _PLACEHOLDER.sub("", text[:at]).rstrip()
    if not re.search(r"[^\W_]", before):
        return True
    title = re.search(r"(?<![^\W\d_])([^\W\d_]+)\.$", before)
    return before[-1] in ".!?:;\u2026" and not (title and title.group(1) in _TITLES)
