"""The bulk operations: ``update``, ``get_many`` and ``delete_many``.

Each is checked against a dict (a model, and ``dict.update``'s rules),
against the item operations it stands for (the same answers, the same
bytes in the file), on both kernels side by side (the same bytes, the
same errors), and where the item operations are checked: a closed,
read-only, compacting or disowned database, the index file, the sealed
empty record, records larger than the buffer.
"""

import errno
import functools
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import semidbm
from semidbm import _messages, db
from semidbm.format import INDEX_NAME

from .conftest import IMPLEMENTATIONS, compiled_only, kernel_name
from .support import index_format as fmt
from .support.kernels import KERNELS
from .support.log import data_records, directory_contents
from .support.threads import check_models_stored, run_beside_a_maintainer


def as_bytes(item):
    return item.encode("utf-8") if isinstance(item, str) else bytes(item)


# --- the three against a dict and against the item operations ----------------

keys = st.one_of(st.sampled_from([b"", b"a", b"key", "ключ", b"\x00\xff"]), st.binary(max_size=6))
values = st.one_of(st.binary(max_size=120), st.text(max_size=10))
key_lists = st.lists(keys, max_size=8)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("update"), st.lists(st.tuples(keys, values), max_size=8)),
        st.tuples(st.just("update dict"), st.dictionaries(keys, values, max_size=8)),
        st.tuples(st.just("get_many"), key_lists),
        st.tuples(st.just("delete_many"), key_lists),
        st.tuples(st.just("reopen")),
    ),
    max_size=25,
)


def bulk_step(database, step):
    """Do ``step`` with the bulk operations; return what it answered."""
    action = step[0]
    if action.startswith("update"):
        database.update(step[1])
        return None
    if action == "get_many":
        return database.get_many(step[1], default="missing")
    try:
        database.delete_many(step[1])
        return "deleted"
    except KeyError as error:
        return ("missing", as_bytes(error.args[0]))


def item_step(database, step):
    """Do ``step`` with item operations, as the bulk operations promise to; return its answer."""
    action = step[0]
    if action.startswith("update"):
        for key, value in step[1].items() if action == "update dict" else step[1]:
            database[key] = value
        return None
    if action == "get_many":
        return [database.get(key, "missing") for key in step[1]]
    seen = set()
    for key in step[1]:
        if key not in database or as_bytes(key) in seen:
            return ("missing", as_bytes(key))
        seen.add(as_bytes(key))
    for key in step[1]:
        del database[key]
    return "deleted"


def model_step(model, step):
    """Do ``step`` on a dict of bytes; return what the database should answer."""
    action = step[0]
    if action.startswith("update"):
        items = step[1].items() if action == "update dict" else step[1]
        model.update((as_bytes(key), as_bytes(value)) for key, value in items)
        return None
    targets = [as_bytes(key) for key in step[1]]
    if action == "get_many":
        return [model.get(key, "missing") for key in targets]
    for at, key in enumerate(targets):
        if key not in model or key in targets[:at]:
            return ("missing", key)
    for key in targets:
        del model[key]
    return "deleted"


def run_steps(kernel, path, all_steps, buffer_size, do_step):
    """Run ``all_steps`` on a new database; return the answers and the items after each."""
    opener = functools.partial(db.open_with, kernel, buffer_size=buffer_size)
    answers = []
    database = opener(path, "n")
    for step in all_steps:
        if step[0] == "reopen":
            database.close()
            database = opener(path, "w")
        else:
            answers.append(do_step(database, step))
        answers.append(sorted(database.items()))
    database.close()
    return answers


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(all_steps=steps, buffer_size=st.sampled_from([0, 1, 60, 4096, 1 << 20]))
def test_bulk_operations_are_their_item_operations(all_steps, buffer_size):
    """On each kernel: the dict's answers, and the bytes of the item operations, both kernels."""
    model = {}
    expected = []
    for step in all_steps:
        if step[0] != "reopen":
            expected.append(model_step(model, step))
        expected.append(sorted(model.items()))
    place = tempfile.mkdtemp(prefix="semidbm-bulk-")
    try:
        contents = []
        for name, kernel in KERNELS.items():
            for do_step in (bulk_step, item_step):
                path = os.path.join(place, "%s-%s" % (name, do_step.__name__))
                assert run_steps(kernel, path, all_steps, buffer_size, do_step) == expected
                contents.append(directory_contents(path))
        assert all(found == contents[0] for found in contents)
    finally:
        shutil.rmtree(place)


# --- update --------------------------------------------------------------------


class Mapping:
    """Not a dict, but what ``dict.update`` takes as a mapping: ``keys()`` and ``[]``."""

    def __init__(self, items):
        self.items = items

    def keys(self):
        return iter(self.items)

    def __getitem__(self, key):
        return self.items[key]


class DictSubclass(dict):
    pass


@pytest.mark.parametrize(
    "make",
    [
        lambda: {b"a": b"1", "b": "2"},
        lambda: DictSubclass({b"a": b"1", "b": "2"}),
        lambda: Mapping({b"a": b"1", "b": "2"}),
        lambda: [(b"a", b"1"), ("b", "2")],
        lambda: ((b"a", b"1"), ["b", "2"]),
        lambda: iter([(b"a", b"1"), (bytearray(b"b"), memoryview(b"2"))]),
        lambda: ["a1", "b2"],  # strings of two characters are pairs, as for dict.update
    ],
    ids=["dict", "dict subclass", "keys()", "list", "tuple of sequences", "iterator", "strings"],
)
def test_update_takes_what_dict_update_takes(database, make):
    database.update(make(), c=b"3")
    assert dict(database.items()) == {b"a": b"1", b"b": b"2", b"c": b"3"}


def test_update_keywords_after_other_and_named_like_its_parameters(database):
    database.update([(b"self", b"1"), (b"other", b"2")], self=b"3")
    database.update(other=b"4")
    database.update()
    assert dict(database.items()) == {b"self": b"3", b"other": b"4"}


def test_a_later_item_wins(database):
    database.update([(b"k", b"1"), ("k", "2"), (b"k", b"3")])
    assert database[b"k"] == b"3" and len(database) == 1


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (5, TypeError, _messages.NOT_A_PAIR % (1, "int")),
        (None, TypeError, _messages.NOT_A_PAIR % (1, "NoneType")),
        ((b"x",), ValueError, _messages.NOT_TWO % (1, 1)),
        ((b"x", b"y", b"z"), ValueError, _messages.NOT_TWO % (1, 3)),
        ("abc", ValueError, _messages.NOT_TWO % (1, 3)),
        ((5, b"y"), TypeError, _messages.WRONG_TYPE % ("keys", "int")),
        ((b"x", 5.0), TypeError, _messages.WRONG_TYPE % ("values", "float")),
    ],
)
def test_a_bad_item_stops_update_with_the_items_before_it_stored(database, bad, error, message):
    with pytest.raises(error) as raised:
        database.update([(b"first", b"1"), bad, (b"after", b"2")])
    assert str(raised.value) == message
    assert dict(database.items()) == {b"first": b"1"}


def test_a_bad_value_in_a_dict_stops_update_there(database):
    with pytest.raises(TypeError, match="values must be str or bytes-like, not list"):
        database.update({b"first": b"1", b"bad": [], b"after": b"2"})
    assert dict(database.items()) == {b"first": b"1"}


def test_an_iterable_that_raises_stops_update_there(database):
    def items():
        yield b"first", b"1"
        raise RuntimeError("from the iterable")

    with pytest.raises(RuntimeError, match="from the iterable"):
        database.update(items())
    assert dict(database.items()) == {b"first": b"1"}


def test_a_value_of_2_gib_is_refused_by_update(database, two_gib_view):
    with pytest.raises(ValueError, match="2147483647"):
        database.update({b"first": b"1", b"k": two_gib_view})
    for method in (database.get_many, database.delete_many):
        with pytest.raises(ValueError, match="2147483647"):
            method([b"first", two_gib_view])
    assert dict(database.items()) == {b"first": b"1"}


def test_update_writes_the_empty_record_sealed(dbopen, tmp_path):
    """Twelve zero bytes must not end the log (docs/FORMAT.md, "Zero runs"): update seals them."""
    paths = [tmp_path / "bulk", tmp_path / "items"]
    with dbopen(paths[0], "c") as database:
        database.update([(b"k", b"v"), (b"", b"")])
        assert database[b""] == b""
    with dbopen(paths[1], "c") as database:
        database[b"k"] = b"v"
        database[b""] = b""
    assert data_records(paths[0]) == data_records(paths[1])
    assert not (paths[0] / "data").read_bytes().endswith(bytes(12))
    with dbopen(paths[0], "r") as database:
        assert dict(database.items()) == {b"k": b"v", b"": b""}


def test_records_larger_than_the_buffer_go_straight_to_the_file(dbopen, tmp_path):
    items = {b"small": b"s", b"large": b"L" * 5000, b"key" * 40: b"", b"also": b"x" * 100}
    for name in ("bulk", "items"):
        with dbopen(tmp_path / name, "c", buffer_size=64) as database:
            if name == "bulk":
                database.update(items)
                database.delete_many([b"key" * 40])
            else:
                for key, value in items.items():
                    database[key] = value
                del database[b"key" * 40]
            assert database.get_many(list(items)) == [b"s", b"L" * 5000, None, b"x" * 100]
            # Before any sync: the file holds the records larger than the buffer.
            assert os.path.getsize(tmp_path / name / "data") > 5000 + 2 * 120
    assert data_records(tmp_path / "bulk") == data_records(tmp_path / "items")


@pytest.mark.parametrize("buffer_size", [0, 40, 300, 5000, 1 << 20])
@pytest.mark.parametrize("kind", ["dict", "list", "iterator"])
def test_update_writes_what_assignments_write(dbopen, tmp_path, buffer_size, kind):
    """Items of bytes go in runs, mixed with items that cannot wait: the same bytes, in order."""
    items = {b"%03d" % i: b"v" * (i % 50) for i in range(100)}
    items[b"050"] = bytearray(b"a buffer")
    items["str"] = "a str"
    items[b"large"] = b"L" * 1000
    items[b""] = b""
    items[b"060"] = b""
    items[b"070"] = memoryview(b"view")
    given = {"dict": items, "list": list(items.items()), "iterator": iter(items.items())}[kind]
    with dbopen(tmp_path / "bulk", "c", buffer_size=buffer_size) as database:
        database.update(given)
        assert database.get_many(list(items)) == [as_bytes(value) for value in items.values()]
    with dbopen(tmp_path / "items", "c", buffer_size=buffer_size) as database:
        for key, value in items.items():
            database[key] = value
    assert data_records(tmp_path / "bulk") == data_records(tmp_path / "items")


def test_str_keys_and_values_are_utf8(database):
    database.update({"ключ": "значение", b"\xd0\xba": "é"})
    assert database.get_many(["ключ", "к", b"\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87"]) == [
        "значение".encode(), "é".encode(), "значение".encode()
    ]
    database.delete_many(["ключ", "к"])
    assert len(database) == 0


# --- get_many ------------------------------------------------------------------


def test_get_many_gives_values_in_order_and_default_for_missing(database):
    database.update(a=b"1", b=b"2")
    assert database.get_many([b"b", "a", b"x", b"b"]) == [b"2", b"1", None, b"2"]
    marker = object()
    assert database.get_many(iter(["x", "a"]), marker) == [marker, b"1"]
    assert database.get_many((b"a",), default=b"") == [b"1"]
    assert database.get_many([bytearray(b"a"), memoryview(b"b")]) == [b"1", b"2"]
    assert database.get_many([]) == []


@pytest.mark.parametrize("one_key", ["ab", b"ab", bytearray(b"ab"), memoryview(b"ab")])
def test_one_key_is_not_taken_for_keys(database, one_key):
    database.update(a=b"1", b=b"2")
    for method in ("get_many", "delete_many"):
        with pytest.raises(TypeError) as raised:
            getattr(database, method)(one_key)
        assert str(raised.value) == _messages.ONE_KEY % (method, type(one_key).__name__)
    assert len(database) == 2


@pytest.mark.parametrize("method", ["get_many", "delete_many"])
def test_a_key_of_a_wrong_type_is_type_error(database, method):
    database.update(a=b"1")
    with pytest.raises(TypeError, match="keys must be str or bytes-like, not int"):
        getattr(database, method)([b"missing", 5])
    assert database[b"a"] == b"1"


def test_get_many_of_many_keys_and_a_long_one(database):
    database.update((b"%05d" % i, b"v%d" % i) for i in range(3000))
    database[b"long" * 1000] = b"L"
    found = database.get_many([b"%05d" % i for i in range(0, 3200, 3)] + [b"long" * 1000])
    assert found == [b"v%d" % i if i < 3000 else None for i in range(0, 3200, 3)] + [b"L"]


def test_get_many_checks_checksums_when_asked(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database.update({b"a": b"1", b"b": b"2"})
    data = bytearray((dbpath / "data").read_bytes())
    data[-5] ^= 0xFF  # the value of b
    (dbpath / "data").write_bytes(bytes(data))
    with dbopen(dbpath, "r", verify_checksums=True) as database:
        assert database.get_many([b"a"]) == [b"1"]
        with pytest.raises(semidbm.DBMChecksumError):
            database.get_many([b"a", b"b"])


# --- delete_many ----------------------------------------------------------------


@pytest.mark.parametrize(
    "keys, named",
    [
        ([b"k1", b"missing", b"k2"], b"missing"),
        ([b"k1", b"k2", b"k1", b"missing"], b"k1"),
        (["k1", b"k1"], b"k1"),
        ([b"k%d" % i for i in range(40)] + [b"k0"], b"k0"),  # past the pairwise comparison
        ([b"k%d" % i for i in range(40)] + ["k39", b"missing"], "k39"),
        ([b"missing"] * 2, b"missing"),
    ],
)
def test_delete_many_deletes_nothing_if_a_key_is_missing_or_repeated(dbopen, dbpath, keys, named):
    with dbopen(dbpath, "c") as database:
        database.update((b"k%d" % i, b"v") for i in range(40))
        database.sync()
        size = os.path.getsize(dbpath / "data")
        with pytest.raises(KeyError) as raised:
            database.delete_many(keys)
        assert raised.value.args == (named,)
        database.sync()
        assert os.path.getsize(dbpath / "data") == size
        assert len(database) == 40


def test_delete_many_deletes_every_key_and_survives_reopen(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database.update((b"k%d" % i, b"v") for i in range(100))
        database.delete_many(b"k%d" % i for i in range(0, 100, 2))
        database.delete_many([])
        assert sorted(database.keys()) == sorted(b"k%d" % i for i in range(1, 100, 2))
    with dbopen(dbpath, "r") as database:
        assert sorted(database.keys()) == sorted(b"k%d" % i for i in range(1, 100, 2))


def test_delete_many_of_keys_set_again_after_a_delete(database):
    """A private key moved by the deletion of the keys before it is still found."""
    keys = [b"%04d" % i for i in range(2000)]
    database.update(dict.fromkeys(keys, b"v"))
    database.delete_many(keys[::3])
    database.update(dict.fromkeys(keys[::3], b"w"))
    database.delete_many(keys[::2])
    expected = {key: b"v" if at % 3 else b"w" for at, key in enumerate(keys) if at % 2}
    assert dict(database.items()) == expected


# --- the store's state: closed, read-only, compacting, disowned -------------------

OPERATIONS = {
    "update": lambda database: database.update({b"b": b"2"}),
    "update with nothing": lambda database: database.update(),
    "get_many": lambda database: database.get_many([b"a"]),
    "delete_many": lambda database: database.delete_many([b"a"]),
    "delete_many of nothing": lambda database: database.delete_many([]),
}
WRITES = [name for name in OPERATIONS if name != "get_many"]


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_closed_database_refuses_each(database, dbpath, operation):
    database[b"a"] = b"1"
    database.close()
    with pytest.raises(semidbm.error) as raised:
        OPERATIONS[operation](database)
    assert str(raised.value) == _messages.CLOSED % (dbpath / "data")


@pytest.mark.parametrize("operation", sorted(WRITES))
def test_a_reader_refuses_the_writes(dbopen, dbpath, operation):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
    before = (dbpath / "data").read_bytes()
    with dbopen(dbpath, "r") as database:
        with pytest.raises(semidbm.error) as raised:
            OPERATIONS[operation](database)
        action = "delete" if operation.startswith("delete") else "write"
        assert str(raised.value) == _messages.READ_ONLY % (action, dbpath / "data")
        assert database.get_many([b"a"]) == [b"1"]
    assert (dbpath / "data").read_bytes() == before


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_compactions_progress_callback_cannot_use_them(database, dbpath, operation):
    database.update({b"a": b"1", b"x": b"y"})
    refused = []

    def progress(done, total):
        with pytest.raises(semidbm.error) as raised:
            OPERATIONS[operation](database)
        refused.append(str(raised.value))

    database.compact(progress=progress)
    assert refused and set(refused) == {_messages.COMPACTING % (dbpath / "data")}
    assert dict(database.items()) == {b"a": b"1", b"x": b"y"}


@pytest.mark.parametrize("operation", sorted(WRITES))
def test_a_disowned_writer_refuses_the_writes(dbopen, dbpath, operation):
    """As in a child made by fork(): the at-fork handler disowns every writer."""
    database = dbopen(dbpath, "c")
    database[b"a"] = b"1"
    database._disown()
    try:
        with pytest.raises(semidbm.error, match="belongs to process %d" % os.getppid()):
            OPERATIONS[operation](database)
        assert database.get_many([b"a"]) == [b"1"]
    finally:
        database.close()


def test_keys_that_close_the_database_as_they_come(database):
    database.update(a=b"1")

    def closing():
        yield b"a"
        database.close()
        yield b"a"

    with pytest.raises(semidbm.error, match="closed"):
        database.get_many(closing())
    with pytest.raises(semidbm.error, match="closed"):
        database.delete_many(closing())


def test_items_that_close_the_database_as_they_come(dbopen, dbpath):
    database = dbopen(dbpath, "c")

    def closing():
        yield b"a", b"1"
        database.close()
        yield b"b", b"2"

    with pytest.raises(semidbm.error, match="closed"):
        database.update(closing())
    with dbopen(dbpath, "r") as reopened:
        assert dict(reopened.items()) == {b"a": b"1"}


def test_threads_sharing_one_database_in_bulk(dbopen, dbpath):
    """Bulk calls of four threads, on keys of their own, while a fifth syncs and compacts."""
    database = dbopen(dbpath, "c", buffer_size=4096)
    models = [{} for _ in range(4)]

    def worker(number):
        model = models[number]
        keys = [b"t%d-%d" % (number, i) for i in range(60)]
        for round_number in range(40):
            chosen = keys[round_number % 3 :: 3]
            present = [key for key in chosen if key in model]
            if round_number % 4 == 3 and present:
                database.delete_many(present)
                for key in present:
                    del model[key]
            else:
                items = {key: b"%d" % round_number for key in chosen}
                database.update(items)
                model.update(items)
            assert database.get_many(keys) == [model.get(key) for key in keys]

    def maintain():
        database.sync()
        database.compact()

    assert run_beside_a_maintainer(worker, maintain) == []
    check_models_stored(dbopen, dbpath, database, models)


#: Runs in a child: bulk writes past a file-size limit (``RLIMIT_FSIZE``).
FILE_SIZE_LIMIT = """
import json, os, resource, signal, sys, warnings
import semidbm
from semidbm import _kernel, db

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
kernel, path = _kernel.load(sys.argv[1]), sys.argv[2]
items = {b"u%04d" % i: b"%d." % i * 125 for i in range(2000)}
keys = list(items)


def limit(room):
    size = os.path.getsize(os.path.join(path, "data"))
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + room, resource.RLIM_INFINITY))


def stored_prefix(database):
    # How many of the items (in order) the database holds; they must be a prefix.
    held = [key in database for key in keys]
    count = held.index(False) if False in held else len(held)
    assert not any(held[count:]), "the items stored are not a prefix"
    return count


database = db.open_with(kernel, path, "c")
limit(30_000)
try:
    database.update(items)
    raise AssertionError("the update did not fail")
except semidbm.error as exc:
    update_error = exc.errno
in_memory = stored_prefix(database)
assert database.get_many(keys[:in_memory]) == list(items.values())[:in_memory]
try:
    database.close()
except semidbm.error:
    pass
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
with warnings.catch_warnings():
    warnings.simplefilter("ignore", semidbm.TornTailWarning)
    database = db.open_with(kernel, path, "w", buffer_size=4096)
on_disk = stored_prefix(database)
database.update(items)
database.sync()


def delete_all_or_none(keys):
    # A failing delete_many deletes none of its keys; returns its errno.
    try:
        database.delete_many(keys)
        raise AssertionError("the deletes did not fail")
    except semidbm.error as exc:
        assert database.get_many(keys) == [items[key] for key in keys]
        return exc.errno


limit(8_000)
straight_error = delete_all_or_none(keys)  # larger than the buffer: one straight write, cut back
limit(1_000)
database[b"filler"] = b"f" * 3_000
buffered_error = delete_all_or_none(keys[:100])  # the flush that makes room for them fails
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
database.close()
database = db.open_with(kernel, path, "r")
assert database[b"filler"] == b"f" * 3_000
deleted = len(keys) - sum(key in database for key in keys)
print(json.dumps([update_error, straight_error, buffered_error, in_memory, on_disk, deleted]))
"""


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_FSIZE is POSIX")
def test_a_write_that_fails_stops_update_after_a_prefix_and_delete_many_before_any(kernel, dbpath):
    """A full disk (here a file-size limit) stops update with the items before stored, and
    delete_many with no key deleted, whether its records go straight to the file or to the
    buffer."""
    result = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMIT, kernel_name(kernel), str(dbpath)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    update_error, straight_error, buffered_error, in_memory, on_disk, deleted = json.loads(
        result.stdout
    )
    assert update_error == straight_error == buffered_error == errno.EFBIG
    assert 0 < on_disk <= in_memory < 2000 and deleted == 0


def test_shelves_update_through_their_own_assignment(tmp_path):
    with semidbm.open_shelf(tmp_path / "shelf", "c") as shelf:
        shelf.update({"a": [1, 2]}, b={"c": 3})
        assert shelf["a"] == [1, 2] and shelf["b"] == {"c": 3}


# --- the index file ---------------------------------------------------------------

#: Enough records that closing writes an index file (past 4 MiB of log).
INDEXED_KEYS = 40_000


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """A database the compiled kernel closed with an index file, and its items."""
    if "cython" not in IMPLEMENTATIONS:
        pytest.skip("the index is the compiled kernel's; SEMIDBM_NO_EXTENSIONS: not built")
    path = tmp_path_factory.mktemp("bulk") / "indexed"
    items = {b"%08d" % i: b"%d" % i * 20 for i in range(INDEXED_KEYS)}
    with db.open_with(KERNELS["cython"], path, "c") as database:
        database.update(items)
    assert (path / INDEX_NAME).exists()
    return path, items


@compiled_only
def test_bulk_operations_over_an_index_file(indexed, tmp_path):
    source, items = indexed
    path = shutil.copytree(source, tmp_path / "db")
    model = dict(items)
    keys = list(items)
    with db.open_with(KERNELS["cython"], path, "w") as database:
        assert database.index_covered > 0
        assert database.get_many(keys[::7] + [b"missing"]) == [items[k] for k in keys[::7]] + [None]
        with pytest.raises(KeyError) as raised:
            database.delete_many(keys[:50] + keys[10:11])
        assert raised.value.args == (keys[10],)
        database.delete_many(keys[::5])
        with pytest.raises(KeyError):
            database.delete_many(keys[5:6])  # deleted since the index file
        database.update({key: b"new" for key in keys[1::5]})
        database.update({key: b"again" for key in keys[::10]})
        database.delete_many(keys[1::10] + keys[::20] + keys[3::10])  # private keys, then base
        for key in keys[::5]:
            del model[key]
        model.update({key: b"new" for key in keys[1::5]})
        model.update({key: b"again" for key in keys[::10]})
        for key in keys[1::10] + keys[::20] + keys[3::10]:
            del model[key]
        assert database.get_many(keys) == [model.get(key) for key in keys]
        assert database.index_covered > 0
    for kernel in KERNELS.values():
        with db.open_with(kernel, path, "r") as database:
            assert dict(database.items()) == model


@compiled_only
@pytest.mark.parametrize("operation", ["get_many", "delete_many", "update"])
def test_bulk_lookups_over_a_damaged_index_file(indexed, tmp_path, operation):
    """A slot block failing its checksum: the index file is dropped, the answers stay the log's."""
    source, items = indexed
    path = shutil.copytree(source, tmp_path / "db")
    index = bytearray((path / INDEX_NAME).read_bytes())
    capacity = fmt.Index.parse(bytes(index)).capacity
    for block in range(0, fmt.blocks(capacity), 3):
        index[fmt.HEADER_SIZE + block * fmt.BLOCK_SLOTS * fmt.SLOT_SIZE + 100] ^= 0x10
    (path / INDEX_NAME).write_bytes(bytes(index))
    keys = list(items)
    with db.open_with(KERNELS["cython"], path, "w") as database:
        if operation == "get_many":
            assert database.get_many(keys) == list(items.values())
        elif operation == "update":  # overwriting keys looks each up in the index
            database.update({key: b"new" for key in keys[::2]})
            assert database.get_many(keys[:10]) == [
                b"new" if at % 2 == 0 else items[key] for at, key in enumerate(keys[:10])
            ]
            assert len(database) == len(keys)
        else:
            database.delete_many(keys[::2])
            assert database.get_many(keys[:10]) == [
                None if at % 2 == 0 else items[key] for at, key in enumerate(keys[:10])
            ]
        assert database.index_covered == 0


def test_crc_of_update_records_is_zlibs(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database.update({b"key": b"value"})
    data = (dbpath / "data").read_bytes()
    assert data[-4:] == zlib.crc32(b"keyvalue").to_bytes(4, "big")


class Interrupted(Exception):
    """What the signal handler of the interrupted bulk calls raises."""


def interrupt(signum, frame):
    raise Interrupted


@pytest.mark.skipif(os.name != "posix", reason="setitimer is POSIX")
@pytest.mark.parametrize("buffer_size", [1 << 20, 4096], ids=["buffered", "straight"])
def test_delete_many_interrupted_by_a_signal_deletes_every_key_or_none(dbopen, dbpath, buffer_size):
    """An exception from a signal handler that lands during delete_many leaves all or none
    deleted, in the database and in its file: the timer fires at points spread over the call."""
    keys = [b"k%05d" % number for number in range(20_000)]
    items = dict.fromkeys(keys, b"v")
    previous = signal.signal(signal.SIGALRM, interrupt)
    gc.disable()  # a garbage collector's callback (hypothesis has one) would swallow the exception
    try:
        with dbopen(dbpath, "n", buffer_size=buffer_size) as database:
            database.update(items)
            started = time.perf_counter()
            database.delete_many(keys)
            took = time.perf_counter() - started
        outcomes = []
        # Delays spread over the call as it ran alone, then one that outlasts it on a busy machine.
        delays = [took * share / 12 for share in range(1, 13)] + [10 * took + 1]
        for attempt, delay in enumerate(delays):
            with dbopen(dbpath, "n", buffer_size=buffer_size) as database:
                database.update(items)
                try:
                    # Armed inside the try: on a busy machine the shortest delay can pass
                    # before setitimer returns, and its handler then raises right there.
                    signal.setitimer(signal.ITIMER_REAL, delay)
                    database.delete_many(keys)
                    time.sleep(took)  # the deletes took less than the delay: wait for it
                except Interrupted:
                    pass
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                left = len(database)
                assert left in (0, len(keys)), (attempt, left)
                outcomes.append(left)
            with dbopen(dbpath, "r") as again:
                assert len(again) == left, attempt
    finally:
        signal.signal(signal.SIGALRM, previous)
        gc.enable()
    assert outcomes[-1] == 0, "the call the timer did not reach deleted every key"
