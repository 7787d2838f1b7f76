"""Walks the records of a data file in log order, each with its offset, for the tools.

The kernels replay the log to build their index and keep only what an
index needs. The tools (``semidbm stats``, ``semidbm verify``) need every
record: its offset, key, value length, size and whether its CRC-32
matches. This module reads them from a read-only memory map of the file,
checking each length before use as the kernels do: a negative length is
corruption (:class:`CorruptRecord`), and a record that runs past the end
of the file ends the walk as an incomplete tail.
"""

import mmap
import os
import struct
from collections import namedtuple
from zlib import crc32

from . import _files, _messages
from .errors import DBMLoadError
from .format import CHECKSUM_SIZE, DELETED, HEADER_SIZE, LENGTHS_SIZE, check_header

_LENGTHS = struct.Struct("!ii")
_CHECKSUM = struct.Struct("!I")

Record = namedtuple("Record", "offset key value_length size checksum_ok")
Record.__doc__ = """One record of the log.

``offset`` is where it starts in the file; ``value_length`` is -1 for a
delete record; ``size`` is its length in the file, lengths and checksum
included; ``checksum_ok`` is whether its CRC-32 matches (None when the
walk was not asked to check).
"""


class CorruptRecord(DBMLoadError):
    """A record with a negative key length or a value length below -1.

    Nothing after it can be read: the lengths are what finds the next
    record. ``offset`` is where the record starts.
    """

    def __init__(self, path, offset, key_length, value_length):
        super().__init__(
            _messages.CORRUPT_RECORD % (path, offset, key_length, value_length)
        )
        self.offset = offset


class DataFile:
    """A semidbm data file opened read-only for walking its records.

    Opening checks the header (:class:`semidbm.DBMLoadError` if it is not
    a data file this version reads). The size is taken once, at opening:
    records a writer appends later are not walked. Use as a context
    manager, or call :meth:`close`.
    """

    def __init__(self, path):
        self.path = path
        self.end = HEADER_SIZE
        fd = _files.open_data(path, False)
        try:
            self.size = os.fstat(fd).st_size
            header = _files.read_at(fd, HEADER_SIZE, 0)
            check_header(header, path)
            self.version = struct.unpack_from("!HH", header, 4)
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
        :attr:`size`, or the start of an incomplete last record. Raises
        :class:`CorruptRecord` at a record with impossible lengths.
        """
        view = self._view
        size = self.size
        position = HEADER_SIZE
        self.end = position
        unpack_lengths = _LENGTHS.unpack_from
        while size - position >= LENGTHS_SIZE:
            key_length, value_length = unpack_lengths(view, position)
            if key_length < 0 or value_length < DELETED:
                raise CorruptRecord(self.path, position, key_length, value_length)
            key_end = position + LENGTHS_SIZE + key_length
            checksum_start = key_end + max(value_length, 0)
            record_end = checksum_start + CHECKSUM_SIZE
            if record_end > size:
                break
            key = view[position + LENGTHS_SIZE : key_end].tobytes()
            checksum_ok = None
            if check_checksums:
                (expected,) = _CHECKSUM.unpack_from(view, checksum_start)
                checksum_ok = crc32(view[key_end:checksum_start], crc32(key)) == expected
            yield Record(position, key, value_length, record_end - position, checksum_ok)
            position = record_end
            self.end = position

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
