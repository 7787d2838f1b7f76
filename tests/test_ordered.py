"""Keys in byte order: ``iter_sorted``, and ``keys``/``values``/``items`` with a prefix.

docs/ordered.md says what they do.

Checked against a model, a dict sorted by Python's ``sorted``, in each
kernel: random keys with shared runs of bytes around the eight the
compiled kernel keeps beside each entry, the empty key, keys that are
prefixes of each other and keys of 0xFF bytes; bounds and prefixes
inside, between and outside the keys. Then what a snapshot means when
the database changes under an iteration, keys past an index file, the
sharded database's merge, shelves, and the errors.
"""

import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semidbm
from semidbm import _kernel, _order, db, migrate, sharded
from semidbm.format import INDEX_NAME
from semidbm.shelf import Shelf

from .conftest import IMPLEMENTATIONS, compiled_only

#: The pieces keys and bounds are made of: runs shared by many keys, some longer than eight bytes.
RUNS = [b"", b"a", b"ab", b"user:", b"\x00" * 7, b"shared-prefix-run/", b"\xff", b"\xff" * 9]
PIECES = st.builds(lambda run, rest: run + rest, st.sampled_from(RUNS), st.binary(max_size=10))
KEYS = st.lists(PIECES, unique=True, max_size=80)
WHAT = ("keys", "values", "items")


def model_range(model, start=None, stop=None, prefix=None, reverse=False):
    """The keys of ``model`` that ``iter_sorted`` must give, by ``sorted`` and ``startswith``."""
    keys = [
        key
        for key in sorted(model)
        if (start is None or key >= start)
        and (stop is None or key < stop)
        and (prefix is None or key.startswith(prefix))
    ]
    return keys[::-1] if reverse else keys


def shaped(model, keys, what):
    """``keys`` as ``what`` asks, their values from ``model``."""
    if what == "keys":
        return keys
    if what == "values":
        return [model[key] for key in keys]
    return [(key, model[key]) for key in keys]


def filled(database, keys):
    """Write ``keys`` (values that differ from them), then overwrite and delete some after a sync.

    Returns the model of what the database holds: the live keys are not
    the log's records.
    """
    model = {key: b"v" + key for key in keys}
    database.update(model)
    database.sync()
    for key in keys[::4]:
        model[key] = database[key] = b"new " + key
    for key in keys[1::5]:
        del model[key]
        del database[key]
    return model


@settings(max_examples=100, deadline=None)
@given(keys=KEYS, data=st.data())
@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_ordered_reads_are_the_model_s(tmp_path_factory, name, keys, data):
    path = tmp_path_factory.mktemp("ordered") / "d.db"
    with db.open_with(_kernel.load(name), path, "n") as database:
        model = filled(database, keys)
        bound = st.one_of(st.none(), st.sampled_from(keys) if keys else st.nothing(), PIECES)
        start, stop, prefix = data.draw(bound), data.draw(bound), data.draw(bound)
        reverse = data.draw(st.booleans())
        expected = model_range(model, start, stop, prefix, reverse)
        for what in WHAT:
            got = database.iter_sorted(start, stop, prefix=prefix, reverse=reverse, what=what)
            assert list(got) == shaped(model, expected, what)
        if prefix is not None:
            listed = model_range(model, prefix=prefix)
            for what in WHAT:
                assert getattr(database, what)(prefix) == shaped(model, listed, what)


@pytest.mark.parametrize(
    ("prefix", "end"),
    [(b"ab", b"ac"), (b"a\xff", b"b"), (b"ab\xff\xff", b"ac"), (b"\x00", b"\x01"),
     (b"\xff\xff", None), (b"", None)],
)
def test_a_prefix_ends_at_the_least_key_above_its_keys(prefix, end):
    assert _order.prefix_end(prefix) == end


def test_without_arguments_keys_values_and_items_are_as_before(database):
    database.update({b"b": b"2", b"a": b"1", b"c": b"3"})
    assert database.keys() == list(database)
    assert database.values() == [database[key] for key in database.keys()]
    assert database.items() == list(zip(database.keys(), database.values()))


def test_str_and_bytes_like_arguments_are_keys_as_elsewhere(database):
    database.update({"é:1": "x", "é:2": "y", "e:3": "z"})
    encoded = "é:".encode()
    assert database.keys(prefix="é:") == [encoded + b"1", encoded + b"2"]
    assert database.keys(bytearray(encoded)) == [encoded + b"1", encoded + b"2"]
    assert list(database.iter_sorted(memoryview(b"e"), "é:2")) == [b"e:3", encoded + b"1"]


def test_a_prefix_and_bounds_together_ask_for_both(database):
    database.update({key: b"" for key in (b"a", b"b1", b"b2", b"b3", b"b4", b"c")})
    assert list(database.iter_sorted(b"b2", prefix=b"b")) == [b"b2", b"b3", b"b4"]
    assert list(database.iter_sorted(None, b"b3", prefix=b"b")) == [b"b1", b"b2"]
    assert list(database.iter_sorted(b"b2", b"b4", prefix=b"b", reverse=True)) == [b"b3", b"b2"]
    assert list(database.iter_sorted(b"c", prefix=b"b")) == []
    assert list(database.iter_sorted(b"b3", b"b1")) == []


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        ({"start": 1}, TypeError, "semidbm start must be str or bytes-like, not int"),
        ({"stop": 2.0}, TypeError, "semidbm stop must be str or bytes-like, not float"),
        ({"prefix": ["a"]}, TypeError, "semidbm prefix must be str or bytes-like, not list"),
        ({"reverse": 1}, TypeError, "semidbm reverse must be True or False, not int"),
        ({"what": "pairs"}, ValueError, "what must be one of items, keys, values, not 'pairs'"),
    ],
)
def test_bad_arguments_are_refused_at_the_call(database, arguments, error, words):
    database[b"k"] = b"v"
    with pytest.raises(error) as raised:
        database.iter_sorted(**arguments)
    assert str(raised.value) == words


@pytest.mark.parametrize("method", ["keys", "values", "items"])
def test_a_prefix_of_another_type_is_refused(database, method):
    with pytest.raises(TypeError, match="semidbm prefix must be str or bytes-like, not int"):
        getattr(database, method)(prefix=5)


def test_a_closed_database_refuses(dbopen, dbpath):
    database = dbopen(dbpath, "c")
    database[b"k"] = b"v"
    database.close()
    with pytest.raises(semidbm.error, match="is closed"):
        database.iter_sorted()
    with pytest.raises(semidbm.error, match="is closed"):
        database.keys(prefix=b"k")


def test_values_read_after_a_close_raise_but_the_keys_are_a_snapshot(dbopen, dbpath):
    database = dbopen(dbpath, "c")
    database.update({b"a": b"1", b"b": b"2"})
    keys = database.iter_sorted()
    items = database.iter_sorted(what="items")
    database.close()
    assert list(keys) == [b"a", b"b"]
    with pytest.raises(semidbm.error, match="is closed"):
        next(items)


def test_an_iteration_is_over_the_keys_of_its_call(database):
    """Keys written since are not seen; values are read when reached; a key deleted is left out."""
    keys = [b"%05d" % number for number in range(3 * _order.READ_RUN)]
    database.update({key: b"old" for key in keys})
    items = database.iter_sorted(what="items")
    values = database.iter_sorted(what="values", reverse=True)
    only_keys = database.iter_sorted()
    database[b"00000-added"] = b"new key"
    del database[keys[1]]
    database[keys[2]] = b"changed"
    first = [next(items) for _ in range(3)]
    assert first == [(keys[0], b"old"), (keys[2], b"changed"), (keys[3], b"old")]
    # The next run is read now: changes made meanwhile show.
    del database[keys[-1]]
    database[keys[-2]] = b"changed too"
    database.compact()
    rest = list(items)
    assert rest[-1] == (keys[-2], b"changed too")
    left_out = (keys[1], keys[-1])
    assert [key for key, _ in first + rest] == [key for key in keys if key not in left_out]
    assert next(values) == b"changed too"
    assert list(only_keys) == keys


def test_lines_of_a_range_check_the_keys_as_every_line_does(database):
    """``_sorted_lines`` with a range (``--prefix``): its lines, and a change under them."""
    database.update({key: key.upper() for key in (b"a", b"b", b"c", b"d")})
    count, chunks = database._sorted_lines("dump", None, b"b", b"d")
    assert (count, [lines for _, lines in chunks]) == (2, [b"b B\nc C\n"])
    count, chunks = database._sorted_lines("keys", None, b"c")
    database[b"e"] = b"added"
    with pytest.raises(RuntimeError, match="changed during iteration"):
        list(chunks)


def test_export_dump_with_a_prefix(database, tmp_path):
    database.update({"user:1": "al", "user:2": "bo", "group": "staff"})
    dump = tmp_path / "users.dump"
    assert migrate.export_dump(database, dump, prefix="user:") == 2
    assert dump.read_bytes().splitlines()[1:] == [b"user:1 al", b"user:2 bo"]
    with pytest.raises(TypeError, match="semidbm prefix must be str or bytes-like, not int"):
        migrate.export_dump(database, tmp_path / "refused.dump", prefix=1)
    assert not (tmp_path / "refused.dump").exists()


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """A database the compiled kernel closed with an index file, and its items."""
    path = tmp_path_factory.mktemp("ordered") / "indexed"
    items = {b"k%06d" % number: b"%d" % number * 24 for number in range(40_000)}
    with db.open_with(_kernel.load("cython"), path, "c") as database:
        database.update(items)
    assert (path / INDEX_NAME).exists()
    return path, items


@compiled_only
@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_keys_written_and_deleted_since_the_index_file(indexed, tmp_path, name):
    source, items = indexed
    path = shutil.copytree(source, tmp_path / "db")
    model = dict(items)
    with db.open_with(_kernel.load(name), path, "w") as database:
        assert (database.index_covered > 0) == (name == "cython")
        added = {b"k%06d+" % number: b"added" for number in range(0, 40_000, 7)}
        database.update(added)
        model.update(added)
        for key in list(items)[::3]:
            del database[key]
            del model[key]
        database[b"k000001"] = model[b"k000001"] = b"overwritten"
        assert database.keys(prefix=b"k0001") == model_range(model, prefix=b"k0001")
        got = database.iter_sorted(b"k000000+", b"k000300", what="items", reverse=True)
        assert list(got) == shaped(model, model_range(model, b"k000000+", b"k000300", None, True),
                                   "items")
        assert list(database.iter_sorted()) == sorted(model)


def test_enough_keys_for_two_threads_are_sorted(database):
    """More keys than the compiled kernel sorts alone (``SHARED_SORT``), some filtered out."""
    keys = [b"%x" % (number * 7919 % 100_003) for number in range(70_000)]
    database.update(dict.fromkeys(keys, b""))
    assert list(database.iter_sorted()) == sorted(keys)
    assert database.keys(prefix=b"1") == sorted(key for key in keys if key[:1] == b"1")


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_a_sharded_database_merges_its_shards(tmp_path, name):
    path = tmp_path / "sharded"
    model = {b"key%03d" % number: b"%d" % number for number in range(300)}
    with sharded.open_sharded_with(_kernel.load(name), path, "c", shards=4) as database:
        database.update(model)
        assert sorted(len(shard) for shard in database.shards)[0] > 0
        expected = model_range(model, b"key050", b"key250", b"key1", True)
        assert list(database.iter_sorted(b"key050", b"key250", prefix=b"key1", reverse=True,
                                         what="items")) == shaped(model, expected, "items")
        assert database.keys(prefix=b"key2") == model_range(model, prefix=b"key2")
        assert database.values(prefix=b"key29") == shaped(
            model, model_range(model, prefix=b"key29"), "values")
        assert database.items(b"key00") == shaped(model, model_range(model, prefix=b"key00"),
                                                  "items")
        assert sorted(database.keys()) == sorted(model)
    with pytest.raises(semidbm.error, match="is closed"):
        database.iter_sorted()


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_a_shelf_orders_its_str_keys(tmp_path, name):
    with Shelf(db.open_with(_kernel.load(name), tmp_path / "shelf", "c")) as shelf:
        shelf.update({"b": [2], "a": {"one": 1}, "é": 3, "ab": 4, "user:1": "al"})
        assert list(shelf.iter_sorted()) == ["a", "ab", "b", "user:1", "é"]
        assert list(shelf.iter_sorted("ab", "é", reverse=True)) == ["user:1", "b", "ab"]
        items = shelf.iter_sorted(prefix="a", what="items")
        del shelf["ab"]
        assert list(items) == [("a", {"one": 1})]
        assert list(shelf.iter_sorted(prefix="user:", what="values")) == ["al"]
        with pytest.raises(TypeError, match="semidbm shelf prefix must be a str"):
            shelf.iter_sorted(prefix=b"a")
        with pytest.raises(ValueError, match="what must be one of"):
            shelf.iter_sorted(what="pairs")


def test_a_shelf_on_another_database_refuses():
    with pytest.raises(TypeError, match="needs a database with iter_sorted"):
        Shelf({}).iter_sorted()


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_a_closed_shelf_says_it_is_closed(tmp_path, name):
    shelf = Shelf(db.open_with(_kernel.load(name), tmp_path / "shelf", "c"))
    shelf["a"] = 1
    shelf.close()
    with pytest.raises(ValueError, match="closed shelf"):
        shelf.iter_sorted()


class _Unreadable:
    """A pickled object whose unpickling raises KeyError (a class changed since it was stored)."""

    def __init__(self):
        self.field = 1  # a state to unpickle

    def __setstate__(self, state):
        raise KeyError("a field of an older layout")


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_a_value_that_raises_key_error_is_not_taken_for_a_deleted_key(tmp_path, name):
    with Shelf(db.open_with(_kernel.load(name), tmp_path / "shelf", "c")) as shelf:
        shelf["cfg:1"] = _Unreadable()
        shelf["cfg:2"] = 5
        with pytest.raises(KeyError, match="older layout"):
            shelf["cfg:1"]
        with pytest.raises(KeyError, match="older layout"):  # as shelf["cfg:1"]: not left out
            list(shelf.iter_sorted(prefix="cfg:", what="items"))

