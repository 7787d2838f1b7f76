"""The types the API's signatures name, each written once.

The aliases ``Data``, ``Flag`` and ``GnuFlag`` are for type checkers alone: they
exist only under ``TYPE_CHECKING`` (``_typeshed`` has no module at run
time), and modules import them there, their annotations being strings
(``from __future__ import annotations``). ``BatchTarget`` is a class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, Union

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

    #: A key or value as given: str (stored as UTF-8) or any bytes-like object.
    Data = Union[str, ReadableBuffer]
    #: How :func:`semidbm.open` opens a database (as the dbm modules): read,
    #: write, create if missing, always a new empty one; and a writer that
    #: shares the database with others, of an existing one or created if missing.
    Flag = Literal["r", "w", "c", "n", "wm", "cm"]
    #: What :func:`semidbm.open` takes besides: a flag with dbm.gnu's letters, each once, in
    #: any order (``db._parse_flag``, which takes repeats too); ``u`` is refused after ``n``.
    GnuFlag = Literal[
        "rf", "rs", "ru", "rfs", "rfu", "rsf", "rsu", "ruf", "rus", "rfsu", "rfus",
        "rsfu", "rsuf", "rufs", "rusf", "wf", "ws", "wu", "wfs", "wfu", "wsf",
        "wsu", "wuf", "wus", "wfsu", "wfus", "wsfu", "wsuf", "wufs", "wusf", "cf",
        "cs", "cu", "cfs", "cfu", "csf", "csu", "cuf", "cus", "cfsu", "cfus",
        "csfu", "csuf", "cufs", "cusf", "nf", "ns", "nfs", "nsf",
    ]


class BatchTarget(Protocol):
    """What a :class:`semidbm.Batch` needs of its database (``Database`` has it).

    Named here, not as ``Database``, so that ``_batch`` need not import
    ``_database``, which imports it.
    """

    def __contains__(self, key: object, /) -> bool:
        """Whether ``key`` is in the database."""
        ...

    @property
    def expire(self) -> float | None:
        """The handle's default lifetime: a batch's puts get an expiry record each if not None."""
        ...

    def _commit_batch(self, changes: dict[bytes, bytes | None], expires_at: int = 0) -> None:
        """Write ``changes`` (a value of None: a delete) as one batch record, each put expiring
        at ``expires_at`` if not 0."""
        ...
