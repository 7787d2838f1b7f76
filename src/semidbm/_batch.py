"""Atomic batches: writes and deletes that reach the file all or nothing (``Database.batch``).

A :class:`Batch` collects changes in memory; :meth:`Batch.commit` (or
leaving its ``with`` block without an exception) writes them as one
batch record, which every reader, after a crash or a power cut too,
finds whole or not at all (docs/FORMAT.md, "Batches");
:meth:`Batch.rollback` (or an exception out of the block) discards them.
The kernel writes the record (``_interface.Store._commit_batch``); what
a batch holds and checks as it is filled is written here once, for both.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping

from . import _messages
from ._records import EXPIRY_OVERHEAD, as_bytes, as_pair
from .errors import DBMError, DBMNotSyncedError
from .format import EMPTY_RECORD_SIZE, MAX_LENGTH

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Self

    from ._types import BatchTarget, Data

#: The bytes of records one batch holds: the body of a batch record, as long as a value may be.
CAPACITY = MAX_LENGTH

#: How a batch ended (``Batch._ended``), as its messages say it.
COMMITTED = "committed"
ROLLED_BACK = "rolled back"
COMMIT_FAILED = "its commit failed"
NOT_SYNCED = "committed, not synced"


class Batch:
    """Changes to a database that reach its file together: all of them, or none.

    Made by :meth:`semidbm.Database.batch`. Set and delete keys on it as
    on the database; they are kept in memory, and reach the database
    (and its readers) together when :meth:`commit` is called, or when
    the ``with`` block ends without an exception. :meth:`rollback`, or
    an exception out of the block, discards them. Reading the database
    meanwhile shows it as it was before the batch. A batch ends once:
    after its commit or rollback, changing it or committing it again
    raises :class:`semidbm.error`. A batch with changes that is garbage
    collected before it ends is discarded with a :class:`ResourceWarning`.
    """

    __slots__ = ("_database", "_changes", "_size", "_ended", "_expiring")

    def __init__(self, database: BatchTarget) -> None:
        self._database = database
        #: Whether each put gets an expiry record too (the database's handle has a lifetime).
        self._expiring = database.expire is not None
        #: The last change of each key: its new value, or None for a delete.
        self._changes: dict[bytes, bytes | None] = {}
        #: The bytes of the records the changes make (at most CAPACITY).
        self._size = 0
        #: None while the batch takes changes; then how it ended (COMMITTED, ...).
        self._ended: str | None = None

    def __setitem__(self, key: Data, value: Data) -> None:
        """Set ``key`` to ``value`` when the batch commits (str as UTF-8, as the database)."""
        self._check_open()
        self._change(as_bytes(key, "keys"), as_bytes(value, "values"))

    def __delitem__(self, key: Data) -> None:
        """Delete ``key`` when the batch commits.

        Raises:
            KeyError: the key is neither in the database nor set by the
                batch, or the batch deletes it already.
        """
        self._check_open()
        stored = as_bytes(key, "keys")
        if stored in self._changes:
            present = self._changes[stored] is not None
        else:
            present = stored in self._database
        if not present:
            raise KeyError(key)
        self._change(stored, None)

    def update(
        self, other: Mapping[Data, Data] | Iterable[tuple[Data, Data]] = (), /, **kwds: Data
    ) -> None:
        """Set every key of ``other`` and of ``kwds``, as the database's ``update`` takes them.

        ``other`` is a dict, an object with ``keys()`` (each key is then
        looked up in it), or an iterable of ``(key, value)`` pairs.
        """
        for key, value in update_pairs(other, kwds):
            self[key] = value

    def __len__(self) -> int:
        """The number of keys the batch changes."""
        return len(self._changes)

    def _change(self, key: bytes, value: bytes | None) -> None:
        """Record ``key``'s last change; ValueError if the batch would outgrow its record."""
        size = self._size + _record_size(key, value, self._expiring)
        if key in self._changes:
            size -= _record_size(key, self._changes[key], self._expiring)
        if size > CAPACITY:
            raise ValueError(_messages.BATCH_TOO_LONG % CAPACITY)
        self._changes[key] = value
        self._size = size

    def _room(self) -> int:
        """The bytes of records the batch can still take (``migrate`` refuses a dump up front)."""
        return CAPACITY - self._size

    def commit(self) -> None:
        """Write the changes to the database, as one record, and end the batch.

        The changes reach the database and its readers together; like
        other writes, they are durable after :meth:`semidbm.Database.sync`
        or :meth:`~semidbm.Database.close`. A batch without changes
        writes nothing, but is refused as one with changes would be (a
        closed or read-only database). If the commit raises (the database
        closed, a full disk), the batch ends all the same: the database
        has all of its changes or none, never part, and none unless the
        error is :class:`semidbm.DBMNotSyncedError`: the sync after the
        append failed (a database opened with the flag letter ``s``),
        the changes are in the database, and the batch ends as
        committed, not synced.

        Raises:
            semidbm.error: the batch has ended already (committed, or
                rolled back): a batch commits once.
        """
        self._check_open()
        changes, self._changes, self._ended = self._changes, {}, COMMIT_FAILED
        try:
            self._database._commit_batch(changes)
        except DBMNotSyncedError:
            self._ended = NOT_SYNCED
            raise
        self._ended = COMMITTED

    def rollback(self) -> None:
        """Discard the changes and end the batch; the database is left as it was.

        Rolling back a batch that has ended without a commit (rolled back
        already, or its commit failed) does nothing, so that cleanup code
        may call it whatever happened before.

        Raises:
            semidbm.error: the batch was committed (its sync failing or
                not): its changes are in the database, where a rollback
                cannot reach them.
        """
        if self._ended in (COMMITTED, NOT_SYNCED):
            raise DBMError(_messages.BATCH_COMMITTED)
        if self._ended is None:
            self._changes, self._ended = {}, ROLLED_BACK

    def _check_open(self) -> None:
        """Raise :class:`semidbm.error`, saying how, if the batch has ended."""
        if self._ended is not None:
            raise DBMError(_messages.BATCH_OVER % self._ended)

    def __enter__(self) -> Self:
        self._check_open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Commit the changes, unless the block raised: then roll them back.

        A batch the block ended already (its :meth:`commit` or
        :meth:`rollback` called inside it) is left as it is.
        """
        if self._ended is None:
            if exc_type is None:
                self.commit()
            else:
                self.rollback()

    def __del__(self) -> None:
        """Warn, as an unclosed file does, that the changes of a batch never ended are lost.

        Only the warning: the database is not touched here, since the
        collector may run this in any thread, or at exit. It points at
        the code that dropped the last reference.
        """
        if self._ended is None and self._changes:
            message = _messages.BATCH_UNENDED % len(self._changes)
            warnings.warn(message, ResourceWarning, stacklevel=2, source=self)


def update_pairs(
    other: Mapping[Data, Data] | Iterable[tuple[Data, Data]], kwds: Mapping[str, Data]
) -> Iterator[tuple[Data, Data]]:
    """The ``(key, value)`` pairs of ``update(other, **kwds)``, as the kernels' ``update`` takes
    them: a dict's items; the keys of an object with ``keys()``, each looked up in it (a
    database's, whose ``items()`` list values that expired); or else the items of ``other``,
    each a pair (``_records.as_pair``: TypeError or ValueError naming its number); then the
    items of ``kwds``."""
    if type(other) is dict:
        yield from other.items()
    elif hasattr(other, "keys"):
        for key in other.keys():
            yield key, other[key]  # type: ignore[index]
    else:
        for number, item in enumerate(other):
            yield as_pair(item, number)
    yield from kwds.items()


def _record_size(key: bytes, value: bytes | None, expiring: bool) -> int:
    """The bytes of the records of a change (``value`` None: a delete): a put's expiry record
    too if ``expiring``."""
    if value is None:
        return EMPTY_RECORD_SIZE + len(key)
    size = EMPTY_RECORD_SIZE + len(key) + len(value)
    return size + EXPIRY_OVERHEAD + len(key) if expiring else size
