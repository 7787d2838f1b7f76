"""What a walk over the log tells: the numbers of ``stats``, the damage ``verify`` finds.

Both come from one walk (:func:`examine`) over the records of the data
file (``_records``), replaying the log as the kernels do to learn which
record holds each key's current value.
"""

import os

from . import _lock, db
from ._records import CorruptRecord, DataFile
from ._settings import DEFAULT_BUFFER_SIZE
from .format import HEADER_SIZE, torn_tail_limit


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
    stop, or None) and ``tail`` (bytes after the last complete record).
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
        self.writer_active = False

    @property
    def tail_needs_recover(self):
        """True if the tail is longer than opening drops without ``recover=True``."""
        return self.tail > torn_tail_limit(DEFAULT_BUFFER_SIZE)

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
        except CorruptRecord as exc:
            found.corrupt_at = exc.offset
        end = data.end
    if found.corrupt_at is None and end < found.file_size:
        found.tail_offset = end
        found.tail = found.file_size - end
    live_offsets = {offset for offset, _ in current.values()}
    found.bad_checksums = [(offset, offset in live_offsets) for offset in found.bad_checksums]
    found.keys = len(current)
    found.live_bytes = sum(size for _, size in current.values())
    found.dead_bytes = end - HEADER_SIZE - found.live_bytes
    found.reclaimable = found.file_size - HEADER_SIZE - found.live_bytes
    return found
