"""The compaction's file swap, for both kernels (docs/FORMAT.md, "Compaction").

A kernel writes its live records into a copy beside the data file
(:func:`write_compacted`), flushed to disk, then renames the copy over
the data file (:func:`install_compacted`): a crash leaves either the old
file or the new one, whole. The index file describes the old log, so it
is removed before the rename. Which records are live, and how they are
copied, is the kernel's own.
"""

import os

from . import _checkpoint, _files, _index_file, _messages
from .errors import DBMChecksumError, DBMError
from .format import COMPACT_NAME, DATA_NAME

#: Whether the system refuses to rename a file over one that is mapped
#: (Windows): a view of a value (``Database.view``) keeps the data file
#: mapped, so a compaction cannot install its copy while one is alive.
#: Tests set it to exercise that branch elsewhere.
RENAME_OVER_MAPPED_REFUSED = os.name == "nt"


def check_views_released(path, alive):
    """Refuse a compaction before it writes anything, where ``alive`` views would make it fail.

    ``alive`` is how many views the store has handed out that are still
    held. Where ``RENAME_OVER_MAPPED_REFUSED``, the rename at the end
    would fail with them, after the whole copy was written: a DBMError
    that says so now is clearer.
    """
    if alive and RENAME_OVER_MAPPED_REFUSED:
        raise DBMError(_messages.VIEWS_ALIVE % (path, alive))


def damaged(path, offset, key=None):
    """The DBMChecksumError of a compaction refused at the damaged live record at ``offset``.

    ``offset`` is where the record starts in the data file ``path``;
    ``key`` is its key when that still reads as the key the index holds
    there (its value length or CRC-32 is what failed), None when its key
    is damaged (``all_copied``). The compaction checks
    each record it copies: a damaged one copied would read as sound data
    to every later open, or, where the copy puts a zero byte beside a
    page boundary, end the new log there as lost data and take every
    record after it (docs/FORMAT.md, "Compaction").
    """
    if key is None:
        found = _messages.LIVE_RECORD_DAMAGED % (path, offset)
    else:
        found = _messages.CHECKSUM_MISMATCH % (path, key, offset)
    return DBMChecksumError(found + _messages.COMPACT_DAMAGED)


def all_copied(out, live, copied, lost, copy_by_index):
    """Check that a compaction's walk copied every live record; return how many were left out.

    The walk copies a live record where it lands on the offset the index
    holds for the key it reads there. A length damaged since (in a dead
    record or a live one) moves where it lands next: it jumps over sound
    records, which it does not copy, or lands inside one, where what it
    reads next cannot be trusted. So the walk copies only while what it
    meets is sound, and stops and sets ``lost`` at the first sign of
    damage: a damaged live record, lengths that cannot be a record's or
    run past the log. If ``lost`` is set, or the index's ``live`` records
    are not the walk's ``copied`` ones, the copy is started again from
    the index alone: ``out`` is cut back to the new log's first
    checkpoint and ``copy_by_index()`` copies each live record from the
    index's own offset, in log order, refusing or leaving out
    (``recover``) only one whose own bytes are not sound: its lengths
    run past the log, its key is not the one the index holds there, its
    CRC-32 does not match, or, for the empty record, no sound record
    follows its zero run (docs/durability.md, "Compaction"). It returns
    how many it left out; a walk that copied every live record left out
    none.
    """
    if copied == live and not lost:
        return 0
    os.lseek(out, _checkpoint.START_SIZE, os.SEEK_SET)
    os.ftruncate(out, _checkpoint.START_SIZE)
    return copy_by_index()


def write_compacted(directory, fd, write_records, header):
    """Write a compacted copy of the data file (open as ``fd``) beside it, flushed to disk.

    The copy, ``data.compact`` in ``directory``, gets the data file's
    permissions and the bytes ``header`` (the data file's, or another
    format's: ``compact(format=)``); ``write_records(out_fd)`` writes the
    live records after it. Returns what ``write_records`` returned.
    On failure the copy is removed and the error raised as a DBMError.
    """
    try:
        out = directory.create_like(COMPACT_NAME, fd)
        try:
            _files.write_all(out, header)
            result = write_records(out)
            os.fsync(out)
        finally:
            os.close(out)
    except BaseException as exc:
        directory.discard(COMPACT_NAME)
        if isinstance(exc, OSError) and not isinstance(exc, DBMError):
            raise _files.os_error(exc, "cannot compact %s" % directory.data_path) from None
        raise
    return result


def install_compacted(directory):
    """Remove the index file, rename the compacted copy over the data file, flush the directory.

    No index file outlives the log it describes (docs/FORMAT.md, "Writing an
    index file"): one that cannot be removed fails the compaction as a refused
    rename does. The caller has closed the data file first: Windows
    cannot rename over a file that is open, and so refuses while any
    other process (a reader) has it open; the copy is then removed and
    the data file left as it was. Returns ``(replaced, failure)``:
    whether the rename happened, and the DBMError to raise once the
    caller has reopened the data file, or None.
    """
    replaced = False
    try:
        _index_file.remove(directory)
        directory.replace(COMPACT_NAME, DATA_NAME)
        replaced = True
        directory.fsync()
    except OSError as exc:
        if not replaced:
            directory.discard(COMPACT_NAME)
        return replaced, _files.os_error(exc, "cannot compact %s" % directory.data_path)
    return replaced, None
