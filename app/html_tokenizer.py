"""The tokenizer of HTML documents: the standard library's html.parser, which never fails on
broken markup, made to read as a browser reads, recording each token's place in the text.

A `<` is the start of a tag only when a letter, `/`, `!` or `?` follows it (as html.parser and
browsers read it): `<3` and `< 5` are text. Where no `>` follows the rest of the input holds no
tag, and is given as text at once (html.parser took time quadratic in its length); what is
markup in it is told apart in app/html_format.py.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

#: where html.parser looks for a token after text (its `interesting`): only at "<", so that
#: character references stay in the text
_TAG_START = re.compile("<")


class HtmlError(ValueError):
    """The document could not be read at all (never for merely broken markup)."""


class _RawTextEnd:
    """Where the content of a <script> or <style> ends, as a browser finds it, for html.parser
    (its `interesting` pattern): at "</script" followed by whitespace, "/" or ">", but in a
    script not between a "<script" and the next "-->" after a "<!--" (HTML's "script data
    double escaped" state: `<!-- document.write("<script>...</script>"); -->` is all script).
    html.parser ended a script at the first "</script>" in it, and the rest of the script
    was translated as text."""

    _TOKENS = re.compile(r"<!--|-->|</?script(?=[\s/>])", re.IGNORECASE)

    def __init__(self, elem: str):
        self._end = re.compile(rf"</{elem}(?=[\s/>])", re.IGNORECASE)
        self._script = elem == "script"
        # how far the content has been read, and the state there (html.parser searches again
        # from further on after an end tag it cannot read yet, a "</script" without ">")
        self._at: int | None = None
        self._escaped = self._double = False

    def search(self, rawdata: str, i: int) -> re.Match[str] | None:
        if not self._script:
            return self._end.search(rawdata, i)
        at = i if self._at is None else self._at
        escaped, double = self._escaped, self._double
        while m := self._TOKENS.search(rawdata, at):
            token, at = m.group().lower(), m.end()
            if token == "<!--":
                escaped = escaped or not double
                at = m.start() + 2  # "<!-->" opens and closes
            elif token == "-->":
                escaped = double = False
            elif token == "<script":
                double = double or escaped
            elif double:  # "</script" in the double escaped state ends that state
                double = False
            elif m.start() >= i:
                self._at, self._escaped, self._double = m.start(), escaped, double
                return m
        self._at, self._escaped, self._double = at, escaped, double
        return None


class Tokenizer(HTMLParser):
    """Records (kind, name, attrs, start offset) for every token. Character references are
    left in the text (HtmlDocument reads them): html.parser took `&T` in `AT&T` for a
    reference, dropped a `&` at the very end, and after a `&#` that starts none (`&# `) it gave
    the rest of the document, tags and all, as text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=False)
        starts, at = [0], 0
        while (at := text.find("\n", at) + 1) > 0:
            starts.append(at)
        self._line_starts = starts
        self.events: list[tuple[str, str, list, int]] = []
        self._last_gt: int | None = None  # set by close()

    def _add(self, kind: str, name: str = "", attrs: list | None = None) -> None:
        line, col = self.getpos()
        self.events.append((kind, name, attrs or [], self._line_starts[line - 1] + col))

    def handle_starttag(self, tag, attrs):
        self._add("start", tag, attrs)

    def handle_startendtag(self, tag, attrs):
        self._add("startend", tag, attrs)

    def handle_endtag(self, tag):
        self._add("end", tag)

    def handle_data(self, data):
        self._add("data", data)

    def handle_comment(self, data):
        self._add("comment")

    def handle_decl(self, decl):
        self._add("other")

    def handle_pi(self, data):
        self._add("other")

    def unknown_decl(self, data):
        self._add("other")

    def reset(self):
        super().reset()
        self.interesting = _TAG_START

    #: as html.parser reads them on every Python version: newer releases (gh-118350,
    #: gh-137836) also read <title> and <textarea> as escapable raw text and <xmp>, <iframe>,
    #: <noembed>, <noframes> and <plaintext> as raw text, calling set_cdata_mode with an
    #: `escapable` this tokenizer did not take (a TypeError: every page with a <title> was
    #: refused); HtmlDocument gives those elements' content its own reading
    #: (app/html_elements.py: _NO_IMPLIED_ENDS, SKIPPED)
    # Final in typeshed's html.parser, but a class attribute the parser reads through self
    CDATA_CONTENT_ELEMENTS = ("script", "style")  # type: ignore[misc]
    RCDATA_CONTENT_ELEMENTS = ()  # type: ignore[misc]

    def set_cdata_mode(self, elem, **_):
        if elem.lower() not in self.CDATA_CONTENT_ELEMENTS:
            return
        super().set_cdata_mode(elem)
        self.interesting = _RawTextEnd(self.cdata_elem)

    def clear_cdata_mode(self):
        super().clear_cdata_mode()
        self.interesting = _TAG_START

    def close(self):
        # (what feed could not read: it stops at the first tag it cannot complete)
        self._last_gt = self.rawdata.rfind(">")
        super().close()

    def _rest_as_text(self, i: int) -> int | None:
        """In close(): when no ">" follows `i`, no tag, comment or declaration can end after
        it, and html.parser would give the rest as text, a piece after each "<", searching
        the whole rest again for each one: time quadratic in the rest's size ("<a " repeated:
        24 kB took 8 s, a 2 MB .html file hours). The rest is given at once."""
        if self._last_gt is None or i <= self._last_gt:
            return None
        self.handle_data(self.rawdata[i:])
        return len(self.rawdata)

    def parse_starttag(self, i):
        return self._rest_as_text(i) or super().parse_starttag(i)

    def parse_comment(self, i, report=1):
        return self._rest_as_text(i) or super().parse_comment(i, report)

    def parse_pi(self, i):
        return self._rest_as_text(i) or super().parse_pi(i)

    def parse_html_declaration(self, i):
        return self._rest_as_text(i) or super().parse_html_declaration(i)

    def parse_endtag(self, i):
        if (rest := self._rest_as_text(i)) is not None:
            return rest
        # the end of a <script> or <style> as a browser reads it ("</script >", "</style/>",
        # "</script foo>"): html.parser took only "</script>" and "</script >"
        if self.cdata_elem is not None and re.match(
            rf"</{self.cdata_elem}[\s/>]", self.rawdata[i : i + len(self.cdata_elem) + 3], re.I
        ):
            end = self.rawdata.find(">", i)
            if end < 0:
                return -1
            self.handle_endtag(self.cdata_elem)
            self.clear_cdata_mode()
            return end + 1
        return super().parse_endtag(i)

    def parse_marked_section(self, i, report=1):
        at = self.getpos()
        try:
            return super().parse_marked_section(i, report)
        except AssertionError:
            self.lineno, self.offset = at  # moved to where the name was expected
            # a "<![" that opens no marked section html.parser knows ("<![0]", "<![ if ...]>"),
            # which made it raise (the document was refused with 400): a bogus comment up to
            # the next ">", as a browser reads any "<![" in HTML content
            end = self.rawdata.find(">", i + 3)
            if end < 0:
                return -1  # the rest of the input: text, as for any markup cut off
            self._add("other")
            return end + 1


#: a token: (kind: "start", "startend", "end", "data", "comment" or "other"; the tag's name;
#: its attributes; where it starts in the text)
Event = tuple[str, str, list, int]


def tokenize(text: str) -> tuple[list[Event], list[int]]:
    """The tokens of `text`, and where each one starts followed by the text's length (the
    source of each token is text[offsets[i] : offsets[i + 1]])."""
    try:
        tokenizer = Tokenizer(text)
        tokenizer.feed(text)
        tokenizer.close()
    except Exception as exc:  # noqa: BLE001 (html.parser raises little, but anything here is "cannot read")
        raise HtmlError(f"the HTML could not be read ({type(exc).__name__}: {exc})") from None
    events = tokenizer.events
    if events and events[0][3] != 0:
        # should html.parser report nothing for the start of the input, it is kept as it is
        events.insert(0, ("data", "", [], 0))
    offsets = [e[3] for e in events] + [len(text)]
    if offsets != sorted(offsets):
        raise HtmlError("the HTML could not be read (tokenizer positions out of order)")
    return events, offsets
