"""Signed shelves: ``open_shelf(..., key=)``, ``Shelf(..., key=)`` and ``SigningSerializer``.

Every refusal is checked to come before the serializer reads anything:
the serializers here are ``Recording`` ones, whose ``loads`` notes each
payload it is given, and a refused value must leave that list empty.
Each runs with the pickle, JSON and a custom serializer, on both kernels
where a database is involved.

Each safety check is named, in the docstring of the test that catches
it, by the mutation of the code that the test fails on ("Catches: ...");
each was made once by hand and seen to fail the test.
"""

import array
import ast
import hashlib
import hmac
import math
import os
import pickle
import shelve
import struct
import subprocess
import sys
import threading
import traceback
import types

import pytest

import semidbm
from semidbm import shelf as shelf_module
from semidbm.shelf import (
    MIN_KEY_SIZE,
    SIGNED_PREFIX,
    TAG_SIZE,
    Shelf,
    SigningSerializer,
    make_serializer,
)

from .conftest import kernel_name
from .support.cli import one_error_line, run
from .support.planted import RunsCode

#: The signing key of the tests, and another one.
KEY = bytes(range(32))
OTHER_KEY = bytes(range(100, 132))


class Literal:
    """A serializer of one's own: Python literals, read back with ``ast.literal_eval``."""

    name = "literal"

    def dumps(self, value):
        return repr(value)

    def loads(self, data):
        return ast.literal_eval(data.decode("utf-8"))


class Recording:
    """A serializer that notes every payload its ``loads`` is given, then reads it with ``inner``.

    It has ``inner``'s name, so it reads what ``inner`` signed.
    """

    def __init__(self, inner):
        self.inner = make_serializer(inner)
        self.name = getattr(self.inner, "name", None)
        self.loaded = []

    def dumps(self, value):
        return self.inner.dumps(value)

    def loads(self, data):
        self.loaded.append(bytes(data))
        return self.inner.loads(data)


#: The serializers each refusal is tried with.
SERIALIZERS = {"pickle": "pickle", "json": "json", "custom": Literal()}


@pytest.fixture(params=sorted(SERIALIZERS))
def serializer(request):
    """A fresh ``Recording`` serializer around pickle, JSON or ``Literal``."""
    return Recording(SERIALIZERS[request.param])


def signed_shelf(dbopen, dbpath, serializer, key=KEY, flag="c", **options):
    return Shelf(dbopen(dbpath, flag), serializer=serializer, key=key, **options)


def refused(shelf, key, reason):
    """Check that reading ``key`` raises DBMSignatureError for ``reason``, the serializer unread."""
    with pytest.raises(semidbm.DBMSignatureError, match="refused the value of %r" % key) as info:
        shelf[key]
    assert reason in info.value.reason
    assert shelf.serializer.loaded == []
    return info.value


def tag_of(key, name, stored_key, payload):
    """The tag as docs/signed-shelves.md defines it, computed here independently."""
    message = SIGNED_PREFIX
    for field in (name, stored_key, payload):
        message += struct.pack(">Q", len(field)) + field
    return hmac.new(key, message, hashlib.sha256).digest()


# --- what is stored, and the round trip ---


def test_round_trip_and_the_stored_layout(dbopen, dbpath, serializer):
    """The value reads back; the bytes stored are the documented layout, tag included.

    Catches: a tag that leaves out the stored key, the name or the
    prefix, or fields without their lengths, or in another order.
    """
    value = {"name": "\u00e9t\u00e9", "n": [1, 2.5, None, True]}
    with signed_shelf(dbopen, dbpath, serializer) as shelf:
        shelf["v"] = value
        assert shelf["v"] == value
    with dbopen(dbpath, "r") as database:
        stored = database[b"v"]
    name = serializer.name.encode()
    payload = serializer.inner.dumps(value)
    payload = payload.encode() if isinstance(payload, str) else payload
    assert stored == (
        SIGNED_PREFIX + bytes([len(name)]) + name + tag_of(KEY, name, b"v", payload) + payload
    )
    with signed_shelf(dbopen, dbpath, serializer, flag="r") as shelf:
        assert shelf["v"] == value


def test_a_str_key_signs_as_its_utf8_bytes(dbopen, dbpath):
    """A str signing key is its UTF-8 bytes; bytearray and memoryview are their bytes."""
    text = "cl\u00e9-secr\u00e8te-longue"
    with Shelf(dbopen(dbpath, "c"), key=text) as shelf:
        shelf["k"] = [1]
    for same in (text.encode(), bytearray(text.encode()), memoryview(text.encode())):
        with Shelf(dbopen(dbpath, "r"), key=same) as shelf:
            assert shelf["k"] == [1]


@pytest.mark.parametrize(
    "key, error, message",
    [
        (b"x" * (MIN_KEY_SIZE - 1), ValueError, "at least 16 bytes, not 15"),
        (b"", ValueError, "not 0"),
        ("\u00e9" * 7, ValueError, "not 14"),
        (12345678901234567890, TypeError, "not int"),
    ],
)
def test_a_key_that_cannot_serve_is_refused_before_the_file_is_touched(
    tmp_path, key, error, message
):
    """Catches: the minimum length not enforced; any type taken as a key."""
    with pytest.raises(error, match=message):
        semidbm.open_shelf(tmp_path / "s.db", key=key)
    assert not (tmp_path / "s.db").exists()


def test_a_str_key_that_is_no_utf8_is_refused_without_carrying_it(tmp_path):
    """A str key with a lone surrogate: a ValueError whose message, cause and context (its
    whole traceback) do not hold the key, before the file is touched.

    Found by the adversarial pass: the UnicodeEncodeError of its encoding
    escaped, its ``object`` the whole key. Catches: that error left to
    escape, or re-raised ``from None`` inside its handler (the context
    still holds it, only hidden from the printed traceback).
    """
    secret = "correct-horse-battery-\udcff-staple"
    with pytest.raises(ValueError, match="lone surrogate: give the key as bytes") as info:
        semidbm.open_shelf(tmp_path / "s.db", key=secret)
    error = info.value
    assert not isinstance(error, UnicodeError)
    assert error.__cause__ is None and error.__context__ is None
    printed = traceback.format_exception(type(error), error, error.__traceback__)  # 3.9's form
    assert "horse" not in "".join(printed)
    assert not (tmp_path / "s.db").exists()


def test_a_serializer_name_that_is_no_utf8_is_a_value_error():
    """Catches: the name's UnicodeEncodeError left to escape (a ValueError, but naming a codec)."""

    class Surrogate(Literal):
        name = "lit\udcff"

    with pytest.raises(ValueError, match="must be UTF-8 text, not 'lit\\\\udcff'"):
        SigningSerializer(Surrogate(), KEY)


def test_a_custom_serializer_needs_a_name_and_a_module_has_one(tmp_path):
    """The name is signed, so a serializer without one is refused; the json module is 'json'."""

    class Nameless:
        def dumps(self, value):
            return repr(value)

        def loads(self, data):
            return ast.literal_eval(data.decode())

    with pytest.raises(TypeError, match="needs a name"):
        semidbm.open_shelf(tmp_path / "s.db", serializer=Nameless(), key=KEY)
    assert not (tmp_path / "s.db").exists()
    import json

    with semidbm.open_shelf(tmp_path / "s.db", serializer=json, key=KEY) as shelf:
        shelf["k"] = {"a": 1}
    with semidbm.open_shelf(tmp_path / "s.db", serializer="json", key=KEY) as shelf:
        assert shelf["k"] == {"a": 1}


def test_a_signing_serializer_is_no_serializer_option(dbopen, dbpath):
    """Its dumps() takes the stored key: passing it as serializer= is refused, saying what to do."""
    with pytest.raises(TypeError, match="give the serializer it signs for, and key="):
        Shelf(dbopen(dbpath, "c"), serializer=SigningSerializer("json", KEY))


# --- the four refusals of the issue, before the deserializer ---


def test_a_value_written_by_another_process_without_the_key_is_refused(
    kernel, tmp_path, serializer
):
    """Another process plants a pickle that would create a file; the shelf refuses it unread.

    Catches: __getitem__ handing the value to the serializer without
    the check (the marker file appears, ``loaded`` is not empty); a
    check that accepts a value without the signed prefix.
    """
    path, marker = tmp_path / "s.db", tmp_path / "ran"
    with semidbm.open_shelf(path, serializer=serializer, key=KEY) as shelf:
        shelf["config"] = [1]
    plant = (
        "import os, pickle, semidbm\n"
        "class RunsCode:\n"
        "    def __reduce__(self):\n"
        "        return (os.mkdir, (%r,))\n"
        "with semidbm.open(%r, 'w') as db:\n"
        "    db[b'config'] = pickle.dumps(RunsCode())\n"
        "    db[b'forged'] = %r + bytes([6]) + b'pickle' + bytes(32) + pickle.dumps(RunsCode())\n"
        % (str(marker), str(path), SIGNED_PREFIX)
    )
    env = dict(os.environ)
    env.pop("SEMIDBM_PURE_PYTHON", None)
    if kernel_name(kernel) == "python":
        env["SEMIDBM_PURE_PYTHON"] = "1"
    subprocess.run([sys.executable, "-c", plant], env=env, check=True, timeout=60)
    with Shelf(semidbm.db.open_with(kernel, path, "r"), serializer=serializer, key=KEY) as shelf:
        refused(shelf, "config", "unsigned")
        refused(shelf, "forged", "does not match")
    assert not marker.exists()


def test_a_value_moved_to_another_key_is_refused(dbopen, dbpath, serializer):
    """Its raw bytes, signed under 'admin', copied under 'guest': refused, 'guest' unread.

    Catches: a tag that does not cover the stored key.
    """
    with signed_shelf(dbopen, dbpath, serializer) as shelf:
        shelf["admin"] = {"role": "admin"}
        shelf["guest"] = {"role": "guest"}
        shelf.dict[b"guest"] = shelf.dict[b"admin"]
        refused(shelf, "guest", "does not match")
        assert shelf["admin"] == {"role": "admin"}


def test_a_value_from_another_shelf_with_another_key_is_refused(
    dbopen, tmp_path, serializer
):
    """The same key's value, from a shelf signed with another key, copied in: refused.

    Catches: a tag that does not depend on the signing key (a plain
    SHA-256 of the fields), or a comparison that accepts any tag.
    """
    with Shelf(dbopen(tmp_path / "other.db", "c"), serializer="pickle", key=OTHER_KEY) as other:
        other["k"] = [1, 2]
        foreign = other.dict[b"k"]
    with signed_shelf(dbopen, tmp_path / "s.db", serializer) as shelf:
        shelf.dict[b"k"] = foreign
        refused(shelf, "k", "does not match")


def test_truncated_signatures_are_refused_at_every_length(dbopen, dbpath, serializer):
    """The signed value cut at every length short of whole: each refused, never read.

    Cut in the prefix, the value is unsigned; in the name or the tag, its
    signature is cut short; in the payload, the tag does not match.
    Catches: a check that reads the name or tag past the end of a short
    value, or that takes a short tag (compare_digest of a prefix).
    """
    with signed_shelf(dbopen, dbpath, serializer) as shelf:
        shelf["k"] = [1, 2, 3]
        whole = shelf.dict[b"k"]
        header = len(SIGNED_PREFIX) + 1 + len(serializer.name) + TAG_SIZE
        for length in range(len(whole)):
            shelf.dict[b"k"] = whole[:length]
            if length < len(SIGNED_PREFIX):
                reason = "unsigned"
            elif length < header:
                reason = "cut short (the value is %d bytes" % length
            else:
                reason = "does not match"
            refused(shelf, "k", reason)


# --- more refusals ---


def test_a_bit_flipped_anywhere_is_refused(dbopen, dbpath, serializer):
    """Each bit of the name, the tag and the payload flipped in turn: each value refused.

    Catches: a tag compared on part of its bytes; a payload or name not
    covered by the tag.
    """
    with signed_shelf(dbopen, dbpath, serializer) as shelf:
        shelf["k"] = "value"
        whole = bytearray(shelf.dict[b"k"])
        for index in range(len(SIGNED_PREFIX) + 1, len(whole)):
            for bit in range(8):
                flipped = bytearray(whole)
                flipped[index] ^= 1 << bit
                shelf.dict[b"k"] = bytes(flipped)
                with pytest.raises(semidbm.DBMSignatureError):
                    shelf["k"]
        assert serializer.loaded == []


def test_the_wrong_key_is_refused(dbopen, dbpath, serializer):
    with signed_shelf(dbopen, dbpath, serializer) as shelf:
        shelf["k"] = [1]
    with signed_shelf(dbopen, dbpath, serializer, key=OTHER_KEY, flag="r") as shelf:
        error = refused(shelf, "k", "signed with another key")
    assert isinstance(error, semidbm.error) and isinstance(error, semidbm.DBMError)


def test_a_value_relabelled_for_another_serializer_is_refused(dbopen, dbpath):
    """A JSON value whose name field is rewritten to 'pickle', tag kept: refused by a pickle shelf.

    Catches: a tag that does not cover the serializer's name (the value
    would then be handed to pickle).
    """
    reader = Recording("pickle")
    with Shelf(dbopen(dbpath, "c"), serializer="json", key=KEY) as shelf:
        shelf["k"] = [1]
        stored = shelf.dict[b"k"]
    start = len(SIGNED_PREFIX) + 1
    tag_and_payload = stored[start + len(b"json") :]
    with Shelf(dbopen(dbpath, "w"), serializer=reader, key=KEY) as shelf:
        shelf.dict[b"k"] = SIGNED_PREFIX + bytes([6]) + b"pickle" + tag_and_payload
        refused(shelf, "k", "does not match")
        shelf.dict[b"k"] = stored  # authentic, but for JSON: refused, saying so
        refused(shelf, "k", "signed for the 'json' serializer, not for 'pickle'")


def test_fields_are_length_prefixed(dbopen, dbpath):
    """A tag made for key 'ab' and payload P is refused for key 'a' and payload 'b' + P.

    Catches: the fields of the MAC's input joined without their lengths.
    """
    reader = Recording(Literal())
    with Shelf(dbopen(dbpath, "c"), serializer=reader, key=KEY) as shelf:
        shelf["ab"] = 1
        stored = shelf.dict[b"ab"]
        header = len(SIGNED_PREFIX) + 1 + len(b"literal")
        tag, payload = stored[header : header + TAG_SIZE], stored[header + TAG_SIZE :]
        shelf.dict[b"a"] = stored[:header] + tag + b"b" + payload
        refused(shelf, "a", "does not match")


def test_the_tag_is_compared_in_constant_time(dbopen, dbpath, monkeypatch):
    """Every read compares its tag with hmac.compare_digest, whole, right or wrong.

    Catches: the tag compared with ``==`` (which stops at the first byte
    that differs, and so tells by its time how much of a forgery is right).
    """
    compared = []

    def compare_digest(a, b):
        compared.append((bytes(a), bytes(b)))
        return original(a, b)

    original = hmac.compare_digest
    with Shelf(dbopen(dbpath, "c"), key=KEY) as shelf:
        shelf["k"] = [1]
        monkeypatch.setattr(shelf_module.hmac, "compare_digest", compare_digest)
        assert shelf["k"] == [1]
        stored = shelf.dict[b"k"]
        shelf.dict[b"k"] = stored[:-1] + bytes([stored[-1] ^ 1])
        with pytest.raises(semidbm.DBMSignatureError):
            shelf["k"]
    assert len(compared) == 2 and all(len(a) == len(b) == TAG_SIZE for a, b in compared)


# --- with and without a key ---


def test_an_unsigned_value_is_refused_saying_so(dbopen, dbpath, serializer):
    """A value written by a shelf without a key, read by one with it: refused as unsigned.

    Catches: the check skipped for values without the prefix.
    """
    with Shelf(dbopen(dbpath, "c"), serializer=serializer) as shelf:
        shelf["k"] = [1]
    with signed_shelf(dbopen, dbpath, serializer, flag="r") as shelf:
        refused(shelf, "k", "it is unsigned")


def test_a_shelf_without_a_key_refuses_signed_values(dbopen, dbpath, serializer):
    """Without a key a signed value cannot be checked: refused, unread, naming the remedy.

    Catches: the prefix check of a shelf without a key removed (the
    serializer would be handed the signed bytes).
    """
    with signed_shelf(dbopen, dbpath, serializer) as shelf:
        shelf["k"] = [1]
    with Shelf(dbopen(dbpath, "r"), serializer=serializer) as shelf:
        refused(shelf, "k", "open the shelf with its key")


def test_a_signed_shelf_opened_without_its_key_reads_unsigned_values(dbopen, dbpath, tmp_path):
    """Nothing marks a database as signed: opened without the key, only signed values are
    refused, and an unsigned pickle planted beside them runs.

    What docs/signed-shelves.md says, "With and without a key" (found by
    the adversarial pass: it said that such a shelf refused every value).
    Fails if that changes, so that the page is changed with it.
    """
    marker = tmp_path / "ran"
    with Shelf(dbopen(dbpath, "c"), key=KEY) as shelf:
        shelf["config"] = {"retries": 3}
        shelf.dict[b"planted"] = pickle.dumps(RunsCode(marker))
    with Shelf(dbopen(dbpath, "r")) as shelf:
        with pytest.raises(semidbm.DBMSignatureError, match="open the shelf with its key"):
            shelf["config"]
        shelf["planted"]
    assert marker.is_dir()


def test_a_shelf_without_a_key_refuses_to_store_what_would_read_as_signed(dbopen, dbpath):
    """Catches: the write-side check removed (the value would be stored, then never read back)."""

    class Raw:
        name = "raw"

        def dumps(self, value):
            return value

        def loads(self, data):
            return data

    with Shelf(dbopen(dbpath, "c"), serializer=Raw()) as shelf:
        with pytest.raises(ValueError, match="start as a signed value does"):
            shelf["k"] = SIGNED_PREFIX + b"anything"
        assert "k" not in shelf
        shelf["k"] = SIGNED_PREFIX[:-1]
        assert shelf["k"] == SIGNED_PREFIX[:-1]


def test_the_same_key_in_two_shelves_makes_their_values_interchangeable(tmp_path):
    """Documented: the signature binds the signing key, the stored key and the serializer only.

    A value copied from a shelf with the same signing key, under the same
    key, is accepted; so is an older value put back. One signing key per
    shelf keeps shelves apart.
    """
    with semidbm.open_shelf(tmp_path / "a.db", key=KEY) as first:
        first["k"] = "from a"
        old = first.dict[b"k"]
        first["k"] = "newer"
        first.dict[b"k"] = old
        assert first["k"] == "from a"
    with semidbm.open_shelf(tmp_path / "b.db", key=KEY) as second:
        second.dict[b"k"] = old
        assert second["k"] == "from a"


def test_the_stored_key_is_signed_as_encoded(dbopen, dbpath):
    """keyencoding changes the stored key's bytes, which the tag covers.

    A value stored under 'é' in latin-1 (b'\\xe9') and copied under its
    UTF-8 bytes is refused by a UTF-8 shelf; read with the same encoding,
    it is accepted.
    """
    with Shelf(dbopen(dbpath, "c"), key=KEY, keyencoding="latin-1") as shelf:
        shelf["\u00e9"] = 1
        shelf.dict["\u00e9".encode("utf-8")] = shelf.dict[b"\xe9"]
    with Shelf(dbopen(dbpath, "r"), key=KEY, keyencoding="latin-1") as shelf:
        assert shelf["\u00e9"] == 1
    with Shelf(dbopen(dbpath, "r"), key=KEY) as shelf:
        with pytest.raises(semidbm.DBMSignatureError, match="does not match"):
            shelf["\u00e9"]


# --- the mapping methods ---


def test_mapping_methods_refuse_a_planted_value_and_change_nothing(dbopen, dbpath, serializer):
    """get, pop, setdefault, popitem, items and values raise; in, len and iteration read no value.

    A refused value is never taken for a missing one (get's default,
    setdefault's write), and pop leaves the key. Catches: a
    DBMSignatureError caught as a KeyError anywhere.
    """
    with signed_shelf(dbopen, dbpath, serializer) as shelf:
        shelf["planted"] = "placeholder"
        shelf.dict[b"planted"] = pickle.dumps("planted")
        for call in (
            lambda: shelf.get("planted", "default"),
            lambda: shelf.pop("planted"),
            lambda: shelf.pop("planted", "default"),
            lambda: shelf.setdefault("planted", "default"),
            lambda: shelf.popitem(),
            lambda: list(shelf.items()),
            lambda: list(shelf.values()),
            lambda: shelf == {"planted": "planted"},
        ):
            with pytest.raises(semidbm.DBMSignatureError):
                call()
        assert "planted" in shelf and list(shelf) == ["planted"] and len(shelf) == 1
        assert shelf.dict[b"planted"] == pickle.dumps("planted")
        assert serializer.loaded == []


def test_clear_removes_planted_values_without_reading_them(dbopen, dbpath, serializer):
    """Catches: clear() left to MutableMapping, which pops each item and so reads it."""
    with signed_shelf(dbopen, dbpath, serializer, writeback=True) as shelf:
        shelf["good"] = [1]  # cached
        shelf.dict[b"planted"] = pickle.dumps("planted")  # not cached
        shelf.clear()
        assert len(shelf) == 0 and not shelf.cache
        assert serializer.loaded == []


def test_writeback_signs_what_it_writes_back_and_never_caches_a_refusal(
    dbopen, dbpath, serializer
):
    """Catches: a write-back that stores unsigned bytes; a refused value cached."""
    with signed_shelf(dbopen, dbpath, serializer, writeback=True) as shelf:
        shelf["list"] = [1]
        shelf["list"].append(2)
        shelf.dict[b"planted"] = b"[1]"
        for _ in range(2):
            with pytest.raises(semidbm.DBMSignatureError):
                shelf["planted"]
        assert "planted" not in shelf.cache
    with signed_shelf(dbopen, dbpath, serializer, flag="r") as shelf:
        assert shelf["list"] == [1, 2]


def test_a_writeback_json_shelf_keeps_a_signed_nan_it_did_not_change(tmp_path):
    """A value holding NaN, signed by the json module (which writes NaN), read through a strict
    JSON shelf with writeback and left unchanged: closing writes it back as it is stored.

    Catches: the signed branch of ``Shelf._stored_as_it_is`` removed
    (``MUT=stored_as_it_is``: the signed bytes compared as JSON text
    never match, so close() raised the strict serializer's refusal).
    """
    import json

    path = tmp_path / "s.db"
    with semidbm.open_shelf(path, serializer=json, key=KEY) as shelf:
        shelf["x"] = [float("nan")]
    with semidbm.open_shelf(path, serializer="json", key=KEY, writeback=True) as shelf:
        assert math.isnan(shelf["x"][0])
    with semidbm.open_shelf(path, "r", serializer=json, key=KEY) as shelf:
        assert math.isnan(shelf["x"][0])


def test_empty_payloads_and_empty_values(dbopen, dbpath):
    """A serializer's empty payload is signed like any other; an empty stored value is unsigned."""
    reader = Recording(Literal())
    reader.inner.dumps = lambda value: b""
    reader.inner.loads = lambda data: "empty" if data == b"" else "?"
    with Shelf(dbopen(dbpath, "c"), serializer=reader, key=KEY) as shelf:
        shelf["k"] = "anything"
        assert shelf["k"] == "empty"
        reader.loaded.clear()
        shelf.dict[b"k"] = b""
        refused(shelf, "k", "unsigned")


def test_a_large_value(dbopen, dbpath):
    """A value of 20 MB signs and reads back; its last byte changed, it is refused."""
    value = os.urandom(20 * 1024 * 1024)
    with Shelf(dbopen(dbpath, "c"), key=KEY) as shelf:
        shelf["big"] = value
        assert shelf["big"] == value
        stored = shelf.dict[b"big"]
        shelf.dict[b"big"] = stored[:-1] + bytes([stored[-1] ^ 0x80])
        with pytest.raises(semidbm.DBMSignatureError, match="does not match"):
            shelf["big"]


class Ints:
    """A serializer whose dumps() returns a memoryview of 4-byte ints: 3 items are 12 bytes."""

    name = "ints"

    def dumps(self, value):
        return memoryview(array.array("i", value))

    def loads(self, data):
        return list(array.array("i", data))


def test_a_memoryview_payload_is_signed_by_its_bytes(dbopen, dbpath):
    """A payload of multi-byte items is signed with its length in bytes, as it is stored.

    Found by the adversarial pass. Catches: a field's length in the MAC
    counted with len() (items, not bytes): a shelf whose serializer
    returns memoryview(array('i', ...)) refused its own values, and a
    payload signed as such a memoryview did not check as its bytes.
    """
    with Shelf(dbopen(dbpath, "c"), serializer=Ints(), key=KEY) as shelf:
        shelf["k"] = [1, 2, 3]
        assert shelf["k"] == [1, 2, 3]
    signing = SigningSerializer(Ints(), KEY)
    payload = memoryview(array.array("i", [7, 8]))
    signed = signing.sign(memoryview(b"k"), payload)
    assert signing.check(b"k", signed) == payload.tobytes()
    assert signed[-TAG_SIZE - payload.nbytes : -payload.nbytes] == tag_of(
        KEY, b"ints", b"k", payload.tobytes()
    )


# --- the key stays out of pickles and reprs ---


def test_a_signed_shelf_and_its_serializer_refuse_to_be_pickled(dbopen, dbpath):
    """Catches: a shelf or SigningSerializer that pickles (the pickle would carry the key)."""
    with Shelf(dbopen(dbpath, "c"), key=KEY) as shelf:
        shelf["k"] = 1
        with pytest.raises(TypeError, match="would carry the key"):
            pickle.dumps(shelf)
        with pytest.raises(TypeError, match="would carry its signing key"):
            pickle.dumps(shelf.signing)


#: A signing key of printable bytes, which a repr or str that held it would show as they are.
PRINTABLE_KEY = b"printable-signing-key-0123456789"


def exposures(obj, key):
    """Where ``obj`` shows the signing ``key``: the names of the attributes (in its ``__dict__``
    or ``__slots__``) whose value holds its bytes or shows them, and ``repr`` or ``str`` if
    those do.

    A key is shown by its repr (``b'...'``), its hex, or its text (a
    printable key, in a str or in a repr of anything holding it).
    """
    shown = (repr(key), key.hex(), key.decode("latin-1"))
    found = [name for name, text in (("repr", repr(obj)), ("str", str(obj)))
             if any(each in text for each in shown)]
    names = list(getattr(obj, "__dict__", ()))
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    for name in names:
        value = getattr(obj, name, None)
        if isinstance(value, (bytes, bytearray, memoryview)) and key in bytes(value):
            found.append(name)
        elif any(each in repr(value) or each in str(value) for each in shown):
            found.append(name)
    return found


def test_exposures_finds_a_key_wherever_it_is_held():
    """The check below can fail: a key held in an attribute, a slot or a repr is found."""

    class Slotted:
        __slots__ = ("secret",)

        def __init__(self, secret):
            self.secret = secret

    class Shown:
        def __repr__(self):
            return "<key %r>" % KEY

    assert exposures(types.SimpleNamespace(kept=bytearray(PRINTABLE_KEY)), PRINTABLE_KEY) == [
        "repr", "str", "kept",
    ]
    assert exposures(Slotted(PRINTABLE_KEY.decode()), PRINTABLE_KEY) == ["secret"]
    assert exposures(types.SimpleNamespace(inner=[PRINTABLE_KEY]), PRINTABLE_KEY) == [
        "repr", "str", "inner",
    ]
    assert exposures(Shown(), KEY) == ["repr", "str"]


@pytest.mark.parametrize(
    "key", [KEY, PRINTABLE_KEY, PRINTABLE_KEY.decode()], ids=["bytes", "printable", "str"]
)
def test_no_attribute_repr_or_pickle_shows_the_key(dbopen, dbpath, key):
    """The shelf, its SigningSerializer and their _Signing hold the key in no attribute or
    slot, and show it in no repr or str; a pickle of any is refused without quoting it.

    Found by the adversarial pass: the check was ``KEY in repr(value)``,
    which a repr (text, never the raw bytes) could not fail. Catches:
    the key kept on the shelf (``MUT=key_in_vars``), shown by the
    SigningSerializer's repr (``MUT=key_in_repr``), or kept by either
    in a slot.
    """
    raw = key.encode() if isinstance(key, str) else key
    with Shelf(dbopen(dbpath, "c"), key=key) as shelf:
        held = (shelf, shelf.signing, shelf.signing._signing)
        for each in held:
            assert exposures(each, raw) == [], each
            with pytest.raises(TypeError) as refusal:
                pickle.dumps(each)
            assert exposures(refusal.value, raw) == []


def test_a_signing_serializer_serves_any_store_of_bytes_keys():
    """What the memoizing cache will use: dumps and loads with the stored key, no shelf."""
    signing = SigningSerializer("json", KEY)
    data = signing.dumps(b"memo:abc", {"result": 42})
    assert signing.loads(b"memo:abc", data) == {"result": 42}
    with pytest.raises(semidbm.DBMSignatureError, match="b'memo:abd'"):
        signing.loads(b"memo:abd", data)
    assert repr(signing) == "<semidbm.shelf.SigningSerializer for the 'json' serializer>"


def test_open_shelf_with_a_key(tmp_path):
    with semidbm.open_shelf(tmp_path / "s.db", "c", protocol=2, key=KEY) as shelf:
        assert isinstance(shelf, shelve.Shelf) and shelf.signing.name == "pickle"
        shelf["k"] = (1, 2)
    with semidbm.open_shelf(tmp_path / "s.db", "r", key=KEY) as shelf:
        assert shelf["k"] == (1, 2)


# --- semidbm verify --key-file ---


@pytest.fixture
def key_file(tmp_path):
    """A file holding ``KEY`` that only its owner can read, as a key file should be."""
    path = tmp_path / "shelf.key"
    path.write_bytes(KEY)
    path.chmod(0o600)
    return path


def test_verify_with_a_key_file_passes_a_signed_shelf(tool, tmp_path, key_file):
    path = tmp_path / "s.db"
    with semidbm.open_shelf(path, serializer="json", key=KEY) as shelf:
        shelf["a"], shelf["b"] = 1, [2]
    result = run(tool, "verify", "--key-file", key_file, path)
    assert result.returncode == 0, result
    assert result.stdout.decode().splitlines()[-1] == (
        "ok: every signature matches (2 values, for the 'json' serializer)"
    )
    result = run(tool, "verify", "--key-file", key_file, "--serializer", "json", path)
    assert result.returncode == 0, result


def test_verify_refuses_values_of_several_serializers_and_checks_the_one_named(
    tool, tmp_path, key_file
):
    """A value signed for another serializer than the shelf's, which the shelf refuses.

    Found by the adversarial pass: verify took each value's name as it
    came, so a JSON-signed value moved into a pickle shelf passed.
    Catches: ``--serializer`` ignored (the name not passed on to the
    check), and mixed serializers passing without it.
    """
    path = tmp_path / "s.db"
    with semidbm.open_shelf(path, serializer="json", key=KEY) as shelf:
        shelf["a"], shelf["b"] = 1, [2]
    with semidbm.open_shelf(path, serializer=Literal(), key=KEY) as shelf:
        shelf["c"] = {3}
    result = run(tool, "verify", "--key-file", key_file, path)
    assert result.returncode == 3, result
    assert result.stdout.decode().splitlines()[1:] == [
        "signed for 2 serializers: 'json' 2 values, 'literal' 1 value; a shelf reads one "
        "serializer's values (name it with --serializer to list the others)"
    ]
    result = run(tool, "verify", "--key-file", key_file, "--serializer", "json", path)
    assert result.returncode == 3, result
    assert result.stdout.decode().splitlines()[1:] == [
        "bad signature: key b'c': it was signed for the 'literal' serializer, not for 'json'",
        "refused signatures: 1 of 3 values",
    ]
    result = run(tool, "verify", "--key-file", key_file, "--serializer", "pickle", path)
    assert result.stdout.decode().splitlines()[-1] == "refused signatures: 3 of 3 values"


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--serializer", "json"], "--serializer names what --key-file checks"),
        (["--key-file", "KEY", "--serializer", ""], "name is 1 to 255 bytes in UTF-8, not 0"),
    ],
)
def test_verify_refuses_a_serializer_it_cannot_check_for(tool, tmp_path, key_file, arguments,
                                                          message):
    """--serializer without --key-file, or a name no value can carry: bad arguments (status 2)."""
    arguments = [key_file if each == "KEY" else each for each in arguments]
    result = run(tool, "verify", *arguments, tmp_path / "missing.db")
    assert result.returncode == 2, result
    assert message in result.stderr.decode()


def test_verify_lists_refused_values_by_key_with_status_3(tool, tmp_path, key_file):
    """Catches: a verify that ignores --key-file, or exits 0 with refusals."""
    path = tmp_path / "s.db"
    with semidbm.open_shelf(path, key=KEY) as shelf:
        shelf["good"] = 1
        shelf["moved"] = 2
        shelf.dict[b"moved"] = shelf.dict[b"good"]
        shelf.dict[b"plain"] = pickle.dumps(3)
        shelf.dict[b"cut"] = shelf.dict[b"good"][:20]
    result = run(tool, "verify", "--key-file", key_file, path)
    assert result.returncode == 3, result
    lines = result.stdout.decode().splitlines()
    assert lines[0].startswith("ok: every checksum matches")
    assert sorted(lines[1:4]) == [
        "bad signature: key b'cut': its signature is cut short (the value is 20 bytes, too few "
        "for a name and a tag)",
        "bad signature: key b'moved': its signature does not match: it was signed with another "
        "key, or for another key of the database, or it was changed since",
        "bad signature: key b'plain': it is unsigned (written by a shelf without a key, or by "
        "another program)",
    ]
    assert lines[4:] == ["refused signatures: 3 of 4 values"]


def test_verify_lists_at_most_20_refusals(tool, tmp_path, key_file):
    path = tmp_path / "s.db"
    with semidbm.open(path, "c") as database:
        for number in range(25):
            database[b"k%d" % number] = b"plain"
    result = run(tool, "verify", "--key-file", key_file, path)
    assert result.returncode == 3
    lines = result.stdout.decode().splitlines()
    assert sum(line.startswith("bad signature") for line in lines) == 20
    assert lines[-2:] == ["... and 5 more", "refused signatures: 25 of 25 values"]


@pytest.mark.parametrize(
    "content, message",
    [
        (b"secret\n", "a signing key needs at least 16 bytes, not 7: make one with "
         "secrets.token_bytes(32)"),
        (bytes(4097), "more than 4096 bytes, too many for a signing key"),
    ],
)
def test_verify_refuses_a_key_file_that_cannot_serve_before_reading_the_database(
    tool, tmp_path, content, message
):
    """A key too short, or a file too long (read no further than its limit): bad arguments.

    Found by the adversarial pass: the file was read whole (``--key-file
    /dev/zero`` ran out of memory). Catches: the size limit removed (a
    key of 4,097 bytes taken), and a refusal that exits 1, not 2.
    """
    refused = tmp_path / "refused.key"
    refused.write_bytes(content)
    result = run(tool, "verify", "--key-file", refused, tmp_path / "missing.db")
    assert one_error_line(result, status=2) == (
        "semidbm verify: error: --key-file %s: %s (see semidbm verify --help)" % (refused, message)
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="a named pipe is POSIX's")
def test_verify_reads_a_key_file_no_further_than_its_limit(tool, tmp_path):
    """A key file that never ends (a pipe kept open, as ``/dev/zero``): refused after 4,097 bytes.

    Catches: the whole file read, then its length checked (the read
    waits for an end that never comes, and the command times out).
    """
    endless = tmp_path / "endless.key"
    os.mkfifo(endless, 0o600)
    done = threading.Event()

    def write_and_hold():
        with open(endless, "wb") as pipe:
            pipe.write(bytes(8192))
            pipe.flush()
            done.wait(30)

    writer = threading.Thread(target=write_and_hold)
    writer.start()
    try:
        result = subprocess.run(
            tool + ["verify", "--key-file", os.fspath(endless), os.fspath(tmp_path / "x.db")],
            capture_output=True, timeout=20,
        )
    finally:
        done.set()
        # A reader of its own, so that a writer still waiting for one (the command failed
        # before it opened the pipe) goes on, and ends.
        reader = os.open(endless, os.O_RDONLY | os.O_NONBLOCK)
        writer.join()
        os.close(reader)
    assert result.returncode == 2, result
    assert b"more than 4096 bytes" in result.stderr


def test_verify_takes_a_key_file_of_4096_bytes(tool, tmp_path):
    key_file = tmp_path / "long.key"
    key_file.write_bytes(b"k" * 4096)
    key_file.chmod(0o600)
    path = tmp_path / "s.db"
    with semidbm.open_shelf(path, key=b"k" * 4096) as shelf:
        shelf["k"] = 1
    result = run(tool, "verify", "--key-file", key_file, path)
    assert result.returncode == 0, result
    assert result.stderr == b""


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX's")
def test_verify_warns_of_a_key_file_that_others_can_read(tool, tmp_path, key_file):
    """Catches: no warning for a key file of mode 0644 (or 0640), or one for mode 0600."""
    path = tmp_path / "s.db"
    with semidbm.open_shelf(path, key=KEY) as shelf:
        shelf["k"] = 1
    assert run(tool, "verify", "--key-file", key_file, path).stderr == b""
    for mode in (0o644, 0o640):
        key_file.chmod(mode)
        result = run(tool, "verify", "--key-file", key_file, path)
        assert result.returncode == 0, result
        assert result.stderr.decode() == (
            "semidbm: warning: %s can be read by other users (mode %04o): whoever reads it can "
            "sign values; chmod 600 it\n" % (key_file, mode)
        )


def test_verify_takes_the_key_files_bytes_as_they_are(tool, tmp_path):
    """A newline at the end of the file is part of the key: no stripping guesses at it."""
    path, key_file = tmp_path / "s.db", tmp_path / "shelf.key"
    key_file.write_bytes(KEY + b"\n")
    with semidbm.open_shelf(path, key=KEY + b"\n") as shelf:
        shelf["k"] = 1
    assert run(tool, "verify", "--key-file", key_file, path).returncode == 0
    key_file.write_bytes(KEY)
    assert run(tool, "verify", "--key-file", key_file, path).returncode == 3


def test_verify_of_a_database_it_cannot_open_still_exits_3(tool, tmp_path, key_file):
    """A corrupt record keeps the database from opening: the signatures are not checked, said so.

    Found by the adversarial pass: the open's error ended verify with
    status 1, hiding the damage its first pass had reported. Catches:
    the open's error left to the command's error handling.
    """
    path = tmp_path / "s.db"
    with semidbm.open_shelf(path, key=KEY) as shelf:
        shelf["k"] = 1
    data = bytearray((path / "data").read_bytes())
    data[8:12] = b"\xff\xff\xff\xf0"
    (path / "data").write_bytes(bytes(data))
    result = run(tool, "verify", "--key-file", key_file, path)
    assert result.returncode == 3, result
    lines = result.stdout.decode().splitlines()
    assert lines[-1].startswith("signatures not checked: ")
    assert lines[-1].endswith("corrupt record at offset 8 (key length -16, value length 0)")


def test_verify_cuts_long_keys(tool, tmp_path, key_file):
    """A refused key of 100,000 bytes is shown by its first 80 and its length, not whole."""
    path = tmp_path / "s.db"
    with semidbm.open(path, "c") as database:
        database[b"x" * 100_000] = b"plain"
    result = run(tool, "verify", "--key-file", key_file, path)
    assert result.returncode == 3
    line = result.stdout.decode().splitlines()[1]
    assert line.startswith("bad signature: key %r... (100,000 bytes): it is unsigned" % (b"x" * 80))


def test_a_signed_value_is_no_pickle_nor_json(dbopen, dbpath):
    """The prefix's first byte, 0, starts no pickle and no JSON text.

    So even a plain ``shelve.Shelf``, which knows nothing of signatures,
    refuses a signed value without running any of it.
    """
    with Shelf(dbopen(dbpath, "c"), key=KEY) as shelf:
        shelf["k"] = [1]
    with shelve.Shelf(dbopen(dbpath, "r")) as plain:
        with pytest.raises(pickle.UnpicklingError, match="invalid load key"):
            plain["k"]
    with pytest.raises(ValueError):
        __import__("json").loads(SIGNED_PREFIX + b"[1]")


def test_a_bytearray_key_changed_after_the_open_changes_nothing(dbopen, dbpath):
    """The key is copied when the shelf is made: the caller mutating its bytearray is no attack."""
    key = bytearray(KEY)
    with Shelf(dbopen(dbpath, "c"), key=key) as shelf:
        key[:] = bytes(len(key))
        shelf["k"] = [1]
    with Shelf(dbopen(dbpath, "r"), key=KEY) as shelf:
        assert shelf["k"] == [1]
