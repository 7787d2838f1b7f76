"""Sharded databases (``semidbm.sharded``): routing, the manifest's checks, bulk calls, processes.

Each test runs on both kernels (the shards are opened with the kernel
under test). The dbm contract's checks run on a sharded database too,
in test_dbm_contract.
"""

import collections
import concurrent.futures
import contextlib
import copy
import errno
import functools
import gc
import json
import multiprocessing
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import semidbm
from semidbm import _kernel, db, sharded

from .conftest import IMPLEMENTATIONS, kernel_name

MANIFEST = "shards.json"


@pytest.fixture
def sharded_open(kernel):
    """``semidbm.open_sharded`` with each shard on the kernel under test."""
    return functools.partial(sharded.open_sharded_with, kernel)


@pytest.fixture
def spath(tmp_path):
    """A path where no sharded database exists yet."""
    return tmp_path / "sharded.db"


def numbered(count, prefix=b"k"):
    """``count`` items: key ``prefix<n>``, value ``v<n>``."""
    return {prefix + b"%d" % number: b"v%d" % number for number in range(count)}


def write_manifest(path, **changes):
    """Rewrite the manifest of the sharded database ``path`` with ``changes`` to its fields."""
    manifest = json.loads((path / MANIFEST).read_text())
    manifest.update(changes)
    (path / MANIFEST).write_text(json.dumps(manifest))


def substituted(database, substitutes):
    """Another handle of the shards of ``database``, some replaced: ``substitutes`` maps a
    shard's number to what stands in for it."""
    shards = database.shards
    for number, substitute in substitutes.items():
        shards[number] = substitute
    return sharded.ShardedDatabase(database.path, "w", "crc32", shards)


def shard_contents(kernel, path, count):
    """The keys of each of the ``count`` shards of ``path`` (default names), opened alone."""
    contents = []
    for number in range(count):
        with db.open_with(kernel, path / ("shard-%04d" % number), "r") as single:
            contents.append(set(single.keys()))
    return contents


# --- the hash rule ---


def test_the_rule_is_crc32_modulo_the_count():
    # zlib.crc32(b"123456789") is CRC-32's check value, 0xCBF43926, in every implementation.
    assert semidbm.shard_of(b"123456789", 1000) == 0xCBF43926 % 1000 == 262
    assert semidbm.shard_of(b"", 3) == 0
    assert [semidbm.shard_of(b"k%d" % n, 7) for n in range(300)] == [
        zlib.crc32(b"k%d" % n) % 7 for n in range(300)
    ]
    assert semidbm.shard_of("\u00e9", 4) == semidbm.shard_of("\u00e9".encode(), 4)


@pytest.mark.parametrize("count, error", [(0, ValueError), (-1, ValueError), (True, TypeError),
                                          (2.0, TypeError)])
def test_a_count_of_shards_that_is_no_positive_int_is_refused(count, error):
    with pytest.raises(error, match="count must be"):
        semidbm.shard_of(b"k", count)


def test_every_key_lands_in_the_shard_shard_of_names(kernel, sharded_open, spath):
    items = numbered(500)
    items["ключ \U0001f40d"] = "значение"  # str: routed and stored as UTF-8
    with sharded_open(spath, "c", shards=5) as database:
        database.update(items)
        assert database.shard_of("ключ \U0001f40d") == semidbm.shard_of(
            "ключ \U0001f40d".encode(), 5
        )
    expected = [set() for _ in range(5)]
    for key in items:
        key = key.encode() if isinstance(key, str) else key
        expected[semidbm.shard_of(key, 5)].add(key)
    assert shard_contents(kernel, spath, 5) == expected
    assert all(expected)  # every shard got keys: the test sees a wrong routing
    with sharded_open(spath) as database:
        assert database["ключ \U0001f40d"] == "значение".encode()
        assert len(database) == 501


# --- a model, after random operations and reopens ---

model_keys = st.one_of(st.sampled_from([b"", b"a", b"b", "é", "ключ"]), st.binary(max_size=6))
model_values = st.one_of(st.binary(max_size=20), st.text(max_size=5))
operations = st.lists(
    st.one_of(
        st.tuples(st.just("set"), model_keys, model_values),
        st.tuples(st.just("delete"), model_keys),
        st.tuples(st.just("update"), st.lists(st.tuples(model_keys, model_values), max_size=8)),
        st.tuples(st.just("delete_many"), st.lists(model_keys, max_size=6)),
        st.tuples(st.just("get_many"), st.lists(model_keys, max_size=6)),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("compact")),
    ),
    max_size=30,
)


def as_bytes(item):
    return item.encode("utf-8") if isinstance(item, str) else item


def apply(database, model, operation):
    """Apply ``operation`` to ``database`` and to the dict ``model``; compare what they answer."""
    name, arguments = operation[0], operation[1:]
    if name == "set":
        key, value = arguments
        database[key] = value
        model[as_bytes(key)] = as_bytes(value)
    elif name == "delete":
        key = as_bytes(arguments[0])
        if key in model:
            del database[arguments[0]]
            del model[key]
        else:
            with pytest.raises(KeyError):
                del database[arguments[0]]
    elif name == "update":
        database.update(arguments[0])
        model.update((as_bytes(key), as_bytes(value)) for key, value in arguments[0])
    elif name == "delete_many":
        keys = [as_bytes(key) for key in arguments[0]]
        if all(key in model for key in keys) and len(set(keys)) == len(keys):
            database.delete_many(arguments[0])
            for key in keys:
                del model[key]
        else:
            with pytest.raises(KeyError):
                database.delete_many(arguments[0])
    elif name == "get_many":
        keys = [as_bytes(key) for key in arguments[0]]
        assert database.get_many(arguments[0], b"-") == [model.get(key, b"-") for key in keys]
    elif name == "compact":
        database.compact()


#: The kernel fixture is the same module at every example: nothing in it to reset.
FIXTURE_CHECK = [HealthCheck.function_scoped_fixture]


def run_model(kernel, steps):
    """Run ``steps`` on a new sharded database of 3 shards, checking it against a dict."""
    with tempfile.TemporaryDirectory() as place:
        path = os.path.join(place, "model.db")
        model = {}
        database = sharded.open_sharded_with(kernel, path, "c", shards=3)
        try:
            for operation in steps:
                if operation[0] == "reopen":
                    database.close()
                    database = sharded.open_sharded_with(kernel, path, "w")
                else:
                    apply(database, model, operation)
                assert len(database) == len(model)
            assert dict(database.items()) == model
            assert sorted(database) == sorted(model)
        finally:
            database.close()
        with sharded.open_sharded_with(kernel, path) as reader:
            assert dict(reader.items()) == model


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE_CHECK)
@given(steps=operations)
def test_random_operations_match_a_dict(kernel, steps):
    run_model(kernel, steps)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURE_CHECK)
@given(steps=operations)
def test_random_operations_match_a_dict_long(kernel, steps):
    run_model(kernel, steps)


# --- bulk calls spanning shards ---


def test_get_many_answers_in_the_callers_order(sharded_open, spath):
    with sharded_open(spath, "c", shards=4) as database:
        database.update(numbered(50))
        keys = [b"k49", "k3", b"missing", bytearray(b"k3"), b"k0", b"k17"]
        assert database.get_many(keys) == [b"v49", b"v3", None, b"v3", b"v0", b"v17"]
        assert database.get_many([], b"d") == []
        with database.view("k3") as view:
            assert bytes(view) == b"v3"
        database.sync()
        with pytest.raises(TypeError, match="not one key"):
            database.get_many(b"k1")


def test_update_and_delete_many_span_every_shard(kernel, sharded_open, spath):
    with sharded_open(spath, "c", shards=4) as database:
        database.update(numbered(40), extra="x")
        database.update([(b"k1", b"new")])
        database.update(collections.UserDict({b"k2": b"mapped", "extra": "y"}))
        assert len(database) == 41 and database[b"k1"] == b"new" and database[b"extra"] == b"y"
        assert database[b"k2"] == b"mapped"
        database.delete_many([b"k%d" % number for number in range(0, 40, 2)])
        assert sorted(database) == sorted([b"k%d" % n for n in range(1, 40, 2)] + [b"extra"])
    assert all(len(keys) > 2 for keys in shard_contents(kernel, spath, 4))


@pytest.mark.parametrize("bad", ["missing", "twice"])
def test_delete_many_with_a_bad_key_leaves_every_shard_unchanged(kernel, sharded_open, spath,
                                                                  bad):
    with sharded_open(spath, "c", shards=4) as database:
        database.update(numbered(40))
        keys = [b"k%d" % number for number in range(39)]  # in every shard
        keys.append(b"nothere" if bad == "missing" else b"k5")
        with pytest.raises(KeyError) as caught:
            database.delete_many(keys)
        assert caught.value.args == (keys[-1],)
        assert dict(database.items()) == numbered(40)
    assert [len(keys) for keys in shard_contents(kernel, spath, 4)] == [
        sum(1 for key in numbered(40) if semidbm.shard_of(key, 4) == shard) for shard in range(4)
    ]


def test_an_update_with_a_bad_item_writes_nothing(sharded_open, spath):
    with sharded_open(spath, "c", shards=4) as database:
        with pytest.raises(TypeError, match="values must be str or bytes-like, not int"):
            database.update([(b"k%d" % number, b"v") for number in range(20)] + [(b"k", 1)])
        with pytest.raises(ValueError, match="element #1 has length 3"):
            database.update([(b"a", b"1"), (b"b", b"2", b"3")])
        assert len(database) == 0


def test_reads_and_writes_of_a_reader_or_a_closed_database_raise_error(sharded_open, spath):
    with sharded_open(spath, "c", shards=2) as database:
        database[b"k"] = b"v"
    with sharded_open(spath) as reader:
        assert not reader.writable
        for write in (lambda: reader.update(a="1"), lambda: reader.delete_many([b"k"]),
                      lambda: reader.__setitem__(b"a", b"1")):
            with pytest.raises(semidbm.error, match="read-only"):
                write()
    assert reader.closed
    for operation in (lambda: reader.update(), lambda: reader[b"k"], lambda: b"k" in reader,
                      lambda: reader.get(b"k"), reader.sync, len):
        with pytest.raises(semidbm.error, match="closed"):
            operation(reader) if operation is len else operation()


# --- reads, routed in C on the compiled kernel ---


def test_reads_route_each_kind_of_key_and_raise_as_one_database(kernel, sharded_open, spath):
    items = numbered(300)
    items["ключ"] = b"u"
    with sharded_open(spath, "c", shards=7) as database:
        database.update(items)
    with sharded_open(spath) as database:
        # The compiled kernel's shards take get_many routed in C, the others in Python.
        assert (database._routed_get_many is not None) is (kernel_name(kernel) == "cython")
        assert {key: database[key] for key in items} == items
        assert database.get_many(list(items)) == list(items.values())
        kinds = ["ключ", b"k7", "k7", bytearray(b"k7"), memoryview(b"kk77")[::2], b"missing"]
        assert [database.get(key) for key in kinds] == [b"u"] + [b"v7"] * 4 + [None]
        assert database.get_many(kinds, b"d") == [b"u"] + [b"v7"] * 4 + [b"d"]
        for missing in (b"missing", "missing", bytearray(b"missing")):
            with pytest.raises(KeyError) as caught:
                database[missing]
            assert caught.value.args == (missing,)  # the key as given
        for bad in (1, None):
            message = "keys must be str or bytes-like, not %s" % type(bad).__name__
            with pytest.raises(TypeError, match=message):
                database[bad]
            with pytest.raises(TypeError, match=message):
                database.get_many([b"k1", bad])
    for read in (lambda: database[b"k1"], lambda: database.get_many([b"k1", b"k2"])):
        with pytest.raises(semidbm.error, match="closed"):
            read()


@pytest.mark.parametrize("router", IMPLEMENTATIONS)
def test_each_kernels_router_reads_a_key_as_its_shard_does(router, kernel, sharded_open, spath):
    """Either kernel's ShardRouter (the compiled one in C, its twin in Python), over shards of
    either kernel: each key's value, ``in`` and ``get`` from the shard of its CRC-32, and that
    shard's errors."""
    items = numbered(50)
    items["ключ"] = b"u"
    with sharded_open(spath, "c", shards=3) as database:
        database.update(items)
    database = sharded_open(spath)
    routes = _kernel.load(router).ShardRouter(iter(database.shards))
    assert routes._shards == tuple(database.shards)
    kinds = ["ключ", "k7", bytearray(b"k7"), memoryview(b"kk77")[::2]]
    for key, value in [*items.items(), *zip(kinds, [b"u"] + [b"v7"] * 3)]:
        assert (routes[key], key in routes, routes.get(key, b"d"), routes.get(key)) == (
            value, True, value, value)
    for missing in (b"missing", "missing", bytearray(b"missing")):
        with pytest.raises(KeyError) as caught:
            routes[missing]
        assert caught.value.args == (missing,)  # the key as given
        assert missing not in routes
        assert (routes.get(missing, b"d"), routes.get(missing)) == (b"d", None)
    reads = (routes.__getitem__, routes.__contains__, routes.get)
    for read in reads:
        for bad in (1, None):
            with pytest.raises(TypeError, match="keys must be str or bytes-like, not %s"
                               % type(bad).__name__):
                read(bad)
    database.close()
    for read in reads:
        with pytest.raises(semidbm.error, match="closed"):
            read(b"k1")
    empty = _kernel.load(router).ShardRouter([])
    for read in (empty.__getitem__, empty.__contains__, empty.get):
        with pytest.raises(ValueError, match="no shard"):
            read(b"k1")


@pytest.mark.parametrize("flag", ["c", "cm"])
def test_a_writer_reads_its_own_writes_through_the_routing(sharded_open, spath, flag):
    """An exclusive or shared writer's ``[]``, ``in`` and ``get`` find its latest writes, still
    in its shards' buffers."""
    with sharded_open(spath, flag, shards=3) as writer:
        writer.update(numbered(20))
        writer[b"k3"] = b"new"
        del writer[b"k4"]
        assert (writer[b"k3"], b"k4" in writer, b"k5" in writer) == (b"new", False, True)
        assert (writer.get(b"k4", b"d"), writer.get(b"k5"), writer.get("k3")) == (
            b"d", b"v5", b"new")


class Closer:
    """Closes ``database`` when collected: a finalizer that runs in the middle of a read."""

    def __init__(self, database):
        self.database = database
        self.cycle = self  # freed by a collection only

    def __del__(self):
        self.database.close()


class ClosingKey:
    """The key ``b"k7"`` as a buffer whose export first closes ``database`` (Python 3.12 on)."""

    def __init__(self, database):
        self.database = database

    def __buffer__(self, flags):
        self.database.close()
        return memoryview(b"k7")


@contextlib.contextmanager
def closed_as_read(database):
    """A key whose reading runs Python code that closes ``database``: where Python code can be
    a buffer (3.12 on), a ClosingKey; before, a strided view, whose copy is a new object made
    with a collection due, which frees a Closer. Enter it inside ``pytest.raises``: once the
    collection is due, nothing may make an object before the read."""
    if sys.version_info >= (3, 12):
        yield ClosingKey(database)
        return
    key = memoryview(b"kk77")[::2]
    thresholds = gc.get_threshold()
    gc.collect()
    gc.disable()
    try:
        Closer(database)
        assert not database.closed
        held = [[] for _ in range(4)]  # new objects, so that the count is past the threshold
        gc.set_threshold(1)
        gc.enable()
        yield key
        del held
    finally:
        gc.set_threshold(*thresholds)
        gc.enable()


@pytest.mark.parametrize("router", IMPLEMENTATIONS)
def test_a_shard_closed_as_its_key_is_read_is_found_closed(router, kernel, sharded_open, spath):
    """Python code that runs as the router reads a key (a finalizer, or the key's buffer)
    closes the shards: the read raises semidbm.error; it never looks in a shard closed after
    its check (which would answer KeyError, False or None)."""
    with sharded_open(spath, "c", shards=2) as database:
        database.update(numbered(10))
    reads = [lambda routes, key: routes[key], lambda routes, key: key in routes,
             lambda routes, key: routes.get(key)]
    for read in reads:
        database = sharded_open(spath)
        routes = _kernel.load(router).ShardRouter(database.shards)
        with pytest.raises(semidbm.error, match="closed"):
            with closed_as_read(database) as key:
                read(routes, key)


# --- writes split by shard: in C on the compiled kernel, in Python otherwise ---


def compiled_store():
    """The compiled kernel's Store class (its routing), or a skip where it was not built."""
    if "cython" not in IMPLEMENTATIONS:
        pytest.skip("needs the compiled kernel; SEMIDBM_NO_EXTENSIONS says it was not built")
    return _kernel.load("cython").Store


KEYS = st.one_of(st.binary(max_size=12), st.text(max_size=6),
                 st.binary(max_size=12).map(bytearray))


@settings(max_examples=60, deadline=None)
@given(pairs=st.lists(st.tuples(KEYS, KEYS), max_size=30), count=st.integers(1, 5))
def test_pairs_are_split_and_encoded_alike_in_c_and_in_python(pairs, count):
    store = compiled_store()
    assert store._routed_split(pairs, count) == sharded._split(pairs, count, "crc32")
    assert store._routed_batches(iter(pairs), count) == sharded._batches(pairs, count, "crc32")


@pytest.mark.parametrize("pairs, error, message", [
    ([(b"a", b"1"), (b"b", 2)], TypeError, "values must be str or bytes-like, not int"),
    ([(1, b"1")], TypeError, "keys must be str or bytes-like, not int"),
    ([(b"a", b"1"), 5], TypeError, "element #1 \\(int\\) to a sequence"),
    ([(b"a", b"1", b"2")], ValueError, "element #0 has length 3"),
    ([("\udc80", b"1")], UnicodeEncodeError, "surrogates not allowed"),
])
def test_a_bad_pair_is_refused_alike_in_c_and_in_python(pairs, error, message):
    store = compiled_store()
    for split in (functools.partial(store._routed_split, pairs, 3),
                  functools.partial(store._routed_batches, pairs, 3),
                  functools.partial(sharded._split, pairs, 3, "crc32"),
                  functools.partial(sharded._batches, pairs, 3, "crc32")):
        with pytest.raises(error, match=message):
            split()


#: Run in a process of its own, whose peak resident size starts small: 33 values of 64 MiB
#: (one object) for one shard, 2 GiB of records; prints how much the peak grew, in KiB.
PAST_A_BATCH = """
import resource
from semidbm import _kernel
store = _kernel.load("cython").Store
value = bytes(64 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    store._routed_batches(((b"k%d" % number, value) for number in range(33)), 1)
except ValueError as exc:
    assert "at most 2147483647 bytes" in str(exc), exc
else:
    raise AssertionError("2 GiB of records for one shard were not refused")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


def test_a_shard_past_what_a_batch_holds_is_refused_before_any_record_is_made():
    """The compiled encoder sums each shard's records before it makes any, so the refusal of
    2 GiB of records costs no 2 GiB buffer. In a new process: the peak resident size of this
    one may already stand higher than the buffer would take it. Catches an encoder that grows
    a buffer as it goes (the peak grew by 2 GiB before the refusal)."""
    pytest.importorskip("resource")  # the peak resident size (POSIX)
    compiled_store()
    done = subprocess.run([sys.executable, "-c", PAST_A_BATCH], capture_output=True, text=True,
                          check=True)
    assert int(done.stdout) < 256 << 10  # KiB


@pytest.mark.parametrize("count", [0, -1])
def test_no_shard_is_refused_alike_in_c_and_in_python(count):
    store = compiled_store()
    for split in (store._routed_split, store._routed_batches,
                  functools.partial(sharded._split, rule="crc32"),
                  functools.partial(sharded._batches, rule="crc32")):
        with pytest.raises(ValueError, match="no shard"):
            split([(b"a", b"1")], count)


def test_the_routed_get_many_refuses_no_shard_and_no_tuple():
    """An empty tuple is no shard; None is no tuple, refused before C reads a count of shards
    from it (the macro reads past the object: None was let through, to a ValueError)."""
    store = compiled_store()
    with pytest.raises(ValueError, match="no shard"):
        store._routed_get_many((), [b"a"])
    with pytest.raises(TypeError):
        store._routed_get_many(None, [b"a"])


def test_encoded_batches_are_what_each_shard_commits(kernel, sharded_open, spath):
    pairs = [("k%d" % number, b"v%d" % number) for number in range(200)] + [("k3", "again")]
    with sharded_open(spath, "c", shards=4, format=2) as database:
        records = sharded._batches_by_shard(pairs, database.shards)
        assert records[0] is not None and len(records) == 4
        for shard, record in zip(database.shards, records):
            shard._commit_encoded(record)
        assert sharded._batches_by_shard([], database.shards) == [None] * 4
        model = dict(pairs[:-1], **{"k3": b"again"})
        assert dict(database.items()) == {key.encode(): value for key, value in model.items()}
    assert shard_contents(kernel, spath, 4) == [
        {key.encode() for key, _ in pairs[:-1] if semidbm.shard_of(key, 4) == shard}
        for shard in range(4)
    ]


# --- the manifest and its checks ---


def test_the_manifest_names_the_format_version_rule_count_and_shards(sharded_open, spath):
    with sharded_open(spath, "c", shards=3) as database:
        assert database.path == str(spath)
        assert [shard.path for shard in database.shards] == [
            str(spath / ("shard-%04d" % number) / "data") for number in range(3)
        ]
    assert json.loads((spath / MANIFEST).read_text()) == {
        "format": "semidbm-sharded",
        "version": 1,
        "hash": "crc32",
        "count": 3,
        "shards": ["shard-0000", "shard-0001", "shard-0002"],
    }
    assert sorted(os.listdir(spath)) == ["shard-0000", "shard-0001", "shard-0002", MANIFEST]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"version": 2}, "version 2, which this semidbm does not know"),
        ({"version": True}, "version True, which this semidbm does not know"),
        ({"hash": "md5"}, "the hash rule 'md5', which this semidbm does not know"),
        ({"format": "other"}, "its format is not 'semidbm-sharded'"),
        ({"count": 2}, "a count of 2 shards, and a list of 3"),
        ({"shards": "shard-0000"}, "no list of shards"),
        ({"shards": ["shard-0000", "shard-0001", "../elsewhere"]}, "'../elsewhere' leads out"),
        ({"shards": ["shard-0000", "shard-0001", "shard-0002/../.."]}, "leads out"),
        ({"shards": ["shard-0000", "shard-0001", "."]}, "'.' leads out"),
        ({"shards": ["shard-0000", "shard-0001", "./shard-0000"]}, "a shard is named twice"),
        ({"shards": ["shard-0000", "shard-0001", 7]}, "not a non-empty string: 7"),
        ({"count": 0, "shards": []}, "no shard"),
        ({"shards": ["shard-0000", "shard-0001", "shard\x00-0002"]}, "no file name"),
        ({"shards": ["shard-0000", "shard-0001", "shard-\ud800"]}, "no file name"),
    ],
)
@pytest.mark.parametrize("flag", ["r", "w", "c", "n"])
def test_a_manifest_that_fails_a_check_is_refused(kernel, sharded_open, spath, changes, message,
                                                  flag):
    with sharded_open(spath, "c", shards=3) as database:
        database.update(numbered(30))
    write_manifest(spath, **changes)
    with pytest.raises(semidbm.error, match="not a manifest this semidbm can trust: .*" + message):
        sharded_open(spath, flag)
    assert sum(len(keys) for keys in shard_contents(kernel, spath, 3)) == 30  # 'n' emptied nothing


def test_a_manifest_that_is_not_json_is_refused(sharded_open, spath):
    sharded_open(spath, "c", shards=2).close()
    (spath / MANIFEST).write_text('{"format": "semidbm-sharded",')
    with pytest.raises(semidbm.error, match="not JSON"):
        sharded_open(spath)


def test_a_manifest_nested_too_deep_is_refused(sharded_open, spath):
    sharded_open(spath, "c", shards=2).close()
    (spath / MANIFEST).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(semidbm.error, match="nested too deep"):
        sharded_open(spath)


@pytest.mark.parametrize("alias", ["absolute", "link"])
def test_one_directory_named_as_two_shards_is_refused(sharded_open, spath, alias):
    sharded_open(spath, "c", shards=2).close()
    if alias == "absolute":
        second = str(spath / "shard-0000")
    else:
        os.symlink("shard-0000", spath / "alias")
        second = "alias"
    write_manifest(spath, shards=["shard-0000", second])
    with pytest.raises(semidbm.error, match="shards 0 and 1 are one directory"):
        sharded_open(spath)


@pytest.mark.parametrize("flag", ["r", "w", "c", "n"])
def test_a_missing_shard_is_refused_and_none_is_made(sharded_open, spath, flag):
    sharded_open(spath, "c", shards=3).close()
    os.rename(spath / "shard-0001", spath.parent / "away")
    with pytest.raises(semidbm.error, match="shard 1 of sharded semidbm database .* is missing"
                       ) as caught:
        sharded_open(spath, flag)
    assert caught.value.errno == errno.ENOENT
    assert caught.value.filename == os.path.join(str(spath), "shard-0001")
    assert not (spath / "shard-0001").exists()


def test_shards_that_contradict_the_manifest_are_refused(sharded_open, spath):
    sharded_open(spath, "c", shards=3).close()
    with pytest.raises(semidbm.error, match="shards=4 shards given, but its manifest names 3"):
        sharded_open(spath, "c", shards=4)
    with pytest.raises(semidbm.error, match=r"manifest names 3 shards$"):
        sharded_open(spath, "r", shards=["a", "b", "c"])
    sharded_open(spath, "r", shards=3).close()
    sharded_open(spath, "r", shards=["shard-0000", "./shard-0001", "shard-0002/"]).close()
    write_manifest(spath, shards=["./shard-0000", "shard-0001/", "shard-0002"])  # by hand
    sharded_open(spath, "r", shards=3).close()


@pytest.mark.parametrize(
    "shards, error, message",
    [
        (0, ValueError, "1 or more"),
        (True, TypeError, "not bool"),
        ("shard", TypeError, "not str"),
        (["a", "../b"], ValueError, "leads out"),
        (["a", "a/"], ValueError, "named twice"),
        ([], ValueError, "no shard"),
    ],
)
def test_bad_shards_are_refused_before_the_disk_is_touched(sharded_open, spath, shards, error,
                                                           message):
    with pytest.raises(error, match=message):
        sharded_open(spath, "c", shards=shards)
    assert not spath.exists()


def test_a_bad_flag_or_option_is_refused_and_leaves_nothing(sharded_open, spath):
    with pytest.raises(ValueError, match="flag must be"):
        sharded_open(spath, "x", shards=2)
    with pytest.raises(ValueError, match="buffer_size"):
        sharded_open(spath, "c", shards=2, buffer_size=-1)
    assert not spath.exists()


def test_no_database_or_no_manifest_is_an_error_naming_what_to_do(sharded_open, spath):
    with pytest.raises(semidbm.error, match="give shards=N") as caught:
        sharded_open(spath, "c")
    assert caught.value.errno == errno.ENOENT and not spath.exists()
    with pytest.raises(semidbm.error, match="^.Errno 2. no sharded semidbm database: ") as caught:
        sharded_open(spath, "w")
    assert caught.value.filename == str(spath)
    with pytest.raises(semidbm.error, match="No such file") as caught:
        sharded_open(spath / "below", "c", shards=2)  # the operating system's error, as error
    assert caught.value.errno == errno.ENOENT
    (spath / "x").mkdir(parents=True)
    with pytest.raises(semidbm.error, match="has no manifest"):
        sharded_open(spath, "w")


def test_a_file_or_a_single_database_is_no_place_for_shards(dbopen, sharded_open, spath):
    dbopen(spath, "c").close()
    with pytest.raises(semidbm.error, match="is a semidbm database, not a sharded one"):
        sharded_open(spath, "c", shards=2)
    assert sorted(os.listdir(spath)) == ["data", "lock"]
    with pytest.raises(semidbm.error, match="not a directory"):
        sharded_open(spath / "data", "c", shards=2)


def test_a_creation_cut_short_before_the_manifest_is_completed_by_c(kernel, sharded_open, spath,
                                                                    monkeypatch):
    def crash(*args):
        raise KeyboardInterrupt  # as a kill between the shards and the manifest

    monkeypatch.setattr(sharded, "_write_manifest", crash)
    with pytest.raises(KeyboardInterrupt):
        sharded_open(spath, "c", shards=3)
    monkeypatch.undo()
    assert sorted(os.listdir(spath)) == ["shard-0000", "shard-0001", "shard-0002"]
    for number in range(3):  # the shards were closed, and keep what was written to them
        with db.open_with(kernel, spath / ("shard-%04d" % number), "w") as shard:
            shard[b"early"] = b"%d" % number
    with pytest.raises(semidbm.error, match="has no manifest .* open it with flag 'c' and "
                       "shards=N to complete it") as caught:
        sharded_open(spath, "r")
    assert caught.value.errno == errno.ENOENT
    with sharded_open(spath, "c", shards=3) as database:
        database[b"later"] = b"x"
    with sharded_open(spath) as database:
        assert database[b"later"] == b"x"
        assert [shard[b"early"] for shard in database.shards] == [b"0", b"1", b"2"]


def test_a_creation_that_finds_a_manifest_made_meanwhile_keeps_it(sharded_open, spath):
    # Two processes creating the database with 'cm': the second to write the manifest finds
    # the first's, checks it, and never replaces it.
    sharded_open(spath, "c", shards=2).close()
    manifest = (spath / MANIFEST).read_bytes()
    assert sharded._write_manifest(str(spath), ["shard-0000", "shard-0001"], 0o666) == "crc32"
    with pytest.raises(semidbm.error, match="shards=3 shards given, but its manifest names 2"):
        sharded._write_manifest(str(spath), ["shard-0000", "shard-0001", "shard-0002"], 0o666)
    assert (spath / MANIFEST).read_bytes() == manifest
    assert sorted(os.listdir(spath)) == ["shard-0000", "shard-0001", MANIFEST]


def test_shards_on_another_directory_by_absolute_path(kernel, sharded_open, spath, tmp_path):
    elsewhere = tmp_path / "other mount"
    elsewhere.mkdir()
    shards = [str(elsewhere / "s0"), "local", str(elsewhere / "s2")]
    with sharded_open(spath, "c", shards=shards) as database:
        database.update(numbered(60))
    assert json.loads((spath / MANIFEST).read_text())["shards"] == shards
    assert sorted(os.listdir(elsewhere)) == ["s0", "s2"]
    assert sorted(os.listdir(spath)) == ["local", MANIFEST]
    with db.open_with(kernel, elsewhere / "s2", "r") as shard:
        assert set(shard.keys()) == {key for key in numbered(60) if semidbm.shard_of(key, 3) == 2}
    with sharded_open(spath) as reader:
        assert dict(reader.items()) == numbered(60)


def test_n_empties_every_shard_and_keeps_the_manifest(kernel, sharded_open, spath):
    with sharded_open(spath, "c", shards=3) as database:
        database.update(numbered(30))
    manifest = (spath / MANIFEST).read_bytes()
    with sharded_open(spath, "n") as database:
        assert len(database) == 0
    assert shard_contents(kernel, spath, 3) == [set(), set(), set()]
    assert (spath / MANIFEST).read_bytes() == manifest


def test_a_failed_open_closes_the_shards_it_opened(kernel, sharded_open, spath):
    sharded_open(spath, "c", shards=3).close()
    with db.open_with(kernel, spath / "shard-0002", "w"):  # holds the last shard's lock
        with pytest.raises(semidbm.error, match="locked|another process|open for writing"):
            sharded_open(spath, "w")
    for number in range(3):  # each lock is free again: an exclusive writer gets it
        db.open_with(kernel, spath / ("shard-%04d" % number), "w").close()


def test_close_closes_every_shard_and_raises_the_first_error(sharded_open, spath):
    database = sharded_open(spath, "c", shards=3)
    failures = []

    class Failing:
        """A shard whose close fails after closing it."""

        def __init__(self, shard, number):
            self.shard, self.number = shard, number

        def close(self, compact=False):
            self.shard.close()
            failures.append(self.number)
            raise OSError("close %d failed" % self.number)

    real = database.shards
    handle = substituted(database, {0: Failing(real[0], 0), 2: Failing(real[2], 2)})
    with pytest.raises(OSError, match="close 0 failed"):
        handle.close()
    assert failures == [0, 2] and all(shard.closed for shard in real)


def test_a_compaction_stopped_by_a_shard_says_what_the_shards_before_it_left_out(
    sharded_open, spath
):
    """The counts of the shards compacted before a failing one reach the caller.

    Shards 0 and 1 each hold a damaged live record, which
    ``recover=True`` leaves out; shard 2 fails. Catches the return
    value's sum, lost with the exception: the caller never learnt that
    two records were gone.
    """
    database = sharded_open(spath, "c", shards=3)
    database.update({b"k%d" % number: b"value%d" % number for number in range(30)})
    database.sync()
    for number in (0, 1):
        data = spath / ("shard-%04d" % number) / "data"
        at = data.read_bytes().rindex(b"value") + 1  # inside a live value
        with open(data, "r+b") as file:  # the file the writer has open
            file.seek(at)
            file.write(b"X")

    class Failing:
        """A shard whose compaction fails."""

        def compact(self, format=None, recover=False):
            raise semidbm.DBMChecksumError("shard 2 failed")

    with pytest.raises(semidbm.DBMChecksumError) as refused:
        substituted(database, {2: Failing()}).compact(recover=True)
    assert str(refused.value) == (
        "shard 2 failed; 2 of the 3 shards were compacted before it, leaving out 2 damaged records"
    )
    assert str(refused.value.__cause__) == "shard 2 failed"
    assert len(database) == 28
    database.close()


def test_a_compaction_stopped_by_a_system_error_keeps_its_errno(sharded_open, spath):
    """A shard's ENOSPC reaches the caller as one, with its file, after other shards compacted.

    Catches the error restated from its message alone, with no errno.
    """
    database = sharded_open(spath, "c", shards=2)
    database.update({b"k%d" % number: b"v" for number in range(10)})

    class Full:
        """A shard whose disk is full."""

        def compact(self, format=None, recover=False):
            raise semidbm.error(errno.ENOSPC, "No space left on device", "shard-0001/data")

    with pytest.raises(semidbm.error) as refused:
        substituted(database, {1: Full()}).compact()
    assert refused.value.errno == errno.ENOSPC
    assert refused.value.filename == "shard-0001/data"
    assert refused.value.strerror == (
        "No space left on device; 1 of the 2 shards were compacted before it, leaving out 0 "
        "damaged records"
    )
    database.close()


# --- pickling and processes ---


def read_all(database):
    """A worker's task: every item of ``database``, and its shards' count."""
    return dict(database.items()), len(database.shards)


def test_a_reader_sent_to_a_spawned_worker_reads_every_key(sharded_open, spath):
    with sharded_open(spath, "c", shards=4) as database:
        database.update(numbered(200))
    context = multiprocessing.get_context("spawn")
    with sharded_open(spath) as reader:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            assert pool.submit(read_all, reader).result() == (numbered(200), 4)


def test_an_exclusive_writer_and_a_closed_database_refuse_to_pickle(sharded_open, spath):
    with sharded_open(spath, "c", shards=2) as writer:
        with pytest.raises(TypeError, match="an exclusive semidbm writer cannot be pickled.*"
                           "'wm' or 'cm'.*sharded"):
            pickle.dumps(writer)
        with pytest.raises(TypeError, match="cannot be copied: it is an open file"):
            copy.copy(writer)
    with pytest.raises(TypeError, match="closed"):
        pickle.dumps(writer)


def test_a_pickled_reader_opens_its_shards_at_first_use(sharded_open, spath):
    with sharded_open(spath, "c", shards=2) as database:
        database.update(numbered(10))
    with sharded_open(spath) as reader:
        handle = pickle.loads(pickle.dumps(reader))
    assert not any(shard.closed for shard in handle.shards)  # pending, not failed
    with handle:
        assert handle.get_many([b"k9", b"k0"]) == [b"v9", b"v0"]
        assert handle.path == str(spath)


def test_a_shared_writer_pickled_after_creating_makes_no_missing_shard(sharded_open, spath):
    with sharded_open(spath, "cm", shards=2) as writer:
        writer.update(numbered(10))
        handle = pickle.loads(pickle.dumps(writer))
    shutil.rmtree(spath / "shard-0001")  # an unmounted disk, say
    with pytest.raises(semidbm.error, match="no semidbm database"):
        handle[b"new"] = b"1"
    assert not (spath / "shard-0001").exists()
    handle.close()


def test_clear_deletes_a_key_written_into_another_shard_than_its_own(kernel, sharded_open, spath):
    sharded_open(spath, "c", shards=2).close()
    key = b"misplaced"
    wrong = 1 - semidbm.shard_of(key, 2)
    with db.open_with(kernel, spath / ("shard-%04d" % wrong), "w") as single:
        single[key] = b"1"
    with sharded_open(spath, "w") as database:
        assert len(database) == 1 and key not in database  # as FORMAT.md says
        database.clear()
        assert len(database) == 0


def write_range(kernel, path, start, stop):
    """A process's task: open ``path`` as a shared writer and write keys w<start>..w<stop - 1>."""
    kernel = _kernel.load(kernel)
    with sharded.open_sharded_with(kernel, path, "cm", shards=4, lock_timeout=30) as writer:
        for number in range(start, stop):
            writer[b"w%d" % number] = b"%d" % number
        writer.update((b"u%d" % number, b"%d" % number) for number in range(start, stop))
    return stop - start


@pytest.mark.skipif(os.name != "posix", reason="shared writers need flock")
def test_two_processes_writing_with_cm_end_with_every_key(kernel, sharded_open, spath):
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
        done = pool.map(write_range, [kernel_name(kernel)] * 2, [str(spath)] * 2, [0, 200],
                        [200, 400])
        assert sum(done) == 400
    with sharded_open(spath) as reader:
        expected = {b"w%d" % n: b"%d" % n for n in range(400)}
        expected.update({b"u%d" % n: b"%d" % n for n in range(400)})
        assert dict(reader.items()) == expected


@pytest.mark.skipif(os.name != "posix", reason="shared writers need flock")
def test_a_shared_writer_pickles_and_writes_in_its_turns(sharded_open, spath):
    with sharded_open(spath, "cm", shards=3) as writer:
        handle = pickle.loads(pickle.dumps(writer))
        handle.update(numbered(30))
        handle.close()
        writer.refresh()
        assert dict(writer.items()) == numbered(30)
