# What the compiled kernel calls in C (included by _core.pyx): the system
# and the processor through platform.h, CRC-32 through crc32.h, the few
# functions of Python's C API that Cython does not declare, and write_all,
# the one loop that writes bytes to a file.

cdef extern from "_core_pieces/crc32.h":
    void semidbm_crc32_init()
    uint32_t crc32 "semidbm_crc32" (uint32_t crc, const char* data, size_t size) noexcept nogil
    uint32_t semidbm_crc32_way(int way, uint32_t crc, const char* data, size_t size, int* found)
    const char* semidbm_crc_hardware

cdef extern from "_core_pieces/platform.h":
    const char* semidbm_map(int fd, size_t length, int* error)
    void semidbm_unmap(const char* data, size_t length)
    ptrdiff_t semidbm_write(int fd, const char* data, size_t size)
    int semidbm_close(int fd)
    int64_t semidbm_file_size(int fd)
    int semidbm_truncate(int fd, int64_t size)
    void semidbm_advise_huge(void* data, size_t size) noexcept nogil
    void semidbm_release(const char* data, size_t size) noexcept nogil
    void semidbm_prefetch(const void* address) noexcept nogil
    uint64_t semidbm_load_acquire(volatile uint64_t* counter) noexcept nogil
    void semidbm_store_release(volatile uint64_t* counter, uint64_t value) noexcept nogil
    uint64_t semidbm_exchange(volatile uint64_t* counter, uint64_t value) noexcept nogil
    uint64_t semidbm_fetch_add(volatile uint64_t* counter, uint64_t value) noexcept nogil
    void semidbm_pause() noexcept nogil
    void semidbm_yield() noexcept nogil
    int64_t semidbm_clock_ns() noexcept nogil
    int semidbm_try_turn(int fd)
    int semidbm_end_turn(int fd)
    int semidbm_file_at(int directory, const char* name, uint64_t* device, uint64_t* inode,
                        uint64_t* size)
    ctypedef struct semidbm_turns:
        uint64_t replacements
        uint32_t kind
        uint32_t holder
        uint64_t end
        uint64_t end_replacements
        uint32_t end_known
    volatile semidbm_turns* semidbm_map_turns(int fd)
    void semidbm_unmap_turns(volatile semidbm_turns* turns)
    int semidbm_take_mutex(volatile semidbm_turns* turns) noexcept nogil
    int semidbm_give_mutex(volatile semidbm_turns* turns)
    uint32_t semidbm_process_id()
    enum: SEMIDBM_HOLDER_DIED
    int semidbm_file_end(int fd, uint64_t* size)
    bint semidbm_name_missing(int directory, const char* name)
    ctypedef struct semidbm_info:
        uint64_t device
        uint64_t inode
        uint64_t size
        int64_t mtime_seconds
        int64_t mtime_nanoseconds
        int regular
        int device_signed
    int semidbm_open_index(int directory, const char* name)
    int semidbm_file_info(int fd, semidbm_info* info)
    ptrdiff_t semidbm_read_at(int fd, char* data, size_t size, uint64_t offset)
    enum: SEMIDBM_MAP_BEYOND_EOF

semidbm_crc32_init()


def _crc32(bytes data not None, uint32_t crc=0, way="chosen"):
    """``zlib.crc32(data, crc)`` as crc32.h computes it: the way the kernel chooses
    ("chosen"), the tables ("tables"), or the processor's own ("hardware": ValueError
    where there is none, or for fewer bytes than it takes). For the tests, which hold
    every way to zlib's answer, and the benchmark of the ways (benchmarks/crc32.py)."""
    cdef int found = 1
    cdef uint32_t value
    if way == "chosen":
        return crc32(crc, data, len(data))
    if way not in ("tables", "hardware"):
        raise ValueError("way must be 'chosen', 'tables' or 'hardware', not %r" % (way,))
    value = semidbm_crc32_way(way == "hardware", crc, data, len(data), &found)
    if not found:
        raise ValueError("this processor has no way of its own for %d bytes" % len(data))
    return value


def _crc32_hardware():
    """The processor's own way of computing CRC-32 that crc32.h takes ("clmul", "armv8"),
    or None (the tables only)."""
    return None if semidbm_crc_hardware == NULL else semidbm_crc_hardware.decode()


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    unsigned long PyThread_start_new_thread(void (*function)(void*) noexcept nogil, void* argument)
    enum: PYTHREAD_INVALID_THREAD_ID
    int PyObject_GetBuffer(object obj, Py_buffer* view, int flags)
    void PyErr_Clear()


cdef enum:
    # Largest single write() (some systems refuse more than 2 GiB at once).
    WRITE_LIMIT = 1 << 30


cdef int write_all(int fd, const char* data, Py_ssize_t size) noexcept:
    """Write ``size`` bytes to the file ``fd``; 0, or the errno of a failed write."""
    cdef Py_ssize_t written
    while size > 0:
        written = semidbm_write(fd, data, size if size < WRITE_LIMIT else WRITE_LIMIT)
        if written < 0:
            if errno == EINTR:
                continue
            return errno
        data += written
        size -= written
    return 0


cdef int write_or_raise(int fd, const char* data, Py_ssize_t size) except -1:
    """``write_all``, raising OSError if the write fails."""
    cdef int failure = write_all(fd, data, size)
    if failure:
        raise OSError(failure, os.strerror(failure))
    return 0
