"""Shelves on semidbm: ``shelve.Shelf`` over a semidbm database, ``open_shelf`` and its serializers.

The shelve checks follow what CPython's test_shelve looks at (closing,
protocols, writeback, key encoding, the mapping protocol), written afresh
against semidbm.
"""

import json
import os
import pickle
import shelve
import subprocess
import sys

import pytest

import semidbm
from semidbm.shelf import JSONSerializer, PickleSerializer, Shelf, make_serializer


@pytest.fixture
def shelf(dbopen, dbpath):
    opened = shelve.Shelf(dbopen(dbpath, "c"))
    yield opened
    opened.close()


def test_shelf_on_semidbm_is_a_mapping_of_objects(shelf):
    model = {}
    for key, value in [("list", [1, 2, 3]), ("dict", {"a": (1, 2)}), ("none", None), ("k", "v")]:
        shelf[key] = model[key] = value
    shelf["k"] = model["k"] = {"replaced": True}
    del shelf["none"], model["none"]
    assert len(shelf) == len(model)
    assert sorted(shelf) == sorted(model)
    assert sorted(shelf.keys()) == sorted(model.keys())
    assert sorted(shelf.items()) == sorted(model.items(), key=lambda item: item[0])
    assert "list" in shelf and "none" not in shelf
    assert shelf.get("none") is None and shelf.get("none", 5) == 5
    assert shelf.setdefault("new", [7]) == [7] and shelf["new"] == [7]
    assert shelf.pop("new") == [7] and "new" not in shelf
    key, value = shelf.popitem()
    assert model.pop(key) == value
    shelf.update({"u": 1}, more=2)
    assert shelf["u"] == 1 and shelf["more"] == 2
    with pytest.raises(KeyError):
        shelf["missing"]
    shelf.clear()
    assert len(shelf) == 0


def test_shelf_persists_and_a_read_only_shelf_reads_and_closes(dbopen, dbpath):
    with shelve.Shelf(dbopen(dbpath, "c")) as shelf:
        shelf["key"] = {"numbers": [1, 2, 3]}
    database = dbopen(dbpath, "r")
    with shelve.Shelf(database) as shelf:
        assert shelf["key"] == {"numbers": [1, 2, 3]}
        assert list(shelf) == ["key"]
        with pytest.raises(semidbm.error, match="read-only"):
            shelf["other"] = 1
        with pytest.raises(semidbm.error, match="read-only"):
            del shelf["key"]
    # closing synced the read-only database without error, and closed it
    assert database.closed


def test_closed_shelf_raises_value_error_and_closes_the_database(dbopen, dbpath):
    database = dbopen(dbpath, "c")
    shelf = shelve.Shelf(database)
    shelf["k"] = 1
    shelf.close()
    assert database.closed
    with pytest.raises(ValueError):
        len(shelf)
    with pytest.raises(ValueError):
        shelf["k"]
    shelf.close()


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_every_pickle_protocol(dbopen, dbpath, protocol):
    with shelve.Shelf(dbopen(dbpath, "c"), protocol=protocol) as shelf:
        shelf["t"] = (1, 2, 3, 4)
    with shelve.Shelf(dbopen(dbpath, "r")) as shelf:
        assert shelf["t"] == (1, 2, 3, 4)


def test_without_writeback_mutating_a_value_changes_nothing(shelf):
    shelf["list"] = [1, 2, 3]
    shelf["list"].append(4)
    assert shelf["list"] == [1, 2, 3]


def test_writeback_keeps_mutations_and_writes_at_once_and_on_sync(dbopen, dbpath):
    database = dbopen(dbpath, "c")
    shelf = shelve.Shelf(database, writeback=True)
    shelf["list"] = [1]
    assert pickle.loads(database[b"list"]) == [1]  # also written at once
    shelf["list"].append(2)
    assert shelf["list"] == [1, 2]
    shelf.sync()
    with dbopen(dbpath, "r") as reader:  # sync put it in the file
        assert pickle.loads(reader[b"list"]) == [1, 2]
    shelf["list"].append(3)
    shelf.close()
    with shelve.Shelf(dbopen(dbpath, "r")) as shelf:
        assert shelf["list"] == [1, 2, 3]


def test_key_encoding(dbopen, dbpath):
    with shelve.Shelf(dbopen(dbpath, "c"), keyencoding="latin-1") as shelf:
        shelf["P\u00f6p"] = [1]
    with dbopen(dbpath, "r") as database:
        assert database.keys() == ["P\u00f6p".encode("latin-1")]


# --- open_shelf ---


def test_open_shelf_creates_by_default_and_returns_a_shelf(tmp_path):
    path = tmp_path / "objects.db"
    with semidbm.open_shelf(path) as shelf:
        assert isinstance(shelf, shelve.Shelf)
        shelf["config"] = {"retries": 3}
    assert (path / "data").is_file()
    with semidbm.open_shelf(path, "r") as shelf:
        assert shelf["config"] == {"retries": 3}


@pytest.mark.parametrize(
    "convert", [str, os.fsencode, lambda path: path], ids=["str", "bytes", "path"]
)
def test_open_shelf_takes_every_kind_of_path(tmp_path, convert):
    with semidbm.open_shelf(convert(tmp_path / "s.db")) as shelf:
        shelf["k"] = 1
    with semidbm.open_shelf(convert(tmp_path / "s.db"), "r") as shelf:
        assert shelf["k"] == 1


def test_open_shelf_passes_protocol_mode_and_options(tmp_path):
    path = tmp_path / "s.db"
    shelf = semidbm.open_shelf(path, "n", protocol=0, mode=0o600, buffer_size=0)
    shelf["k"] = "v"
    assert pickle.dumps("v", 0) in (path / "data").read_bytes()  # buffer_size=0: written at once
    assert (path / "data").stat().st_mode & 0o777 == 0o600 & ~_umask()
    shelf.close()


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_open_shelf_read_only_on_missing_database_creates_nothing(tmp_path):
    with pytest.raises(semidbm.error):
        semidbm.open_shelf(tmp_path / "missing.db", "r")
    assert not (tmp_path / "missing.db").exists()


def test_read_only_shelf_with_writeback_closes_without_writing(tmp_path):
    path = tmp_path / "s.db"
    with semidbm.open_shelf(path) as shelf:
        shelf["list"] = [1]
    before = (path / "data").read_bytes()
    shelf = semidbm.open_shelf(path, "r", writeback=True)
    database = shelf.dict
    shelf["list"].append(2)
    shelf.close()
    assert database.closed
    assert (path / "data").read_bytes() == before


def test_open_shelf_with_writeback(tmp_path):
    with semidbm.open_shelf(tmp_path / "s.db", writeback=True) as shelf:
        shelf["list"] = []
        shelf["list"].append("kept")
    with semidbm.open_shelf(tmp_path / "s.db", "r") as shelf:
        assert shelf["list"] == ["kept"]


# --- serializers ---


def test_json_shelf_round_trips_json_values(tmp_path):
    value = {"name": "\u00e9t\u00e9", "n": [1, 2.5, None, True], "nested": {"x": []}}
    with semidbm.open_shelf(tmp_path / "s.db", serializer="json") as shelf:
        shelf["v"] = value
        shelf["tuple"] = (1, 2)
    with semidbm.open_shelf(tmp_path / "s.db", "r", serializer="json") as shelf:
        assert shelf["v"] == value
        assert shelf["tuple"] == [1, 2]
    with semidbm.open(tmp_path / "s.db") as database:
        assert json.loads(database[b"v"].decode("utf-8")) == value


def test_json_shelf_refuses_other_objects_and_stores_nothing(tmp_path):
    with semidbm.open_shelf(tmp_path / "s.db", serializer="json") as shelf:
        with pytest.raises(TypeError):
            shelf["set"] = {1, 2}
        assert "set" not in shelf


def read_back(dbopen, dbpath):
    """Every entry of the JSON shelf at ``dbpath``, reopened read-only."""
    with Shelf(dbopen(dbpath, "r"), serializer="json") as shelf:
        return dict(shelf)


def test_json_writeback_refused_value_is_not_cached_and_close_writes_the_rest(dbopen, dbpath):
    shelf = Shelf(dbopen(dbpath, "c"), writeback=True, serializer="json")
    shelf["old"] = "kept"
    for key, refused in [("bad", {1, 2}), ("old", b"bytes")]:
        with pytest.raises(TypeError):
            shelf[key] = refused
    shelf["list"] = []
    shelf["list"].append("appended")
    with pytest.raises(KeyError):
        shelf["bad"]
    assert shelf["old"] == "kept"
    shelf.close()
    assert read_back(dbopen, dbpath) == {"old": "kept", "list": ["appended"]}


def spoil_one_entry(shelf):
    """Cache two lists in ``shelf``, then mutate the first into something JSON refuses."""
    shelf["spoiled"] = []
    shelf["list"] = []
    shelf["spoiled"].append({1})
    shelf["list"].append("kept")


def test_json_writeback_close_writes_every_other_entry_then_raises(dbopen, dbpath):
    shelf = Shelf(dbopen(dbpath, "c"), writeback=True, serializer="json")
    spoil_one_entry(shelf)
    database = shelf.dict
    with pytest.raises(TypeError):
        shelf.close()
    assert database.closed
    with pytest.raises(ValueError, match="closed"):
        shelf["list"]
    assert read_back(dbopen, dbpath) == {"spoiled": [], "list": ["kept"]}


def test_json_writeback_sync_writes_every_other_entry_then_raises(dbopen, dbpath):
    with Shelf(dbopen(dbpath, "c"), writeback=True, serializer="json") as shelf:
        spoil_one_entry(shelf)
        with pytest.raises(TypeError):
            shelf.sync()
        assert shelf["spoiled"] == []  # the refused mutation is dropped, the stored value read
        shelf["list"].append("after")  # writeback goes on
    assert read_back(dbopen, dbpath) == {"spoiled": [], "list": ["kept", "after"]}


class RunsCode:
    """Unpickling this creates a file: what a hostile pickle could do, harmlessly."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_json_shelf_never_runs_code_from_the_file(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "untrusted.db"
    with semidbm.open(path, "c") as database:
        database[b"evil"] = pickle.dumps(RunsCode(str(marker)))
    with semidbm.open_shelf(path, "r", serializer="json") as shelf:
        with pytest.raises(ValueError, match="'evil' with the json serializer"):
            shelf["evil"]
    assert not marker.exists()
    with semidbm.open_shelf(path, "r") as shelf:  # what pickle does with the same file
        shelf["evil"].close()
    assert marker.exists()


def test_a_serializer_object_of_ones_own(tmp_path):
    class Reversed:
        def dumps(self, value):
            return value[::-1].encode("ascii")

        def loads(self, data):
            return data.decode("ascii")[::-1]

    with semidbm.open_shelf(tmp_path / "s.db", serializer=Reversed()) as shelf:
        shelf["k"] = "abc"
        assert shelf["k"] == "abc"
    with semidbm.open(tmp_path / "s.db") as database:
        assert database[b"k"] == b"cba"


def test_the_json_module_itself_is_a_serializer(tmp_path):
    with semidbm.open_shelf(tmp_path / "s.db", serializer=json) as shelf:
        shelf["k"] = {"a": 1}
        assert shelf["k"] == {"a": 1}


def test_shelf_class_takes_a_serializer(dbopen, dbpath):
    with Shelf(dbopen(dbpath, "c"), serializer="json") as shelf:
        shelf["k"] = [1]
        assert isinstance(shelf.serializer, JSONSerializer)
    with dbopen(dbpath, "r") as database:
        assert database[b"k"] == b"[1]"


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"serializer": "yaml"}, ValueError, "unknown serializer 'yaml'"),
        ({"serializer": 42}, TypeError, "not int"),
        ({"serializer": "json", "protocol": 2}, ValueError, "pickle serializer only"),
    ],
)
def test_bad_serializer_options_are_refused_before_touching_the_file(
    tmp_path, options, error, message
):
    with pytest.raises(error, match=message):
        semidbm.open_shelf(tmp_path / "s.db", **options)
    assert not (tmp_path / "s.db").exists()


def test_pickle_serializer_uses_the_protocol():
    serializer = make_serializer("pickle", 0)
    assert isinstance(serializer, PickleSerializer)
    assert serializer.dumps([1]) == pickle.dumps([1], 0)
    assert serializer.loads(serializer.dumps({"a": (1,)})) == {"a": (1,)}


# --- a database closed under its shelf ---


def test_closing_a_shelf_whose_database_is_closed_already(dbopen, dbpath):
    database = dbopen(dbpath, "c")
    shelf = Shelf(database, writeback=True)
    shelf["k"] = [1]
    shelf.sync()  # nothing left in the cache
    database.close()
    shelf.close()  # nothing to write: no error
    with pytest.raises(ValueError):
        shelf["k"]


def test_a_cache_that_a_closed_database_cannot_take_is_an_error(dbopen, dbpath):
    database = dbopen(dbpath, "c")
    shelf = Shelf(database, writeback=True)
    shelf["k"] = [1]
    shelf["k"].append(2)
    database.close()
    with pytest.raises(semidbm.error, match="closed"):
        shelf.close()
    with dbopen(dbpath, "r") as reader:
        assert pickle.loads(reader[b"k"]) == [1]


LEFT_OPEN = """
import sys, semidbm
shelf = semidbm.open_shelf(sys.argv[1], serializer="json")
shelf["k"] = [1]
"""


@pytest.mark.parametrize("pure", ["1", ""], ids=["python", "cython"])
def test_a_shelf_left_open_at_exit_closes_quietly(tmp_path, pure):
    environment = dict(os.environ, SEMIDBM_PURE_PYTHON=pure)
    done = subprocess.run(
        [sys.executable, "-c", LEFT_OPEN, str(tmp_path / "s.db")],
        capture_output=True, text=True, env=environment,
    )
    assert (done.returncode, done.stderr) == (0, "")
    with semidbm.open_shelf(tmp_path / "s.db", "r", serializer="json") as shelf:
        assert shelf["k"] == [1]
