"""The one-writer lock: an operating-system lock on the file ``lock`` in the db directory.

A writer holds an exclusive lock on ``lock`` for as long as its database
is open. The file is never renamed or replaced (compaction swaps ``data``
only), so the lock survives compaction. The operating system drops the
lock when the writer's process dies, however it dies.

A reader's probe (``writer_active``) holds the lock too, for a moment: a
writer that finds the lock taken tries again for up to ``RETRY_SECONDS``
before it is refused, so that a probe never makes it fail.

While a writer holds the lock, the file holds its process id, so that a
refused writer can say who holds it. Releasing empties the file first; a
killed writer's id stays, so a refusal names a process only if it is
alive (and this process only if one of its own locks holds the file).

POSIX uses ``flock``, which belongs to the open file: a second writer in
the same process is refused like one in another process. Windows locks
one byte, far past the process id, with ``msvcrt.locking``.
"""

import errno
import os
import sys
import time

from ._files import BINARY, os_error
from .errors import DBMError
from .format import LOCK_NAME

#: The errors of a lock that another holds.
_BUSY = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK, errno.EDEADLK)

#: How long, in seconds, a writer tries again to take a lock that another
#: holds before it is refused. A reader's probe holds the lock for some
#: microseconds, or for a few scheduler time slices (milliseconds) if its
#: process is preempted meanwhile; a writer holds it for as long as its
#: database is open. So a refusal comes this late, and a probe never
#: causes one.
RETRY_SECONDS = 0.1

#: The first pause between two tries, doubled after each try up to the
#: longest: a probe ends at once, a preempted one takes longer.
_FIRST_PAUSE = 0.0001
_LONGEST_PAUSE = 0.005

#: The (st_dev, st_ino) of every lock file that a WriterLock of this
#: process holds: the process id in such a file is this process's own.
_held: set[tuple[int, int]] = set()

if sys.platform == "win32":
    import msvcrt

    #: Where the lock byte lies: past any process id written at the start,
    #: since Windows locks keep other handles from reading locked bytes.
    _WINDOWS_LOCK_OFFSET = 1 << 20

    def _lock_now(fd, shared):
        """Take the lock without waiting; OSError (an errno of ``_BUSY``) if another holds it.

        ``msvcrt.locking`` has no shared locks: a reader's probe takes
        the byte for a moment, as a shared ``flock`` would keep a writer
        out for that moment on POSIX.
        """
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

    def _unlock(fd):
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    def _alive(pid):
        """Whether process ``pid`` is alive is not asked on Windows: no process is named.

        ``os.kill(pid, 0)`` would end the process there.
        """
        return False

else:
    import fcntl

    def _lock_now(fd, shared):
        """Take the lock without waiting; OSError (an errno of ``_BUSY``) if another holds it."""
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)

    def _unlock(fd):
        fcntl.flock(fd, fcntl.LOCK_UN)

    def _alive(pid):
        """True if process ``pid`` exists (signal 0 checks without sending).

        ``PermissionError`` means it exists but belongs to another user.
        """
        try:
            os.kill(pid, 0)
        except PermissionError:
            return True
        except (ProcessLookupError, OverflowError):
            return False
        return True


def _try_lock(fd, shared):
    """Take the lock, shared or exclusive, without waiting; False if another holds it."""
    try:
        _lock_now(fd, shared)
    except OSError as exc:
        if exc.errno in _BUSY:
            return False
        raise
    return True


def _lock_for_writer(fd):
    """Take the exclusive lock, trying again for up to RETRY_SECONDS; False if refused.

    The first try is the only one when nobody holds the lock.
    """
    if _try_lock(fd, shared=False):
        return True
    deadline = time.monotonic() + RETRY_SECONDS
    pause = _FIRST_PAUSE
    while time.monotonic() < deadline:
        time.sleep(pause)
        if _try_lock(fd, shared=False):
            return True
        pause = min(2 * pause, _LONGEST_PAUSE)
    return False


def _file_key(fd):
    """What identifies the open file ``fd`` among files: (device, inode)."""
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def _holder(fd):
    """The process id in the lock file if that process may hold the lock, or None.

    None if the file holds no id (a writer that has just taken the lock
    may not have written it yet), the id of a process that has died (a
    killed writer), or this process's id while none of its own locks holds
    this file (an id written by a dead process that had the same id).
    """
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 32).decode("ascii", "replace").strip()
        pid = int(text) if text.isdigit() else 0
        if pid == os.getpid():
            return pid if _file_key(fd) in _held else None
    except OSError:
        return None
    # 0 is no process (and os.kill(0, ...) would address the process group).
    return pid if pid > 0 and _alive(pid) else None


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
            if not _lock_for_writer(fd):
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
            key = _file_key(fd)
        except OSError as exc:
            os.close(fd)
            if isinstance(exc, DBMError):
                raise
            raise os_error(exc, "cannot lock semidbm database") from None
        self._fd = fd
        self._key = key
        _held.add(key)

    def release(self):
        """Empty, unlock and close the lock file; releasing again does nothing.

        The file is emptied while still locked, so that no refusal names
        this writer after it is gone, and no next writer's id is erased.
        If emptying fails, closing still drops the lock.
        """
        fd, self._fd = self._fd, -1
        if fd >= 0:
            _held.discard(self._key)
            try:
                os.ftruncate(fd, 0)
                _unlock(fd)
            finally:
                os.close(fd)

    def forget(self):
        """Close this process's copy without unlocking (in a forked child).

        The lock belongs to the parent's open file, which the child shares
        after ``fork()``: unlocking here would unlock the parent, and
        emptying the file would erase the parent's process id.
        """
        fd, self._fd = self._fd, -1
        if fd >= 0:
            _held.discard(self._key)
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
