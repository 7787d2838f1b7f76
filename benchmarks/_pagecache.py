"""Evicts a database's files from the operating system's page cache, for cold reads.

Dropping the whole cache (``/proc/sys/vm/drop_caches``) needs root; this
does it per file with ``posix_fadvise(POSIX_FADV_DONTNEED)``, which any
user may call on files they can open. The kernel only drops clean pages,
so each file is fsynced first. Where the call does not exist (macOS,
Windows), nothing is dropped and ``COLD`` is False: the reports then say
that the "cold" reads ran on a warm cache.

A database's files are all the files it keeps (for semidbm the ``data``
file and the ``index`` file beside it, and the lock), so a cold open
finds none of them cached. ``resident`` tells how much of a file is in
the cache (``mincore`` on a mapping of it, Linux only), so that a report
can show that a drop took and how much an open read back; ``warm``
reads a database's files through, to put them back in the cache before
measurements that assume them there.
"""

import ctypes
import glob
import mmap
import os
import sys

#: Whether ``drop`` really evicts pages on this system.
COLD = hasattr(os, "posix_fadvise")
#: Whether ``resident`` can tell which pages are cached (``mincore``, as Linux defines it).
RESIDENCY = sys.platform.startswith("linux")
#: Bytes read at once by ``warm``.
WARM_CHUNK = 1 << 20
#: Keeps bit 0 of every byte (``bytes.translate``): a page's byte from ``mincore``, cut to its flag.
_LOW_BIT = bytes(value & 1 for value in range(256))


def database_files(path):
    """Return the files a database at ``path`` keeps: the path itself, or all under it.

    Names that start with ``path`` and a dot count too, since ``dbm.dumb``
    keeps ``path.dat`` and ``path.dir`` beside the name it was given.
    """
    found = []
    if os.path.isdir(path):
        for directory, _, names in os.walk(path):
            found += [os.path.join(directory, name) for name in names]
    elif os.path.isfile(path):
        found.append(path)
    found += [name for name in glob.glob(glob.escape(path) + ".*") if os.path.isfile(name)]
    return found


def drop(path):
    """Write the database at ``path`` to disk and evict its files from the page cache."""
    if not COLD:
        return
    for name in database_files(path):
        fd = os.open(name, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _libc():
    """The C library, with ``mmap``, ``munmap`` and ``mincore`` declared for ctypes."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int64,
    ]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    return libc


def resident(name):
    """Return the bytes of the file ``name`` that are in the page cache, or None if unknown.

    The file is mapped (shared, read only; no page is touched) and
    ``mincore`` reports which of its pages the cache holds. The last page
    counts whole, so a fully cached file may show up to a page more than
    its size.
    """
    if not RESIDENCY:
        return None
    size = os.stat(name).st_size
    if size == 0:
        return 0
    libc = _libc()
    fd = os.open(name, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed", name)
        try:
            pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vector = ctypes.create_string_buffer(pages)
            if libc.mincore(address, size, vector) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed", name)
            # Bit 0 of each page's byte says whether it is cached; the others are reserved.
            cached = pages - vector.raw.translate(_LOW_BIT).count(0)
        finally:
            libc.munmap(address, size)
    finally:
        os.close(fd)
    return cached * mmap.PAGESIZE


def cache_state(path):
    """Return, for each file of the database at ``path``, [bytes in the page cache, size].

    The files are keyed by their path relative to ``path`` (``data``,
    ``index``, ``lock`` for semidbm); the bytes cached are None where the
    system cannot tell.
    """
    state = {}
    for name in database_files(path):
        state[os.path.relpath(name, path)] = [resident(name), os.stat(name).st_size]
    return state


def warm(path):
    """Read every file of the database at ``path`` through, to bring it into the page cache.

    Returns the bytes read.
    """
    total = 0
    buffer = bytearray(WARM_CHUNK)
    for name in database_files(path):
        with open(name, "rb", buffering=0) as file:
            while True:
                count = file.readinto(buffer)
                if not count:
                    break
                total += count
    return total
