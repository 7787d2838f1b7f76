"""The pure-Python storage kernel: the reference for the compiled ``_core``.

Its ``Store`` has the interface ``semidbm._interface.Store`` describes,
as the compiled kernel's does, so the API layer (``semidbm.db``) runs on
either. Both write the same bytes for the same operations and raise the
same errors; the test suite runs against each.
"""

import mmap
import os
import threading
from collections import deque

from . import (
    _checkpoint,
    _compaction,
    _expiry,
    _fields,
    _files,
    _index_file,
    _messages,
    _order,
    _parts,
    _records,
    _tail,
)
from ._records import (
    CHECKSUM,
    EXPIRY_OVERHEAD,
    LENGTHS,
    as_bytes,
    as_pair,
    batch_puts,
    checksum,
    encode_batch,
    encode_delete,
    encode_put,
    expiry_after,
    kept_expiring,
    key_list,
    seal,
    sound_live,
    walk,
    whole_batch,
)
from ._router import ShardRouter as ShardRouter
from ._settings import COMPACT_CHUNK, PROGRESS_STEP
from .errors import DBMChecksumError, DBMError
from .format import (
    BATCH,
    BATCH_FORMAT,
    BATCH_HEAD_SIZE,
    CHECKSUM_SIZE,
    DELETED,
    EMPTY_RECORD_SIZE,
    EXPIRES,
    EXPIRY_TIME_SIZE,
    EXPIRY_VERSION,
    HEADER_SIZE,
    LENGTHS_SIZE,
    MAX_LENGTH,
    VERSIONS,
    check_format,
    check_header,
)

#: ``_interface.summarize_log``: the tools' examination of a data file, in Python.
summarize_log = _records.summarize_log
#: Keys in each chunk of ``Store._sorted_lines``.
LINES_PER_CHUNK = 4096


def replay_log(data, index, position, path, version, base=0):
    """Apply the records of ``data`` from ``position`` on to ``index``.

    ``data`` holds the file from offset ``base`` on (the whole file when
    0); offsets, in and out, are the file's. The index maps each live key
    to the offset and length of its value. Returns the offset where
    parsing stopped (the end of ``data``, or the start of an incomplete
    last record), and whether an expiry record was among the records.
    Impossible lengths raise DBMLoadError (``_records.walk``).
    ``version`` is the file's: from 2.0, with batch records; from 2.1,
    with expiry records, which a read finds after their put (``Store._expired``).
    """
    stop = position - base
    expiring = False
    records = walk(data, stop, path, base, batches=version[0] >= BATCH_FORMAT,
                   expirable=version >= EXPIRY_VERSION)
    for _, key, value_start, value_length, record_end in records:
        if value_length >= 0:
            index[key] = (base + value_start, value_length)
        elif value_length == DELETED:
            index.pop(key, None)
        else:
            expiring = True
        stop = record_end
    return base + stop, expiring


def map_file(fd, path):
    """Map the whole file ``fd`` read-only; failure is a DBMError naming ``path``."""
    try:
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise _files.os_error(exc, "cannot map %s" % path) from None


def load_index(fd, path):
    """Check the header of the data file ``fd`` and replay its log.

    Returns the index, where parsing stopped, the file's size, its
    format version, ``(major, minor)``, and whether it holds an expiry record.
    """
    size = os.fstat(fd).st_size
    if size < HEADER_SIZE:
        check_header(_files.read_at(fd, size, 0), path)
    with map_file(fd, path) as data:
        version = check_header(data[:HEADER_SIZE], path)
        index = {}
        end, expiring = replay_log(data, index, HEADER_SIZE, path, version)
    return index, end, size, version, expiring


def _sorted_range(index, low, high):
    """The keys of ``index`` from ``low`` up to ``high`` (left out; None: no end), sorted."""
    if high is None:
        return sorted(key for key in index if key >= low)
    return sorted(key for key in index if low <= key < high)


class Store:
    """An open data file: the index, the append buffer and the file descriptor.

    Its members do what ``_interface.Store`` says; their docstrings here
    name that member and add what is particular to this kernel.

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
        "_torn_tail",
        "_version",
        "_opener",
        "_identity",
        "_expiring",
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
        if getattr(self, "_guard", None) is None:  # one made by _pending keeps its guard
            self._guard = threading.RLock()
        self._owner = None
        self._busy = None
        self._torn_tail = None
        if not hasattr(self, "_opener"):  # one made by _pending keeps its opener until it is open
            self._opener = None
        fd = directory.open_data(writable)  # the API layer closes the directory if this raises
        try:
            self._torn_tail = self._load(fd, recover, writer_active)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def _load(self, fd, recover, writer_active):
        """Replay the log of ``fd`` into a new index and settle a torn tail; return that tail.

        ``writer_active`` as ``__init__`` takes it (None: no other writer
        is at work).
        """
        self._index, self._disk_end, size, self._version, self._expiring = load_index(
            fd, self.path)
        # What a shared writer's turn compares the file named data with; a reader needs none.
        self._identity = _files.file_identity(fd) if self.writable else None
        torn_tail = None
        if self._disk_end < size and not (writer_active is not None and writer_active()):
            torn_tail = _tail.settle_tail(
                fd, self._directory, self._disk_end, size, self.writable, self._buffer_size,
                recover, self._batches,
            )
        if self.writable:
            _index_file.remove_refused(self._directory, fd, self._disk_end)
        return torn_tail

    @classmethod
    def _pending(cls, path, writable, opener):
        """``_interface.Store._pending``: every slot as a closed store has it, but the opener."""
        store = cls.__new__(cls)
        store.path, store.writable, store._opener = path, writable, opener
        store._fd, store._directory, store._index, store._buffer = -1, None, {}, bytearray()
        store._buffer_size, store._disk_end, store._unsettled, store._verify = 0, 0, False, False
        store._guard, store._owner, store._busy = threading.RLock(), None, None
        store._torn_tail, store._version, store._identity = None, None, None
        return store

    def _open_pending(self):
        """``_interface.Store._open_pending``."""
        with self._guard:
            if self._fd < 0 and self._opener is not None:
                self._check_open()

    @property
    def closed(self):
        """``_interface.Store.closed``: the file is no longer open here (nor pending)."""
        return self._fd < 0 and self._opener is None

    @property
    def torn_tail(self):
        """``_interface.Store.torn_tail``."""
        return self._torn_tail

    @property
    def index_covered(self):
        """``_interface.Store.index_covered``: this kernel never uses the index file."""
        return 0

    @property
    def format_version(self):
        """``_interface.Store.format_version``."""
        if self._version is None:
            self._open_pending()
        return self._version

    @property
    def key_seed(self):
        """``_interface.Store.key_seed``: 0, as this kernel lists a part under any seed alike."""
        return 0

    @property
    def log_state(self):
        """``_interface.Store.log_state``."""
        with self._guard:
            self._check_open()
            return _parts.log_state(
                self._fd, self._disk_end + len(self._buffer), self._disk_end
            )

    def _part(self, part, parts, seed, what):
        """``_interface.Store._part``: each key hashed here (``_parts.key_hash``), each value
        read as ``__getitem__`` reads it."""
        _parts.check_part(part, parts, seed, what)
        with self._guard:
            self._check_open()
            index = self._index
            keys = [key for key in index
                    if _parts.part_of(_parts.key_hash(seed, key), parts) == part]
            if what == "keys":
                return keys
            self._busy = _messages.INTERRUPTED
            try:
                values = [self._read(key, *index[key]) for key in keys]
            finally:
                self._busy = None
        return _parts.shaped(keys, values, what)

    @property
    def _batches(self):
        """Whether the data file is of a format with batch records."""
        return self._version[0] >= BATCH_FORMAT

    def _check_open(self):
        # The lock is ours, so an operation in progress is this thread's:
        # a progress callback or a signal handler is using the database.
        if self._busy:
            raise DBMError(self._busy % self.path)
        if self._fd < 0:
            if self._opener is None:
                raise DBMError(_messages.CLOSED % self.path)
            self._opener(self)  # a store made by _pending: opened at its first use
            self._opener = None

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
                key = as_bytes(key, "keys")
            place = self._index.get(key)
            return place is not None and not self._expired(key, *place)

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
                # the compiled kernel's index is rebuilt.
                raise RuntimeError(_messages.CHANGED_DURING_ITERATION % self.path)
            yield key

    def keys(self, prefix=None):
        """``_interface.Store.keys``, in the index's (a dict's) order, or sorted with a prefix."""
        if prefix is not None:
            return _order.listed(self, prefix, "keys")
        with self._guard:
            self._check_open()
            return list(self._index)

    def values(self, prefix=None):
        """``_interface.Store.values``, in the index's order, or the keys' with a prefix."""
        if prefix is not None:
            return _order.listed(self, prefix, "values")
        return [value for _, value in self.items()]

    def items(self, prefix=None):
        """``_interface.Store.items``, in the index's order, or sorted with a prefix."""
        if prefix is not None:
            return _order.listed(self, prefix, "items")
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
                key = as_bytes(key, "keys")
            try:
                offset, length = self._index[key]
            except KeyError:
                raise KeyError(original) from None
            self._busy = _messages.INTERRUPTED
            try:
                if self._expired(key, offset, length):
                    raise KeyError(original)
                return self._read(key, offset, length)
            finally:
                self._busy = None

    def view(self, key):
        """``_interface.Store.view``: a read-only view of a copy, read as ``__getitem__`` reads.

        This kernel reads values with ``pread`` and keeps no map to point
        into (and a memoryview into a Python ``mmap`` would make its
        ``close()`` raise BufferError for as long as the view lived), so
        the view holds a copy: the same bytes, the same errors, no saving.
        """
        return memoryview(Store.__getitem__(self, key))

    def _expired(self, key, offset, length):
        """Whether the put of ``key`` whose value is ``length`` bytes at ``offset`` has expired.

        Only a log that holds an expiry record (``_expiring``: the replay,
        or a write, met one) is looked at, each right after its put in one
        batch (docs/FORMAT.md, "Expiry"): the bytes after the put, read
        from the buffer or the file as a value is, tell.
        """
        if not self._expiring:
            return False
        start = offset + length + CHECKSUM_SIZE
        size = EXPIRY_OVERHEAD + len(key)
        if start >= self._disk_end:
            found = bytes(self._buffer[start - self._disk_end : start - self._disk_end + size])
        elif start + size > self._disk_end:
            return False  # the put ends the file's log: its expiry record would too
        else:
            found = _files.read_up_to(self._fd, size, start)
        expires_at = expiry_after(found, 0, len(found), key)
        return expires_at is not None and expires_at <= _expiry.now()

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
        (expected,) = CHECKSUM.unpack_from(data, length)
        if checksum(key, value) != expected:
            raise DBMChecksumError(
                _messages.CHECKSUM_MISMATCH
                % (self.path, key, offset - LENGTHS_SIZE - len(key))
            )
        return value

    def __setitem__(self, key, value):
        with self._guard:
            if self._fd < 0 or self._busy or not self.writable:
                self._check_writable("write")
            if type(key) is not bytes:
                key = as_bytes(key, "keys")
            if type(value) is not bytes:
                value = as_bytes(value, "values")
            if len(key) > MAX_LENGTH or len(value) > MAX_LENGTH:
                what = "keys" if len(key) > MAX_LENGTH else "values"
                raise ValueError(_messages.TOO_LONG % what)
            record = encode_put(key, value)
            if not key and not value:
                # Twelve zero bytes, which must not end the log: sealed in the
                # same write (docs/FORMAT.md, "Zero runs").
                end = self._disk_end + len(self._buffer) + EMPTY_RECORD_SIZE
                record += seal(end, self._index.__contains__)
            self._append(record, [(key, LENGTHS_SIZE + len(key), len(value))])

    def __delitem__(self, key):
        with self._guard:
            self._check_writable("delete")
            original = key
            key = as_bytes(key, "keys")
            if key not in self._index:
                raise KeyError(original)
            self._append(encode_delete(key), [(key, 0, DELETED)])

    def _commit_batch(self, changes, expires_at=0):
        """``_interface.Store._commit_batch``: one batch record, ``_records.encode_batch``'s."""
        if type(changes) is not dict or not all(
            type(key) is bytes and (value is None or type(value) is bytes)
            for key, value in changes.items()
        ):
            raise TypeError(_messages.BATCH_CHANGES)
        with self._guard:
            self._check_writable("write")
            if not self._batches:
                raise DBMError(_messages.NO_BATCHES % ((self.path,) + self._version))
            if expires_at and self._version < EXPIRY_VERSION:
                raise DBMError(_messages.NO_EXPIRY % ((self.path,) + self._version))
            kept = [(key, value) for key, value in changes.items()
                    if value is not None or key in self._index]
            if kept:
                self._append(*encode_batch(kept, expires_at))
                self._expiring = self._expiring or (
                    expires_at != 0 and any(value is not None for _, value in kept))

    def _commit_encoded(self, record):
        """``_interface.Store._commit_encoded``: ``record`` checked by ``_records.batch_puts``."""
        if type(record) is not bytes:
            raise TypeError("a batch record is bytes, not %s" % type(record).__name__)
        with self._guard:
            self._check_writable("write")
            if not self._batches:
                raise DBMError(_messages.NO_BATCHES % ((self.path,) + self._version))
            placed, expiring = batch_puts(record, self._version >= EXPIRY_VERSION)
            self._append(record, placed)
            self._expiring = self._expiring or expiring

    def update(self, other=(), /, **kwds):
        """``_interface.Store.update``: each item stored by ``__setitem__``, which locks for it."""
        with self._guard:
            self._check_writable("write")
        if type(other) is dict:
            for key, value in other.items():
                self[key] = value
        elif hasattr(other, "keys"):
            for key in other.keys():
                self[key] = other[key]
        else:
            for number, item in enumerate(other):
                if type(item) is not tuple or len(item) != 2:
                    item = as_pair(item, number)
                self[item[0]] = item[1]
        for key, value in kwds.items():
            self[key] = value

    def get_many(self, keys, default=None):
        """``_interface.Store.get_many``: one lock for all the reads."""
        with self._guard:
            if self._busy or self._fd < 0:
                self._check_open()
            keys = [as_bytes(key, "keys") for key in key_list(keys, "get_many")]
            self._check_open()  # iterating over the keys may have run any code
            self._busy = _messages.INTERRUPTED
            try:
                index = self._index
                values = []
                for key in keys:
                    place = index.get(key)
                    values.append(default if place is None or self._expired(key, *place)
                                  else self._read(key, *place))
                return values
            finally:
                self._busy = None

    def delete_many(self, keys):
        """``_interface.Store.delete_many``: every key checked, then their delete records appended
        as one (``_append``), so that neither a failed write nor a signal handler's exception
        leaves some of them deleted."""
        with self._guard:
            self._check_writable("delete")
            originals = key_list(keys, "delete_many")
            keys = [as_bytes(key, "keys") for key in originals]
            self._check_writable("delete")  # iterating over the keys may have run any code
            seen = set()
            for original, key in zip(originals, keys):
                if key not in self._index or key in seen:
                    raise KeyError(original)
                seen.add(key)
            if keys:
                records = b"".join(map(encode_delete, keys))
                self._append(records, [(key, 0, DELETED) for key in keys])

    def _append(self, record, placed):
        """Add ``record`` to the log, and what it does to the index.

        ``placed`` lists, for each key the record sets or deletes,
        ``(key, value_start, value_length)``: where in ``record`` its value
        starts and its length (``DELETED``: a delete). ``record`` may go
        on past a key's record (the seal of an empty one,
        ``_records.seal``): it all goes in one write.

        As ``_interface.Store.__setitem__`` says; the record enters the
        buffer and the index with no call in between where a signal
        handler could run, and for several keys, an exception from one
        during their update does not stop it (``_enter``).
        """
        self._busy = _messages.INTERRUPTED
        try:
            if self._buffer and len(self._buffer) + len(record) > self._buffer_size:
                self._flush()
            oversize = len(record) > self._buffer_size
            # For _take_back.
            previous = [(key, self._index.get(key)) for key, _, _ in placed] if oversize else None
            offset = self._disk_end + len(self._buffer)
            if len(placed) == 1:
                key, value_start, value_length = placed[0]
                self._buffer += record
                if value_length == DELETED:
                    del self._index[key]
                else:
                    self._index[key] = (offset + value_start, value_length)
            else:
                puts = {key: (offset + start, length)
                        for key, start, length in placed if length != DELETED}
                deletes = [key for key, _, length in placed if length == DELETED]
                self._enter(record, puts, deletes)
            if oversize:
                try:
                    self._flush()
                except DBMError:
                    self._take_back(previous)
                    raise
        finally:
            self._busy = None

    def _enter(self, record, puts, deletes):
        """Add ``record`` to the buffer, give the index the entries ``puts`` and drop the keys
        ``deletes``: all three, or none.

        Each step runs in C (no handler runs inside one). A handler's
        exception may come as this is called, before any step (none is
        done), or after a step that calls the index: the index's steps
        are then run again before it goes on, so that neither the buffer
        nor the index ever holds part of a batch or of a ``delete_many``.
        """
        try:
            self._buffer += record
            self._index.update(puts)
            deque(map(self._index.pop, deletes, [None] * len(deletes)), 0)
        except BaseException:
            self._index.update(puts)
            deque(map(self._index.pop, deletes, [None] * len(deletes)), 0)
            raise

    def _take_back(self, previous):
        """Undo the append of a record larger than the buffer, whose write failed.

        The buffer held that record alone; what of it reached the file is
        cut off (a partial record no reader indexes), and the index entries
        of its keys, ``previous`` (``(key, entry or None)`` pairs), are put
        back. If the cut fails, the store is closed.
        """
        try:
            os.ftruncate(self._fd, self._disk_end)
        except OSError as exc:
            self._release()
            message = _messages.WRITE_CLOSED % self.path
            raise _files.os_error(exc, message) from None
        self._buffer, self._unsettled = bytearray(), False
        for key, entry in previous:
            if entry is None:
                self._index.pop(key, None)
            else:
                self._index[key] = entry

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
        """``_interface.Store.sync``."""
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

    def compact(self, progress=None, format=None, recover=False):
        """``_interface.Store.compact``: the old log is read in order, its live records copied."""
        if format is not None:
            check_format(format)
        with self._guard:
            self._check_writable("compact")
            major = self._version[0] if format is None else check_format(format)
            self._busy = _messages.INTERRUPTED
            try:
                self._flush()
                self._busy = _messages.COMPACTING
                index, damaged = _compaction.write_compacted(
                    self._directory,
                    self._fd,
                    lambda out: self._write_live_records(out, progress, recover,
                                                         major >= BATCH_FORMAT),
                    _checkpoint.new_log(major),
                )
                self._busy = _messages.INTERRUPTED
                os.close(self._fd)
                self._fd = -1
                replaced, failure = _compaction.install_compacted(self._directory)
                self._fd = self._directory.open_data(True)
                self._identity = _files.file_identity(self._fd)
                if replaced:
                    self._index = index
                    self._disk_end = os.fstat(self._fd).st_size
                    self._version = VERSIONS[major]
            finally:
                self._busy = None
            if failure is not None:
                raise failure
            return damaged

    def _write_live_records(self, out, progress, recover, batches_out):
        """Copy the records the index points at to ``out``, in log order; return their new index
        and how many damaged ones were left out.

        The walk reads lengths only (a batch's head is stepped over, its
        records walked as records), as the compiled kernel's ``write_live``
        does, and stops at the first sign of damage: a live record whose
        value length is not the index's or whose own bytes are not sound
        (its CRC-32; the empty record as ``_records.sound_live`` judges
        it; its expiry record's, ``_records.kept_expiring``), or a record,
        live or not, whose lengths cannot be a record's or run past the log.
        The copy is then started
        again from the index, which judges every live record on its own
        bytes, as it is when the walk jumped over live records
        (``_compaction.all_copied``). A log shorter than the one this
        store wrote raises ``_messages.CHANGED_UNDER``. Calls
        ``progress(done, total)`` as described in
        ``_settings.PROGRESS_STEP`` (from the start again if the copy is).
        A put with an expiry record is copied with it as a batch, or left
        out once expired (``_records.kept_expiring``); without
        ``batches_out`` (a new file of format 1) such a batch is refused
        (``_messages.EXPIRY_NOT_KEPT``).
        """
        total = self._disk_end
        index = {}
        chunk = bytearray()
        written = _checkpoint.START_SIZE
        next_report = PROGRESS_STEP
        lost = False
        now = _expiry.now()
        expired = 0  # live records left out because they expired
        with map_file(self._fd, self.path) as data:
            end = min(total, len(data))
            if end != total:
                raise DBMError(_messages.CHANGED_UNDER % (self.path, end))
            # The loop of every compaction: names held locally, one check per branch.
            unpack, live_at, batches = LENGTHS.unpack_from, self._index.get, self._batches
            matches = _records.checksum_matches
            position = HEADER_SIZE
            batch_end = 0  # the end of the whole batch the walk is in, if any
            while position < end:
                if end - position < EMPTY_RECORD_SIZE:
                    lost = True
                    break
                key_length, value_length = unpack(data, position)
                value_start = position + LENGTHS_SIZE + key_length
                if value_length >= 0:
                    stop = value_start + value_length + CHECKSUM_SIZE
                elif value_length == DELETED:
                    stop = value_start + CHECKSUM_SIZE
                elif value_length == BATCH and batches:
                    # Its records follow, back to back; a body whose checksum matches
                    # vouches for an empty record at its end (_records.sound_live).
                    if position >= batch_end and key_length > 0 and whole_batch(
                        data, position, key_length, end
                    ):
                        batch_end = position + BATCH_HEAD_SIZE + key_length
                    position += BATCH_HEAD_SIZE
                    continue
                elif value_length == EXPIRES and position < batch_end:
                    stop = value_start + EXPIRY_TIME_SIZE + CHECKSUM_SIZE  # copied with its put
                else:
                    lost = True
                    break
                if key_length < 0 or stop > end:
                    lost = True
                    break
                if value_length < 0:
                    position = stop
                    continue
                key = data[position + LENGTHS_SIZE : value_start]
                live = live_at(key)
                if live is not None and live[0] == value_start:
                    # A value length other than the index's is damage, as
                    # the compiled kernel's CRC-32 over that length finds.
                    if live[1] != value_length or not (
                        matches(data, key, value_start, stop)
                        if stop - position != EMPTY_RECORD_SIZE
                        else sound_live(data, position, key, value_start, 0, end, batches,
                                        position < batch_end)
                    ):
                        lost = True
                        break
                    kept = kept_expiring(data, position, stop, end, key, now)
                    if kept is False:
                        lost = True
                        break
                    if kept is not None:
                        if kept:
                            self._check_expiry_kept(batches_out)
                            if len(chunk) + len(kept) > COMPACT_CHUNK:
                                _files.write_all(out, chunk)
                                chunk.clear()
                            chunk += kept
                            index[key] = (written + BATCH_HEAD_SIZE + value_start - position,
                                          value_length)
                            written += len(kept)
                        else:
                            expired += 1
                        position = stop
                        continue
                    size = stop - position
                    if len(chunk) + size > COMPACT_CHUNK:
                        _files.write_all(out, chunk)
                        chunk.clear()
                    if size > COMPACT_CHUNK:
                        with memoryview(data) as view:
                            _files.write_all(out, view[position:stop])
                    else:
                        chunk += data[position:stop]
                    index[key] = (written + value_start - position, value_length)
                    written += size
                    if progress is not None and stop >= next_report:
                        progress(stop, total)
                        next_report = stop + PROGRESS_STEP
                position = stop

            def copy_by_index():
                nonlocal index, written, chunk
                index, written, chunk, left_out = self._copy_by_index(
                    data, out, end, progress, recover, now, batches_out
                )
                return left_out

            damaged = _compaction.all_copied(out, len(self._index), len(index) + expired, lost,
                                             copy_by_index)
        if index.get(b"") == (written - CHECKSUM_SIZE, 0):  # the empty record ends the file
            # The key of the seal is one the old log does not hold, as the compiled kernel's.
            chunk += seal(written, self._index.__contains__)
        _files.write_all(out, chunk)
        if progress is not None:
            progress(total, total)
        return index, damaged

    def _check_expiry_kept(self, batches_out):
        """Refuse to compact a value that has not expired into a file of format 1, which cannot
        hold its expiry (docs/FORMAT.md, "Expiry")."""
        if not batches_out:
            raise DBMError(_messages.EXPIRY_NOT_KEPT % self.path)

    def _copy_by_index(self, data, out, end, progress, recover, now, batches_out):
        """Copy each live record to ``out`` from the offset the index holds, in log order.

        For ``_compaction.all_copied``, when the walk of the log ``data``
        (``end`` bytes) stopped or jumped over live records. A record is
        copied if its own bytes are sound: its lengths the index's, within
        the log, its key the index's, the rest as ``_records.sound_live``
        judges, with its expiry record as ``_records.kept_expiring`` does
        (one that expired by ``now`` is left out); any other raises DBMChecksumError
        (``_compaction.damaged``), or with ``recover`` is left out. Calls
        ``progress`` as the walk does, from the start again. Returns the
        new index, the new log's size, the bytes still to write, and how
        many records were left out.
        """
        index = {}
        chunk = bytearray()
        written = _checkpoint.START_SIZE
        next_report = PROGRESS_STEP
        left_out = 0
        for key, (value_start, value_length) in sorted(
            self._index.items(), key=lambda item: item[1][0]
        ):
            start = value_start - LENGTHS_SIZE - len(key)
            keyed = data[start : start + 4] == len(key).to_bytes(4, "big") and (
                data[start + LENGTHS_SIZE : value_start] == key
            )
            stop = (
                sound_live(data, start, key, value_start, value_length, end, self._batches, False)
                if keyed
                and data[start + 4 : start + LENGTHS_SIZE] == value_length.to_bytes(4, "big")
                else None
            )
            kept = None if stop is None else kept_expiring(data, start, stop, end, key, now)
            if kept is False:
                stop = None
            if stop is not None:
                if len(chunk) > COMPACT_CHUNK:
                    _files.write_all(out, chunk)
                    chunk.clear()
                if kept == b"":  # expired
                    continue
                if kept is not None:
                    self._check_expiry_kept(batches_out)
                chunk += data[start:stop] if kept is None else kept
                index[key] = (written + value_start - start
                              + (0 if kept is None else BATCH_HEAD_SIZE), value_length)
                written += stop - start if kept is None else len(kept)
                if progress is not None and stop >= next_report:
                    progress(stop, self._disk_end)
                    next_report = stop + PROGRESS_STEP
            elif not recover:
                raise _compaction.damaged(self.path, start, key if keyed else None)
            else:
                left_out += 1
        return index, written, chunk, left_out

    def refresh(self):
        """``_interface.Store.refresh``: the new log is read a chunk at a time (``catch_up``)."""
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
                index, end, _, version, expiring = load_index(fd, self.path)
            except BaseException:
                os.close(fd)
                raise
            os.close(self._fd)
            self._fd, self._index, self._disk_end, self._version = fd, index, end, version
            self._expiring = expiring
        elif size != self._disk_end:
            self._catch_up(size)

    def _catch_up(self, size):
        """Bring in the log from ``_disk_end`` to the file's ``size`` (a reader's refresh, a
        shared writer's turn), stopping before an incomplete last record.

        A file shorter than the log read, or a corrupt record, releases the
        store and raises: nothing it indexed can be trusted.
        """
        try:
            if size < self._disk_end:
                raise DBMError(_messages.SHRANK % (self.path, size, self._disk_end))
            self._disk_end = _files.catch_up(
                self._fd,
                self._disk_end,
                size,
                self._replay_chunk,
            )
        except BaseException:
            self._release()
            raise

    def _replay_chunk(self, data, base):
        """``replay_log`` of ``data`` (the file from offset ``base``) into the index, for
        ``_files.catch_up``; an expiry record among the records sets ``_expiring``."""
        end, expiring = replay_log(data, self._index, base, self.path, self._version, base)
        self._expiring = self._expiring or expiring
        return end

    def _follow(self):
        """``_interface.Store._follow``: new records are read with ``pread``, as by ``refresh``."""
        with self._guard:
            self._check_writable("write")
            replaced, size = _files.writer_position(self._directory, self._identity)
            if replaced:
                return self._reload(None)
            if size == self._disk_end:
                return None
            self._busy = _messages.INTERRUPTED
            try:
                self._catch_up(size)
            finally:
                self._busy = None
            if self._disk_end < size:  # a writer died in its turn, in the middle of a record
                return self._reload(self._fd)
            return None

    def _publish(self):
        """``_interface.Store._publish``.

        Whatever stops the write (a full disk, or an exception from a
        signal handler, which may land after the bytes are written), the
        turn ends with the buffer written or dropped: if the file holds it
        all, it is taken as written; otherwise it is cut back and dropped.
        """
        with self._guard:
            if self._fd < 0:
                return
            try:
                self._flush()
            except BaseException:
                buffered = len(self._buffer)
                if buffered:
                    if _files.written_beyond(self._fd, self._disk_end, buffered) == buffered:
                        self._disk_end += buffered
                        self._buffer, self._unsettled = bytearray(), False
                    else:
                        self._abandon()
                raise

    def _reload(self, fd):
        """Replay the log of ``fd`` (this store's file; None: open the one that replaced it) as at
        open.

        For a shared writer in its turn: the file was replaced (another
        writer compacted), its last record is torn (cut here, as at
        open), or a failed write was cut back. Returns the torn tail cut.
        """
        self._busy = _messages.INTERRUPTED
        try:
            if fd is None:
                fd = self._directory.open_data(True)
                os.close(self._fd)
                self._fd = fd
            return self._load(fd, False, None)
        except BaseException:
            self._release()
            raise
        finally:
            self._busy = None

    def _abandon(self):
        """A shared writer's flush failed: cut off what of it reached the file, forget the buffer.

        Under the turn the file past ``_disk_end`` is this writer's alone;
        the index is then rebuilt from the file, so that no key points into
        the records dropped. If the cut fails, the store is closed.
        """
        try:
            os.ftruncate(self._fd, self._disk_end)
        except OSError as exc:
            self._release()
            raise _files.os_error(exc, _messages.WRITE_CLOSED % self.path) from None
        self._buffer, self._unsettled = bytearray(), False
        self._reload(self._fd)

    def _sorted(self, low, high, what):
        """``_interface.Store._sorted``: the index filtered, then ``sorted``."""
        with self._guard:
            self._check_open()
            index = self._index
            keys = _sorted_range(index, low, high)
            if what == "keys":
                return keys
            self._busy = _messages.INTERRUPTED  # as for a read: see __getitem__
            try:
                values = [self._read(key, *index[key]) for key in keys]
            finally:
                self._busy = None
        return _parts.shaped(keys, values, what)

    def _sorted_lines(self, form, progress=None, low=b"", high=None):
        """``_interface.Store._sorted_lines``: ``sorted`` over the index, lines made in Python."""
        make_line = _fields.LINE_FORMS.get(form)
        if make_line is None:
            raise ValueError(_messages.NO_LINE_FORM % (form, ", ".join(_fields.LINE_FORMS)))
        with self._guard:
            self._check_open()
            index = self._index
            count = len(index)
            entries = [(key, index[key]) for key in _sorted_range(index, low, high)]
        if progress is not None:
            progress(len(entries), len(entries))
            with self._guard:
                self._check_same_keys(index, count, ())
        return len(entries), self._line_chunks(index, count, entries, make_line)

    def _line_chunks(self, index, count, entries, make_line):
        """The chunks of ``_sorted_lines``: lines of ``LINES_PER_CHUNK`` keys at a time."""
        reads_values = make_line is _fields.LINE_FORMS["dump"]
        for start in range(0, len(entries), LINES_PER_CHUNK):
            chunk = entries[start : start + LINES_PER_CHUNK]
            with self._guard:
                self._check_same_keys(index, count, chunk)
                self._busy = _messages.INTERRUPTED  # as for a read: see __getitem__
                try:
                    lines = [
                        make_line(key, self._read(key, *place) if reads_values else None)
                        for key, place in chunk
                    ]
                finally:
                    self._busy = None
            yield len(chunk), b"".join(lines)

    def _check_same_keys(self, index, count, chunk):
        """Raise unless the store is open and holds the ``count`` keys ``index`` held.

        A compaction or refresh that replaced the index, a key added, or
        one of ``chunk``'s keys deleted is a change (the compiled kernel's
        table version tells it of any key added or removed).
        """
        if self._fd < 0:
            raise DBMError(_messages.CLOSED_DURING_ITERATION % self.path)
        self._check_open()
        if (
            self._index is not index
            or len(index) != count
            or not all(key in index for key, _ in chunk)
        ):
            raise RuntimeError(_messages.CHANGED_DURING_ITERATION % self.path)

    def _disown(self):
        """``_interface.Store._disown``."""
        self._guard = threading.RLock()
        self._busy = None
        self._owner = os.getppid()
        self.writable = False

    def close(self):
        """``_interface.Store.close``."""
        with self._guard:
            if self._busy:
                raise DBMError(self._busy % self.path)
            self._opener = None
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
        # A store whose opening failed before __init__ ran has no slots set.
        if getattr(self, "_fd", -1) >= 0:
            self.close()
