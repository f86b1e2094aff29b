"""The encoding of an HTML file, found as a browser finds it, and the file written back in it.

A byte order mark wins (UTF-8, UTF-16 either way round). Else the first 1024 bytes are
prescanned for a `<meta charset="...">` or a `<meta http-equiv="Content-Type"
content="text/html; charset=...">`, skipping comments and other tags, as HTML's "prescan a
byte stream to determine its encoding" does; a label browsers do not know is passed over, a
UTF-16 one read as UTF-8. Else the file is UTF-8; a page that declares nothing and is not
UTF-8 is read in the legacy encoding charset-normalizer tells, as a .txt is, and written in
UTF-8 with a byte order mark (app/formats/plain.py's `decode_html`).

Labels mean what the Encoding Standard says they mean, which is what a browser decodes: an
`iso-8859-1`, `latin1` or `us-ascii` page is windows-1252 (the bytes 0x80-0x9F are curly
quotes and dashes, not control characters), `gb2312` is GBK (read with GB18030),
`shift_jis` is Windows' code page 932; in a single-byte encoding, the bytes 0x80-0x9F it
leaves undefined are the control characters of the same number. The "replacement" encodings
(`iso-2022-kr`, `hz-gb-2312`, ...), which a browser shows as one replacement character, are
refused.

The translation is written back in the encoding the file was read in, its markup and
declaration untouched; a character of the translation that the encoding cannot hold (German
text in a windows-1251 page, say) is written as a numeric character reference (`&#1078;`),
which a browser reads as that character wherever translated text stands (text, `<title>` and
the attribute values translated, never inside `<script>`, which is not translated). Where the
translation grew before the declaration and pushed it past the first 1024 bytes, the file is
written in UTF-8 with a byte order mark instead, which wins over any declaration.
"""

from __future__ import annotations

import codecs
import re
from typing import NamedTuple

#: how far into a file a browser looks for its declaration
PRESCAN_BYTES = 1024

#: the Encoding Standard's encodings: name, Python codec (None: "replacement"), labels
_ENCODINGS = [
    ("UTF-8", "utf-8", "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8"),
    ("IBM866", "cp866", "866 cp866 csibm866 ibm866"),
    ("ISO-8859-2", "iso8859_2", "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2"),
    ("ISO-8859-3", "iso8859_3", "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3"),
    ("ISO-8859-4", "iso8859_4", "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4"),
    ("ISO-8859-5", "iso8859_5", "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 iso_8859-5:1988"),
    ("ISO-8859-6", "iso8859_6", "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987"),
    ("ISO-8859-7", "iso8859_7", "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek"),
    ("ISO-8859-8", "iso8859_8", "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 iso88598 iso_8859-8 iso_8859-8:1988 visual"),
    ("ISO-8859-8-I", "iso8859_8", "csiso88598i iso-8859-8-i logical"),
    ("ISO-8859-10", "iso8859_10", "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6"),
    ("ISO-8859-13", "iso8859_13", "iso-8859-13 iso8859-13 iso885913"),
    ("ISO-8859-14", "iso8859_14", "iso-8859-14 iso8859-14 iso885914"),
    ("ISO-8859-15", "iso8859_15", "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9"),
    ("ISO-8859-16", "iso8859_16", "iso-8859-16"),
    ("KOI8-R", "koi8_r", "cskoi8r koi koi8 koi8-r koi8_r"),
    ("KOI8-U", "koi8_u", "koi8-ru koi8-u"),
    ("macintosh", "mac_roman", "csmacintosh mac macintosh x-mac-roman"),
    ("windows-874", "cp874", "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874"),
    ("windows-1250", "cp1250", "cp1250 windows-1250 x-cp1250"),
    ("windows-1251", "cp1251", "cp1251 windows-1251 x-cp1251"),
    ("windows-1252", "cp1252", "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252"),
    ("windows-1253", "cp1253", "cp1253 windows-1253 x-cp1253"),
    ("windows-1254", "cp1254", "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254"),
    ("windows-1255", "cp1255", "cp1255 windows-1255 x-cp1255"),
    ("windows-1256", "cp1256", "cp1256 windows-1256 x-cp1256"),
    ("windows-1257", "cp1257", "cp1257 windows-1257 x-cp1257"),
    ("windows-1258", "cp1258", "cp1258 windows-1258 x-cp1258"),
    ("x-mac-cyrillic", "mac_cyrillic", "x-mac-cyrillic x-mac-ukrainian"),
    ("GBK", "gb18030", "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk"),
    ("gb18030", "gb18030", "gb18030"),
    ("Big5", "big5hkscs", "big5 big5-hkscs cn-big5 csbig5 x-x-big5"),
    ("EUC-JP", "euc_jp", "cseucpkdfmtjapanese euc-jp x-euc-jp"),
    ("ISO-2022-JP", "iso2022_jp", "csiso2022jp iso-2022-jp"),
    ("Shift_JIS", "cp932", "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis"),
    ("EUC-KR", "cp949", "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 ksc5601 ksc_5601 windows-949"),
    ("replacement", None, "csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr replacement"),
    # UTF-16 declared in a page that was read as bytes is not UTF-16: read as UTF-8
    ("UTF-8", "utf-8", "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le unicodefffe utf-16be"),
    # "x-user-defined" (bytes 0x80-0xFF as private-use characters): windows-1252 in a prescan
    ("windows-1252", "cp1252", "x-user-defined"),
]  # fmt: skip


class Encoding(NamedTuple):
    name: str  # as the Encoding Standard writes it (a Content-Type's charset)
    codec: str | None  # Python's codec; None for the "replacement" encoding


_BY_LABEL = {
    label: Encoding(name, codec) for name, codec, labels in _ENCODINGS for label in labels.split()
}
_MULTI_BYTE = frozenset({"utf-8", "gb18030", "big5hkscs", "euc_jp", "iso2022_jp", "cp932", "cp949"})
_SPACE = b"\t\n\x0c\r "


def lookup(label: str) -> Encoding | None:
    """The encoding a label names (in any case, with spaces around it), or None."""
    return _BY_LABEL.get(label.strip("\t\n\x0c\r ").lower())


def prescan(data: bytes, limit: int | None = PRESCAN_BYTES) -> tuple[Encoding | None, str]:
    """(the encoding a `<meta>` in the first `limit` bytes declares, or None; the first label
    found that names none, or "") as HTML's prescan reads them."""
    return _Prescan(data[:limit] if limit else data).run()


class _Prescan:
    def __init__(self, data: bytes):
        self.data, self.pos, self.unknown = data, 0, ""

    def run(self) -> tuple[Encoding | None, str]:
        try:
            return self._run(), self.unknown
        except IndexError:  # the bytes ended inside a tag: nothing more to find
            return None, self.unknown

    def _run(self) -> Encoding | None:
        data = self.data
        while self.pos < len(data):
            at = self.pos
            if data.startswith(b"<!--", at):
                end = data.find(b"-->", at + 2)
                if end < 0:
                    return None
                self.pos = end + 2
            elif data[at : at + 5].lower() == b"<meta" and data[at + 5 : at + 6] in (
                *(bytes([c]) for c in _SPACE),
                b"/",
            ):
                self.pos = at + 6
                found = self._meta()
                if found is not None:
                    return found
                continue
            elif re.match(rb"</?[A-Za-z]", data[at : at + 3]):
                while data[self.pos] not in _SPACE + b">":
                    self.pos += 1
                while self._attribute() is not None:
                    pass
            elif data[at : at + 2] in (b"<!", b"</", b"<?"):
                end = data.find(b">", at + 1)
                if end < 0:
                    return None
                self.pos = end
            self.pos += 1
        return None

    def _meta(self) -> Encoding | None:
        """The encoding a <meta> declares, its attributes read; None to scan on."""
        seen: set[bytes] = set()
        got_pragma, need_pragma, label = False, None, None
        while (attr := self._attribute()) is not None:
            name, value = attr
            if name in seen:
                continue
            seen.add(name)
            if name == b"http-equiv":
                got_pragma = got_pragma or value == b"content-type"
            elif name == b"content" and label is None:
                label = _charset_in_content(value)
                if label is not None:
                    need_pragma = True
            # (a charset attribute wins over a content before it)
            elif name == b"charset":
                label, need_pragma = value, False
        if need_pragma is None or (need_pragma and not got_pragma) or label is None:
            return None
        text = label.decode("latin-1")
        found = lookup(text)
        if found is None and not self.unknown:
            self.unknown = text.strip()
        return found

    def _attribute(self) -> tuple[bytes, bytes] | None:
        """HTML's "get an attribute": (name, value) in lowercase, or None at the tag's end."""
        data = self.data
        while data[self.pos] in _SPACE + b"/":
            self.pos += 1
        if data[self.pos] == ord(">"):
            return None
        name = bytearray()
        while True:
            c = data[self.pos]
            if c == ord("=") and name:
                self.pos += 1
                break
            if c in _SPACE:
                while data[self.pos] in _SPACE:
                    self.pos += 1
                if data[self.pos] != ord("="):
                    return bytes(name), b""
                self.pos += 1
                break
            if c in b"/>":
                return bytes(name), b""
            name.append(c)
            self.pos += 1
        name = name.lower()
        while data[self.pos] in _SPACE:
            self.pos += 1
        quote = data[self.pos]
        if quote in b"\"'":
            end = data.find(bytes([quote]), self.pos + 1)
            if end < 0:
                raise IndexError  # the bytes ended inside the value
            value, self.pos = data[self.pos + 1 : end], end + 1
            return bytes(name), value.lower()
        if quote == ord(">"):
            return bytes(name), b""
        start = self.pos
        while data[self.pos] not in _SPACE + b">":
            self.pos += 1
        return bytes(name), data[start : self.pos].lower()


_CHARSET = re.compile(rb"charset[\t\n\x0c\r ]*=[\t\n\x0c\r ]*", re.IGNORECASE)


def _charset_in_content(value: bytes) -> bytes | None:
    """HTML's "extract a character encoding from a meta element": the label after `charset=`
    in a Content-Type, or None."""
    m = _CHARSET.search(value)
    if m is None:
        return None
    rest = value[m.end() :]
    if rest[:1] in (b'"', b"'"):
        end = rest.find(rest[:1], 1)
        return rest[1:end] if end > 0 else None
    token = re.match(rb"[^\t\n\x0c\r ;]*", rest)
    assert token is not None  # it matches the empty string
    label = token.group()
    return label or None


class HtmlCodec(NamedTuple):
    """An encoding an HTML file was read in, to write it back with."""

    encoding: Encoding

    def decode(self, data: bytes) -> str:
        """Raises UnicodeDecodeError where the bytes are not text in this encoding."""
        codec = self.encoding.codec
        # not "replacement": decode_html refuses it, and no LegacyCodec holds it
        assert codec is not None
        if codec in _MULTI_BYTE:
            return data.decode(codec)
        return codecs.charmap_decode(data, "strict", _decoding_table(codec))[0]

    def encode_text(self, text: str, errors: str = "xmlcharrefreplace") -> bytes:
        """The text in this encoding; a character it cannot hold as a character reference
        (`errors="strict"`: UnicodeEncodeError)."""
        codec = self.encoding.codec
        # not "replacement": decode_html refuses it, and no LegacyCodec holds it
        assert codec is not None
        if codec in _MULTI_BYTE:
            return text.encode(codec, errors)
        return codecs.charmap_encode(text, errors, _encoding_map(codec))[0]


_TABLES: dict[str, str] = {}
_MAPS: dict[str, object] = {}


def _decoding_table(codec: str) -> str:
    """A single-byte codec's 256 characters; a byte 0x80-0x9F it leaves undefined is the
    control character of that number, as the Encoding Standard reads it, and any other
    undefined byte U+FFFE (an error)."""
    if codec not in _TABLES:
        chars = []
        for b in range(256):
            try:
                chars.append(bytes([b]).decode(codec))
            except UnicodeDecodeError:
                chars.append(chr(b) if 0x80 <= b <= 0x9F else "\ufffe")
        _TABLES[codec] = "".join(chars)
    return _TABLES[codec]


def _encoding_map(codec: str):
    if codec not in _MAPS:
        _MAPS[codec] = codecs.charmap_build(_decoding_table(codec))
    return _MAPS[codec]


def declared(data: bytes) -> HtmlCodec | None:
    """The encoding a file without a byte order mark declares in its first 1024 bytes, other
    than UTF-8 (a file that declares none is read as UTF-8); its codec is None for a
    "replacement" encoding."""
    found, _ = prescan(data)
    if found is None or found.codec == "utf-8":
        return None
    return HtmlCodec(found)


def charset(data: bytes) -> str:
    """The charset of a written HTML file for its Content-Type: what its byte order mark or
    its declaration says (the one it was read with, written back unchanged), else utf-8."""
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8"
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    found = declared(data)
    return "utf-8" if found is None else found.encoding.name


def known_codecs() -> set[str]:
    """The Python codecs of the encodings browsers know."""
    return {enc.codec for enc in _BY_LABEL.values() if enc.codec}


def by_codec(codec: str) -> Encoding | None:
    """The encoding a Python codec reads, as the Encoding Standard names it (the one the
    codec's own name labels where several share it: `gb18030`, not GBK), or None."""
    if codec in _BY_LABEL and _BY_LABEL[codec].codec == codec:
        return _BY_LABEL[codec]
    return next((enc for enc in _BY_LABEL.values() if enc.codec == codec), None)
