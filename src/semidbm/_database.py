"""The public type of the database object, ``semidbm.Database``, and the dbm methods it adds.

:func:`semidbm.open` returns an instance of a class made at run time on
the kernel in use (``db.database_class``): the kernel's ``Store`` first,
for item access at its speed, then :class:`Database`. So ``Database``
is what users name in type hints and ``isinstance`` checks, whichever
kernel runs, and what the API reference documents. Its abstract members
are the kernel's (``_interface.Store`` says how a kernel provides them);
the rest of the dbm interface is written here once, on top of them.
Names that only annotations use are imported for the type checker
alone: the annotations stay strings at run time (valid on Python 3.9).
"""

from __future__ import annotations

import os
from abc import abstractmethod
from collections.abc import MutableMapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Iterator, TypeVar, overload

from . import _expiry, _messages, _order
from ._batch import Batch
from ._records import as_bytes, encode_expiring
from .errors import DBMError
from .format import BATCH_FORMAT, EXPIRY_VERSION

if TYPE_CHECKING:
    from _typeshed import SupportsKeysAndGetItem
    from typing_extensions import Self

    from ._types import Data

    _T = TypeVar("_T")
    #: The type of a mapping's keys, for ``update`` (a mapping's key type is invariant).
    _Key = TypeVar("_Key", bound=Data)


class Database(MutableMapping):  # type: ignore[type-arg]
    """An open semidbm database: a mutable mapping of bytes keys to bytes values.

    Made by :func:`semidbm.open`, never directly. It behaves as the
    standard library's dbm objects do: ``db[key]``, ``db[key] = value``,
    ``del db[key]``, ``key in db``, ``len(db)``, iteration over the keys,
    and the methods of :class:`collections.abc.MutableMapping` (``get``,
    ``setdefault``, ``pop``, ``popitem``, ``update``). Keys and values
    may be given as ``str`` (stored as UTF-8) or any bytes-like object
    (``bytes``, ``bytearray``, ``memoryview``, ``array``); they come back
    as ``bytes``. Another type is a :exc:`TypeError` that names it, and a
    key or value of 2 GiB or more (the format's lengths are signed 32-bit)
    a :exc:`ValueError`. A missing key is a :exc:`KeyError` and writes
    nothing.

    Writes collect in a buffer; :meth:`sync` and :meth:`close` write it
    to the file and flush it to disk. Each operation is atomic for
    threads sharing the database. After :meth:`close`, every operation
    raises :class:`semidbm.error`, and so does a write to a database
    opened read-only. Iteration order, and so which item ``popitem()``
    removes, is arbitrary and differs between the kernels. A database
    cannot be copied (:exc:`TypeError`): it is an open file; open it
    again instead. A reader and a shared writer pickle, as what opens
    them again where they are unpickled; an exclusive writer does not
    (:doc:`/sharing`).

    The members marked abstract are those of the storage kernel: every
    database that :func:`semidbm.open` returns has them. Use this class
    in type hints, and to recognise a database:

    >>> db = semidbm.open("example.db", "c")
    >>> isinstance(db, semidbm.Database)
    True
    >>> db["key"] = "value"
    >>> db[b"key"]
    b'value'
    >>> db.close()
    """

    __slots__ = ()

    # --- provided by the kernel's Store ---------------------------------------

    @property
    @abstractmethod
    def path(self) -> str:
        """The path of the database's data file (``DIRECTORY/data``)."""

    @property
    @abstractmethod
    def writable(self) -> bool:
        """True if the database was opened for writing (flags ``'w'``, ``'c'``, ``'n'``).

        It becomes False in a child process made by :func:`os.fork`:
        the child may read what it inherited but never writes the parent's
        database.
        """

    @property
    @abstractmethod
    def closed(self) -> bool:
        """True once the database is closed.

        Also True after a :meth:`refresh` that found the file corrupt or
        cut short: nothing the reader indexed can be trusted then.
        """

    @property
    @abstractmethod
    def torn_tail(self) -> tuple[int, int] | None:
        """The torn tail that opening left out, as ``(offset, length)``; None if there was none.

        A process killed in the middle of a write leaves an incomplete
        last record; opening leaves it out and warns
        (:class:`semidbm.TornTailWarning`).
        """

    @property
    @abstractmethod
    def index_covered(self) -> int:
        """How many bytes of the log the shared index file answered for at open; 0 if none.

        0 means the whole log was replayed into memory: always so with
        the pure-Python kernel, which does not use the index file.
        """

    @property
    @abstractmethod
    def format_version(self) -> tuple[int, int]:
        """The data file's format version, ``(major, minor)``: ``(1, 1)``, ``(2, 0)`` or ``(2, 1)``.

        1.1 is semidbm 0.5.1's format, which every database has unless
        asked otherwise; 2.0 adds :meth:`batch`, and 2.1, which format 2
        databases are created and compacted as, values that expire
        (:meth:`set`; see ``format`` in :func:`semidbm.open` and :meth:`compact`).
        """

    @property
    def expire(self) -> float | None:
        """The default lifetime, in seconds, of the values this handle writes, or None.

        ``semidbm.open(path, flag, expire=seconds)`` sets it: every value
        written without a lifetime of its own (``db[key] = value``,
        :meth:`update`, ``setdefault``, a :meth:`batch`'s writes,
        :meth:`set` without ``expire``) expires that many seconds after
        it is written (:doc:`/expiry`). None: such values never expire.
        """
        return None

    @abstractmethod
    def __getitem__(self, key: Data, /) -> bytes:
        """Return the value of ``key``.

        Raises:
            KeyError: ``key`` is not in the database.
            semidbm.DBMChecksumError: with ``verify_checksums``, the
                value's CRC-32 does not match.
        """

    @abstractmethod
    def view(self, key: Data) -> memoryview:
        """Return a read-only :class:`memoryview` of the value of ``key``, without copying it.

        With the compiled kernel the view points into the memory map of
        the data file: making it costs the same whatever the value's
        size, and only the bytes the caller touches are read from the
        file. It stays valid, and shows the same bytes, for as long as it
        is held: later writes (the key's too), :meth:`compact`,
        :meth:`refresh` and :meth:`close` leave it as it is, since it
        keeps the map it points into, and with it the file, until it is
        released (:meth:`memoryview.release`, or the last reference
        dropped). Until then a compacted-away or replaced data file keeps
        its disk space. A value written since the last flush of the
        append buffer is not in the file yet: its view is of a copy, as
        is every view with the pure-Python kernel. See
        :doc:`/views`.

        Args:
            key: the key, as ``str`` (UTF-8) or a bytes-like object, as
                for ``db[key]``.

        Returns:
            memoryview: the value's bytes, read-only (format ``"B"``);
            ``bytes(view)`` copies them.

        Raises:
            KeyError: ``key`` is not in the database.
            TypeError: ``key`` is of another type.
            semidbm.error: the database is closed.
            semidbm.DBMChecksumError: with ``verify_checksums``, the
                value's CRC-32 does not match: it is checked, reading
                every byte, when the view is made.

        On Windows, which cannot replace a file that is mapped,
        :meth:`compact` refuses with :class:`semidbm.error` while a view
        this database made is alive.

        >>> with semidbm.open("views.db", "c") as db:
        ...     db["image"] = b"header" + bytes(1000)
        ...     with db.view("image") as view:
        ...         bytes(view[:6])
        b'header'
        """

    @abstractmethod
    def __setitem__(self, key: Data, value: Data, /) -> None:
        """Store ``value`` under ``key``: a record appended to the log (into the buffer).

        Raises:
            semidbm.error: the database is read-only or closed, or
                writing failed (then the key keeps its former value).
        """

    @abstractmethod
    def __delitem__(self, key: Data, /) -> None:
        """Delete ``key``: a delete record appended to the log.

        Raises:
            KeyError: ``key`` is not in the database (nothing is written).
            semidbm.error: the database is read-only or closed.
        """

    @abstractmethod
    def __contains__(self, key: object, /) -> bool:
        """Whether ``key`` is in the database."""

    @abstractmethod
    def __iter__(self) -> Iterator[bytes]:
        """Iterate over the keys, lazily.

        As with a dict, a change to the set of keys during the iteration
        makes the next step raise :exc:`RuntimeError`; so does a
        compaction or a :meth:`refresh` that rebuilt the index.
        """

    @abstractmethod
    def __len__(self) -> int:
        """The number of keys."""

    @abstractmethod
    def keys(self, prefix: Data | None = None) -> list[bytes]:  # type: ignore[override]
        """Return a list of the keys, a snapshot taken at once.

        A list, as ``dbm.dumb`` and ``dbm.gnu`` return, not a view: the
        caller may change the database while going over it. Without
        ``prefix`` the order is arbitrary, as iteration's.

        Args:
            prefix: if given, only the keys that start with it, in byte
                order (as ``bytes`` objects compare); a key as the rest of
                the API takes it (``str`` as UTF-8, or bytes-like). See
                :meth:`iter_sorted` and :doc:`/ordered`.
        """

    @abstractmethod
    def values(self, prefix: Data | None = None) -> list[bytes]:  # type: ignore[override]
        """Return a list of the values, in the order of :meth:`keys`, a snapshot taken at once.

        With ``prefix``, the values of the keys that start with it, in the
        keys' byte order.
        """

    @abstractmethod
    def items(  # type: ignore[override]
        self, prefix: Data | None = None
    ) -> list[tuple[bytes, bytes]]:
        """Return a list of the ``(key, value)`` pairs, a snapshot taken at once.

        With ``prefix``, the pairs whose keys start with it, in byte order.
        """

    def iter_sorted(
        self,
        start: Data | None = None,
        stop: Data | None = None,
        *,
        prefix: Data | None = None,
        reverse: bool = False,
        what: str = "keys",
    ) -> Iterator[Any]:
        """Iterate over the keys in byte order, from ``start`` up to ``stop``, left out.

        The keys are those live at the call, sorted then (a snapshot:
        keys written later are not seen, and the database may change
        during the iteration). Values are read as the iteration reaches
        them, a run of keys at a time: each is the key's value when its
        run is read, and a key deleted since the call is left out. Keys
        compare as ``bytes`` objects do, as ``semidbm keys`` and dumps
        sort them. See :doc:`/ordered`.

        Args:
            start: the first key, if the database holds it: keys below
                it are left out. None: from the first key.
            stop: the key where the iteration ends, itself left out.
                None: to the last key.
            prefix: only keys that start with it; with ``start`` or
                ``stop``, the keys that satisfy both.
            reverse: from the last key down to the first (the same keys).
            what: ``"keys"``, ``"values"`` or ``"items"`` (``(key, value)``
                pairs).

        Each key argument is taken as the rest of the API takes a key
        (``str`` as UTF-8, or bytes-like).

        Returns:
            Iterator: the keys, values or pairs, in byte order of the keys.

        Raises:
            TypeError: a key argument of another type, or ``reverse`` not
                True or False.
            ValueError: ``what`` is none of the three.
            semidbm.error: the database is closed, at the call; or when a
                run of values is read (not when only keys are asked for).

        >>> with semidbm.open("ordered.db", "c") as db:
        ...     db.update({"user:2": "bo", "user:1": "al", "group:1": "staff"})
        ...     list(db.iter_sorted(prefix="user:", what="items"))
        [(b'user:1', b'al'), (b'user:2', b'bo')]
        """
        return _order.iter_sorted(self, start, stop, prefix, reverse, what)

    @abstractmethod
    def update(
        self,
        other: SupportsKeysAndGetItem[_Key, Data] | Iterable[tuple[Data, Data]] = (),
        /,
        **kwds: Data,
    ) -> None:
        """Store many items in one call: those of ``other``, then the keyword arguments.

        As :meth:`dict.update` takes them: ``other`` is a mapping
        (anything with a ``keys()`` method) or an iterable of ``(key,
        value)`` pairs. Each item is stored as ``db[key] = value``
        stores it, in order, with the same bytes in the file; the
        compiled kernel runs the loop in C, faster than a loop of
        assignments (:doc:`bulk`). A bad item stops the update where it
        is: the items before it stay stored, as with :meth:`dict.update`.
        Another thread may see the first items stored before the last.

        Args:
            other: a mapping, or an iterable of pairs.
            **kwds: more items, their keys given as names (stored as UTF-8).

        Raises:
            TypeError: an item that is not a sequence, or a key or value
                of a type the database does not take.
            ValueError: an item that is a sequence of another length than
                2 (the words of :meth:`dict.update`), or a key or value of
                2 GiB or more.
            semidbm.error: the database is read-only or closed (even with
                no item), or writing failed.

        >>> db = semidbm.open("update.db", "c")
        >>> db.update({"a": "1", "b": "2"}, c="3")
        >>> db.update([(b"d", b"4"), (b"a", b"5")])
        >>> db[b"a"], len(db)
        (b'5', 4)
        >>> db.close()
        """

    @overload
    @abstractmethod
    def get_many(self, keys: Iterable[Data]) -> list[bytes | None]: ...
    @overload
    @abstractmethod
    def get_many(self, keys: Iterable[Data], default: _T) -> list[bytes | _T]: ...
    @abstractmethod
    def get_many(self, keys: Iterable[Data], default: Any = None) -> list[Any]:
        """Return the values of many keys, in a list, in their order; ``default`` for a missing one.

        What ``[db.get(key, default) for key in keys]`` returns, read at
        once: another thread's changes come before or after, never in
        the middle. The compiled kernel looks the keys up in C, asking
        the processor for the memory of several of them at a time
        (:doc:`bulk`).

        Args:
            keys: an iterable of keys (all converted before any is read).
                One key given alone (a str or bytes-like object) is a
                :exc:`TypeError`: its characters would be taken for keys.
            default: the value given for a key the database does not hold.

        Raises:
            TypeError: ``keys`` is one key, or a key is of a type the
                database does not take.
            semidbm.error: the database is closed.
            semidbm.DBMChecksumError: with ``verify_checksums``, a value's
                CRC-32 does not match.

        >>> db = semidbm.open("get_many.db", "c")
        >>> db.update(a="1", b="2")
        >>> db.get_many(["a", b"b", "c"])
        [b'1', b'2', None]
        >>> db.get_many(["c"], default=b"")
        [b'']
        >>> db.close()
        """

    @abstractmethod
    def delete_many(self, keys: Iterable[Data]) -> None:
        """Delete many keys in one call: all of them, or none if one is missing.

        Every key is looked up before anything is written. A key the
        database does not hold, or one given twice (its second deletion
        would find it gone), raises :exc:`KeyError` for the first such
        key in the order given, and nothing is deleted. Otherwise a
        delete record is appended for each key, at once for other
        threads, all in one write: if writing fails (a full disk), no
        key is deleted.

        Args:
            keys: an iterable of keys. One key given alone (a str or
                bytes-like object) is a :exc:`TypeError`: its characters
                would be taken for keys.

        Raises:
            KeyError: a key is missing or given twice (nothing is deleted).
            TypeError: ``keys`` is one key, or a key is of a type the
                database does not take.
            semidbm.error: the database is read-only or closed, or
                writing failed.

        >>> db = semidbm.open("delete_many.db", "c")
        >>> db.update(a="1", b="2", c="3")
        >>> db.delete_many(["a", "b"])
        >>> db.delete_many(["c", "a"])
        Traceback (most recent call last):
          ...
        KeyError: 'a'
        >>> db.keys()
        [b'c']
        >>> db.close()
        """

    @abstractmethod
    def sync(self) -> None:
        """Write the buffered records to the file and flush it to disk (fsync).

        What was stored before ``sync()`` returned survives a crash of
        the process or of the machine. On a database opened read-only it
        does nothing, as with the standard library's dbm readers.

        Raises:
            semidbm.error: the database is closed, or writing failed.
        """

    @abstractmethod
    def compact(
        self,
        progress: Callable[[int, int], object] | None = None,
        format: int | None = None,
        recover: bool = False,
    ) -> int:
        """Rewrite the data file with only the live records, reclaiming the space of the rest.

        The log only grows: overwritten and deleted values stay in it
        until a compaction. The new file is flushed to disk before it
        replaces the old one, so a crash at any moment leaves one or the
        other, whole. Readers that have the database open switch to the
        new file at their next :meth:`refresh`.

        A compaction reads every byte it copies, so it checks each
        record's CRC-32 as it copies it: a damaged record is never
        copied, since in the new file it would read as sound data (or,
        where a zero byte lands beside a page boundary, end the log as
        lost data, and take every record after it). What that costs is
        measured in :doc:`/durability` ("Compaction").

        Args:
            progress: called as ``progress(done, total)`` with the bytes
                of the old file copied so far; an exception it raises
                abandons the compaction and leaves the database as it was.
            format: the major format of the new file: ``2`` upgrades a
                database to format 2.1, which has :meth:`batch` and
                values that expire (semidbm 0.5.1 then refuses to open
                it); ``1`` turns one back into 0.5.1's format 1.1 (refused
                while a value that expires has not expired yet). None
                (the default) keeps the major format, and writes 2.0 as 2.1.
            recover: leave damaged records out instead of refusing: the
                key of each is then gone from the database (its older
                values were overwritten, and are not brought back).

        Returns:
            int: the number of damaged records left out (0 without
            ``recover``).

        Raises:
            semidbm.DBMChecksumError: a live record's checksum does not
                match (without ``recover``): the message names its key
                and its offset in the data file; the database is
                unchanged.
            semidbm.error: the database is read-only or closed, or
                writing the new file failed (the database is unchanged).
                On Windows, also while views of its values
                (:meth:`view`) are alive: refused before anything is
                written.
            ValueError: ``format`` is not 1, 2 or None.
        """

    @abstractmethod
    def refresh(self) -> None:
        """For a reader: bring in what the writer has flushed to the file since it opened.

        A writer's own database is always current: for it this does
        nothing. If the writer compacted, the new file is opened.

        Raises:
            semidbm.DBMLoadError: the file turned out corrupt or cut
                shorter; the reader is then closed.
        """

    @abstractmethod
    def close(self, compact: bool = False) -> None:
        """Write out the buffer, fsync and close the database; compact it first if asked.

        Closing a closed database does nothing. Every later operation
        raises :class:`semidbm.error`. A database still open when the
        interpreter exits is closed then.

        Args:
            compact: run :meth:`compact` before closing. If the
                compaction fails (a damaged record, say), its error is
                raised and the database stays open.
        """

    # --- the rest of the dbm interface, on top of those --------------------------

    if TYPE_CHECKING:
        # MutableMapping's get and pop, typed for keys given as str or bytes-like.
        @overload
        def get(self, key: Data, /) -> bytes | None: ...
        @overload
        def get(self, key: Data, default: bytes, /) -> bytes: ...
        @overload
        def get(self, key: Data, default: _T, /) -> bytes | _T: ...
        def get(self, key: Data, default: Any = None, /) -> Any: ...
        @overload
        def pop(self, key: Data, /) -> bytes: ...
        @overload
        def pop(self, key: Data, default: bytes, /) -> bytes: ...
        @overload
        def pop(self, key: Data, default: _T, /) -> bytes | _T: ...
        def pop(self, key: Data, default: Any = None, /) -> Any: ...

    def clear(self) -> None:
        """Delete every key; each deletion is appended to the log.

        Keys that another thread deletes meanwhile are skipped. To give
        the space back, :meth:`compact` afterwards.
        """
        for key in self.keys():
            try:
                del self[key]
            except KeyError:
                pass

    def firstkey(self) -> bytes | None:
        """Start going over the keys, as ``dbm.gnu`` has it: return the first key, or None.

        It goes over the keys as they are at this call, in
        iteration order: :meth:`nextkey` skips keys deleted since, keys
        added are not visited, and deleting the key just returned is
        fine. Iterating over the database does the same more simply.

        >>> db = semidbm.open("keys.db", "c")
        >>> db["a"] = "1"
        >>> key = db.firstkey()
        >>> while key is not None:
        ...     print(key)
        ...     key = db.nextkey(key)
        b'a'
        >>> db.close()
        """
        return self._cursor_from(self.keys(), 0)

    def nextkey(self, key: Data) -> bytes | None:
        """Return the key after ``key`` in the pass :meth:`firstkey` began; None at the end.

        Also None for a key the database does not hold, as in ``dbm.gnu``.
        """
        if isinstance(key, str):
            key = key.encode("utf-8")
        else:
            key = memoryview(key).tobytes()
        keys, position = self._cursor or ([], 0)
        if position >= len(keys) or keys[position] != key:
            keys = self.keys()
            try:
                position = keys.index(key)
            except ValueError:
                return None
        return self._cursor_from(keys, position + 1)

    def _cursor_from(self, keys: list[bytes], start: int) -> bytes | None:
        """The first key of ``keys`` from ``start`` on that is still present; remember where."""
        for position in range(start, len(keys)):
            if keys[position] in self:
                self._cursor = (keys, position)
                return keys[position]
        self._cursor = None
        return None

    def batch(self) -> Batch:
        """Start a batch: changes that reach the file together, all of them or none.

        Set and delete keys on the batch inside a ``with`` block; they
        reach the database when the block ends without an exception, as
        one record of the log, and an exception discards them. Without a
        block, :meth:`Batch.commit` and :meth:`Batch.rollback` do the
        same (see :doc:`/batches` for what each does once a batch has
        ended). After a
        crash or a power cut at any moment, the database holds every
        change of a batch or none, and a reader's :meth:`refresh` never
        shows part of one. Reads meanwhile show the database as it was
        before the batch. Like other writes, a committed batch is durable
        after :meth:`sync` or :meth:`close`.

        Batches need format 2.0 (:attr:`format_version`): a database
        created with ``semidbm.open(path, "c", format=2)``, or upgraded
        with ``db.compact(format=2)`` or ``semidbm upgrade DIRECTORY``.

        Returns:
            Batch: the batch, to use in a ``with`` block, or to end with
            its ``commit()`` or ``rollback()``.

        Raises:
            semidbm.error: the database is closed, read-only, or of format
                1.1 (the message says how to upgrade it).

        >>> with semidbm.open("batched.db", "c", format=2) as db:
        ...     db[b"from"] = b"100"
        ...     with db.batch() as batch:
        ...         batch[b"from"] = b"70"
        ...         batch[b"to"] = b"30"
        ...     sorted(db.items())
        [(b'from', b'70'), (b'to', b'30')]
        """
        if self.closed:
            raise DBMError(_messages.CLOSED % self.path)
        if not self.writable:
            raise DBMError(_messages.READ_ONLY % ("write", self.path))
        if self.format_version[0] < BATCH_FORMAT:
            raise DBMError(_messages.NO_BATCHES % ((self.path,) + tuple(self.format_version)))
        return self._batch_type(self)

    def set(self, key: Data, value: Data, expire: float | None = None) -> None:
        """Set ``key`` to ``value``, for ``expire`` seconds if given, otherwise until changed.

        Without ``expire`` this is ``db[key] = value`` (whose value
        expires after the handle's default lifetime, :attr:`expire`, if
        it has one). With it, the value
        expires that many seconds from now, by the wall clock: from then
        on ``db[key]``, ``key in db``, ``db.get(key)``, :meth:`get_many`
        and :meth:`view` find ``key`` missing, and the next
        :meth:`compact` drops it. Until then ``len(db)``, iteration and
        the key and item lists still count it (see :doc:`/expiry`). A
        later set or delete of ``key`` replaces the expiring value, as
        any other. The value and its expiry time reach the file as one
        batch: after a crash, the database holds both or neither.

        Values that expire need format 2.1 (:attr:`format_version`): a
        database created with ``semidbm.open(path, "c", format=2)``, or
        upgraded with ``db.compact(format=2)`` or ``semidbm upgrade
        DIRECTORY``.

        Args:
            key: the key (bytes, bytes-like or str, stored as UTF-8).
            value: the value (as the key).
            expire: seconds until the value expires, an int or a float,
                finite and above 0; None (the default): the handle's
                :attr:`expire`, never if it has none.

        Raises:
            TypeError: ``expire`` is not a number (bool neither), or the
                key or the value is of a type that cannot be stored.
            ValueError: ``expire`` is 0 or less, NaN or infinite.
            semidbm.error: the database is closed, read-only, or of a
                format before 2.1 (the message says how to upgrade it).

        >>> import time
        >>> with semidbm.open("sessions.db", "c", format=2) as db:
        ...     db.set(b"token", b"abc", expire=3600)
        ...     db.set(b"old", b"xyz", expire=0.001)
        ...     time.sleep(0.01)
        ...     db.get(b"token"), db.get(b"old"), b"old" in db
        (b'abc', None, False)
        """
        if expire is None:
            self[key] = value
            return
        expires_at = _expiry.expires_at(expire)
        key, value = as_bytes(key, "keys"), as_bytes(value, "values")
        if self.closed:
            raise DBMError(_messages.CLOSED % self.path)
        if not self.writable:
            raise DBMError(_messages.READ_ONLY % ("write", self.path))
        if self.format_version < EXPIRY_VERSION:
            raise DBMError(_messages.NO_EXPIRY % ((self.path,) + tuple(self.format_version)))
        self._commit_encoded(encode_expiring(key, value, expires_at))

    #: The batch :meth:`batch` makes (a shared writer's takes its turn for the whole block).
    _batch_type: ClassVar[type[Batch]] = Batch

    def locked(self) -> AbstractContextManager[Self]:
        """Hold the write lock of a shared writer over a block of reads and writes.

        A shared writer (flags ``'wm'`` and ``'cm'``) takes the write lock
        for each operation; inside ``with db.locked():`` it takes it once
        for the whole block, having first caught up with every other
        writer, so the block's reads are current and no other writer
        changes the database before the block ends: a read-modify-write
        across processes. The block's writes reach the file when it
        ends (other threads of this process wait for it too). Keep it
        short: every other writer waits. :meth:`batch` does the same, and
        in format 2 its writes also reach readers all at once.

        Raises:
            semidbm.error: the database is not a shared writer (an
                exclusive writer has no other writer to hold out), or it
                is closed.

        >>> with semidbm.open("counter.db", "cm") as db:
        ...     with db.locked():
        ...         db["hits"] = str(int(db.get("hits", b"0")) + 1)
        ...     db["hits"]
        b'1'
        """
        raise DBMError(_messages.NOT_SHARED % self.path)

    def reorganize(self) -> None:
        """Compact the database: ``dbm.gnu``'s name for :meth:`compact`."""
        self.compact()

    def _refuse_copy(self, *args: object) -> Any:
        """Refuse ``copy`` and ``deepcopy``: it is an open file (pickling: ``db.SemiDBM``)."""
        raise TypeError(
            "a semidbm database cannot be copied: it is an open file; open the "
            "database again instead, or pickle a reader or a shared writer (%r)" % self
        )

    __copy__ = __deepcopy__ = _refuse_copy

    def __enter__(self) -> Self:
        """The database itself: ``with semidbm.open(...) as db:`` closes it at the end."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the database (:meth:`close`)."""
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("read-write" if self.writable else "read-only")
        return "<semidbm database %r, %s>" % (os.path.dirname(self.path), state)

    if TYPE_CHECKING:
        # Where firstkey/nextkey are (keys, position): a slot of the class made at run time.
        _cursor: tuple[list[bytes], int] | None

        # A batch's changes as one batch record (private: Batch commits through it).
        def _commit_batch(
            self, changes: dict[bytes, bytes | None], expires_at: int = 0
        ) -> None: ...

        def _commit_encoded(self, record: bytes) -> None: ...

        # The keys of a range in byte order, as keys, values or items (private: _order).
        def _sorted(self, low: bytes, high: bytes | None, what: str) -> list[Any]: ...

        # The sorted keys as lines of text, for semidbm.migrate and the command (private).
        def _sorted_lines(
            self,
            form: str,
            progress: Callable[[int, int], object] | None = None,
            low: bytes = b"",
            high: bytes | None = None,
        ) -> tuple[int, Iterator[tuple[int, bytes]]]: ...

        # Parts of the keys and the log's state, for semidbm.dask (private: the kernel's
        # Store, _interface.Store).
        @property
        def key_seed(self) -> int: ...

        @property
        def log_state(self) -> tuple[int, tuple[int, ...]]: ...

        def _part(self, part: int, parts: int, seed: int, what: str) -> list[Any]: ...

        # The arguments that open it again (db._open_into sets it; __reduce__ pickles them).
        _arguments: tuple[Any, ...]

