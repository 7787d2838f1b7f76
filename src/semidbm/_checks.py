"""What a walk over the log tells: the numbers of ``stats``, the damage ``verify`` finds.

Both come from one walk (:func:`examine`) over the records of the data
file (:class:`DataFile`), replaying the log as the kernels do to learn
which record holds each key's current value.
"""

import mmap
import os
from collections import namedtuple

from . import _files, _lock, _tail, db
from ._records import checksum_matches, walk
from ._settings import DEFAULT_BUFFER_SIZE
from .errors import DBMLoadError
from .format import HEADER_SIZE, LENGTHS_SIZE, check_header, torn_tail_limit

Record = namedtuple("Record", "offset key value_length size checksum_ok")
Record.__doc__ = """One record of the log.

``offset`` is where it starts in the file; ``value_length`` is -1 for a
delete record; ``size`` is its length in the file, lengths and checksum
included; ``checksum_ok`` is whether its CRC-32 matches (None when the
walk was not asked to check).
"""


class DataFile:
    """A semidbm data file opened read-only for walking its records, for the tools.

    The kernels replay the log to build their index and keep only what an
    index needs; the tools need every record, with its offset, its size
    and whether its CRC-32 matches. Opening checks the header
    (:class:`semidbm.DBMLoadError` if it is not a data file this version
    reads) and maps the file. The size is taken once, at opening: records
    a writer appends later are not walked. Use as a context manager, or
    call :meth:`close`.
    """

    def __init__(self, path):
        self.path = path
        self.end = HEADER_SIZE
        fd = _files.open_data(path, False)
        try:
            self.size = os.fstat(fd).st_size
            self.version = check_header(_files.read_at(fd, HEADER_SIZE, 0), path)
            self._map = mmap.mmap(fd, self.size, access=mmap.ACCESS_READ)
        except OSError as exc:
            if isinstance(exc, DBMLoadError):
                raise
            raise _files.os_error(exc, "cannot read %s" % path) from None
        finally:
            os.close(fd)
        self._view = memoryview(self._map)

    def records(self, check_checksums=False):
        """Yield every complete record in log order, as :class:`Record`.

        When the walk ends, :attr:`end` is the offset where it stopped:
        :attr:`size`, the start of an incomplete last record, or where a
        power cut left zeros (``_records.walk``). A record
        with impossible lengths raises :func:`~semidbm._records.corrupt_record`'s
        DBMLoadError. Checksums are read through a view: a large
        value is not copied.
        """
        self.end = HEADER_SIZE
        for start, key, value_start, value_length, end in walk(self._map, HEADER_SIZE, self.path):
            checksum_ok = None
            if check_checksums:
                checksum_ok = checksum_matches(self._view, key, value_start, end)
            yield Record(start, key, value_length, end - start, checksum_ok)
            self.end = end

    def head(self, offset):
        """The lengths of the record at ``offset`` (fewer bytes if the file ends first)."""
        return self._map[offset : offset + LENGTHS_SIZE]

    def close(self):
        """Release the memory map; closing again does nothing."""
        if self._map is not None:
            self._view.release()
            self._map.close()
            self._map = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


class Examination:
    """The findings of :func:`examine` on one database.

    Counts: ``keys``, ``records``, ``live_bytes`` (the records that hold
    the current value of a key), ``dead_bytes`` (every other record:
    replaced values, deletes), ``file_size``, ``reclaimable`` (what a
    compaction would free: everything but the header and the live
    records), ``version`` (major, minor).

    Damage: ``bad_checksums`` (offsets of records whose CRC-32 does not
    match, with whether each is live; only when checked), ``corrupt_at``
    (offset of a record with impossible lengths, where the walk had to
    stop, or None), ``tail`` (bytes after where the walk stopped) and
    ``tail_lost`` (the tail starts where a power cut left zeros, so opening
    drops it whatever its length: ``_tail.starts_lost_data``).
    ``writer_active`` says a writer held the lock: its last record may
    then be a write in progress rather than a torn tail.
    """

    def __init__(self, path):
        self.path = path
        self.keys = 0
        self.records = 0
        self.live_bytes = 0
        self.dead_bytes = 0
        self.file_size = 0
        self.reclaimable = 0
        self.version = None
        self.bad_checksums = []
        self.corrupt_at = None
        self.tail_offset = None
        self.tail = 0
        self.tail_lost = False
        self.writer_active = False

    @property
    def tail_needs_recover(self):
        """True if the tail is longer than opening drops without ``recover=True``."""
        return self.tail > torn_tail_limit(DEFAULT_BUFFER_SIZE) and not self.tail_lost

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


def examine(database_path, check_checksums=False, progress=None):
    """Walk the data file of the database ``database_path``; return an :class:`Examination`.

    With ``check_checksums``, every record's CRC-32 is checked.
    ``progress(done, total)``, if given, is called with bytes walked so far.
    Raises :class:`semidbm.error` if there is no database, and
    :class:`semidbm.DBMLoadError` if its data file is not a semidbm file.
    """
    found = Examination(os.fsdecode(os.fspath(database_path)))
    data_path = db.data_file(found.path)
    found.writer_active = _lock.writer_active(found.path)
    current = {}
    with DataFile(data_path) as data:
        found.file_size = data.size
        found.version = data.version
        try:
            for record in data.records(check_checksums):
                found.records += 1
                if record.checksum_ok is False:
                    found.bad_checksums.append(record.offset)
                if record.value_length < 0:
                    current.pop(record.key, None)
                else:
                    current[record.key] = (record.offset, record.size)
                if progress is not None:
                    progress(record.offset + record.size, data.size)
        except DBMLoadError as exc:  # a corrupt record
            found.corrupt_at = exc.offset
        end = data.end
        if found.corrupt_at is None and end < found.file_size:
            found.tail_offset = end
            found.tail = found.file_size - end
            found.tail_lost = _tail.starts_lost_data(data.head(end), found.tail)
    live_offsets = {offset for offset, _ in current.values()}
    found.bad_checksums = [(offset, offset in live_offsets) for offset in found.bad_checksums]
    found.keys = len(current)
    found.live_bytes = sum(size for _, size in current.values())
    found.dead_bytes = end - HEADER_SIZE - found.live_bytes
    found.reclaimable = found.file_size - HEADER_SIZE - found.live_bytes
    return found
