"""Keys in byte order: the range an ordered read asks for, and the values read as it goes.

``Database.iter_sorted`` and ``keys(prefix=...)`` (``values``,
``items``; the sharded database's too) ask the kernel's ``Store._sorted``
for the live keys of a half-open range ``[low, high)`` in byte order, as
``bytes`` objects compare. This module turns the caller's ``start``,
``stop`` and ``prefix`` into that range, once for every caller, and reads
the values of an ordered iteration over a snapshot of the keys, a run of
keys at a time, as it reaches them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from . import _messages
from ._parts import check_what
from ._records import as_bytes

if TYPE_CHECKING:
    from ._types import Data

#: Keys whose values an ordered iteration reads in one ``get_many`` call: few
#: enough that a value read is recent, enough that each call's cost is shared.
READ_RUN = 1024

#: What ``get_many`` answers for a key deleted since the snapshot (never a value).
_GONE = object()


def prefix_end(prefix: bytes) -> bytes | None:
    """The least key above every key that starts with ``prefix``; None if there is none.

    The last byte that is not 0xFF, plus one, with what follows it cut:
    ``b"ab\\xff"`` ends at ``b"ac"``. A prefix of 0xFF bytes alone (or
    the empty one) has no end: every key from it on starts with it.
    """
    kept = prefix.rstrip(b"\xff")
    if not kept:
        return None
    return kept[:-1] + bytes((kept[-1] + 1,))


def key_range(
    start: Data | None, stop: Data | None, prefix: Data | None
) -> tuple[bytes, bytes | None]:
    """``(low, high)``: the keys from ``start`` up to ``stop``, left out, with ``prefix``.

    Each is a key as the rest of the API takes it (``str`` as UTF-8, or
    bytes-like), or None for no bound: TypeError names one of another
    type. ``high`` is None where nothing bounds the keys above. A prefix
    and bounds together ask for the keys that satisfy both.
    """
    low = b"" if start is None else as_bytes(start, "start")
    high = None if stop is None else as_bytes(stop, "stop")
    if prefix is not None:
        first = as_bytes(prefix, "prefix")
        low = max(low, first)
        end = prefix_end(first)
        if end is not None and (high is None or end < high):
            high = end
    return low, high


def listed(db: Any, prefix: Data, what: str) -> list[Any]:
    """``db.keys(prefix)`` (``values``, ``items``): a list in the keys' byte order, at once."""
    return db._sorted(*key_range(None, None, prefix), what)


def iter_sorted(
    db: Any,
    start: Data | None,
    stop: Data | None,
    prefix: Data | None,
    reverse: bool,
    what: str,
) -> Iterator[Any]:
    """``db.iter_sorted``: the keys taken at once, sorted; their values read as they are reached.

    The arguments are checked, and the keys taken, at the call. Values
    are read ``READ_RUN`` keys at a time with ``db.get_many``, so each is
    the key's value when its run is read; a key deleted since the call
    is left out.
    """
    check_what(what)
    if type(reverse) is not bool:
        raise TypeError(_messages.NOT_A_BOOL % ("reverse", type(reverse).__name__))
    keys = db._sorted(*key_range(start, stop, prefix), "keys")
    if reverse:
        keys.reverse()
    if what == "keys":
        return iter(keys)
    return _read_values(db, keys, what == "items")


def _read_values(db: Any, keys: list[bytes], pairs: bool) -> Iterator[Any]:
    """The values of ``keys`` (pairs if ``pairs``), a run at a time; deleted keys left out."""
    for at in range(0, len(keys), READ_RUN):
        run = keys[at : at + READ_RUN]
        for key, value in zip(run, db.get_many(run, _GONE)):
            if value is not _GONE:
                yield (key, value) if pairs else value
