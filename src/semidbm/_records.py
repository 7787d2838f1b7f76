"""The records of the log: their encoding, and the one walk over them that Python code makes.

A record is its key length and value length (``LENGTHS``), the key, the
value and the CRC-32 of key and value (``CHECKSUM``); a delete record has
the value length ``DELETED`` and no value (docs/FORMAT.md, "The data
file"). The pure kernel encodes its records here and walks the log with
:func:`walk` to rebuild its index and to copy the live records when it
compacts; the tools walk it to examine a data file (``_checks``), and the
torn-tail policy (``_tail``) to look for a record that ends the file. The
compiled kernel parses the log in C, by the same rules.

The constants stay in ``format``, which every module imports (``_messages``
among them); this module raises an error with a message from
``_messages``, so it could not live there without an import cycle.
"""

import struct
from zlib import crc32

from . import _messages
from .errors import DBMLoadError
from .format import CHECKSUM_SIZE, DELETED, LENGTHS_SIZE

#: A record's key length and value length: big-endian signed 32-bit.
LENGTHS = struct.Struct("!ii")
#: A record's trailing CRC-32: big-endian unsigned 32-bit.
CHECKSUM = struct.Struct("!I")


def checksum(key, value=b""):
    """The CRC-32 a record of ``key`` and ``value`` ends with (a delete record's: no value)."""
    return crc32(value, crc32(key))


def encode_put(key, value):
    """The bytes of a record giving the bytes ``key`` the bytes ``value``."""
    return LENGTHS.pack(len(key), len(value)) + key + value + CHECKSUM.pack(checksum(key, value))


def encode_delete(key):
    """The bytes of a record deleting the bytes ``key``."""
    return LENGTHS.pack(len(key), DELETED) + key + CHECKSUM.pack(checksum(key))


def checksum_matches(data, key, value_start, end):
    """Whether the CRC-32 that ends the record of ``key`` at ``end`` matches key and value.

    The record is as :func:`walk` yields it: its value (none for a delete)
    lies in ``data`` from ``value_start`` to the checksum.
    """
    value_end = end - CHECKSUM_SIZE
    (stored,) = CHECKSUM.unpack_from(data, value_end)
    return checksum(key, data[value_start:value_end]) == stored


def corrupt_record(path, offset, key_length, value_length):
    """The error of a record at ``offset`` with a negative key length or a value length below -1.

    Nothing after it can be read: the lengths are what finds the next
    record. A DBMLoadError, as the compiled kernel raises for it, with
    ``offset`` kept on it for the tools.
    """
    error = DBMLoadError(_messages.CORRUPT_RECORD % (path, offset, key_length, value_length))
    error.offset = offset
    return error


def walk(data, start, path, base=0, end=None):
    """Yield the complete records of ``data`` from ``start`` on, in log order.

    ``data`` (bytes or a memory map) holds a data file from its offset
    ``base`` on; ``start``, ``end`` and what is yielded are positions in
    ``data``. Each record comes as ``(start, key, value_start,
    value_length, end)``: where it starts, its key (what slicing ``data``
    gives), where its value starts, its value length (``DELETED`` for a
    delete record, which has no value) and where it ends, after its
    checksum. Checksums are not read (:func:`checksum_matches` does).

    Each record's lengths are checked before they are used: impossible
    ones raise :func:`corrupt_record`'s DBMLoadError, with the record's
    offset in the file, naming ``path``. The walk stops at ``end``
    (default: the end of ``data``) or at the start of a record that runs
    past it, an incomplete last record: where the last record yielded
    ends, or ``start`` if none was.
    """
    if end is None:
        end = len(data)
    unpack_lengths = LENGTHS.unpack_from
    position = start
    # The loop of the pure kernel's replay: kept to the arithmetic it needs.
    while end - position >= LENGTHS_SIZE:
        key_length, value_length = unpack_lengths(data, position)
        if key_length < 0 or value_length < DELETED:
            raise corrupt_record(path, base + position, key_length, value_length)
        key_start = position + LENGTHS_SIZE
        value_start = key_start + key_length
        record_end = value_start + (value_length if value_length > 0 else 0) + CHECKSUM_SIZE
        if record_end > end:
            return
        yield position, data[key_start:value_start], value_start, value_length, record_end
        position = record_end
