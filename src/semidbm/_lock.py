"""The one-writer lock: an operating-system lock on the file ``lock`` in the db directory.

A writer holds an exclusive lock on ``lock`` for as long as its database
is open. The file is never renamed or replaced (compaction swaps ``data``
only), so the lock survives compaction. The operating system drops the
lock when the writer's process dies, however it dies. The file holds the
writer's process id, so that a refused writer can say who holds it.

POSIX uses ``flock``, which belongs to the open file: a second writer in
the same process is refused like one in another process. Windows locks
one byte, far past the process id, with ``msvcrt.locking``.
"""

import errno
import os
import sys

from ._files import BINARY, os_error
from .errors import DBMError
from .format import LOCK_NAME

#: The errors of a lock that another holds.
_BUSY = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK, errno.EDEADLK)

if sys.platform == "win32":
    import msvcrt

    #: Where the lock byte lies: past any process id written at the start,
    #: since Windows locks keep other handles from reading locked bytes.
    _WINDOWS_LOCK_OFFSET = 1 << 20

    def _try_lock(fd, shared):
        """Take the lock without waiting; False if another holds it.

        ``msvcrt.locking`` has no shared locks: a reader's probe takes
        the byte for a moment, as a shared ``flock`` would keep a writer
        out for that moment on POSIX.
        """
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError as exc:
            if exc.errno in _BUSY:
                return False
            raise
        return True

    def _unlock(fd):
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd, shared):
        """Take the lock without waiting; False if another holds it."""
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in _BUSY:
                return False
            raise
        return True

    def _unlock(fd):
        fcntl.flock(fd, fcntl.LOCK_UN)


def _holder(fd):
    """The process id the holder wrote into the lock file, or None."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 32).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class WriterLock:
    """The lock of one writer on one database directory; taken when made."""

    def __init__(self, directory, mode):
        self._fd = -1
        path = os.path.join(directory, LOCK_NAME)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | BINARY, mode)
        except OSError as exc:
            raise os_error(exc, "cannot open the lock file of semidbm database") from None
        try:
            if not _try_lock(fd, shared=False):
                holder = _holder(fd)
                raise DBMError(
                    errno.EAGAIN,
                    "semidbm database is locked by another writer%s"
                    % ("" if holder is None else " (process %d)" % holder),
                    directory,
                )
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, b"%d\n" % os.getpid())
        except OSError as exc:
            os.close(fd)
            if isinstance(exc, DBMError):
                raise
            raise os_error(exc, "cannot lock semidbm database") from None
        self._fd = fd

    def release(self):
        """Unlock and close the lock file; releasing again does nothing."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                _unlock(fd)
            finally:
                os.close(fd)

    def forget(self):
        """Close this process's copy without unlocking (in a forked child).

        The lock belongs to the parent's open file, which the child shares
        after ``fork()``: unlocking here would unlock the parent.
        """
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self):
        # Closing the file drops the lock.
        self.forget()


def writer_active(directory):
    """True if a writer holds the lock of the database in ``directory`` now."""
    try:
        fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDONLY | BINARY)
    except OSError:
        return False
    try:
        if _try_lock(fd, shared=True):
            _unlock(fd)
            return False
        return True
    finally:
        os.close(fd)
