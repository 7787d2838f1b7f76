# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled storage kernel: the same interface and bytes as ``_pure``, at C speed.

- Item access, assignment, deletion, ``in`` and ``len`` are C slots of
  the ``Store`` extension type.
- The index is an open-addressing hash table in C (linear probing,
  backward-shift deletion). A slot holds a record's offset and a 32-bit
  hash of its key, 12 bytes; the key itself is compared against the
  record, so the index does not grow with key length. A large table
  asks for huge pages (Linux), since its lookups land anywhere in it.
- An assignment's index update waits in a small queue, its slot
  prefetched, and is applied a few assignments later, so that loading
  a large index does not stall on each slot; every other operation
  applies the queue first. The index rebuild parses records a block
  ahead of its updates for the same reason.
- The data file is memory-mapped: reads make no system call. Writers map
  more than the file holds so that appends rarely need a new mapping;
  only offsets below the end of the log are ever touched.
- Appends are encoded, with their CRC-32, straight into a C buffer that
  reaches the file in large writes; reads of unflushed records come from
  that buffer.
- The index is rebuilt on open in C. Every length read from the file is
  checked before use: a damaged file raises DBMLoadError, never reads out
  of bounds. The rebuild asks for the log a little ahead of its parsing,
  and sizes the table once from the share of the log read so far instead
  of doubling it over and over; checksums are not read (the torn-tail
  check reads them only when a long tail is left over, see ``_files``).
  With another processor free, a long log is parsed in a second thread
  (pure C, no Python) while this one updates the index; the result is
  the same as parsing in one.

Opening, torn tails and the file swap of a compaction are shared with
the pure-Python kernel (``_files``): they are not hot.
"""

import os
import threading

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_CheckBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_Check
from libc.errno cimport EINTR, errno
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy
from posix.types cimport pid_t

from . import _files, _messages
from ._settings import COMPACT_CHUNK as _COMPACT_CHUNK, PROGRESS_STEP as _PROGRESS_STEP
from .errors import DBMChecksumError, DBMError, DBMLoadError
from .format import MAX_LENGTH as _MAX_LENGTH, check_header

cdef extern from "_crc32.h":
    void semidbm_crc32_init()
    uint32_t crc32 "semidbm_crc32" (uint32_t crc, const char* data, size_t size) noexcept nogil

cdef extern from "_platform.h":
    const char* semidbm_map(int fd, size_t length, int* error)
    void semidbm_unmap(const char* data, size_t length)
    ptrdiff_t semidbm_write(int fd, const char* data, size_t size)
    int semidbm_close(int fd)
    void semidbm_advise_huge(void* data, size_t size) noexcept nogil
    void semidbm_prefetch(const void* address) noexcept nogil
    uint64_t semidbm_load_acquire(volatile uint64_t* counter) noexcept nogil
    void semidbm_store_release(volatile uint64_t* counter, uint64_t value) noexcept nogil
    uint64_t semidbm_exchange(volatile uint64_t* counter, uint64_t value) noexcept nogil
    void semidbm_pause() noexcept nogil
    void semidbm_yield() noexcept nogil
    int64_t semidbm_clock_ns() noexcept nogil
    enum: SEMIDBM_MAP_BEYOND_EOF

semidbm_crc32_init()


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    unsigned long PyThread_start_new_thread(void (*function)(void*) noexcept nogil, void* argument)
    enum: PYTHREAD_INVALID_THREAD_ID
    int PyObject_GetBuffer(object obj, Py_buffer* view, int flags)
    void PyErr_Clear()

cdef enum:
    HEADER_SIZE = 8
    LENGTHS_SIZE = 8
    CHECKSUM_SIZE = 4
    RECORD_OVERHEAD = 12
    DELETED = -1
    # Slots in the smallest table.
    MIN_CAPACITY = 16
    # Index updates an assignment may leave pending (see Store.defer).
    PENDING_LIMIT = 16
    # Bytes in the smallest memory page.
    PAGE_SIZE = 4096
    # Records the index rebuild parses at a time (a block).
    REPLAY_BLOCK = 256
    # Blocks the parsing thread of the index rebuild may be ahead of its updates.
    REPLAY_RING = 64
    # Bytes of the log the index rebuild asks the processor for ahead of its parsing.
    REPLAY_PREFETCH = 2048
    # Bytes in a processor's cache line (the usual size).
    CACHE_LINE = 64
    # Records whose slot the index rebuild asks the processor for ahead of their update.
    SLOT_PREFETCH = 16
    # Nanoseconds the index rebuild waits for a block from its parsing
    # thread before it parses the rest itself.
    REPLAY_PATIENCE = 1000000
    # ParseRing.started: the parsing thread has not started yet, has
    # started, or will find on starting that the rebuild is over.
    NOT_STARTED = 0
    STARTED = 1
    ABANDONED = 2
    # Pauses a waiting thread of the index rebuild spins before it yields the processor.
    SPINS = 64
    # Logs at least this long are parsed in a thread of their own during the index rebuild.
    THREADED_REPLAY_MIN = 1 << 22
    # The index rebuild sizes its table from the log's size once it has
    # read this fraction of the log (one part in so many).
    PROJECTION_SAMPLE = 16
    # Bytes a writer maps beyond the end of a small file, so appends rarely remap.
    MAP_HEADROOM = 1 << 26
    # Largest single write() (some systems refuse more than 2 GiB at once).
    WRITE_LIMIT = 1 << 30

cdef Py_ssize_t MAX_LENGTH = _MAX_LENGTH
cdef uint64_t PROGRESS_STEP = _PROGRESS_STEP
cdef Py_ssize_t COMPACT_CHUNK = _COMPACT_CHUNK
cdef str TOO_LONG = _messages.TOO_LONG
cdef str COMPACTING = _messages.COMPACTING
cdef str CHANGED_DURING_ITERATION = _messages.CHANGED_DURING_ITERATION
cdef str CHANGED_UNDER = _messages.CHANGED_UNDER
cdef str SHRANK = _messages.SHRANK


# --- Big-endian fields and key hashing ---

cdef inline uint32_t load_be32(const char* data) noexcept nogil:
    cdef const uint8_t* p = <const uint8_t*>data
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | (<uint32_t>p[3])


cdef inline void store_be32(char* data, uint32_t value) noexcept nogil:
    cdef uint8_t* p = <uint8_t*>data
    p[0] = <uint8_t>(value >> 24)
    p[1] = <uint8_t>(value >> 16)
    p[2] = <uint8_t>(value >> 8)
    p[3] = <uint8_t>value


cdef inline uint64_t mix(uint64_t value) noexcept nogil:
    value ^= value >> 32
    value *= 0xD6E8FEB86659FD93ULL
    value ^= value >> 32
    value *= 0xD6E8FEB86659FD93ULL
    return value ^ (value >> 32)


cdef uint64_t random_seed() except? 0:
    cdef uint64_t seed = 0
    for byte in os.urandom(8):
        seed = (seed << 8) | <uint8_t>byte
    return seed


cdef uint64_t hash_seed = random_seed()


cdef inline uint32_t hash_key(const char* key, Py_ssize_t size) noexcept nogil:
    """A 32-bit hash of the key bytes, seeded per process against collision floods."""
    cdef uint64_t state = hash_seed ^ (<uint64_t>size * 0x9E3779B97F4A7C15ULL)
    cdef uint64_t word
    while size >= 8:
        memcpy(&word, key, 8)
        state = (state ^ word) * 0x9E3779B97F4A7C15ULL
        state ^= state >> 29
        key += 8
        size -= 8
    if size:
        word = 0
        memcpy(&word, key, size)
        state = (state ^ word) * 0x9E3779B97F4A7C15ULL
    return <uint32_t>mix(state)


# --- Borrowing the bytes of keys and values ---

cdef struct Borrowed:
    const char* data
    Py_ssize_t size
    Py_buffer view
    bint has_view
    PyObject* copy


cdef int borrow(object item, Borrowed* out, str what) except -1:
    """Point ``out`` at the bytes of ``item``: bytes, str (UTF-8) or a buffer.

    A buffer that is not contiguous is copied. Call ``give_back`` after.
    """
    out.has_view = False
    out.copy = NULL
    if PyBytes_Check(item):
        out.data = PyBytes_AS_STRING(item)
        out.size = PyBytes_GET_SIZE(item)
    elif PyUnicode_Check(item):
        out.data = PyUnicode_AsUTF8AndSize(item, &out.size)
    elif PyObject_CheckBuffer(item):
        if PyObject_GetBuffer(item, &out.view, PyBUF_SIMPLE) == 0:
            out.has_view = True
            out.data = <const char*>out.view.buf
            out.size = out.view.len
        else:
            PyErr_Clear()
            view = memoryview(item)
            if view.nbytes > MAX_LENGTH:
                raise ValueError(TOO_LONG % what)
            copy = view.tobytes()
            Py_INCREF(copy)
            out.copy = <PyObject*>copy
            out.data = PyBytes_AS_STRING(copy)
            out.size = PyBytes_GET_SIZE(copy)
    else:
        raise TypeError(_messages.WRONG_TYPE % (what, type(item).__name__))
    return 0


cdef inline void give_back(Borrowed* borrowed) noexcept:
    if borrowed.has_view:
        PyBuffer_Release(&borrowed.view)
        borrowed.has_view = False
    Py_XDECREF(borrowed.copy)
    borrowed.copy = NULL


cdef inline void encode_header(char* out, Py_ssize_t key_size, Py_ssize_t value_size) noexcept nogil:
    store_be32(out, <uint32_t>key_size)
    store_be32(out + 4, <uint32_t>value_size)



# --- The index: one slot per live key ---

cdef packed struct Slot:
    uint64_t offset   # of the record; 0 marks an empty slot (offset 0 is the header)
    uint32_t hash


cdef void touch_pages(void* data, size_t size) noexcept nogil:
    """Write a zero to each page of the zeroed memory ``data``, so that it is mapped writable now.

    A fresh page that is read first is mapped to the system's shared page
    of zeros and copied at its first write; the copy makes every other
    processor running this process (the index rebuild's parsing thread)
    drop its address translations, an interrupt for each page. A table's
    slots are read before they are written.
    """
    cdef volatile char* bytes = <volatile char*>data
    cdef size_t at = 0
    while at < size:
        bytes[at] = 0
        at += PAGE_SIZE


# --- Parsing the log for the index rebuild ---

cdef struct Parsed:
    uint64_t offset
    uint32_t hash
    bint deleted


cdef struct LogParser:
    # Where a parse of the mapped log stands. Parsing reads the mapping
    # and writes here and to its blocks, nothing else: a thread of its
    # own can run it.
    # Positions count from map[0], which is the file's offset base.
    const char* map       # the log from offset base on
    uint64_t base
    uint64_t position     # of the next record, from map[0]
    uint64_t size         # where the log ends, from map[0]
    uint64_t ahead        # the log is prefetched up to here
    bint corrupt          # stopped at a record with impossible lengths (at position):
    int32_t key_size      # its lengths
    int32_t value_size


cdef size_t parse_block(LogParser* parser, Parsed* block) noexcept nogil:
    """Parse up to ``REPLAY_BLOCK`` records into ``block``; return how many.

    Fewer than ``REPLAY_BLOCK`` means the parse is over: ``position`` is
    then the log's size, the start of an incomplete last record, or that
    of a corrupt record (``corrupt`` set). Every length is checked before
    use. The log is a stream, but the processor's own prefetching stops
    at each page, so the next ``REPLAY_PREFETCH`` bytes are requested
    ahead of the parsing.
    """
    cdef const char* data = parser.map
    cdef uint64_t base = parser.base
    cdef uint64_t position = parser.position
    cdef uint64_t size = parser.size
    cdef uint64_t ahead = parser.ahead
    cdef uint64_t record_end
    cdef int32_t key_size, value_size
    cdef size_t parsed = 0
    while parsed < REPLAY_BLOCK and size - position >= LENGTHS_SIZE:
        if ahead < position:
            ahead = position
        while ahead < size and ahead - position < REPLAY_PREFETCH:
            semidbm_prefetch(data + ahead)
            ahead += CACHE_LINE
        key_size = <int32_t>load_be32(data + position)
        value_size = <int32_t>load_be32(data + position + 4)
        if key_size < 0 or value_size < DELETED:
            parser.corrupt = True
            parser.key_size = key_size
            parser.value_size = value_size
            break
        record_end = position + RECORD_OVERHEAD + <uint64_t>key_size
        if value_size != DELETED:
            record_end += <uint64_t>value_size
        if record_end > size:
            break
        block[parsed].offset = base + position
        block[parsed].hash = hash_key(data + position + LENGTHS_SIZE, key_size)
        block[parsed].deleted = value_size == DELETED
        parsed += 1
        position = record_end
    parser.position = position
    parser.ahead = ahead
    return parsed


cdef struct ParseRing:
    # A parsing thread and the index rebuild, sharing blocks of records.
    # The rebuild parses the first blocks itself, until the thread has
    # started (``started``); it then hands its parser over (``parser``,
    # then ``handed_over``). Block n goes in blocks[n % REPLAY_RING], with
    # the parser as it was after it in states[n % REPLAY_RING]. The thread
    # writes a block, then counts it in ``parsed``; the rebuild applies
    # it, then counts it in ``applied``, and the thread may reuse its place.
    LogParser parser
    Parsed blocks[REPLAY_RING * REPLAY_BLOCK]
    size_t sizes[REPLAY_RING]
    LogParser states[REPLAY_RING]
    uint64_t started
    uint64_t handed_over
    uint64_t parsed
    uint64_t applied
    uint64_t stop                   # the rebuild asks the thread to stop
    uint64_t finished               # the thread has stopped and lets go of the ring


cdef ParseRing* start_parsing() noexcept:
    """Start a parsing thread with a new ring; NULL if none can be had."""
    cdef ParseRing* ring = <ParseRing*>malloc(sizeof(ParseRing))
    if ring == NULL:
        return NULL
    ring.started = NOT_STARTED
    ring.handed_over = False
    ring.parsed = 0
    ring.applied = 0
    ring.stop = False
    ring.finished = False
    if PyThread_start_new_thread(parse_in_thread, ring) == PYTHREAD_INVALID_THREAD_ID:
        free(ring)
        return NULL
    return ring


cdef inline void pause_or_yield(int* spins) noexcept nogil:
    """One step of a wait for the other thread: spin a little, then give the processor away."""
    if spins[0] < SPINS:
        spins[0] += 1
        semidbm_pause()
    else:
        semidbm_yield()


cdef void parse_in_thread(void* argument) noexcept nogil:
    """The body of the parsing thread: take over the parser, fill the ring block by block.

    Goes on until the parse is over or the rebuild asks it to ``stop``.
    Once it has set ``finished`` it touches the ring and the log no more.
    If the rebuild was over before the thread started, the thread frees
    the ring instead.
    """
    cdef ParseRing* ring = <ParseRing*>argument
    cdef uint64_t block = 0
    cdef size_t parsed = REPLAY_BLOCK
    cdef int spins = 0
    if semidbm_exchange(&ring.started, STARTED) == ABANDONED:
        free(ring)
        return
    while not semidbm_load_acquire(&ring.handed_over) and not semidbm_load_acquire(&ring.stop):
        pause_or_yield(&spins)
    while parsed == REPLAY_BLOCK and not semidbm_load_acquire(&ring.stop):
        if block - semidbm_load_acquire(&ring.applied) == REPLAY_RING:
            # The ring is full: the rebuild is busy (growing the table, say).
            pause_or_yield(&spins)
            continue
        spins = 0
        parsed = parse_block(&ring.parser, ring.blocks + (block % REPLAY_RING) * REPLAY_BLOCK)
        ring.sizes[block % REPLAY_RING] = parsed
        ring.states[block % REPLAY_RING] = ring.parser
        block += 1
        semidbm_store_release(&ring.parsed, block)
    semidbm_store_release(&ring.finished, True)


cdef bint wait_for_block(ParseRing* ring, uint64_t block) noexcept nogil:
    """Wait until the thread has parsed ``block``; False if that takes ``REPLAY_PATIENCE``.

    A block takes microseconds. Past a short spin the wait yields the
    processor, which the thread may be waiting for: a new thread often
    starts on its parent's processor, until the system moves it to an
    idle one. A wait longer than the patience means that the thread
    has no processor (the machine is busy), and is not waited out.
    """
    cdef int64_t deadline = 0
    cdef int spins = 0
    while semidbm_load_acquire(&ring.parsed) == block:
        if spins < SPINS:
            spins += 1
            semidbm_pause()
        elif deadline == 0:
            deadline = semidbm_clock_ns() + REPLAY_PATIENCE
        elif semidbm_clock_ns() > deadline:
            return False
        else:
            semidbm_yield()
    return True


cdef void stop_parsing(ParseRing* ring) noexcept nogil:
    """End the parsing thread's part: stop it and free the ring, or leave that to it if it has not started."""
    cdef int spins = 0
    if semidbm_exchange(&ring.started, ABANDONED) == NOT_STARTED:
        return
    semidbm_store_release(&ring.stop, True)
    while not semidbm_load_acquire(&ring.finished):
        pause_or_yield(&spins)
    free(ring)


cdef bint several_processors():
    """True if this process may run on more than one processor."""
    try:
        return len(os.sched_getaffinity(0)) > 1
    except AttributeError:  # no sched_getaffinity: not Linux
        return (os.cpu_count() or 1) > 1


# Whether a long log is parsed in a thread of its own during the index rebuild.
cdef bint threaded_replay = several_processors()


cdef class Store:
    """An open data file: the hash index, the append buffer and the mapping.

    Item operations run in C without releasing the GIL, so each is atomic
    for threads sharing the store. The operations that do release it
    (sync, compact, refresh, close) hold ``guard``; while one of them has
    the file or index in flux, ``busy`` is set and item operations wait
    for ``guard``.
    """

    cdef readonly object path
    cdef readonly bint writable
    # The database directory, held open (see _files.Directory).
    cdef object directory
    cdef int fd
    cdef bint verify
    cdef object guard
    cdef bint busy
    # The parent's process id once a fork()ed child has disowned the store.
    cdef pid_t owner
    # The mapping of the data file; bytes below disk_end belong to the log.
    cdef const char* map
    cdef size_t map_size
    cdef uint64_t disk_end
    # Records not yet written to the file, logically at disk_end onwards.
    cdef char* buffer
    cdef Py_ssize_t buffer_used
    cdef Py_ssize_t buffer_size
    # A flush failed: the file may hold a first part of the buffer.
    cdef bint unsettled
    # The hash table.
    cdef Slot* slots
    cdef size_t capacity
    cdef size_t count
    # Bumped whenever keys are added or removed, so iterators notice.
    cdef uint64_t version
    # Assignments appended to the buffer whose index update waits (oldest
    # first, a ring); every operation but an assignment applies them first.
    cdef Slot pending[PENDING_LIMIT]
    cdef size_t pending_first
    cdef size_t pending_count

    def __cinit__(self):
        self.fd = -1
        self.map = NULL
        self.buffer = NULL
        self.slots = NULL

    def __init__(self, directory, writable, buffer_size, verify_checksums, recover, writer_active):
        self.directory = directory
        self.path = directory.data_path
        self.writable = writable
        self.verify = verify_checksums
        self.guard = threading.RLock()
        self.buffer_size = buffer_size
        if writable and buffer_size > 0:
            self.buffer = <char*>malloc(buffer_size)
            if self.buffer == NULL:
                raise MemoryError("cannot allocate a buffer of %d bytes" % buffer_size)
        self.fd = directory.open_data(writable)  # the API layer closes the directory if this raises
        try:
            self.load(buffer_size, recover, writer_active)
        except BaseException:
            self.release()
            raise

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
        free(self.buffer)
        self.buffer = NULL
        self.buffer_used = 0
        self.clear_index()
        directory, self.directory = self.directory, None
        if directory is not None:  # None after a collector's clearing, too
            try:
                directory.close()
            except OSError:
                pass

    cdef void clear_index(self) noexcept:
        free(self.slots)
        self.slots = NULL
        self.capacity = 0
        self.count = 0
        self.pending_count = 0
        self.version += 1

    cdef void unmap(self) noexcept:
        if self.map != NULL:
            semidbm_unmap(self.map, self.map_size)
            self.map = NULL
            self.map_size = 0

    cdef int map_file(self, uint64_t size) except -1:
        """Map the data file's first ``size`` bytes (and room to grow, for a writer)."""
        cdef uint64_t length = size
        cdef const char* mapped
        cdef int error = 0
        if self.writable and SEMIDBM_MAP_BEYOND_EOF:
            length += size if size > MAP_HEADROOM else MAP_HEADROOM
        if length > <uint64_t>(<size_t>-1):
            raise DBMError("%s: a file of %d bytes cannot be mapped here" % (self.path, size))
        mapped = semidbm_map(self.fd, <size_t>length, &error)
        if mapped == NULL:
            self.raise_os_error(error, "cannot map %s" % self.path)
        self.unmap()
        self.map = mapped
        self.map_size = <size_t>length
        return 0

    cdef int load(self, Py_ssize_t buffer_size, bint recover, object writer_active) except -1:
        """Map the file, rebuild the index from its log and settle a torn tail.

        With a writer at work (for a reader, ``writer_active()`` says so;
        it is asked only when the log ends in an incomplete record) that
        record is a write in progress, not a torn tail.
        """
        cdef uint64_t size = os.fstat(self.fd).st_size
        if size < HEADER_SIZE:
            check_header(_files.read_at(self.fd, size, 0), self.path)
        self.map_file(size)
        check_header(PyBytes_FromStringAndSize(self.map, HEADER_SIZE), self.path)
        self.clear_index()
        self.disk_end = size
        self.disk_end = self.replay(self.map, 0, HEADER_SIZE, size)
        if self.disk_end < size and not (writer_active is not None and writer_active()):
            if self.writable:
                self.unmap()  # Windows cannot cut a mapped file
            _files.settle_tail(
                self.fd, self.directory, self.disk_end, size, self.writable, buffer_size, recover, 4
            )
            if self.map == NULL:
                self.map_file(self.disk_end)
        return 0

    cdef uint64_t replay(self, const char* log, uint64_t base, uint64_t position,
                         uint64_t size) except? 0:
        """Apply the log's records from ``position`` to ``size`` to the index.

        ``log`` holds the file from offset ``base`` to ``size``: the
        mapping (``base`` 0), or a copy. Returns where parsing stopped:
        ``size``, or the start of an incomplete last record. Keys are
        compared through ``record``: the mapping or, during a refresh,
        the copy standing in for the buffer.
        Records are parsed in blocks (``parse_block``), then applied
        (``apply_block``). Parsing waits on the log's memory and the
        updates on the table's, about as long each: when this process
        may use another processor, a long log is parsed in a thread of
        its own, blocks ahead of the updates (``apply_parsed``): here
        until it has started, there until the end, or until it falls
        behind. The table ends at the size that adding its keys one by
        one gives (see ``fit``).
        """
        cdef LogParser parser
        cdef Parsed block[REPLAY_BLOCK]
        cdef size_t parsed = REPLAY_BLOCK
        cdef ParseRing* ring = NULL
        cdef bint handed_over = False
        parser.map = log
        parser.base = base
        parser.position = position - base
        parser.size = size - base
        parser.ahead = position - base
        parser.corrupt = False
        if threaded_replay and size - position >= THREADED_REPLAY_MIN:
            ring = start_parsing()
        try:
            while parsed == REPLAY_BLOCK:
                if ring != NULL and not handed_over and semidbm_load_acquire(&ring.started):
                    ring.parser = parser
                    semidbm_store_release(&ring.handed_over, True)
                    handed_over = True
                    parsed = self.apply_parsed(ring, &parser)
                else:
                    parsed = parse_block(&parser, block)
                    self.apply_block(block, parsed, size)
        finally:
            if ring != NULL:
                stop_parsing(ring)
        if parser.corrupt:
            raise DBMLoadError(
                _messages.CORRUPT_RECORD
                % (self.path, base + parser.position, parser.key_size, parser.value_size)
            )
        self.fit()
        return base + parser.position

    cdef size_t apply_parsed(self, ParseRing* ring, LogParser* parser) except? 0:
        """Apply the blocks the parsing thread delivers, and advance ``parser`` past them.

        Returns the size of the last block applied: less than
        ``REPLAY_BLOCK`` if that was the end of the parse. Otherwise the
        thread fell behind and was asked to stop: the caller parses the
        rest, from ``parser``.
        """
        cdef uint64_t block = 0
        cdef size_t parsed = REPLAY_BLOCK
        while parsed == REPLAY_BLOCK:
            if not wait_for_block(ring, block):
                semidbm_store_release(&ring.stop, True)
                break
            parsed = ring.sizes[block % REPLAY_RING]
            self.apply_block(ring.blocks + (block % REPLAY_RING) * REPLAY_BLOCK, parsed,
                             parser.base + parser.size)
            parser[0] = ring.states[block % REPLAY_RING]
            block += 1
            semidbm_store_release(&ring.applied, block)
        return parsed

    cdef int apply_block(self, Parsed* block, size_t parsed, uint64_t size) except -1:
        """Apply ``parsed`` records of the log, in order, to the index.

        The slots of the next ``SLOT_PREFETCH`` records are requested
        ahead, so that a large index costs no wait per record. ``size``
        is where the log being replayed ends: a full table grows at once
        to what the whole log is expected to need (see
        ``projected_capacity``).
        """
        cdef size_t at
        cdef Py_ssize_t slot
        if self.capacity:
            for at in range(parsed if parsed < SLOT_PREFETCH else SLOT_PREFETCH):
                semidbm_prefetch(&self.slots[block[at].hash & (self.capacity - 1)])
        for at in range(parsed):
            if at + SLOT_PREFETCH < parsed and self.capacity:
                semidbm_prefetch(&self.slots[block[at + SLOT_PREFETCH].hash & (self.capacity - 1)])
            slot = self.find_record(block[at].offset, block[at].hash)
            if slot >= 0:
                if block[at].deleted:
                    self.remove(slot)
                else:
                    self.slots[slot].offset = block[at].offset
            elif not block[at].deleted:
                if (self.count + 1) * 4 <= self.capacity * 3:
                    self.place(-1 - slot, block[at].hash, block[at].offset)
                else:
                    self.grow(self.projected_capacity(block[at].offset, size))
                    self.insert(block[at].hash, block[at].offset)
        return 0

    cdef size_t projected_capacity(self, uint64_t done, uint64_t size) noexcept nogil:
        """The capacity to grow to when the rebuild, ``done`` bytes into a log of ``size``, fills the table.

        Doubling at each fill would move every key once more on average.
        Instead, once the rebuild has read ``1 / PROJECTION_SAMPLE`` of
        the log, the keys so far are scaled up by the log's size over
        the bytes read, and the table grows at once to the capacity for
        that many. A log whose later records are smaller than its early
        ones just grows again; one whose later records are larger (or
        that deletes or overwrites keys) may end with a table too large,
        at most ``PROJECTION_SAMPLE`` times what its keys need, which
        ``fit`` then shrinks.
        """
        cdef double expected = self.count + 1
        cdef double projected
        cdef size_t capacity = self.capacity * 2 if self.capacity else MIN_CAPACITY
        if done > HEADER_SIZE and done - HEADER_SIZE >= (size - HEADER_SIZE) / PROJECTION_SAMPLE:
            projected = <double>self.count * <double>(size - HEADER_SIZE) / <double>(done - HEADER_SIZE)
            if projected > expected:
                expected = projected
        while <double>capacity * 3 < expected * 4:
            capacity *= 2
        return capacity

    cdef int fit(self) except -1:
        """Shrink the table to the capacity that adding its keys one at a time gives.

        That is the smallest power of two (at least ``MIN_CAPACITY``) at
        most three quarters full: at most 32 bytes of slots per key. Only
        a rebuild that expected more keys than the log holds (see
        ``projected_capacity``) or a log that deleted many of its keys
        leaves a larger table. Without the memory for the smaller table
        the larger one stays: it works as well.
        """
        cdef size_t capacity = MIN_CAPACITY
        if self.capacity <= MIN_CAPACITY:
            return 0
        while capacity * 3 < self.count * 4:
            capacity *= 2
        if capacity < self.capacity:
            self.resize(capacity)
        return 0

    # --- the hash table ---

    cdef inline const char* record(self, uint64_t offset) noexcept nogil:
        """The bytes of the record at ``offset``: in the mapping or the buffer."""
        if offset >= self.disk_end:
            return self.buffer + (offset - self.disk_end)
        return self.map + offset

    @cython.final
    cdef inline Py_ssize_t find(self, const char* key, Py_ssize_t size, uint32_t hashed) noexcept nogil:
        """The slot holding ``key``; if none, a negative number: -1 - the empty slot that ended the search.

        Where the key is missing, that empty slot is where ``place`` may
        put it, as long as the table has room for one more key. An empty
        table (no slots) gives -1.
        """
        cdef size_t mask, index
        if self.capacity == 0:
            return -1
        mask = self.capacity - 1
        index = hashed & mask
        while self.slots[index].offset != 0:
            if self.slots[index].hash == hashed and self.holds(index, key, size):
                return index
            index = (index + 1) & mask
        return -1 - <Py_ssize_t>index

    @cython.final
    cdef inline Py_ssize_t find_record(self, uint64_t offset, uint32_t hashed) noexcept nogil:
        """``find`` for the key of the log's record at ``offset`` (whose hash is ``hashed``).

        The record is read only where a slot's hash matches: during the
        rebuild it has left the cache, or was parsed by another thread.
        """
        cdef size_t mask, index
        cdef const char* record
        if self.capacity == 0:
            return -1
        mask = self.capacity - 1
        index = hashed & mask
        while self.slots[index].offset != 0:
            if self.slots[index].hash == hashed:
                record = self.record(offset)
                if self.holds(index, record + LENGTHS_SIZE, <int32_t>load_be32(record)):
                    return index
            index = (index + 1) & mask
        return -1 - <Py_ssize_t>index

    cdef inline bint holds(self, size_t index, const char* key, Py_ssize_t size) noexcept nogil:
        """True if the record of slot ``index`` has the key ``key``."""
        cdef const char* found = self.record(self.slots[index].offset)
        return <Py_ssize_t>load_be32(found) == size and memcmp(found + LENGTHS_SIZE, key, size) == 0

    cdef int reserve(self) except -1:
        """Make room for one more key besides the pending ones: grow past three quarters full."""
        if (self.count + self.pending_count + 1) * 4 <= self.capacity * 3:
            return 0
        return self.grow(self.capacity * 2 if self.capacity else MIN_CAPACITY)

    cdef int grow(self, size_t capacity) except -1:
        """Move the keys to a larger table of ``capacity`` slots, a power of two."""
        if not self.resize(capacity):
            raise MemoryError("cannot grow the semidbm index to %d slots" % capacity)
        return 0

    cdef bint resize(self, size_t capacity) noexcept nogil:
        """Move the keys to a new table of ``capacity`` slots (a power of two, room for them all).

        False, and the table left as it was, if the memory cannot be had.
        """
        cdef size_t index, mask, old
        cdef Slot* slots = <Slot*>calloc(capacity, sizeof(Slot))
        if slots == NULL:
            return False
        semidbm_advise_huge(slots, capacity * sizeof(Slot))
        touch_pages(slots, capacity * sizeof(Slot))
        mask = capacity - 1
        for old in range(self.capacity):
            if self.slots[old].offset != 0:
                index = self.slots[old].hash & mask
                while slots[index].offset != 0:
                    index = (index + 1) & mask
                slots[index] = self.slots[old]
        free(self.slots)
        self.slots = slots
        self.capacity = capacity
        self.version += 1
        return True

    cdef int defer(self, uint32_t hashed, uint64_t offset) except -1:
        """Queue the index update for the buffered record at ``offset``; apply the oldest if full.

        The update of a large index costs a cache miss; queued, with its
        slot prefetched, it is applied after the next few assignments,
        when that memory has arrived. The caller has reserved room for
        every queued key, so applying them never grows the table.
        """
        cdef size_t at
        if self.pending_count == PENDING_LIMIT:
            self.apply_oldest()
        semidbm_prefetch(&self.slots[hashed & (self.capacity - 1)])
        at = (self.pending_first + self.pending_count) % PENDING_LIMIT
        self.pending[at].hash = hashed
        self.pending[at].offset = offset
        self.pending_count += 1
        return 0

    cdef int apply_oldest(self) except -1:
        """Apply the oldest pending update: point the key's slot at its record."""
        cdef Slot entry = self.pending[self.pending_first]
        cdef const char* found = self.record(entry.offset)
        cdef Py_ssize_t slot
        self.pending_first = (self.pending_first + 1) % PENDING_LIMIT
        self.pending_count -= 1
        slot = self.find(found + LENGTHS_SIZE, <int32_t>load_be32(found), entry.hash)
        if slot >= 0:
            self.slots[slot].offset = entry.offset
        else:
            self.insert(entry.hash, entry.offset)
        return 0

    cdef int apply_pending(self) except -1:
        """Apply every pending index update, oldest first."""
        while self.pending_count:
            self.apply_oldest()
        return 0

    cdef int insert(self, uint32_t hashed, uint64_t offset) except -1:
        """Add a key known to be absent."""
        cdef size_t mask, index
        self.reserve()
        mask = self.capacity - 1
        index = hashed & mask
        while self.slots[index].offset != 0:
            index = (index + 1) & mask
        self.place(index, hashed, offset)
        return 0

    cdef inline void place(self, size_t index, uint32_t hashed, uint64_t offset) noexcept nogil:
        """Put a key known to be absent into the empty slot ``index``, the end of its probe."""
        self.slots[index].offset = offset
        self.slots[index].hash = hashed
        self.count += 1
        self.version += 1

    cdef void remove(self, Py_ssize_t slot) noexcept nogil:
        """Empty ``slot``, shifting back the entries after it that probed past it."""
        cdef size_t mask = self.capacity - 1
        cdef size_t hole = slot
        cdef size_t index = slot
        cdef size_t home
        while True:
            index = (index + 1) & mask
            if self.slots[index].offset == 0:
                break
            home = self.slots[index].hash & mask
            # Move the entry into the hole unless its home lies after the
            # hole (cyclically) and at or before its own place.
            if (index > hole and (home <= hole or home > index)) or (
                index < hole and (home <= hole and home > index)
            ):
                self.slots[hole] = self.slots[index]
                hole = index
        self.slots[hole].offset = 0
        self.slots[hole].hash = 0
        self.count -= 1
        self.version += 1

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

    cdef int write_out(self, const char* data, Py_ssize_t size) noexcept:
        """Append ``size`` bytes to the file; 0 or the errno of a failed write."""
        cdef Py_ssize_t written
        while size > 0:
            written = semidbm_write(self.fd, data, size if size < WRITE_LIMIT else WRITE_LIMIT)
            if written < 0:
                if errno == EINTR:
                    continue
                return errno
            data += written
            size -= written
        return 0

    cdef int write_failed(self, int number) except -1:
        """A record written straight failed: cut off what of it reached the file and raise.

        That partial record is the last thing in the file, and no reader
        indexes a partial record. If the cut fails too, the store is closed.
        """
        try:
            os.ftruncate(self.fd, self.disk_end)
        except OSError:
            # The file now ends in a partial record: stop here; the next
            # open treats it as a torn tail.
            self.release()
            self.raise_os_error(number, _messages.WRITE_CLOSED % self.path)
        self.raise_os_error(number, _messages.WRITE_FAILED % self.path)

    cdef int grew(self, Py_ssize_t size) except -1:
        """Account for ``size`` bytes written at the end of the log; remap if needed."""
        self.disk_end += size
        if self.disk_end > self.map_size:
            self.map_file(self.disk_end)
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
        cdef Py_ssize_t done = 0
        if self.pending_count:
            self.apply_pending()
        if self.buffer_used:
            if self.unsettled:
                done = _files.written_beyond(self.fd, self.disk_end, self.buffer_used)
            self.unsettled = True
            failure = self.write_out(self.buffer + done, self.buffer_used - done)
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
        cdef char* out
        cdef uint64_t offset
        cdef uint32_t crc
        cdef int failure
        if self.buffer_used + size <= self.buffer_size:
            offset = self.disk_end + self.buffer_used
            out = self.buffer + self.buffer_used
            encode_header(out, key_size, value_size if value != NULL else DELETED)
            memcpy(out + LENGTHS_SIZE, key, key_size)
            if value != NULL:
                memcpy(out + LENGTHS_SIZE + key_size, value, value_size)
            # The CRC covers the key and value, side by side in the buffer.
            store_be32(out + size - CHECKSUM_SIZE,
                       crc32(0, out + LENGTHS_SIZE, size - RECORD_OVERHEAD))
            self.buffer_used += size
            return offset
        self.flush()
        if size <= self.buffer_size:
            return self.append(key, key_size, value, value_size)
        crc = crc32(0, key, key_size)
        if value != NULL:
            crc = crc32(crc, value, value_size)
        encode_header(head, key_size, value_size if value != NULL else DELETED)
        store_be32(tail, crc)
        offset = self.disk_end
        failure = self.write_out(head, LENGTHS_SIZE)
        if not failure:
            failure = self.write_out(key, key_size)
        if not failure and value != NULL:
            failure = self.write_out(value, value_size)
        if not failure:
            failure = self.write_out(tail, CHECKSUM_SIZE)
        if failure:
            self.write_failed(failure)
        self.grew(size)
        return offset

    # --- the mapping interface ---

    def __len__(self):
        self.check_open()
        if self.pending_count:
            self.apply_pending()
        return self.count

    def __contains__(self, key):
        cdef Borrowed borrowed
        cdef Py_ssize_t found
        self.check_open()
        if self.pending_count:
            self.apply_pending()
        borrow(key, &borrowed, "keys")
        found = self.find(borrowed.data, borrowed.size, hash_key(borrowed.data, borrowed.size))
        give_back(&borrowed)
        return found >= 0

    def __getitem__(self, key):
        cdef Borrowed borrowed
        if self.fd < 0 or self.busy:
            self.check_open()
        if self.pending_count:
            self.apply_pending()
        if PyBytes_Check(key):
            return self.get(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), key)
        borrow(key, &borrowed, "keys")
        try:
            return self.get(borrowed.data, borrowed.size, key)
        finally:
            give_back(&borrowed)

    cdef object get(self, const char* key, Py_ssize_t key_size, object original):
        cdef Py_ssize_t slot = self.find(key, key_size, hash_key(key, key_size))
        cdef uint64_t offset
        cdef const char* found
        cdef const char* value
        cdef Py_ssize_t value_size
        cdef uint32_t expected
        if slot < 0:
            raise KeyError(original)
        offset = self.slots[slot].offset
        found = self.record(offset)
        value_size = <int32_t>load_be32(found + 4)
        if offset < self.disk_end and (
            value_size < 0 or offset + RECORD_OVERHEAD + key_size + value_size > self.disk_end
        ):
            raise DBMError(CHANGED_UNDER % (self.path, offset))
        value = found + LENGTHS_SIZE + key_size
        if self.verify:
            expected = load_be32(value + value_size)
            if crc32(0, found + LENGTHS_SIZE, key_size + value_size) != expected:
                raise DBMChecksumError(_messages.CHECKSUM_MISMATCH % (
                    self.path, PyBytes_FromStringAndSize(key, key_size),
                    offset + LENGTHS_SIZE + key_size))
        return PyBytes_FromStringAndSize(value, value_size)

    def __setitem__(self, key, value):
        cdef Borrowed borrowed_key, borrowed_value
        cdef uint32_t hashed
        cdef Py_ssize_t slot
        cdef uint64_t offset
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
                hashed = hash_key(borrowed_key.data, borrowed_key.size)
                self.reserve()
                offset = self.append(borrowed_key.data, borrowed_key.size,
                                     borrowed_value.data, borrowed_value.size)
                if offset >= self.disk_end:
                    self.defer(hashed, offset)
                else:
                    slot = self.find(borrowed_key.data, borrowed_key.size, hashed)
                    if slot >= 0:
                        self.slots[slot].offset = offset
                    else:
                        self.insert(hashed, offset)
            finally:
                give_back(&borrowed_value)
        finally:
            give_back(&borrowed_key)

    def __delitem__(self, key):
        cdef Borrowed borrowed
        cdef Py_ssize_t slot
        self.check_writable("delete")
        if self.pending_count:
            self.apply_pending()
        borrow(key, &borrowed, "keys")
        try:
            slot = self.find(borrowed.data, borrowed.size, hash_key(borrowed.data, borrowed.size))
            if slot < 0:
                raise KeyError(key)
            self.append(borrowed.data, borrowed.size, NULL, 0)
            self.remove(slot)
        finally:
            give_back(&borrowed)

    def __iter__(self):
        self.check_open()
        if self.pending_count:
            self.apply_pending()
        return KeyIterator(self)

    def keys(self):
        """Return a list of all keys, taken atomically."""
        return self.snapshot(True, False)

    def values(self):
        """Return a list of all values, in the order of ``keys()``, taken atomically."""
        return self.snapshot(False, True)

    def items(self):
        """Return a list of all ``(key, value)`` pairs, taken atomically."""
        return self.snapshot(True, True)

    cdef list snapshot(self, bint keys, bint values):
        """The keys, the values or ``(key, value)`` pairs, in table order.

        Runs in C without releasing the GIL: no other thread changes the
        table meanwhile.
        """
        cdef list result = []
        cdef size_t index
        cdef uint64_t offset
        cdef Py_ssize_t key_size
        cdef const char* record
        self.check_open()
        if self.pending_count:
            self.apply_pending()
        for index in range(self.capacity):
            offset = self.slots[index].offset
            if offset == 0:
                continue
            record = self.record(offset)
            key_size = <int32_t>load_be32(record)
            # The value through get, as a read has it (get's code stays inlined there).
            if not values:
                result.append(PyBytes_FromStringAndSize(record + LENGTHS_SIZE, key_size))
            elif not keys:
                result.append(self.get(record + LENGTHS_SIZE, key_size, None))
            else:
                result.append((PyBytes_FromStringAndSize(record + LENGTHS_SIZE, key_size),
                               self.get(record + LENGTHS_SIZE, key_size, None)))
        return result

    @property
    def closed(self):
        """True once the store has been closed."""
        return self.fd < 0

    def sync(self):
        """Write buffered records to the file and flush it to disk (fsync).

        A reader has nothing to write: for it this does nothing, as for
        the stdlib dbm modules' readers (``shelve`` syncs on close).
        """
        with self.guard:
            if not self.writable and not self.owner:
                self.check_open()
                return
            self.check_writable("sync")
            self.flush()
            try:
                os.fsync(self.fd)
            except OSError as exc:
                raise _files.os_error(exc, "cannot sync %s" % self.path) from None

    def compact(self, progress=None):
        """Rewrite the live records, oldest first, to a new data file and swap it in.

        The new file is flushed to disk before it is renamed over ``data``,
        and the directory after, so a crash leaves either the old file or
        the new one, whole. The log is read in order and each record kept
        if the index points at it; memory use is one chunk. The index is
        then rebuilt from the new file. ``progress``, if given, is called
        as ``progress(done, total)`` (bytes of the old log, see
        ``_settings.PROGRESS_STEP``); an exception from it abandons the
        compaction and leaves the database as it was.
        """
        with self.guard:
            self.check_writable("compact")
            self.flush()
            self.busy = True
            try:
                _files.write_compacted(
                    self.directory, self.fd, lambda out: self.write_live(out, progress)
                )
                self.unmap()
                semidbm_close(self.fd)
                self.fd = -1
                replaced, failure = _files.install_compacted(self.directory)
                self.clear_index()
                try:
                    self.fd = self.directory.open_data(True)
                    self.load(self.buffer_size, False, None)
                except BaseException:
                    self.release()
                    raise
            finally:
                self.busy = False
            if failure is not None:
                raise failure

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
            elif size < self.disk_end:
                self.release()  # what it indexed is gone
                raise DBMError(SHRANK % (self.path, size, self.disk_end))
            elif size > self.disk_end:
                try:
                    _files.catch_up(self.fd, self.disk_end, size,
                                    lambda data, base: self.replay_copy(data, base))
                except BaseException:
                    self.release()  # a corrupt log: nothing after it can be trusted
                    raise

    cdef uint64_t replay_copy(self, bytes data, uint64_t base) except? 0:
        """A reader's refresh: replay ``data``, a copy of the log from ``disk_end`` (``base``) on.

        Called by ``_files.catch_up`` a chunk at a time: the new log is
        read into a copy, not through the mapping, since a write failing
        at this moment may cut a partial last record, where the mapping
        would read zeros or fault (docs/FORMAT.md, "Readers"). During the
        replay the copy stands in for the (reader's empty) buffer, so
        that ``record`` finds the new keys; complete records are never
        cut, so the mapping serves them afterwards. Returns the new
        ``disk_end``.
        """
        cdef uint64_t size = base + len(data)
        if not data:
            return base
        self.map_file(size)
        self.buffer = <char*>PyBytes_AS_STRING(data)
        try:
            self.disk_end = self.replay(self.buffer, base, base, size)
        finally:
            self.buffer = NULL
        return self.disk_end

    def _disown(self):
        """Become read-only without ever writing (in a child made by ``fork()``).

        Buffered records stay readable; nothing is flushed, synced or cut.
        """
        self.guard = threading.RLock()
        self.busy = False
        self.owner = os.getppid()
        self.writable = False

    cdef int write_live(self, int out, object progress) except -1:
        """Copy the records the index points at to the file ``out``, in log order.

        Calls ``progress(done, total)`` as described in ``_settings.PROGRESS_STEP``.
        """
        cdef char* chunk = <char*>malloc(COMPACT_CHUNK)
        cdef uint64_t position = HEADER_SIZE
        cdef uint64_t next_report = PROGRESS_STEP
        cdef Py_ssize_t used = 0
        cdef Py_ssize_t size, slot
        cdef int32_t key_size, value_size
        cdef const char* record
        if chunk == NULL:
            raise MemoryError("cannot allocate the compaction buffer")
        try:
            while position < self.disk_end:
                record = self.map + position
                key_size = <int32_t>load_be32(record)
                value_size = <int32_t>load_be32(record + 4)
                if key_size < 0 or value_size < DELETED or self.disk_end - position < RECORD_OVERHEAD:
                    raise DBMError(CHANGED_UNDER % (self.path, position))
                size = RECORD_OVERHEAD + key_size + (value_size if value_size > 0 else 0)
                if <uint64_t>size > self.disk_end - position:
                    raise DBMError(CHANGED_UNDER % (self.path, position))
                if value_size != DELETED:
                    slot = self.find(record + LENGTHS_SIZE, key_size,
                                     hash_key(record + LENGTHS_SIZE, key_size))
                    if slot >= 0 and self.slots[slot].offset == position:
                        if used + size > COMPACT_CHUNK:
                            self.write_to(out, chunk, used)
                            used = 0
                        if size > COMPACT_CHUNK:
                            self.write_to(out, record, size)
                        else:
                            memcpy(chunk + used, record, size)
                            used += size
                        if progress is not None and position + size >= next_report:
                            progress(position + size, self.disk_end)
                            next_report = position + size + PROGRESS_STEP
                position += size
            self.write_to(out, chunk, used)
        finally:
            free(chunk)
        if progress is not None:
            progress(self.disk_end, self.disk_end)
        return 0

    cdef int write_to(self, int out, const char* data, Py_ssize_t size) except -1:
        cdef Py_ssize_t written
        while size > 0:
            written = semidbm_write(out, data, size if size < WRITE_LIMIT else WRITE_LIMIT)
            if written < 0:
                if errno == EINTR:
                    continue
                raise OSError(errno, os.strerror(errno))
            data += written
            size -= written
        return 0

    def close(self):
        """Flush and fsync buffered records (if writable) and release the file.

        Closing a closed store does nothing.
        """
        with self.guard:
            if self.busy:
                raise DBMError(COMPACTING % self.path)
            if self.fd < 0:
                return
            try:
                if self.writable:
                    self.sync()
            finally:
                self.release()


cdef class KeyIterator:
    """Iterates over a Store's keys (as bytes), in table order."""

    cdef Store store
    cdef size_t position
    cdef uint64_t version

    def __cinit__(self, Store store):
        self.store = store
        self.position = 0
        self.version = store.version

    def __iter__(self):
        return self

    def __next__(self):
        cdef Store store = self.store
        cdef const char* record
        if store.busy:
            store.check_open()
        if store.fd < 0:
            raise DBMError(_messages.CLOSED_DURING_ITERATION % store.path)
        if store.pending_count:
            store.apply_pending()
        if store.version != self.version:
            raise RuntimeError(CHANGED_DURING_ITERATION % store.path)
        while self.position < store.capacity:
            self.position += 1
            if store.slots[self.position - 1].offset != 0:
                record = store.record(store.slots[self.position - 1].offset)
                return PyBytes_FromStringAndSize(record + LENGTHS_SIZE, <int32_t>load_be32(record))
        raise StopIteration
