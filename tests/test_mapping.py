"""The db object as a mapping: the stdlib dbm contract, types, errors, closing."""

import array
import collections.abc
import os

import pytest

import semidbm
from semidbm import _checkpoint


@pytest.fixture
def db(dbopen, dbpath):
    database = dbopen(dbpath, "c")
    yield database
    database.close()


def test_is_a_mutable_mapping(db):
    assert isinstance(db, collections.abc.MutableMapping)


def test_set_get_contains_len(db):
    db[b"one"] = b"1"
    db[b"two"] = b"22"
    assert db[b"one"] == b"1"
    assert db[b"two"] == b"22"
    assert b"one" in db and b"three" not in db
    assert len(db) == 2


def test_update_replaces_value(db):
    db[b"k"] = b"old"
    db[b"k"] = b"new value"
    assert db[b"k"] == b"new value"
    assert len(db) == 1


def test_delete(db):
    db[b"k"] = b"v"
    del db[b"k"]
    assert b"k" not in db
    assert len(db) == 0
    with pytest.raises(KeyError):
        db[b"k"]


def test_missing_key_is_key_error_and_writes_nothing(db, dbpath):
    db[b"k"] = b"v"
    db.sync()
    size = os.path.getsize(dbpath / "data")
    with pytest.raises(KeyError):
        db[b"missing"]
    with pytest.raises(KeyError):
        del db[b"missing"]
    db.sync()
    assert os.path.getsize(dbpath / "data") == size


def test_str_keys_and_values_are_utf8(db):
    db["clé"] = "välue ✓"
    assert db["clé".encode("utf-8")] == "välue ✓".encode("utf-8")
    assert db["clé"] == "välue ✓".encode("utf-8")
    assert "clé" in db
    assert db.keys() == ["clé".encode("utf-8")]
    del db["clé"]
    assert len(db) == 0


@pytest.mark.parametrize(
    "value",
    [bytearray(b"abc"), memoryview(b"xabcx")[1:4], array.array("B", b"abc")],
    ids=["bytearray", "memoryview", "array"],
)
def test_bytes_like_values_and_keys(db, value):
    db[value] = value
    assert db[b"abc"] == b"abc"
    assert type(db[b"abc"]) is bytes
    assert value in db


def test_multibyte_array_is_stored_as_its_bytes(db):
    numbers = array.array("i", [1, 2, 3])
    db[b"n"] = numbers
    assert db[b"n"] == numbers.tobytes()


@pytest.mark.parametrize("bad", [1, 1.5, None, ["a"], object()], ids=lambda v: type(v).__name__)
def test_bad_key_type_is_type_error_naming_it(db, bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        db[bad] = b"v"
    with pytest.raises(TypeError, match=type(bad).__name__):
        db[bad]
    with pytest.raises(TypeError, match=type(bad).__name__):
        bad in db  # noqa: B015 (the operator itself must raise)
    with pytest.raises(TypeError, match=type(bad).__name__):
        del db[bad]
    assert len(db) == 0


@pytest.mark.parametrize("bad", [1, 1.5, None, ["a"], object()], ids=lambda v: type(v).__name__)
def test_bad_value_type_is_type_error_naming_it(db, dbpath, bad):
    db.sync()
    with pytest.raises(TypeError, match=type(bad).__name__):
        db[b"k"] = bad
    assert b"k" not in db
    db.sync()
    assert os.path.getsize(dbpath / "data") == _checkpoint.START_SIZE


def test_empty_key_and_empty_value(db, dbopen, dbpath):
    db[b""] = b""
    db[b"k"] = b""
    assert db[b""] == b"" and db[b"k"] == b""
    db.close()
    with dbopen(dbpath) as again:
        assert dict(again.items()) == {b"": b"", b"k": b""}


def test_values_come_back_as_bytes_after_reopen(db, dbopen, dbpath):
    db["s"] = "text"
    db[b"b"] = bytearray(b"raw")
    db.close()
    with dbopen(dbpath) as again:
        assert type(again["s"]) is bytes and type(again[b"b"]) is bytes


def test_keys_is_a_list(db):
    db[b"a"] = b"1"
    db[b"b"] = b"2"
    keys = db.keys()
    assert type(keys) is list
    assert sorted(keys) == [b"a", b"b"]


def test_values_and_items_follow_keys(db):
    for i in range(20):
        db[b"k%d" % i] = b"v%d" % i
    keys = db.keys()
    assert db.values() == [db[k] for k in keys]
    assert db.items() == list(zip(keys, db.values()))


def test_iteration_yields_keys(db):
    expected = {b"k%d" % i for i in range(50)}
    for key in expected:
        db[key] = key
    assert set(db) == expected
    assert set(iter(db)) == expected


def test_iteration_sees_deletes_and_updates(db):
    for i in range(10):
        db[b"k%d" % i] = b"x"
    del db[b"k3"]
    db[b"k4"] = b"y"
    assert len(list(db)) == 9
    assert b"k3" not in list(db)


def test_resizing_during_iteration_is_runtime_error(db):
    for i in range(10):
        db[b"k%d" % i] = b"x"
    with pytest.raises(RuntimeError):
        for key in db:
            db[key + b"-new"] = b"y"


def test_get_setdefault_pop_update_clear(db):
    assert db.get(b"a") is None
    assert db.get(b"a", b"dflt") == b"dflt"
    assert db.setdefault(b"a", b"1") == b"1"
    assert db.setdefault(b"a", b"2") == b"1"
    db.update({b"b": b"2", "c": "3"}, d=b"4")
    assert db.pop(b"b") == b"2"
    assert db.pop(b"b", None) is None
    with pytest.raises(KeyError):
        db.pop(b"b")
    assert dict(db.items()) == {b"a": b"1", b"c": b"3", b"d": b"4"}
    db.clear()
    assert len(db) == 0 and db.keys() == []


def test_clear_survives_reopen(db, dbopen, dbpath):
    db.update({b"a": b"1", b"b": b"2"})
    db.clear()
    db.close()
    with dbopen(dbpath) as again:
        assert len(again) == 0


def test_context_manager_closes(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"a"] = b"1"
    assert db.closed
    with pytest.raises(semidbm.error):
        db[b"a"]


def test_every_operation_on_closed_db_is_module_error(db):
    db[b"a"] = b"1"
    db.close()
    operations = [
        lambda: db[b"a"],
        lambda: db.__setitem__(b"a", b"2"),
        lambda: db.__delitem__(b"a"),
        lambda: b"a" in db,
        lambda: len(db),
        lambda: list(db),
        db.keys,
        db.values,
        db.items,
        lambda: db.get(b"a"),
        lambda: db.pop(b"a"),
        lambda: db.setdefault(b"a", b"1"),
        lambda: db.update({b"b": b"2"}),
        db.clear,
        db.sync,
        db.compact,
    ]
    for operation in operations:
        with pytest.raises(semidbm.error, match="closed"):
            operation()


def test_closing_twice_is_fine(db):
    db.close()
    db.close()
    db.close(compact=True)
    assert db.closed


def test_close_during_iteration_is_module_error(db):
    db[b"a"] = b"1"
    db[b"b"] = b"2"
    iterator = iter(db)
    next(iterator)
    db.close()
    with pytest.raises(semidbm.error):
        next(iterator)


def test_read_only_refuses_writes_and_compact(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"a"] = b"1"
    before = (dbpath / "data").read_bytes()
    with dbopen(dbpath, "r") as db:
        for operation in [
            lambda: db.__setitem__(b"b", b"2"),
            lambda: db.__delitem__(b"a"),
            lambda: db.__delitem__(b"missing"),
            lambda: db.update({b"b": b"2"}),
            lambda: db.pop(b"a"),
            db.clear,
            db.compact,
            db.reorganize,
            lambda: db.close(compact=True),
        ]:
            with pytest.raises(semidbm.error, match="read-only"):
                operation()
        assert dict(db.items()) == {b"a": b"1"}
    assert (dbpath / "data").read_bytes() == before


def test_sync_on_a_reader_does_nothing(dbopen, dbpath):
    # As with dbm.gnu and dbm.dumb: a read-only shelf syncs on close.
    with dbopen(dbpath, "c") as db:
        db[b"a"] = b"1"
    before = (dbpath / "data").read_bytes()
    with dbopen(dbpath, "r") as db:
        db.sync()
        assert db[b"a"] == b"1"
    assert (dbpath / "data").read_bytes() == before
    with pytest.raises(semidbm.error, match="closed"):
        db.sync()


def test_errors_are_oserror_subclasses():
    assert semidbm.error is semidbm.DBMError
    assert issubclass(semidbm.error, OSError)
    assert issubclass(semidbm.DBMLoadError, semidbm.DBMError)
    assert issubclass(semidbm.DBMChecksumError, semidbm.DBMError)
    assert issubclass(semidbm.TornTailWarning, Warning)


def test_dbm_error_tuple_catches_semidbm_error(dbopen, dbpath):
    import dbm

    with pytest.raises(dbm.error):
        dbopen(dbpath, "r")


def test_key_or_value_of_2_gib_is_refused(db, dbpath, two_gib_view):
    db.sync()
    with pytest.raises(ValueError, match="2147483647"):
        db[b"k"] = two_gib_view
    with pytest.raises(ValueError, match="2147483647"):
        db[two_gib_view] = b"v"
    assert len(db) == 0
    db.sync()
    assert os.path.getsize(dbpath / "data") == _checkpoint.START_SIZE


def test_large_value_round_trip(db, dbopen, dbpath):
    value = os.urandom(3 * 1024 * 1024)
    db[b"big"] = value
    assert db[b"big"] == value
    db.close()
    with dbopen(dbpath) as again:
        assert again[b"big"] == value


def test_bytes_value_of_2_gib_is_refused(db, dbpath):
    huge = bytes(2**31)  # calloc'd: zero pages the kernel has not handed out yet
    db.sync()
    with pytest.raises(ValueError, match="values are limited"):
        db[b"k"] = huge
    with pytest.raises(ValueError, match="keys are limited"):
        db[huge] = b"v"
    del huge
    assert len(db) == 0
    db.sync()
    assert os.path.getsize(dbpath / "data") == _checkpoint.START_SIZE
