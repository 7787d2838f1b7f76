"""Constants of the on-disk format (version 1.1, as semidbm 0.4 and 0.5; docs/FORMAT.md).

A database is a directory holding a file ``data``: an 8-byte header
(magic ``SEMI``, major and minor version as big-endian 16-bit numbers)
followed by records. A put record is key length and value length
(big-endian signed 32-bit), the key, the value and a CRC-32 of key and
value. A delete record has value length -1 and no value.
"""

import struct

from .errors import DBMLoadError

MAGIC = b"SEMI"
MAJOR_VERSION = 1
MINOR_VERSION = 1
HEADER = MAGIC + struct.pack("!HH", MAJOR_VERSION, MINOR_VERSION)
HEADER_SIZE = len(HEADER)

#: Size of a record's two length fields.
LENGTHS_SIZE = 8
#: Size of a record's trailing checksum.
CHECKSUM_SIZE = 4
#: The value length that marks a delete record.
DELETED = -1
#: Largest key or value length the signed 32-bit fields can hold.
MAX_LENGTH = 2**31 - 1

DATA_NAME = "data"
#: The temporary file a compaction writes before renaming it over ``data``.
COMPACT_NAME = "data.compact"
#: The file a writer holds its operating-system lock on (never replaced).
LOCK_NAME = "lock"
#: Prefix of the files that keep torn tails cut from ``data``.
TORN_PREFIX = "data.torn-"

#: Bytes of the old log a compaction gets through between two calls of its
#: progress callback. ``compact(progress)`` calls ``progress(done, total)``
#: after each live record that ends at least this far past the last call
#: (``done`` is the offset in the old data file where that record ends),
#: and ``progress(total, total)`` at the end; ``total`` is the old data
#: file's size. Both kernels call it at the same points.
PROGRESS_STEP = 1 << 20
#: The error for a compaction's progress callback that uses the database.
COMPACTING = (
    "semidbm database %s is being compacted: its progress callback cannot use it"
)
#: The error for code that runs in the middle of an operation of the same
#: thread (a signal handler, a finalizer) and uses the database: the
#: interrupted operation has the log half updated.
INTERRUPTED = (
    "semidbm database %s is in the middle of an operation that this code "
    "interrupted (a signal handler or a finalizer): it cannot be used until "
    "that operation returns"
)
#: The error of an iterator whose database gained or lost keys, or was
#: compacted or refreshed, since the iteration began.
CHANGED_DURING_ITERATION = (
    "semidbm database %s changed during iteration (keys were added or "
    "removed, or it was compacted or refreshed)"
)
#: The error of an operation that finds the log other than the database wrote it.
CHANGED_UNDER = "%s changed under the open database at offset %d"
#: The error of a reader's ``refresh()`` that finds the data file shorter
#: than the log it has read: another process cut the file. The reader is
#: closed, since what it indexed is gone.
SHRANK = (
    "%s is %d bytes, shorter than the %d bytes of log this reader has read: "
    "the data file was cut under the open database; the reader is closed"
)

#: Default size of the append buffer, in bytes.
DEFAULT_BUFFER_SIZE = 1024 * 1024
#: Largest append buffer ``open`` accepts (1 GiB): larger ones only delay
#: the write, and a mistyped size should fail before the disk is touched.
MAX_BUFFER_SIZE = 1 << 30


def torn_tail_limit(buffer_size):
    """The longest unparseable tail that open drops without ``recover=True``.

    One interrupted flush leaves at most one buffer unfinished; the
    default size is the floor, since the writer that left the tail may
    have used it.
    """
    return max(buffer_size, DEFAULT_BUFFER_SIZE)


def check_header(header, path):
    """Raise DBMLoadError unless ``header`` is a data file header this version reads."""
    if len(header) < HEADER_SIZE:
        raise DBMLoadError(
            "%s: not a semidbm data file (%d bytes, shorter than the header)"
            % (path, len(header))
        )
    if header[:4] != MAGIC:
        raise DBMLoadError("%s: not a semidbm data file (bad magic number)" % path)
    major, minor = struct.unpack_from("!HH", header, 4)
    if major != MAJOR_VERSION:
        raise DBMLoadError(
            "%s: unsupported format version %d.%d (this semidbm reads %d.x)"
            % (path, major, minor, MAJOR_VERSION)
        )
