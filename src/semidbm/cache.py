"""A cache of Python objects on a semidbm database: values that expire, and ``memoize``.

:class:`Cache` keeps pickled objects under str or bytes keys in a
database of format 2.1, each for a default lifetime or its own
(``Database.set(..., expire=)``: docs/expiry.md), counts its hits and
misses, and with ``size_limit`` gives the oldest-written values up at
each compaction. :meth:`Cache.memoize` keeps a function's results under
keys made from its arguments by :func:`semidbm.cache.argument_key`, a scheme of this
module's own (not Python's ``hash``), so that every process and every
Python version finds the same result under the same call. docs/cache.md
is its page.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import mmap
import os
import pickle
import struct
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

from . import _messages, db
from ._database import Database
from ._records import walk
from .errors import DBMError
from .format import BATCH_FORMAT, DATA_NAME, DELETED, EXPIRY_VERSION, HEADER_SIZE

if TYPE_CHECKING:
    from _typeshed import StrOrBytesPath

    from ._types import Data, Flag, GnuFlag

_F = TypeVar("_F", bound=Callable[..., Any])
#: The pickle protocol of stored values: 5, which every Python semidbm runs on reads.
PICKLE_PROTOCOL = 5
#: What every key ``memoize`` makes starts with; keys of a cache's own should not.
MEMOIZE_PREFIX = b"\0memoize\0"
#: Bytes of the BLAKE2b digest of a call's arguments in a ``memoize`` key.
DIGEST_SIZE = 20
#: The longest encoding of a call's arguments that a ``memoize`` key holds as it is.
SHORT_KEY = 64
_MISSING = object()
_FLOAT = struct.Struct("!d")


class Cache:
    """Python objects kept for a while in a semidbm database, and functions' results.

    Open it as a database: ``path`` and ``flag`` as :func:`semidbm.open`
    takes them (``'c'`` by default; ``'cm'`` or ``'wm'`` for a cache that
    several processes share, each with its own ``Cache``). A database it
    creates is of format 2 (2.1), which values that expire need; one of
    format 1.1 is refused (``semidbm.error``: upgrade it with ``semidbm
    upgrade``).

    Args:
        path: the database's directory; or an open database
            (:class:`semidbm.Database`, a writer), which the cache then
            uses, and closes when it is closed.
        flag: as :func:`semidbm.open` takes it, but ``'r'``.
        expire: the lifetime, in seconds, of a value set without one of
            its own (None, the default: until replaced or deleted).
        size_limit: the live bytes (as ``semidbm stats`` counts them)
            that :meth:`compact` keeps at most, giving up the
            oldest-written values first; None (the default): no limit.
        **options: the other arguments of :func:`semidbm.open`
            (``lock_timeout``, ``buffer_size``...).

    Keys are str (stored as UTF-8) or bytes; values are any object
    :mod:`pickle` takes, and are unpickled when read: open only caches
    that you trust, as with :mod:`shelve`.

    >>> import time
    >>> with semidbm.Cache("objects.cache", expire=60) as cache:
    ...     cache["user:1"] = {"name": "Ada", "visits": 3}
    ...     cache.set("token", "abc", expire=0.001)
    ...     time.sleep(0.01)
    ...     cache.get("user:1"), cache.get("token", "gone"), (cache.hits, cache.misses)
    ({'name': 'Ada', 'visits': 3}, 'gone', (1, 1))
    """

    def __init__(
        self,
        path: StrOrBytesPath | Database,
        flag: Flag | GnuFlag = "c",
        *,
        expire: float | None = None,
        size_limit: int | None = None,
        **options: Any,
    ) -> None:
        if flag.startswith("r"):
            raise ValueError(_messages.CACHE_READ_ONLY)
        if size_limit is not None and (
            isinstance(size_limit, bool) or not isinstance(size_limit, int) or size_limit < 0
        ):
            raise ValueError(_messages.CACHE_SIZE_LIMIT % (size_limit,))
        self.database: Database = (
            path if isinstance(path, Database) else db.open(path, flag, format=2, **options))
        self.expire = expire
        self.size_limit = size_limit
        #: Lookups (``get``, ``[]``, ``memoize``) that found a value, and that did not.
        self.hits = 0
        self.misses = 0

    def get(self, key: Data, default: Any = None) -> Any:
        """The object under ``key``, or ``default`` if there is none (or it expired)."""
        found = self.database.get(key)
        if found is None:
            self.misses += 1
            return default
        self.hits += 1
        return pickle.loads(found)

    def __getitem__(self, key: Data) -> Any:
        """The object under ``key``; KeyError if there is none (or it expired)."""
        found = self.get(key, _MISSING)
        if found is _MISSING:
            raise KeyError(key)
        return found

    def set(self, key: Data, value: Any, expire: float | None = None) -> None:
        """Keep ``value`` under ``key`` for ``expire`` seconds (None: the cache's ``expire``)."""
        self.database.set(key, pickle.dumps(value, PICKLE_PROTOCOL),
                          self.expire if expire is None else expire)

    def __setitem__(self, key: Data, value: Any) -> None:
        """``set(key, value)``: for the cache's ``expire``."""
        self.set(key, value)

    def __delitem__(self, key: Data) -> None:
        """Delete ``key``; KeyError if it is not there."""
        del self.database[key]

    def __contains__(self, key: Data) -> bool:
        """Whether an object is under ``key`` that has not expired (neither a hit nor a miss)."""
        return key in self.database

    def memoize(self, expire: float | None = None, name: str | None = None) -> Callable[[_F], _F]:
        """A decorator that keeps the results of the function it wraps in the cache.

        A call looks its result up under :func:`semidbm.cache.argument_key` of
        ``name`` (by default the function's module and qualified name)
        and its arguments: a hit returns the result kept, unpickled; a
        miss calls the function and keeps what it returns (None too), for
        ``expire`` seconds (None: the cache's ``expire``). Arguments are
        keyed by value, so ``f(1)`` and ``f(1.0)`` are two calls, and
        ``f(1)`` and ``f(x=1)`` too; an argument of a type the scheme
        does not take raises TypeError before the function is called.
        The wrapper's ``cache_key(*args, **kwds)`` gives a call's key.
        A function whose qualified name does not tell it from others (a
        lambda, or a function made inside another, whose every instance
        shares the name) needs a ``name`` of its own: without one,
        ValueError, rather than two functions sharing results. A method's
        ``self`` is an argument like the others, which the scheme takes
        only if it is of a type it keys: memoize a function of the values
        that the result depends on.

        >>> cache = semidbm.Cache("results.cache")
        >>> @cache.memoize(expire=3600)
        ... def square(n):
        ...     print("computing", n)
        ...     return n * n
        >>> square(12), square(12)
        computing 12
        (144, 144)
        >>> cache.hits, cache.misses
        (1, 1)
        >>> cache.close()
        """

        def decorate(function: _F) -> _F:
            if name is None and "<" in function.__qualname__:  # <lambda>, <locals>
                raise ValueError(_messages.CACHE_UNNAMED % function.__qualname__)
            prefix = MEMOIZE_PREFIX + (
                name if name is not None
                else "%s.%s" % (function.__module__, function.__qualname__)
            ).encode("utf-8", "surrogatepass") + b"\0"
            lifetime = self.expire if expire is None else expire
            database = self.database

            def cache_key(*args: Any, **kwds: Any) -> bytes:
                return prefix + argument_key(args, kwds)

            @functools.wraps(function)
            def memoized(*args: Any, **kwds: Any) -> Any:
                key = prefix + argument_key(args, kwds)
                found = database.get(key)
                if found is not None:
                    self.hits += 1
                    return pickle.loads(found)
                self.misses += 1
                result = function(*args, **kwds)
                database.set(key, pickle.dumps(result, PICKLE_PROTOCOL), lifetime)
                return result

            memoized.cache_key = cache_key  # type: ignore[attr-defined]
            return cast(_F, memoized)

        return decorate

    def compact(self) -> None:
        """Compact the database, dropping expired values, then keep ``size_limit``.

        If the values left hold more live bytes than ``size_limit``, the
        oldest-written ones are deleted, one by one in the order they
        were written (a value set again counts from its last write),
        until the rest fit, and the database is compacted again. A shared
        writer does all this holding its turn (``Database.locked``), so
        that no other process writes in between.
        """
        if self.size_limit is None:
            self.database.compact()
            return
        with _turn(self.database):
            self.database.compact()
            oldest_first = _oldest_first(self.database)
            excess = sum(size for _, size in oldest_first) - self.size_limit
            if excess > 0:
                for key, size in oldest_first:
                    del self.database[key]
                    excess -= size
                    if excess <= 0:
                        break
                self.database.compact()

    def close(self, compact: bool = False) -> None:
        """Close the database, compacting it first (:meth:`compact`) if ``compact``."""
        if compact and not self.database.closed:
            self.compact()
        self.database.close()

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<semidbm cache %r, %d hits, %d misses>" % (
            os.path.dirname(self.database.path), self.hits, self.misses)


def argument_key(args: tuple[Any, ...], kwds: dict[str, Any]) -> bytes:
    """The key of a call with ``args`` and ``kwds``, from their encoding.

    The scheme (docs/cache.md, "The key of a call"): the tuple ``(args,
    kwds)`` is encoded by :func:`semidbm.cache.encode_argument`; the key is ``=`` and
    that encoding if it is at most ``SHORT_KEY`` bytes, else ``#`` and
    its 20-byte BLAKE2b digest (a short key costs no hashing). It
    depends on the arguments' values alone, never on Python's ``hash``
    (salted per process) or a pickle's layout: every process and every
    Python version gets the same key.
    """
    encoded = b"((" + b"".join(map(encode_argument, args)) + (
        b"){" + _pairs(kwds) + b"})" if kwds else b"){})")
    if len(encoded) <= SHORT_KEY:
        return b"=" + encoded
    return b"#" + hashlib.blake2b(encoded, digest_size=DIGEST_SIZE).digest()


def encode_argument(value: Any) -> bytes:
    """``value`` as bytes that only an equal value of the same type encodes to.

    Each value is a tag byte, then: nothing for ``None`` (``N``),
    ``True`` (``T``) and ``False`` (``F``); the decimal digits and ``;``
    for an int (``i``); the 8 bytes of an IEEE 754 double, big-endian,
    for a float (``f``); the length in decimal, ``:`` and the bytes for
    bytes (``b``, bytearray too) and str (``s``, as UTF-8 with
    surrogates kept); the items' encodings between ``(`` and ``)`` for a
    tuple, ``[`` and ``]`` for a list; the keys' and values' encodings,
    pairs sorted by the key's encoding, between ``{`` and ``}`` for a
    dict; the items' encodings, sorted, between ``<`` and ``>`` for a set
    or frozenset. A subclass of one of these types counts as that type
    (bool before int). Any other type raises TypeError.
    """
    encode = _ENCODERS.get(type(value)) or next(
        (function for kind, function in _ENCODERS.items() if isinstance(value, kind)), None)
    if encode is None:
        raise TypeError(_messages.CACHE_ARGUMENT % type(value).__name__)
    return encode(value)


def _text(value: str) -> bytes:
    data = value.encode("utf-8", "surrogatepass")
    return b"s%d:%s" % (len(data), data)


def _pairs(value: dict[Any, Any]) -> bytes:
    """The sorted pairs of a dict's keys' and values' encodings, one after the other."""
    return b"".join(sorted(encode_argument(key) + encode_argument(item)
                           for key, item in value.items()))


#: How ``encode_argument`` encodes each type it takes, in the order it tries a subclass.
_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    type(None): lambda value: b"N",
    bool: lambda value: b"T" if value else b"F",
    int: lambda value: b"i%d;" % value,
    float: lambda value: b"f" + _FLOAT.pack(value),
    str: _text,
    bytes: lambda value: b"b%d:%s" % (len(value), value),
    bytearray: lambda value: b"b%d:%s" % (len(value), value),
    tuple: lambda value: b"(" + b"".join(map(encode_argument, value)) + b")",
    list: lambda value: b"[" + b"".join(map(encode_argument, value)) + b"]",
    dict: lambda value: b"{" + _pairs(value) + b"}",
    set: lambda value: b"<" + b"".join(sorted(map(encode_argument, value))) + b">",
    frozenset: lambda value: b"<" + b"".join(sorted(map(encode_argument, value))) + b">",
}


def _turn(database: Database) -> contextlib.AbstractContextManager[Any]:
    """``database.locked()`` for a shared writer; for another, a block that holds nothing."""
    try:
        return database.locked()
    except DBMError:  # not a shared writer: no other writer to hold out
        return contextlib.nullcontext()


def _oldest_first(database: Database) -> list[tuple[bytes, int]]:
    """The live keys of ``database`` with their records' sizes, the oldest-written first.

    The data file is read as a replay reads it (``_records.walk``), after
    a sync, so that the buffer is in it; an expiry record counts with its
    put, as ``semidbm stats`` counts it.
    """
    database.sync()
    version = database.format_version
    with open(os.path.join(os.path.dirname(database.path), DATA_NAME), "rb") as stream, \
            mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data:
        live: dict[bytes, tuple[int, int]] = {}
        for start, key, _, value_length, end in walk(
            data, HEADER_SIZE, database.path, batches=version[0] >= BATCH_FORMAT,
            expirable=version >= EXPIRY_VERSION,
        ):
            if value_length == DELETED:
                live.pop(key, None)
            elif value_length >= 0:
                live[key] = (start, end - start)
    return [(key, live[key][1]) for key in sorted(live, key=lambda key: live[key][0])]
