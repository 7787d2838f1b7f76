"""Hostile data files, and what a kernel answers when it opens one.

A valid sample file, random damage to it, and the outcome of opening and
reading the result: ``test_kernels`` compares the kernels' outcomes, and
``harness/fuzz.py`` draws its inputs from the same damage.
"""

import struct
import warnings
import zlib

from hypothesis import strategies as st

import semidbm
from semidbm import db
from semidbm.format import HEADER

from .records import put_record


def sample_file():
    """A small valid data file with puts, updates and deletes."""
    records = [put_record(b"k%d" % i, b"v" * (i * 7 % 40)) for i in range(12)]
    records.append(struct.pack("!ii", 2, -1) + b"k3" + struct.pack("!I", zlib.crc32(b"k3")))
    records.append(put_record(b"k5", b"new"))
    return HEADER + b"".join(records)


#: One change to a data file, at an offset taken modulo its length: a cut, a flipped bit,
#: a 32-bit integer written over it, or bytes inserted.
mutations = st.one_of(
    st.tuples(st.just("truncate"), st.integers(0, 10_000)),
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 7)),
    st.tuples(st.just("int32"), st.integers(0, 10_000), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=16)),
)


def mutate(data, changes):
    """``data`` with each of the ``changes`` (drawn from ``mutations``) made in turn."""
    data = bytearray(data)
    for change in changes:
        position = change[1] % (len(data) + 1)
        if change[0] == "truncate":
            del data[position:]
        elif change[0] == "flip" and position < len(data):
            data[position] ^= 1 << change[2]
        elif change[0] == "int32":
            data[position : position + 4] = struct.pack("!i", change[2])
        elif change[0] == "insert":
            data[position:position] = change[2]
    return bytes(data)


def outcome(kernel, path, recover, buffer_size):
    """What opening and reading a possibly hostile file gives: contents or the error."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            database = db.open_with(
                kernel, path, "r", verify_checksums=True, recover=recover, buffer_size=buffer_size
            )
    except semidbm.DBMLoadError as exc:
        return ("load error", str(exc))
    with database:
        items = {}
        for key in database.keys():
            try:
                items[key] = database[key]
            except semidbm.DBMChecksumError as exc:
                items[key] = ("checksum error", str(exc))
    return ("opened", [str(w.message) for w in caught], items)
