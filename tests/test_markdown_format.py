"""Markdown files: the structure markdown-it reads in the translation is the source's."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from app.formats import Limits, handler_for
from app.formats.markdown import translate_markdown
from app.html_lang import note_kept

LIMITS = Limits()
GFM = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def upper(texts: list[str]) -> list[str]:
    return [t.upper() for t in texts]


def drop_placeholders(texts: list[str]) -> list[str]:
    return [re.sub(r"</?[gx]\d+/?>", "", t).upper() for t in texts]


def translate(src: str, fn=upper) -> str:
    return translate_markdown(src.encode(), fn, LIMITS).decode()


def cells(markdown: str) -> list[list[str]]:
    """The text of each table row's cells, as markdown-it reads them."""
    rows, row = [], None
    for tok in GFM.parse(markdown):
        if tok.type == "tr_open":
            row = []
        elif tok.type == "tr_close":
            rows.append(row)
        elif tok.type == "inline" and row is not None:
            row.append(tok.content)
    return rows


def test_table_cells_with_escaped_pipes_are_translated_and_keep_their_columns():
    # a cell holding `\|` was left untranslated (its text was not found in its line), and a
    # pipe written back unescaped would have split the cell in two
    src = "| a | b |\n|---|---|\n| either \\| or | `x\\|y` and [c\\|d](http://e.f) |\n"
    for fn in (upper, drop_placeholders, lambda ts: ts):
        out = translate(src, fn)
        want = [["a", "b"], ["either | or", "`x|y` and [c|d](http://e.f)"]]
        if fn is not drop_placeholders and fn is not upper:
            assert cells(out) == want
        else:
            assert cells(out) == [["A", "B"], ["EITHER | OR", "`x|y` AND [C|D](http://e.f)"]]


def test_task_list_boxes_footnotes_and_alerts_stay_as_written():
    # each came back with its brackets escaped (`- \[ \] todo`, `\[^1\]`, `> \[!NOTE\] text`):
    # GitHub no longer saw a task list, a footnote or an alert, and the label was translated
    src = (
        "- [ ] write the tests\n- [x] fix the bug\n\n"
        "A claim[^1] and another[^note].\n\n"
        "[^1]: The source of the claim.\n"
        "[^note]: Another source.\n\n"
        "> [!NOTE]\n> Useful information for the reader.\n"
    )
    want = (
        "- [ ] WRITE THE TESTS\n- [x] FIX THE BUG\n\n"
        "A CLAIM[^1] AND ANOTHER[^note].\n\n"
        "[^1]: THE SOURCE OF THE CLAIM.\n"
        "[^note]: ANOTHER SOURCE.\n\n"
        "> [!NOTE]\n> USEFUL INFORMATION FOR THE READER.\n"
    )
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want
        assert translate(src.replace("\n", "\r\n"), fn) == want.replace("\n", "\r\n")


def test_brackets_elsewhere_are_still_escaped():
    src = "A [x] that is no task, and [^1] without a definition is kept.\n\nSee [y] here.\n"
    out = translate(src)
    assert (
        out
        == "A \\[X\\] THAT IS NO TASK, AND [^1] WITHOUT A DEFINITION IS KEPT.\n\nSEE \\[Y\\] HERE.\n"
    )


def test_a_headings_attributes_stay_as_written_at_its_end():
    # `{#custom-id}` (Pandoc, MkDocs, Hugo, kramdown) was translated with the heading: the
    # anchor every link to the section uses changed ({#CUSTOM-ID}, or its words translated)
    src = (
        "## Getting started {#getting-started}\n\n"
        "### Options { #options .wide }\n\n"
        "Setup {: #setup }\n=====\n\n"
        "#### A {b} in a heading\n"
    )
    want = (
        "## GETTING STARTED {#getting-started}\n\n"
        "### OPTIONS { #options .wide }\n\n"
        "SETUP {: #setup }\n=====\n\n"
        "#### A {b} IN A HEADING\n"  # (no attribute, but a template's placeholder)
    )
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want


def test_templates_math_emoji_and_attribute_lists_are_copied_as_written():
    # each was translated as words (`{{ USER.NAME }}`, `$E = MC^2$`, `:SMILE:`), and markdown-it
    # read emphasis and escapes inside (`{{ page_title }}` came back as `{{ PAGE\\_TITLE }}`)
    src = (
        "Hello {{ user.name }}, {% if admin %}welcome back{% endif %} {# note #} to {{< ref "
        '"a_b" >}}.\n\n'
        "The energy is $E = mc^2$ and $$\\sum_{i=1}^n x_i$$ in total :smile: :+1:\n\n"
        "It costs $5 and $10, at 10:30:15 sharp: see the [guide](g.md){ .md-button } now.\n"
    )
    want = (
        "HELLO {{ user.name }}, {% if admin %}WELCOME BACK{% endif %} {# note #} TO {{< ref "
        '"a_b" >}}.\n\n'
        "THE ENERGY IS $E = mc^2$ AND $$\\sum_{i=1}^n x_i$$ IN TOTAL :smile: :+1:\n\n"
        "IT COSTS $5 AND $10, AT 10:30:15 SHARP: SEE THE [GUIDE](g.md){ .md-button } NOW.\n"
    )
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want


def test_admonition_and_fenced_div_lines_stay_on_their_own_lines():
    # CommonMark reads each as a paragraph with the text after it: the lines were joined into
    # one (`!!! NOTE "READ THIS" THE BODY OF THE NOTE.`): MkDocs, Docusaurus, VitePress and
    # Pandoc no longer saw the block, and its type was translated
    src = (
        '!!! note "Read this"\n    The body of the note,\n    on two lines.\n\n'
        ":::tip\nDocusaurus text here.\n:::\n\n"
        "???+ info\n    Collapsible body.\n\n"
        "- item\n  ::: warning\n  Careful *now*.\n  :::\n"
    )
    want = (
        '!!! note "Read this"\n    THE BODY OF THE NOTE, ON TWO LINES.\n\n'
        ":::tip\nDOCUSAURUS TEXT HERE.\n:::\n\n"
        "???+ info\n    COLLAPSIBLE BODY.\n\n"
        "- ITEM\n  ::: warning\n  CAREFUL *NOW*.\n  :::\n"
    )
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want
        assert translate(src.replace("\n", "\r\n"), fn) == want.replace("\n", "\r\n")


def blocks(markdown: str) -> list[str]:
    """The types of markdown-it's block tokens."""
    return [tok.type for tok in GFM.parse(markdown)]


def test_text_that_would_start_a_block_at_the_start_of_a_line_is_escaped():
    # `1\. Not a list` came back as `1. Not a list` (a list), `\# Not a heading` as a
    # heading, `\> Not a quote` as a quote, `\~~~ not a fence` as a code block; a translation
    # that starts its line so too would have been read as one
    srcs = [
        "1\\. Not a list\n",
        "2020\\. A good year\n",
        "3\\) also not\n",
        "\\- not a list\n",
        "\\+ not a list\n",
        "\\# not a heading\n",
        "\\> not a quote\n",
        "\\~~~ not a fence\n",
        "- 1\\. inside an item\n",
        "> \\# inside a quote\n",
        "Line one\\\n\\- after a hard break\n",
    ]
    for src in srcs:
        for fn in (upper, drop_placeholders, lambda ts: ts):
            out = translate(src, fn)
            assert blocks(out) == blocks(src), (src, out)
    said = ["# HEADING", "- ITEM", "1. ONE", "> QUOTE", "---", "    CODE", "=== X"]
    for text in said:
        for src in ("Some text.\n", "- Some text.\n", "A\\\nB\n"):
            out = translate(src, lambda ts, text=text: [text for _ in ts])
            assert blocks(out) == blocks(src), (src, out)


def test_a_line_of_template_tags_alone_stays_on_its_own_line():
    # `{% if %}` on its own line was joined to the paragraph's text around it
    src = (
        "{% if site.beta %}\nThis feature is in beta.\n{% endif %}\n\n"
        "{{< hint info >}}\nA hint for the *reader*.\n{{< /hint >}}\n\n"
        "Hello {{ user.name }},\nwelcome.\n"
    )
    want = (
        "{% if site.beta %}\nTHIS FEATURE IS IN BETA.\n{% endif %}\n\n"
        "{{< hint info >}}\nA HINT FOR THE *READER*.\n{{< /hint >}}\n\n"
        "HELLO {{ user.name }}, WELCOME.\n"
    )
    assert translate(src) == want
    # by runs, a line break between two runs stays
    assert translate(src, drop_placeholders) == want.replace("}}, ", "}},\n")


def test_a_hard_line_break_before_a_line_kept_on_its_own_stays():
    # the break's spaces or backslash were dropped with the line break before a footnote's
    # definition or a directive line
    src = "A claim[^1]  \n[^1]: Its source\\\n{% endif %}\n"
    want = "A CLAIM[^1]  \n[^1]: ITS SOURCE\\\n{% endif %}\n"
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want


def destinations(markdown: str) -> list[str]:
    """The destination of every link and image, as markdown-it reads it."""
    out = []
    for block in GFM.parse(markdown):
        for tok in block.children or []:
            if tok.type in ("link_open", "image"):
                out.append(tok.attrs.get("href", tok.attrs.get("src")))
    return out


def test_a_destination_with_an_unbalanced_parenthesis_keeps_it():
    # `[a](<x)y>)` and `[b](x\)y)` came back as `[a](x)y)`: the link went to `x`, and `y)`
    # was text after it
    src = "See [a](<x)y>), [b](x\\)y 'T'), ![c](<(c.png>) and [d](x(y)z).\n"
    assert destinations(src) == ["x)y", "x)y", "(c.png", "x(y)z"]
    for fn in (upper, drop_placeholders, lambda ts: ts):
        assert destinations(translate(src, fn)) == destinations(src)


def texts(markdown: str) -> list[str]:
    """The text markdown-it reads in each block, its markup left out."""
    out = []
    for block in GFM.parse(markdown):
        if block.type == "inline":
            out.append("".join(t.content for t in block.children if t.type == "text"))
    return out


def test_text_that_reads_as_an_entity_or_a_headings_closing_hashes_is_escaped():
    # `\&copy;` came back as `&copy;` (the sign ©, not the word), and a heading's text
    # ending in ` #` lost it (read as the heading's closing sequence)
    src = "Write \\&copy; or \\&#169; for the sign, &amp;copy; too.\n\n## Item \\#\n\n# C \\##\n"
    assert texts(src) == ["Write &copy; or &#169; for the sign, &copy; too.", "Item #", "C ##"]
    assert texts(translate(src, lambda ts: ts)) == texts(src)
    assert texts(translate(src)) == [t.upper() for t in texts(src)]


def test_mdx_import_and_export_lines_are_copied_as_written():
    # Docusaurus reads .md files as MDX: these lines were translated as text
    src = (
        "import Tabs from '@theme/Tabs';\nimport {Foo, Bar} from \"./foo\";\n\n"
        "export const meta = {title: 'Hello'};\n\n"
        "You can import data from the file.\n"
    )
    want = (
        "import Tabs from '@theme/Tabs';\nimport {Foo, Bar} from \"./foo\";\n\n"
        "export const meta = {title: 'Hello'};\n\n"
        "YOU CAN IMPORT DATA FROM THE FILE.\n"
    )
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want


def test_autolinks_are_copied_as_written():
    # each was written back from the text markdown-it shows for it: `%20` decoded to a space
    # (no longer an autolink: the link was lost), `%C3%84` to `Ä`, punycode to Unicode
    src = (
        "See <https://example.com/a%20b>, <https://example.com/%C3%84>, "
        "<https://xn--mnchen-3ya.de/x> and <Foo@Example.com> now.\n"
    )
    want = (
        "SEE <https://example.com/a%20b>, <https://example.com/%C3%84>, "
        "<https://xn--mnchen-3ya.de/x> AND <Foo@Example.com> NOW.\n"
    )
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want


def test_link_destinations_and_images_are_copied_as_written():
    # each was written back from what markdown-it resolved: percent-encoded (`Äpfel` as
    # `%C3%84pfel`), hosts in punycode, a reference link made inline; a reference link whose
    # label was its text lost it once that text was translated
    src = (
        "See [the apples](https://de.wikipedia.org/wiki/Äpfel 'Äpfel'), [Munich](<https://münchen.de/a b>),"
        " [the guide][guide], [Guide][] and [guide], ![a logo][logo] and ![Ä](Ä.png).\n\n"
        "[guide]: https://example.com/guide\n"
        '[logo]: /img/logo.png "Logo"\n'
    )
    want = (
        "SEE [THE APPLES](https://de.wikipedia.org/wiki/Äpfel 'ÄPFEL'), [MUNICH](<https://münchen.de/a b>),"
        " [THE GUIDE][guide], [GUIDE][Guide] AND [GUIDE][guide], ![A LOGO][logo] AND ![Ä](Ä.png).\n\n"
        "[guide]: https://example.com/guide\n"
        '[logo]: /img/logo.png "LOGO"\n'
    )
    for fn in (upper, drop_placeholders):
        out = translate(src, fn)
        assert out == want
        assert destinations(out) == destinations(src)


def test_the_text_of_an_html_block_is_translated_as_html():
    # a README's centred tagline, a <details> summary, a <div>'s text were copied untranslated
    src = (
        '<p align="center">\n  <img src="logo.png" alt="Logo">\n  <br>A fast &amp; simple'
        " <b>tool</b>.\n</p>\n\n"
        "<details>\n<summary>Click to expand</summary>\n\nThe *details*.\n\n</details>\n\n"
        "<!-- a comment -->\n\n<script>\nvar a = 'text';\n</script>\n\n"
        "> <div>quoted html</div>\n"
    )
    # the image's alt text as an .html file's (and as a Markdown image's): translated
    want = (
        '<p align="center">\n  <img src="logo.png" alt="LOGO">\n  <br>A FAST &amp; SIMPLE'
        " <b>TOOL</b>.\n</p>\n\n"
        "<details>\n<summary>CLICK TO EXPAND</summary>\n\nTHE *DETAILS*.\n\n</details>\n\n"
        "<!-- a comment -->\n\n<script>\nvar a = 'text';\n</script>\n\n"
        "> <div>QUOTED HTML</div>\n"
    )
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want
        assert translate(src.replace("\n", "\r\n"), fn) == want.replace("\n", "\r\n")
    assert translate(src, lambda ts: ts) == src


def test_a_hard_line_break_after_a_task_box_or_a_footnote_label_stays():
    src = "- [ ]   \n  the task\n\n[^1]:  \nThe note.\n"
    for fn in (upper, drop_placeholders, lambda ts: ts):
        out = translate(src, fn)
        assert [t.type for b in GFM.parse(out) for t in b.children or []].count("hardbreak") == 2


def test_long_runs_of_template_tags_and_braces_are_read_in_one_pass():
    # the pattern of a line of template tags backtracked over every way of cutting it into
    # tags (40 tags and a word after them: hours), and each `{{` was matched to the line's end
    src = "{% a %}" * 40 + " text\n\n" + "{{" * 2000 + " more text\n"
    want = "{% a %}" * 40 + " TEXT\n\n" + "{{" * 2000 + " MORE TEXT\n"
    assert translate(src) == want


def inline_types(markdown: str) -> list[str]:
    """The types of markdown-it's inline tokens, text left out."""
    return [
        t.type
        for b in GFM.parse(markdown)
        for t in b.children or []
        if t.type not in ("text", "softbreak")
    ]


def test_spaces_a_model_puts_inside_emphasis_go_outside_it():
    # `<g1> bold </g1>` came back as `** BOLD **`: no longer strong, the asterisks shown
    def spaced(texts: list[str]) -> list[str]:
        texts = [re.sub(r"(<g\d+>)", r"\1 ", t) for t in texts]
        return [re.sub(r"(</g\d+>)", r" \1", t).upper() for t in texts]

    src = "Some **bold** text, *em* and _under_, ***both***, [a link](http://x) and ~~gone~~.\n"
    out = translate(src, spaced)
    assert inline_types(out) == inline_types(src), out
    assert out.startswith("SOME  **BOLD**  TEXT")
    src = "**Bold** at the start\n\n- *Em* in an item\n"
    out = translate(src, spaced)
    assert inline_types(out) == inline_types(src) and blocks(out) == blocks(src), out


def test_underscore_emphasis_that_ends_up_inside_a_word_is_written_with_asterisks():
    # CommonMark reads no `_` emphasis inside a word: `_simple_` translated as part of a
    # compound, or into a language written without spaces, came back as underscores shown
    def glued(texts: list[str]) -> list[str]:
        return [re.sub(r"\s*(</?[gx]\d+/?>)\s*", r"\1", t).upper() for t in texts]

    src = "A _simple_ and __strong__ tool, _kept_ here.\n"
    out = translate(src, glued)
    assert inline_types(out) == inline_types(src), out
    assert out == "A*SIMPLE*AND**STRONG**TOOL,*KEPT*HERE.\n"
    assert translate(src) == "A _SIMPLE_ AND __STRONG__ TOOL, _KEPT_ HERE.\n"


def test_markup_over_several_lines_keeps_a_crlf_files_line_endings():
    # inline HTML or math over two lines came back with a bare LF inside a CRLF file
    src = 'Text <span\r\nclass="a">in a span</span> and $$a +\r\nb$$ more.\r\n'
    want = 'TEXT <span\r\nclass="a">IN A SPAN</span> AND $$a +\r\nb$$ MORE.\r\n'
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want


def test_definition_list_lines_stay_on_their_own_lines():
    # Pandoc, PHP Markdown Extra and MkDocs' def_list: CommonMark reads a term and its
    # definitions as one paragraph, and its lines were joined (`APPLE : A RED FRUIT.`)
    src = "Apple\n:   A red fruit.\n\nTerm *two*\n: Definition two\n: Another one\n"
    want = "APPLE\n:   A RED FRUIT.\n\nTERM *TWO*\n: DEFINITION TWO\n: ANOTHER ONE\n"
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want
        assert translate(src.replace("\n", "\r\n"), fn) == want.replace("\n", "\r\n")


def test_escaped_tildes_dollars_and_colons_stay_text():
    # `\~~`, `\$x\$`, `\:smile\:` came back unescaped: strikethrough, math, an emoji
    # (`:SMILE:` is none: shortcodes are lower case)
    src = "A ~\\~b~~ c, \\$x\\$ and \\:smile\\: but ~5 minutes, $5 and 10:30.\n"
    for fn, case in ((upper, str.upper), (drop_placeholders, str.upper), (lambda ts: ts, str)):
        out = translate(src, fn)
        assert inline_types(out) == inline_types(src) == [], out
        assert texts(out) == [case(t) for t in texts(src)]
    assert translate(src) == (
        "A \\~\\~B\\~\\~ C, \\$X$ AND :SMILE: BUT ~5 MINUTES, $5 AND 10:30.\n"
    )


def test_an_exclamation_mark_before_a_link_stays_text():
    # `\![a link](x.png)` and `Hello![a link](y)` came back as `![...](...)`: an image
    src = "See \\![the picture](x.png) and Wow\\![a link](y).\n"
    for fn in (upper, drop_placeholders, lambda ts: ts):
        out = translate(src, fn)
        assert inline_types(out) == inline_types(src) == ["link_open", "link_close"] * 2, out
    out = translate("A [link](x) here.\n", lambda ts: [t.replace("A ", "WOW!") for t in ts])
    assert inline_types(out) == ["link_open", "link_close"], out


def test_mkdocs_content_tabs_keep_their_line():
    # `=== "Tab"` came back as `\=== "TAB"`: no longer a tab for MkDocs (an `=` can only
    # underline a heading after a line of text)
    src = '=== "Python"\n\n    ```py\n    print(1)\n    ```\n\n===+ "Shell"\n    Run it.\n'
    want = '=== "Python"\n\n    ```py\n    print(1)\n    ```\n\n===+ "Shell"\n    RUN IT.\n'
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want


def test_inline_html_elements_are_pairs_a_translation_cannot_turn_inside_out():
    # `<a href>` and `</a>` were two atoms: a translation that gave them back in the other
    # order was taken (`</a> STARLETTE <a href="s">`), the link around nothing
    def swapped(texts: list[str]) -> list[str]:
        out = []
        for t in texts:
            marks = re.findall(r"<[^>]+>", t)
            if len(marks) == 2:
                t = t.replace(marks[0], "\0").replace(marks[1], marks[0]).replace("\0", marks[1])
            out.append(t.upper())
        return out

    src = 'Use <a href="s">Starlette</a> for the web.\n'
    out = translate(src, swapped)
    html = [t.content for b in GFM.parse(out) for t in b.children or [] if t.type == "html_inline"]
    assert html == ['<a href="s">', "</a>"], out
    src = 'Use <a href="s">Starlette</a> for the web, <kbd>Ctrl</kbd><br>here.\n'
    assert translate(src) == 'USE <a href="s">STARLETTE</a> FOR THE WEB, <kbd>CTRL</kbd><br>HERE.\n'


def test_an_html_block_holding_template_or_jsx_expressions_is_copied():
    # the HTML translation would read `{{ site.title }}` and `{props.name}` as words
    src = (
        "<p>{{ site.description }}</p>\n\n<Note>\nHello {props.name}, welcome.\n</Note>\n\n"
        "<p>Plain words.</p>\n"
    )
    want = (
        "<p>{{ site.description }}</p>\n\n<Note>\nHello {props.name}, welcome.\n</Note>\n\n"
        "<p>PLAIN WORDS.</p>\n"
    )
    assert translate(src) == want


def test_a_paragraph_longer_than_one_request_is_sent_in_pieces_that_fit():
    # it was sent whole: the service refused the file with 413 "the file has a paragraph of
    # ... characters" (a .txt file's long paragraphs are cut)
    sentences = [f"The cat sat on mat number {i} today." for i in range(40)]
    src = " ".join(sentences[:20]) + " A **bold** word. " + " ".join(sentences[20:]) + "\n"
    sent: list[str] = []

    def recording(texts: list[str]) -> list[str]:
        sent.extend(texts)
        return upper(texts)

    limits = Limits(max_request_chars=300)
    out = translate_markdown(src.encode(), recording, limits).decode()
    assert max(len(t) for t in sent) <= 300
    assert out == src.upper().replace("**BOLD**", "**BOLD**")
    assert inline_types(out) == inline_types(src)


def test_a_paragraph_whose_lines_are_indented_with_tabs_is_translated():
    # markdown-it gives a continuation line's tab partly as spaces: the line was not found as
    # written and the whole paragraph was left untranslated
    for src, want in [
        ("- a cat\n\t\tand a dog\n", "- A CAT AND A DOG\n"),
        ("- a cat\n \tand a dog\n", "- A CAT AND A DOG\n"),
    ]:
        assert translate(src) == want


def test_dialect_syntax_is_only_looked_for_at_the_start_of_a_paragraph():
    # a table cell or a heading that starts with `!!! `, `::: ` or `[^1]:` is text: it was
    # copied untranslated (read as an admonition's line)
    src = "| a | b |\n|---|---|\n| !!! note the [link](x) | ::: two words |\n\n# : a title\n"
    want = "| A | B |\n|---|---|\n| !!! NOTE THE [LINK](x) | ::: TWO WORDS |\n\n# : A TITLE\n"
    assert translate(src) == want


def test_an_html_block_translated_names_the_target_language():
    """A translated HTML block kept its `lang` (the Markdown handler was not told the target),
    as an .html file's elements do not."""
    src = '<p lang="en" align="center">A fast translation service.</p>\n\nSome *text*.\n'
    out = handler_for("a.md", "de")(src.encode(), upper, Limits()).decode()
    assert out == '<p lang="de" align="center">A FAST TRANSLATION SERVICE.</p>\n\nSOME *TEXT*.\n'


def test_prose_with_dollars_or_a_directives_marker_is_translated():
    # `$HOME/$` and `$HOME* and *$` were read as math (a `$` before a word closed it), and a
    # prose line that starts with `!!!` or `:::` as an admonition's or a fenced div's line:
    # each was copied as written, its words left untranslated
    src = (
        "Your files are in $home/$user, see *$home* and *$user* in the docs.\n\n"
        "!!! Wow, that is great.\n\n"
        "::: not a directive, just text\n\n"
        '=== "Tab" and more text\n\n'
        "Math stays: $x$ and $n$-th, ($a+b$), $x$. but not a$x$ or $y$b.\n\n"
        '!!! note "Read this"\n    The body.\n\n'
        "::: tip A nice title\nTip text.\n:::\n\n"
        ":::note[My title]\nNote text.\n:::\n\n"
        "::: {.warning}\nWarning text.\n::: Warning :::\n\n"
        '???+ "Just a title"\n    Details.\n'
    )
    want = (
        "YOUR FILES ARE IN $HOME/$USER, SEE *$HOME* AND *$USER* IN THE DOCS.\n\n"
        "!!! WOW, THAT IS GREAT.\n\n"
        "::: NOT A DIRECTIVE, JUST TEXT\n\n"
        '=== "TAB" AND MORE TEXT\n\n'
        "MATH STAYS: $x$ AND $n$-TH, ($a+b$), $x$. BUT NOT A$X$ OR $Y$B.\n\n"
        '!!! note "Read this"\n    THE BODY.\n\n'
        "::: tip A nice title\nTIP TEXT.\n:::\n\n"
        ":::note[My title]\nNOTE TEXT.\n:::\n\n"
        "::: {.warning}\nWARNING TEXT.\n::: Warning :::\n\n"
        '???+ "Just a title"\n    DETAILS.\n'
    )
    for fn in (upper, drop_placeholders):
        assert translate(src, fn) == want
    # a translation that reads as math is escaped, one that does not is not
    out = translate("Some text.\n", lambda ts: ["$HOME/$USER costs $x$ now"])
    assert out == "$HOME/$USER costs \\$x$ now\n"


def test_an_html_block_inside_a_list_or_a_quote_is_translated_as_html():
    # it was copied untranslated (only a top-level one was translated); each line keeps its
    # `>` markers or its indentation, so the block stays inside the quote or the item
    src = (
        "- An item\n\n  <div>HTML in an item\n  on two lines</div>\n\n  <details>\n"
        "  <summary>Click to expand</summary>\n\n  The *details*.\n\n  </details>\n\n"
        '> <p align="center">A quoted\n> <b>tagline</b></p>\n>\n> <!-- a comment -->\n\n'
        "> - <div>In a list\n>   in a quote</div>\n"
    )
    want = (
        "- AN ITEM\n\n  <div>HTML IN AN ITEM ON TWO LINES</div>\n\n  <details>\n"
        "  <summary>CLICK TO EXPAND</summary>\n\n  THE *DETAILS*.\n\n  </details>\n\n"
        '> <p align="center">A QUOTED <b>TAGLINE</b></p>\n>\n> <!-- a comment -->\n\n'
        "> - <div>IN A LIST IN A QUOTE</div>\n"
    )
    assert translate(src) == want
    assert translate(src.replace("\n", "\r\n")) == want.replace("\n", "\r\n")
    out = translate(src, drop_placeholders)  # the plain text whole, <b> placed on it
    assert out == want
    assert blocks(out) == blocks(src)
    assert translate(src, lambda ts: ts) == src


def breaks(markdown: str) -> list[str]:
    """The line breaks markdown-it reads in each block, in order."""
    kinds = ("softbreak", "hardbreak")
    return [t.type for b in GFM.parse(markdown) for t in b.children or [] if t.type in kinds]


def test_a_paragraph_not_translated_is_written_as_it_was_and_hard_breaks_keep_their_lines():
    # a paragraph came back on one line, its character references as characters (`&copy;`
    # as ©), its quote's `>` markers dropped after a line break, also where the model gave
    # its text back unchanged (already in the target's language)
    src = (
        "Copyright &copy; 2024 &#169; Jane\nDoe, all rights *reserved* \\* 2.\n\n"
        "> A quoted line  \n> a second one\\\n> and a *third*.\n\n"
        "- An item  \n  on two lines\n\n"
        "# Caf&eacute; &amp; more\n"
    )

    def some(texts: list[str]) -> list[str]:
        mine = ("Jane", "Doe", "reserved", "Caf")  # the text of those not translated
        return [t if any(w in t for w in mine) else t.upper() for t in texts]

    want = (
        "Copyright &copy; 2024 &#169; Jane\nDoe, all rights *reserved* \\* 2.\n\n"
        "> A QUOTED LINE  \n> A SECOND ONE\\\n> AND A *THIRD*.\n\n"
        "- AN ITEM  \n  ON TWO LINES\n\n"
        "# Caf&eacute; &amp; more\n"
    )
    for fn in (some, lambda ts: [re.sub(r"</?[gx]\d+/?>", "", t) for t in some(ts)]):
        out = translate(src, fn)
        assert out == want
        assert breaks(out) == breaks(src) and blocks(out) == blocks(src)
    assert translate(src, lambda ts: ts) == src
    assert translate(src.replace("\n", "\r\n"), some) == want.replace("\n", "\r\n")
    # translated whole, a paragraph's soft line breaks are joined, also where the model lost
    # the placeholders (its plain text is translated whole, each pair placed on it); the
    # spaces a translation ends with never make a hard line break
    src = "> One *line*\n> two lines.\n"
    assert translate(src) == "> ONE *LINE* TWO LINES.\n"
    assert translate(src, drop_placeholders) == "> ONE *LINE* TWO LINES.\n"
    for text in (src, "One\nand **two.**\nThree.\n"):
        out = translate(text, lambda ts: [t + "  " for t in drop_placeholders(ts)])
        assert "hardbreak" not in breaks(out) and blocks(out) == blocks(text), out


def links_and_images(markdown: str) -> list[tuple[str, str, str, str | None]]:
    """(kind, text or alternative text, destination, title) of every link and image, as
    markdown-it reads them (a reference's destination and title resolved)."""
    out = []
    for block in GFM.parse(markdown):
        children = block.children or []
        for i, tok in enumerate(children):
            if tok.type == "link_open":
                words = []
                for t in children[i + 1 :]:
                    if t.type == "link_close":
                        break
                    words.append(t.content)
                out.append(("link", "".join(words), tok.attrs["href"], tok.attrs.get("title")))
            elif tok.type == "image":
                alt = "".join(t.content for t in tok.children or [])
                out.append(("image", alt, tok.attrs["src"], tok.attrs.get("title")))
    return out


def test_an_images_alternative_text_and_a_links_title_are_translated():
    # both were copied untranslated (a screen reader reads the one, a browser shows the
    # other), and so was a reference definition's title; a `]`, a quote or a parenthesis in
    # a translation is escaped, so that the image or the title still ends where it did
    src = (
        'A ![red "logo"](logo.png "The [project] logo") and [the guide](https://x.y/g "Read'
        ' it"),\n[a reference][r], ![an icon][i] and [`code`](c (A title)).\n\n'
        '[r]: https://x.y/r "A reference title"\n'
        "[i]: /i.png 'An icon'\n\n"
        "> [q]: /q (A quoted title)\n>\n> See [q] and ![](empty.png).\n\n"
        '| Picture |\n|---|\n| ![a cell\\|picture](c.png "its \\| title") |\n'
    )

    def marked(texts: list[str]) -> list[str]:
        return [t.upper() + ' ]")(|' for t in texts]

    out = translate(src, marked)
    assert blocks(out) == blocks(src)
    source, translated = links_and_images(src), links_and_images(out)
    assert [(k, d) for k, _, d, _ in translated] == [(k, d) for k, _, d, _ in source]
    for (kind, text, _, title), (_, text_out, _, title_out) in zip(source, translated, strict=True):
        assert title_out == (title and title.upper() + ' ]")(|'), out
        if kind == "image":
            assert text_out == (text and text.upper() + ' ]")(|'), out
    assert "![](empty.png)" in out
    assert translate(src, lambda ts: ts) == src
    assert links_and_images(translate(src, drop_placeholders)) == links_and_images(translate(src))


def test_a_table_cell_whose_translation_ends_with_a_backslash_keeps_its_columns():
    # its backslash, escaped, was written just before the cell's `|`: GFM reads a `|` after
    # any backslash as text, and the row lost a column
    src = "| Path | Kind |\n|---|---|\n| C:|Folder|\n"
    out = translate(src, lambda ts: [t.upper() + "\\" for t in ts])
    want = [["PATH", "KIND"], ["C:", "FOLDER"]]
    assert cells(out) == [[c + "\\\\" for c in row] for row in want], out  # an escaped backslash


def test_environment_variables_in_prose_are_copied_as_written():
    # `$HOME` and `$USER` were words to the model: they came back translated (`$BENUTZER`)
    src = "Set $HOME/$USER before you start, or ${JAVA_HOME} and $PATH:$HOME/bin.\n"

    def german(texts: list[str]) -> list[str]:
        words = {"HOME": "HAUS", "USER": "BENUTZER", "PATH": "PFAD"}
        return [re.sub(r"HOME|USER|PATH", lambda m: words[m.group()], t.upper()) for t in texts]

    want = "SET $HOME/$USER BEFORE YOU START, OR ${JAVA_HOME} AND $PATH:$HOME/BIN.\n"
    for fn in (german, lambda ts: german(drop_placeholders(ts))):
        assert translate(src, fn) == want
    # in a translation, such a name is no syntax: not escaped
    assert translate("Some text.\n", lambda ts: ["Set $HOME now"]) == "Set $HOME now\n"


def test_the_language_fields_of_a_front_matter_name_the_target():
    """A front matter is copied as written but for the fields that give the document's
    language (`lang`, `language`, `locale`), which named the source's: each takes the target's
    code as `<html lang>` and `og:locale` do (a locale written with `_` so, no territory
    guessed), where the text below was translated."""
    src = (
        '---\r\ntitle: Weather\r\nlang: en\r\nlocale: en_US\r\nlanguage: "en-GB" # site\r\n'
        "  lang: en\r\nalt: en\r\nlanguage: English\r\n---\r\n\r\nThe weather.\r\n"
    )
    want = (
        '---\r\ntitle: Weather\r\nlang: de\r\nlocale: de\r\nlanguage: "de" # site\r\n'
        "  lang: en\r\nalt: en\r\nlanguage: English\r\n---\r\n\r\nTHE WEATHER.\r\n"
    )
    assert handler_for("a.md", "de")(src.encode(), upper, LIMITS).decode() == want
    toml = '+++\nlang = "en"\nlocale = "en_US"\n+++\n\nThe weather.\n'
    out = handler_for("a.md", "pt-BR")(toml.encode(), upper, LIMITS).decode()
    assert out == '+++\nlang = "pt-BR"\nlocale = "pt_BR"\n+++\n\nTHE WEATHER.\n'
    named = "---\nlang: de-CH\n---\n\nThe weather.\n"  # naming the target already: kept
    assert handler_for("a.md", "de")(named.encode(), upper, LIMITS).decode().startswith(named[:15])
    for kept in ("---\nlang: en\n---\n\n```\ncode\n```\n", "---\nlang: en\n---\n\n12\n"):
        assert handler_for("a.md", "de")(kept.encode(), upper, LIMITS).decode() == kept
    # two letters that are no language's code (a programming language), and a TOML table's
    # key (a theme's `[params]`), are not the document's language
    other = "---\nlanguage: go\n---\n\nThe weather.\n"
    assert handler_for("a.md", "de")(other.encode(), upper, LIMITS).decode().startswith(other[:17])
    table = '+++\nlang = "en"\n[params]\nlang = "en"\n+++\n\nThe weather.\n'
    out = handler_for("a.md", "de")(table.encode(), upper, LIMITS).decode()
    assert out.startswith('+++\nlang = "de"\n[params]\nlang = "en"\n+++')


def test_the_language_fields_of_a_front_matter_with_cr_line_ends_name_the_target():
    """A file with classic Mac OS line ends (a CR alone) has its front matter found, but its
    fields were looked for after an LF only: `lang: en` was kept under a German text."""
    src = "---\rtitle: Weather\rlang: en\r---\r\rThe weather.\r"
    out = handler_for("a.md", "de")(src.encode(), upper, LIMITS).decode()
    assert out == "---\rtitle: Weather\rlang: de\r---\r\rTHE WEATHER.\r"
    table = '+++\rlang = "en"\r[params]\rlang = "en"\r+++\r\rThe weather.\r'
    out = handler_for("a.md", "de")(table.encode(), upper, LIMITS).decode()
    assert out.startswith('+++\rlang = "de"\r[params]\rlang = "en"\r+++')


#: per text `source: auto` keeps as it is, the language it is in
KEPT = {
    "Je voudrais une table.": "fr",
    "Wir waren gestern Abend im Restaurant.": "de",
}


def upper_but_kept(texts: list[str]) -> list[str]:
    """As /translate_file with `source: auto` into German: a text in French or in German kept
    as it is and its language noted (app/html_lang.py), the others upper-cased."""
    note_kept([KEPT.get(t) for t in texts])
    return [t if t in KEPT else t.upper() for t in texts]


#: (an HTML block, kept or holding a paragraph kept as it is, and the block translated into
#: German as in an .html file whose other text is translated)
KEPT_BLOCKS = [
    # kept alone in its element: the element labelled, in a block translated or not
    ('<p lang="en">Je voudrais une table.</p>', '<p lang="fr">Je voudrais une table.</p>'),
    (
        '<div lang="en">\n<p>Je voudrais une table.</p>\n</div>',
        '<div lang="en">\n<p lang="fr">Je voudrais une table.</p>\n</div>',
    ),
    (
        '<p lang="en">Wir waren gestern Abend im Restaurant.</p>',
        '<p lang="de">Wir waren gestern Abend im Restaurant.</p>',
    ),
    # sharing its element with translated text: in a <span>
    (
        '<div lang="en">We like bread.<br>Je voudrais une table.</div>',
        '<div lang="de">WE LIKE BREAD.<br><span lang="fr">Je voudrais une table.</span></div>',
    ),
    # in the language it is declared in already: nothing to say
    ('<p lang="fr-CA">Je voudrais une table.</p>', '<p lang="fr-CA">Je voudrais une table.</p>'),
]


@pytest.mark.parametrize("block, want", KEPT_BLOCKS)
def test_an_html_block_kept_in_its_own_language_is_labelled_as_in_an_html_file(block, want):
    """`source: auto`: an HTML block none of whose text was translated (a French quote, a
    paragraph in the target's language already) was copied as written, under a `lang` that no
    longer said what it holds, where the same block in an .html file is labelled with the
    language it is in."""
    src = f"The weather.\n\n{block}\n\nThe end.\n"
    out = handler_for("a.md", "de")(src.encode(), upper_but_kept, LIMITS).decode()
    assert out == f"THE WEATHER.\n\n{want}\n\nTHE END.\n"
    page = f'<html lang="en"><p>The weather.</p>\n{block}\n</html>'
    html = handler_for("a.html", "de")(page.encode(), upper_but_kept, LIMITS).decode()
    assert html == f'<html lang="de"><p>THE WEATHER.</p>\n{want}\n</html>'


def test_an_html_block_kept_in_a_list_or_a_quote_keeps_its_markers_when_labelled():
    src = (
        '- Item\n\n  <p lang="en">\n  Je voudrais une table.\n  </p>\n\n'
        '> <p lang="en">\n> Je voudrais une table.</p>\n\n'
        "<p>Je voudrais une table.</p>\n"  # no language declared around it: as written
    )
    want = (
        '- ITEM\n\n  <p lang="fr">\n  Je voudrais une table.\n  </p>\n\n'
        '> <p lang="fr">\n> Je voudrais une table.</p>\n\n'
        "<p>Je voudrais une table.</p>\n"
    )
    assert handler_for("a.md", "de")(src.encode(), upper_but_kept, LIMITS).decode() == want


def test_a_markdown_file_none_of_whose_text_is_translated_comes_back_as_it_was():
    """As an .html file does: nothing labelled, whatever a `lang` says."""
    src = (
        '---\nlang: en\n---\n\n<p lang="en">Je voudrais une table.</p>\n\nJe voudrais une table.\n'
    )
    assert handler_for("a.md", "de")(src.encode(), upper_but_kept, LIMITS).decode() == src
