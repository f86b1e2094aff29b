"""Malformed values in every field of /translate, as JSON (the fast path), as a form and as
multipart form data (the FastAPI route): each is a 400 whose JSON error names the field."""

from __future__ import annotations

import gzip
import logging
import shutil
import zlib

import httpx
import pytest

from tests.service_helpers import serve_in_thread
from tests.test_service import metric

COUNTS = ["alternatives", "beam_size", "max_length"]
TEXT_FIELDS = ["q", "source", "target", "format", "api_key"]
BASE = '"q": "The cat.", "source": "en", "target": "de"'


@pytest.fixture(scope="module")
def url(random_checkpoint, tmp_path_factory):
    d = tmp_path_factory.mktemp("input-weights")
    shutil.copytree(random_checkpoint, d / "en-de")
    with serve_in_thread(d) as (base, _):
        yield base


def post_json_text(url: str, members: str) -> httpx.Response:
    """A JSON body written by hand: Python's json module cannot write these values."""
    body = ("{" + members + "}").encode()
    return httpx.post(
        f"{url}/translate", content=body, headers={"content-type": "application/json"}, timeout=60
    )


def multipart(fields: dict[str, bytes]) -> tuple[bytes, str]:
    parts = b"".join(
        b'--XyZ\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (k.encode(), v)
        for k, v in fields.items()
    )
    return parts + b"--XyZ--\r\n", "multipart/form-data; boundary=XyZ"


def assert_400(r: httpx.Response, *needles: str) -> None:
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    for needle in needles:
        assert needle in error, error


@pytest.mark.parametrize(
    ("path", "fields"), [("/detect", "send q"), ("/frontend/settings", "send api_key")]
)
def test_a_body_an_endpoint_cannot_read_is_told_what_that_endpoint_takes(url, path, fields):
    # /detect and POST /frontend/settings were told to "send q, source and target", and
    # /detect that alternatives, beam_size and max_length are small whole numbers
    json = {"content-type": "application/json"}
    for body, why in (
        (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
        (b'{"q": ' + b"9" * 5000 + b"}", "more than 4300 digits"),
    ):
        r = httpx.post(f"{url}{path}", content=body, headers=json)
        assert_400(r, why, fields)
        assert "source and target" not in r.json()["error"]
        assert "beam_size" not in r.json()["error"]


@pytest.mark.parametrize("field", COUNTS)
@pytest.mark.parametrize("sign", ["", "-"], ids=["positive", "negative"])
def test_a_json_number_of_5000_digits_is_a_400(url, field, sign):
    r = post_json_text(url, f'{BASE}, "{field}": {sign}{"9" * 5000}')
    assert_400(r, "more than 4300 digits", field)


@pytest.mark.parametrize(
    ("q", "wanted"),
    [
        (None, "`q` must be a text or a list of texts"),
        (3, "`q` must be a text or a list of texts"),
        ({"text": "The cat."}, "`q` must be a text or a list of texts"),
        (["The cat.", 3], "invalid request: q[1]: Input should be a valid string"),
        ([["The cat."]], "invalid request: q[0]: Input should be a valid string"),
    ],
)
def test_a_q_of_another_type_is_a_400_that_names_what_q_takes(url, q, wanted):
    """As /detect says it (it named the branches of `q`'s type: "q.str: Input should be a
    valid string; q.list[str].1: Input should be a valid string")."""
    r = httpx.post(f"{url}/translate", json={"q": q, "source": "en", "target": "de"}, timeout=60)
    assert_400(r, wanted)
    assert "str]" not in r.json()["error"] and "q.str" not in r.json()["error"], r.text


@pytest.mark.parametrize("field", COUNTS)
def test_a_long_but_parsable_number_is_a_400_that_does_not_echo_it(url, field):
    r = post_json_text(url, f'{BASE}, "{field}": {"9" * 4000}')
    assert_400(r, f"{field} has 4000 digits")
    assert len(r.text) < 200


@pytest.mark.parametrize("field", COUNTS)
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400", "1e300", "2.5"])
def test_non_finite_huge_or_fractional_json_numbers_are_a_400(url, field, value):
    assert_400(post_json_text(url, f'{BASE}, "{field}": {value}'), field)


@pytest.mark.parametrize("field", COUNTS)
@pytest.mark.parametrize("value", ["9" * 5000, "9" * 4000, "1e400", "nan", "-" + "9" * 5000])
def test_huge_or_non_numeric_counts_in_form_bodies_are_a_400(url, field, value):
    fields = {"q": "The cat.", "source": "en", "target": "de", field: value}
    assert_400(httpx.post(f"{url}/translate", data=fields, timeout=60), field)
    body, ctype = multipart({k: v.encode() for k, v in fields.items()})
    r = httpx.post(f"{url}/translate", content=body, headers={"content-type": ctype}, timeout=60)
    assert_400(r, field)


@pytest.mark.parametrize("field", TEXT_FIELDS)
@pytest.mark.parametrize("surrogate", ["\\ud800", "\\udfff", "a\\udc00b"])
def test_an_unpaired_surrogate_in_any_text_field_is_a_400(url, field, surrogate):
    fields = {"q": "The cat.", "source": "en", "target": "de", field: surrogate}
    members = ", ".join(f'"{k}": "{v}"' for k, v in fields.items())
    assert_400(post_json_text(url, members), f"`{field}` holds an unpaired UTF-16 surrogate")


@pytest.mark.parametrize("field", ["source", "target", "format"])
def test_nul_and_control_characters_in_a_field_get_a_json_400(url, field):
    fields = {"q": "The cat.", "source": "en", "target": "de", field: "a\x00\x01\x1b\x7fb"}
    assert_400(httpx.post(f"{url}/translate", json=fields, timeout=60))
    assert_400(httpx.post(f"{url}/translate", data=fields, timeout=60))


def test_control_characters_between_words_are_read_as_spaces(url):
    """A NUL, an escape or a C1 code inside a text: the model reads a space there ("Hello\x00world."
    gave nonsense, its bytes read as part of the words)."""
    texts = ["Hello world.", "Hello\x00world.", "Hello\x1bworld.", "Hello\x9bworld."]
    body = {"q": texts, "source": "en", "target": "de"}
    out = httpx.post(f"{url}/translate", json=body, timeout=60).json()["translatedText"]
    assert len(set(out)) == 1, out


@pytest.mark.parametrize("unset", [None, ""])
def test_alternatives_null_or_empty_is_none(url, unset):
    """A form's unset field (`alternatives=`) or JSON's null: no alternatives, as with 0."""
    fields = {"q": "The cat.", "source": "en", "target": "de", "alternatives": unset}
    r = httpx.post(f"{url}/translate", json=fields, timeout=60)
    assert r.status_code == 200, r.text
    assert "alternatives" not in r.json()
    if unset == "":
        r = httpx.post(f"{url}/translate", data=fields, timeout=60)
        assert r.status_code == 200, r.text
        assert "alternatives" not in r.json()


def test_text_of_invisible_characters_alone_comes_back_as_sent(url):
    """A zero-width space, a byte order mark, a NUL: nothing a reader sees, so nothing to
    translate (a model would invent a sentence for it); in a text with words they stay where
    they were, between the translated sentences."""
    lone = ["\u200b", "\ufeff", "\x00", "\u200b\u200d \u2060", "\u2028"]
    r = httpx.post(f"{url}/translate", json={"q": lone, "source": "en", "target": "de"}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == lone
    mixed = "The cat.\n\u200b\nThe dog."
    r = httpx.post(
        f"{url}/translate", json={"q": mixed, "source": "en", "target": "de"}, timeout=60
    )
    lines = r.json()["translatedText"].split("\n")
    assert len(lines) == 3 and lines[1] == "\u200b" and lines[0] and lines[2]


def test_lines_without_letters_and_list_markers_come_back_as_written(url):
    """A line without a letter (a rule, a date, a time, a price, a number, a smiley) is not
    sent to the model, which invented a sentence for each; a list item's marker is kept as
    written and only the item translated ("1." became "Es ist kalt.")."""
    kept = ["---", "2024-05-03", "10:30", "$4.99", "42", ":)", "***"]
    text = "\n".join(["The cat.", *kept, "1. The dog.", "- We eat bread."])
    r = httpx.post(f"{url}/translate", json={"q": text, "source": "en", "target": "de"}, timeout=60)
    assert r.status_code == 200, r.text
    lines = r.json()["translatedText"].split("\n")
    assert len(lines) == len(kept) + 3
    assert lines[1:-2] == kept
    assert lines[-2].startswith("1. ") and len(lines[-2]) > 3
    assert lines[-1].startswith("- ") and len(lines[-1]) > 2
    r = httpx.post(
        f"{url}/translate", json={"q": ["42", "1.", "(3)"], "source": "en", "target": "de"}
    )
    assert r.json()["translatedText"] == ["42", "1.", "(3)"]


def test_urls_and_e_mail_addresses_in_plain_text_come_back_as_written(url):
    """A model turned "https://example.com/docs?id=42" into invented words: addresses are
    copied as written, the words around them translated (in every alternative), and a
    text of nothing but an address is not sent to the model at all."""
    addresses = ["https://example.com/docs?id=42", "www.python.org", "anna.schmidt@example.org"]
    texts = [f"Please see {a} for the details." for a in addresses]
    r = httpx.post(
        f"{url}/translate",
        json={"q": texts, "source": "en", "target": "de", "alternatives": 1},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    for address, out, alts in zip(
        addresses, body["translatedText"], body["alternatives"], strict=True
    ):
        for text in (out, *alts):
            before, found, after = text.partition(f" {address} ")
            assert found and before.strip() and after.strip(), text
            assert address not in before + after
    text = "The cat.\nhttps://example.com/a_(b).\nMail me: x@example.de"
    r = httpx.post(f"{url}/translate", json={"q": text, "source": "en", "target": "de"}, timeout=60)
    lines = r.json()["translatedText"].split("\n")
    assert len(lines) == 3 and lines[1] == "https://example.com/a_(b)."
    assert lines[2].endswith(" x@example.de") and lines[2] != "Mail me: x@example.de"
    r = httpx.post(
        f"{url}/translate",
        json={"q": ["https://example.com", "x@example.de"], "source": "en", "target": "de"},
        timeout=60,
    )
    assert r.json()["translatedText"] == ["https://example.com", "x@example.de"]


def test_the_words_between_addresses_are_sent_once_each(url):
    """The sentence with a name in place of each address, and the runs between addresses for
    when the name does not come back; not also the sentence with a placeholder per address,
    which a model that never gives placeholders back decoded for nothing."""
    before = metric(url, "mt_sentences_total")
    r = httpx.post(
        f"{url}/translate",
        json={"q": "Write to a@b.de or c@d.de today.", "source": "en", "target": "de"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    # "Write to Tom or Boston today.", "Write to", "or", "today."
    assert metric(url, "mt_sentences_total") - before == 4


def test_a_sentence_repeated_in_a_request_is_decoded_once(url):
    """Each copy of a sentence was decoded again, in a list `q` and within a text; now each
    distinct sentence once, its translation (and alternatives) given to every copy."""

    def ask(q):
        body = {"q": q, "source": "en", "target": "de", "beam_size": 2, "alternatives": 1}
        r = httpx.post(f"{url}/translate", json=body, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["translatedText"], r.json()["alternatives"]

    (cat, cat_alts), (dog, dog_alts) = ask("The cat."), ask("The dog.")
    before = metric(url, "mt_sentences_total")
    out, alts = ask(["The cat.", "The dog. The cat.", "The cat.", "The cat.\nThe cat."])
    assert metric(url, "mt_sentences_total") - before == 2
    assert out == [cat, f"{dog} {cat}", cat, f"{cat}\n{cat}"]
    assert alts[0] == alts[2] == cat_alts
    assert alts[1] == [f"{d} {c}" for d, c in zip(dog_alts, cat_alts, strict=True)]
    before = metric(url, "mt_sentences_total")
    assert ask("Write to a@b.de or c@d.de or e@f.de today.")[0].count("@") == 3
    # "Write to Tom or Boston or Paris today.", "Write to", "or", "today."
    assert metric(url, "mt_sentences_total") - before == 4


def test_a_sentence_of_many_addresses_over_the_share_is_told_in_pieces(random_checkpoint, tmp_path):
    """One sentence whose words between its URLs are translated apart (12 runs) in a request
    that may queue 10: the 413 spoke of "12 sentences" for a text of one."""
    words = ["cat", "dog", "sun", "tree", "bird", "fish", "car", "boat", "road", "hill", "lake"]
    one = " ".join(f"{w} https://x.org/{i}" for i, w in enumerate(words)) + " and rain."
    shutil.copytree(random_checkpoint, tmp_path / "en-de")
    with serve_in_thread(tmp_path, max_queue_size=20, max_request_share=0.5) as (base, _):
        r = httpx.post(
            f"{base}/translate", json={"q": one, "source": "en", "target": "de"}, timeout=60
        )
        assert r.status_code == 413, r.text
        error = r.json()["error"]
        assert "`q` holds 1 sentence to translate in 12 pieces" in error, error
        assert "URLs or e-mail addresses" in error and "at most 10 pieces" in error, error
        r = httpx.post(
            f"{base}/translate", json={"q": words, "source": "en", "target": "de"}, timeout=60
        )
        assert r.status_code == 413 and "`q` holds 11 sentences; " in r.json()["error"]
        ten = " ".join(f"{w} https://x.org/{i}" for i, w in enumerate(words[:9])) + " and rain."
        r = httpx.post(
            f"{base}/translate", json={"q": ten, "source": "en", "target": "de"}, timeout=60
        )
        assert r.status_code == 200 and r.json()["translatedText"].count("https://x.org/") == 9


def test_nul_and_control_characters_in_q_are_translated(url):
    r = httpx.post(
        f"{url}/translate",
        json={"q": "The\x00 cat.\x1b", "source": "en", "target": "de"},
        timeout=60,
    )
    assert r.status_code == 200 and isinstance(r.json()["translatedText"], str)


@pytest.mark.parametrize("field", TEXT_FIELDS)
def test_a_surrogate_in_utf8_form_in_a_json_body_is_a_400(url, field):
    # a surrogate written in UTF-8's way (CESU-8): Python's JSON parser decodes bytes with
    # "surrogatepass", so this arrives as the same unpaired surrogate as a \ud800 escape
    body = b'{"q": "x", "source": "en", "target": "de", "%s": "\xed\xa0\x80"}' % field.encode()
    r = httpx.post(
        f"{url}/translate", content=body, headers={"content-type": "application/json"}, timeout=60
    )
    assert_400(r, f"`{field}` holds an unpaired UTF-16 surrogate")


@pytest.mark.parametrize("field", ["source", "target", "format"])
def test_undecodable_bytes_in_form_fields_get_a_json_answer(url, field):
    # form parsers replace or reinterpret bytes that are not UTF-8: the value is then wrong,
    # and the answer says so as for any other wrong value
    fields = {"q": b"The cat.", "source": b"en", "target": b"de", field: b"\xed\xa0\x80\xff"}
    body, ctype = multipart(fields)
    r = httpx.post(f"{url}/translate", content=body, headers={"content-type": ctype}, timeout=60)
    assert_400(r)
    form = "&".join(
        f"{k}={'%ED%A0%80%FF' if k == field else v.decode()}" for k, v in fields.items()
    )
    r = httpx.post(
        f"{url}/translate",
        content=form.encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},
        timeout=60,
    )
    assert_400(r)


@pytest.mark.parametrize("path", ["/translate", "/detect", "/frontend/settings"])
@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_a_compressed_body_is_a_415_that_names_its_coding(url, path, coding):
    """A body sent with a Content-Encoding is refused as such (it was parsed compressed and
    refused as invalid JSON, with a byte of the gzip header in the message; POST
    /frontend/settings did so still)."""
    raw = b'{"q": "The cat.", "source": "en", "target": "de"}'
    body = gzip.compress(raw) if coding == "gzip" else zlib.compress(raw)
    r = httpx.post(
        f"{url}{path}",
        content=body,
        headers={"content-type": "application/json", "content-encoding": coding},
        timeout=60,
    )
    assert r.status_code == 415, r.text
    assert r.headers["accept-encoding"] == "identity"
    error = r.json()["error"]
    assert f"Content-Encoding {coding}" in error and "uncompressed" in error, error


def test_content_encoding_identity_is_the_body_as_sent(url):
    r = httpx.post(
        f"{url}/translate",
        json={"q": "The cat.", "source": "en", "target": "de"},
        headers={"content-encoding": "identity"},
        timeout=60,
    )
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "path, kwargs, status, needle",
    [
        ("/translate", {"content": b"[1, 2]"}, 400, "must be a JSON object"),
        ("/translate", {"data": {"q": "x", "source": "en", "target": "xx"}}, 400, "'xx'"),
        ("/detect", {"json": {"q": 3}}, 400, "`q` must be a text"),
        ("/detect", {"json": {"text": "Hello"}}, 400, "`q` is missing"),
        ("/nowhere", {}, 404, "no such path: /nowhere"),
        ("/suggest", {}, 403, "Suggestions are disabled"),
    ],
)
def test_the_log_says_why_a_request_was_refused(url, caplog, path, kwargs, status, needle):
    """The access log's line gives the status only; the service's own line gives the error
    that the client was sent, with the request it answers."""
    with caplog.at_level("INFO", logger="app"):
        r = httpx.post(f"{url}{path}", timeout=60, **kwargs)
    assert r.status_code == status, r.text
    lines = [m for m in caplog.messages if f'"POST {path}" {status}' in m]
    assert len(lines) == 1, caplog.messages
    assert needle in lines[0], lines[0]
    assert "127.0.0.1:" in lines[0]


def test_a_refusal_is_logged_on_one_line_whatever_the_client_sent(url, caplog):
    with caplog.at_level("INFO", logger="app"):
        r = httpx.post(
            f"{url}/translate",
            json={"q": "x", "source": "en\nFAKE 200 OK", "target": "de\ud800"[:-1]},
            timeout=60,
        )
    assert r.status_code == 400, r.text
    (line,) = [m for m in caplog.messages if '"POST /translate" 400' in m]
    assert "\n" not in line and "en\\nFAKE 200 OK" in line, line


@pytest.mark.parametrize(
    "fields, said",
    [
        ({"source": "x" * 50_000}, "'xxxxxxxxxx"),
        ({"target": "x" * 50_000}, "'xxxxxxxxxx"),
        ({"source": "auto", "target": "x" * 50_000}, "'xxxxxxxxxx"),
        ({"format": "y" * 50_000}, "format 'yyyyyyyyyy"),
    ],
)
def test_a_long_value_is_quoted_cut_in_the_error_and_the_log(url, caplog, fields, said):
    """A 50,000-character `source` came back whole in its 400 (and the log line, cut, showed
    the answer's raw JSON)."""
    with caplog.at_level("INFO", logger="app"):
        r = httpx.post(
            f"{url}/translate",
            json={"q": "The cat.", "source": "en", "target": "de", **fields},
            timeout=60,
        )
    assert r.status_code == 400, r.text[:300]
    error = r.json()["error"]
    assert error.startswith(said) and len(error) < 250, error
    assert "…' (50000 characters)" in error and "x" * 41 not in error and "y" * 41 not in error
    (line,) = [m for m in caplog.messages if '"POST /translate" 400' in m]
    assert line.endswith(f": {error}"), line


def test_an_error_body_cut_for_the_log_is_logged_as_its_message():
    """The log keeps the first LOGGED_ERROR_BYTES of an error answer: a longer one is logged as
    its message, cut (it was logged as raw JSON)."""
    import json

    from app.main import LOGGED_ERROR_BYTES, cut_error

    body = json.dumps({"error": 'the "pairs": ' + "é, " * 2000}).encode()
    assert len(body) > LOGGED_ERROR_BYTES
    message = cut_error(body[:LOGGED_ERROR_BYTES])
    assert message.startswith('the "pairs": é, é, ') and message.endswith("…")
    assert '{"error"' not in message and "\\u" not in message
    for end in range(11, 40):  # cut anywhere in the message, inside an escape too
        assert cut_error(body[:end]).endswith("…")
    assert cut_error(b"<html>Bad gateway</html>") == "<html>Bad gateway</html>"
    assert cut_error(b"") == "(no body)"


def test_a_malformed_multipart_body_is_logged_once_as_the_clients_mistake(url, caplog):
    """python-multipart's own warning (no client, no path) is not logged beside the 400's line."""
    with caplog.at_level("DEBUG"):
        r = httpx.post(
            f"{url}/translate",
            content=b"garbage",
            headers={"content-type": "multipart/form-data; boundary=xyz"},
            timeout=60,
        )
    assert r.status_code == 400, r.text
    assert "malformed" in r.json()["error"]
    assert [x.name for x in caplog.records if x.levelno >= logging.WARNING] == []
    (line,) = [m for m in caplog.messages if '"POST /translate" 400' in m]
    assert "malformed" in line


def test_a_head_request_refused_is_logged_as_head(url, caplog):
    """HEAD is answered as GET would be, without a body: a 405 names the method sent."""
    with caplog.at_level("INFO", logger="app"):
        r = httpx.head(f"{url}/translate", timeout=60)
    assert r.status_code == 405 and r.headers["allow"] == "OPTIONS, POST"
    (line,) = [m for m in caplog.messages if '"HEAD /translate" 405' in m]
    assert "method HEAD is not allowed on /translate" in line, line


def test_a_soft_hyphen_does_not_cut_a_word_for_the_model(url):
    """A soft hyphen (U+00AD) marks where a word may break: it was sent, and the tokenizer cut
    the word into letters and bytes there. The text is translated as without it."""

    def ask(q):
        body = {"q": q, "source": "en", "target": "de"}
        r = httpx.post(f"{url}/translate", json=body, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["translatedText"]

    plain = ask("The translation is good.")
    assert ask("The trans\u00adla\u00adtion is good.") == plain
    assert "\u00ad" not in plain


@pytest.mark.parametrize("mark", ["\u200b", "\u2060", "\ufeff"])
def test_a_zero_width_space_or_word_joiner_does_not_cut_a_word_for_the_model(url, mark):
    """Invisible as a soft hyphen is, and read as a space (zero-width space) or as bytes (word
    joiner): the shipped en->de model gave 'Die Verwähung ist gut.' for 'The information is
    good.' with a zero-width space inside 'information'. The text is translated as without."""

    def ask(q):
        r = httpx.post(f"{url}/translate", json={"q": q, "source": "en", "target": "de"})
        assert r.status_code == 200, r.text
        return r.json()["translatedText"]

    assert ask(f"The trans{mark}la{mark}tion is good.") == ask("The translation is good.")


def test_an_html_text_is_sent_without_placeholders_once_the_model_never_gave_them_back(url):
    """Each text with inline markup was also decoded with placeholders (`<g1>`), which a model
    that never gives them back decoded for nothing; after 32 of them, only one in 64 is."""
    counts = []
    for k in range(40):
        before = metric(url, "mt_sentences_total")
        body = {
            # (a letter, not a number: one of two digits would be decoded twice)
            "q": f"<p>Paragraph {chr(97 + k % 26)}{k // 26} has <b>bold</b> words in it.</p>",
            "source": "en",
            "target": "de",
            "format": "html",
        }
        r = httpx.post(f"{url}/translate", json=body, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"].count("<b>") == 1
        counts.append(metric(url, "mt_sentences_total") - before)
    # with placeholders, the plain sentence, "bold" alone; then without placeholders
    assert counts == [3] * 32 + [2] * 8
