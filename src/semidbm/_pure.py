"""The pure-Python storage kernel: the reference for the compiled ``_core``.

Both kernels offer the same interface, so the API layer (``semidbm.db``)
runs on either:

``Store(data_path, writable, buffer_size, verify_checksums, recover, writer_active)``
    Opens the data file ``data_path`` (which must exist and start with a
    header) and rebuilds the index from its log. ``writer_active`` is
    None for a writer; for a reader, a function that says whether a
    writer holds the database's lock, called only when the log ends in
    an incomplete record (a write in progress, or a torn tail): most
    opens need not ask.
``store[key]``, ``store[key] = value``, ``del store[key]``, ``key in store``,
``len(store)``, ``iter(store)``
    Item access. Keys are str (stored as UTF-8) or bytes-like; values
    likewise, and come back as bytes.
``store.sync()``, ``store.compact(progress=None)``, ``store.close()``, ``store.closed``,
``store.writable``, ``store.path``
    Flushing, compaction (FORMAT.md), releasing the file.

Both write the same bytes for the same operations and raise the same
errors; the test suite runs against each.
"""

import mmap
import os
import struct
import threading
from zlib import crc32

from . import _files
from .errors import DBMChecksumError, DBMError, DBMLoadError
from .format import (
    CHECKSUM_SIZE,
    COMPACTING,
    DELETED,
    HEADER_SIZE,
    LENGTHS_SIZE,
    MAX_LENGTH,
    PROGRESS_STEP,
    check_header,
)

_LENGTHS = struct.Struct("!ii")
_CHECKSUM = struct.Struct("!I")
#: How many bytes a compaction collects before each write.
_COMPACT_CHUNK = 1 << 20
_TOO_LONG = "semidbm %%s are limited to %d bytes (2 GiB - 1)" % MAX_LENGTH


def as_key(key):
    """Return ``key`` as bytes: str is encoded as UTF-8, bytes-like is copied."""
    if type(key) is bytes:
        return key
    if isinstance(key, str):
        return key.encode("utf-8")
    try:
        view = memoryview(key)
    except TypeError:
        raise TypeError(
            "semidbm keys must be str or bytes-like, not %s" % type(key).__name__
        ) from None
    if view.nbytes > MAX_LENGTH:
        raise ValueError(_TOO_LONG % "keys")
    return view.tobytes()


def as_value(value):
    """Return ``value`` as bytes: str is encoded as UTF-8, bytes-like is copied."""
    if type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    try:
        view = memoryview(value)
    except TypeError:
        raise TypeError(
            "semidbm values must be str or bytes-like, not %s" % type(value).__name__
        ) from None
    if view.nbytes > MAX_LENGTH:
        raise ValueError(_TOO_LONG % "values")
    return view.tobytes()


def replay_log(data, index, position, path):
    """Apply the records of ``data`` (the whole file) from ``position`` on to ``index``.

    The index maps each live key to the offset and length of its value.
    Returns the offset where parsing stopped: the end of the file, or the
    start of an incomplete last record. Negative lengths are corruption
    and raise DBMLoadError naming the offset.
    """
    size = len(data)
    unpack_lengths = _LENGTHS.unpack_from
    while size - position >= LENGTHS_SIZE:
        key_length, value_length = unpack_lengths(data, position)
        if key_length < 0 or value_length < DELETED:
            raise DBMLoadError(
                "%s: corrupt record at offset %d (key length %d, value length %d)"
                % (path, position, key_length, value_length)
            )
        key_start = position + LENGTHS_SIZE
        value_start = key_start + key_length
        if value_length == DELETED:
            record_end = value_start + CHECKSUM_SIZE
        else:
            record_end = value_start + value_length + CHECKSUM_SIZE
        if record_end > size:
            break
        key = data[key_start:value_start]
        if value_length == DELETED:
            index.pop(key, None)
        else:
            index[key] = (value_start, value_length)
        position = record_end
    return position


def load_index(fd, path):
    """Check the header of the data file ``fd`` and replay its log.

    Returns the index, where parsing stopped and the file's size.
    """
    size = os.fstat(fd).st_size
    if size < HEADER_SIZE:
        check_header(_files.read_at(fd, size, 0), path)
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
        check_header(data[:HEADER_SIZE], path)
        index = {}
        end = replay_log(data, index, HEADER_SIZE, path)
    return index, end, size


def _encode_put(key, value):
    """The bytes of a put record."""
    return (
        _LENGTHS.pack(len(key), len(value))
        + key
        + value
        + _CHECKSUM.pack(crc32(value, crc32(key)))
    )


def _encode_delete(key):
    """The bytes of a delete record."""
    return _LENGTHS.pack(len(key), DELETED) + key + _CHECKSUM.pack(crc32(key))


class Store:
    """An open data file: the index, the append buffer and the file descriptor.

    A re-entrant lock makes each operation atomic for threads sharing the
    store.
    """

    __slots__ = (
        "path",
        "writable",
        "_fd",
        "_index",
        "_buffer",
        "_buffer_size",
        "_disk_end",
        "_verify",
        "_guard",
        "_owner",
        "_busy",
    )

    def __init__(self, data_path, writable, buffer_size, verify_checksums, recover, writer_active):
        self._fd = -1
        self.path = data_path
        self.writable = writable
        self._buffer = bytearray()
        self._buffer_size = buffer_size
        self._verify = verify_checksums
        self._guard = threading.RLock()
        self._owner = None
        self._busy = False
        fd = _files.open_data(data_path, writable)
        try:
            self._index, self._disk_end, size = load_index(fd, data_path)
            if self._disk_end < size and not (writer_active is not None and writer_active()):
                _files.settle_tail(
                    fd, data_path, self._disk_end, size, writable, buffer_size, recover, 5
                )
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    @property
    def closed(self):
        """True once the store has been closed."""
        return self._fd < 0

    def _check_open(self):
        # The lock is ours, so a compaction in progress is this thread's:
        # its progress callback is using the database.
        if self._busy:
            raise DBMError(COMPACTING % self.path)
        if self._fd < 0:
            raise DBMError("semidbm database %s is closed" % self.path)

    def _check_writable(self, action):
        self._check_open()
        if self._owner is not None:
            raise DBMError(
                "cannot %s: semidbm database %s belongs to process %d; a forked "
                "child may only read it" % (action, self.path, self._owner)
            )
        if not self.writable:
            raise DBMError(
                "cannot %s: semidbm database %s is open read-only" % (action, self.path)
            )

    def __len__(self):
        with self._guard:
            self._check_open()
            return len(self._index)

    def __contains__(self, key):
        with self._guard:
            self._check_open()
            if type(key) is not bytes:
                key = as_key(key)
            return key in self._index

    def __iter__(self):
        with self._guard:
            self._check_open()
            index = self._index
        for key in index:
            if self._busy:
                # Taking the guard waits for another thread's compaction to
                # end; in the compacting thread (a progress callback) the
                # check then refuses.
                with self._guard:
                    self._check_open()
            if self._fd < 0:
                raise DBMError("semidbm database %s was closed during iteration" % self.path)
            if self._index is not index:
                # A compaction rebuilt the index, as the compiled kernel's
                # table is rebuilt: its iterators stop the same way.
                raise RuntimeError("semidbm database changed size during iteration")
            yield key

    def __getitem__(self, key):
        with self._guard:
            self._check_open()
            original = key
            if type(key) is not bytes:
                key = as_key(key)
            try:
                offset, length = self._index[key]
            except KeyError:
                raise KeyError(original) from None
            read_length = length + CHECKSUM_SIZE if self._verify else length
            start = offset - self._disk_end
            if start >= 0:
                data = bytes(self._buffer[start : start + read_length])
            else:
                try:
                    data = _files.read_exactly(self._fd, read_length, offset, self.path)
                except OSError as exc:
                    raise _files.os_error(exc, "cannot read %s" % self.path) from None
        if not self._verify:
            return data
        value = data[:length]
        (expected,) = _CHECKSUM.unpack_from(data, length)
        if crc32(value, crc32(key)) != expected:
            raise DBMChecksumError(
                "%s: checksum mismatch in the value of key %r at offset %d"
                % (self.path, key, offset)
            )
        return value

    def __setitem__(self, key, value):
        with self._guard:
            if self._fd < 0 or self._busy or not self.writable:
                self._check_writable("write")
            if type(key) is not bytes:
                key = as_key(key)
            if type(value) is not bytes:
                value = as_value(value)
            if len(key) > MAX_LENGTH or len(value) > MAX_LENGTH:
                raise ValueError(_TOO_LONG % ("keys" if len(key) > MAX_LENGTH else "values"))
            offset = self._append(_encode_put(key, value))
            self._index[key] = (offset + LENGTHS_SIZE + len(key), len(value))

    def __delitem__(self, key):
        with self._guard:
            self._check_writable("delete")
            original = key
            key = as_key(key)
            if key not in self._index:
                raise KeyError(original)
            self._append(_encode_delete(key))
            del self._index[key]

    def _append(self, record):
        """Add ``record`` to the log and return its offset.

        The buffer is written out first when the record would overflow
        it; a record larger than the buffer goes straight to the file.
        If writing fails, the record is not in the log and the error
        propagates.
        """
        if len(self._buffer) + len(record) > self._buffer_size:
            self._flush()
            if len(record) > self._buffer_size:
                offset = self._disk_end
                self._write(record)
                return offset
        offset = self._disk_end + len(self._buffer)
        self._buffer += record
        return offset

    def _write(self, data):
        """Append ``data`` to the file; on failure cut off any part written."""
        try:
            _files.write_all(self._fd, data)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, self._disk_end)
            except OSError:
                # The file now ends in a partial record: stop here; the next
                # open treats it as a torn tail.
                os.close(self._fd)
                self._fd = -1
                raise _files.os_error(
                    exc, "cannot write to %s (database closed)" % self.path
                ) from None
            raise _files.os_error(exc, "cannot write to %s" % self.path) from None
        self._disk_end += len(data)

    def _flush(self):
        """Write the buffer to the file (no fsync)."""
        if self._buffer:
            self._write(self._buffer)
            self._buffer = bytearray()

    def sync(self):
        """Write buffered records to the file and flush it to disk (fsync).

        A reader has nothing to write: for it this does nothing, as for
        the stdlib dbm modules' readers (``shelve`` syncs on close).
        """
        with self._guard:
            if not self.writable and self._owner is None:
                self._check_open()
                return
            self._check_writable("sync")
            self._flush()
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise _files.os_error(exc, "cannot sync %s" % self.path) from None

    def compact(self, progress=None):
        """Rewrite the live records, oldest first, to a new data file and swap it in.

        The new file is flushed to disk before it is renamed over ``data``,
        and the directory after, so a crash leaves either the old file or
        the new one, whole. The log is read in order and each record kept
        if the index points at it; memory use is one chunk besides the new
        index. ``progress``, if given, is called as ``progress(done,
        total)`` (bytes of the old log, see ``format.PROGRESS_STEP``); an
        exception from it abandons the compaction and leaves the database
        as it was.
        """
        with self._guard:
            self._check_writable("compact")
            self._flush()
            self._busy = True
            try:
                temporary, index = _files.write_compacted(
                    self.path, self._fd, lambda out: self._write_live_records(out, progress)
                )
            finally:
                self._busy = False
            os.close(self._fd)
            self._fd = -1
            replaced, failure = _files.install_compacted(temporary, self.path)
            self._fd = _files.open_data(self.path, True)
            if replaced:
                self._index = index
                self._disk_end = os.fstat(self._fd).st_size
            if failure is not None:
                raise failure

    def _write_live_records(self, out, progress):
        """Copy the records the index points at to ``out``, in log order; return their new index.

        Calls ``progress(done, total)`` as described in ``format.PROGRESS_STEP``.
        """
        total = self._disk_end
        index = {}
        chunk = bytearray()
        written = HEADER_SIZE
        position = HEADER_SIZE
        next_report = PROGRESS_STEP
        unpack_lengths = _LENGTHS.unpack_from
        with mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ) as data:
            while position < total:
                if total - position < LENGTHS_SIZE + CHECKSUM_SIZE:
                    self._changed(position)
                key_length, value_length = unpack_lengths(data, position)
                if key_length < 0 or value_length < DELETED:
                    self._changed(position)
                size = LENGTHS_SIZE + key_length + max(value_length, 0) + CHECKSUM_SIZE
                if size > total - position:
                    self._changed(position)
                if value_length != DELETED:
                    value_start = position + LENGTHS_SIZE + key_length
                    key = data[position + LENGTHS_SIZE : value_start]
                    if self._index.get(key) == (value_start, value_length):
                        if len(chunk) + size > _COMPACT_CHUNK:
                            _files.write_all(out, chunk)
                            chunk.clear()
                        if size > _COMPACT_CHUNK:
                            with memoryview(data) as view:
                                _files.write_all(out, view[position : position + size])
                        else:
                            chunk += data[position : position + size]
                        index[key] = (written + LENGTHS_SIZE + key_length, value_length)
                        written += size
                        if progress is not None and position + size >= next_report:
                            progress(position + size, total)
                            next_report = position + size + PROGRESS_STEP
                position += size
        _files.write_all(out, chunk)
        if progress is not None:
            progress(total, total)
        return index

    def _changed(self, position):
        raise DBMError("%s changed under the open database at offset %d" % (self.path, position))

    def refresh(self):
        """Bring in what the writer has written to the file since this reader opened.

        Records the writer has flushed are added; an incomplete last
        record (a write in progress) waits for the next refresh. If the
        writer compacted, the new data file is opened and read whole. A
        corrupt record raises DBMLoadError and closes the reader. A
        writer's own store is always current: for it this does nothing.
        """
        with self._guard:
            self._check_open()
            if self.writable or self._owner is not None:
                return
            try:
                current = os.stat(self.path)
                opened = os.fstat(self._fd)
            except OSError as exc:
                raise _files.os_error(exc, "cannot refresh %s" % self.path) from None
            if (current.st_dev, current.st_ino) != (opened.st_dev, opened.st_ino):
                fd = _files.open_data(self.path, False)
                try:
                    index, end, _ = load_index(fd, self.path)
                except BaseException:
                    os.close(fd)
                    raise
                os.close(self._fd)
                self._fd, self._index, self._disk_end = fd, index, end
            elif opened.st_size > self._disk_end:
                try:
                    with mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ) as data:
                        self._disk_end = replay_log(data, self._index, self._disk_end, self.path)
                except BaseException:
                    # A corrupt log: nothing after it can be trusted.
                    os.close(self._fd)
                    self._fd = -1
                    self._index = {}
                    raise

    def _disown(self):
        """Become read-only without ever writing (in a child made by ``fork()``).

        Buffered records stay readable; nothing is flushed, synced or cut.
        """
        self._guard = threading.RLock()
        self._owner = os.getppid()
        self.writable = False

    def close(self):
        """Flush and fsync buffered records (if writable) and release the file.

        Closing a closed store does nothing.
        """
        with self._guard:
            if self._busy:
                raise DBMError(COMPACTING % self.path)
            if self._fd < 0:
                return
            try:
                if self.writable:
                    self.sync()
            finally:
                os.close(self._fd)
                self._fd = -1
                self._index = {}
                self._buffer = bytearray()

    def __del__(self):
        if self._fd >= 0:
            self.close()
