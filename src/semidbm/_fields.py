"""The fields of a dump: any bytes as printable ASCII, and back.

In a field, the printable ASCII characters other than space, ``%`` and
``#`` stand for themselves and every other byte is ``%XX`` (two hex
digits, upper case when written), as in URLs (RFC 3986), so text stays
readable and any bytes survive (``semidbm.migrate`` describes the whole
dump). Here, apart from the API layer, because the kernels write dump
lines too (``_interface.Store._sorted_lines``); the compiled kernel
encodes by the same rule in C (``_core_pieces/sorted.pxi``).
"""

import binascii
import re

#: The bytes that stand for themselves in a dump field.
LITERAL = bytes(byte for byte in range(0x21, 0x7F) if byte not in b"%#")
_ESCAPED = ["%%%02X" % byte if byte not in LITERAL else chr(byte) for byte in range(256)]
#: The characters a field may hold: the literal ones and "%", which must start an escape.
FIELD_CHARACTERS = LITERAL + b"%"
#: A "%" that does not start an escape, in a field's bytes.
BAD_ESCAPE = re.compile(b"%(?![0-9A-Fa-f]{2})")


def encode_field(data):
    """Return the bytes ``data`` as a dump field (a str of printable ASCII)."""
    if not data.translate(None, LITERAL):
        return data.decode("ascii")
    return "".join(map(_ESCAPED.__getitem__, data))


def decode_field(field):
    """Return the bytes the dump field ``field`` stands for; ValueError if it is malformed."""
    try:
        text = field.encode("ascii")
    except UnicodeEncodeError:
        text = b"\x80"
    if text.translate(None, FIELD_CHARACTERS) or BAD_ESCAPE.search(text):
        raise ValueError("malformed field (only printable ASCII and %XX escapes may appear)")
    # As quoted-printable escapes (=XX, once a literal "=" is one), binascii decodes them in C.
    return binascii.a2b_qp(text.replace(b"=", b"%3D").replace(b"%", b"="))


#: The forms of ``Store._sorted_lines``: how each key's line is made from its key and value.
LINE_FORMS = {
    "keys": lambda key, value: key + b"\n",
    "encoded keys": lambda key, value: encode_field(key).encode("ascii") + b"\n",
    "dump": lambda key, value: ("%s %s\n" % (encode_field(key), encode_field(value))).encode(
        "ascii"
    ),
}
