"""The index file's header, its trust check, and installing a new one.

``index`` holds the compiled kernel's hash table for the log's first
``covered`` bytes, so that an open maps it and replays only the rest
(docs/FORMAT.md, "The index file"). This module does everything with it
but the table itself: it encodes the header (:func:`encode_header`),
makes the checks 1 and 2 of "Trusting an index file" that decide whether an
open uses the file at all (:func:`load`; the compiled kernel makes them in C,
``_core_pieces/trust.pxi``, but on Windows), installs a new file in place
of the old one (:func:`install`) and removes it before the log it
describes is replaced (:func:`remove`), or when a writer refuses it
(:func:`load`). The compiled kernel writes the
slots and their block checksums, maps them, and makes the checks 3 and
4 as it uses them.

The index file is a cache: a file that fails a check, or that cannot be read
or written, only means that the log is replayed whole.
"""

import os
import stat
import struct
import sys
import zlib
from typing import NamedTuple

from . import _checkpoint, _files
from .format import DATA_NAME, INDEX_NAME, INDEX_TEMP_NAME
from .format import HEADER_SIZE as DATA_HEADER_SIZE

#: Size of the header; the slots start there.
HEADER_SIZE = 4096
#: Size of a slot: a record offset (8 bytes) and a hash of the record's key (4).
SLOT_SIZE = 12
#: Slots per block; each block has a CRC-32 of its own after the slots.
BLOCK_SLOTS = 1024
#: Ranges of the data file whose CRC-32 the header holds.
SAMPLES = 32
MAGIC = b"SEMIINDX"
#: 2 since the header names a checkpoint of the log it was written for; 1 did not.
VERSION = 2
#: Fewest slots a table of the index has: an index file's, and the compiled
#: kernel's private table, which starts there and doubles.
MIN_CAPACITY = 16

#: The header's fields before the samples: magic, version, header size,
#: seed, covered, count, capacity, slot size, slots per block, number of
#: samples and a zero. Little-endian, as the table the kernel maps.
_FIELDS = struct.Struct("<8sIIQQQQIIII")
#: The header's last fields before the samples, the same in every index file.
_SIZES = (SLOT_SIZE, BLOCK_SLOTS, SAMPLES, 0)
#: A sample: offset, length, and the CRC-32 of those bytes of the data file.
_SAMPLE = struct.Struct("<QII")
#: Where the samples lie in the header.
_SAMPLES_START = _FIELDS.size
_SAMPLES_END = _SAMPLES_START + SAMPLES * _SAMPLE.size
#: After the samples: the offset and the nonce of the checkpoint the index file names.
_CHECKPOINT = struct.Struct("<Q%ds" % _checkpoint.NONCE_SIZE)
#: A CRC-32, as the header and each block of slots end with.
_CRC = struct.Struct("<I")
#: Where the header's CRC-32 lies: it covers every byte before it.
_CRC_OFFSET = HEADER_SIZE - _CRC.size
#: Longest first and last sample (the start of the log, and the bytes before ``covered``).
_EDGE_SAMPLE = 4096
#: Longest of the samples between them.
_MIDDLE_SAMPLE = 256
#: How :func:`load` opens ``index``: never through a link (semidbm only ever
#: renames a regular file there), and without waiting, should it be a FIFO.
_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | _files.BINARY
)


def blocks(capacity):
    """The number of blocks of slots, each with its checksum, in a table of ``capacity`` slots."""
    return -(-capacity // BLOCK_SLOTS)


def file_size(capacity):
    """The size of an index file of ``capacity`` slots: header, slots, block checksums."""
    return HEADER_SIZE + SLOT_SIZE * capacity + _CRC.size * blocks(capacity)


def capacity_for(count):
    """The number of slots a new index file of ``count`` keys gets: two thirds full.

    The writer can then add about an eighth more keys before its table
    must grow. (A private table of the compiled kernel is sized by
    ``table_capacity_for``, in ``_core_pieces/table.pxi``.)
    """
    return max(MIN_CAPACITY, count * 3 // 2 + 1)


def sample_ranges(covered):
    """The ``(offset, length)`` of each sampled range of the data file, in the header's order.

    The first and last ``min(4096, covered)`` bytes of the covered log
    (where another log of the same size differs: its header, first keys
    and last records), and 30 ranges of up to 256 bytes spread evenly
    between them.
    """
    edge = min(_EDGE_SAMPLE, covered)
    ranges = [(0, edge)]
    for number in range(1, SAMPLES - 1):
        start = covered * number // (SAMPLES - 1)
        ranges.append((start, min(_MIDDLE_SAMPLE, covered - start)))
    ranges.append((covered - edge, edge))
    return ranges


class Header(NamedTuple):
    """What a trusted index file's header says, and which file it was.

    ``identity`` is ``(st_dev, st_ino, st_size, st_mtime_ns)`` of the
    index file when it was checked: a reader's refresh compares it with
    :func:`identity` to notice a new index file.
    """

    seed: int
    covered: int
    keys: int
    capacity: int
    identity: tuple


def _identity(info):
    """The identity tuple of a file from its ``stat`` result."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def sample_crc(data_fd, offset, length):
    """The CRC-32 of the data file's bytes ``[offset, offset + length)``.

    Raises DBMError (an OSError) if the file ends before them. Every
    open checks 32 samples: the usual read, whole at once, takes one
    call here; a short one is continued by ``_files.read_exactly``.
    """
    data = _files.read_at(data_fd, length, offset)
    if len(data) < length:
        data = _files.read_exactly(data_fd, length, offset, DATA_NAME)
    return zlib.crc32(data)


def encode_header(seed, covered, count, capacity, data_fd, checkpoint):
    """The header of an index file for data file ``data_fd`` (at least ``covered`` long), or None.

    ``checkpoint`` is the offset of the checkpoint the index file names: one
    the writer wrote after every byte below ``covered`` (docs/FORMAT.md,
    "Checkpoints"). Its nonce and the samples are read from the data
    file now: the index file must describe it as it is. None if no checkpoint
    lies there, within the covered log.
    """
    nonce = _read_checkpoint(data_fd, checkpoint, covered)
    if nonce is None:
        return None
    fields = _FIELDS.pack(MAGIC, VERSION, HEADER_SIZE, seed, covered, count, capacity, *_SIZES)
    samples = b"".join(
        _SAMPLE.pack(offset, length, sample_crc(data_fd, offset, length))
        for offset, length in sample_ranges(covered)
    )
    named = _CHECKPOINT.pack(checkpoint, nonce)
    header = (fields + samples + named).ljust(_CRC_OFFSET, b"\0")
    return header + _CRC.pack(zlib.crc32(header))


def _read_checkpoint(data_fd, offset, covered):
    """The nonce of the checkpoint at ``offset`` of the data file ``data_fd``, or None.

    None too unless the checkpoint lies within the log's first ``covered`` bytes.
    """
    if offset < DATA_HEADER_SIZE or offset + _checkpoint.SIZE > covered:
        return None
    return _checkpoint.read(
        _files.read_up_to(data_fd, min(_checkpoint.MAX_SIZE, covered - offset), offset))


def load(directory, data_fd, data_size, writer=False):
    """Open ``index`` in ``directory`` if it is to be trusted; return ``(fd, Header)`` or None.

    Trusted means that it passes the checks 1 and 2 of docs/FORMAT.md,
    "Trusting an index file", against the data file ``data_fd``, whose log the
    caller has seen up to ``data_size``. ``fd`` is open read-only on the
    index file; the caller maps it and closes it. None when there is no index file,
    when it fails a check, or when it cannot be read, whatever the file
    holds; and on a big-endian machine, which cannot map the
    little-endian table. A ``writer`` then removes the file, if it can
    (the index file is a cache, and a refused one stays refused however the
    log grows: docs/FORMAT.md, "Trusting an index file"), so that no process
    spends its checks on it again.
    """
    found = _open_trusted(directory, data_fd, data_size)
    if found is None and writer:
        remove_quietly(directory)
    return found


def remove_quietly(directory):
    """A writer's removal of an index file that it refused (or of none): an error is no matter,
    the index file is a cache (:func:`load`; the compiled kernel's checks in C call it too)."""
    try:
        remove(directory)
    except OSError:
        pass


def remove_refused(directory, data_fd, data_size):
    """A writer's :func:`load` for a kernel that maps no index file: remove it unless trusted.

    The pure-Python kernel never reads the index file, but the compiled one
    may open the log later; the compiled kernel calls this after cutting
    a torn tail, since its open checked the index file against the log before
    the cut.
    """
    found = load(directory, data_fd, data_size, writer=True)
    if found is not None:
        os.close(found[0])


def _open_trusted(directory, data_fd, data_size):
    """:func:`load` without the removal."""
    if sys.byteorder != "little":
        return None
    try:
        fd = directory.open(INDEX_NAME, _OPEN_FLAGS)
    except OSError:
        return None
    header = None
    try:
        header = _check(fd, data_fd, data_size)
    except OSError:
        pass
    finally:
        if header is None:
            os.close(fd)
    return None if header is None else (fd, header)


def _check(fd, data_fd, data_size):
    """The Header of the index file open as ``fd`` if it passes the checks 1 and 2, else None."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size < HEADER_SIZE:
        return None
    raw = _files.read_up_to(fd, HEADER_SIZE, 0)
    header = _check_header(raw, info, data_size)
    if header is None or not _check_checkpoint(raw, header.covered, data_fd):
        return None
    if not _check_samples(raw, header.covered, data_fd):
        return None
    return header


def _check_header(raw, info, data_size):
    """Check 1 on ``raw``, the first bytes of an index file whose ``stat`` result is ``info``.

    Returns its Header, or None if it is not a header this version
    writes for a log of at least ``data_size`` bytes. The file's size
    must be the one its capacity gives: a capacity too large for any
    real file fails there.
    """
    if len(raw) < HEADER_SIZE:
        return None
    if _CRC.unpack_from(raw, _CRC_OFFSET)[0] != zlib.crc32(raw[:_CRC_OFFSET]):
        return None
    magic, version, header_size, seed, covered, count, capacity, *sizes = _FIELDS.unpack_from(raw)
    if (magic, version, header_size, tuple(sizes)) != (MAGIC, VERSION, HEADER_SIZE, _SIZES):
        return None
    if info.st_size != file_size(capacity) or capacity < MIN_CAPACITY or count >= capacity:
        return None
    if not _checkpoint.START_SIZE <= covered <= data_size:
        return None
    return Header(seed, covered, count, capacity, _identity(info))


def _check_checkpoint(raw, covered, data_fd):
    """Check 2, first part: the data file holds the checkpoint the header names, where it says."""
    offset, nonce = _CHECKPOINT.unpack_from(raw, _SAMPLES_END)
    found = _read_checkpoint(data_fd, offset, covered)
    return found is not None and found == nonce


def _check_samples(raw, covered, data_fd):
    """Check 2, second part: the header samples the ranges it should, and the data file holds them.

    The ranges are compared before any is read, so that only the
    expected 32 small ranges of the covered log are ever read.
    """
    samples = list(_SAMPLE.iter_unpack(raw[_SAMPLES_START:_SAMPLES_END]))
    if [(offset, length) for offset, length, _ in samples] != sample_ranges(covered):
        return False
    for offset, length, crc in samples:
        if sample_crc(data_fd, offset, length) != crc:
            return False
    return True


def identity(directory):
    """The identity tuple of ``index`` in ``directory`` now, or None if there is no such file.

    The same tuple as :attr:`Header.identity` for the file :func:`load`
    checked: a reader's refresh loads the index file again when they differ.
    """
    try:
        info = directory.stat(INDEX_NAME)
    except OSError:
        return None
    return _identity(info) if stat.S_ISREG(info.st_mode) else None


def install(directory, data_fd, header, write_body, data_durable=None):
    """Write a new index file and rename it over ``index``; return True if that all worked.

    ``index.new`` gets the permissions of the data file (open as
    ``data_fd``), the ``header`` bytes, then what ``write_body(fd)``
    writes (the slots, then the block checksums). It is flushed, renamed
    over ``index``, and the directory flushed: a crash leaves the old
    index file or the new one. The data file must be on disk before the
    rename: if it was not flushed already, ``data_durable()`` waits for
    that and returns whether it worked (False: no rename). If a step
    fails with an OSError, ``index.new`` is removed and False returned:
    the index file is a cache. Other exceptions are raised, after the same
    removal.
    """
    try:
        _write_new(directory, data_fd, header, write_body)
        if data_durable is not None and not data_durable():
            directory.discard(INDEX_TEMP_NAME)
            return False
        directory.replace(INDEX_TEMP_NAME, INDEX_NAME)
        directory.fsync()
    except OSError:
        directory.discard(INDEX_TEMP_NAME)
        return False
    except BaseException:
        directory.discard(INDEX_TEMP_NAME)
        raise
    return True


def _write_new(directory, data_fd, header, write_body):
    """Write ``index.new``: :func:`install` without the rename."""
    fd = directory.create_like(INDEX_TEMP_NAME, data_fd)
    try:
        _files.write_all(fd, header)
        write_body(fd)
        os.fsync(fd)
    finally:
        os.close(fd)


def remove(directory):
    """Remove ``index`` before the log it describes is replaced (a compaction, ``'n'``).

    The removal is flushed to disk before this returns, so that no crash
    can keep the index file and the new log together. No index file is no error;
    nor is a directory called ``index``, which is no index file (:func:`load`
    never trusts it). Any other failure raises OSError: the caller must
    then leave the log as it is.
    """
    try:
        info = directory.stat(INDEX_NAME)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        return
    directory.remove(INDEX_NAME)
    directory.fsync()
