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

import json
import pickle
import shelve

from . import db as _db


class PickleSerializer:
    """Values as pickles, like ``shelve``: any picklable object.

    Unsafe for untrusted data: loading a pickle can run arbitrary code.
    ``protocol`` is the pickle protocol (None: the shelve default).
    """

    name = "pickle"

    def __init__(self, protocol=None):
        self.protocol = protocol

    def dumps(self, value):
        """Return ``value`` pickled."""
        return pickle.dumps(value, self.protocol)

    def loads(self, data):
        """Return the object pickled in ``data``."""
        return pickle.loads(data)


class JSONSerializer:
    """Values as UTF-8 JSON: safe to read from anyone, since loading runs no code.

    Stores None, bools, numbers, str, lists and dicts with str keys;
    tuples come back as lists; anything else is a TypeError when stored.
    """

    name = "json"

    def dumps(self, value):
        """Return ``value`` as compact UTF-8 JSON."""
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def loads(self, data):
        """Return the value of the JSON text ``data``."""
        return json.loads(data)


#: The serializers known by name.
SERIALIZERS = {"pickle": PickleSerializer, "json": JSONSerializer}


def make_serializer(serializer, protocol=None):
    """Return the serializer object for the ``serializer`` option of :class:`Shelf`.

    ``serializer`` is a name from :data:`SERIALIZERS` (``"pickle"``,
    ``"json"``) or an object with ``dumps(value)`` (returning bytes, or
    str that is stored as UTF-8) and ``loads(data)`` methods, such as the
    ``json`` module itself. ``protocol`` is for pickle only.
    """
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


class Shelf(shelve.Shelf):
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
    """

    def __init__(
        self, dict, protocol=None, writeback=False, keyencoding="utf-8", *, serializer="pickle"
    ):
        made = make_serializer(serializer, protocol)
        super().__init__(dict, protocol, writeback, keyencoding)
        # After the base class: from Python 3.15 on it sets a ``serializer``
        # of its own (a function), which only the methods overridden here use.
        self.serializer = made

    def __getitem__(self, key):
        try:
            return self.cache[key]
        except KeyError:
            pass
        data = self.dict[key.encode(self.keyencoding)]
        try:
            value = self.serializer.loads(data)
        except ValueError as exc:
            raise ValueError(
                "cannot read the value of %r with the %s serializer: %s"
                % (key, getattr(self.serializer, "name", "given"), exc)
            ) from None
        if self.writeback:
            self.cache[key] = value
        return value

    def __setitem__(self, key, value):
        """Store ``value``; the serializer's refusal is raised at once and changes nothing.

        The value is serialized before it is stored or cached, so with
        ``writeback`` a value the serializer refuses never enters the
        cache: the key keeps its old value, or stays missing.
        """
        self.dict[key.encode(self.keyencoding)] = self._serialize(value)
        if self.writeback:
            self.cache[key] = value

    def _serialize(self, value):
        """Return ``value`` as the bytes to store (a str from the serializer is stored as UTF-8)."""
        data = self.serializer.dumps(value)
        if isinstance(data, str):
            data = data.encode("utf-8")
        return data

    def sync(self):
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

    def close(self):
        """Write back cached entries (with ``writeback``) and close the database.

        As with :meth:`sync`, a refused entry does not keep the others
        from being written, nor the database from being closed; its error
        is raised after.
        """
        try:
            self._write_back()
        finally:
            super().close()

    def _write_back(self):
        """Empty the cache into the database, if it takes writes; raise the first refusal last."""
        cache, self.cache = self.cache, {}
        if not getattr(self.dict, "writable", True):
            return
        refusal = None
        for key, value in cache.items():
            try:
                data = self._serialize(value)
            except Exception as exc:  # the serializer's, whatever it raises
                if refusal is None:
                    refusal = exc
                continue
            self.dict[key.encode(self.keyencoding)] = data
        if refusal is not None:
            raise refusal


def open_shelf(
    filename,
    flag="c",
    protocol=None,
    writeback=False,
    *,
    serializer="pickle",
    keyencoding="utf-8",
    mode=0o666,
    **options,
):
    """Open a shelf on the semidbm database ``filename``, as ``shelve.open`` does on a dbm.

    ``flag`` and ``mode`` are as for :func:`semidbm.open` (default
    ``'c'``: created if missing); ``protocol``, ``writeback`` and
    ``keyencoding`` as for ``shelve.open``. ``serializer`` chooses how
    values are stored: ``"pickle"`` (the default, as ``shelve``; never
    read a pickled shelf you did not write: loading pickles runs code),
    ``"json"`` (safe to read from anyone) or an object with ``dumps()``
    and ``loads()`` (see :func:`make_serializer`). Other keyword
    arguments (``buffer_size``, ``verify_checksums``, ``recover``) go to
    :func:`semidbm.open`. Returns a :class:`Shelf`; close it, or use it
    in a ``with`` block.
    """
    make_serializer(serializer, protocol)  # refuse a bad option before touching the file
    database = _db.open(filename, flag, mode, **options)
    try:
        return Shelf(database, protocol, writeback, keyencoding, serializer=serializer)
    except BaseException:
        database.close()
        raise
