"""Shelves on semidbm, with a choice of serializer: pickle, as ``shelve`` does, or JSON.

``shelve.Shelf(semidbm.open(path, "c"))`` works as it is. What this
module adds is :func:`open_shelf` (``shelve.open`` for semidbm) and the
``serializer`` option of :class:`Shelf`.

Pickle, shelve's own serializer, can store nearly any object, but
unpickling runs whatever code the data asks for: a shelf from an
untrusted source can take over the process that reads it. The JSON
serializer stores only JSON's types and reading it never runs code; use
it for any shelf that you did not write yourself.

A signing key (``open_shelf(path, key=secret)``, :class:`SigningSerializer`)
makes a shelf of any serializer refuse every value that was not written
with that key under that key of the database, before the serializer
reads a byte of it: a pickle planted in the file by someone without the
key runs no code.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import json
import pickle
import shelve
import struct
import types
from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, Union

from . import _messages
from . import db as _db
from ._parts import check_what
from .errors import DBMError, DBMSignatureError

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
    if isinstance(serializer, SigningSerializer):
        raise TypeError(
            "a SigningSerializer is not a serializer option: its dumps() and loads() take the "
            "key a value is stored under; give the serializer it signs for, and key="
        )
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


# --- signed values ---

#: The first bytes of a signed value, a zero byte (which starts no pickle
#: and no JSON text) and ``SG1`` (the layout's version, 1).
SIGNED_PREFIX = b"\x00SG1"
#: The bytes of a tag, an HMAC-SHA256.
TAG_SIZE = 32
#: The fewest bytes a signing key may have (128 bits).
MIN_KEY_SIZE = 16
#: The longest serializer name a signed value holds, in UTF-8 bytes (its length is one byte).
MAX_NAME_SIZE = 255
#: A field's length in the input of the MAC: 8 bytes, big-endian.
_LENGTH = struct.Struct(">Q")


def _signing_key(key: object) -> bytes:
    """Return the signing key ``key`` as bytes; TypeError or ValueError for one that cannot serve.

    bytes-like keys are taken as they are, a str as its UTF-8 bytes. At
    least :data:`MIN_KEY_SIZE` bytes are needed, which refuses a key too
    short to be random but does not make a guessable one safe: anyone who
    reads one value can try passwords against its tag, offline, as fast
    as HMAC-SHA256 runs. A key must be random (``secrets.token_bytes(32)``);
    a password must go through a key derivation function first
    (``hashlib.scrypt`` with a salt). The errors never hold the key: a
    str that is not UTF-8 is refused outside the handler of its
    UnicodeEncodeError, whose ``object`` is the whole key.
    """
    if isinstance(key, str):
        try:
            encoded = key.encode("utf-8")
        except UnicodeEncodeError:
            encoded = None
        if encoded is None:
            raise ValueError(
                "a str signing key must be UTF-8 text, and this one holds a lone surrogate: "
                "give the key as bytes"
            )
        key = encoded
    elif isinstance(key, (bytes, bytearray, memoryview)):
        key = bytes(key)
    else:
        raise TypeError(
            "a signing key is bytes (or a str, taken as UTF-8), not %s" % type(key).__name__
        )
    if len(key) < MIN_KEY_SIZE:
        raise ValueError(
            "a signing key needs at least %d bytes, not %d: make one with "
            "secrets.token_bytes(32)" % (MIN_KEY_SIZE, len(key))
        )
    return key


def _encoded_name(name: str) -> bytes:
    """The serializer's name ``name`` as a signed value holds it, its UTF-8 bytes.

    ValueError for a name that is empty, longer than :data:`MAX_NAME_SIZE`
    bytes, or not UTF-8 text (a lone surrogate).
    """
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            "a serializer's name must be UTF-8 text, not %r (a lone surrogate)" % name
        ) from None
    if not 1 <= len(encoded) <= MAX_NAME_SIZE:
        raise ValueError(
            "a serializer's name is 1 to %d bytes in UTF-8, not %d" % (MAX_NAME_SIZE, len(encoded))
        )
    return encoded


def _serializer_name(serializer: _Serializer) -> bytes:
    """The name a value signed for ``serializer`` carries, in UTF-8: its ``name``, or a module's.

    The name is signed with the value, so that a value written by one
    serializer (JSON text) is never handed to another (pickle) with the
    same key. A serializer object needs a ``name`` (a str); a module used
    as one (``json``, ``orjson``) is named as it is imported.
    """
    name = getattr(serializer, "name", None)
    if name is None and isinstance(serializer, types.ModuleType):
        name = serializer.__name__
    if not isinstance(name, str) or not name:
        raise TypeError(
            "a serializer used with a signing key needs a name, a str attribute 'name' that "
            "is signed with each value (%s has none)" % type(serializer).__name__
        )
    return _encoded_name(name)


class _Signing:
    """HMAC-SHA256 tags made with one signing key, and the check of a signed value against them.

    The layout of a signed value (version 1): :data:`SIGNED_PREFIX`, the
    serializer's name (one byte of length, then its UTF-8 bytes), the
    tag (:data:`TAG_SIZE` bytes), the payload (what the serializer
    wrote). The tag is the HMAC-SHA256, under the signing key, of the
    prefix, then the name, the key the value is stored under (its bytes
    as stored) and the payload, each after its length in 8 bytes: no two
    different (name, key, payload) give the same input.
    """

    __slots__ = ("_keyed",)

    def __init__(self, key: object) -> None:
        # Keyed once; each tag is made on a copy. No attribute holds the key itself.
        self._keyed = hmac.new(_signing_key(key), digestmod=hashlib.sha256)

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError("a signing key cannot be pickled: the pickle would carry it")

    def tag(self, name: bytes, stored_key: bytes, payload: bytes) -> bytes:
        """The tag of ``payload`` stored under ``stored_key`` by the serializer ``name``.

        Each field is bytes-like; its length is counted in bytes (``nbytes``),
        not in items: a memoryview of 4-byte ints is as long as its bytes.
        """
        mac = self._keyed.copy()
        mac.update(SIGNED_PREFIX)
        for field in (name, stored_key, payload):
            mac.update(_LENGTH.pack(memoryview(field).nbytes))
            mac.update(field)
        return mac.digest()

    def sign(self, name: bytes, stored_key: bytes, payload: bytes) -> bytes:
        """The signed value of ``payload``, to store under ``stored_key``."""
        tag = self.tag(name, stored_key, payload)
        return b"".join((SIGNED_PREFIX, bytes((len(name),)), name, tag, payload))

    def open(
        self, stored_key: bytes, data: bytes, name: bytes | None = None
    ) -> tuple[bytes, bytes] | str:
        """The name and payload of ``data``, signed under ``stored_key``; else why it is refused.

        The tag is compared in constant time (:func:`hmac.compare_digest`),
        so how long a refusal takes tells nothing of the right tag. Given
        a serializer's ``name``, a value signed for another is refused too,
        once its tag matched: the name that the refusal reports is one the
        key signed.
        """
        if not isinstance(data, bytes):
            data = bytes(data)
        if not data.startswith(SIGNED_PREFIX):
            return _messages.UNSIGNED
        start = len(SIGNED_PREFIX) + 1
        size = data[start - 1] if len(data) >= start else 0
        if size == 0 or len(data) < start + size + TAG_SIZE:
            return _messages.SIGNATURE_CUT % len(data)
        signed_name = data[start : start + size]
        tag = data[start + size : start + size + TAG_SIZE]
        payload = data[start + size + TAG_SIZE :]
        if not hmac.compare_digest(tag, self.tag(signed_name, stored_key, payload)):
            return _messages.BAD_SIGNATURE
        if name is not None and signed_name != name:
            return _messages.OTHER_SERIALIZER % (
                signed_name.decode("utf-8", "replace"),
                name.decode("utf-8", "replace"),
            )
        return signed_name, payload


def _refused(key: object, reason: str) -> DBMSignatureError:
    """The error refusing the value of ``key`` (as the caller names it) for ``reason``."""
    error = DBMSignatureError(_messages.SIGNATURE_REFUSED % (key, reason))
    error.reason = reason
    return error


class SigningSerializer:
    """A serializer whose values carry an HMAC-SHA256 that is checked before they are read.

    ``serializer`` is any option of :func:`make_serializer` (``"pickle"``,
    ``"json"``, an object with ``dumps()``, ``loads()`` and a ``name``),
    ``protocol`` as there; ``key`` is the signing key, bytes-like (or a
    str, as UTF-8), of at least :data:`MIN_KEY_SIZE` bytes. A shelf opened
    with ``key=`` signs with one (its ``signing`` attribute); anything else
    that stores objects under bytes keys can use it the same way.

    Its :meth:`dumps` and :meth:`loads` take, besides the value, the key
    the value is stored under, which the signature covers: a value moved
    to another key is refused. A value is refused, with
    :exc:`semidbm.DBMSignatureError`, before the serializer sees a byte of
    it, when it is unsigned, cut short, signed with another key, for
    another stored key or another serializer, or changed at all. A
    signature proves who wrote a value and where, not when: a value that
    was once stored under the same key with the same signing key (an
    older one, a copy from another database) is accepted if it is put
    back. Keys are not signed: a key can be added (its value is then
    refused) or removed.

    It cannot be pickled, nor does its repr show the key: a pickle or a
    log line would carry the secret.
    """

    __slots__ = ("serializer", "name", "_name", "_signing")

    def __init__(
        self, serializer: _SerializerOption, key: bytes | str, protocol: int | None = None
    ) -> None:
        made = make_serializer(serializer, protocol)
        encoded = _serializer_name(made)
        #: The serializer that writes and reads the payloads.
        self.serializer = made
        #: The serializer's name, which each signature covers.
        self.name = encoded.decode("utf-8")
        self._name = encoded
        self._signing = _Signing(key)

    def __repr__(self) -> str:
        return "<semidbm.shelf.SigningSerializer for the %r serializer>" % self.name

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError(
            "a SigningSerializer cannot be pickled: the pickle would carry its signing key"
        )

    def sign(self, stored_key: bytes, payload: bytes) -> bytes:
        """Return the payload ``payload`` signed, to store under ``stored_key``."""
        return self._signing.sign(self._name, stored_key, payload)

    def check(self, stored_key: bytes, data: bytes) -> bytes:
        """Return the payload of the signed value ``data`` stored under ``stored_key``.

        Raises :exc:`semidbm.DBMSignatureError`, naming ``stored_key``,
        if ``data`` is not a value this key signed under ``stored_key``
        for this serializer.
        """
        opened = self._signing.open(stored_key, data, self._name)
        if isinstance(opened, str):
            raise _refused(stored_key, opened)
        return opened[1]

    def dumps(self, stored_key: bytes, value: Any) -> bytes:
        """Return ``value`` serialized and signed, to store under ``stored_key``."""
        payload = self.serializer.dumps(value)
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        return self.sign(stored_key, payload)

    def loads(self, stored_key: bytes, data: bytes) -> Any:
        """Return the value signed in ``data`` under ``stored_key``, checked before it is read."""
        return self.serializer.loads(self.check(stored_key, data))


def _signatures(
    database: Mapping[bytes, bytes],
    key: bytes | str,
    name: bytes | None = None,
    progress: Any = None,
) -> Iterator[tuple[bytes, bytes | str]]:
    """Each key of ``database`` with the serializer's name its value is signed for, or why not.

    What ``semidbm verify --key-file`` reports: the name (bytes) when
    ``key`` signed the value under its own key, else the reason (a str).
    Given a serializer's ``name``, a value signed for another is refused
    too; without one, the name is taken from the value, whose tag
    covers it. ``progress`` is called as ``progress(done, total)`` every
    4,096 keys and at the end.
    """
    signing = _Signing(key)
    total = len(database)
    for done, stored_key in enumerate(database):
        if progress is not None and done % 4096 == 0:
            progress(done, total)
        opened = signing.open(stored_key, database[stored_key], name)
        yield stored_key, opened if isinstance(opened, str) else opened[0]
    if progress is not None:
        progress(total, total)


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

    With a signing ``key`` (as for :class:`SigningSerializer`), each
    value is stored signed, and read only once its signature is checked:
    any other value raises :exc:`semidbm.DBMSignatureError` before the
    serializer sees it (``get``, ``pop``, ``setdefault``, ``items()``
    too; ``in``, ``len`` and iteration read no value, and see every key).
    Without one, a signed value is refused the same way, since it cannot
    be checked, but an unsigned one is read unchecked: nothing in the
    database marks it as signed, so every open of a signed shelf must
    pass its key. A serializer's bytes that would read as signed
    (starting with :data:`SIGNED_PREFIX`) are refused when stored. A
    shelf with a key cannot be pickled.
    """

    # What shelve.Shelf sets, which typeshed leaves undeclared.
    dict: MutableMapping[bytes, bytes]
    cache: builtins.dict[str, _VT]
    writeback: bool
    keyencoding: str
    serializer: _Serializer
    #: What signs and checks the values: None without a signing key.
    signing: SigningSerializer | None

    def __init__(
        self,
        dict: MutableMapping[bytes, bytes],
        protocol: int | None = None,
        writeback: bool = False,
        keyencoding: str = "utf-8",
        *,
        serializer: _SerializerOption = "pickle",
        key: bytes | str | None = None,
    ) -> None:
        made = make_serializer(serializer, protocol)
        signing = None if key is None else SigningSerializer(made, key)
        super().__init__(dict, protocol, writeback, keyencoding)
        # After the base class: from Python 3.15 on it sets a ``serializer``
        # of its own (a function), which only the methods overridden here use.
        self.serializer = made
        self.signing = signing

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle the shelf as its database pickles (a reader or a shared writer), with its options.

        A shelf with entries in its ``writeback`` cache refuses: they would
        be written back in two processes. ``sync()`` empties the cache. So
        does a shelf with a signing key, which the pickle would carry to
        anyone who reads it: open the shelf where it is used, with the key
        (``Shelf(database, key=...)``, the database pickled).
        """
        if self.signing is not None:
            raise TypeError(
                "a shelf with a signing key cannot be pickled: the pickle would carry the key; "
                "pickle its database and open the shelf on it with the key where it is used"
            )
        if self.writeback and self.cache:
            raise TypeError(
                "a shelf with entries in its writeback cache cannot be pickled: sync() it first"
            )
        # The serializer carries the pickle protocol.
        return _unpickle_shelf, (self.dict, self.writeback, self.keyencoding, self.serializer)

    def __getitem__(self, key: str) -> _VT:
        """Return the value of ``key``; ValueError naming the key if the serializer cannot read it.

        Data nested too deep to read back is such an error too, not a
        RecursionError: a file from elsewhere may hold anything. A value
        whose signature fails (see :class:`Shelf`) is refused before that,
        with :exc:`semidbm.DBMSignatureError`.
        """
        try:
            return self.cache[key]
        except KeyError:
            pass
        encoded = key.encode(self.keyencoding)
        payload = self._payload(key, encoded, self.dict[encoded])
        try:
            value: _VT = self.serializer.loads(payload)
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
        encoded = key.encode(self.keyencoding)
        self.dict[encoded] = self._serialize(encoded, value)
        if self.writeback:
            self.cache[key] = value

    def _payload(self, key: str, encoded: bytes, data: bytes) -> bytes:
        """What the serializer may read of ``data``, the value of ``key``: refused if not signed.

        With a signing key, the payload once its signature is checked;
        without one, ``data`` itself, unless it is signed (which only a
        key could check).
        """
        if self.signing is not None:
            try:
                return self.signing.check(encoded, data)
            except DBMSignatureError as exc:
                raise _refused(key, exc.reason) from None
        if data[: len(SIGNED_PREFIX)] == SIGNED_PREFIX:
            raise _refused(key, _messages.SIGNED_NO_KEY)
        return data

    def _serialize(self, encoded: bytes, value: _VT) -> bytes:
        """Return ``value`` as the bytes to store under ``encoded``: signed, with a signing key.

        A str from the serializer is stored as UTF-8. Without a signing
        key, bytes that would read as a signed value are refused.
        """
        if self.signing is not None:
            return self.signing.dumps(encoded, value)
        data = self.serializer.dumps(value)
        if isinstance(data, str):
            data = data.encode("utf-8")
        if data[: len(SIGNED_PREFIX)] == SIGNED_PREFIX:
            raise ValueError(_messages.LOOKS_SIGNED % SIGNED_PREFIX)
        return data

    def iter_sorted(
        self,
        start: str | None = None,
        stop: str | None = None,
        *,
        prefix: str | None = None,
        reverse: bool = False,
        what: str = "keys",
    ) -> Iterator[Any]:
        """Iterate over the keys in the order of their stored bytes, from ``start`` up to ``stop``.

        As :meth:`semidbm.Database.iter_sorted`, with ``str`` keys: the
        bounds and the prefix are encoded as the shelf encodes its keys
        (``keyencoding``). With UTF-8, the default, the order of the
        bytes is that of the keys by code point, as :func:`sorted` sorts
        them. Values are read as ``shelf[key]`` reads them (the cache
        first, signatures checked), as the iteration reaches them; a key
        deleted since the call is left out.

        Raises:
            TypeError: a bound or the prefix is not a ``str``, or the
                shelf's database has no ``iter_sorted`` (another dbm).
            ValueError: the shelf is closed, or ``what`` is not a kind.
        """
        check_what(what)
        # A closed shelf's dict is shelve's marker (typeshed leaves the class out).
        if isinstance(self.dict, shelve._ClosedDict):  # type: ignore[attr-defined]
            self.dict.closed()  # ValueError, as every operation of a closed shelf raises
        ordered = getattr(self.dict, "iter_sorted", None)
        if ordered is None:
            raise TypeError(_messages.NO_ORDER % type(self.dict).__name__)
        low, high, stored_prefix = (
            None if key is None else self._stored_key(key, name)
            for key, name in ((start, "start"), (stop, "stop"), (prefix, "prefix"))
        )
        keys = [
            key.decode(self.keyencoding)
            for key in ordered(low, high, prefix=stored_prefix, reverse=reverse)
        ]
        if what == "keys":
            return iter(keys)
        return self._read_values(keys, what == "items")

    def _stored_key(self, key: str, name: str) -> bytes:
        """``key`` as the shelf stores it; TypeError, naming the argument, if it is not a str."""
        if not isinstance(key, str):
            raise TypeError(_messages.SHELF_KEY % (name, type(key).__name__))
        return key.encode(self.keyencoding)

    def _read_values(self, keys: list[str], pairs: bool) -> Iterator[Any]:
        """The values of ``keys`` (pairs if ``pairs``), read in turn; deleted keys left out."""
        for key in keys:
            try:
                value = self[key]
            except KeyError:
                if key in self:  # not deleted: raised by what read the value
                    raise
                continue
            yield (key, value) if pairs else value

    def clear(self) -> None:
        """Remove every entry, reading none: no value is checked or deserialized.

        ``MutableMapping.clear`` would pop the entries one by one, reading
        each value: a value refused by its signature would stop it, and,
        without a key, a pickle planted in the file would run.
        """
        self.cache.clear()
        for encoded in list(self.dict.keys()):
            del self.dict[encoded]

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
                data = self._serialize(encoded, value)
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
        if stored is None:
            return False
        if self.signing is not None:
            try:
                stored = self.signing.check(key, stored)
            except DBMSignatureError:
                return False
        return _json_holds(stored, value)


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
    key: bytes | str | None = None,
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
        key: a signing key: random bytes (``secrets.token_bytes(32)``; a
            password only through a key derivation function), at least 16
            of them (a str is taken as UTF-8): every value is stored with
            an HMAC-SHA256 of it, its key and the serializer's name, and
            checked before it is deserialized (:class:`semidbm.shelf.SigningSerializer`,
            :doc:`/signed-shelves`). Keep it out of the shelf's directory,
            and pass it on every open: nothing in the database says that
            it is signed, and an open without it checks nothing.
        keyencoding: the encoding of the shelf's str keys.
        mode: as for :func:`semidbm.open`.
        **options: ``buffer_size``, ``verify_checksums``, ``recover``,
            ``lock_timeout``, ``format``, ``expire`` (each object the
            shelf stores then expires that many seconds after it is
            stored: :doc:`/expiry`), passed to :func:`semidbm.open`.

    Returns:
        Shelf: the shelf; close it, or use it in a ``with`` block.

    Raises:
        ValueError: an unknown serializer name, or a protocol given with
            a serializer other than pickle; :exc:`TypeError` for a
            serializer object without ``dumps()`` and ``loads()``. A
            signing key shorter than 16 bytes is a ValueError, one of
            another type than bytes or str a TypeError, as is a custom
            serializer without a ``name`` to sign. Nothing is opened then.
        semidbm.error: as :func:`semidbm.open` raises it.

    >>> with semidbm.open_shelf("objects.db", serializer="json") as shelf:
    ...     shelf["point"] = {"x": 1, "y": [2, 3]}
    >>> with semidbm.open_shelf("objects.db", "r", serializer="json") as shelf:
    ...     shelf["point"]
    {'x': 1, 'y': [2, 3]}
    """
    # Refuse a bad option before touching the file.
    if key is None:
        make_serializer(serializer, protocol)
    else:
        SigningSerializer(serializer, key, protocol)
    database = _db.open(filename, flag, mode, **options)
    try:
        return Shelf(database, protocol, writeback, keyencoding, serializer=serializer, key=key)
    except BaseException:
        database.close()
        raise
