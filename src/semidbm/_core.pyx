# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True
"""The compiled storage kernel: the same interface and bytes as ``_pure``, at C speed.

``_interface.Store`` says what each member of ``Store`` does; this is how.
Item access, assignment, deletion, ``in`` and ``len`` are C slots of the
``Store`` extension type and run in C. The source is in pieces, one
concern each, in the folder ``_core_pieces``, which this file includes in
one block below (one compilation unit, so that C inlines across them);
docs/development.md, "Where the code lives", lists them with their
pure-Python twins.

This file holds the ``Store`` type. The data file is memory-mapped, so
reads make no system call; a writer maps more than the file holds, so
that appends rarely remap, and touches only offsets below the end of
the log. Appends are encoded, with their CRC-32, straight into a C
buffer that reaches the file in large writes; reads of unflushed
records come from that buffer. Opening, torn tails and the file swap of
a compaction are shared with the pure-Python kernel (``_files``,
``_tail``, ``_compaction``): they are not hot.
"""

cimport cython

import os
import threading

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_CheckBuffer
from cpython.bytes cimport (
    PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
)
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_Check
from libc.errno cimport EBUSY, EINTR, errno
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport UINT64_MAX, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, qsort, realloc
from libc.string cimport memcmp, memcpy, memset
from posix.types cimport pid_t

import sys

from . import (
    _checkpoint, _compaction, _expiry, _fields, _files, _index_file, _messages, _order, _parts,
    _tail,
)
from ._settings import (
    CHECK_CHUNK as _CHECK_CHUNK,
    COMPACT_CHUNK as _COMPACT_CHUNK,
    INDEX_SYNC_SHARE as _INDEX_SYNC_SHARE,
    INDEX_TAIL_SHARE as _INDEX_TAIL_SHARE,
    PROGRESS_STEP as _PROGRESS_STEP,
    index_due,
)
from ._records import LogSummary, as_bytes
from .errors import DBMChecksumError, DBMError, DBMLoadError
from .format import (
    BATCH_FORMAT as _BATCH_FORMAT,
    DATA_NAME as _DATA_NAME,
    EXPIRY_VERSION as _EXPIRY_VERSION,
    INDEX_NAME as _INDEX_NAME,
    MAX_LENGTH as _MAX_LENGTH,
    check_format,
    check_header,
)

cdef enum:
    # Bytes a writer maps beyond the end of a small file, so appends rarely remap.
    MAP_HEADROOM = 1 << 26

cdef Py_ssize_t MAX_LENGTH = _MAX_LENGTH
cdef uint64_t PROGRESS_STEP = _PROGRESS_STEP
cdef Py_ssize_t COMPACT_CHUNK = _COMPACT_CHUNK
cdef uint64_t CHECK_CHUNK = _CHECK_CHUNK
cdef str TOO_LONG = _messages.TOO_LONG
cdef str COMPACTING = _messages.COMPACTING
cdef str CHANGED_DURING_ITERATION = _messages.CHANGED_DURING_ITERATION
cdef str CHANGED_UNDER = _messages.CHANGED_UNDER
cdef str SHRANK = _messages.SHRANK
# The index file's name in the database directory, for fstatat.
cdef bytes INDEX_FILE_NAME = os.fsencode(_INDEX_NAME)

# The pieces of the kernel, each after those it uses. Those that take a Store
# come before its type too: Cython resolves a type across the whole module.
# The C the kernel calls (platform.h, crc32.h), and writing bytes to a file.
include "_core_pieces/platform.pxi"
# The format's sizes, big-endian fields, a record's encoding, borrowed bytes, Log.
include "_core_pieces/bytes.pxi"
# The key hash and the open-addressing hash table of 12-byte slots (Table).
include "_core_pieces/table.pxi"
# The index (Index): its private table over the mapped index file (Base).
include "_core_pieces/index.pxi"
# The index rebuild: the log parsed in blocks, in a second thread for a long one.
include "_core_pieces/replay.pxi"
# The tools' examination of a data file (summarize_log), for stats and verify.
include "_core_pieces/summary.pxi"
# Zero-copy reads: the data file's map as an object, the buffer a view exports.
include "_core_pieces/views.pxi"
# Whether to trust an index file: the checks an open and a refresh make, in C.
include "_core_pieces/trust.pxi"
# The Store's use of the index file: map, check, drop, switch, write.
include "_core_pieces/keys.pxi"
# Parts of the keys (keys, values or items), listed from the slot ranges that hold
# them (semidbm.dask).
include "_core_pieces/parts.pxi"
# Committing a batch: one record whose keys enter the index together.
include "_core_pieces/batch_commit.pxi"
# The keys in byte order as lines of text (Store._sorted_lines).
include "_core_pieces/sorted.pxi"
# The bulk operations: update, get_many and delete_many.
include "_core_pieces/bulk.pxi"
# A sharded database's reads, each key routed to its shard in C.
include "_core_pieces/shards.pxi"
# A shared writer's turn taken in C, for its single puts and deletes.
include "_core_pieces/turns.pxi"


# What ``expiry_copy_size`` finds after a live put, beside the size of what to write.
cdef enum:
    NO_EXPIRY_RECORD = 0
    EXPIRY_DAMAGED = -1
    EXPIRED = -2


cdef int64_t expiry_copy_size(const Log* log, uint64_t position, uint64_t size,
                              uint64_t now) noexcept nogil:
    """What a compaction writes of the sound live put of ``size`` bytes at ``position`` in the
    mapping, as ``_records.kept_expiring`` decides.

    ``NO_EXPIRY_RECORD`` if no expiry record follows it (it is copied as
    it is), ``EXPIRY_DAMAGED`` if one does whose checksum fails,
    ``EXPIRED`` if it expired by ``now`` (left out); else the size of the
    batch record of the put and its expiry record (``write_expiring``).
    """
    cdef const char* record = log.map + position
    cdef int32_t key_size = <int32_t>load_be32(record)
    cdef uint64_t put_end = position + size
    cdef uint64_t expires_at
    cdef uint64_t expiry_end = put_end + EXPIRY_OVERHEAD + <uint64_t>key_size
    if not log_expiry(log, log.disk_end, put_end, record + LENGTHS_SIZE, key_size, &expires_at):
        return NO_EXPIRY_RECORD
    if not checksum_matches(log.map, put_end, key_size, expiry_end):
        return EXPIRY_DAMAGED
    if expires_at <= now:
        return EXPIRED
    return <int64_t>(RECORD_OVERHEAD + expiry_end - position)


cdef int chunk_add(int out, char* chunk, Py_ssize_t* used, const char* data,
                   Py_ssize_t size) except -1:
    """Add ``size`` bytes to a compaction's ``chunk`` (``COMPACT_CHUNK`` bytes, ``used`` of them
    filled), written to ``out`` when full; more than a chunk is written straight, and every
    write without a chunk (NULL)."""
    if chunk == NULL:
        return write_or_raise(out, data, size)
    if used[0] + size > COMPACT_CHUNK:
        write_or_raise(out, chunk, used[0])
        used[0] = 0
    if size > COMPACT_CHUNK:
        write_or_raise(out, data, size)
    else:
        memcpy(chunk + used[0], data, size)
        used[0] += size
    return 0


cdef int write_expiring(int out, char* chunk, Py_ssize_t* used, const char* record,
                        Py_ssize_t batch_size) except -1:
    """Add the batch record of ``batch_size`` bytes whose body is the put at ``record`` and the
    expiry record after it to a compaction's ``chunk`` (``chunk_add``)."""
    cdef char head[RECORD_OVERHEAD]
    cdef Py_ssize_t body_size = batch_size - RECORD_OVERHEAD
    encode_lengths(head, body_size, BATCH)
    store_be32(head + LENGTHS_SIZE, crc32(0, record, <size_t>body_size))
    chunk_add(out, chunk, used, head, RECORD_OVERHEAD)
    return chunk_add(out, chunk, used, record, body_size)


cdef int compare_offsets(const void* a, const void* b) noexcept nogil:
    """``qsort``'s order of two slots: by their offsets, ascending (``Store.write_by_index``)."""
    cdef uint64_t first = (<const Slot*>a).offset
    cdef uint64_t second = (<const Slot*>b).offset
    return (first > second) - (first < second)


cdef class Store:
    """``_interface.Store`` in C: the index, the append buffer and the mapping.

    Item operations run in C without releasing the GIL, so each is atomic
    for threads sharing the store. The operations that do release it
    (sync, compact, refresh, close) hold ``guard``; while one of them has
    the file or index in flux, ``busy`` is set and item operations wait
    for ``guard``.
    """

    #: Whether a shared writer's single puts and deletes take their turn in the store's own
    #: item slots (``_shared.py`` sets it True on its classes); a class attribute, so that
    #: making a store looks it up without an AttributeError.
    _turns_in_kernel = False

    cdef readonly object path
    cdef readonly bint writable
    # What load returned at open (see _interface.Store.torn_tail).
    cdef readonly object torn_tail
    # The data file's format version, (major, minor), as load read it.
    cdef object version
    # The database directory, held open (see _files.Directory).
    cdef object directory
    cdef int fd
    cdef bint verify
    cdef object guard
    cdef bint busy
    # The parent's process id once a fork()ed child has disowned the store.
    cdef pid_t owner
    # The log: the mapping of the data file (its bytes below log.disk_end
    # belong to the log), then the buffer of records not yet written to it.
    cdef Log log
    # The map log.map points into (see views.pxi), and its length.
    cdef DataMap mapping
    cdef size_t map_size
    # The views of values in this store's maps that are alive.
    cdef ViewCount views
    cdef Py_ssize_t buffer_used
    cdef Py_ssize_t buffer_size
    # A flush failed: the file may hold a first part of the buffer.
    cdef bint unsettled
    # The keys: the mapped index file and the private table; both read
    # the keys of their records through log.
    cdef Index index
    # The index file's identity (_index_file.identity) when it was mapped, or None.
    cdef object index_identity
    # The end of the log the last index file written or mapped covers.
    cdef uint64_t index_written
    # For a store made by _pending: what opens it at first use; None once open.
    cdef object opener
    # The data file's st_dev and st_ino as load found them (a writer's): a shared
    # writer's turn compares the file named data with them (_files.writer_position,
    # and turn_follow in C).
    cdef uint64_t data_device
    cdef uint64_t data_inode
    # For a shared writer's turns in C (turns.pxi): lock.write, mapped at the first
    # (or NULL), whether its turns are the mutex in it (else an flock), how many turns
    # in C use the map now, holding the turn or trying for it with the GIL let go (a
    # release then leaves the map to the last of them), and the count of replaced data
    # files at which a stat last found data to be the file open here, if one has
    # (replacements_known).
    cdef volatile semidbm_turns* turns
    cdef bint mutex_turns
    # Where a turn in C finds the store's lock and the lock's attributes it reads and sets
    # (LockSlots, found with the map), and the lock's dict of the turns this process holds.
    cdef LockSlots lock_slots
    cdef object turns_held
    # The thread that took the last turn in C, as an int for the lock's ``_owner`` (made again
    # only when another thread takes one).
    cdef unsigned long turn_owner_ident
    cdef object turn_owner
    # A shared writer's class whose single puts and deletes take their turns in C: its
    # ``_turns_in_kernel`` (below; True in ``_shared.py``'s classes), read once, when the
    # store is made.
    cdef bint turns_in_kernel
    cdef int turns_in_use
    cdef uint64_t replacements_seen
    cdef bint replacements_known
    # The open database directory's descriptor (_files.Directory.fd), or -1.
    cdef int directory_fd

    def __cinit__(self):
        self.turns_in_kernel = type(self)._turns_in_kernel is True
        self.fd = -1
        self.directory_fd = -1
        self.turns = NULL
        self.replacements_known = False
        self.log.map = NULL
        self.log.buffer = NULL
        self.index.table.slots = NULL
        self.index.table.log = &self.log
        self.index.base.map = NULL
        self.index.base.verified = NULL
        self.index.base.table.log = &self.log
        self.views = ViewCount.__new__(ViewCount)

    def __init__(self, directory, writable, buffer_size, verify_checksums, recover, writer_active):
        self.directory = directory
        if directory.fd is not None:
            self.directory_fd = directory.fd
        self.path = directory.data_path
        self.writable = writable
        self.verify = verify_checksums
        if self.guard is None:  # a store made by _pending keeps the guard it is used under
            self.guard = threading.RLock()
        self.buffer_size = buffer_size
        if writable and buffer_size > 0:
            self.log.buffer = <char*>malloc(buffer_size)
            if self.log.buffer == NULL:
                raise MemoryError("cannot allocate a buffer of %d bytes" % buffer_size)
        self.fd = directory.open_data(writable)  # the API layer closes the directory if this raises
        try:
            self.torn_tail = self.load(buffer_size, recover, writer_active)
        except BaseException:
            self.release()
            raise

    @classmethod
    def _pending(cls, path, writable, opener):
        """``_interface.Store._pending``."""
        cdef Store store = cls.__new__(cls)
        store.path = path
        store.writable = writable
        store.guard = threading.RLock()
        store.opener = opener
        return store

    def _open_pending(self):
        """``_interface.Store._open_pending``."""
        if self.opener is not None:
            self.check_open()

    def __dealloc__(self):
        self.release()

    def __del__(self):
        if self.fd >= 0:
            self.close()

    cdef void release(self) noexcept:
        """Give back the file, the directory, the mapping and the memory, writing nothing."""
        self.unmap()
        if self.fd >= 0:
            semidbm_close(self.fd)
            self.fd = -1
        self.directory_fd = -1  # closed with the directory below
        if self.turns != NULL and not self.turns_in_use:
            semidbm_unmap_turns(self.turns)
            self.turns = NULL
        self.replacements_known = False
        free(self.log.buffer)
        self.log.buffer = NULL
        self.buffer_used = 0
        table_clear(&self.index.table)
        base_clear(&self.index.base)
        directory, self.directory = self.directory, None
        if directory is not None:  # None after a collector's clearing, too
            try:
                directory.close()
            except OSError:
                pass

    # --- the mapping and the index rebuild ---

    cdef void unmap(self) noexcept:
        """Let go of the map: unmapped now, or once the last view of a value in it goes."""
        self.log.map = NULL
        self.map_size = 0
        self.mapping = None

    cdef int map_file(self, uint64_t size) except -1:
        """Map the data file's first ``size`` bytes (and room to grow, for a writer)."""
        cdef uint64_t length = size
        cdef DataMap mapping = DataMap.__new__(DataMap)
        cdef int error = 0
        if self.writable and SEMIDBM_MAP_BEYOND_EOF:
            length += size if size > MAP_HEADROOM else MAP_HEADROOM
        if length > <uint64_t>(<size_t>-1):
            raise DBMError("%s: a file of %d bytes cannot be mapped here" % (self.path, size))
        mapping.data = semidbm_map(self.fd, <size_t>length, &error)
        if mapping.data == NULL:
            self.raise_os_error(error, "cannot map %s" % self.path)
        mapping.size = <size_t>length
        self.unmap()
        self.mapping = mapping
        self.log.map = mapping.data
        self.map_size = mapping.size
        return 0

    cdef object load(self, Py_ssize_t buffer_size, bint recover, object writer_active):
        """Map the file, find its keys (index file, then the log past it), settle a torn tail.

        With a writer at work (for a reader, ``writer_active()`` says so;
        it is asked only when the log ends in an incomplete record) that
        record is a write in progress, not a torn tail. A torn tail is
        settled only after a replay of the whole log, never on the word
        of an index file (it may be wrong about where records begin).
        Returns what ``_tail.settle_tail`` does: the torn tail left out,
        or None.
        """
        cdef object torn_tail = None
        cdef IndexHeader header
        cdef object info = os.fstat(self.fd)
        cdef uint64_t size = info.st_size
        if self.writable:
            self.data_device = info.st_dev
            self.data_inode = info.st_ino
        if size < HEADER_SIZE:
            check_header(_files.read_at(self.fd, size, 0), self.path)
        self.map_file(size)
        self.version = check_header(PyBytes_FromStringAndSize(self.log.map, HEADER_SIZE), self.path)
        self.log.batches = self.version[0] >= _BATCH_FORMAT
        self.log.expirable = self.version >= _EXPIRY_VERSION
        self.log.expiring = False  # until the replay, or a write, meets an expiry record
        keys_forget(self)
        self.log.disk_end = size
        if self.directory_fd >= 0 and semidbm_name_missing(self.directory_fd, INDEX_FILE_NAME):
            keys_attach(self, &header, None)  # no index file: nothing to check, or to remove
        else:
            keys_attach(self, &header, index_file_load(self, size, self.writable, &header))
        self.log.disk_end = keys_replay_log(self, size)
        if self.log.disk_end < size and not (writer_active is not None and writer_active()):
            if self.index.base.map != NULL:
                keys_forget(self)
                self.log.disk_end = size  # keys are read through the mapping up to here
                self.log.disk_end = keys_replay_log(self, size)
            if self.writable:
                self.unmap()  # Windows cannot cut a mapped file
            torn_tail = _tail.settle_tail(self.fd, self.directory, self.log.disk_end, size,
                                          self.writable, buffer_size, recover, self.log.batches)
            if self.writable:  # the index file was checked against the log before its cut
                _index_file.remove_refused(self.directory, self.fd, self.log.disk_end)
            if self.log.map == NULL:
                self.map_file(self.log.disk_end)
        return torn_tail

    # --- the index file (its use is in keys.pxi) ---

    @property
    def index_covered(self):
        """``_interface.Store.index_covered``."""
        return self.index.base.covered

    @property
    def key_seed(self):
        """``_interface.Store.key_seed``: the index's (its index file's, if one is mapped)."""
        self.check_open()
        return self.index.seed

    @property
    def log_state(self):
        """``_interface.Store.log_state``."""
        self.check_open()
        return _parts.log_state(self.fd, self.log.disk_end + self.buffer_used, self.log.disk_end)

    def _part(self, part, parts, seed, what):
        """``_interface.Store._part``: a range of slots under the index's seed (parts.pxi)."""
        _parts.check_part(part, parts, seed, what)
        self.check_open()
        return parts_list(self, part, parts, seed, parts_form(what))

    @property
    def format_version(self):
        """``_interface.Store.format_version``."""
        if self.version is None:
            self._open_pending()
        return self.version

    # --- checks and errors ---

    cdef int check_open(self) except -1:
        """Wait out busy spells, then raise if closed.

        Busy while this thread holds the guard means this thread is the
        one compacting: a progress callback is using the database.
        """
        while self.busy:
            if self.guard._is_owned():
                raise DBMError(COMPACTING % self.path)
            with self.guard:
                pass
        if self.fd < 0:
            if self.opener is None:
                raise DBMError(_messages.CLOSED % self.path)
            self.open_pending()
        return 0

    cdef int open_pending(self) except -1:
        """Open a store made by ``_pending``, at its first use, holding the guard.

        The store is busy meanwhile: another thread's operation waits for
        the guard, then finds it open, never half open (its file open and
        its keys not yet found).
        """
        with self.guard:
            if self.opener is not None:
                self.busy = True
                try:
                    self.opener(self)
                    self.opener = None
                finally:
                    self.busy = False
            elif self.fd < 0:
                raise DBMError(_messages.CLOSED % self.path)
        return 0

    cdef int check_writable(self, str action) except -1:
        self.check_open()
        if self.owner:
            raise DBMError(_messages.FORKED % (action, self.path, self.owner))
        if not self.writable:
            raise DBMError(_messages.READ_ONLY % (action, self.path))
        return 0

    cdef int raise_os_error(self, int number, str action) except -1:
        raise _files.os_error(OSError(number, os.strerror(number)), action)

    # --- writing ---

    cdef int write_failed(self, int number) except -1:
        """A record written straight failed: cut off what of it reached the file and raise.

        That partial record is the last thing in the file, and no reader
        indexes a partial record. If the cut fails too, the store is closed.
        The cut is made in C, with the GIL held: no other thread of the
        process appends while the file is cut back.
        """
        if semidbm_truncate(self.fd, self.log.disk_end):
            # The file now ends in a partial record: stop here; the next
            # open treats it as a torn tail.
            self.release()
            self.raise_os_error(number, _messages.WRITE_CLOSED % self.path)
        self.raise_os_error(number, _messages.WRITE_FAILED % self.path)

    cdef int grew(self, Py_ssize_t size) except -1:
        """Account for ``size`` bytes written at the end of the log; remap if needed."""
        self.log.disk_end += size
        if self.log.disk_end > self.map_size:
            self.map_file(self.log.disk_end)
        return 0

    cdef int flush(self) except -1:
        """Apply pending index updates and write the buffer to the file (no fsync).

        If the write fails (a full disk), what reached the file stays
        there, the buffer keeps every record, and ``unsettled`` makes the
        next flush resume where the file ends: the file is this writer's
        alone, so its size says how much was written. The file never
        shrinks under a reader (docs/FORMAT.md, "Writing").
        """
        cdef int failure
        cdef int64_t size
        cdef Py_ssize_t done = 0, used
        if self.index.table.pending_count:
            keys_apply_pending(self)
        if self.buffer_used:
            if self.unsettled:  # what a failed flush put past the log's end (in C, the GIL held)
                size = semidbm_file_size(self.fd)
                if size < 0:
                    self.raise_os_error(errno, _messages.WRITE_FAILED % self.path)
                if size > <int64_t>self.log.disk_end:
                    done = min(<uint64_t>size - self.log.disk_end, <uint64_t>self.buffer_used)
            self.unsettled = True
            failure = write_all(self.fd, self.log.buffer + done, self.buffer_used - done)
            if failure:
                self.raise_os_error(failure, _messages.WRITE_FAILED % self.path)
            used = self.buffer_used
            self.buffer_used = 0
            self.unsettled = False
            self.grew(used)
        return 0

    cdef uint64_t append(self, const char* key, Py_ssize_t key_size,
                         const char* value, Py_ssize_t value_size) except? 0:
        """Add a record (``value`` NULL for a delete) to the log; return its offset.

        The buffer is written out first when the record would overflow it;
        a record larger than the buffer goes straight to the file. If
        writing fails, the record is not in the log and the error propagates.
        """
        cdef Py_ssize_t size = RECORD_OVERHEAD + key_size + (value_size if value != NULL else 0)
        cdef char head[LENGTHS_SIZE]
        cdef char tail[CHECKSUM_SIZE]
        cdef uint64_t offset
        cdef uint32_t crc
        cdef int failure
        if self.buffer_used + size <= self.buffer_size:
            offset = self.log.disk_end + self.buffer_used
            encode_record(self.log.buffer + self.buffer_used, key, key_size, value, value_size)
            self.buffer_used += size
            return offset
        self.flush()
        if size <= self.buffer_size:
            return self.append(key, key_size, value, value_size)
        crc = crc32(0, key, key_size)
        if value != NULL:
            crc = crc32(crc, value, value_size)
        encode_lengths(head, key_size, value_size if value != NULL else DELETED)
        store_be32(tail, crc)
        offset = self.log.disk_end
        failure = write_all(self.fd, head, LENGTHS_SIZE)
        if not failure:
            failure = write_all(self.fd, key, key_size)
        if not failure and value != NULL:
            failure = write_all(self.fd, value, value_size)
        if not failure:
            failure = write_all(self.fd, tail, CHECKSUM_SIZE)
        if failure:
            self.write_failed(failure)
        self.grew(size)
        return offset

    cdef bytes sealed_empty(self, uint64_t offset):
        """The record of ``b''`` and ``b''``, at ``offset`` in the file, with its seal.

        It is twelve zero bytes, which must not end the log: the put and
        delete of ``_records.seal`` follow it, by the same rule, in the
        same write (``append_encoded``). Built here in C, with no Python
        code run between choosing the seal's key and appending it: no
        other thread can make that key live meanwhile. Looking keys up may
        apply pending updates, so this comes before the table makes room.
        """
        cdef uint64_t end = offset + RECORD_OVERHEAD
        cdef Py_ssize_t room = DISK_SECTOR - <Py_ssize_t>(end % DISK_SECTOR)
        cdef Py_ssize_t size = 1
        cdef Py_ssize_t record_size
        cdef bytes sealed
        cdef char* out
        cdef uint32_t crc
        while self.holds_zeros(size) or (
            2 * (RECORD_OVERHEAD + size) > room >= RECORD_OVERHEAD + size
        ):
            size += 1
        record_size = RECORD_OVERHEAD + size
        sealed = PyBytes_FromStringAndSize(NULL, RECORD_OVERHEAD + 2 * record_size)
        out = PyBytes_AS_STRING(sealed)
        memset(out, 0, RECORD_OVERHEAD + 2 * record_size)
        out += RECORD_OVERHEAD
        crc = crc32(0, out + LENGTHS_SIZE, size)  # of the key's zero bytes
        encode_lengths(out, size, 0)
        store_be32(out + LENGTHS_SIZE + size, crc)
        encode_lengths(out + record_size, size, DELETED)
        store_be32(out + record_size + LENGTHS_SIZE + size, crc)
        return sealed

    cdef int write_seal(self, int out, uint64_t offset) except -1:
        """Seal the empty record a compaction wrote last, at ``offset`` of the file ``out``."""
        cdef bytes sealed = self.sealed_empty(offset)
        return write_or_raise(out, PyBytes_AS_STRING(sealed) + RECORD_OVERHEAD,
                              len(sealed) - RECORD_OVERHEAD)

    cdef bint holds_zeros(self, Py_ssize_t size) except -1:
        """Whether the key of ``size`` zero bytes is live (applying pending updates first).

        A mapped slot whose check fails counts as live (``keys_find_kept``):
        the seal then takes a longer key, and a compaction's seal never
        drops the index it copies by.
        """
        cdef char* key = <char*>calloc(size, 1)
        cdef uint64_t offset
        if key == NULL:
            raise MemoryError("cannot allocate a key of %d bytes" % size)
        try:
            if self.index.table.pending_count:
                keys_apply_pending(self)
            return keys_find_kept(self, key, size, hash_key(self.index.seed, key, size),
                                  &offset) != 0
        finally:
            free(key)

    cdef uint64_t append_encoded(self, bytes record) except? 0:
        """Add the bytes of records encoded whole to the log in one write; return their offset.

        ``sealed_empty``'s, a batch record, or the delete records of a
        ``delete_many`` (``bulk.pxi``). In the buffer, or straight
        to the file when larger than it (cut back if that write fails).
        """
        cdef uint64_t offset = self.log.disk_end + self.buffer_used
        cdef Py_ssize_t size = len(record)
        cdef int failure
        if self.buffer_used + size > self.buffer_size:
            self.flush()
        if size <= self.buffer_size:
            memcpy(self.log.buffer + self.buffer_used, <const char*>record, size)
            self.buffer_used += size
            return offset
        failure = write_all(self.fd, record, size)
        if failure:
            self.write_failed(failure)
        self.grew(size)
        return offset

    # --- the mapping interface ---

    def __len__(self):
        self.check_open()
        if self.index.table.pending_count:
            keys_apply_pending(self)
        return index_live(&self.index)

    def __contains__(self, key):
        cdef Borrowed borrowed
        cdef uint64_t now
        self.check_reads(&now)
        borrow(key, &borrowed, "keys")
        try:
            return self.holds(borrowed.data, borrowed.size, now)
        finally:
            give_back(&borrowed)

    cdef inline bint holds(self, const char* key, Py_ssize_t key_size, uint64_t now) except -1:
        """Whether ``key`` (``key_size`` bytes) is live, and has not expired by ``now``; the
        caller has checked the store (``check_reads``)."""
        cdef uint64_t offset
        if keys_find(self, key, key_size, hash_key(self.index.seed, key, key_size),
                     &offset) != 1:
            return False
        return not (self.log.expiring and self.expired(offset, now))

    def __getitem__(self, key):
        cdef Borrowed borrowed
        cdef uint64_t now
        self.check_reads(&now)
        if PyBytes_Check(key):
            return self.get(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), key, now)
        borrow(key, &borrowed, "keys")
        try:
            return self.get(borrowed.data, borrowed.size, key, now)
        finally:
            give_back(&borrowed)

    cdef inline int check_reads(self, uint64_t* now) except -1:
        """What a read checks before its lookup: the store open and idle, the index up to date.

        ``now[0]`` is set to the clock of the read's expiry checks
        (``log_now``), which may run Python code: the store is checked
        again after it, and from there the read runs none, so no other
        thread closes, writes or remaps under it. The clock is read once
        the store is open: a store made by ``_pending`` opens at its first
        check, and only then knows whether its log holds expiry records.
        """
        if self.fd < 0 or self.busy:
            self.check_open()
        now[0] = log_now(&self.log)
        if self.fd < 0 or self.busy:
            self.check_open()
        if self.index.table.pending_count:
            keys_apply_pending(self)
        return 0

    cdef object get(self, const char* key, Py_ssize_t key_size, object original, uint64_t now):
        """The value of ``key``: KeyError of ``original`` if it is missing or expired by ``now``
        (``check_reads``: no Python code runs from the lookup to the copy of the value, so no
        other thread moves it meanwhile)."""
        cdef uint32_t hashed = hash_key(self.index.seed, key, key_size)
        cdef Py_ssize_t slot = table_find(&self.index.table, key, key_size, hashed)
        cdef uint64_t offset
        cdef const char* value
        cdef Py_ssize_t value_size
        cdef int32_t found_size
        if slot >= 0:
            offset = self.index.table.slots[slot].offset
        elif self.index.base.table.capacity == 0:
            raise KeyError(original)
        else:
            if not base_near_home(&self.index.base, key, key_size, hashed, &slot, &offset,
                                  &found_size):
                slot = (base_find(&self.index.base, key, key_size, hashed, &offset, &found_size)
                        if slot == MISSING else
                        base_probe(&self.index.base, key, key_size, hashed, slot, &offset,
                                   &found_size))
            if slot >= 0 and not base_is_shadowed(&self.index.base, slot):
                if not self.verify:  # the record lies in the covered log, as the lookup checked
                    return PyBytes_FromStringAndSize(
                        self.log.map + offset + LENGTHS_SIZE + key_size, found_size)
            elif slot != DAMAGED or keys_find_in_base(self, key, key_size, hashed, &offset) != 1:
                raise KeyError(original)
        # (The index file's covered log holds no expiry record: keys_write writes none then.)
        value = self.value_at(offset, &value_size)
        if self.log.expiring and self.expired(offset, now):
            raise KeyError(original)
        return PyBytes_FromStringAndSize(value, value_size)

    cdef bint expired(self, uint64_t offset, uint64_t now) noexcept:
        """Whether the live put at ``offset``, which ``value_at`` has read, has expired by
        ``now`` (``check_reads``).

        Asked only once the log holds an expiry record (``log.expiring``),
        so that reads of a log without one pay nothing: the record after
        the put tells (``log_expiry``; docs/FORMAT.md, "Expiry"). C alone:
        no other thread runs between the caller's lookup and its use of the
        value.
        """
        cdef const char* record = log_record(&self.log, offset)
        cdef int32_t key_size = <int32_t>load_be32(record)
        cdef uint64_t put_end = (offset + RECORD_OVERHEAD + <uint64_t>key_size
                                 + <uint32_t>load_be32(record + 4))
        cdef uint64_t expires_at
        return log_expiry(&self.log, self.log.disk_end + self.buffer_used, put_end,
                          record + LENGTHS_SIZE, key_size, &expires_at) and expires_at <= now

    cdef const char* value_at(self, uint64_t offset, Py_ssize_t* value_size) except NULL:
        """The value of the live record at ``offset``, its size in ``value_size``.

        A record the mapping holds must end within the log (DBMError if
        not: the file changed under the index); with ``verify``, its
        checksum must match (DBMChecksumError, at the record's offset).
        """
        cdef const char* found = log_record(&self.log, offset)
        cdef int32_t key_size = <int32_t>load_be32(found)
        cdef int32_t size = <int32_t>load_be32(found + 4)
        if offset < self.log.disk_end and (
            size < 0 or offset + RECORD_OVERHEAD + key_size + size > self.log.disk_end
        ):
            raise DBMError(CHANGED_UNDER % (self.path, offset))
        if self.verify and crc32(0, found + LENGTHS_SIZE, key_size + size) != load_be32(
            found + LENGTHS_SIZE + key_size + size
        ):
            raise DBMChecksumError(_messages.CHECKSUM_MISMATCH % (
                self.path, PyBytes_FromStringAndSize(found + LENGTHS_SIZE, key_size), offset))
        value_size[0] = size
        return found + LENGTHS_SIZE + key_size

    def view(self, key):
        """``_interface.Store.view``: a view into the map, or of a copy of a buffered value.

        The view holds the map (``views.pxi``), not the store. A record
        still in the append buffer has no place in the map yet, and the
        buffer is overwritten as it is reused: its value is copied.
        """
        cdef Borrowed borrowed
        cdef uint64_t offset
        cdef const char* value
        cdef Py_ssize_t size
        cdef uint64_t now
        self.check_reads(&now)
        borrow(key, &borrowed, "keys")
        try:
            if keys_find(self, borrowed.data, borrowed.size,
                         hash_key(self.index.seed, borrowed.data, borrowed.size), &offset) != 1:
                raise KeyError(key)
            value = self.value_at(offset, &size)
            if self.log.expiring and self.expired(offset, now):
                raise KeyError(key)
            if offset >= self.log.disk_end:
                return memoryview(PyBytes_FromStringAndSize(value, size))
            return view_of_mapped(self.mapping, self.views, value, size)
        finally:
            give_back(&borrowed)

    def __setitem__(self, key, value):
        if self.turns_in_kernel:
            self.shared_put(key, value)
        else:
            self.put(key, value)

    def _put(self, key, value):
        """``self[key] = value`` without a turn in C: a shared writer's put in a turn taken in
        Python (``_shared.py``'s ``_put_in_turn``)."""
        self.put(key, value)

    @cython.final
    cdef int put(self, object key, object value) except -1:
        """``self[key] = value``."""
        cdef Borrowed borrowed_key, borrowed_value
        cdef uint32_t hashed
        cdef uint64_t offset
        cdef bint damaged
        cdef bytes sealed = None
        if self.fd < 0 or self.busy or not self.writable:
            self.check_writable("write")
        borrow(key, &borrowed_key, "keys")
        try:
            borrow(value, &borrowed_value, "values")
            try:
                if borrowed_key.size > MAX_LENGTH:
                    raise ValueError(TOO_LONG % "keys")
                if borrowed_value.size > MAX_LENGTH:
                    raise ValueError(TOO_LONG % "values")
                hashed = hash_key(self.index.seed, borrowed_key.data, borrowed_key.size)
                if borrowed_key.size == 0 and borrowed_value.size == 0:
                    sealed = self.sealed_empty(self.log.disk_end + self.buffer_used)
                table_reserve(&self.index.table)
                if sealed is not None:
                    offset = self.append_encoded(sealed)
                else:
                    offset = self.append(borrowed_key.data, borrowed_key.size,
                                         borrowed_value.data, borrowed_value.size)
                if offset >= self.log.disk_end:
                    damaged = index_defer(&self.index, hashed, offset) == DAMAGED
                else:
                    damaged = index_put(&self.index, hashed, offset) == DAMAGED
                if damaged:
                    # The replay of the whole log applies this record too.
                    keys_drop(self)
            finally:
                give_back(&borrowed_value)
        finally:
            give_back(&borrowed_key)
        return 0

    def __delitem__(self, key):
        if self.turns_in_kernel:
            self.shared_delete(key)
        else:
            self.delete(key)

    def _delete(self, key):
        """``del self[key]`` without a turn in C: a shared writer's delete in a turn taken in
        Python (``_shared.py``'s ``_delete_in_turn``)."""
        self.delete(key)

    @cython.final
    cdef int delete(self, object key) except -1:
        """``del self[key]``."""
        cdef Borrowed borrowed
        cdef uint32_t hashed
        cdef Py_ssize_t slot, held = MISSING
        cdef uint64_t found
        cdef int32_t value_size
        self.check_writable("delete")
        if self.index.table.pending_count:
            keys_apply_pending(self)
        borrow(key, &borrowed, "keys")
        try:
            hashed = hash_key(self.index.seed, borrowed.data, borrowed.size)
            slot = table_find(&self.index.table, borrowed.data, borrowed.size, hashed)
            if slot < 0 and self.index.base.table.capacity:
                if not base_near_home(&self.index.base, borrowed.data, borrowed.size, hashed,
                                      &held, &found, &value_size):
                    held = (base_find(&self.index.base, borrowed.data, borrowed.size, hashed,
                                      &found, &value_size)
                            if held == MISSING else
                            base_probe(&self.index.base, borrowed.data, borrowed.size, hashed,
                                       held, &found, &value_size))
                if held == DAMAGED:
                    keys_drop(self)
                    slot = table_find(&self.index.table, borrowed.data, borrowed.size, hashed)
                    held = MISSING
                elif held >= 0 and base_is_shadowed(&self.index.base, held):
                    held = MISSING  # deleted since the base
            if slot < 0 and held < 0:
                raise KeyError(key)
            # With nothing pending, appending moves no slot.
            self.append(borrowed.data, borrowed.size, NULL, 0)
            if slot >= 0:
                table_remove(&self.index.table, slot)  # its base slot, if any, is marked
            else:
                base_mark(&self.index.base, held)  # not marked: tested above
        finally:
            give_back(&borrowed)
        return 0

    def __iter__(self):
        self.check_open()
        if self.index.table.pending_count:
            keys_apply_pending(self)
        keys_verify(self)
        return KeyIterator(self)

    def keys(self, prefix=None):
        """``_interface.Store.keys``, in the index's order, or sorted with a prefix."""
        if prefix is not None:
            return _order.listed(self, prefix, "keys")
        return self.snapshot("keys")

    def values(self, prefix=None):
        """``_interface.Store.values``, in the index's order, or the keys' with a prefix."""
        if prefix is not None:
            return _order.listed(self, prefix, "values")
        return self.snapshot("values")

    def items(self, prefix=None):
        """``_interface.Store.items``, in the index's order, or sorted with a prefix."""
        if prefix is not None:
            return _order.listed(self, prefix, "items")
        return self.snapshot("items")

    cdef list snapshot(self, str what):
        """The keys, the values or ``(key, value)`` pairs (``what``), in the index's order.

        Runs in C without releasing the GIL: no other thread changes the
        index meanwhile. Only bytes objects are made while the index is
        read (a tuple, which the garbage collector tracks, may start a
        collection, whose finalizers run Python code and let other threads
        write); pairs are made once every key and value is read.
        """
        cdef list found_keys = []
        cdef list found_values = []
        cdef size_t position = 0
        cdef uint64_t offset, version
        cdef Py_ssize_t key_size, value_size
        cdef const char* record
        cdef const char* value
        cdef bint keys = what != "values"
        cdef bint values = what != "keys"
        self.check_open()
        if self.index.table.pending_count:
            keys_apply_pending(self)
        keys_verify(self)
        version = self.index.table.version
        while True:
            offset = keys_next_live(self, &position)
            if offset == 0:
                if self.index.table.version != version:  # the index file was dropped
                    return self.snapshot(what)
                break
            record = log_record(&self.log, offset)
            key_size = <int32_t>load_be32(record)
            if keys:
                found_keys.append(PyBytes_FromStringAndSize(record + LENGTHS_SIZE, key_size))
            if values:  # an expired value too, until a compaction drops it (docs/expiry.md)
                value = self.value_at(offset, &value_size)
                found_values.append(PyBytes_FromStringAndSize(value, value_size))
        return _parts.shaped(found_keys, found_values, what)

    # --- bulk operations (their loops are in bulk.pxi) ---

    def update(self, other=(), /, **kwds):
        """``_interface.Store.update``, in C."""
        bulk_update(self, other, kwds)

    def get_many(self, keys, default=None):
        """``_interface.Store.get_many``, in C: the lookups pipelined."""
        return bulk_get(self, keys, default)

    def delete_many(self, keys):
        """``_interface.Store.delete_many``, in C: every key is found before any is deleted."""
        bulk_delete(self, keys)

    # --- a sharded database's reads (shards.pxi), for semidbm.sharded ---

    @staticmethod
    def _routed_get_many(tuple shards not None, keys, default=None):
        """``get_many`` of ``keys`` across ``shards`` (Stores), each key in the shard that
        ``ShardRouter`` routes it to."""
        return shards_get_many(shards, keys, default)

    @staticmethod
    def _routed_split(pairs, Py_ssize_t count):
        """``pairs`` split among ``count`` shards, routed as ``ShardRouter`` routes: a dict per
        shard."""
        return shards_split(pairs, count)

    @staticmethod
    def _routed_batches(pairs, Py_ssize_t count):
        """``pairs`` encoded as a batch record per shard of ``count`` (routed as ``ShardRouter``
        routes), for ``_commit_encoded``; None for a shard without any."""
        return shards_batches(pairs, count)

    @property
    def closed(self):
        """``_interface.Store.closed``: the data file is no longer open here (nor pending)."""
        return self.fd < 0 and self.opener is None

    # --- sync, compaction and refresh ---

    def sync(self):
        """``_interface.Store.sync``; the flush applies the pending index updates, too.

        The write-out releases the GIL and runs Python code (the fsync,
        the index file): the store is busy meanwhile, as for ``close``,
        so that another thread's item operation waits rather than change
        the index or the log between the index file's count, its slots
        and the end of the log it covers (the fsync's).
        """
        with self.guard:
            if not self.writable and not self.owner:
                self.check_open()
                return
            self.check_writable("sync")
            self.busy = True
            try:
                self.write_out(_INDEX_SYNC_SHARE)
            finally:
                self.busy = False

    cdef int write_out(self, Py_ssize_t share) except -1:
        """Write the buffer and fsync the data file: ``sync()``, and a writer's ``close()``.

        If the log past the last index file is long enough for a new one
        (``_settings.index_due`` with ``share``), a checkpoint is appended
        first, for the index file to name (docs/FORMAT.md, "Checkpoints"); the
        new index file is written and flushed while the data file's fsync
        runs in another thread, and renamed into place only once that has
        succeeded. The caller has checked that the store is writable.
        """
        cdef uint64_t end = self.log.disk_end + self.buffer_used  # once flushed
        cdef uint64_t checkpoint = 0
        if not self.log.expiring and index_due(self.index_written, end, share):
            checkpoint = self.append_encoded(_checkpoint.new(end))
        self.flush()
        if checkpoint:
            flushing = _files.BackgroundFsync(self.fd)
            try:
                keys_write(self, checkpoint, lambda: flushing.wait() is None)
            finally:
                failure = flushing.wait()
        else:
            try:
                os.fsync(self.fd)
                failure = None
            except OSError as exc:
                failure = exc
        if failure is not None:
            raise _files.os_error(failure, "cannot sync %s" % self.path)
        return 0

    def compact(self, progress=None, format=None, recover=False):
        """``_interface.Store.compact``: a walk of the mapped log copies the live records."""
        cdef int major
        if format is not None:
            check_format(format)

        def write_records(out):
            cdef Py_ssize_t copied = 0
            cdef bint lost = False
            empty_at = self.write_live(out, progress, &copied, &lost, major >= _BATCH_FORMAT)
            if empty_at:
                self.write_seal(out, empty_at)  # cut off with the rest if copied again
            left_out = _compaction.all_copied(out, index_live(&self.index), copied, lost,
                                              lambda: self.write_by_index(
                                                  out, progress, recover, major >= _BATCH_FORMAT))
            if progress is not None:
                progress(self.log.disk_end, self.log.disk_end)
            return left_out

        with self.guard:
            self.check_writable("compact")
            major = self.version[0] if format is None else check_format(format)
            _compaction.check_views_released(self.path, self.views.alive)
            self.flush()
            keys_verify(self)
            self.busy = True
            try:
                damaged = _compaction.write_compacted(self.directory, self.fd, write_records,
                                                      _checkpoint.new_log(major))
                self.unmap()
                semidbm_close(self.fd)
                self.fd = -1
                _, failure = _compaction.install_compacted(self.directory)
                keys_forget(self)
                try:
                    self.fd = self.directory.open_data(True)
                    self.load(self.buffer_size, False, None)
                    if not self.log.expiring:  # (docs/FORMAT.md, "Expiry")
                        keys_write(self, HEADER_SIZE)  # the new log's first checkpoint
                except BaseException:
                    self.release()
                    raise
            finally:
                self.busy = False
            if failure is not None:
                raise failure
            return damaged

    cdef uint64_t write_live(self, int out, object progress, Py_ssize_t* copied,
                             bint* lost, bint batches_out) except? 0:
        """Copy the records the index points at to the file ``out``, in log order.

        Memory use is one chunk (``COMPACT_CHUNK``); a larger record is
        written on its own, and a batch's records as records of their
        own. The walk stops at the first sign of damage and sets
        ``lost``: a live record whose own bytes are not sound
        (``sound_live_size``), a slot of the mapped index whose check
        fails (``keys_find_kept``: the index is never dropped here), or a
        record, live or not, whose lengths cannot be a record's (a
        batch's head is stepped over, its records walked as records). A
        damaged length no longer tells where the next record starts, so
        ``compact`` then copies again from the index, which judges every
        live record on its own bytes (``_compaction.all_copied``). The
        records copied are counted in ``copied``, for ``compact`` to
        check that none live was jumped over. Calls ``progress(done,
        total)`` as described in ``_settings.PROGRESS_STEP``, but not at
        the end, which ``compact`` reports. Returns where the last record
        copied starts if it is the empty one (``compact`` then seals it:
        docs/FORMAT.md, "Zero runs"), else 0. A put with an expiry record
        is copied with it as a batch (``write_expiring``), or left out once
        expired; ``batches_out`` says that the new file may hold that batch
        (format 2: otherwise ``check_expiry_kept`` refuses).
        """
        cdef char* chunk = <char*>malloc(COMPACT_CHUNK)
        cdef uint64_t position = HEADER_SIZE
        cdef uint64_t end = self.log.disk_end
        cdef uint64_t next_report = PROGRESS_STEP
        cdef uint64_t batch_end = 0  # the end of the whole batch the walk is in, if any
        cdef Py_ssize_t used = 0
        cdef Py_ssize_t size
        cdef uint64_t live_offset
        cdef Py_ssize_t found
        cdef int32_t key_size, value_size
        cdef const char* record
        cdef bint ends_empty = False  # the last record copied is an empty one
        cdef uint64_t written = _checkpoint.START_SIZE  # the new file's size
        cdef uint64_t now = clock_now() if self.log.expiring else 0
        cdef int64_t kept
        if chunk == NULL:
            raise MemoryError("cannot allocate the compaction buffer")
        try:
            while position < end:
                if end - position < RECORD_OVERHEAD:
                    lost[0] = True  # the index tells which live record, if any, is damaged
                    break
                record = self.log.map + position
                key_size = <int32_t>load_be32(record)
                value_size = <int32_t>load_be32(record + 4)
                if value_size == BATCH and self.log.batches:
                    # Its records follow, back to back; a body whose checksum matches
                    # vouches for an empty record at its end (sound_live_size).
                    if position >= batch_end and whole_batch(self.log.map, position, key_size,
                                                             end):
                        batch_end = position + RECORD_OVERHEAD + <uint64_t>key_size
                    position += RECORD_OVERHEAD
                    continue
                if value_size == EXPIRES and position < batch_end and key_size >= 0 and (
                    EXPIRY_OVERHEAD + <uint64_t>key_size <= batch_end - position
                ):
                    position += EXPIRY_OVERHEAD + <uint64_t>key_size  # copied with its put
                    continue
                if (key_size < 0 or value_size < DELETED
                        or <uint64_t>key_size > end - position - RECORD_OVERHEAD):
                    lost[0] = True
                    break
                size = RECORD_OVERHEAD + key_size + (value_size if value_size > 0 else 0)
                if value_size != DELETED:
                    found = keys_find_kept(
                        self, record + LENGTHS_SIZE, key_size,
                        hash_key(self.index.seed, record + LENGTHS_SIZE, key_size), &live_offset)
                    if found == DAMAGED:
                        lost[0] = True
                        break
                    if found == 1 and live_offset == position:
                        if not sound_live_size(self.log.map, position, key_size, value_size, end,
                                               self.log.batches, position < batch_end):
                            lost[0] = True
                            break
                        kept = (expiry_copy_size(&self.log, position, size, now)
                                if self.log.expiring else NO_EXPIRY_RECORD)
                        if kept == EXPIRY_DAMAGED:
                            lost[0] = True
                            break
                        if kept == NO_EXPIRY_RECORD:
                            chunk_add(out, chunk, &used, record, size)
                            ends_empty = size == RECORD_OVERHEAD and value_size == 0
                            written += size
                        elif kept != EXPIRED:
                            self.check_expiry_kept(batches_out)
                            write_expiring(out, chunk, &used, record, kept)
                            ends_empty = False
                            written += <uint64_t>kept
                        copied[0] += 1
                        if progress is not None and position + size >= next_report:
                            progress(position + size, end)
                            next_report = position + size + PROGRESS_STEP
                if <uint64_t>size > end - position:
                    lost[0] = True
                    break
                position += size
            write_or_raise(out, chunk, used)
        finally:
            free(chunk)
        return written - RECORD_OVERHEAD if ends_empty else 0

    cdef int check_expiry_kept(self, bint batches_out) except -1:
        """Refuse to compact a value that has not expired into a file without batches (format 1),
        which cannot hold its expiry (DBMError; docs/FORMAT.md, "Expiry")."""
        if not batches_out:
            raise DBMError(_messages.EXPIRY_NOT_KEPT % self.path)
        return 0

    cdef Py_ssize_t write_by_index(self, int out, object progress, bint recover,
                                   bint batches_out) except -1:
        """Copy each live record to the file ``out`` from the offset the index holds, in log order.

        For ``_compaction.all_copied``, when the walk of the mapped log
        lost its way or jumped over live records. A record is copied if
        its own bytes are sound: its key the one the index holds there
        (``keys_find_kept``), the rest as ``sound_live_size`` judges;
        any other raises DBMChecksumError (``_compaction.damaged``,
        naming the key where the one there still has its slot's hash),
        or with ``recover`` is left out. The live slots are copied out
        and sorted by offset, 12 bytes a live key (the index itself takes
        about 18). Calls ``progress`` as the walk does, from the start
        again. Seals the copy if its last record is the empty one (as
        ``compact`` does after ``write_live``). Returns how many records
        were left out.
        """
        cdef size_t capacity = index_live(&self.index) + 1
        cdef Slot* slots = <Slot*>malloc(capacity * sizeof(Slot))
        cdef Slot* grown
        cdef size_t position = 0
        cdef size_t taken = 0
        cdef uint64_t offset = 0
        try:
            while slots != NULL:
                offset = keys_next_live(self, &position, False)
                if offset == 0:
                    break
                if taken == capacity:  # not with a count the index keeps right; never trusted
                    capacity *= 2
                    grown = <Slot*>realloc(slots, capacity * sizeof(Slot))
                    if grown == NULL:
                        break
                    slots = grown
                slots[taken] = keys_slot(self, position - 1)[0]
                taken += 1
            if slots == NULL or offset != 0:
                raise MemoryError("cannot allocate the slots of %d live records" % capacity)
            qsort(slots, taken, sizeof(Slot), compare_offsets)
            return self.write_at_slots(out, progress, recover, slots, taken, batches_out)
        finally:
            free(slots)

    cdef Py_ssize_t write_at_slots(self, int out, object progress, bint recover,
                                   const Slot* slots, size_t count, bint batches_out) except -1:
        """``write_by_index``'s copy, from ``count`` live ``slots`` in log order (``batches_out``
        as ``write_live`` takes it)."""
        cdef uint64_t offset, found, size
        cdef uint64_t end = self.log.disk_end
        cdef uint64_t next_report = PROGRESS_STEP
        cdef uint64_t written = _checkpoint.START_SIZE
        cdef uint64_t empty_at = 0
        cdef Py_ssize_t left_out = 0
        cdef const char* record = NULL
        cdef int32_t key_size = 0
        cdef int32_t value_size
        cdef bint keyed
        cdef size_t at
        cdef uint64_t now = clock_now() if self.log.expiring else 0
        cdef int64_t kept = NO_EXPIRY_RECORD
        for at in range(count):
            offset = slots[at].offset
            # No byte is read before the offset is known to frame a record's lengths within the
            # log (an index file's slot may point anywhere), nor a key or value before its
            # length is known to lie within it.
            keyed = False
            size = 0
            if end >= RECORD_OVERHEAD and HEADER_SIZE <= offset <= end - RECORD_OVERHEAD:
                record = log_record(&self.log, offset)
                key_size = <int32_t>load_be32(record)
                value_size = <int32_t>load_be32(record + 4)
                keyed = (key_size >= 0
                         and <uint64_t>key_size <= end - offset - RECORD_OVERHEAD
                         and hash_key(self.index.seed, record + LENGTHS_SIZE,
                                      key_size) == slots[at].hash)
                if keyed and keys_find_kept(self, record + LENGTHS_SIZE, key_size,
                                            slots[at].hash, &found) == 1 and found == offset:
                    size = sound_live_size(self.log.map, offset, key_size, value_size, end,
                                           self.log.batches, False)
            if size and self.log.expiring:
                kept = expiry_copy_size(&self.log, offset, size, now)
                if kept == EXPIRED:
                    continue
                if kept == EXPIRY_DAMAGED:
                    size = 0
            if size and kept > 0:
                self.check_expiry_kept(batches_out)
                write_expiring(out, NULL, NULL, record, kept)
                empty_at = 0
                written += <uint64_t>kept
            elif size:
                write_or_raise(out, record, size)
                empty_at = written if size == RECORD_OVERHEAD else 0
                written += size
                if progress is not None and offset + size >= next_report:
                    progress(offset + size, end)
                    next_report = offset + size + PROGRESS_STEP
            elif not recover:
                raise _compaction.damaged(
                    self.path, offset,
                    PyBytes_FromStringAndSize(record + LENGTHS_SIZE, key_size) if keyed else None)
            else:
                left_out += 1
        if empty_at:
            self.write_seal(out, empty_at)
        return left_out

    def refresh(self):
        """``_interface.Store.refresh``: the new log is read into a copy (see ``replay_copy``)."""
        cdef uint64_t size
        with self.guard:
            self.check_open()
            if self.writable or self.owner:
                return
            replaced, size = _files.reader_position(self.directory, self.fd)
            if replaced:
                fd = self.directory.open_data(False)
                self.busy = True
                try:
                    self.unmap()
                    semidbm_close(self.fd)
                    self.fd = fd
                    # The writer is at work: an incomplete last record is its.
                    self.load(0, False, lambda: True)
                except BaseException:
                    self.release()
                    raise
                finally:
                    self.busy = False
            elif size < self.log.disk_end:
                self.release()  # what it indexed is gone
                raise DBMError(SHRANK % (self.path, size, self.log.disk_end))
            else:
                # Switching to a newer index file forgets every key before it
                # attaches the new file, and both steps run Python code (the
                # GIL may pass): other threads' item operations wait meanwhile.
                self.busy = True
                try:
                    keys_switch(self, size)
                    if size > self.log.disk_end:
                        _files.catch_up(self.fd, self.log.disk_end, size,
                                        lambda data, base: self.replay_copy(data, base))
                except BaseException:
                    self.release()  # a corrupt log: nothing after it can be trusted
                    raise
                finally:
                    self.busy = False

    cdef uint64_t replay_copy(self, bytes data, uint64_t base) except? 0:
        """A reader's refresh: replay ``data``, a copy of the log from ``disk_end`` (``base``) on.

        Called by ``_files.catch_up`` a chunk at a time: the new log is
        read into a copy, not through the mapping, since a write failing
        at this moment may cut a partial last record, where the mapping
        would read zeros or fault (docs/FORMAT.md, "Readers"). During the
        replay the copy stands in for the (reader's empty) buffer, so
        that the table finds the new keys; complete records are never
        cut, so the mapping serves them afterwards. Returns the new
        ``disk_end``.
        """
        cdef uint64_t size = base + len(data)
        cdef uint64_t end
        if not data:
            return base
        self.map_file(size)
        self.log.buffer = <char*>PyBytes_AS_STRING(data)
        try:
            end = replay(&self.index, self.log.buffer, base, base, size, self.path)
            if end == 0:  # the mapped index file proved damaged
                keys_drop(self)
                end = replay(&self.index, self.log.buffer, base, base, size, self.path)
        finally:
            self.log.buffer = NULL
        self.log.disk_end = end
        return end

    # --- shared writers (the API layer's turns: _shared.py) ---

    def _follow(self):
        """``_interface.Store._follow``: new records are replayed through the writer's map.

        The map of a writer reaches past the end of the file, so the
        records other writers appended are in it (it is remapped only if
        they outgrew it); under the turn, nothing cuts them meanwhile.
        """
        cdef uint64_t size
        with self.guard:
            self.check_writable("write")
            replaced, size = _files.writer_position(
                self.directory, (self.data_device, self.data_inode)
            )
            if replaced:
                return self.reload(True)
            if size < self.log.disk_end:
                self.release()  # what it indexed is gone
                raise DBMError(SHRANK % (self.path, size, self.log.disk_end))
            if size == self.log.disk_end:
                return None
            if self.replay_tail(size) < size:  # a writer died in its turn, in a record
                return self.reload(False)
            return None

    cdef uint64_t replay_tail(self, uint64_t size) except? 0:
        """Add the records other writers appended from ``disk_end`` to ``size``; return the end.

        For a shared writer in its turn (``_follow``, ``turn_follow``): the
        end is ``size``, or where an incomplete last record begins. The
        records are replayed through the map, remapped first if they
        outgrew it. A corrupt record raises and closes the store.
        """
        cdef uint64_t start, end = 0
        self.busy = True
        try:
            if size > self.map_size:
                self.map_file(size)
            start = self.log.disk_end
            self.log.disk_end = size  # the new keys are read through the map
            end = replay(&self.index, self.log.map, 0, start, size, self.path)
            if end == 0:  # the mapped index file proved damaged
                keys_forget(self)
                end = replay(&self.index, self.log.map, 0, HEADER_SIZE, size, self.path)
            self.log.disk_end = end
        except BaseException:
            self.release()  # a corrupt log: nothing after it can be trusted
            raise
        finally:
            self.busy = False
        return end

    def _publish(self):
        """``_interface.Store._publish``."""
        with self.guard:
            self.publish()

    cdef int publish(self) except -1:
        """Write the buffer out as ``_publish`` does; ``turn_end`` calls it without the guard.

        The guard is taken for the abandon, which runs Python code; until
        then the GIL is held, so no other thread of the process runs.
        """
        if self.fd < 0:
            return 0
        try:
            self.flush()
        except DBMError:
            with self.guard:
                self.abandon()
            raise
        return 0

    @cython.final
    cdef int shared_put(self, object key, object value) except -1:
        """A shared writer's ``self[key] = value``: its whole turn in C (``turns.pxi``).

        If the turn cannot be taken in C, or catching up meets anything
        unusual, it is taken in Python: ``_put_in_turn`` (``_shared.py``).
        """
        cdef object lock = turn_begin(self)
        if lock is None:
            self._put_in_turn(key, value)
            return 0
        try:
            self.put(key, value)
        finally:
            turn_end(self, lock)
        return 0

    @cython.final
    cdef int shared_delete(self, object key) except -1:
        """A shared writer's ``del self[key]``: as ``shared_put``, else ``_delete_in_turn``."""
        cdef object lock = turn_begin(self)
        if lock is None:
            self._delete_in_turn(key)
            return 0
        try:
            self.delete(key)
        finally:
            turn_end(self, lock)
        return 0

    def _shared_update(self, other=(), /, **kwds):
        """A shared writer's ``update``: as ``shared_put``, else ``_update_in_turn``.

        Code that the call runs (an iterator's) runs in the turn, as in
        a turn taken in Python.
        """
        cdef object lock = turn_begin(self)
        if lock is None:
            return self._update_in_turn(other, **kwds)
        try:
            bulk_update(self, other, kwds)
        finally:
            turn_end(self, lock)

    def _shared_delete_many(self, keys):
        """A shared writer's ``delete_many``: as ``shared_put``, else ``_delete_many_in_turn``."""
        cdef object lock = turn_begin(self)
        if lock is None:
            return self._delete_many_in_turn(keys)
        try:
            bulk_delete(self, keys)
        finally:
            turn_end(self, lock)

    cdef object reload(self, bint reopen):
        """Find the keys again as opening does, the file reopened first if ``reopen``.

        For a shared writer in its turn: the file was replaced (another
        writer compacted), its last record is torn (cut here, as at
        open), or a failed write was cut back. Returns the torn tail cut.
        """
        self.busy = True
        try:
            self.unmap()
            if reopen:
                fd = self.directory.open_data(True)
                semidbm_close(self.fd)
                self.fd = fd
            return self.load(self.buffer_size, False, None)
        except BaseException:
            self.release()
            raise
        finally:
            self.busy = False

    cdef int abandon(self) except -1:
        """A shared writer's flush failed: cut off what of it reached the file, forget the buffer.

        Under the turn the file past ``disk_end`` is this writer's alone;
        the keys are then found again from the file, so that none points
        into the records dropped. If the cut fails, the store is closed.
        """
        cdef int failure = semidbm_truncate(self.fd, self.log.disk_end)
        if failure:
            self.release()
            self.raise_os_error(failure, _messages.WRITE_CLOSED % self.path)
        self.buffer_used = 0
        self.unsettled = False
        self.reload(False)  # which forgets the pending updates with every key
        return 0

    def _commit_batch(self, dict changes not None, uint64_t expires_at=0):
        """``_interface.Store._commit_batch``, in C (``batch_commit.pxi``)."""
        with self.guard:
            self.check_writable("write")
            return batch_commit(self, changes, expires_at)

    def _commit_encoded(self, bytes record not None):
        """``_interface.Store._commit_encoded``, in C (``batch_commit.pxi``)."""
        with self.guard:
            self.check_writable("write")
            return batch_append(self, record)

    def _sorted(self, bytes low not None, bytes high, what):
        """``_interface.Store._sorted``, in C (``sorted.pxi``)."""
        return sorted_range(self, low, high, what)

    def _sorted_lines(self, form, progress=None, bytes low not None=b"", bytes high=None):
        """``_interface.Store._sorted_lines``, in C (``sorted.pxi``)."""
        return sorted_lines(self, form, progress, low, high)

    def _disown(self):
        """``_interface.Store._disown``."""
        self.guard = threading.RLock()
        self.busy = False
        self.owner = os.getppid()
        self.writable = False

    def close(self):
        """``_interface.Store.close``.

        A writer's last write-out releases the GIL (the fsync, the index
        file): the store is busy meanwhile, so that an item operation of
        another thread waits for the guard and then finds the store closed,
        rather than landing in a buffer about to be freed unwritten.
        """
        with self.guard:
            if self.busy and self.opener is None:  # busy opening: a failed open closes it
                raise DBMError(COMPACTING % self.path)
            self.opener = None
            if self.fd < 0:
                return
            try:
                if self.writable:
                    self.check_writable("sync")
                    self.busy = True
                    self.write_out(_INDEX_TAIL_SHARE)
            finally:
                self.busy = False
                self.release()


cdef class KeyIterator:
    """Iterates over a Store's keys (as bytes), in the index's order."""

    cdef Store store
    cdef size_t position
    cdef uint64_t version

    def __cinit__(self, Store store):
        self.store = store
        self.position = 0
        self.version = store.index.table.version

    def __iter__(self):
        return self

    def __next__(self):
        cdef Store store = self.store
        cdef const char* record
        cdef uint64_t offset
        keys_check_unchanged(store, self.version)
        offset = keys_next_live(store, &self.position)
        if offset == 0:
            if store.index.table.version != self.version:  # the index file was dropped
                raise RuntimeError(CHANGED_DURING_ITERATION % store.path)
            raise StopIteration
        record = log_record(&store.log, offset)
        return PyBytes_FromStringAndSize(record + LENGTHS_SIZE, <int32_t>load_be32(record))
