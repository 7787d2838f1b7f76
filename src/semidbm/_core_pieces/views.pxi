# Zero-copy reads (included by _core.pyx): the data file's memory map as
# an object that views of values keep alive, and the read-only buffer a
# view of one value exports.
#
# The Store holds its current map (DataMap); log.map points into it, so
# the reads in C do not change. Letting go of a map (a remap as the
# file grows, a compaction, a reader's refresh, close) drops the
# Store's reference: the map is unmapped once no view of a value in it
# is left. A view never sees other bytes than the value it was made
# for: the log below disk_end is never written again, and a map always
# shows the file (the inode) it was made from, renamed away or not.

cimport cython
from cpython.buffer cimport PyBuffer_FillInfo


@cython.internal
@cython.final
@cython.auto_pickle(False)
cdef class DataMap:
    """One memory map of the data file: unmapped when the last reference to it goes."""

    cdef const char* data
    cdef size_t size

    def __dealloc__(self):
        if self.data != NULL:
            semidbm_unmap(self.data, self.size)


@cython.internal
@cython.final
@cython.auto_pickle(False)
cdef class ViewCount:
    """How many views of a Store's values in its maps are alive (a Windows compaction asks)."""

    cdef Py_ssize_t alive


@cython.internal
@cython.final
@cython.auto_pickle(False)
@cython.no_gc
cdef class MappedValue:
    """One value in a map, exported read-only through the buffer protocol.

    ``Store.view`` returns a memoryview of one. It holds the map the
    value is in, so the bytes stay mapped while any view of them lives,
    and counts itself in its store's ``ViewCount`` meanwhile. It holds
    nothing that could refer back to it, so it is not tracked by the
    garbage collector (nor cleared by it before its count is taken back).
    """

    cdef DataMap map
    cdef ViewCount count
    cdef const char* data
    cdef Py_ssize_t size

    def __getbuffer__(self, Py_buffer* buffer, int flags):
        # Raises BufferError for a writable buffer: the map is read-only.
        PyBuffer_FillInfo(buffer, self, <void*>self.data, self.size, 1, flags)

    def __dealloc__(self):
        if self.count is not None:
            self.count.alive -= 1


cdef object view_of_mapped(DataMap mapped, ViewCount count, const char* data, Py_ssize_t size):
    """A read-only memoryview of the ``size`` bytes at ``data``, inside ``mapped``."""
    cdef MappedValue value = MappedValue.__new__(MappedValue)
    value.map = mapped
    value.data = data
    value.size = size
    value.count = count
    count.alive += 1
    return memoryview(value)
