"""The two kernels side by side: the same bytes, the same answers to hostile files.

Every other test runs once per kernel; these run both in one test and
compare what they write and what they raise.
"""

import functools
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import semidbm
from semidbm import _checkpoint, db
from semidbm.format import HEADER

from .conftest import compiled_only
from .support.hostile import mutate, mutations, outcome, sample_file
from .support.kernels import KERNELS
from .support.log import directory_contents
from .support.records import put_record

keys = st.one_of(st.sampled_from([b"", b"a", b"key", "ключ", b"\x00\xff"]), st.binary(max_size=10))
values = st.one_of(st.binary(max_size=200), st.text(max_size=20))
operations = st.lists(
    st.one_of(
        st.tuples(st.just("set"), keys, values),
        st.tuples(st.just("delete"), keys),
        st.tuples(st.just("sync")),
        st.tuples(st.just("compact")),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("crash"), st.integers(0, 10_000)),
    ),
    max_size=60,
)


def replay(kernel, path, steps, buffer_size):
    """Run ``steps`` on a new db at ``path``; return what each read and delete answered."""
    opener = functools.partial(db.open_with, kernel, buffer_size=buffer_size)
    answers = []
    database = opener(path, "n")
    for step in steps:
        action = step[0]
        if action == "set":
            database[step[1]] = step[2]
            answers.append(database[step[1]])
        elif action == "delete":
            try:
                del database[step[1]]
                answers.append("deleted")
            except KeyError:
                answers.append("missing")
        elif action == "sync":
            database.sync()
        elif action == "compact":
            database.compact()
        elif action == "reopen":
            database.close()
            database = opener(path, "w")
        elif action == "crash":
            data_path = os.path.join(path, "data")
            with open(data_path, "rb") as handle:
                on_disk = handle.read()
            database.close()
            # A crash loses only what follows the first checkpoint: a new log is renamed
            # into place whole.
            cut = _checkpoint.START_SIZE + step[1] % (len(on_disk) - _checkpoint.START_SIZE + 1)
            with open(data_path, "wb") as handle:
                handle.write(on_disk[:cut])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", semidbm.TornTailWarning)
                database = opener(path, "w")
        answers.append(sorted(database.items()))
    database.close()
    return answers


@compiled_only
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=operations, buffer_size=st.sampled_from([0, 1, 50, 4096, 1 << 20]))
def test_same_operations_write_the_same_bytes(steps, buffer_size):
    place = tempfile.mkdtemp(prefix="semidbm-kernels-")
    try:
        results = {}
        for name, kernel in KERNELS.items():
            path = os.path.join(place, name)
            answers = replay(kernel, path, steps, buffer_size)
            results[name] = (answers, directory_contents(path))
        assert results["python"] == results["cython"]
    finally:
        shutil.rmtree(place)


@compiled_only
@settings(max_examples=400, deadline=None)
@given(
    changes=st.lists(mutations, min_size=1, max_size=4),
    recover=st.booleans(),
    buffer_size=st.sampled_from([0, 16]),
)
def test_hostile_files_give_the_same_answer_from_both_kernels(changes, recover, buffer_size):
    place = tempfile.mkdtemp(prefix="semidbm-hostile-")
    try:
        path = os.path.join(place, "db")
        os.mkdir(path)
        with open(os.path.join(path, "data"), "wb") as handle:
            handle.write(mutate(sample_file(), changes))
        results = {
            name: outcome(kernel, path, recover, buffer_size) for name, kernel in KERNELS.items()
        }
        assert results["python"] == results["cython"]
    finally:
        shutil.rmtree(place)


def long_log():
    """A valid data file of about 5 MiB (puts, updates, deletes) and the offset of each record.

    Long enough that the compiled kernel parses it in a thread of its own.
    """
    rng = random.Random(5)
    records = []
    for i in range(40_000):
        key = b"key%d" % rng.randrange(6_000)
        if i % 11 == 0:
            deletion = struct.pack("!ii", len(key), -1) + key
            records.append(deletion + struct.pack("!I", zlib.crc32(key)))
        else:
            records.append(put_record(key, rng.randbytes(rng.randrange(60, 200))))
    offsets = []
    position = len(HEADER)
    for record in records:
        offsets.append(position)
        position += len(record)
    return HEADER + b"".join(records), offsets


def damage(data, offsets, how):
    """``data`` with one kind of damage, at a record boundary chosen by ``how``."""
    if how == "intact":
        return data
    kind, where = how.split("-")
    offset = {"first": offsets[0], "middle": offsets[len(offsets) // 2], "last": offsets[-1]}[where]
    if kind == "negative_key_length":
        return data[:offset] + struct.pack("!i", -5) + data[offset + 4 :]
    if kind == "huge_value_length":
        return data[:offset + 4] + struct.pack("!i", 2**31 - 1) + data[offset + 8 :]
    if kind == "cut":
        return data[: offset + 10]
    raise ValueError(how)


@compiled_only
@pytest.mark.parametrize(
    "how",
    ["intact"]
    + ["%s-%s" % (kind, where)
       for kind in ("negative_key_length", "huge_value_length", "cut")
       for where in ("first", "middle", "last")],
)
@pytest.mark.parametrize("recover", [False, True])
def test_long_logs_give_the_same_answer_from_both_kernels(tmp_path, how, recover):
    data, offsets = long_log()
    path = tmp_path / "db"
    path.mkdir()
    (path / "data").write_bytes(damage(data, offsets, how))
    results = {name: outcome(kernel, path, recover, 0) for name, kernel in KERNELS.items()}
    assert results["python"] == results["cython"]
    if how == "intact":
        assert results["python"][0] == "opened" and len(results["python"][2]) > 4_000


@compiled_only
@pytest.mark.parametrize("seed", range(3))
def test_random_garbage_after_the_header_is_load_error_or_opens(seed, tmp_path):
    rng = random.Random(seed)
    for attempt in range(200):
        path = tmp_path / ("db%d" % attempt)
        path.mkdir()
        (path / "data").write_bytes(HEADER + rng.randbytes(rng.randrange(0, 300)))
        results = {
            name: outcome(kernel, path, rng.random() < 0.5, 0) for name, kernel in KERNELS.items()
        }
        assert results["python"] == results["cython"]
        assert results["python"][0] in ("opened", "load error")


@compiled_only
def test_compiled_item_access_is_the_kernels_c_slots():
    core = KERNELS["cython"]
    database_class = db.database_class(core)
    for name in (
        "__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__", "__iter__"
    ):
        assert name not in vars(database_class), name
        method = getattr(database_class, name)
        assert method is getattr(core.Store, name), name
        assert type(method).__name__ == "wrapper_descriptor", name


def test_many_keys_with_deletes_and_reinserts(dbopen, dbpath):
    rng = random.Random(7)
    model = {}
    with dbopen(dbpath, "c", buffer_size=1 << 16) as database:
        for _ in range(60_000):
            key = b"%d" % rng.randrange(40_000)
            if rng.random() < 0.3 and key in model:
                del database[key]
                del model[key]
            else:
                database[key] = key * 2
                model[key] = key * 2
        assert len(database) == len(model)
        assert all(database[key] == value for key, value in model.items())
        assert sum(1 for i in range(40_000) if b"%d" % i in database) == len(model)
    with dbopen(dbpath) as database:
        assert dict(database.items()) == model


MEMORY_SCRIPT = r"""
import gc, os, sys
import semidbm

def anonymous_resident():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024

path, layout, key_size, action = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
assert semidbm.implementation == "cython"
if action == "fill":
    with semidbm.open(path, "n") as db:
        if layout == "sequential":
            for i in range(2_000_000):
                db[b"%0*d" % (key_size, i)] = b"v" * 20
        elif layout == "small_then_large":
            for i in range(180_000):
                db[b"%0*d" % (key_size, i)] = b"v" if i < 170_000 else b"v" * 2000
        elif layout == "mostly_deleted":
            # 90,000 keys stay (a table of 131,072 slots, 17.5 bytes a key):
            # enough that the process's other allocations during an open
            # (up to some 160 KiB, on Python 3.14) weigh little on them.
            for i in range(300_000):
                db[b"%0*d" % (key_size, i)] = b"v" * 20
            for i in range(90_000, 300_000):
                del db[b"%0*d" % (key_size, i)]
    sys.exit(0)
if action == "rebuild" and os.path.exists(os.path.join(path, "index")):
    os.remove(os.path.join(path, "index"))  # what opening without an index file keeps
# Reopen in a fresh process: nothing the fill allocated is counted.
gc.collect()
before = anonymous_resident()
db = semidbm.open(path, "r")
count = len(db)
assert count and db[b"%0*d" % (key_size, 5)][:1] == b"v"
gc.collect()
print((anonymous_resident() - before) / count)
"""


def index_bytes_per_key(directory, layout, key_size, reopen="rebuild"):
    """Private index bytes a key of a db filled with ``layout`` in one process, reopened in another.

    ``reopen`` is ``"rebuild"`` (the index file removed first: the log is
    replayed into private memory) or ``"mapped"`` (the index file kept).
    """
    env = {k: v for k, v in os.environ.items() if k != "SEMIDBM_PURE_PYTHON"}
    for action in ("fill", reopen):
        result = subprocess.run(
            [sys.executable, "-c", MEMORY_SCRIPT, str(directory / "db"), layout,
             str(key_size), action],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    return float(result.stdout)


@compiled_only
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("key_size", [16, 64])
def test_compiled_index_takes_at_most_32_bytes_per_key(tmp_path, key_size):
    per_key = index_bytes_per_key(tmp_path, "sequential", key_size)
    assert 0 < per_key <= 32, per_key


@compiled_only
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("layout", ["small_then_large", "mostly_deleted"])
def test_compiled_index_fits_its_keys_after_a_misleading_log(tmp_path, layout):
    # The rebuild sizes its table from the first part of the log. Small
    # records first, or keys deleted later, make it expect several times
    # the keys the log ends with; the table must still end at their size.
    per_key = index_bytes_per_key(tmp_path, layout, 16)
    assert 0 < per_key <= 32, per_key


@compiled_only
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_compiled_reader_maps_the_index_file_instead_of_copying_it(tmp_path):
    # 2,000,000 keys: the rebuild above keeps 16 to 32 bytes a key.
    per_key = index_bytes_per_key(tmp_path, "sequential", 16, reopen="mapped")
    assert os.path.exists(tmp_path / "db" / "index")
    assert per_key < 1, per_key
