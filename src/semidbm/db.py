"""The API layer: opening databases (flags, directories, files) and the db object.

The db class is made at run time, once per kernel: the kernel's
``Store`` (item access in the kernel, C slots for the compiled one),
then :class:`semidbm.Database` (``_database``), which adds the rest of
the dbm interface and is the public type that ``semidbm.db.open`` and
``semidbm.open`` return; here, the database's lock and
``close(compact=...)``. Names that only annotations use are imported for
the type checker alone: the annotations stay strings at run time (valid
on Python 3.9).
"""

from __future__ import annotations

import atexit
import errno
import functools
import itertools
import operator
import os
import stat
import sys
import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Literal

from . import _checkpoint, _expiry, _files, _index_file, _kernel, _lock, _messages
from ._batch import update_pairs
from ._database import Database
from ._settings import DEFAULT_BUFFER_SIZE, MAX_BUFFER_SIZE
from ._shared import SHARED_FLAGS, _in_turn, shared_class
from .errors import DBMError, DBMNotSyncedError, TornTailWarning
from .format import (
    BATCH_FORMAT,
    COMPACT_NAME,
    DATA_NAME,
    DEFAULT_FORMAT,
    EXPIRY_VERSION,
    HEADER_SIZE,
    INDEX_NAME,
    INDEX_TEMP_NAME,
    LOCK_NAME,
    MAGIC,
    WRITE_LOCK_NAME,
    check_format,
    check_header,
)

if TYPE_CHECKING:
    from types import ModuleType

    from _typeshed import StrOrBytesPath

    from ._types import Flag, GnuFlag

#: The kernel in use: "cython" (``semidbm._core``) or "python" (``semidbm._pure``).
implementation: Literal["cython", "python"]
implementation, _default_kernel = _kernel.choose()

_FLAGS = ("r", "w", "c", "n") + SHARED_FLAGS
#: dbm.gnu's letters that may follow a flag's first letter (:func:`_parse_flag`).
_GNU_LETTERS = frozenset("fsu")
#: What a writer opened with dbm.gnu's ``s`` syncs after: every operation that writes.
#: One that another calls (``pop``'s delete, ``update``'s sets) syncs once, at the end of
#: the outer one (``_synced_class``).
_SYNCED_WRITES = (
    "__setitem__", "__delitem__", "update", "delete_many", "_commit_batch", "_commit_encoded",
    "pop", "popitem", "setdefault", "clear",
)
#: The ids of the databases each thread is inside a synced write of (``_synced_class``).
_writing = threading.local()
#: How long, in seconds, a shared writer waits for its turn by default.
DEFAULT_LOCK_TIMEOUT = 10.0
#: The db class of each kind of handle, ``(kernel, shared, synced, expiring)``
#: (:func:`_class_for`), made at its first use.
_kinds: dict[tuple[ModuleType, bool, bool, bool], type[Database]] = {}
#: Databases open for writing in this process (by id), closed at exit.
_open_writers: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


@atexit.register
def _close_at_exit():
    """Flush and fsync every database still open when the interpreter exits."""
    for database in list(_open_writers.values()):
        database.close()


def _disown_in_child():
    """After ``fork()``, in the child: the parent's databases become read-only here.

    The child shares the parent's files but not its future: writing the
    parent's buffer, or the lock, from the child would corrupt the parent's
    database. The child may still read what it inherited.
    """
    for database in list(_open_writers.values()):
        database._disown()
    _open_writers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_disown_in_child)


def database_class(kernel: ModuleType) -> type[Database]:
    """Return the db class built on ``kernel``'s Store (made once per kernel).

    ``kernel`` is a kernel module, ``semidbm._core`` or ``semidbm._pure``
    (``_kernel.load`` imports either by name).
    """
    return _class_for(kernel, "r", False)


def _plain_class(kernel):
    """Make :func:`database_class`'s class (:func:`_class_for` keeps it and names it)."""
    kernel_name = _kernel.name_of(kernel)  # what a pickled database names its kernel by

    # A base known at run time only: type checkers see semidbm.Database.
    class SemiDBM(kernel.Store, Database):  # type: ignore[name-defined, misc]
        """A semidbm database on this kernel's Store (:class:`semidbm.Database`)."""

        __slots__ = ("_lock", "_cursor", "_arguments", "__weakref__")

        # The kernel's close, with the compaction and the lock of the API layer.
        def close(self, compact=False):
            """:meth:`semidbm.Database.close`: then the lock is released."""
            try:
                if compact and not self.closed:
                    self.compact()
                kernel.Store.close(self)
            finally:
                # Still open only if called from a compaction's progress
                # callback (refused): the compaction needs the lock.
                if self.closed:
                    lock, self._lock = self._lock, None
                    if lock is not None:
                        lock.release()

        def __reduce__(self):
            """Pickle a reader or a shared writer as what opens it again (:func:`_reopen`).

            The receiving process opens it at its first use. An exclusive
            writer refuses: a second one could not open it while this one
            is open.
            """
            if self.closed:
                raise TypeError(_messages.CLOSED_NOT_PICKLED % self)
            arguments = self._arguments
            if arguments[1] not in ("r",) + SHARED_FLAGS:
                raise TypeError(_messages.NOT_PICKLED % self)
            # Opened again in the format it has then (a compaction may convert it):
            # format, the seventh of _open_into's arguments, left out.
            return _reopen, (kernel_name,) + arguments[:6] + (None,) + arguments[7:]

        def __reduce_ex__(self, protocol):
            """As :meth:`__reduce__`, whatever the protocol."""
            return self.__reduce__()

        def _disown(self):
            """Become read-only without writing anything (in a forked child)."""
            kernel.Store._disown(self)
            lock, self._lock = self._lock, None
            if lock is not None:
                lock.forget()

    return SemiDBM


def _synced_class(base):
    """``base`` (a db class) with each write durable before it returns: dbm.gnu's ``s``.

    Every operation of ``_SYNCED_WRITES`` runs :meth:`Database.sync` after
    it, once: the writes it makes through others (``pop`` deletes,
    ``update`` sets, on the pure-Python kernel) sync nothing of their
    own. One that raises syncs nothing (what it wrote is made durable by
    the next write, ``sync()`` or ``close()``). A sync that fails raises
    DBMNotSyncedError: what it changed is in the database, maybe not on
    the disk, and its result (``pop``'s value) is the error's. A shared
    writer's sync takes a turn of its own, after the write's.
    """

    def synced(method):
        @functools.wraps(method)
        def write_and_sync(self, *args, **kwds):
            inside = _writing.__dict__.setdefault("ids", set())
            if id(self) in inside:
                return method(self, *args, **kwds)
            inside.add(id(self))
            try:
                result = method(self, *args, **kwds)
            finally:
                inside.discard(id(self))
            try:
                self.sync()
            except DBMError as exc:
                failure = _files.restated(
                    exc, DBMNotSyncedError, lambda reason: _messages.NOT_SYNCED % reason
                )
                failure.result = result
                raise failure from exc
            return result

        return write_and_sync

    def __reduce__(self):
        """As ``base``'s, for a handle that syncs every write again (:func:`_reopen_synced`)."""
        return _reopen_synced, base.__reduce__(self)[1]

    members = {name: synced(getattr(base, name)) for name in _SYNCED_WRITES}
    members.update(__slots__=(), __doc__=base.__doc__, __reduce__=__reduce__)
    return type(base.__name__, (base,), members)


def _class_for(kernel, flag, synced, expiring=False):
    """The db class of a database opened with ``flag`` (semidbm's own) on ``kernel``.

    ``synced``: every write is synced (:func:`_synced_class`); ``expiring``:
    every value written has the handle's default lifetime
    (:func:`_expiring_class`). Each class is made once; after that, one
    look-up finds it (every open and every unpickled handle asks).
    """
    kind = (kernel, flag in SHARED_FLAGS, synced, expiring)
    try:
        return _kinds[kind]
    except KeyError:
        pass
    shared = kind[1]
    if synced:  # synced over expiring: an expiring update's sets, each a write, sync once
        made = _synced_class(_class_for(kernel, flag, False, expiring))
    elif expiring:
        made = _expiring_class(_class_for(kernel, flag, False, False), shared)
    elif shared:  # a shared writer's (``_shared``)
        made = shared_class(_class_for(kernel, "r", False), _warn_of_torn_tail)
    else:
        made = _plain_class(kernel)
    _name(made, _kernel.name_of(kernel), shared=shared, synced=synced, expiring=expiring)
    return _kinds.setdefault(kind, made)


def _expiring_class(base, shared):
    """``base`` (a db class, ``shared`` or not) writing every value with the handle's default
    lifetime.

    The lifetime is ``semidbm.open(expire=)``'s, the last of the handle's
    ``_arguments``. ``db[key] = value`` and ``set`` without ``expire`` are
    ``set(key, value, expire=lifetime)``; ``update`` sets each item so (in
    order, as the kernels' ``update`` takes them, ``_batch.update_pairs``;
    a shared writer's in one turn, as its own); a batch's puts, which
    reach the kernel through ``_commit_batch``, get their expiry records
    there, timed at the commit. ``setdefault`` (``MutableMapping``'s) sets
    through ``__setitem__``. Deletes, compaction and reads are ``base``'s.
    """

    class ExpiringSemiDBM(base):  # type: ignore[valid-type, misc]
        __slots__ = ()

        @property
        def expire(self):
            """:attr:`semidbm.Database.expire`: ``semidbm.open(expire=)``'s lifetime."""
            return self._arguments[8]

        def __setitem__(self, key, value, /):
            """``db[key] = value``: the value expires after the handle's lifetime."""
            base.set(self, key, value, self._arguments[8])

        def set(self, key, value, expire=None):
            """:meth:`semidbm.Database.set`; without ``expire``, the handle's lifetime."""
            base.set(self, key, value, self._arguments[8] if expire is None else expire)

        def update(self, other=(), /, **kwds):
            """:meth:`semidbm.Database.update`: each item set with the handle's lifetime."""
            lifetime = self._arguments[8]
            base.update(self, ())  # refused as any update is, with no item too (closed...)
            for key, value in update_pairs(other, kwds):
                base.set(self, key, value, lifetime)

        def _commit_batch(self, changes, expires_at=0):
            """A batch's changes, each put expiring after the handle's lifetime from now."""
            base._commit_batch(
                self, changes, expires_at or _expiry.expires_at(self._arguments[8])
            )

    if shared:
        ExpiringSemiDBM.update = _in_turn(ExpiringSemiDBM.update)
    return ExpiringSemiDBM


#: What a db class's name says of a kernel other than the default one (``_class_name``).
_KERNEL_WORDS = {"cython": "Compiled", "python": "Pure"}


def _class_name(kernel_name, shared, synced, expiring=False):
    """The name of the db class of ``kernel_name``'s writers, shared or not, synced or not,
    with a default lifetime or not.

    ``SemiDBM`` for the default kernel's own, which most databases have;
    the others say how they differ from it: ``SharedSemiDBM`` (flag
    ``'wm'``), ``SyncedSemiDBM`` (dbm.gnu's ``s``), ``ExpiringSemiDBM``
    (``open(expire=)``), ``PureSemiDBM`` (the pure-Python kernel where the
    compiled one is the default)...
    """
    kernel_word = "" if kernel_name == implementation else _KERNEL_WORDS[kernel_name]
    return (("Expiring" if expiring else "") + ("Synced" if synced else "")
            + ("Shared" if shared else "") + kernel_word + "SemiDBM")


def _name(db_class, kernel_name, *, shared, synced, expiring=False):
    """Name ``db_class`` where users meet it: ``type(db)`` is ``semidbm.db.SemiDBM``...

    Not after the function that made it (``_plain_class.<locals>``):
    each name is this module's (``__getattr__``), so that the class is
    what its name says, and pickles by it.
    """
    db_class.__name__ = db_class.__qualname__ = _class_name(kernel_name, shared, synced,
                                                            expiring)
    db_class.__module__ = __name__


if not TYPE_CHECKING:  # names made at run time: type checkers see them as semidbm.Database

    def __getattr__(name):
        """The db class called ``name`` (``_class_name``), made at its first use; AttributeError
        for any other name, and for a class of a kernel that cannot be imported (the compiled
        one where it was not built), as ``hasattr`` and ``getattr`` with a default expect."""
        for kernel_name in _kernel.MODULES:
            for flag, synced, expiring in itertools.product(("w", "wm"), (False, True),
                                                            (False, True)):
                if _class_name(kernel_name, flag in SHARED_FLAGS, synced, expiring) == name:
                    try:
                        kernel = _kernel.load(kernel_name)
                    except ImportError as exc:
                        raise AttributeError(
                            "module %r has no attribute %r: %s" % (__name__, name, exc)
                        ) from exc
                    return _class_for(kernel, flag, synced, expiring)
        raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _parse_flag(flag):
    """``flag`` as ``(semidbm's own flag, whether every write is synced)``; else ValueError.

    dbm.gnu's letters after the first are taken, in any number and
    order, with the nearest meaning semidbm has (docs/dbm-and-shelve.md):

    - ``f`` (fast: writes not synced) is semidbm's default, buffered writes;
    - ``s`` (synchronized) syncs every write before it returns; a reader
      writes nothing to sync;
    - ``u`` (no lock: several writers at once) opens a shared writer
      (``'wu'`` is ``'wm'``, ``'cu'`` is ``'cm'``), which lets other
      processes write too, each in its turn; a reader takes no lock
      already; after ``'n'`` it is refused, since a shared writer never
      empties a database.
    """
    if flag in _FLAGS:
        return flag, False
    if not isinstance(flag, str) or len(flag) < 2 or flag[0] not in "rwcn":
        raise ValueError(_messages.BAD_OPEN_FLAG % (flag,))
    first, letters = flag[0], flag[1:]
    if not set(letters) <= _GNU_LETTERS:
        raise ValueError(_messages.BAD_OPEN_FLAG % (flag,))
    if first == "r":
        return first, False
    if "u" in letters:
        if first == "n":
            raise ValueError(_messages.NEW_UNLOCKED % (flag,))
        first += "m"
    return first, "s" in letters


def open(
    filename: StrOrBytesPath,
    flag: Flag | GnuFlag = "r",
    mode: int = 0o666,
    verify_checksums: bool = False,
    *,
    buffer_size: int = DEFAULT_BUFFER_SIZE,
    recover: bool = False,
    format: Literal[1, 2] | None = None,
    lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
    expire: float | None = None,
) -> Database:
    """Open the semidbm database ``filename`` (a directory) and return it.

    Args:
        filename: the database's directory, as str, bytes or a path-like
            object.
        flag: ``'r'``: an existing database, read only (the default);
            ``'w'``: an existing database, for reading and writing;
            ``'c'``: for reading and writing, created if missing;
            ``'n'``: a new, empty database, for reading and writing. An
            existing semidbm database at the path is emptied, and an
            empty file or directory there is replaced; anything else at
            the path is an error and left untouched. ``'r'`` and ``'w'``
            create nothing. ``'wm'`` and ``'cm'`` open a *shared
            writer*, as ``'w'`` and ``'c'`` do, except that any number of
            processes may hold the database so at once: each operation
            takes a lock for its turn (see ``lock_timeout``, and
            :doc:`/sharing`). dbm.gnu's letters may follow ``'r'``,
            ``'w'``, ``'c'`` or ``'n'``, in any number: ``f`` changes
            nothing (writes are buffered by default), ``s`` syncs every
            write before it returns, and ``u`` opens a shared writer
            (``'wu'`` is ``'wm'``; a reader takes no lock already; ``'nu'``
            is refused), as :doc:`/dbm-and-shelve` explains.
        mode: the data file's permissions, less the umask; the directory
            gets the same plus the search bit wherever a read bit is set
            (``0o640`` gives a ``0o750`` directory).
        verify_checksums: check each value's CRC-32 on every read. It
            may also be given as the fourth positional argument, as
            semidbm 0.5.1 took it.
        buffer_size: bytes of records collected in memory before they
            are written to the file (default 1 MiB, at most 1 GiB). :meth:`Database.sync`
            and :meth:`Database.close` write them out and fsync; a process
            killed before that loses them. ``0`` writes every record before
            the call returns (not fsynced), as semidbm 0.5.1 did.
        recover: open even if the data file ends in an unreadable tail,
            longer than one write buffer, that complete records follow
            (normally refused as damage inside the log). The tail is left
            out; a writer cuts it off and keeps its bytes in
            ``data.torn-OFFSET``. Tails as a killed writer leaves them
            are always handled so, with a :class:`TornTailWarning`.
        format: the major format of a database this call creates: ``1``
            (the default: 1.1, semidbm 0.5.1's, which it reads and
            writes) or ``2`` (2.0, which adds :meth:`Database.batch`;
            0.5.1 refuses to open it). Given for an existing database,
            it must be that database's (:attr:`Database.format_version`);
            :meth:`Database.compact` converts one.
        lock_timeout: for a shared writer, the seconds an operation waits
            for its turn before it raises :class:`semidbm.error`
            (``errno.ETIMEDOUT``, naming the process that holds it); the
            wait goes on while that process compacts. None waits for as
            long as it takes. The default is 10 seconds; other flags
            take no turns.
        expire: a default lifetime, in seconds (an int or a float,
            finite and above 0), for every value this handle writes:
            ``db[key] = value``, :meth:`~Database.update`,
            ``setdefault``, a :meth:`~Database.batch`'s writes and
            :meth:`~Database.set` without its own ``expire`` store the
            value as ``set(key, value, expire=expire)`` does
            (:doc:`/expiry`). It needs format 2.1: a database this call
            creates is of format 2 unless ``format`` is given; an
            existing one of an older format is refused
            (:class:`semidbm.error`, saying how to upgrade it). None (the
            default): values never expire unless :meth:`~Database.set`
            gives them a lifetime. Writers only.

    Returns:
        Database: the open database; close it, or use it in a ``with`` block.

    Raises:
        ValueError: a bad flag, buffer size or ``expire``, ``expire``
            for a reader or with ``format=1``; :exc:`TypeError` for an
            argument of the wrong type. Every argument is checked before
            the disk is touched.
        semidbm.error: the database is missing (``'r'``, ``'w'``), the
            path holds something else, another process has it open for
            writing, it is of another format than ``format``, or the
            operating system refused (with its ``errno``).
        semidbm.DBMLoadError: the data file is not a readable semidbm
            file: the message names the file and the offset of the damage.

    Each value read is checked against its CRC-32 with ``verify_checksums``:
    a mismatch raises :class:`DBMChecksumError`.

    >>> with semidbm.open("cache.db", "c") as db:
    ...     db[b"key"] = b"value"
    >>> with semidbm.open("cache.db") as db:
    ...     db[b"key"]
    b'value'
    """
    return open_with(
        _default_kernel,
        filename,
        flag,
        mode,
        verify_checksums=verify_checksums,
        buffer_size=buffer_size,
        recover=recover,
        format=format,
        lock_timeout=lock_timeout,
        expire=expire,
    )


def open_with(
    kernel: ModuleType,
    filename: StrOrBytesPath,
    flag: Flag | GnuFlag = "r",
    mode: int = 0o666,
    verify_checksums: bool = False,
    *,
    buffer_size: int = DEFAULT_BUFFER_SIZE,
    recover: bool = False,
    format: Literal[1, 2] | None = None,
    lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
    expire: float | None = None,
) -> Database:
    """Like :func:`open`, on the given kernel module (for tests and tools).

    ``kernel`` is as for :func:`database_class`.

    Every argument is checked before the disk is touched.
    """
    flag, synced = _parse_flag(flag)
    shared = flag in SHARED_FLAGS
    if shared and os.name == "nt":
        raise ValueError("shared writers ('wm', 'cm') need POSIX file locks (flock)")
    if lock_timeout is not DEFAULT_LOCK_TIMEOUT:
        lock_timeout = _check_timeout(lock_timeout)
    mode = operator.index(mode)
    buffer_size = operator.index(buffer_size)
    if not 0 <= buffer_size <= MAX_BUFFER_SIZE:
        raise ValueError(
            "buffer_size must be from 0 to %d (1 GiB), not %d" % (MAX_BUFFER_SIZE, buffer_size)
        )
    major = None if format is None else check_format(format)
    if expire is not None:
        if flag == "r":
            raise ValueError(_messages.EXPIRE_READER)
        if major is not None and major < BATCH_FORMAT:
            raise ValueError(_messages.EXPIRE_FORMAT % major)
        expire = _expiry.lifetime(expire)
    path = os.fsdecode(os.fspath(filename))
    database_type = _class_for(kernel, flag, synced, expire is not None)
    database = database_type.__new__(database_type)
    _open_into(
        database,
        kernel,
        (path, flag, mode, bool(verify_checksums), buffer_size, bool(recover), major,
         lock_timeout, expire),
    )
    return database


def _open_into(database, kernel, arguments):
    """Open the database that ``arguments`` name into ``database``, an instance of its class
    made by ``__new__`` alone (``open_with``) or by the kernel's ``_pending`` (``_reopen``).

    ``arguments`` holds ``open_with``'s, checked: ``(path, flag, mode, verify_checksums,
    buffer_size, recover, format, lock_timeout, expire)``, a plain tuple (every open makes one),
    which a pickled handle holds too.
    """
    path, flag, mode, verify_checksums, buffer_size, recover, format, lock_timeout, expire = (
        arguments
    )
    shared = flag in SHARED_FLAGS
    if format is not None:
        major = format
    else:
        major = DEFAULT_FORMAT if expire is None else BATCH_FORMAT
    directory, lock, created = _prepare(path, flag, mode, major, lock_timeout)
    writable = flag != "r"
    try:
        if format is not None:
            _check_format(directory, format)
        if expire is not None and not created:
            _check_expirable(directory)
        kernel.Store.__init__(
            database,
            directory,
            writable,
            buffer_size,
            verify_checksums,
            recover,
            None if writable else functools.partial(_lock.writer_active, path),
        )
    except BaseException as exc:
        directory.close()
        if created:  # while the lock keeps anyone else from joining it
            _remove_new_database(path)
        if lock is not None:
            if shared:
                lock.leave(None, 1)
            lock.release()
        # A writer that could not cut the torn tail it found: say what it found.
        _warn_of_torn_tail(directory.data_path, getattr(exc, "torn_tail", None))
        raise
    if shared:
        lock.leave(None, 1)  # the turn in which it was opened: nothing is buffered yet
    database._lock = lock
    database._cursor = None
    # A pickled handle opens the same database from any working directory.
    database._arguments = (
        arguments if path.startswith(os.sep) else (os.path.abspath(path),) + arguments[1:]
    )
    try:
        _warn_of_torn_tail(database.path, database.torn_tail)
    except BaseException:  # a filter that turns warnings into errors
        database.close()
        raise
    if writable:
        _open_writers[id(database)] = database


def _reopen(kernel_name, *arguments):
    """Unpickle a database (``SemiDBM.__reduce__``): a handle that opens at its first use.

    ``kernel_name`` names its kernel (``_kernel.MODULES``); ``arguments``
    are ``_open_into``'s. Opening waits for the first operation, so
    that unpickling never fails on the disk's account: an error (the
    database gone, a writer's lock refused) comes from that operation,
    where the code that uses the database can handle it.
    """
    return _pending(kernel_name, arguments, False)


def _reopen_synced(kernel_name, *arguments):
    """:func:`_reopen` of a writer that syncs every write (dbm.gnu's ``s``; ``_synced_class``)."""
    return _pending(kernel_name, arguments, True)


def _pending(kernel_name, arguments, synced):
    """The handle that :func:`_reopen` returns, of the class ``synced`` and its default lifetime
    (``expire``, the last of ``arguments``) ask for."""
    kernel = _kernel.load(kernel_name)
    # A handle pickled by a semidbm from before open(expire=) has no lifetime.
    arguments = tuple(arguments) + (None,) * (9 - len(arguments))
    path, flag = arguments[:2]
    database_type = _class_for(kernel, flag, synced, arguments[8] is not None)
    mutex = threading.Lock()
    opened = False

    def open_pending(store):
        nonlocal opened
        with mutex:
            if not opened:
                _open_into(store, kernel, arguments)
                opened = True

    database = database_type._pending(  # type: ignore[attr-defined]
        os.path.join(path, DATA_NAME), flag != "r", open_pending
    )
    database._lock = database._cursor = None
    database._arguments = arguments
    return database


def _check_timeout(timeout):
    """``lock_timeout`` as a float of seconds, or None; TypeError or ValueError if it is neither."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError("lock_timeout must be a number of seconds or None, not %s"
                        % type(timeout).__name__)
    if not timeout >= 0:  # NaN too
        raise ValueError("lock_timeout must be 0 or more seconds, not %r" % (timeout,))
    return float(timeout)


def _warn_of_torn_tail(data_path, torn_tail):
    """Warn that opening left out the torn tail ``(offset, length)``, unless it is None.

    The warning points at the first caller outside semidbm: the code that
    called :func:`open`, :func:`open_with`, ``open_shelf`` or a tool.
    """
    if torn_tail is None:
        return
    offset, length = torn_tail
    frame, level = sys._getframe(), 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == __package__:
        frame, level = frame.f_back, level + 1
    message = _messages.TORN_TAIL % (data_path, length, offset)
    warnings.warn(message, TornTailWarning, stacklevel=level)


def data_file(filename: StrOrBytesPath) -> str:
    """Return the path of the data file of the semidbm database ``filename``, checking it is one.

    For tools that read the file themselves (``semidbm stats``,
    ``verify``): the same checks as opening it read-only, and nothing is
    changed. Raises :class:`semidbm.error` if there is no such database.
    """
    directory, _, _ = _prepare(os.fsdecode(os.fspath(filename)), "r", 0, DEFAULT_FORMAT, None)
    directory.close()
    return directory.data_path


def _prepare(path, flag, mode, major, timeout):
    """Check or create the database directory as ``flag`` asks (a new one of format ``major``).

    Returns the directory (a ``_files.Directory``, open), for a writer its
    lock, taken before anything in the directory is changed, and whether
    this call created the database (and may remove it if opening fails
    later). A shared writer's lock (``timeout``: its ``lock_timeout``) is
    returned in a turn, which the caller ends once the store is open: the
    checks, the tidying and the store's first reading of the log happen
    while no other writer writes. The operating system's errors come as
    DBMError.
    """
    try:
        return _prepare_or_fail(path, flag, mode, major, timeout)
    except DBMError:
        raise
    except OSError as exc:
        raise _files.os_error(exc, "cannot open semidbm database") from None


#: How many times a shared writer looks again at a path that other processes change
#: under it while it opens (each creating the database, or replacing an empty file).
_CREATION_TRIES = 10


def _prepare_or_fail(path, flag, mode, major, timeout):
    """``_prepare``, with the operating system's errors as they come."""
    shared = flag in SHARED_FLAGS
    for tries_left in range(_CREATION_TRIES - 1, -1, -1):
        try:
            info = os.stat(path)
        except FileNotFoundError:
            if flag[0] in "rw":
                raise DBMError(errno.ENOENT, "no semidbm database", path) from None
            info = None
        try:
            if info is None:
                return _create_database(path, mode, major, shared, timeout)
            if stat.S_ISREG(info.st_mode) and info.st_size == 0 and flag[0] in "cn":
                os.remove(path)
                return _create_database(path, mode, major, shared, timeout)
        except (FileExistsError, FileNotFoundError, IsADirectoryError):
            # Another process made the database meanwhile, or removed the empty file
            # first: look again (a shared writer joins it; another writer then finds
            # it locked, or opens it).
            if not tries_left:
                raise
            continue
        break
    if not stat.S_ISDIR(info.st_mode):
        raise DBMError("not a semidbm database (not a directory): %r" % path)
    directory = _files.Directory(path)
    try:
        return _check_database(directory, flag, mode, major, timeout) + (False,)
    except BaseException:
        directory.close()
        raise


def _check_database(directory, flag, mode, major, timeout):
    """``_prepare`` for an existing directory: check it, lock it for a writer, tidy it.

    Returns the directory and the lock (None for a reader). A shared
    writer checks the directory again in its turn: another may have
    created the data file, or compacted, since the first look.
    """
    _check_directory(directory, flag)
    if flag == "r":
        return directory, None
    _refuse_writer_here(directory)
    if flag in SHARED_FLAGS:
        lock = _lock.SharedLock(directory.path, mode, timeout)
        try:
            lock.enter()
        except BaseException:
            lock.release()
            raise
    else:
        lock = _lock.WriterLock(directory.path, mode)
    try:
        if flag in SHARED_FLAGS:
            _check_directory(directory, flag)
        _remove_leftovers(directory)
        if not directory.exists(DATA_NAME) or flag == "n":
            # 'n': no index file outlives the log it describes (docs/FORMAT.md, "Writing an
            # index file").
            _index_file.remove(directory)
            _create_data_file(directory, mode, major)
    except BaseException:
        if flag in SHARED_FLAGS:
            lock.leave(None, 1)
        lock.release()
        raise
    return directory, lock


def _refuse_writer_here(directory):
    """Raise DBMError if this process has ``directory``'s database open as an exclusive writer.

    The lock would refuse the new writer all the same, naming the process
    that holds it: this one. Said here instead, so that the message tells
    a user who opened the database twice in one program what to do.
    """
    try:
        info = os.stat(directory.path)
    except OSError:
        return  # the lock's own refusal, or its error, then says what it finds
    # valuerefs(): a list made at once, which another thread's open or close cannot change
    # while it is gone over.
    for reference in _open_writers.valuerefs():
        database = reference()
        if database is None or database._arguments[1] in SHARED_FLAGS:
            continue  # collected; or shared writers, which the lock names as such
        try:
            same = os.path.samestat(info, os.stat(os.path.dirname(database.path)))
        except OSError:  # its directory gone or moved: not this one
            continue
        if same and not database.closed:
            raise DBMError(errno.EAGAIN, _messages.LOCKED_HERE, directory.path)


def _check_directory(directory, flag):
    """Raise DBMError unless ``directory`` holds a database that ``flag`` may open.

    A directory with no data file may be a creation cut short (``'c'``
    and ``'n'`` then make the data file).
    """
    try:
        data_info = directory.stat(DATA_NAME)
    except FileNotFoundError:
        names = set(directory.listdir())
        if DATA_NAME not in names:  # else made since, by a writer creating the database
            # The locks and a data.compact are what a creation killed before its rename leaves.
            if flag[0] in "rw" or not names <= {LOCK_NAME, WRITE_LOCK_NAME, COMPACT_NAME}:
                raise DBMError(
                    "not a semidbm database (no data file): %r" % directory.path
                ) from None
            return
        data_info = directory.stat(DATA_NAME)
    if not stat.S_ISREG(data_info.st_mode):
        raise DBMError("not a semidbm database (data is not a file): %r" % directory.data_path)
    if flag == "n" and not _starts_like_semidbm(directory):
        raise DBMError(
            "not a semidbm database (its data file has no semidbm header), "
            "refusing to replace it: %r" % directory.data_path
        )


def _starts_like_semidbm(directory):
    """True if the data file begins with the magic number (or a part of it, if shorter)."""
    return MAGIC.startswith(_data_file_start(directory, len(MAGIC)))


def _check_expirable(directory):
    """Raise DBMError unless the data file's format has values that expire (2.1; ``open(expire=)``).

    Read from its header before the store opens it, as :func:`_check_format` does.
    """
    version = _data_file_version(directory)
    if version < EXPIRY_VERSION:
        raise DBMError(_messages.NO_EXPIRY % ((directory.data_path,) + version))


def _check_format(directory, major):
    """Raise DBMError unless the data file is of the major format ``major`` (``open(format=)``).

    Read from its header before the store opens it, so that a refusal
    changes nothing (a writer's open would cut a torn tail first). A
    header that is not a data file's is DBMLoadError, as the open's.
    """
    version = _data_file_version(directory)
    if version[0] != major:
        raise DBMError(_messages.OTHER_FORMAT % ((directory.data_path,) + version + (major,)))


def _data_file_version(directory):
    """The data file's format version, ``(major, minor)``, from its header (DBMLoadError if it
    is not a data file's header)."""
    return check_header(_data_file_start(directory, HEADER_SIZE), directory.data_path)


def _data_file_start(directory, size):
    """The first ``size`` bytes of the data file (fewer if it is shorter)."""
    fd = directory.open(DATA_NAME, os.O_RDONLY | _files.BINARY)
    try:
        return _files.read_at(fd, size, 0)
    finally:
        os.close(fd)


def _remove_leftovers(directory):
    """Remove what a crashed compaction or index file write left, ours or 0.5.1's ``compact/``.

    Such a file is never read: a compaction's may hold keys deleted
    since, and an index file being written may be incomplete.
    """
    for name in (COMPACT_NAME, INDEX_TEMP_NAME):
        if directory.exists(name) and stat.S_ISREG(directory.stat(name).st_mode):
            directory.remove(name)
    old_directory = os.path.join(directory.path, "compact")
    if os.path.isdir(old_directory) and os.listdir(old_directory) in ([], [DATA_NAME]):
        old_data = os.path.join(old_directory, DATA_NAME)
        if os.path.isfile(old_data):
            os.remove(old_data)
        os.rmdir(old_directory)


def _create_database(path, mode, major, shared, timeout):
    """Make the directory for a new database, lock it and write its data file.

    Returns what ``_prepare`` does. The parent directory is flushed
    last: the fsyncs of the data file and of the new directory have by
    then committed its new entry on most filesystems, so this one is
    cheap (one journal commit fewer than flushing it first), and no state
    a crash can leave in between is new (``_prepare`` handles each).

    Between the new directory and its lock, shared writers (``'cm'``)
    may join it and write: a data file found once locked is theirs, and
    is kept (the database is not this call's). If a step fails, what this
    call made is removed while it still holds the exclusive lock, which
    keeps anyone else out; a shared writer removes nothing (others may
    have joined it at once: it stays a creation cut short, which the
    next opening completes), and neither does a writer refused because
    others hold the lock, but the directory if it is still empty.
    """
    os.mkdir(path, mode | ((mode & 0o444) >> 2))
    directory = lock = None
    ours = False  # the data file is this call's, and no one else has joined
    entered = False  # a shared writer's turn
    try:
        directory = _files.Directory(path)
        if shared:
            lock = _lock.SharedLock(path, mode, timeout)
            entered = bool(lock.enter())
        else:
            lock = _lock.WriterLock(path, mode)
        if not directory.exists(DATA_NAME):
            ours = not shared
            _create_data_file(directory, mode, major)
        _files.fsync_directory(os.path.dirname(os.path.abspath(path)))
    except BaseException:
        if ours:
            _remove_new_database(path)
        elif lock is None:
            _remove_empty_directory(path)  # failed before any lock: it may hold nothing
        if entered:
            lock.leave(None, 1)
        if lock is not None:
            lock.release()
        if directory is not None:
            directory.close()
        raise
    return directory, lock, ours


def _remove_new_database(path):
    """Remove a database this process has just created, after a later step failed.

    Only the files a creation and its writer make are removed, and the
    directory only if that leaves it empty; nothing else is ever deleted.
    Errors are ignored: the failure being reported matters more.
    """
    for name in (DATA_NAME, COMPACT_NAME, INDEX_NAME, INDEX_TEMP_NAME, LOCK_NAME, WRITE_LOCK_NAME):
        try:
            os.remove(os.path.join(path, name))
        except OSError:
            pass
    _remove_empty_directory(path)


def _remove_empty_directory(path):
    """Remove the directory ``path`` if it is empty (if not, or on any error, leave it)."""
    try:
        os.rmdir(path)
    except OSError:
        pass


def _create_data_file(directory, mode, major):
    """Write an empty data file (the header of format ``major`` and a checkpoint) into
    ``directory``, atomically."""
    directory.create_file(COMPACT_NAME, _checkpoint.new_log(major), mode)
    directory.replace(COMPACT_NAME, DATA_NAME)
    directory.fsync()
