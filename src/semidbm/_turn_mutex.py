"""The shared writers' turns as a mutex in ``lock.write``, for the turns taken in Python.

Where the C library is glibc, a shared writer's turn is a process-shared,
robust pthread mutex at ``MUTEX_OFFSET`` in ``lock.write``, which every
shared writer maps: taking and giving it back costs no system call while
nobody waits, where an ``flock`` costs two. Robust: if its holder dies,
the next taker is told so, and takes it (docs/FORMAT.md, "Shared
writers"). The compiled kernel takes it in C for a single operation or
a bulk call (``_core_pieces/turns.pxi``); here ``ctypes`` takes it, for
every other turn, of either kernel. Both read and write the same bytes.
"""

import errno
import mmap
import os
import struct
import sys

from .format import WRITE_LOCK_SIZE

#: The layout of ``lock.write`` (``semidbm_turns`` in ``_core_pieces/platform.h``), in the
#: machine's byte order: the count of replaced data files, the kind of turns, the holder's
#: process id, the data file's end that the last turn in C published, the count at which it
#: did, and whether that end holds; then, at ``MUTEX_OFFSET``, the mutex.
LAYOUT = struct.Struct("=QIIQQI")
KIND_AT, HOLDER_AT, END_KNOWN_AT = 8, 12, 32
MUTEX_OFFSET = 64
SIZE = WRITE_LOCK_SIZE

#: The kind of turns that this mutex is: "MTX" and the size of a pointer, so that only
#: processes that lay the mutex out alike share it. 0 is turns that are an ``flock``.
KIND = 0x4D545800 | struct.calcsize("P")

#: The kernel's word in a glibc robust mutex (its first 32 bits): the holder thread's id, and
#: the bit that says the holder died.
_TID_MASK = 0x3FFFFFFF
_HOLDER_DIED = 0x40000000

#: glibc's type of a mutex that refuses a second lock by its holder (``PTHREAD_MUTEX_ERRORCHECK``),
#: and the values that make one robust and shared between processes.
_ERRORCHECK, _ROBUST, _PROCESS_SHARED = 2, 1, 1

#: ``ctypes`` and the pthread functions, once looked for (None before; False where they cannot be
#: had: no mutex turns in this process).
_functions = None


def _load():
    """glibc's pthread functions through ``ctypes``, or None where they cannot be had."""
    if sys.platform == "win32" or not hasattr(os, "confstr"):
        return None
    try:
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return None
        import ctypes
    except (ImportError, OSError, ValueError):
        return None
    library = ctypes.CDLL(None)
    names = (
        "pthread_mutexattr_init", "pthread_mutexattr_settype", "pthread_mutexattr_setpshared",
        "pthread_mutexattr_setrobust", "pthread_mutexattr_destroy", "pthread_mutex_init",
        "pthread_mutex_trylock", "pthread_mutex_unlock", "pthread_mutex_consistent",
    )
    try:
        found = {name: getattr(library, name) for name in names}
    except AttributeError:
        return None
    for function in found.values():
        function.restype = ctypes.c_int
    return ctypes, found


def holding_thread(raw):
    """The native id of the thread that holds the mutex in ``raw`` (``lock.write``'s bytes, or its
    map), or 0: free, or its holder died."""
    word = struct.unpack_from("=I", raw, MUTEX_OFFSET)[0]
    return 0 if word & _HOLDER_DIED else word & _TID_MASK


def available():
    """True if this process can take mutex turns (glibc, with ``ctypes``)."""
    global _functions
    if _functions is None:
        _functions = _load() or False
    return bool(_functions)


class TurnMutex:
    """``lock.write`` mapped (``fd``, at least ``SIZE`` bytes long), and its mutex.

    Only :meth:`available` processes make one. The mutex belongs to the
    thread that takes it: only that thread may give it back.
    """

    def __init__(self, fd):
        ctypes, self._calls = _functions
        self._map = mmap.mmap(fd, SIZE)
        self._cell = ctypes.c_char.from_buffer(self._map, MUTEX_OFFSET)
        self._address = ctypes.c_void_p(ctypes.addressof(self._cell))

    def initialize(self):
        """Make the mutex anew, free; only while no other process can use it."""
        ctypes = _functions[0]
        attributes = ctypes.create_string_buffer(64)  # pthread_mutexattr_t: 4 bytes in glibc
        calls = self._calls
        failure = calls["pthread_mutexattr_init"](attributes)
        if not failure:
            try:
                failure = (
                    calls["pthread_mutexattr_settype"](attributes, _ERRORCHECK)
                    or calls["pthread_mutexattr_setpshared"](attributes, _PROCESS_SHARED)
                    or calls["pthread_mutexattr_setrobust"](attributes, _ROBUST)
                    or calls["pthread_mutex_init"](self._address, attributes)
                )
            finally:
                calls["pthread_mutexattr_destroy"](attributes)
        if failure:
            raise OSError(failure, os.strerror(failure))

    def take(self):
        """Take the mutex without waiting: True if taken (also from a holder that died), False
        if another thread holds it, or this one (EDEADLK); OSError otherwise.

        Taken from a dead holder, it is made consistent again (the caller
        then unpublishes the data file's end: the dead may have written
        past it).
        """
        calls = self._calls
        failure = calls["pthread_mutex_trylock"](self._address)
        if failure == errno.EOWNERDEAD:
            failure = calls["pthread_mutex_consistent"](self._address)
            if failure:
                calls["pthread_mutex_unlock"](self._address)
        if failure in (errno.EBUSY, errno.EDEADLK):
            return False
        if failure:
            raise OSError(failure, os.strerror(failure))
        return True

    def began(self):
        """Note, in a turn just taken, its holder, and that no end of the data file is known
        (the turn may change it)."""
        struct.pack_into("=I", self._map, HOLDER_AT, os.getpid())
        struct.pack_into("=I", self._map, END_KNOWN_AT, 0)

    def give(self):
        """Give the mutex back (by the thread that took it)."""
        struct.pack_into("=I", self._map, HOLDER_AT, 0)
        failure = self._calls["pthread_mutex_unlock"](self._address)
        if failure:
            raise OSError(failure, os.strerror(failure))

    def held_by(self, thread):
        """True if the thread of native id ``thread`` holds the mutex (and has not died)."""
        return holding_thread(self._map) == thread

    def held_here(self):
        """True if a thread of this process holds the mutex (False if that cannot be known)."""
        thread = holding_thread(self._map)
        return bool(thread) and os.path.exists("/proc/self/task/%d" % thread)

    def holder(self):
        """The process id that the turn's holder noted, or 0."""
        return struct.unpack_from("=I", self._map, HOLDER_AT)[0]

    def close(self):
        """Unmap ``lock.write`` (never while a thread of this process may hold the mutex)."""
        self._cell = self._address = None
        self._map.close()
