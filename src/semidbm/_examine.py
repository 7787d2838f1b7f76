"""What a walk over the log tells: the numbers of ``stats``, the damage ``verify`` finds.

Both come from one walk over the records of the data file (:class:`DataFile`),
made by the kernel in use (``summarize_log``: in C with the compiled
kernel), which replays the log as an open does to learn which record
holds each key's current value.
"""

import mmap
import os

from . import _checkpoint, _files, _lock, _tail, db
from ._settings import DEFAULT_BUFFER_SIZE
from .errors import DBMLoadError
from .format import BATCH_FORMAT, HEADER_SIZE, LENGTHS_SIZE, check_header, torn_tail_limit


class DataFile:
    """A semidbm data file opened read-only and mapped, for the tools.

    Opening checks the header (:class:`semidbm.DBMLoadError` if it is
    not a data file this version reads) and maps the file, whose size is
    taken once: records a writer appends later are not seen. Use as a
    context manager, or call :meth:`close`.
    """

    def __init__(self, path):
        self.path = path
        fd = _files.open_data(path, False)
        try:
            self.size = os.fstat(fd).st_size
            self.version = check_header(_files.read_at(fd, HEADER_SIZE, 0), path)
            self.map = mmap.mmap(fd, self.size, access=mmap.ACCESS_READ)
        except OSError as exc:
            if isinstance(exc, DBMLoadError):
                raise
            raise _files.os_error(exc, "cannot read %s" % path) from None
        finally:
            os.close(fd)

    def head(self, offset):
        """The lengths of the record at ``offset`` (fewer bytes if the file ends first)."""
        return self.map[offset : offset + LENGTHS_SIZE]

    def close(self):
        """Release the memory map; closing again does nothing."""
        self.map.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


class Examination:
    """The findings of :func:`examine` on one database.

    Counts: ``keys``, ``records``, ``live_bytes`` (the records that hold
    the current value of a key), ``expired_bytes`` (those of them whose
    value has expired, by the wall clock: docs/FORMAT.md, "Expiry"),
    ``dead_bytes`` (every other record:
    replaced values, deletes, checkpoints), ``file_size``,
    ``reclaimable`` (what a compaction would free: everything but the
    live records that have not expired, each with its batch and expiry
    record if it has one, and the new log's start, its header and first
    checkpoint),
    ``version`` (major, minor).

    Damage: ``bad_checksums`` (offsets of records whose CRC-32 does not
    match, with whether each is live; only when checked), ``corrupt_at``
    (offset of a record with impossible lengths, where the walk had to
    stop, or None), ``tail`` (bytes after where the walk stopped) and
    ``tail_lost`` (the tail starts where a power cut left zeros, so opening
    drops it whatever its length: ``_tail.starts_lost_data``),
    ``tail_followed`` (records written after it end the file,
    ``_tail.log_goes_on``: a damaged record or batch, not a cut write;
    a batch cut short is not that) and ``tail_needs_recover`` (opening
    refuses it without ``recover=True``: followed, longer than a buffer,
    and no lost data).
    ``writer_active`` says a writer held the lock: its last record may
    then be a write in progress rather than a torn tail.
    """

    def __init__(self, path):
        self.path = path
        self.keys = 0
        self.records = 0
        self.live_bytes = 0
        self.expired_bytes = 0
        self.dead_bytes = 0
        self.file_size = 0
        self.reclaimable = 0
        self.version = None
        self.bad_checksums = []
        self.corrupt_at = None
        self.tail_offset = None
        self.tail = 0
        self.tail_lost = False
        self.tail_followed = False
        self.tail_needs_recover = False
        self.writer_active = False

    @property
    def damaged(self):
        """True if verification found anything wrong with the file.

        An incomplete last record while a writer is at work is a write in
        progress, not damage.
        """
        return bool(
            self.bad_checksums
            or self.corrupt_at is not None
            or (self.tail and not self.writer_active)
        )


def _log_goes_on(path, start, size, batches):
    """``_tail.log_goes_on`` for the data file at ``path``, as an open would decide it."""
    fd = _files.open_data(path, False)
    try:
        return _tail.log_goes_on(fd, start, size, path, batches)
    finally:
        os.close(fd)


def examine(database_path, check_checksums=False, progress=None, kernel=None):
    """Walk the data file of the database ``database_path``; return an :class:`Examination`.

    With ``check_checksums``, every record's CRC-32 is checked. The walk
    is ``kernel``'s (a kernel module; default: the one ``semidbm.open``
    uses).
    ``progress(done, total)``, if given, is called with bytes walked so far.
    Raises :class:`semidbm.error` if there is no database, and
    :class:`semidbm.DBMLoadError` if its data file is not a semidbm file.
    """
    found = Examination(os.fsdecode(os.fspath(database_path)))
    data_path = db.data_file(found.path)
    found.writer_active = _lock.writer_active(found.path)
    with DataFile(data_path) as data:
        summarize_log = (kernel or db._default_kernel).summarize_log
        summary = summarize_log(data.map, check_checksums, progress, data_path)
        found.file_size = data.size
        found.version = data.version
        found.corrupt_at = summary.corrupt_at
        if summary.corrupt_at is None and summary.end < data.size:
            found.tail_offset = summary.end
            found.tail = data.size - summary.end
            batches = data.version[0] >= BATCH_FORMAT
            found.tail_lost = _tail.starts_lost_data(data.head(summary.end), found.tail, batches)
            found.tail_followed = _log_goes_on(data_path, summary.end, data.size, batches)
            found.tail_needs_recover = (
                found.tail > torn_tail_limit(DEFAULT_BUFFER_SIZE)
                and not found.tail_lost
                and found.tail_followed
            )
    found.records = summary.records
    found.keys = summary.keys
    found.bad_checksums = summary.bad_checksums
    found.live_bytes = summary.live_bytes
    found.expired_bytes = summary.expired_bytes
    found.dead_bytes = summary.end - HEADER_SIZE - summary.live_bytes
    found.reclaimable = max(0, found.file_size - _checkpoint.START_SIZE - summary.live_bytes
                            + summary.expired_bytes - summary.expiry_bytes)
    return found
