"""Evicts a database's files from the operating system's page cache, for cold reads.

Dropping the whole cache (``/proc/sys/vm/drop_caches``) needs root; this
does it per file with ``posix_fadvise(POSIX_FADV_DONTNEED)``, which any
user may call on files they can open. The kernel only drops clean pages,
so each file is fsynced first. Where the call does not exist (macOS,
Windows), nothing is dropped and ``COLD`` is False: the reports then say
that the "cold" reads ran on a warm cache.
"""

import glob
import os

#: Whether ``drop`` really evicts pages on this system.
COLD = hasattr(os, "posix_fadvise")


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
