"""The interface of a storage kernel's ``Store``, written once.

semidbm has two kernels: the compiled ``semidbm._core`` (the product)
and the pure-Python ``semidbm._pure`` (the reference, and the fallback
where the extension is not built). ``semidbm._kernel`` picks one, and
the API layer (``semidbm.db``) builds the db class on its ``Store``, so
both must offer exactly the members of :class:`Store` below: the
suite's ``tests/test_implementation.py`` checks each kernel against it,
both ways. Both write the same bytes for the same operations and raise
the same errors; the test suite runs against each. Beside ``Store``, each
kernel module defines :func:`summarize_log`, the tools' examination of a data file. The
file they share with other processes, and how writers and readers use it: docs/FORMAT.md.

Importing this module imports neither kernel nor the API layer, as the
kernels never import what is built on them. Names that only annotations
use are imported for the type checker alone: the annotations stay
strings at run time, which also keeps them valid on Python 3.9.
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Protocol,
    Tuple,
    Union,
)

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, SupportsKeysAndGetItem

    from ._files import Directory
    from ._records import LogSummary
    from ._types import Data


class Store(Protocol):
    """An open data file: the index of live keys, the append buffer and the file.

    Keys and values are given as str (stored as UTF-8) or any bytes-like
    object, at most ``format.MAX_LENGTH`` bytes each (ValueError beyond,
    TypeError for other types), and come back as bytes. Each operation is
    atomic for threads sharing the store: one waits for another thread's
    compaction or refresh. Once the store is closed, every operation on
    its data raises DBMError. So does one that the thread already in the
    middle of an operation attempts (from a compaction's progress
    callback, a signal handler, a finalizer): it would find the file or
    the index in flux.
    """

    def __init__(
        self,
        directory: Directory,
        writable: bool,
        buffer_size: int,
        verify_checksums: bool,
        recover: bool,
        writer_active: Optional[Callable[[], bool]],
    ) -> None:
        """Open the data file of ``directory`` and rebuild the index from its log.

        ``directory`` is an open ``_files.Directory``; the store then owns
        it and closes it when it is closed, but if this raises, the caller
        (the API layer) closes it. Its data file must exist and start
        with a header. ``writable`` opens it for appending; a reader
        refuses every write. ``buffer_size`` is how many bytes of records
        collect before they are written to the file (0: each record is
        written before its call returns). ``verify_checksums`` makes
        every read check the value's CRC-32 and raise DBMChecksumError
        on a mismatch. ``recover`` opens a data file whose unreadable
        tail, longer than one buffer, is followed by complete records
        (otherwise refused as damage inside the log: DBMLoadError).
        ``writer_active`` is None for a writer; for a reader, a function
        that says whether a writer holds the database's lock. It is
        called only when the log ends in an incomplete record, to tell a
        write in progress (left alone) from a torn tail (left out, and
        cut off by a writer: see ``torn_tail``): most opens need not ask.
        """

    @classmethod
    def _pending(
        cls, path: str, writable: bool, opener: Callable[[Store], None]
    ) -> Store:
        """A store not open yet, which ``opener(store)`` opens at its first use.

        For handles unpickled in another process (``db._reopen``): the
        store has its ``path`` and ``writable``, is not ``closed``, and the
        first operation that needs the file calls ``opener`` (which runs
        ``__init__`` on it, under the store's guard) before it goes on.
        ``opener`` must be safe to call from several threads, and to call
        again once it has opened the store (then doing nothing). If it
        raises, the operation raises that, and the next use tries again.
        ``close()`` before then closes the store without opening it.
        """

    def _open_pending(self) -> None:
        """Open a store made by ``_pending`` now, if it is not open yet; otherwise do nothing."""

    @property
    def path(self) -> str:
        """The path of the data file, for messages and the db object's repr."""

    @property
    def writable(self) -> bool:
        """True for a writer; False for a reader, and once ``_disown`` has run."""

    @property
    def torn_tail(self) -> Optional[Tuple[int, int]]:
        """The torn tail that opening left out, as ``(offset, length)``; None if there was none.

        As ``_tail.settle_tail`` found it when the store was opened (later
        refreshes and compactions do not change it). The store warns of
        nothing: the API layer turns this into a TornTailWarning that
        points at the code that opened the database.
        """

    @property
    def index_covered(self) -> int:
        """How many bytes of the log the mapped index file answers for; 0 if none does.

        Set at open and by a ``refresh()`` that switches to a newer index
        file; 0 once a failed check has dropped the index file (the log was
        then replayed whole). The pure-Python kernel never uses an index
        file: always 0 there. docs/FORMAT.md, "The index file".
        """

    @property
    def key_seed(self) -> int:
        """The seed under which ``_part`` lists a part fastest.

        The compiled kernel's: the seed of its index's key hash (the index
        file's, when one is mapped; otherwise drawn at open, so another
        process's differs). The pure kernel hashes no key: 0.
        """

    @property
    def log_state(self) -> Tuple[int, Tuple[int, ...]]:
        """What tells this state of the log from any other: ``_parts.log_state``'s tuple.

        The end of the log the index holds (a writer's buffered records
        included), and the CRC-32s of 32 sampled ranges of the log's bytes
        in the file (the first and last 4 KiB among them: a compacted log
        starts with a checkpoint of fresh random bytes). The bytes only,
        not the file's device or inode: an identical copy has the same
        state, on any machine. Equal tuples mean the same live keys and
        values, whichever kernel opened the file, unless the log was
        rewritten in place to the same length without changing a sampled
        byte (docs/FORMAT.md, "Parts of the keys"); a reader's changes
        only at ``refresh()``.
        """

    def _part(self, part: int, parts: int, seed: int, what: str) -> List[Any]:
        """Part ``part`` of ``parts`` under ``seed``: its live keys (``what="keys"``), their
        values (``"values"``) or ``(key, value)`` pairs (``"items"``), in the kernel's index order.

        A key belongs to the part that ``_parts.part_of(_parts.key_hash(seed,
        key), parts)`` names: the ``parts`` parts of one state of the
        database (``log_state``) are disjoint and hold every live key, and
        both kernels list the same keys. With ``seed == key_seed`` the
        compiled kernel reads only the range of its index's slots that
        holds the part (and the few past it that the probes reach),
        otherwise it hashes every key; the pure kernel hashes every key.
        Each value is read as ``__getitem__`` reads it, with its checks and
        errors (a record past the log's end, a checksum with
        ``verify_checksums``), into new bytes; the compiled kernel reads it
        from the record its slot names, with no second lookup. ``part``
        must be in ``range(parts)``, ``parts`` from 1 to 2**32, ``seed``
        64-bit (ValueError, TypeError for a non-int) and ``what`` one of
        ``_parts.WHAT`` (ValueError). For ``semidbm.dask``, whose workers
        each read one part.
        """

    @property
    def format_version(self) -> Tuple[int, int]:
        """The data file's format version, ``(major, minor)``, as its header says.

        Read at open; a compaction or a reader's switch to a compacted
        file reads it again. Format 2 has batch records.
        """

    @property
    def closed(self) -> bool:
        """True once the store has been closed, or released after an error that left it unusable.

        A refresh that finds the log corrupt or cut releases the reader:
        nothing it indexed can be trusted.
        """

    def __len__(self) -> int:
        """The number of live keys."""

    def __contains__(self, key: object, /) -> bool:
        """Whether ``key`` is live."""

    def __getitem__(self, key: Data, /) -> bytes:
        """The value of ``key``, read from the buffer or the file; KeyError(key) if absent."""

    def view(self, key: Data) -> memoryview:
        """A read-only memoryview of the value of ``key``; KeyError(key) if absent.

        Looked up, checked and refused as ``__getitem__`` is (the same key
        types, errors, and checks of a closed or busy store). The compiled
        kernel's view points into the memory map of the data file, with
        no copy, and holds that map (not the store): it shows the same
        bytes for as long as it is held, through later writes, remaps,
        ``compact()``, ``refresh()`` and ``close()``, and the map goes when
        the last view of it is released. A value still in the append
        buffer is not in the file yet: its view is of a copy. With
        ``verify_checksums`` the checksum is checked when the view is
        made. The pure-Python kernel maps nothing: its views are of copies.
        Where ``_compaction.RENAME_OVER_MAPPED_REFUSED`` (Windows), the
        compiled kernel's ``compact()`` raises DBMError, before writing
        anything, while any view it made is alive.
        """

    def __setitem__(self, key: Data, value: Data, /) -> None:
        """Append a record giving ``key`` the value ``value`` and index it.

        The record goes into the buffer (written out first when the
        record would overflow it; a record larger than the buffer goes to
        the file at once), so a read finds it at once. If writing fails
        the record is in neither the log nor the index.
        """

    def __delitem__(self, key: Data, /) -> None:
        """Append a delete record for ``key`` and drop it from the index; KeyError if absent."""

    def __iter__(self) -> Iterator[bytes]:
        """Iterate over the keys, lazily, in the kernel's index order.

        Keys added or removed meanwhile, or a compaction or a refresh
        that rebuilds the index, make the next step raise RuntimeError
        (``_messages.CHANGED_DURING_ITERATION``), and closing the store makes
        it raise DBMError: a mapping's iterator must not silently skip or
        repeat keys.
        """

    def keys(self, prefix: Optional[Data] = None) -> List[bytes]:
        """Return a list of all keys, a snapshot taken atomically.

        A list, not a view, as ``dbm.dumb`` and ``dbm.gnu`` return: the
        caller may change the database while going over it. With a
        ``prefix``, the keys that start with it, in byte order
        (``_order.listed``, through ``_sorted``).
        """

    def values(self, prefix: Optional[Data] = None) -> List[bytes]:
        """Return a list of all values, in the order of ``keys()``, a snapshot taken atomically."""

    def items(self, prefix: Optional[Data] = None) -> List[Tuple[bytes, bytes]]:
        """Return a list of all ``(key, value)`` pairs, a snapshot taken atomically."""

    def _sorted(self, low: bytes, high: Optional[bytes], what: str) -> List[Any]:
        """The live keys from ``low`` up to ``high`` (left out; None: no end), in byte order.

        As ``what`` (one of ``_parts.WHAT``) asks: the keys, their values,
        or ``(key, value)`` pairs; a snapshot taken atomically, values
        read (and with ``verify_checksums`` checked) as a read reads them.
        Keys outside the range are left out before the sort: the compiled
        kernel gathers the keys and sorts them with the radix sort of
        ``_sorted_lines``, the pure one with ``sorted``. DBMError if the
        store is closed. ``_order`` checks the arguments and makes the
        range of the public methods' ``start``, ``stop`` and ``prefix``.
        """

    def update(
        self,
        other: Union[SupportsKeysAndGetItem[Any, Data], Iterable[Tuple[Data, Data]]] = (),
        /,
        **kwds: Data,
    ) -> None:
        """Store many items: those of ``other``, then the keyword arguments, as ``dict.update``.

        ``other`` is a mapping (anything with ``keys()``: ``other[key]``
        for each key) or an iterable of pairs. Each item is stored as
        ``__setitem__`` stores it, bytes for bytes, in order (a later
        item for the same key wins). An item that is not a sequence
        raises TypeError and one that is not of length 2 ValueError
        (``_messages.NOT_A_PAIR``, ``NOT_TWO``: ``dict.update``'s words),
        a key or value of the wrong type TypeError and a too long one
        ValueError, as for ``__setitem__``: the update stops there, the
        items before it stored. The store is checked for writing first,
        even with no item. Not atomic as a whole: each item is.
        """

    def get_many(self, keys: Iterable[Data], default: object = None) -> List[object]:
        """Return the values of ``keys`` in a list, in their order; ``default`` for a missing key.

        What looking each key up with ``__getitem__``, ``default`` for a
        KeyError, would give, read atomically. ``keys`` is any iterable of keys, converted
        whole first (so a key of the wrong type raises before any read);
        a str or bytes-like object is refused (TypeError,
        ``_messages.ONE_KEY``): it would give its characters or bytes as
        keys.
        """

    def delete_many(self, keys: Iterable[Data]) -> None:
        """Delete every key of ``keys``, atomically; KeyError for the first that is not live.

        Every key is looked up before anything is written: a key that
        is missing, or given twice (its second deletion would find it
        missing), raises KeyError with that key, the first such in the
        order given, and nothing is deleted or appended. Otherwise a
        delete record is appended for each key, in order, as by
        ``__delitem__``, all in one write (through the buffer, or
        straight to the file when larger): if writing fails (a full
        disk), or a signal handler's exception interrupts the call, no
        key or every key is deleted. ``keys`` is refused as for
        ``get_many``.
        """

    def sync(self) -> None:
        """Write buffered records to the file and flush it to disk (fsync).

        A reader has nothing to write: for it this does nothing, as for
        the stdlib dbm modules' readers (``shelve`` syncs on close).
        """

    def compact(
        self,
        progress: Optional[Callable[[int, int], object]] = None,
        format: Optional[int] = None,
        recover: bool = False,
    ) -> int:
        """Rewrite the live records, oldest first, to a new data file and swap it in.

        The log only grows; this drops what overwrites and deletes left
        behind. The new file is flushed to disk before it is renamed over
        ``data``, and the directory after, so a crash leaves either the
        old file or the new one, whole. ``progress``, if given, is called
        as ``progress(done, total)`` (bytes of the old log, see
        ``_settings.PROGRESS_STEP``); an exception from it abandons the
        compaction and leaves the database as it was. ``format`` (1 or 2,
        ``format.check_format``) is the major format of the new file, by
        default the old one's; a batch's records are copied as records of
        their own. Each record's checksum is checked as it is copied: a
        mismatch raises DBMChecksumError and changes nothing, or with
        ``recover`` leaves the record out. Returns how many were left out.
        Writers only.
        """

    def _commit_batch(self, changes: Dict[bytes, Optional[bytes]], expires_at: int = 0) -> None:
        """Append ``changes`` as one batch record and apply them (``_batch.Batch`` calls it).

        ``changes``, a dict, maps each key to its value, or to None for a
        delete, in the order the record lists them; with ``expires_at``
        (milliseconds since the Unix epoch, ``_expiry.expires_at``) each
        put is followed by its expiry record, and a store of a format
        before 2.1 refuses the batch (DBMError, ``_messages.NO_EXPIRY``,
        after the other checks; nothing written). Keys and values are
        bytes exactly (TypeError, ``_messages.BATCH_CHANGES``, for a
        subclass too: its hashing could change the dict mid-commit).
        Deletes of keys that are not live are left out, and nothing is
        written if nothing is left. No other thread sees part of the batch
        (docs/FORMAT.md, "Batches").
        Refused (DBMError) unless the store is writable, open and of
        format 2 (``_messages.NO_BATCHES``).
        """

    def _commit_encoded(self, record: bytes) -> None:
        """Append the batch record ``record`` and apply it, as ``_commit_batch`` does its own.

        ``record`` is bytes exactly (TypeError otherwise), a batch record
        of puts (a kernel's ``Store._routed_batches``, or
        ``_records.encode_batch``, made it), checked whole first, as a
        replay checks a batch: ValueError (``_messages.NOT_A_BATCH``) and
        nothing written unless it is one whole batch record of sound put
        records. Refused as ``_commit_batch`` is on a store without
        batches.
        """

    def refresh(self) -> None:
        """Bring in what the writer has written to the file since this reader opened.

        Records the writer has flushed are added; an incomplete last
        record (a write in progress) waits for the next refresh. If the
        writer compacted, the new data file is opened and read whole. A
        corrupt record, or a data file cut shorter than the log this
        reader has read (``_messages.SHRANK``), raises and closes the
        reader. A writer's own store is always current: for it this does
        nothing.
        """

    def _follow(self) -> Optional[Tuple[int, int]]:
        """A shared writer, at the start of its turn: bring in what other writers appended since.

        The API layer's turn (``_shared``) holds ``lock.write``, so no
        other writer appends, cuts or compacts meanwhile, and the buffer
        is empty (every turn ends with ``_publish``). Records appended
        since are added, as a reader's ``refresh`` adds them; a data file
        replaced by another writer's compaction is opened and its keys
        found as at open. An incomplete last record can only be a torn
        tail left by a writer that died in its turn: it is cut off as at
        open, and returned as ``(offset, length)`` for the API layer's
        warning; otherwise None. A corrupt record, or a file cut shorter
        than what this store indexed, raises and closes the store.
        """

    def _publish(self) -> None:
        """A shared writer, at the end of its turn: write the buffer to the file (no fsync).

        If the write fails, what of it reached the file is cut off, the
        buffered records are dropped and the keys found again from the
        file (the turn makes the file's end this writer's alone), and the
        error propagates: the turn's changes that were still buffered are
        not kept. If the cut fails, the store is closed.
        """

    def close(self) -> None:
        """Flush and fsync buffered records (if writable) and release the file and directory.

        Closing a closed store does nothing. Refused (DBMError) in the
        middle of another operation of the same thread, such as from a
        compaction's progress callback: it would pull the file from under
        that operation.
        """

    def _sorted_lines(
        self,
        form: str,
        progress: Optional[Callable[[int, int], object]] = None,
        low: bytes = b"",
        high: Optional[bytes] = None,
    ) -> Tuple[int, Iterator[Tuple[int, bytes]]]:
        """The live keys in byte order, as lines of text: ``semidbm keys`` and dumps.

        ``form`` is one of ``_fields.LINE_FORMS``: ``"keys"`` (each key,
        then a newline), ``"encoded keys"`` (each key as a dump field) or
        ``"dump"`` (the key and its value as dump fields, one space
        between: ``semidbm.migrate``'s dump lines). Returns ``(count,
        chunks)``: the number of keys, and an iterator of ``(lines,
        data)``, ``data`` being the next ``lines`` whole lines. The keys
        and the records holding their values are those live at the call
        (a value assigned later is not seen); values are read, and with
        ``verify_checksums`` checked, as the chunks are made. Each chunk
        first checks that the store is open (DBMError) and holds the
        same keys (RuntimeError, ``_messages.CHANGED_DURING_ITERATION``;
        a compaction or refresh that rebuilt the index counts as a
        change). ``progress(done, total)``, if given, is called during the
        sort with the keys in their place so far, and with ``(count,
        count)`` when it is over. Only the keys from ``low`` up to
        ``high``, left out (None: no end), are lines, as for ``_sorted``
        (``--prefix``). Private, like ``_disown``: ``migrate`` and the
        command use it.
        """

    def _disown(self) -> None:
        """Become read-only without ever writing (in a child made by ``fork()``).

        The child shares the parent's file but not its future: flushing
        the inherited buffer from the child would corrupt the parent's
        log. Buffered records stay readable; nothing is flushed, synced
        or cut, then or at close. Private because only the API layer's
        fork handler calls it.
        """


def summarize_log(
    data: ReadableBuffer,
    check_checksums: bool,
    progress: Optional[Callable[[int, int], object]],
    path: str,
) -> LogSummary:
    """Walk a whole data file, as replaying it would: what ``semidbm stats`` and ``verify`` report.

    Each kernel module defines this function beside its ``Store``.
    ``data`` is the data file's bytes (a memory map), header included;
    ``path`` names it in errors. The records are read as an open reads
    them (the same stops: an incomplete last record, zeros a power cut
    left). The result, a ``_records.LogSummary``: ``records`` (complete
    records read), ``end`` (where the walk stopped), ``corrupt_at`` (the
    offset of a record with impossible lengths, where it had to stop, or
    None), ``keys`` and ``live_bytes`` (the live keys and the bytes of
    their records; an expiry record counts with its put, neither as a
    record nor in these bytes), ``expired_bytes`` (of those, the records
    whose expiry has passed by the wall clock: docs/FORMAT.md, "Expiry"),
    and with ``check_checksums`` ``bad_checksums``: the offsets of the
    records whose CRC-32 does not match, each as
    ``(offset, live)``, ``live`` saying whether it holds its key's
    current value (otherwise an empty list). ``progress(done, total)``,
    if given, is called with the bytes walked (see
    ``_settings.PROGRESS_STEP``), and at the end.
    """
    raise NotImplementedError("each kernel module defines summarize_log: see its docstring here")
