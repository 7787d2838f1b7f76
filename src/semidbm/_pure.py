"""The pure-Python storage kernel: the reference for the compiled ``_core``.

Its ``Store`` has the interface ``semidbm._interface.Store`` describes,
as the compiled kernel's does, so the API layer (``semidbm.db``) runs on
either. Both write the same bytes for the same operations and raise the
same errors; the test suite runs against each.
"""

import mmap
import os
import struct
import threading
from zlib import crc32

from . import _files
from .errors import DBMChecksumError, DBMError, DBMLoadError
from . import _messages
from ._settings import COMPACT_CHUNK, PROGRESS_STEP
from .format import CHECKSUM_SIZE, DELETED, HEADER_SIZE, LENGTHS_SIZE, MAX_LENGTH, check_header

_LENGTHS = struct.Struct("!ii")
_CHECKSUM = struct.Struct("!I")


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
            _messages.WRONG_TYPE % ("keys", type(key).__name__)
        ) from None
    if view.nbytes > MAX_LENGTH:
        raise ValueError(_messages.TOO_LONG % "keys")
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
            _messages.WRONG_TYPE % ("values", type(value).__name__)
        ) from None
    if view.nbytes > MAX_LENGTH:
        raise ValueError(_messages.TOO_LONG % "values")
    return view.tobytes()


def replay_log(data, index, position, path, base=0):
    """Apply the records of ``data`` from ``position`` on to ``index``.

    ``data`` holds the file from offset ``base`` on (the whole file when
    0); offsets, in and out, are the file's. The index maps each live key
    to the offset and length of its value. Returns the offset where
    parsing stopped: the end of ``data``, or the start of an incomplete
    last record. Negative lengths are corruption and raise DBMLoadError
    naming the offset.
    """
    size = len(data)
    position -= base
    unpack_lengths = _LENGTHS.unpack_from
    while size - position >= LENGTHS_SIZE:
        key_length, value_length = unpack_lengths(data, position)
        if key_length < 0 or value_length < DELETED:
            raise DBMLoadError(
                _messages.CORRUPT_RECORD
                % (path, base + position, key_length, value_length)
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
            index[key] = (base + value_start, value_length)
        position = record_end
    return base + position


def map_file(fd, path):
    """Map the whole file ``fd`` read-only; failure is a DBMError naming ``path``."""
    try:
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise _files.os_error(exc, "cannot map %s" % path) from None


def load_index(fd, path):
    """Check the header of the data file ``fd`` and replay its log.

    Returns the index, where parsing stopped and the file's size.
    """
    size = os.fstat(fd).st_size
    if size < HEADER_SIZE:
        check_header(_files.read_at(fd, size, 0), path)
    with map_file(fd, path) as data:
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
    store. Code that interrupts an operation in its own thread (a signal
    handler, a finalizer) and uses the store meanwhile is refused with
    ``_messages.INTERRUPTED``: ``_busy`` holds the message while an
    operation runs.

    Writes go through the buffer: ``_disk_end`` is where the file is known
    to end, and the buffer holds the log's bytes from there on, so a read
    finds every record either below ``_disk_end`` in the file or in the
    buffer, at every moment. A flush writes the buffer and only then
    drops it; ``_unsettled`` says a flush began and did not finish (it
    failed, or an exception from a signal handler cut it short), and the
    next flush resumes where the file ends (``_flush``).
    """

    __slots__ = (
        "path",
        "writable",
        "_directory",
        "_fd",
        "_index",
        "_buffer",
        "_buffer_size",
        "_disk_end",
        "_unsettled",
        "_verify",
        "_guard",
        "_owner",
        "_busy",
    )

    def __init__(self, directory, writable, buffer_size, verify_checksums, recover, writer_active):
        self._fd = -1
        self._directory = directory
        self.path = directory.data_path
        self.writable = writable
        self._buffer = bytearray()
        self._buffer_size = buffer_size
        self._unsettled = False
        self._verify = verify_checksums
        self._guard = threading.RLock()
        self._owner = None
        self._busy = None
        fd = directory.open_data(writable)  # the API layer closes the directory if this raises
        try:
            self._index, self._disk_end, size = load_index(fd, self.path)
            if self._disk_end < size and not (writer_active is not None and writer_active()):
                _files.settle_tail(
                    fd, directory, self._disk_end, size, writable, buffer_size, recover, 5
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
        # The lock is ours, so an operation in progress is this thread's:
        # a progress callback or a signal handler is using the database.
        if self._busy:
            raise DBMError(self._busy % self.path)
        if self._fd < 0:
            raise DBMError(_messages.CLOSED % self.path)

    def _check_writable(self, action):
        self._check_open()
        if self._owner is not None:
            raise DBMError(_messages.FORKED % (action, self.path, self._owner))
        if not self.writable:
            raise DBMError(_messages.READ_ONLY % (action, self.path))

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
        keys = iter(index)
        while True:
            if self._busy:
                # Taking the guard waits for another thread's compaction to
                # end; in the thread running the operation the check refuses.
                with self._guard:
                    self._check_open()
            if self._fd < 0:
                raise DBMError(_messages.CLOSED_DURING_ITERATION % self.path)
            try:
                key = next(keys)
            except StopIteration:
                return
            except RuntimeError:  # the dict gained or lost keys
                raise RuntimeError(_messages.CHANGED_DURING_ITERATION % self.path) from None
            if self._index is not index:
                # A compaction or a refresh after one rebuilt the index, as
                # the compiled kernel's table is rebuilt.
                raise RuntimeError(_messages.CHANGED_DURING_ITERATION % self.path)
            yield key

    def keys(self):
        """Return a list of all keys, taken atomically."""
        with self._guard:
            self._check_open()
            return list(self._index)

    def values(self):
        """Return a list of all values, in the order of ``keys()``, taken atomically."""
        return [value for _, value in self.items()]

    def items(self):
        """Return a list of all ``(key, value)`` pairs, taken atomically."""
        with self._guard:
            self._check_open()
            self._busy = _messages.INTERRUPTED
            try:
                return [
                    (key, self._read(key, offset, length))
                    for key, (offset, length) in self._index.items()
                ]
            finally:
                self._busy = None

    def __getitem__(self, key):
        with self._guard:
            if self._busy or self._fd < 0:
                self._check_open()
            original = key
            if type(key) is not bytes:
                key = as_key(key)
            try:
                offset, length = self._index[key]
            except KeyError:
                raise KeyError(original) from None
            self._busy = _messages.INTERRUPTED
            try:
                return self._read(key, offset, length)
            finally:
                self._busy = None

    def _read(self, key, offset, length):
        """The value of ``key``, ``length`` bytes at ``offset``: from the buffer or the file."""
        read_length = length + CHECKSUM_SIZE if self._verify else length
        start = offset - self._disk_end
        if start >= 0:
            data = bytes(self._buffer[start : start + read_length])
        else:
            try:
                data = _files.read_exactly(self._fd, read_length, offset, self.path)
            except OSError as exc:
                if isinstance(exc, DBMError):
                    raise
                raise _files.os_error(exc, "cannot read %s" % self.path) from None
        if not self._verify:
            return data
        value = data[:length]
        (expected,) = _CHECKSUM.unpack_from(data, length)
        if crc32(value, crc32(key)) != expected:
            raise DBMChecksumError(
                _messages.CHECKSUM_MISMATCH % (self.path, key, offset)
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
                raise ValueError(_messages.TOO_LONG % ("keys" if len(key) > MAX_LENGTH else "values"))
            self._append(key, _encode_put(key, value), LENGTHS_SIZE + len(key), len(value))

    def __delitem__(self, key):
        with self._guard:
            self._check_writable("delete")
            original = key
            key = as_key(key)
            if key not in self._index:
                raise KeyError(original)
            self._append(key, _encode_delete(key), 0, DELETED)

    def _append(self, key, record, value_start, value_length):
        """Add ``record`` of ``key`` to the log and the index (``value_length`` DELETED: a delete).

        The buffer is written out first when the record would overflow
        it; a record larger than the buffer goes to the file at once. If
        writing fails, the record is not in the log and the error
        propagates. The record enters the buffer and the index with no
        call in between, where a signal handler could run.
        """
        self._busy = _messages.INTERRUPTED
        try:
            if self._buffer and len(self._buffer) + len(record) > self._buffer_size:
                self._flush()
            oversize = len(record) > self._buffer_size
            previous = self._index.get(key) if oversize else None  # for _take_back
            offset = self._disk_end + len(self._buffer)
            self._buffer += record
            if value_length == DELETED:
                del self._index[key]
            else:
                self._index[key] = (offset + value_start, value_length)
            if oversize:
                try:
                    self._flush()
                except DBMError:
                    self._take_back(key, previous)
                    raise
        finally:
            self._busy = None

    def _take_back(self, key, previous):
        """Undo the append of a record larger than the buffer, whose write failed.

        The buffer held that record alone; what of it reached the file is
        cut off (a partial record no reader indexes), and the key's index
        entry is what it was. If the cut fails, the store is closed.
        """
        try:
            os.ftruncate(self._fd, self._disk_end)
        except OSError as exc:
            self._release()
            message = _messages.WRITE_CLOSED % self.path
            raise _files.os_error(exc, message) from None
        self._buffer, self._unsettled = bytearray(), False
        if previous is None:
            self._index.pop(key, None)
        else:
            self._index[key] = previous

    def _flush(self):
        """Write the buffer to the file (no fsync).

        If the write fails (a full disk) or is cut short (an exception
        from a signal handler), what reached the file stays there, the
        buffer keeps every record, and ``_unsettled`` makes the next flush
        resume where the file ends: the file is this writer's alone, so
        its size says how much was written. The file never shrinks under
        a reader (docs/FORMAT.md, "Writing").
        """
        if not self._buffer:
            return
        done = 0
        if self._unsettled:
            done = _files.written_beyond(self._fd, self._disk_end, len(self._buffer))
        self._unsettled = True
        try:
            # A copy: a traceback that keeps this frame must not pin the buffer.
            _files.write_all(self._fd, self._buffer[done:])
        except OSError as exc:
            raise _files.os_error(exc, _messages.WRITE_FAILED % self.path) from None
        self._disk_end, self._buffer, self._unsettled = (
            self._disk_end + len(self._buffer),
            bytearray(),
            False,
        )

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
            self._sync()

    def _sync(self):
        self._busy = _messages.INTERRUPTED
        try:
            self._flush()
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise _files.os_error(exc, "cannot sync %s" % self.path) from None
        finally:
            self._busy = None

    def compact(self, progress=None):
        """Rewrite the live records, oldest first, to a new data file and swap it in.

        The new file is flushed to disk before it is renamed over ``data``,
        and the directory after, so a crash leaves either the old file or
        the new one, whole. The log is read in order and each record kept
        if the index points at it; memory use is one chunk besides the new
        index. ``progress``, if given, is called as ``progress(done,
        total)`` (bytes of the old log, see ``_settings.PROGRESS_STEP``); an
        exception from it abandons the compaction and leaves the database
        as it was.
        """
        with self._guard:
            self._check_writable("compact")
            self._busy = _messages.INTERRUPTED
            try:
                self._flush()
                self._busy = _messages.COMPACTING
                index = _files.write_compacted(
                    self._directory, self._fd, lambda out: self._write_live_records(out, progress)
                )
                self._busy = _messages.INTERRUPTED
                os.close(self._fd)
                self._fd = -1
                replaced, failure = _files.install_compacted(self._directory)
                self._fd = self._directory.open_data(True)
                if replaced:
                    self._index = index
                    self._disk_end = os.fstat(self._fd).st_size
            finally:
                self._busy = None
            if failure is not None:
                raise failure

    def _write_live_records(self, out, progress):
        """Copy the records the index points at to ``out``, in log order; return their new index.

        Calls ``progress(done, total)`` as described in ``_settings.PROGRESS_STEP``.
        """
        total = self._disk_end
        index = {}
        chunk = bytearray()
        written = HEADER_SIZE
        position = HEADER_SIZE
        next_report = PROGRESS_STEP
        unpack_lengths = _LENGTHS.unpack_from
        with map_file(self._fd, self.path) as data:
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
                        if len(chunk) + size > COMPACT_CHUNK:
                            _files.write_all(out, chunk)
                            chunk.clear()
                        if size > COMPACT_CHUNK:
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
        raise DBMError(_messages.CHANGED_UNDER % (self.path, position))

    def refresh(self):
        """Bring in what the writer has written to the file since this reader opened.

        Records the writer has flushed are added; an incomplete last
        record (a write in progress) waits for the next refresh. If the
        writer compacted, the new data file is opened and read whole. A
        corrupt record, or a data file cut shorter than the log this
        reader has read (``_messages.SHRANK``), raises and closes the
        reader. A writer's own store is always current: for it this does
        nothing.
        """
        with self._guard:
            self._check_open()
            if self.writable or self._owner is not None:
                return
            self._busy = _messages.INTERRUPTED
            try:
                self._refresh()
            finally:
                self._busy = None

    def _refresh(self):
        replaced, size = _files.reader_position(self._directory, self._fd)
        if replaced:
            fd = self._directory.open_data(False)
            try:
                index, end, _ = load_index(fd, self.path)
            except BaseException:
                os.close(fd)
                raise
            os.close(self._fd)
            self._fd, self._index, self._disk_end = fd, index, end
        elif size != self._disk_end:
            try:
                if size < self._disk_end:
                    raise DBMError(_messages.SHRANK % (self.path, size, self._disk_end))
                self._disk_end = _files.catch_up(
                    self._fd,
                    self._disk_end,
                    size,
                    lambda data, base: replay_log(data, self._index, base, self.path, base),
                )
            except BaseException:
                self._release()  # a corrupt or cut log: nothing after it can be trusted
                raise

    def _disown(self):
        """Become read-only without ever writing (in a child made by ``fork()``).

        Buffered records stay readable; nothing is flushed, synced or cut.
        """
        self._guard = threading.RLock()
        self._busy = None
        self._owner = os.getppid()
        self.writable = False

    def close(self):
        """Flush and fsync buffered records (if writable) and release the file.

        Closing a closed store does nothing.
        """
        with self._guard:
            if self._busy:
                raise DBMError(self._busy % self.path)
            if self._fd < 0:
                return
            try:
                if self.writable:
                    self._sync()
            finally:
                self._release()

    def _release(self):
        """Give back the file and the directory, writing nothing."""
        fd, self._fd = self._fd, -1
        self._index = {}
        self._buffer = bytearray()
        self._directory.close()
        if fd >= 0:
            os.close(fd)

    def __del__(self):
        if self._fd >= 0:
            self.close()
