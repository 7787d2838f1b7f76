"""Shelves on semidbm, with a choice of serializer: pickle, as ``shelve`` does, or JSON.

``shelve.Shelf(semidbm.open(path, "c"))`` works as it is. What this
module adds is :func:`open_shelf` (``shelve.open`` for semidbm) and the
``serializer`` option of :class:`Shelf`.

Pickle, shelve's own serializer, can store nearly any object, but
unpickling runs whatever code the data asks for: a shelf from an
untrusted source can take over the process that reads it. The JSON
serializer stores only JSON's types and reading it never runs code; use
it for any shelf that you did not write yourself.
"""

from __future__ import annotations

import builtins
import json
import pickle
import shelve
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, Union

from . import db as _db
from .errors import DBMError

if TYPE_CHECKING:
    from _typeshed import StrOrBytesPath

    from ._types import Flag, GnuFlag

_VT = TypeVar("_VT")


class _Serializer(Protocol):
    """What the ``serializer`` option takes besides a name: ``json``, ``orjson``, your own."""

    def dumps(self, value: Any, /) -> bytes | str: ...

    def loads(self, data: bytes, /) -> Any: ...


#: The ``serializer`` option: a name from :data:`SERIALIZERS`, or a serializer object.
_SerializerOption = Union[Literal["pickle", "json"], _Serializer]


class PickleSerializer:
    """Values as pickles, like ``shelve``: any picklable object.

    Unsafe for untrusted data: loading a pickle can run arbitrary code.
    ``protocol`` is the pickle protocol (None: the shelve default).
    """

    name = "pickle"

    def __init__(self, protocol: int | None = None) -> None:
        self.protocol = protocol

    def dumps(self, value: Any) -> bytes:
        """Return ``value`` pickled."""
        return pickle.dumps(value, self.protocol)

    def loads(self, data: bytes) -> Any:
        """Return the object pickled in ``data``."""
        return pickle.loads(data)


def _compact_encoder(allow_nan: bool) -> json.JSONEncoder:
    """A JSON encoder writing compact text, non-ASCII characters as they are."""
    return json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=allow_nan)


#: What the JSON serializer writes with: made once, where ``json.dumps``
#: with options would make one on every call.
_STRICT = _compact_encoder(allow_nan=False)
#: The same, but writing NaN and infinities as ``json.dumps`` does by
#: default: only to compare with entries that other JSON writers stored.
_LENIENT = _compact_encoder(allow_nan=True)


def _to_json(value: object, encoder: json.JSONEncoder) -> bytes:
    """Return ``value`` as UTF-8 JSON, or raise TypeError if it would not read back as it is.

    The encoder refuses objects JSON has no type for, cycles, ints too
    long for ``int`` to write, nesting too deep to encode and (strict)
    non-finite floats; :func:`_refuse_non_str_keys` refuses the dict keys
    it would silently turn into strings. A str holding a surrogate code
    point (``surrogateescape`` makes them) is refused too: UTF-8 cannot
    hold it, and a ``\\u`` escape of a pair of them reads back as one
    character.
    """
    try:
        text = encoder.encode(value)
    except RecursionError:  # its message varies between Pythons
        raise TypeError("not storable as JSON: nested too deeply to encode") from None
    except ValueError as exc:
        raise TypeError("not storable as JSON: %s" % exc) from None
    _refuse_non_str_keys(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TypeError(
            "not storable as JSON: a str holds the surrogate %r, which UTF-8 cannot encode"
            % exc.object[exc.start : exc.end]
        ) from None


#: The types whose items JSON writes: searched for dict keys.
_CONTAINERS = (dict, list, tuple)
#: The types of items that hold no dict, as ``type()`` gives them (no subclasses).
_SCALARS = frozenset({str, int, float, bool, type(None)})
#: The type of the keys JSON keeps as they are (its subclasses too, looked at one by one).
_STR = frozenset({str})


def _refuse_non_str_keys(value: object) -> None:
    """Raise TypeError if a dict anywhere in ``value`` has a key that is not a str.

    JSON's encoder writes an int, float, bool or None key as a string,
    so ``{1: 2}`` would read back as ``{"1": 2}``. Only for a value the
    encoder took: that one holds no cycle, so the check ends. The checks
    by the set of ``type()`` run in C: they spare the JSON write path a
    Python-level look at every key, and at every item of a long list.
    """
    if not isinstance(value, _CONTAINERS):
        return
    pending = [value]
    while pending:
        items: Any = pending.pop()
        if isinstance(items, dict):
            if not _STR.issuperset(map(type, items)):
                _refuse_keys(items)
            items = items.values()
        if len(items) > 16 and _SCALARS.issuperset(map(type, items)):
            continue  # a long run of scalars (shorter ones cost less to loop over)
        for item in items:
            if type(item) not in _SCALARS and isinstance(item, _CONTAINERS):
                pending.append(item)


def _refuse_keys(mapping: dict[Any, Any]) -> None:
    """Raise TypeError for the first key of ``mapping`` that is not a str (or a subclass)."""
    for key in mapping:
        if not isinstance(key, str):
            raise TypeError(
                "not storable as JSON: dict key %r is of type %s; JSON keys are str, "
                "and it would read back as a string" % (key, type(key).__name__)
            )


def _json_holds(data: bytes, value: object) -> bool:
    """Whether the JSON text ``data`` reads as ``value``, NaN and infinities included.

    Both are compared as the lenient encoder writes them, so the answer
    does not depend on how the text was spaced; a value that even that
    encoder refuses (a set, a cycle, a non-str key) is never held.
    """
    try:
        return _to_json(value, _LENIENT) == _to_json(json.loads(data), _LENIENT)
    except (TypeError, ValueError, RecursionError):
        return False


class JSONSerializer:
    """Values as UTF-8 JSON: safe to read from anyone, since loading runs no code.

    Stores None, bools, ints, finite floats, str, lists and dicts with
    str keys, nested; tuples come back as lists. Anything else is a
    TypeError when stored: a set, bytes, a dict key that is not a str
    (JSON would turn ``{1: 2}`` into ``{"1": 2}``), NaN or an infinity
    (not JSON), a str holding a surrogate (not UTF-8), a cycle, an int
    too long to write as text. So whatever is stored reads back equal,
    and the stored text is standard JSON.
    Reading accepts the ``NaN``, ``Infinity`` and ``-Infinity`` that
    other JSON writers (``json.dumps`` by default) put in.
    """

    name = "json"

    def dumps(self, value: Any) -> bytes:
        """Return ``value`` as compact UTF-8 JSON; TypeError if it would not read back equal."""
        return _to_json(value, _STRICT)

    def loads(self, data: bytes) -> Any:
        """Return the value of the JSON text ``data``."""
        return json.loads(data)


#: The serializers known by name.
SERIALIZERS: dict[str, type[PickleSerializer] | type[JSONSerializer]] = {
    "pickle": PickleSerializer,
    "json": JSONSerializer,
}


def make_serializer(serializer: _SerializerOption, protocol: int | None = None) -> _Serializer:
    """Return the serializer object for the ``serializer`` option of :class:`Shelf`.

    ``serializer`` is a name from :data:`SERIALIZERS` (``"pickle"``,
    ``"json"``) or an object with ``dumps(value)`` (returning bytes, or
    str that is stored as UTF-8) and ``loads(data)`` methods, such as the
    ``json`` module itself. ``protocol`` is for pickle only.
    """
    made: _Serializer
    if isinstance(serializer, str):
        try:
            factory = SERIALIZERS[serializer]
        except KeyError:
            raise ValueError(
                "unknown serializer %r (known: %s)" % (serializer, ", ".join(sorted(SERIALIZERS)))
            ) from None
        if factory is PickleSerializer:
            return PickleSerializer(protocol)
        made = factory()
    elif callable(getattr(serializer, "dumps", None)) and callable(
        getattr(serializer, "loads", None)
    ):
        made = serializer
    else:
        raise TypeError(
            "serializer must be 'pickle', 'json' or an object with dumps() and loads(), not %s"
            % type(serializer).__name__
        )
    if protocol is not None:
        raise ValueError("protocol is an option of the pickle serializer only")
    return made


class Shelf(shelve.Shelf[_VT]):
    """A ``shelve.Shelf`` that stores values with the serializer given (pickle by default).

    ``dict`` is the underlying database (any dbm-like mapping; usually a
    semidbm database), ``protocol``, ``writeback`` and ``keyencoding`` are
    as for ``shelve.Shelf``; ``serializer`` is as for
    :func:`make_serializer`. A read-only shelf (its database open with
    ``'r'``) with ``writeback=True`` drops its cache on ``sync()`` and
    ``close()`` instead of trying to write it back.

    A value the serializer refuses (a set, with JSON) is refused when it
    is assigned, and is never cached; ``sync()`` and ``close()`` write
    every cached entry they can before raising for one that a mutation
    made unserializable, and ``close()`` closes the database all the same.
    An entry read, cached and left unchanged is no refusal even if the
    serializer would refuse it now: one holding NaN, that another JSON
    writer stored, stays as it is stored.
    """

    # What shelve.Shelf sets, which typeshed leaves undeclared.
    dict: MutableMapping[bytes, bytes]
    cache: builtins.dict[str, _VT]
    writeback: bool
    keyencoding: str
    serializer: _Serializer

    def __init__(
        self,
        dict: MutableMapping[bytes, bytes],
        protocol: int | None = None,
        writeback: bool = False,
        keyencoding: str = "utf-8",
        *,
        serializer: _SerializerOption = "pickle",
    ) -> None:
        made = make_serializer(serializer, protocol)
        super().__init__(dict, protocol, writeback, keyencoding)
        # After the base class: from Python 3.15 on it sets a ``serializer``
        # of its own (a function), which only the methods overridden here use.
        self.serializer = made

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle the shelf as its database pickles (a reader or a shared writer), with its options.

        A shelf with entries in its ``writeback`` cache refuses: they would
        be written back in two processes. ``sync()`` empties the cache.
        """
        if self.writeback and self.cache:
            raise TypeError(
                "a shelf with entries in its writeback cache cannot be pickled: sync() it first"
            )
        # The serializer carries the pickle protocol.
        return _unpickle_shelf, (self.dict, self.writeback, self.keyencoding, self.serializer)

    def __getitem__(self, key: str) -> _VT:
        """Return the value of ``key``; ValueError naming the key if the serializer cannot read it.

        Data nested too deep to read back is such an error too, not a
        RecursionError: a file from elsewhere may hold anything.
        """
        try:
            return self.cache[key]
        except KeyError:
            pass
        data = self.dict[key.encode(self.keyencoding)]
        try:
            value: _VT = self.serializer.loads(data)
        except (ValueError, RecursionError) as exc:
            raise ValueError(
                "cannot read the value of %r with the %s serializer: %s"
                % (key, getattr(self.serializer, "name", "given"), exc)
            ) from None
        if self.writeback:
            self.cache[key] = value
        return value

    def __setitem__(self, key: str, value: _VT) -> None:
        """Store ``value``; the serializer's refusal is raised at once and changes nothing.

        The value is serialized before it is stored or cached, so with
        ``writeback`` a value the serializer refuses never enters the
        cache: the key keeps its old value, or stays missing.
        """
        self.dict[key.encode(self.keyencoding)] = self._serialize(value)
        if self.writeback:
            self.cache[key] = value

    def _serialize(self, value: _VT) -> bytes:
        """Return ``value`` as the bytes to store (a str from the serializer is stored as UTF-8)."""
        data = self.serializer.dumps(value)
        if isinstance(data, str):
            data = data.encode("utf-8")
        return data

    def sync(self) -> None:
        """Write back cached entries (with ``writeback``) and sync the database.

        Every cached entry the serializer takes is written and the cache
        emptied, even if another entry, mutated in the cache, has become
        something it refuses; the first refusal is then raised, that
        entry keeping its last stored value. A read-only database cannot
        take them: its cache is dropped.
        """
        try:
            self._write_back()
        finally:
            super().sync()

    def close(self) -> None:
        """Write back cached entries (with ``writeback``) and close the database.

        As with :meth:`sync`, a refused entry does not keep the others
        from being written, nor the database from being closed; its error
        is raised after. A database closed already, with nothing cached
        for it, is no error: semidbm closes its databases at exit, before
        a shelf left open is collected and closed.
        """
        nothing_to_write = not self.cache and getattr(self.dict, "closed", False) is True
        try:
            self._write_back()
        finally:
            try:
                super().close()
            except DBMError:
                if not nothing_to_write:
                    raise

    def _write_back(self) -> None:
        """Empty the cache into the database, if it takes writes; raise the first refusal last."""
        cache, self.cache = self.cache, {}
        if not getattr(self.dict, "writable", True):
            return
        refusal = None
        for key, value in cache.items():
            encoded = key.encode(self.keyencoding)
            try:
                data = self._serialize(value)
            except Exception as exc:  # the serializer's, whatever it raises
                if refusal is None and not self._stored_as_it_is(encoded, value):
                    refusal = exc
                continue
            self.dict[encoded] = data
        if refusal is not None:
            raise refusal

    def _stored_as_it_is(self, key: bytes, value: _VT) -> bool:
        """Whether the JSON entry ``key`` holds ``value`` already, in JSON the serializer refuses.

        Such an entry (NaN from another JSON writer, say) reads back; with
        ``writeback`` it is cached and, unchanged, needs no writing.
        """
        if not isinstance(self.serializer, JSONSerializer):
            return False
        stored = self.dict.get(key)
        return stored is not None and _json_holds(stored, value)


def _unpickle_shelf(
    database: MutableMapping[bytes, bytes],
    writeback: bool,
    keyencoding: str,
    serializer: _Serializer,
) -> Shelf[Any]:
    """The shelf that :meth:`Shelf.__reduce__` pickled; its database opens at first use."""
    return Shelf(database, None, writeback, keyencoding, serializer=serializer)


def open_shelf(
    filename: StrOrBytesPath,
    flag: Flag | GnuFlag = "c",
    protocol: int | None = None,
    writeback: bool = False,
    *,
    serializer: _SerializerOption = "pickle",
    keyencoding: str = "utf-8",
    mode: int = 0o666,
    **options: Any,
) -> Shelf[Any]:
    """Open a shelf on the semidbm database ``filename``, as :func:`shelve.open` does on a dbm.

    Args:
        filename: the database's directory, as for :func:`semidbm.open`.
        flag: as for :func:`semidbm.open`, but ``'c'`` (created if
            missing) by default, as :func:`shelve.open` has it. With
            ``'wm'`` or ``'cm'`` several processes write the shelf at once
            (a shared writer: :doc:`/sharing`); a shelf of a reader or of a
            shared writer pickles, and opens again where it is unpickled.
        protocol: the pickle protocol (pickle serializer only).
        writeback: cache every entry read, and write the cache back on
            ``sync()`` and ``close()``, as :class:`shelve.Shelf` does.
        serializer: how values are stored: ``"pickle"`` (the default, as
            :mod:`shelve`; never read a pickled shelf you did not write:
            loading a pickle runs code), ``"json"`` (strict JSON, safe to
            read from anyone) or an object with ``dumps()`` and
            ``loads()`` (see :func:`semidbm.shelf.make_serializer`).
        keyencoding: the encoding of the shelf's str keys.
        mode: as for :func:`semidbm.open`.
        **options: ``buffer_size``, ``verify_checksums``, ``recover``,
            ``lock_timeout``, passed to :func:`semidbm.open`.

    Returns:
        Shelf: the shelf; close it, or use it in a ``with`` block.

    Raises:
        ValueError: an unknown serializer name, or a protocol given with
            a serializer other than pickle; :exc:`TypeError` for a
            serializer object without ``dumps()`` and ``loads()``.
            Nothing is opened then.
        semidbm.error: as :func:`semidbm.open` raises it.

    >>> with semidbm.open_shelf("objects.db", serializer="json") as shelf:
    ...     shelf["point"] = {"x": 1, "y": [2, 3]}
    >>> with semidbm.open_shelf("objects.db", "r", serializer="json") as shelf:
    ...     shelf["point"]
    {'x': 1, 'y': [2, 3]}
    """
    make_serializer(serializer, protocol)  # refuse a bad option before touching the file
    database = _db.open(filename, flag, mode, **options)
    try:
        return Shelf(database, protocol, writeback, keyencoding, serializer=serializer)
    except BaseException:
        database.close()
        raise
