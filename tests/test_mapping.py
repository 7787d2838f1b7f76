"""The db object as a mapping: the stdlib dbm contract, types, errors, closing."""

import array
import collections.abc
import os

import pytest

import semidbm
from semidbm import _checkpoint


def test_is_a_mutable_mapping(database):
    assert isinstance(database, collections.abc.MutableMapping)


def test_set_get_contains_len(database):
    database[b"one"] = b"1"
    database[b"two"] = b"22"
    assert database[b"one"] == b"1"
    assert database[b"two"] == b"22"
    assert b"one" in database and b"three" not in database
    assert len(database) == 2


def test_update_replaces_value(database):
    database[b"k"] = b"old"
    database[b"k"] = b"new value"
    assert database[b"k"] == b"new value"
    assert len(database) == 1


def test_delete(database):
    database[b"k"] = b"v"
    del database[b"k"]
    assert b"k" not in database
    assert len(database) == 0
    with pytest.raises(KeyError):
        database[b"k"]


def test_missing_key_is_key_error_and_writes_nothing(database, dbpath):
    database[b"k"] = b"v"
    database.sync()
    size = os.path.getsize(dbpath / "data")
    with pytest.raises(KeyError):
        database[b"missing"]
    with pytest.raises(KeyError):
        del database[b"missing"]
    database.sync()
    assert os.path.getsize(dbpath / "data") == size


def test_str_keys_and_values_are_utf8(database):
    database["clé"] = "välue ✓"
    assert database["clé".encode("utf-8")] == "välue ✓".encode("utf-8")
    assert database["clé"] == "välue ✓".encode("utf-8")
    assert "clé" in database
    assert database.keys() == ["clé".encode("utf-8")]
    del database["clé"]
    assert len(database) == 0


@pytest.mark.parametrize(
    "value",
    [bytearray(b"abc"), memoryview(b"xabcx")[1:4], array.array("B", b"abc")],
    ids=["bytearray", "memoryview", "array"],
)
def test_bytes_like_values_and_keys(database, value):
    database[value] = value
    assert database[b"abc"] == b"abc"
    assert type(database[b"abc"]) is bytes
    assert value in database


def test_multibyte_array_is_stored_as_its_bytes(database):
    numbers = array.array("i", [1, 2, 3])
    database[b"n"] = numbers
    assert database[b"n"] == numbers.tobytes()


@pytest.mark.parametrize("bad", [1, 1.5, None, ["a"], object()], ids=lambda v: type(v).__name__)
def test_bad_key_type_is_type_error_naming_it(database, bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        database[bad] = b"v"
    with pytest.raises(TypeError, match=type(bad).__name__):
        database[bad]
    with pytest.raises(TypeError, match=type(bad).__name__):
        bad in database  # noqa: B015 (the operator itself must raise)
    with pytest.raises(TypeError, match=type(bad).__name__):
        del database[bad]
    assert len(database) == 0


@pytest.mark.parametrize("bad", [1, 1.5, None, ["a"], object()], ids=lambda v: type(v).__name__)
def test_bad_value_type_is_type_error_naming_it(database, dbpath, bad):
    database.sync()
    with pytest.raises(TypeError, match=type(bad).__name__):
        database[b"k"] = bad
    assert b"k" not in database
    database.sync()
    assert os.path.getsize(dbpath / "data") == _checkpoint.START_SIZE


def test_empty_key_and_empty_value(database, dbopen, dbpath):
    database[b""] = b""
    database[b"k"] = b""
    assert database[b""] == b"" and database[b"k"] == b""
    database.close()
    with dbopen(dbpath) as again:
        assert dict(again.items()) == {b"": b"", b"k": b""}


def test_values_come_back_as_bytes_after_reopen(database, dbopen, dbpath):
    database["s"] = "text"
    database[b"b"] = bytearray(b"raw")
    database.close()
    with dbopen(dbpath) as again:
        assert type(again["s"]) is bytes and type(again[b"b"]) is bytes


def test_keys_is_a_list(database):
    database[b"a"] = b"1"
    database[b"b"] = b"2"
    keys = database.keys()
    assert type(keys) is list
    assert sorted(keys) == [b"a", b"b"]


def test_values_and_items_follow_keys(database):
    for i in range(20):
        database[b"k%d" % i] = b"v%d" % i
    keys = database.keys()
    assert database.values() == [database[k] for k in keys]
    assert database.items() == list(zip(keys, database.values()))


def test_iteration_yields_keys(database):
    expected = {b"k%d" % i for i in range(50)}
    for key in expected:
        database[key] = key
    assert set(database) == expected
    assert set(iter(database)) == expected


def test_iteration_sees_deletes_and_updates(database):
    for i in range(10):
        database[b"k%d" % i] = b"x"
    del database[b"k3"]
    database[b"k4"] = b"y"
    assert len(list(database)) == 9
    assert b"k3" not in list(database)


def test_resizing_during_iteration_is_runtime_error(database):
    for i in range(10):
        database[b"k%d" % i] = b"x"
    with pytest.raises(RuntimeError):
        for key in database:
            database[key + b"-new"] = b"y"


def test_get_setdefault_pop_update_clear(database):
    assert database.get(b"a") is None
    assert database.get(b"a", b"dflt") == b"dflt"
    assert database.setdefault(b"a", b"1") == b"1"
    assert database.setdefault(b"a", b"2") == b"1"
    database.update({b"b": b"2", "c": "3"}, d=b"4")
    assert database.pop(b"b") == b"2"
    assert database.pop(b"b", None) is None
    with pytest.raises(KeyError):
        database.pop(b"b")
    assert dict(database.items()) == {b"a": b"1", b"c": b"3", b"d": b"4"}
    database.clear()
    assert len(database) == 0 and database.keys() == []


def test_clear_survives_reopen(database, dbopen, dbpath):
    database.update({b"a": b"1", b"b": b"2"})
    database.clear()
    database.close()
    with dbopen(dbpath) as again:
        assert len(again) == 0


def test_context_manager_closes(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
    assert database.closed
    with pytest.raises(semidbm.error):
        database[b"a"]


def test_every_operation_on_closed_db_is_module_error(database):
    database[b"a"] = b"1"
    database.close()
    operations = [
        lambda: database[b"a"],
        lambda: database.__setitem__(b"a", b"2"),
        lambda: database.__delitem__(b"a"),
        lambda: b"a" in database,
        lambda: len(database),
        lambda: list(database),
        database.keys,
        database.values,
        database.items,
        lambda: database.get(b"a"),
        lambda: database.pop(b"a"),
        lambda: database.setdefault(b"a", b"1"),
        lambda: database.update({b"b": b"2"}),
        database.clear,
        database.sync,
        database.compact,
    ]
    for operation in operations:
        with pytest.raises(semidbm.error, match="closed"):
            operation()


def test_closing_twice_is_fine(database):
    database.close()
    database.close()
    database.close(compact=True)
    assert database.closed


def test_close_during_iteration_is_module_error(database):
    database[b"a"] = b"1"
    database[b"b"] = b"2"
    iterator = iter(database)
    next(iterator)
    database.close()
    with pytest.raises(semidbm.error):
        next(iterator)


def test_read_only_refuses_writes_and_compact(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
    before = (dbpath / "data").read_bytes()
    with dbopen(dbpath, "r") as database:
        for operation in [
            lambda: database.__setitem__(b"b", b"2"),
            lambda: database.__delitem__(b"a"),
            lambda: database.__delitem__(b"missing"),
            lambda: database.update({b"b": b"2"}),
            lambda: database.pop(b"a"),
            database.clear,
            database.compact,
            database.reorganize,
            lambda: database.close(compact=True),
        ]:
            with pytest.raises(semidbm.error, match="read-only"):
                operation()
        assert dict(database.items()) == {b"a": b"1"}
    assert (dbpath / "data").read_bytes() == before


def test_sync_on_a_reader_does_nothing(dbopen, dbpath):
    # As with dbm.gnu and dbm.dumb: a read-only shelf syncs on close.
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
    before = (dbpath / "data").read_bytes()
    with dbopen(dbpath, "r") as database:
        database.sync()
        assert database[b"a"] == b"1"
    assert (dbpath / "data").read_bytes() == before
    with pytest.raises(semidbm.error, match="closed"):
        database.sync()


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


def test_key_or_value_of_2_gib_is_refused(database, dbpath, two_gib_view):
    database.sync()
    with pytest.raises(ValueError, match="2147483647"):
        database[b"k"] = two_gib_view
    with pytest.raises(ValueError, match="2147483647"):
        database[two_gib_view] = b"v"
    assert len(database) == 0
    database.sync()
    assert os.path.getsize(dbpath / "data") == _checkpoint.START_SIZE


def test_large_value_round_trip(database, dbopen, dbpath):
    value = os.urandom(3 * 1024 * 1024)
    database[b"big"] = value
    assert database[b"big"] == value
    database.close()
    with dbopen(dbpath) as again:
        assert again[b"big"] == value


def test_bytes_value_of_2_gib_is_refused(database, dbpath):
    huge = bytes(2**31)  # calloc'd: zero pages the kernel has not handed out yet
    database.sync()
    with pytest.raises(ValueError, match="values are limited"):
        database[b"k"] = huge
    with pytest.raises(ValueError, match="keys are limited"):
        database[huge] = b"v"
    del huge
    assert len(database) == 0
    database.sync()
    assert os.path.getsize(dbpath / "data") == _checkpoint.START_SIZE
