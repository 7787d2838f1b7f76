"""Checkpoints: record pairs that pin down a log's bytes, for the index file to name.

A checkpoint is a put of a key made of ``PREFIX`` and ``NONCE_SIZE``
random bytes (its nonce), with an empty value, then a delete of that
key: two ordinary records, which every replay (0.5.1's too) applies and
which leave no key behind. Every log this semidbm creates (a new
database, ``'n'``, every compaction) starts with one, right after the
header; the compiled kernel's writer appends one before each index file
it writes at ``close()`` or ``sync()``. An index file names one checkpoint,
by its offset and nonce, whose writing followed every byte the index file
covers; only a copy of that very log holds those random bytes there, so
only such a copy has those bytes below ``covered`` (docs/FORMAT.md,
"Checkpoints").
"""

import os

from ._records import LENGTHS, encode_delete, encode_put
from .format import DISK_SECTOR, EMPTY_RECORD_SIZE, HEADER_SIZE, header

#: The first bytes of a checkpoint's key; the nonce follows, then padding (zero bytes).
PREFIX = b"\0semidbm checkpt"
#: Random bytes that make each checkpoint's key its own.
NONCE_SIZE = 16
#: A checkpoint's key without padding.
_KEY_SIZE = len(PREFIX) + NONCE_SIZE
#: Where the nonce lies in a checkpoint's bytes: after the put's lengths and the prefix.
_NONCE_AT = LENGTHS.size + len(PREFIX)


def _pair(nonce, padding):
    """The put and the delete of the checkpoint of ``nonce`` whose key has ``padding`` zeros."""
    key = PREFIX + nonce + bytes(padding)
    return encode_put(key, b"") + encode_delete(key)


#: Size of a checkpoint without padding, both records.
SIZE = len(_pair(bytes(NONCE_SIZE), 0))
#: Size of the largest checkpoint ``new`` writes (its padding is less than a sector).
MAX_SIZE = len(_pair(bytes(NONCE_SIZE), DISK_SECTOR - 1))
#: Size of a new log's first bytes, its header and first checkpoint: where its first other
#: record starts.
START_SIZE = HEADER_SIZE + SIZE


def new(offset):
    """The bytes of a checkpoint with a new nonce, to be written at ``offset`` of the data file.

    Its key is padded with as many zero bytes as it takes for the delete
    to reach no sector (``DISK_SECTOR``) that the put does not: a power
    cut that keeps the put whole keeps the delete, and never shows the
    key (as a seal's, docs/FORMAT.md, "Zero runs").
    """
    room = DISK_SECTOR - offset % DISK_SECTOR
    padding = 0
    while 2 * (EMPTY_RECORD_SIZE + _KEY_SIZE + padding) > room >= (
        EMPTY_RECORD_SIZE + _KEY_SIZE + padding
    ):
        padding += 1
    return _pair(os.urandom(NONCE_SIZE), padding)


def new_log(major):
    """The first bytes of a new log of the major format ``major``: its header, a new checkpoint."""
    return header(major) + new(HEADER_SIZE)


def parse(raw):
    """``(nonce, size)`` of the checkpoint that ``raw`` begins with, or None if it begins with none.

    Only the exact pair counts (lengths, key, padding of zeros shorter
    than a sector, both checksums): bytes that begin otherwise, however
    close, hold no checkpoint.
    """
    if len(raw) < LENGTHS.size:
        return None
    key_size, value_size = LENGTHS.unpack_from(raw)
    if value_size != 0 or not _KEY_SIZE <= key_size < _KEY_SIZE + DISK_SECTOR:
        return None
    nonce = bytes(raw[_NONCE_AT:_NONCE_AT + NONCE_SIZE])
    pair = _pair(nonce, key_size - _KEY_SIZE)
    return (nonce, len(pair)) if raw[:len(pair)] == pair else None


def read(raw):
    """The nonce of the checkpoint that ``raw`` begins with, or None (:func:`parse`)."""
    found = parse(raw)
    return None if found is None else found[0]
