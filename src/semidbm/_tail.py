"""Torn tails: what opening does with bytes after the last complete record of the log.

Both kernels call :func:`settle_tail` when their replay at open stops
before the end of the file and no writer is at work (a writer's record
in progress is no tail); the API layer warns of the tail it reports
(docs/FORMAT.md, "Torn tails").
"""

import mmap
import os
import re

from . import _files, _messages
from ._records import LENGTHS, checksum_matches, cut_batch, walk, whole_batch
from .errors import DBMLoadError
from .format import (
    BATCH,
    DELETED,
    EMPTY_RECORD_SIZE,
    LENGTHS_SIZE,
    TORN_PREFIX,
    torn_tail_limit,
)

#: How far back from the end of the file ``log_goes_on`` looks for a last record.
LAST_RECORD_SEARCH = 1 << 20
_ZERO_RUNS = re.compile(b"\\0+")


def settle_tail(fd, directory, end, size, writable, buffer_size, recover, batches):
    """Deal with the bytes from ``end`` to ``size`` that the index rebuild could not parse.

    The tail is torn, and left out, when it is no longer than one write
    buffer, when the file ends inside the tail's one record (a record
    larger than the buffer is written straight to the file, so a killed
    writer can leave any part of it), or when it starts where a power cut
    left zeros (``starts_lost_data``), whatever its length. A writer cuts a torn tail off at
    once, keeping its bytes beside the data file. A longer tail after
    which a complete record ends the file means a damaged length inside
    the log: DBMLoadError, unless ``recover``.

    Returns None when there is no tail, else ``(end, size - end)``: where
    the torn tail left out starts and its length, for the API layer's
    TornTailWarning. If the cut fails, the DBMError raised carries that
    pair as ``torn_tail``, so the warning still says what was found.
    ``batches``: the file is of format 2, with batch records.
    """
    if end == size:
        return None
    path = directory.data_path
    tail = size - end
    if (
        tail > torn_tail_limit(buffer_size)
        and not recover
        and not starts_lost_data(_files.read_at(fd, LENGTHS_SIZE, end), tail, batches)
        and log_goes_on(fd, end, size, path, batches)
    ):
        raise DBMLoadError(_messages.DAMAGED_LENGTH % (path, tail, end, TORN_PREFIX, end))
    if writable:
        try:
            cut_torn_tail(fd, directory, end)
        except OSError as exc:
            error = _files.os_error(exc, "cannot cut the torn tail of %s" % path)
            error.torn_tail = (end, tail)
            raise error from None
    return end, tail


def starts_lost_data(head, tail, batches):
    """True if a torn tail of ``tail`` bytes starting with ``head`` is where a power cut left zeros.

    ``head`` is the tail's first bytes (at least the lengths). The replay
    stops before a complete record only for what a lost page leaves
    (docs/FORMAT.md, "Zero runs" and "Lost pages"): empty records (zero
    bytes) that no sound record follows, or a record with zeros and a
    failing checksum; with ``batches`` (format 2), a batch record whose
    body's checksum fails ("Batches"). A tail that starts so is lost
    data, however long, not a cut record.
    """
    if len(head) < LENGTHS_SIZE:
        return False
    key_length, value_length = LENGTHS.unpack_from(head)
    if key_length == 0 and value_length == 0:
        return True
    if batches and value_length == BATCH and key_length > 0:
        return EMPTY_RECORD_SIZE + key_length <= tail
    if key_length < 0 or value_length < DELETED:
        return False
    return EMPTY_RECORD_SIZE + key_length + max(value_length, 0) <= tail


def log_goes_on(fd, start, size, path, batches):
    """True if records written after the unreadable tail's first record end the file.

    The unreadable tail from ``start`` is one record that claims to
    reach past the end of the file. If a write was cut short, the file
    ends inside that record; if instead its length field was damaged,
    the records written after it are still there and the last of them
    ends where the file ends (:func:`_ends_with_a_record`). With
    ``batches`` (format 2), the records of a batch's body are such
    records too: a batch cut short at ``start`` (``_records.cut_batch``)
    is where the file ends, whatever records its body ends with.
    ``path`` is the data file's.
    """
    return _ends_with_a_record(fd, start, size, path, batches) and not (
        batches and _batch_cut_short(fd, start, size)
    )


def _batch_cut_short(fd, start, size):
    """True if the ``size`` bytes of the file ``fd`` end in a batch cut short at ``start``.

    The file is mapped, not read: the cut batch may be as long as a
    record can be.
    """
    with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as data:
        return cut_batch(data, start, size)


def _ends_with_a_record(fd, start, size, path, batches):
    """True if a complete record with a valid checksum ends exactly at the end of the file.

    Only the last ``LAST_RECORD_SEARCH`` bytes after ``start`` are
    searched, and a record with neither key nor value bytes (its
    checksum is 0, and any run of zero bytes reads as such records) is
    no evidence. With ``batches``, a batch record whose body's checksum
    matches is evidence as well.
    """
    first = max(start + 1, size - LAST_RECORD_SEARCH)
    data = _files.read_at(fd, size - first, first)
    for run in _ZERO_RUNS.finditer(data, 0, len(data) - EMPTY_RECORD_SIZE + 1):
        # A key length below 2**24 starts with a zero byte; from eight zero
        # bytes on, lengths read (0, 0): only a run's last bytes can start one.
        for position in range(max(run.start(), run.end() - LENGTHS_SIZE), run.end()):
            if _ends_with_a_record_from(data, position, path, batches):
                return True
    return False


def _ends_with_a_record_from(data, position, path, batches):
    """True if ``data`` ends with a record from ``position`` that is evidence the log goes on.

    With ``batches``, a batch record whose body's checksum matches is one.
    """
    if batches and len(data) - position >= LENGTHS_SIZE:
        body_length, value_length = LENGTHS.unpack_from(data, position)
        if value_length == BATCH:
            return (
                0 < body_length == len(data) - position - EMPTY_RECORD_SIZE
                and whole_batch(data, position, body_length, len(data))
            )
    try:
        record = next(walk(data, position, path), None)
    except DBMLoadError:
        return False  # no record has such lengths
    if record is None:
        return False  # the record there runs past the end
    _, key, value_start, _, end = record
    return (
        end == len(data)
        and end - position > EMPTY_RECORD_SIZE
        and checksum_matches(data, key, value_start, end)
    )


def cut_torn_tail(fd, directory, offset):
    """Cut the data file (open as ``fd``) back to ``offset``, keeping the cut bytes.

    The bytes from ``offset`` to the end go to ``data.torn-OFFSET`` in the
    database's ``directory`` (``.1``, ``.2`` ... added if that name is
    taken), flushed to disk before the data file is truncated, so a wrong
    guess about what is torn never destroys anything; if they cannot be
    kept, nothing is cut. Returns the name of the kept file.
    """
    end = os.fstat(fd).st_size
    keep_fd, keep_name = directory.create_unused("%s%d" % (TORN_PREFIX, offset))
    try:
        try:
            position = offset
            while position < end:
                chunk = _files.read_at(fd, min(end - position, 1 << 20), position)
                if not chunk:
                    break
                _files.write_all(keep_fd, chunk)
                position += len(chunk)
            os.fsync(keep_fd)
        finally:
            os.close(keep_fd)
    except BaseException:
        directory.discard(keep_name)  # a partial copy (the disk is full, say) keeps nothing
        raise
    directory.fsync()
    os.ftruncate(fd, offset)
    os.fsync(fd)
    return keep_name
