# The bytes of records, for the compiled kernel (included by _core.pyx):
# the format's sizes, big-endian fields, borrowing the bytes of keys and
# values, and where the bytes of a record are (Log). The table, the index
# rebuild and the Store all read records through these.

cdef enum:
    # The format's sizes, as ``format`` has them: C needs them when it is
    # compiled. tests/test_core_constants.py checks them against ``format``
    # through _format_constants.
    HEADER_SIZE = 8
    LENGTHS_SIZE = 8
    CHECKSUM_SIZE = 4
    RECORD_OVERHEAD = LENGTHS_SIZE + CHECKSUM_SIZE
    DELETED = -1
    BATCH = -2
    EXPIRES = -3
    EXPIRY_TIME_SIZE = 8
    # An expiry record's bytes beside its key (docs/FORMAT.md, "Expiry").
    EXPIRY_OVERHEAD = RECORD_OVERHEAD + EXPIRY_TIME_SIZE
    # The unit in which a disk loses file data (docs/FORMAT.md, "Lost pages"),
    # and the smallest it writes whole (a seal stays within it: "Zero runs").
    DISK_PAGE = 4096
    DISK_SECTOR = 512
    # The index file's, as ``_index_file`` has them. MIN_CAPACITY is also
    # where a private table starts (table.pxi, ``table_grow``).
    INDEX_HEADER_SIZE = 4096
    BLOCK_SLOTS = 1024
    MIN_CAPACITY = 16


def _format_constants():
    """The format's sizes this module was compiled with, named as ``format`` and
    ``_index_file`` do."""
    return {
        "HEADER_SIZE": HEADER_SIZE,
        "LENGTHS_SIZE": LENGTHS_SIZE,
        "CHECKSUM_SIZE": CHECKSUM_SIZE,
        "RECORD_OVERHEAD": RECORD_OVERHEAD,
        "DELETED": DELETED,
        "BATCH": BATCH,
        "EXPIRES": EXPIRES,
        "EXPIRY_TIME_SIZE": EXPIRY_TIME_SIZE,
        "DISK_PAGE": DISK_PAGE,
        "DISK_SECTOR": DISK_SECTOR,
        "INDEX_HEADER_SIZE": INDEX_HEADER_SIZE,
        "BLOCK_SLOTS": BLOCK_SLOTS,
        "MIN_CAPACITY": MIN_CAPACITY,
        "SLOT_SIZE": sizeof(Slot),
    }


# --- Big-endian fields ---

cdef inline uint32_t load_be32(const char* data) noexcept nogil:
    cdef const uint8_t* p = <const uint8_t*>data
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
            | (<uint32_t>p[2] << 8) | (<uint32_t>p[3]))


cdef inline uint64_t load_be64(const char* data) noexcept nogil:
    return (<uint64_t>load_be32(data) << 32) | load_be32(data + 4)


cdef inline void store_be32(char* data, uint32_t value) noexcept nogil:
    cdef uint8_t* p = <uint8_t*>data
    p[0] = <uint8_t>(value >> 24)
    p[1] = <uint8_t>(value >> 16)
    p[2] = <uint8_t>(value >> 8)
    p[3] = <uint8_t>value


cdef inline void encode_lengths(char* out, Py_ssize_t key_size,
                                Py_ssize_t value_size) noexcept nogil:
    """Write a record's two lengths (``DELETED`` as the value's for a delete)."""
    store_be32(out, <uint32_t>key_size)
    store_be32(out + 4, <uint32_t>value_size)


cdef inline Py_ssize_t encode_record(char* out, const char* key, Py_ssize_t key_size,
                                     const char* value, Py_ssize_t value_size) noexcept nogil:
    """Write the record of ``key`` and ``value`` (NULL: a delete) at ``out``; return its size."""
    cdef Py_ssize_t stored = value_size if value != NULL else 0
    encode_lengths(out, key_size, value_size if value != NULL else DELETED)
    memcpy(out + LENGTHS_SIZE, key, key_size)
    if value != NULL:
        memcpy(out + LENGTHS_SIZE + key_size, value, value_size)
    # The CRC covers the key and value, side by side in the record.
    store_be32(out + LENGTHS_SIZE + key_size + stored,
               crc32(0, out + LENGTHS_SIZE, key_size + stored))
    return RECORD_OVERHEAD + key_size + stored


cdef inline Py_ssize_t encode_expiry_record(char* out, const char* key, Py_ssize_t key_size,
                                            uint64_t expires_at) noexcept nogil:
    """Write the expiry record of the put of ``key`` before it, which expires at ``expires_at``
    (milliseconds since the Unix epoch), at ``out``; return its size (docs/FORMAT.md, "Expiry")."""
    cdef char* time = out + LENGTHS_SIZE + key_size
    encode_lengths(out, key_size, EXPIRES)
    memcpy(out + LENGTHS_SIZE, key, key_size)
    store_be32(time, <uint32_t>(expires_at >> 32))
    store_be32(time + 4, <uint32_t>expires_at)
    # The CRC covers the key and the time, side by side in the record.
    store_be32(time + EXPIRY_TIME_SIZE, crc32(0, out + LENGTHS_SIZE, key_size + EXPIRY_TIME_SIZE))
    return EXPIRY_OVERHEAD + key_size


# --- Borrowing the bytes of keys and values ---

cdef struct Borrowed:
    const char* data
    Py_ssize_t size
    Py_buffer view
    bint has_view
    PyObject* copy


cdef inline int borrow(object item, Borrowed* out, str what) except -1:
    """Point ``out`` at the bytes of ``item``: bytes, str (UTF-8) or a buffer.

    A buffer that is not contiguous is copied. Call ``give_back`` after.
    Bytes, the common case, inline; the others in ``borrow_other``.
    """
    out.has_view = False
    out.copy = NULL
    if PyBytes_Check(item):
        out.data = PyBytes_AS_STRING(item)
        out.size = PyBytes_GET_SIZE(item)
        return 0
    return borrow_other(item, out, what)


cdef int borrow_other(object item, Borrowed* out, str what) except -1:
    """``borrow`` of anything but bytes: str (UTF-8), a buffer, or TypeError."""
    if PyUnicode_Check(item):
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


# --- Where a record's bytes are ---

cdef struct Log:
    # The log as the Store and its table read it: the mapping below disk_end,
    # the records not yet written to the file from disk_end on (the
    # append buffer; during a reader's refresh, a copy of the new log).
    const char* map
    uint64_t disk_end
    char* buffer
    # The file is of format 2: it may hold batch records (docs/FORMAT.md, "Batches").
    bint batches
    # The file is of format 2.1: its batches may hold expiry records ("Expiry").
    bint expirable
    # An expiry record is in the log: reads look for one after the put they read.
    bint expiring


cdef inline const char* log_record(const Log* log, uint64_t offset) noexcept nogil:
    """The bytes of the record at ``offset``: in the mapping or the buffer."""
    if offset >= log.disk_end:
        return log.buffer + (offset - log.disk_end)
    return log.map + offset


cdef uint64_t clock_now() except? 0:
    """The wall clock for expiry checks (``_expiry.now``), in milliseconds; 0 before 1970."""
    cdef int64_t now = _expiry.now()
    return <uint64_t>now if now > 0 else 0


cdef inline uint64_t log_now(const Log* log) except? 0:
    """The wall clock for a read's expiry checks (``clock_now``), or 0 if ``log`` holds no
    expiry record (then nothing is asked).

    It runs Python code, where another thread may write, remap or close
    the store: a read asks it first (``Store.check_reads``), before it
    checks the store and looks the key up, and runs none after.
    """
    if not log.expiring:
        return 0
    return clock_now()


cdef bint log_expiry(const Log* log, uint64_t end, uint64_t put_end, const char* key,
                     int32_t key_size, uint64_t* expires_at) noexcept nogil:
    """Whether an expiry record follows the put of ``key`` that ends at ``put_end``; the time
    it holds, when the put expires, in ``expires_at`` (docs/FORMAT.md, "Expiry").

    ``end`` is where the log ends (the buffer's end, for a writer). An
    expiry record lies only right after its put, in one batch, so it is
    where the put is: wholly in the mapping (below ``disk_end``) or in
    the buffer; its lengths and key tell it (the batch's checksum vouched
    for them), and nothing is read past that region's end.
    """
    cdef uint64_t limit = log.disk_end if put_end < log.disk_end else end
    cdef const char* found
    if put_end > limit or limit - put_end < EXPIRY_OVERHEAD + <uint64_t>key_size:
        return False
    found = log_record(log, put_end)
    if (<int32_t>load_be32(found) != key_size or <int32_t>load_be32(found + 4) != EXPIRES
            or memcmp(found + LENGTHS_SIZE, key, <size_t>key_size) != 0):
        return False
    expires_at[0] = load_be64(found + LENGTHS_SIZE + key_size)
    return True


cdef inline void log_prefetch(const Log* log, uint64_t offset) noexcept nogil:
    """Ask the processor for the record at ``offset``: the lines of its first 128 bytes (the
    lengths, the key, a small value). A hint: the caller keeps ``offset`` within the log."""
    cdef const char* record = log_record(log, offset)
    semidbm_prefetch(record)
    semidbm_prefetch(record + 64)
    semidbm_prefetch(record + 127)
