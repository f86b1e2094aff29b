"""The legacy encoding of a .txt, .srt or .md file that is not UTF-8 and has no byte order
mark, and the file written back in it.

A file that is not UTF-8 and holds no NUL is in a legacy encoding (windows-1252 from Notepad or
a subtitle site, KOI8-R, Shift_JIS, ...), told by charset-normalizer among the encodings
browsers know (app/html_charset.py): the candidates that read the bytes with the least
disorder must all give the same text, or only one of them show the letters of a language;
else, where windows-1252 is among them, it is taken, as a browser takes it for a page that
declares nothing (a short "Café" also reads as windows-1251 "Cafй"); else the file is refused,
naming what it reads as. A file with more UTF-8 characters than bytes that are not UTF-8 is
refused too: it is UTF-8 with a broken part.

windows-1252 and windows-1254 differ in six letters only: Ð Ý Þ ð ý þ (Icelandic, Faroese)
are Ğ İ Ş ğ ı ş (Turkish) in windows-1254. charset-normalizer cannot tell them apart: both
readings of a Turkish text have as little disorder (the windows-1254 one sometimes more, ı
beside other letters), and its languages are told by letter frequencies, which the two
readings share but for those six (both are "Turkish" in a long text, neither in a short one).
So where windows-1252 is taken and the file holds one of those bytes, the language of its
windows-1254 reading decides: Turkish (py3langid, as POST /detect identifies languages, over
every language it knows: 1 s and about 80 MB once, the first time a file or `source: auto`
needs it, app/detect.py's `full_identifier`) takes windows-1254, the encoding written for
Turkish; anything else keeps windows-1252, so an Icelandic text's "Það" does not become "Şağ".

The translation is written back in that encoding, or, where a character of it does not fit
(German into windows-1251), the whole file in UTF-8 with a byte order mark, which editors and
subtitle players read as UTF-8; the written bytes carry the charset for the Content-Type.
"""

from __future__ import annotations

import codecs
import re
from typing import NamedTuple

from charset_normalizer import from_bytes

from ..detect import full_identifier
from ..html_charset import Encoding, HtmlCodec, by_codec, known_codecs
from . import FormatError


def _not_broken_utf8(data: bytes, kind: str, at: int) -> None:
    """FormatError for a UTF-8 file with bytes that are not UTF-8 among more characters that
    are (a character cut off at its end, a line pasted in another encoding): read in a legacy
    encoding, each of its characters would be two or three wrong ones (`Ã©` for `é`). In a
    legacy encoding, bytes that happen to make a UTF-8 character are fewer than those that do
    not."""
    text = data.decode("utf-8", "replace")
    broken = text.count("\ufffd")
    wide = len(text) - len(text.encode("ascii", "ignore")) - broken
    if wide > broken:
        raise FormatError(
            f"the {kind} file is not valid UTF-8 text (at byte {at}), though {wide} of its "
            f"characters are UTF-8: {broken} bytes are not (a character cut off, or a part in "
            "another encoding); save it all as UTF-8"
        )


#: the codecs of the encodings browsers know (app/html_charset.py), other than UTF-8 (a file
#: that is not UTF-8 is in one of these, or not text) and ISO-2022-JP (7-bit: it is valid UTF-8)
_LEGACY = sorted(known_codecs() - {"utf-8", "iso2022_jp"})
#: candidates whose disorder (charset-normalizer's chaos) is this close to the least are
#: as likely
_TIE = 0.02


def detected(data: bytes, kind: str, at: int) -> tuple[str, LegacyCodec]:
    """A file that is not UTF-8, in the legacy encoding it is told to be in (see the module
    docstring), or FormatError."""
    _not_broken_utf8(data, kind, at)
    matches = list(from_bytes(data, cp_isolation=_LEGACY))
    if not matches:
        raise FormatError(
            f"the {kind} file is not valid UTF-8 text (at byte {at}), nor text in another "
            "encoding that could be recognised; save it as UTF-8"
        )
    group = [m for m in matches if m.chaos <= matches[0].chaos + _TIE]
    if len({str(m) for m in group}) > 1:
        known = [m for m in group if m.coherence > 0]  # a language recognised in its letters
        if len({str(m) for m in known}) == 1:
            group = known
    names = {name for m in group for name in m.could_be_from_charset}
    if "cp1252" in names:
        codec = "cp1254" if _turkish(data) else "cp1252"
    elif len({str(m) for m in group}) == 1:
        codec = group[0].encoding
    else:
        reads = ", ".join(  # from the first byte that is not UTF-8, to the end of its line
            f"{_encoding(m.encoding).name} ({_excerpt(data[at : at + 24], m.encoding)!r})"
            for m in group[:4]
        )
        raise FormatError(
            f"the {kind} file is not valid UTF-8 text (at byte {at}), and its encoding could "
            f"not be told: it reads as {reads}; save it as UTF-8"
        )
    legacy = LegacyCodec(_encoding(codec))
    try:
        text = legacy.decode(data)
    except UnicodeDecodeError as exc:  # past the parts charset-normalizer read
        raise FormatError(
            f"the {kind} file is not valid UTF-8 text (at byte {at}), nor valid "
            f"{legacy.encoding.name} text (at byte {exc.start}), the encoding it seemed to "
            "be in; save it as UTF-8"
        ) from None
    return text, legacy


#: the bytes whose letters windows-1252 and windows-1254 read differently (Ð Ý Þ ð ý þ, Ğ İ Ş ğ ı ş)
_TURKISH_LETTERS = re.compile(rb"[\xd0\xdd\xde\xf0\xfd\xfe]")
#: the characters of a file read to identify its language
_IDENTIFIED_CHARS = 10_000


def _turkish(data: bytes) -> bool:
    """Whether a file that reads as windows-1252 is Turkish in windows-1254 (see the module
    docstring)."""
    if not _TURKISH_LETTERS.search(data):
        return False  # the two readings are the same text
    try:
        text = data.decode("cp1254")  # (strict: not where windows-1254 has no character)
    except UnicodeDecodeError:
        return False
    return full_identifier().classify(text[:_IDENTIFIED_CHARS])[0] == "tr"


def _encoding(codec: str) -> Encoding:
    found = by_codec(codec)
    assert found is not None, codec  # one of _LEGACY
    return found


def _excerpt(data: bytes, codec: str) -> str:
    return (data.decode(codec, "replace").splitlines() or [""])[0].strip()


class EncodedText(bytes):
    """A written text file, with the charset it is in for its Content-Type."""

    charset: str


class LegacyCodec(NamedTuple):
    """A legacy encoding a text file was read in; `encode_text` writes the translation in it,
    or, where a character does not fit, in UTF-8 with a byte order mark."""

    encoding: Encoding

    def decode(self, data: bytes) -> str:
        return HtmlCodec(self.encoding).decode(data)

    def encode_text(self, text: str) -> bytes:
        try:
            out, charset = HtmlCodec(self.encoding).encode_text(text, "strict"), self.encoding.name
        except UnicodeEncodeError:
            out, charset = codecs.BOM_UTF8 + text.encode("utf-8"), "utf-8"
        written = EncodedText(out)
        written.charset = charset
        return written
