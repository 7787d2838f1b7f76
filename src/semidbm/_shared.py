"""Shared writers: several processes writing one database, each operation in its turn.

A database opened with the flag ``'wm'`` or ``'cm'`` is a shared writer
(docs/sharing.md). Its class is its kernel's db class with every
operation that writes wrapped in a turn of its ``_lock.SharedLock``: the
turn begins by taking ``lock.write`` and catching up with what the other
writers appended (``Store._follow``), and ends by writing what it
buffered to the file (``Store._publish``) before unlocking, so that no
buffered write outlives its turn. Reads take no turn: they answer from
the state of the last turn or :meth:`~semidbm.Database.refresh`.

The compiled kernel runs a single put or delete, and a bulk call
(``update``, ``delete_many``), whole in C, turn and all, when nothing
unusual happens (``_core_pieces/turns.pxi``); else
the operation takes its turn here, as every operation of the pure
kernel does.
"""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING, Any, Callable

from . import _messages
from ._batch import Batch
from .errors import DBMError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._database import Database

#: The flags of a shared writer: an existing database, or one created if missing.
SHARED_FLAGS = ("wm", "cm")

#: What a shared writer does in a turn: the operations that write, and
#: those that must see every writer's latest state (``refresh``), or act
#: on it at once (the read-then-write mixins of ``MutableMapping``).
_IN_TURN = (
    "__setitem__",
    "__delitem__",
    "update",
    "delete_many",
    "_commit_batch",
    "_commit_encoded",
    "sync",
    "compact",
    "refresh",
    "pop",
    "popitem",
    "setdefault",
    "clear",
)

#: The bulk operations a kernel may run whole, turn and all, in C: for
#: each, the kernel Store's method that does (the compiled kernel's), and
#: the name under which the shared class keeps the operation in a turn
#: taken in Python, which that method falls back on.
_TURN_IN_KERNEL = {
    "update": ("_shared_update", "_update_in_turn"),
    "delete_many": ("_shared_delete_many", "_delete_many_in_turn"),
}

#: Item assignment and deletion, which a kernel may run whole in C from
#: its own slots (no method of the class between ``db[key] = value`` and
#: the kernel) where the class says ``_turns_in_kernel``: for each, the
#: kernel Store's method that does the operation without a turn in C, and
#: the name under which the shared class keeps that method in a turn
#: taken in Python, which the slot falls back on.
_ITEM_TURNS_IN_KERNEL = {
    "__setitem__": ("_put", "_put_in_turn"),
    "__delitem__": ("_delete", "_delete_in_turn"),
}


#: The operations that may replace the data file (with a compacted one): their turn
#: counts the replacement first (``SharedLock.count_replacement``).
_REPLACE_DATA = ("compact",)


def _in_turn(method: Callable[..., Any], replaces: bool = False) -> Callable[..., Any]:
    """``method`` run in a turn of the database's shared lock.

    Without the lock (closed, or in a forked child) it runs as it is,
    and raises what the kernel raises for such a database. A method
    that ``replaces`` the data file counts that in the turn first.
    """

    @functools.wraps(method)
    def in_turn(self: Any, *args: Any, **kwds: Any) -> Any:
        lock = self._lock or self._open_lock()
        depth = 0 if lock is None else lock.enter(self._follow_and_warn)
        if not depth:
            return method(self, *args, **kwds)
        try:
            if replaces:
                lock.count_replacement()
            return method(self, *args, **kwds)
        finally:
            lock.leave(self, depth)

    return in_turn


class TurnBatch(Batch):
    """A shared writer's batch: one turn from ``__enter__`` to ``__exit__``.

    Reading the database inside the ``with`` block shows every writer's
    latest state (the turn began by catching up), and no other writer
    changes it before the batch commits: a read-modify-write across
    processes.
    """

    __slots__ = ("_turn",)

    def __init__(self, database: Any) -> None:
        super().__init__(database)
        self._turn = 0  # the depth of its turn, once entered

    def __enter__(self) -> TurnBatch:
        super().__enter__()
        database = self._database
        lock = database._lock  # type: ignore[attr-defined]
        if not self._turn and lock is not None:
            self._turn = lock.enter(database._follow_and_warn)  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc_info: Any) -> None:
        """Commit (unless the block raised), then end the turn."""
        try:
            super().__exit__(*exc_info)
        finally:
            if self._turn:
                depth, self._turn = self._turn, 0
                database = self._database
                database._lock.leave(database, depth)  # type: ignore[attr-defined]


def shared_class(
    base: type[Database], warn_of_torn_tail: Callable[[str, Any], None]
) -> type[Database]:
    """The shared writer's class on ``base``, a kernel's db class (``db.database_class``).

    ``warn_of_torn_tail(path, torn_tail)`` warns of a torn tail that a
    turn cut (left by a writer that died in its turn).
    """
    members: dict[str, Any] = {
        name: _in_turn(getattr(base, name), name in _REPLACE_DATA) for name in _IN_TURN
    }
    for name, (in_kernel, in_python) in _TURN_IN_KERNEL.items():
        if hasattr(base, in_kernel):
            members[in_python] = members[name]
            members[name] = getattr(base, in_kernel)
    if all(hasattr(base, plain) for plain, _ in _ITEM_TURNS_IN_KERNEL.values()):
        members["_turns_in_kernel"] = True
        for name, (plain, in_python) in _ITEM_TURNS_IN_KERNEL.items():
            members[in_python] = _in_turn(getattr(base, plain))
            del members[name]  # the kernel's slot, inherited, takes the turn

    def _open_lock(self: Any) -> Any:
        """The lock of a handle unpickled here, opened now (``Store._open_pending``); else None.

        A turn needs the lock before the operation runs: the operation
        would otherwise open the handle, and write, outside any turn.
        """
        self._open_pending()
        return self._lock

    def _follow_and_warn(self: Any) -> None:
        """Catch up at the start of a turn (``Store._follow``); warn of a torn tail it cut."""
        warn_of_torn_tail(self.path, self._follow())

    def close(self: Any, compact: bool = False) -> None:
        """:meth:`semidbm.Database.close`, in a turn: the last write-out may append a checkpoint.

        If the turn cannot be had (its wait timed out, or the catch-up
        failed: the data file gone), the database is closed all the same,
        without writing (every turn has written its records already; the
        last fsync and index file are what is not done), and the error
        is raised.
        """
        lock = self._lock
        if lock is None or self.closed:
            base.close(self, compact)  # type: ignore[call-arg]
            return
        try:
            depth = lock.enter(self._follow_and_warn)
        except BaseException:
            # The locks let go of now, or by another thread of this process in a turn of
            # this lock as it ends it; the database read-only, so closing writes nothing.
            self._lock = None
            lock.abandon()
            self._disown()
            base.close(self)  # type: ignore[call-arg]
            raise
        if not depth:
            base.close(self, compact)  # type: ignore[call-arg]
            return
        try:
            base.close(self, compact)  # type: ignore[call-arg]
        finally:
            lock.leave(None, depth)

    @contextlib.contextmanager
    def locked(self: Any) -> Iterator[Any]:
        """:meth:`semidbm.Database.locked`: one turn for the whole block."""
        lock = self._lock or self._open_lock()
        depth = 0 if lock is None else lock.enter(self._follow_and_warn)
        if not depth:
            raise DBMError(_messages.CLOSED % self.path)
        try:
            yield self
        finally:
            lock.leave(self, depth)

    members.update(
        __slots__=(),
        __doc__=base.__doc__,
        __module__=base.__module__,
        _follow_and_warn=_follow_and_warn,
        _open_lock=_open_lock,
        close=close,
        locked=locked,
        _batch_type=TurnBatch,
    )
    return type(base.__name__, (base,), members)
