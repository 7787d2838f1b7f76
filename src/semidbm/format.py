"""Constants of the on-disk format (1.1, as semidbm 0.4 and 0.5, 2.0 and 2.1; docs/FORMAT.md).

A database is a directory holding a file ``data``: an 8-byte header
(magic ``SEMI``, major and minor version as big-endian 16-bit numbers)
followed by records. A put record is key length and value length
(big-endian signed 32-bit), the key, the value and a CRC-32 of key and
value. A delete record has value length -1 and no value. Format 2.0
adds the batch record (value length -2), whose records count all or not
at all; a database has it only if asked for (``BATCH_FORMAT``). Format
2.1 adds the expiry record (value length -3), which gives the put before
it in a batch a time at which it expires (``EXPIRY_VERSION``).
"""

from __future__ import annotations

import struct

from ._settings import DEFAULT_BUFFER_SIZE
from .errors import DBMLoadError

MAGIC = b"SEMI"
#: The header's major and minor version, after the magic.
_VERSION = struct.Struct("!HH")
#: The version each major format is written as: 1.1 (0.5.1's, the default) and 2.1 (batches,
#: and expiry records).
VERSIONS = {1: (1, 1), 2: (2, 1)}
#: The major format a new database gets unless ``open(format=)`` says otherwise.
DEFAULT_FORMAT = 1
#: The first major format with batch records (docs/FORMAT.md, "Batches").
BATCH_FORMAT = 2
HEADER_SIZE = 8

#: Size of a record's two length fields.
LENGTHS_SIZE = 8
#: Size of a record's trailing checksum.
CHECKSUM_SIZE = 4
#: The value length that marks a delete record.
DELETED = -1
#: The value length that marks a batch record (format 2 on): its key length is the body's.
BATCH = -2
#: The value length that marks an expiry record (format 2.1 on, in a batch's body only, right
#: after a put of its key): the time at which that put expires (docs/FORMAT.md, "Expiry").
EXPIRES = -3
#: The first format version with expiry records.
EXPIRY_VERSION = (2, 1)
#: An expiry record's time: milliseconds since the Unix epoch, big-endian unsigned 64-bit.
EXPIRY_TIME_SIZE = 8
#: A batch record's bytes before its body: the two lengths and the body's CRC-32.
BATCH_HEAD_SIZE = LENGTHS_SIZE + CHECKSUM_SIZE
#: Largest key or value length the signed 32-bit fields can hold.
MAX_LENGTH = 2**31 - 1
#: A record with neither key nor value bytes: twelve zero bytes (docs/FORMAT.md, "Zero runs").
EMPTY_RECORD_SIZE = LENGTHS_SIZE + CHECKSUM_SIZE
#: The unit in which a disk keeps or loses file data at a power cut: a
#: page it did not write reads as zeros (docs/FORMAT.md, "Lost pages").
DISK_PAGE = 4096
#: The smallest unit a disk writes whole (a sector): where a seal may not be split.
DISK_SECTOR = 512

DATA_NAME = "data"
#: The temporary file a compaction writes before renaming it over ``data``.
COMPACT_NAME = "data.compact"
#: The file a writer holds its operating-system lock on (never replaced).
LOCK_NAME = "lock"
#: The file shared writers take turns on, one operation at a time (never replaced).
WRITE_LOCK_NAME = "lock.write"
#: The bytes of ``lock.write`` where shared writers' turns are its mutex (FORMAT.md, "Shared
#: writers"); where they are an ``flock``, it holds only its first 8, the count of data files
#: that shared writers replaced.
WRITE_LOCK_SIZE = 128
#: Prefix of the files that keep torn tails cut from ``data``.
TORN_PREFIX = "data.torn-"
#: The index file: a cache of the compiled kernel's table for a first part of the log.
INDEX_NAME = "index"
#: The temporary file a new index file is written to before it is renamed over ``index``.
INDEX_TEMP_NAME = "index.new"


def torn_tail_limit(buffer_size: int) -> int:
    """The longest unparseable tail that open drops without ``recover=True``.

    One interrupted flush leaves at most one buffer unfinished; the
    default size is the floor, since the writer that left the tail may
    have used it.
    """
    return max(buffer_size, DEFAULT_BUFFER_SIZE)


def header(major: int) -> bytes:
    """The data file header of the major format ``major`` (a key of ``VERSIONS``)."""
    return MAGIC + _VERSION.pack(*VERSIONS[major])


#: The header of a file in the default format, 1.1.
HEADER = header(DEFAULT_FORMAT)


def check_format(major: object) -> int:
    """Return ``major`` if it is a major format this semidbm writes (1 or 2), else raise.

    For ``open(format=)`` and ``compact(format=)``: ValueError for another
    number, TypeError for what is not an integer.
    """
    if not isinstance(major, int) or isinstance(major, bool):
        raise TypeError("format must be 1 or 2, not %r" % (major,))
    if major not in VERSIONS:
        raise ValueError("format must be 1 or 2, not %d" % major)
    return major


def check_header(header: bytes, path: str) -> tuple[int, int]:
    """Raise DBMLoadError unless ``header`` is a data file header this version reads.

    Returns the file's format version, ``(major, minor)``: major 1 (any
    minor, as 0.5.1 reads them) or 2.
    """
    if len(header) < HEADER_SIZE:
        raise DBMLoadError(
            "%s: not a semidbm data file (%d bytes, shorter than the header)"
            % (path, len(header))
        )
    if header[:4] != MAGIC:
        raise DBMLoadError("%s: not a semidbm data file (bad magic number)" % path)
    major, minor = _VERSION.unpack_from(header, len(MAGIC))
    if major not in VERSIONS:
        raise DBMLoadError(
            "%s: unsupported format version %d.%d (this semidbm reads 1.x and 2.x)"
            % (path, major, minor)
        )
    return major, minor
