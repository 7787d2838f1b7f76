"""The writers' locks: operating-system locks on the files ``lock`` and ``lock.write``.

An exclusive writer (flags ``'w'``, ``'c'``, ``'n'``) holds an exclusive
lock on ``lock`` for as long as its database is open. Shared writers
(``'wm'``, ``'cm'``: :class:`SharedLock`) each hold a shared lock on it
instead, for as long as theirs is open, so that neither kind ever meets
the other; they take turns on ``lock.write``, one operation at a time.
Neither file is ever renamed or replaced (compaction swaps ``data``
only), so the locks survive compaction. The operating system drops the
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
import struct
import sys
import threading
import time

from . import _turn_mutex
from ._files import BINARY, file_identity, os_error
from ._messages import SHARED_WRITER_FLAGS
from .errors import DBMError
from .format import COMPACT_NAME, LOCK_NAME, WRITE_LOCK_NAME

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

#: A shared writer waiting for its turn: the first pause, doubled after
#: each try up to the longest. Turns last microseconds; polling without
#: blocking kept four writers on two processors faster than a blocking
#: lock, which hands the lock over in a convoy (docs/sharing.md).
_FIRST_TURN_PAUSE = 0.00001
_LONGEST_TURN_PAUSE = 0.001

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


def _lock_for_writer(fd, shared=False):
    """Take the lock (exclusive, or shared for a shared writer), trying again for up to
    RETRY_SECONDS; False if refused.

    The first try is the only one when nobody holds the lock.
    """
    if _try_lock(fd, shared):
        return True
    deadline = time.monotonic() + RETRY_SECONDS
    pause = _FIRST_PAUSE
    while time.monotonic() < deadline:
        time.sleep(pause)
        if _try_lock(fd, shared):
            return True
        pause = min(2 * pause, _LONGEST_PAUSE)
    return False


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
            return pid if file_identity(fd) in _held else None
    except OSError:
        return None
    # 0 is no process (and os.kill(0, ...) would address the process group).
    return pid if pid > 0 and _alive(pid) else None


def _open_lock_file(directory, name, mode):
    """Open (or create) the lock file ``name`` of the database in ``directory``."""
    try:
        return os.open(os.path.join(directory, name), os.O_RDWR | os.O_CREAT | BINARY, mode)
    except OSError as exc:
        raise os_error(exc, "cannot open the lock file of semidbm database") from None


def _refusal(fd, directory):
    """The DBMError of a writer refused because another kind of writer holds ``lock`` (``fd``).

    It names the exclusive writer's process if it may hold the lock, or
    says that shared writers hold it: then a shared lock can be taken at
    once (and is let go again).
    """
    holder = _holder(fd)
    if holder is None and _try_lock(fd, shared=True):
        _unlock(fd)
        message = "semidbm database is open by shared writers (%s)" % SHARED_WRITER_FLAGS
    else:
        message = "semidbm database is locked by another writer%s" % (
            "" if holder is None else " (process %d)" % holder
        )
    return DBMError(errno.EAGAIN, message, directory)


class WriterLock:
    """The lock of one exclusive writer on one database directory; taken when made."""

    def __init__(self, directory, mode):
        self._fd = -1
        fd = _open_lock_file(directory, LOCK_NAME, mode)
        try:
            if not _lock_for_writer(fd):
                raise _refusal(fd, directory)
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, b"%d\n" % os.getpid())
            key = file_identity(fd)
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
    """True if a writer, exclusive or shared, holds the lock of the database in ``directory`` now.

    The probe asks for ``lock`` exclusively, which any writer's lock
    refuses (another reader's probe too, for an instant: then a writer
    is said to be at work, the safe answer, since a reader leaves a
    record it takes for a write in progress alone). A shared writer may
    begin a turn at any moment, so while one has the database open, an
    incomplete last record may be a write in progress.
    """
    try:
        fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDONLY | BINARY)
    except OSError:
        return False
    try:
        if _try_lock(fd, shared=False):
            _unlock(fd)
            return False
        return True
    finally:
        os.close(fd)


#: The turn file of each turn this process holds (by identity, "device:inode"), with the thread
#: holding it: a thread that asks, through another handle, for a turn it holds would wait for
#: itself.
_turns_held: dict[str, int] = {}
if hasattr(os, "register_at_fork"):
    # A forked child holds none: its threads are not those of the parent.
    os.register_at_fork(after_in_child=_turns_held.clear)


class SharedLock:
    """The locks of one shared writer: its membership, and its turns.

    Membership is a shared lock on ``lock``, held while the database is
    open: an exclusive writer is refused while any shared writer is
    there, and a shared writer while an exclusive one is. A turn is held
    for one operation (or one batch, or one
    :meth:`semidbm.Database.locked` block): the holder alone appends to
    the log, cuts it, compacts it or writes the index file. Where the C
    library is glibc, the turn is the robust mutex in ``lock.write``
    (``_turn_mutex``), and membership also a shared lock on
    ``lock.write``; elsewhere, an exclusive lock on ``lock.write``. A
    turn taken here first takes a mutex of the process (``_mutex``),
    which makes its threads take turns among themselves within the same
    timeout (a turn taken in C with mutex turns leaves it alone: the
    mutex in ``lock.write`` belongs to one thread, and keeps the others
    out itself). A turn taken inside
    another of the same thread (an operation inside a batch) only
    counts: ``enter`` returns its depth, and ``leave`` goes back to the
    depth below it, so that a ``leave`` that an exception from a signal
    handler skipped is made good by the one of the turn around it. The
    operating system drops the locks when the process dies, however it
    dies, and the mutex's next taker is told that its holder died;
    closing drops them too, whatever state a turn was left in, but for a
    mutex that another thread holds (below, ``leave``).
    """

    # Slots: a turn taken in C reads and sets some of them at every operation.
    __slots__ = (
        "_directory", "_timeout", "_mutex", "_owner", "_depth", "_fd", "_turn_fd", "_turn_key",
        "_count_ready", "_turns", "_taker", "_taking", "_stranded", "_closing",
    )

    #: The turns this process holds (``_turns_held``), for a turn taken in C.
    _held = _turns_held

    def __init__(self, directory, mode, timeout):
        self._directory = directory
        self._timeout = timeout
        self._mutex = threading.Lock()
        self._owner = None  # the thread in the turn
        self._depth = 0
        self._fd = self._turn_fd = -1
        self._count_ready = False
        self._turns = None  # the TurnMutex, where turns are one
        self._taker = None  # the native id of the thread that took the mutex, in a turn
        self._taking = None  # the native id of the thread taking the mutex now
        self._stranded = None  # the native id of the thread that holds it past its turn
        self._closing = False  # closed while another thread held a turn: it closes the files
        _sweep_kept_maps()
        fd = _open_lock_file(directory, LOCK_NAME, mode)
        try:
            if not _lock_for_writer(fd, shared=True):
                raise _refusal(fd, directory)
            self._turn_fd = _open_lock_file(directory, WRITE_LOCK_NAME, mode)
            # A string: its hash is kept, which a turn in C, marking it in _turns_held, reuses.
            self._turn_key = "%d:%d" % file_identity(self._turn_fd)
            if _turn_mutex.available():
                self._turns = self._join_turns()
        except BaseException:
            if self._turn_fd >= 0:
                os.close(self._turn_fd)
                self._turn_fd = -1
            os.close(fd)
            raise
        self._fd = fd

    def _join_turns(self):
        """Join the turns of ``lock.write``: its ``TurnMutex``, or None for ``flock`` turns.

        Every shared writer with mutex turns holds a shared ``flock`` on
        ``lock.write`` while open, so one that has it exclusively is the
        only such writer: it writes ``lock.write`` anew (keeping the count
        of replaced data files), with a new mutex, since one left by
        writers gone may be held by a thread that no longer exists (a
        machine restarted; the mutex is robust only for holders that die
        while the machine runs); the kind last, once the mutex is made.
        Only then does it share the lock. Another waits for the shared
        lock (an exclusive one is held by such a first writer, or by a turn
        where turns are an ``flock``), for up to the timeout, and joins what
        it finds: a mutex of its kind; the kind 0 as ``flock`` turns (a
        filesystem that cannot map ``lock.write``, or writers of an earlier
        semidbm), holding no lock on ``lock.write`` between turns; another
        kind (another C library's layout) is refused.
        """
        fd = self._turn_fd
        try:
            if _try_lock(fd, shared=False):
                return self._make_turns()
            self._wait(lambda: _try_lock(fd, shared=True))
            raw = os.pread(fd, _turn_mutex.SIZE, 0)
        except OSError as exc:
            if isinstance(exc, DBMError):
                raise
            raise os_error(exc, "cannot lock semidbm database") from None
        kind = _turn_mutex.LAYOUT.unpack_from(raw.ljust(_turn_mutex.SIZE, b"\0"))[1]
        if kind == 0:
            _unlock(fd)
            return None
        if len(raw) < _turn_mutex.SIZE or kind != _turn_mutex.KIND:
            raise DBMError(
                errno.EAGAIN,
                "semidbm database is open by shared writers that take turns another way "
                "(kind %#x in lock.write: another C library's process?); close them first"
                % kind,
                self._directory,
            )
        return _turn_mutex.TurnMutex(fd)

    def _make_turns(self):
        """Write ``lock.write`` anew, as its only writer (its exclusive lock held), and share
        the lock: the ``TurnMutex``, or None (``lock.write`` unlocked) where the file cannot
        be mapped, and turns are an ``flock``."""
        fd = self._turn_fd
        turns = None
        try:
            fresh = _turn_mutex.LAYOUT.pack(self._read_count(), 0, 0, 0, 0, 0)
            os.pwrite(fd, fresh.ljust(_turn_mutex.SIZE, b"\0"), 0)
            try:
                turns = _turn_mutex.TurnMutex(fd)
            except OSError:  # no shared map of lock.write here: turns are an flock
                return None
            turns.initialize()
            os.pwrite(fd, _KIND.pack(_turn_mutex.KIND), _turn_mutex.KIND_AT)
        except BaseException:
            if turns is not None:
                turns.close()
                turns = None
            raise
        finally:
            if turns is None:
                _unlock(fd)
        try:
            # Exclusive to shared: another writer's exclusive hold, if one comes between
            # the two, is as short as this one.
            self._wait(lambda: _try_lock(fd, shared=True))
        except BaseException:
            turns.close()
            raise
        return turns

    def enter(self, follow=None):
        """Begin a turn: wait for ``lock.write``, then call ``follow()`` (catch up with the log).

        Returns the turn's depth (1 for the outermost), for :meth:`leave`;
        0, taking nothing, once the lock is released (the database
        closed): the operation then raises the closed database's error
        itself. DBMError (``EDEADLK``) if this thread holds the turn
        through another handle of the same database.
        """
        me = threading.get_ident()
        if self._owner == me:
            self._depth += 1
            return self._depth
        turns, native = self._turns, threading.get_native_id()
        # This thread's stranded mutex, if it still holds it (the ids of threads that ended
        # are given to new ones), is taken over; a turn of this thread through another
        # handle, or a take of one cut short there, is refused.
        resume = turns is not None and self._stranded == native and turns.held_by(native)
        if (
            not resume
            and _turns_held.get(self._turn_key) == me
            and (turns is None or turns.held_by(native))
        ):
            raise DBMError(
                errno.EDEADLK,
                "this thread holds the write lock of semidbm database through another "
                "handle (in its locked() block or batch): it would wait for itself",
                self._directory,
            )
        if not self._mutex.acquire(timeout=-1 if self._timeout is None else self._timeout):
            raise self._timed_out()  # another thread of this process holds the turn
        try:
            if self._turn_fd < 0:
                self._mutex.release()
                return 0
            if resume:
                self._stranded, self._taker = None, native
            else:
                self._wait(self._take_turn)
        except BaseException:
            try:
                self._give_lost_take(native)
            finally:
                self._end_closing()
                self._mutex.release()
            raise
        if self._closing:  # closed meanwhile by another thread (abandon): give it all back
            try:
                self._give_turn()
            finally:
                self._end_closing()
                self._mutex.release()
            return 0
        self._owner, self._depth = me, 1
        _turns_held[self._turn_key] = me
        try:
            if self._turns is not None:
                self._turns.began()
            elif not self._count_ready:
                self._ready_count()
            if follow is not None:
                follow()
        except BaseException:
            self.leave(None, 1)
            raise
        return 1

    def leave(self, database, depth):
        """End the turn of ``depth`` that :meth:`enter` began; the outermost writes what the turn
        buffered to the file (``database._publish()``, unless ``database`` is None: no buffered
        write outlives the turn), then unlocks.

        Another thread may end it (a generator suspended in a ``locked()``
        block, closed there): the process's mutex is a plain lock, which
        any thread may release, and so is an ``flock``. But a pthread
        mutex is given back only by the thread that took it: ended by
        another thread, the turn is *stranded*, its mutex held by the
        thread that began it until that thread begins another turn of
        this handle (which takes it over), or ends (the mutex's next taker
        is then told that its holder died). If that thread has ended
        already, the mutex is no longer this process's, so the turn's
        buffered writes cannot be written: the handle becomes read-only
        without writing them (``_disown``), and DBMError (``EOWNERDEAD``)
        says so.
        """
        if depth > 1:
            self._depth = depth - 1
            return
        owner, mutex = self._owner, self._mutex  # as they are, before a _disown forgets them
        taker = self._taker
        stranded = self._turns is not None and threading.get_ident() != owner
        try:
            if database is not None and self._turn_fd >= 0:
                if stranded and not self._turns.held_by(taker):
                    stranded = False  # nothing to keep
                    _turns_held.pop(self._turn_key, None)
                    database._disown()
                    raise DBMError(
                        errno.EOWNERDEAD,
                        "the turn of semidbm database ended with the thread that began it; "
                        "the writes it buffered were not written, and this handle is now "
                        "read-only",
                        self._directory,
                    )
                database._publish()
        finally:
            self._owner, self._depth = None, 0
            if not stranded:  # a stranded turn stays this thread's for its other handles
                _turns_held.pop(self._turn_key, None)
            try:
                if self._turn_fd >= 0:
                    if stranded:
                        self._stranded = taker
                    else:
                        self._give_turn()
                        self._end_closing()
            finally:
                mutex.release()

    def _take_turn(self):
        """Take the turn without waiting: True if taken, False if another holds it.

        Before the mutex is taken, the thread taking it is noted, so that
        an exception from a signal handler that lands just after cannot
        leave it taken unknown to this lock (``_give_lost_take``), and the
        turn is marked this thread's, so that such a handler writing
        through another handle is refused at once (``EDEADLK``) rather
        than waiting for this thread. The taker is noted once it is taken:
        another thread's failed try never forgets a stranded turn's.
        """
        turns = self._turns
        if turns is None:
            return _try_lock(self._turn_fd, shared=False)
        me, native = threading.get_ident(), threading.get_native_id()
        self._taking = native
        _turns_held[self._turn_key] = me  # a signal's handler writing through another handle
        taken = turns.take()
        if taken:
            self._taker, self._stranded = native, None
        elif _turns_held.get(self._turn_key) == me:
            del _turns_held[self._turn_key]
        self._taking = None
        return taken

    def _give_lost_take(self, native):
        """Give back the mutex that thread ``native`` took for a turn that did not begin: its
        wait was cut short by an exception (a signal handler's) after the mutex was taken."""
        turns = self._turns
        if turns is not None and native in (self._taking, self._taker) and turns.held_by(native):
            self._taking = None
            self._give_turn()
        if _turns_held.get(self._turn_key) == threading.get_ident():
            del _turns_held[self._turn_key]

    def abandon(self):
        """Let go of the locks as the database closes without a turn (its wait failed): at once,
        unless another thread of this process is in a turn of this lock or waits for one, or
        holds its stranded mutex; that thread lets go of them as it ends (``_closing``)."""
        if not self._mutex.acquire(False):
            self._closing = True
            return
        try:
            stranded = self._stranded
            if stranded is not None and self._turns is not None and self._turns.held_by(stranded):
                self._closing = True
            else:
                self._close_files()
        finally:
            self._mutex.release()

    def _end_closing(self):
        """Close the files that ``abandon`` left to this thread, if it did."""
        if self._closing:
            self._closing = False
            self._close_files()

    def _give_turn(self):
        """Give the turn back (an unlock, or the mutex given back by the thread that took it)."""
        if self._turns is None:
            _unlock(self._turn_fd)
        else:
            self._taker = None
            self._turns.give()

    def _ready_count(self):
        """Write ``lock.write``'s count back as it is (zeros where the file is shorter), in the
        first turn of this lock (the open's).

        The write gives its bytes a block on the disk: a turn in C reads
        the count through a map, and a map of a hole (a file that was
        only made longer) faults with ``SIGBUS`` where the filesystem
        is full and must find a page for it (tmpfs). On a full disk this
        open fails instead, once, with the disk's error. Only a turn
        writes the count, so rewriting it loses none.
        """
        self._write_count(self._read_count())
        self._count_ready = True

    def _read_count(self):
        """``lock.write``'s count of replaced data files (missing bytes read as zeros)."""
        try:
            raw = os.pread(self._turn_fd, _COUNT.size, 0)
        except OSError as exc:
            raise os_error(exc, "cannot read the lock file of semidbm database") from None
        return _COUNT.unpack(raw.ljust(_COUNT.size, b"\0"))[0]

    def count_replacement(self):
        """Count, in ``lock.write``, a replacement of the data file this turn is about to make.

        Called in the turn, before a compaction: a turn in C that finds
        the count unchanged knows ``data`` to be the file it has open
        without a stat (``turns.pxi``). Counting one that then fails
        costs the next turns of each writer one stat. If the count
        cannot be written, the compaction does not start.
        """
        self._write_count((self._read_count() + 1) & 0xFFFFFFFFFFFFFFFF)

    def _write_count(self, count):
        """Write ``count`` as ``lock.write``'s count of replaced data files (in a turn)."""
        try:
            os.pwrite(self._turn_fd, _COUNT.pack(count), 0)
        except OSError as exc:
            raise os_error(exc, "cannot write the lock file of semidbm database") from None

    def _wait(self, attempt):
        """Call ``attempt()`` (a try to take the turn, or ``lock.write``'s shared lock), polling,
        until it gives True, for up to the timeout; DBMError (ETIMEDOUT) after it.

        A compaction holds the turn for as long as it copies the log: the
        deadline moves on while ``data.compact`` grows.
        """
        if attempt():
            return
        timeout = self._timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = _FIRST_TURN_PAUSE
        compacted = _compaction_size(self._directory)
        while True:
            time.sleep(pause)
            if attempt():
                return
            pause = min(2 * pause, _LONGEST_TURN_PAUSE)
            if deadline is not None and time.monotonic() >= deadline:
                size = _compaction_size(self._directory)
                if size is None or size == compacted:
                    raise self._timed_out()
                compacted = size
                deadline = time.monotonic() + timeout

    def _timed_out(self):
        """The DBMError of a turn not had within the timeout, naming the holder if it can."""
        if self._turns is None:
            holder = _turn_holder(self._turn_fd)
        else:
            holder = self._turns.holder()
            holder = holder if holder and _alive(holder) else None
        return DBMError(
            errno.ETIMEDOUT,
            "waited %g s for the write lock of semidbm database; %s holds it "
            "(stopped, or in a long operation?); see lock_timeout"
            % (self._timeout, "another process" if holder is None else "process %d" % holder),
            self._directory,
        )

    def release(self):
        """Unlock and close both files; releasing again does nothing.

        At close: it waits (up to the timeout) for another thread's turn
        to end; a turn of this thread (close inside a ``locked()`` block)
        just ends with it.
        """
        me = threading.get_ident()
        waited = self._owner != me and self._mutex.acquire(
            timeout=-1 if self._timeout is None else self._timeout
        )
        try:
            native = threading.get_native_id()
            if self._turns is not None and self._taker == native and self._turns.held_by(native):
                self._give_turn()  # this thread's turn here, or its stranded mutex
                self._owner = self._stranded = None
                _turns_held.pop(self._turn_key, None)
            self._close_files()
        finally:
            if waited:
                self._mutex.release()

    def forget(self):
        """Close this process's copies without unlocking (in a forked child).

        The parent's locks belong to the open files the child shares: a
        turn the parent holds must go on being held.
        """
        self._close_files()
        self._mutex = threading.Lock()
        self._owner, self._depth = None, 0
        self._stranded = self._taker = None  # the parent's threads, not this child's

    def _close_files(self):
        """Close both lock files (closing the last descriptor of a file unlocks it), and unmap
        the mutex; but while a thread of this process holds the mutex (stranded, say, or a
        turn in C of another thread), the map stays, since that thread's list of robust
        mutexes points into it, and so does ``lock.write`` open, whose shared lock keeps the
        next writer from making the mutex anew under it (``_kept_maps``)."""
        fds = [self._fd, self._turn_fd]
        self._fd = self._turn_fd = -1
        turns, self._turns = self._turns, None
        if turns is not None:
            if turns.held_here():
                _kept_maps.append((turns, fds.pop()))
            else:
                turns.close()
        _sweep_kept_maps()
        if self._owner is not None:
            _turns_held.pop(self._turn_key, None)
        for fd in fds:
            if fd >= 0:
                os.close(fd)

    def __del__(self):
        self._close_files()


#: ``lock.write``'s count of replaced data files: in the machine's byte order, as the
#: compiled kernel reads it through its own map (the file is never read on another machine).
_COUNT = struct.Struct("=Q")

#: ``lock.write``'s kind of turns (``_turn_mutex.KIND_AT``), in the machine's byte order.
_KIND = struct.Struct("=I")

#: The maps of ``lock.write`` of closed shared writers whose mutex a thread of this process
#: held, with the file's descriptor (``SharedLock._close_files``): never unmapped nor closed.
_kept_maps: list[tuple[_turn_mutex.TurnMutex, int]] = []


def _sweep_kept_maps():
    """Unmap and close the kept maps of ``lock.write`` whose mutex no thread here holds now."""
    for entry in list(_kept_maps):
        turns, fd = entry
        if not turns.held_here():
            _kept_maps.remove(entry)
            turns.close()
            if fd >= 0:
                os.close(fd)


def _compaction_size(directory):
    """The size of ``data.compact`` in ``directory`` (a compaction's progress), or None."""
    try:
        return os.stat(os.path.join(directory, COMPACT_NAME)).st_size
    except OSError:
        return None


def _turn_holder(fd):
    """The process that holds ``flock`` on the file ``fd``, from Linux's ``/proc/locks``; or None.

    Elsewhere, if the table cannot be read, or once the file is closed
    (the database closed meanwhile), None: the message then names no process.
    """
    try:
        inode = os.fstat(fd).st_ino
        with open("/proc/locks") as table:
            lines = table.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; waiters have "->" after the number.
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[3] == "WRITE":
            if fields[5].rsplit(":", 1)[-1] == str(inode) and fields[4].isdigit():
                return int(fields[4])
    return None
