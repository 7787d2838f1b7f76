"""The semidbm 0.5.1 compatibility cases, as plain data.

Each case is a list of operations and the way the database ends. The
same list is replayed by ``fixtures/make_v051_fixtures.py`` (running the
original semidbm 0.5.1, to build ``fixtures/v051/<name>.db``) and by
``test_compat_v051.py`` (running this project's semidbm, to write the
same database itself). So this module imports no semidbm and uses only
the standard library: both interpreters must be able to import it.

Operations (keys and values are bytes, or str meaning its UTF-8 bytes):

``("set", key, value)``
    ``db[key] = value``.
``("del", key)``
    ``del db[key]`` of a key that is in the database.
``("del_missing", key)``
    ``del db[key]`` of a key that is not in the database. semidbm 0.5.1
    appends a delete record and then raises ``KeyError`` (after which
    0.5.1 can no longer open the file); this project raises ``KeyError``
    and appends nothing. Whoever replays it catches the ``KeyError``.
``("compact",)``
    ``db.compact()``.

Every case is a dict with:

``ops``
    The operations, applied in order to a new database, which is then
    closed normally.
``truncate``
    How many bytes are cut from the end of the data file after it was
    closed, or 0. A cut falls inside the last operation's record, which
    leaves a torn tail: that operation is not part of the contents.
``v051_can_open``
    Whether semidbm 0.5.1 can open the finished file itself.
``description``
    One line for people.

``expected(case)`` gives the contents a reader must find.
"""

import hashlib

#: Size of a record's two length fields and of its checksum.
_LENGTHS_SIZE = 8
_CHECKSUM_SIZE = 4


def to_bytes(data):
    """``data`` as bytes: str is encoded as UTF-8, bytes are kept."""
    if isinstance(data, str):
        return data.encode("utf-8")
    return bytes(data)


def pseudo_random_bytes(size, seed):
    """``size`` bytes that look random and are the same on every Python.

    SHA-256 in counter mode: the digests of ``seed:0``, ``seed:1``, ...
    laid end to end.
    """
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(("%s:%d" % (seed, counter)).encode("ascii")).digest()
        counter += 1
    return bytes(out[:size])


def record_size(op):
    """Size in bytes of the record a "set" or "del" operation appends."""
    kind = op[0]
    if kind == "set":
        return _LENGTHS_SIZE + len(to_bytes(op[1])) + len(to_bytes(op[2])) + _CHECKSUM_SIZE
    if kind in ("del", "del_missing"):
        return _LENGTHS_SIZE + len(to_bytes(op[1])) + _CHECKSUM_SIZE
    raise ValueError("operation %r appends no single record" % (op,))


def replay(ops):
    """Apply ``ops`` to a dict and return it (bytes keys and values).

    Raises ValueError when an operation contradicts the state it meets
    (a "del" of a missing key, a "del_missing" of a present one), so a
    mistake in a case shows up at once.
    """
    contents = {}
    for op in ops:
        kind = op[0]
        if kind == "set":
            contents[to_bytes(op[1])] = to_bytes(op[2])
        elif kind == "del":
            key = to_bytes(op[1])
            if key not in contents:
                raise ValueError("%r deletes a key that is not there" % (op,))
            del contents[key]
        elif kind == "del_missing":
            if to_bytes(op[1]) in contents:
                raise ValueError("%r deletes a key that is there" % (op,))
        elif kind == "compact":
            pass
        else:
            raise ValueError("unknown operation %r" % (op,))
    return contents


def expected(case):
    """The contents a reader must find in the case's finished database.

    For a torn case the last operation, whose record was cut, is left out.
    """
    ops = case["ops"]
    if case["truncate"]:
        ops = ops[:-1]
    return replay(ops)


def _torn(ops, keep, description):
    """A case whose data file keeps only ``keep`` bytes of the last record."""
    size = record_size(ops[-1])
    if not 0 < keep < size:
        raise ValueError("a torn record keeps 1 to %d bytes, not %d" % (size - 1, keep))
    return {
        "ops": ops,
        "truncate": size - keep,
        "v051_can_open": False,
        "description": description,
    }


def _whole(ops, description, v051_can_open=True):
    return {
        "ops": ops,
        "truncate": 0,
        "v051_can_open": v051_can_open,
        "description": description,
    }


#: The 1 MiB value of the "big_value" case.
BIG_VALUE = pseudo_random_bytes(1 << 20, "semidbm-v051-big-value")

_BINARY_OPS = [("set", bytes([byte]), bytes([255 - byte]) * (byte % 5)) for byte in range(256)]
_BINARY_OPS += [
    ("set", bytes(range(256)), bytes(range(255, -1, -1))),
    ("set", b"", b"the empty key"),
    ("set", b"\x00\x00", b"\x00"),
    ("set", b"\xff\xfe\x00not utf-8", b"\xc3\x28"),
    ("set", b"\r\n", b"\r\n\x1a\r"),
    ("set", b"\x00", b"updated NUL key"),
    ("del", b"\xff"),
    ("set", b"key\x00with\x00NULs", b"\x00" * 9),
]

_TORN_PREFIX = [
    ("set", b"first", b"one"),
    ("set", b"second", b"two"),
    ("set", b"third", b"three"),
]

CASES = {
    "puts_and_updates": _whole(
        [
            ("set", b"alpha", b"1"),
            ("set", b"beta", b"2"),
            ("set", "gamma", "3"),
            ("set", b"alpha", b"one"),
            ("set", b"beta", b"two, a longer value than before"),
            ("set", b"alpha", b"uno"),
            ("set", "gamma", b"three"),
            ("set", b"delta", b"4"),
        ],
        "new keys and updates, some keys and values given as str",
    ),
    "deletes": _whole(
        [
            ("set", b"a", b"1"),
            ("set", b"b", b"2"),
            ("set", b"c", b"3"),
            ("set", b"d", b"4"),
            ("del", b"b"),
            ("set", b"b", b"2 again"),
            ("del", b"a"),
            ("del", b"d"),
            ("set", b"e", b"5"),
            ("del", b"e"),
            ("set", "str key", b"x"),
            ("del", "str key"),
        ],
        "deletes, a key set again after its delete, a delete given as str",
    ),
    "delete_missing_key": _whole(
        [
            ("set", b"present", b"p"),
            ("del_missing", b"never set"),
            ("set", b"after", b"a"),
            ("del", b"present"),
            ("del_missing", b"present"),
            ("set", b"never set", b"set after its stray delete"),
            ("del_missing", "missing \u043a\u043b\u044e\u0447"),
            ("set", b"present", b"back"),
        ],
        "0.5.1's delete records for missing keys; 0.5.1 cannot open the result",
        v051_can_open=False,
    ),
    "compacted": _whole(
        [
            ("set", b"k1", b"v1"),
            ("set", b"k2", b"v2"),
            ("set", b"k3", b"v3"),
            ("set", b"k4", b"v4"),
            ("set", b"k5", b"v5"),
            ("set", b"k2", b"v2 updated"),
            ("del", b"k3"),
            ("set", b"k1", b"v1 updated"),
            ("set", b"k6", b"v6"),
            ("compact",),
            ("set", b"k7", b"v7"),
            ("set", b"k4", b"v4 updated after compaction"),
            ("del", b"k5"),
        ],
        "updates and deletes, compact(), more writes; 0.5.1 compacts in another order",
    ),
    "compacted_same_order": _whole(
        [
            ("set", b"a", b"1"),
            ("set", b"b", b"2"),
            ("set", b"c", b"3"),
            ("set", b"d", b"4"),
            ("del", b"b"),
            ("set", b"b", b"2 again"),
            ("set", b"b", b"2 updated"),
            ("del", b"d"),
            ("compact",),
            ("set", b"e", b"5"),
        ],
        "a compaction where 0.5.1's record order is the format's order",
    ),
    "compacted_all_deleted": _whole(
        [
            ("set", b"a", b"1"),
            ("set", b"b", b"2"),
            ("del", b"a"),
            ("del", b"b"),
            ("compact",),
        ],
        "everything deleted, then compact(): a data file with only the header",
    ),
    "empty_values": _whole(
        [
            ("set", b"e1", b""),
            ("set", "e2", ""),
            ("set", b"e3", b"x"),
            ("set", b"e3", b""),
            ("set", b"e1", b"no longer empty"),
            ("set", b"e4", b""),
        ],
        "empty values, set directly and by update",
    ),
    "big_value": _whole(
        [
            ("set", b"before", b"small"),
            ("set", b"big", BIG_VALUE),
            ("set", b"after", b"tail"),
        ],
        "a 1 MiB pseudo-random value between two small ones",
    ),
    "binary_keys": _whole(
        _BINARY_OPS,
        "every single-byte key (NUL to 0xff), the empty key, keys that are not UTF-8",
    ),
    "unicode_keys": _whole(
        [
            (
                "set",
                "\u043a\u043b\u044e\u0447",
                "\u0437\u043d\u0430\u0447\u0435\u043d\u0438\u0435",
            ),
            ("set", "\u952e", b"bytes value"),
            ("set", "\U0001f511", "\U0001f5dd"),
            ("set", "caf\u00e9", "precomposed"),
            ("set", "cafe\u0301", "combining accent"),
            ("set", "\u043a\u043b\u044e\u0447".encode("utf-8"), b"updated through its bytes"),
            ("del", "\u952e"),
            ("set", "\u00fcmlaut \u00df", ""),
        ],
        "non-ASCII str keys and values, stored as UTF-8",
    ),
    "torn_lengths": _torn(
        _TORN_PREFIX + [("set", b"last", b"cut in its length fields")],
        keep=3,
        description="the last record cut inside its two length fields",
    ),
    "torn_key": _torn(
        _TORN_PREFIX + [("set", b"a long last key", b"value")],
        keep=_LENGTHS_SIZE + 6,
        description="the last record cut inside its key",
    ),
    "torn_value": _torn(
        _TORN_PREFIX + [("set", b"second", b"an update cut inside its value")],
        keep=_LENGTHS_SIZE + len(b"second") + 10,
        description="the last record, an update, cut inside its value",
    ),
    "torn_checksum": _torn(
        _TORN_PREFIX + [("set", b"last", b"complete but its checksum")],
        keep=_LENGTHS_SIZE + len(b"last") + len(b"complete but its checksum") + 2,
        description="the last record cut inside its checksum",
    ),
    "torn_delete": _torn(
        _TORN_PREFIX + [("del", b"first")],
        keep=_LENGTHS_SIZE + len(b"first") + 1,
        description="the last record, a delete, cut inside its checksum",
    ),
}
