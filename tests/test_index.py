"""The index file (docs/FORMAT.md, "The index file"): written, used, never trusted.

``index`` beside ``data`` holds the compiled kernel's hash table for the
log's first ``covered`` bytes, so that an open replays only the rest.
It is a cache: whatever it holds, every answer must be the log's. The
tests here check, on the kernel each case is about:

- writing: the compiled kernel writes one at ``close()``/``sync()`` once
  the log it does not cover reaches the bound, and after every
  ``compact()``; the pure kernel never does; the file is the document's
  (``support/index_format.py`` reads and writes it from the document alone, and an
  index it builds is used as the kernel's own);
- the tail: writes, overwrites and deletes after the index file, of keys it
  holds or not, replayed over it;
- the traps: semidbm 0.5.1 appending, compacting, recreating; another
  data file of the same length; the index file cut short, garbled, taken
  from another database; copies; the pure kernel compacting; ``'n'``.
  Each reopens with the right contents, and falls back to the replay
  (``index_covered == 0``) wherever the document says the checks catch it;
- hostile index files whose checksums are all right: slots that point
  outside the covered log, into its last 12 bytes (a reader of its own,
  as a crash is possible), into the middle of a record, at a delete, at
  bytes that claim huge lengths, a table with no empty slot, a covered
  length that is not a record boundary; and a writer carries no slot
  outside the covered log into its next index;
- readers: a reader switches to a newer index at ``refresh()``, and a
  reader in another process reads right while a writer installs new
  indexes under it.

Kills during the index file write are in test_crash.py, hostile index files
from a fuzzer in test_fuzz.py.
"""

import faulthandler
import os
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import semidbm
from semidbm import _fields, _kernel, db
from semidbm.format import EMPTY_RECORD_SIZE

from .conftest import IMPLEMENTATIONS, compiled_only
from .support import index_format as fmt
from .support.log import ending_checkpoint
from .support.records import delete_record, put_record
from .support.v051 import apply_v051

pytestmark = pytest.mark.kernel_logic

#: The checkout's top directory, from which a child process imports ``tests.support``.
ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
#: The least uncovered log at which a writer writes a new index file (a small database's bound).
MIN_TAIL = 4 * MiB

posix_only = pytest.mark.skipif(os.name != "posix", reason="select() on pipes, cp -a: POSIX")

PURE = _kernel.load("python")


def compiled_kernel():
    return _kernel.load("cython")


def open_db(kernel, path, flag="r", **options):
    return db.open_with(kernel, path, flag, **options)


def index_path(path):
    return Path(path) / fmt.INDEX_NAME


def data_of(path):
    return (Path(path) / "data").read_bytes()


def index_of(path):
    return index_path(path).read_bytes()


# --- checking contents ---------------------------------------------------------


def first_differences(found, expected, limit=5):
    """A short account of how two dicts differ (a full diff of thousands of keys helps no one)."""
    notes = []
    for key in sorted(set(found) | set(expected)):
        if found.get(key) != expected.get(key):
            have = found.get(key)
            want = expected.get(key)
            notes.append("%r: found %s, expected %s" % (
                key,
                "nothing" if have is None else "%r..." % have[:24],
                "nothing" if want is None else "%r..." % want[:24],
            ))
            if len(notes) == limit:
                break
    return "%d keys found, %d expected; %s" % (len(found), len(expected), "; ".join(notes))


def check_contents(database, model, absent=(), rng=None):
    """Every way of reading ``database`` gives ``model``; the keys ``absent`` are missing.

    Lookups come first, in an order of their own (another than the
    table's), then ``len``, ``in``, ``keys()``, iteration, ``items()``
    and ``values()``: each live key exactly once.
    """
    order = list(model)
    (rng or random.Random(len(model))).shuffle(order)
    for key in order:
        found = database[key]
        assert found == model[key], "%r: %r..., expected %r..." % (key, found[:24], model[key][:24])
    for key in absent:
        assert key not in model
        assert key not in database, key
        with pytest.raises(KeyError):
            database[key]
    assert len(database) == len(model)
    assert all(key in database for key in order)
    keys = database.keys()
    assert len(keys) == len(set(keys)) == len(model), "a key listed twice, or one missing"
    assert set(keys) == set(model), first_differences(dict.fromkeys(keys, b""),
                                                       dict.fromkeys(model, b""))
    iterated = list(database)
    assert len(iterated) == len(model) and set(iterated) == set(model)
    items = database.items()
    assert len(items) == len(model)
    found = dict(items)
    assert found == model, first_differences(found, model)
    assert database.values() == [model[key] for key in keys]


def read_back(kernel, path, model, absent=(), flag="r"):
    """Open ``path`` with ``kernel``, check it holds ``model``; return its ``index_covered``."""
    with open_db(kernel, path, flag) as database:
        covered = database.index_covered
        check_contents(database, model, absent)
        if kernel is PURE:
            assert covered == 0 and database.index_covered == 0
        return covered


def check_on_every_kernel(path, model, absent=(), flag="r"):
    """``read_back`` on each kernel; returns ``index_covered`` per kernel name."""
    return {
        name: read_back(_kernel.load(name), path, model, absent, flag) for name in IMPLEMENTATIONS
    }


def assert_valid_index(path, covered=None):
    """``index`` at ``path`` is the document's, for the data file as it is now; returns it."""
    index_data, data = index_of(path), data_of(path)
    assert fmt.problems(index_data, data) == []
    index = fmt.Index.parse(index_data)
    if covered is not None:
        assert index.covered == covered
    return index


# --- the workload --------------------------------------------------------------

#: Keys of the large database: about 4.6 MB of log, past the 4 MiB bound.
KEYS = 16_000
#: The key the hostile indexes redirect, and the values that hold forged record heads.
VICTIM = b"victim"
TRAPS = {
    b"trap-huge-key": struct.pack("!ii", 2**31 - 1, 4) + b"fake",
    b"trap-negative-key": struct.pack("!ii", -8, 0) + b"negative",
    b"trap-huge-value": struct.pack("!ii", len(VICTIM), 2**31 - 1) + VICTIM + b"after",
    b"trap-delete": struct.pack("!ii", len(VICTIM), -1) + VICTIM + b"\0\0\0\0",
    b"trap-negative-value": struct.pack("!ii", len(VICTIM), -2) + VICTIM + b"zz",
}
#: A long key, and the last record: its value ends with a record head of that key's
#: length, whose key would run thousands of bytes past the log's end.
LONG = b"L" * 6000
LAST_TRAP = (b"trap-last", b"last value" + struct.pack("!ii", len(LONG), 0) + LONG[:2])
SPECIAL = {VICTIM, LONG, LAST_TRAP[0], *TRAPS}


def large_ops(tag, keys=KEYS, sizes=(180, 360), traps=True):
    """Operations that write about 4.6 MB of log: puts, overwrites, deletes, puts after deletes.

    The first key is overwritten and the second deleted early, so that a
    compaction changes the first bytes of the log.
    """
    rng = random.Random(tag)
    ops, live, deleted = [], [], []
    generation = 1
    for i in range(keys):
        key = b"%s-%06d" % (tag.encode(), i)
        ops.append(("set", key, fmt.value_of(key, 0, rng.randrange(*sizes))))
        live.append(key)
        if i == 2:
            ops.append(("set", live[0], fmt.value_of(live[0], 1, 40)))
            ops.append(("del", live.pop(1)))
            deleted.append(ops[-1][1])
        elif i % 100 == 99 and deleted:  # a key deleted earlier, set again
            key = deleted.pop(rng.randrange(len(deleted)))
            generation += 1
            ops.append(("set", key, fmt.value_of(key, generation, rng.randrange(*sizes))))
            live.append(key)
        elif i % 25 == 24:
            other = live[rng.randrange(len(live))]
            generation += 1
            ops.append(("set", other, fmt.value_of(other, generation, rng.randrange(*sizes))))
        elif i % 40 == 39:
            deleted.append(live.pop(rng.randrange(len(live))))
            ops.append(("del", deleted[-1]))
        if traps and i == keys // 3:
            ops.append(("set", VICTIM, b"the victim's value"))
            ops.append(("set", LONG, b"the long key's value"))
            for trap, value in TRAPS.items():
                ops.append(("set", trap, value))
    if traps:
        ops.append(("set",) + LAST_TRAP)
    return ops


def never_written(count=40):
    return [b"never-%d" % i for i in range(count)] + [b"", b"\0", b"x" * 100]


def deleted_keys(ops, model):
    return sorted({op[1] for op in ops if op[0] == "del"} - set(model))


def apply_ours(database, ops):
    for op in ops:
        if op[0] == "set":
            database[op[1]] = op[2]
        elif op[0] == "del":
            del database[op[1]]
        elif op[0] == "compact":
            database.compact()
        else:
            raise ValueError(op)


class Large:
    """``large_ops`` written by the compiled kernel and closed: a database with an index file."""

    def __init__(self, path, tag="large"):
        self.path = Path(path)
        self.ops = large_ops(tag)
        self.model = fmt.apply_ops({}, self.ops)
        with open_db(compiled_kernel(), self.path, "c") as database:
            apply_ours(database, self.ops)
        self.data = data_of(self.path)
        self.size = len(self.data)
        self.absent = deleted_keys(self.ops, self.model)[:200] + never_written()
        self.index_data = index_of(self.path) if index_path(self.path).exists() else None

    def copy(self, target):
        shutil.copytree(self.path, target)
        return Path(target)


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """The large database, made once per module (tests copy it)."""
    if "cython" not in IMPLEMENTATIONS:
        pytest.skip("the index is the compiled kernel's; SEMIDBM_NO_EXTENSIONS: not built")
    template = Large(tmp_path_factory.mktemp("index") / "large.db")
    assert template.size > MIN_TAIL + 100_000
    assert template.index_data is not None, "the compiled kernel wrote no index at close"
    return template


@pytest.fixture
def copied(large, tmp_path):
    """A copy of the large database, with its index file."""
    return large.copy(tmp_path / "db")


@pytest.fixture
def no_hang():
    """A lookup that never ends (a probe over a table without an empty slot) ends the run."""
    faulthandler.dump_traceback_later(120, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


# --- semidbm 0.5.1 ---------------------------------------------------------------



# --- constants ---------------------------------------------------------------------


def test_the_constants_are_the_documents():
    from semidbm import _index_file, format

    assert format.INDEX_NAME == fmt.INDEX_NAME == "index"
    assert format.INDEX_TEMP_NAME == fmt.INDEX_TEMP_NAME == "index.new"
    sizes = (_index_file.HEADER_SIZE, _index_file.SLOT_SIZE, _index_file.BLOCK_SLOTS)
    assert sizes == (4096, 12, 1024)
    for capacity in (16, 17, 1023, 1024, 1025, 2048, 24_001):
        assert _index_file.file_size(capacity) == fmt.file_size(capacity), capacity
    assert fmt.file_size(1025) == 4096 + 12 * 1025 + 4 * 2


def test_the_format_helper_builds_indexes_it_finds_valid():
    """index_format itself: what it builds passes its own checks, and damage does not."""
    records = b"".join([put_record(b"k%d" % i, b"v" * i) for i in range(50)]
                       + [delete_record(b"k3"), put_record(b"k4", b"new")])
    data = fmt.new_log() + records
    assert fmt.checkpoint_at(data, 8) == data[32:48] and fmt.last_checkpoint(data, len(data)) == 8
    with pytest.raises(ValueError, match="holds no checkpoint"):
        fmt.build(fmt.DATA_HEADER + records)
    index = fmt.build(data)
    assert index.count == 49 and index.capacity == fmt.capacity_for(49) == 74
    encoded = index.encode()
    assert len(encoded) == fmt.file_size(index.capacity)
    assert fmt.problems(encoded, data) == []
    assert fmt.problems(encoded, data + put_record(b"tail", b"t")) == []
    assert "samples" in fmt.problems(encoded, data[:-1] + b"X")
    other = "the data file holds no checkpoint of that nonce there"
    assert other in fmt.problems(encoded, fmt.new_log() + records)
    assert other in fmt.problems(encoded, fmt.DATA_HEADER + records + bytes(88))
    damaged = bytearray(encoded)
    damaged[fmt.HEADER_SIZE + 5] ^= 1
    assert "CRC of block 0" in fmt.problems(bytes(damaged), data)
    assert fmt.problems(encoded[:-1], data) != []
    assert fmt.sample_ranges(10_000)[1] == (322, 256)
    assert fmt.sample_ranges(100)[0] == (0, 100) and fmt.sample_ranges(100)[-1] == (0, 100)
    assert fmt.hash_key(0, b"") != fmt.hash_key(1, b"")
    assert fmt.hash_key(7, b"12345678") != fmt.hash_key(7, b"12345678\0")


# --- 1. writing --------------------------------------------------------------------


@compiled_only
def test_a_large_log_closed_by_the_compiled_kernel_has_the_documents_index(large, copied):
    assert sorted(os.listdir(copied)) == ["data", "index", "lock"]
    index = assert_valid_index(copied, covered=large.size)
    assert index.count == len(large.model)
    assert index.capacity == fmt.capacity_for(len(large.model))
    assert index_path(copied).stat().st_mode & 0o777 == (copied / "data").stat().st_mode & 0o777
    compiled = compiled_kernel()
    for flag in ("r", "w"):
        with open_db(compiled, copied, flag) as database:
            assert database.index_covered == large.size
            check_contents(database, large.model, large.absent)
    # A writer that wrote nothing leaves the index file as it was.
    assert index_of(copied) == large.index_data
    assert read_back(PURE, copied, large.model, large.absent) == 0


@compiled_only
def test_the_index_has_the_data_files_permissions(tmp_path):
    path = tmp_path / "db"
    with open_db(compiled_kernel(), path, "c", mode=0o640) as database:
        database[b"a"] = b"1"
        database.compact()
    assert (path / "data").stat().st_mode & 0o777 == 0o640 & ~current_umask()
    assert index_path(path).stat().st_mode & 0o777 == (path / "data").stat().st_mode & 0o777


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_pure_kernel_writes_no_index(tmp_path):
    path = tmp_path / "db"
    ops = large_ops("pure", traps=False)
    model = fmt.apply_ops({}, ops)
    with open_db(PURE, path, "c") as database:
        apply_ours(database, ops)
        database.sync()
        assert database.index_covered == 0
    assert len(data_of(path)) > MIN_TAIL
    assert sorted(os.listdir(path)) == ["data", "lock"]
    with open_db(PURE, path, "w") as database:
        database.compact()
    assert sorted(os.listdir(path)) == ["data", "lock"]
    assert read_back(PURE, path, model) == 0


def test_a_small_log_gets_no_index(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        for i in range(100):
            database[b"k%d" % i] = b"v%d" % i
        del database[b"k5"]
        database.sync()
    assert sorted(os.listdir(dbpath)) == ["data", "lock"]
    with dbopen(dbpath, "w") as database:
        assert database.index_covered == 0
        database[b"k6"] = b"again"
    assert sorted(os.listdir(dbpath)) == ["data", "lock"]
    with dbopen(dbpath) as database:
        assert database.index_covered == 0
        assert len(database) == 99 and database[b"k6"] == b"again"


@compiled_only
@pytest.mark.parametrize("how", ["compact", "close-compact"])
def test_compaction_writes_an_index(tmp_path, how):
    path = tmp_path / "db"
    model = {}
    compiled = compiled_kernel()
    database = open_db(compiled, path, "c")
    for i in range(300):
        database[b"k%d" % i] = model[b"k%d" % i] = b"v%d" % i
    for i in range(0, 300, 3):
        del database[b"k%d" % i]
        del model[b"k%d" % i]
    database[b"k1"] = model[b"k1"] = b"updated"
    if how == "compact":
        database.compact()
        assert_valid_index(path, covered=len(data_of(path)))
        check_contents(database, model, [b"k0", b"k3"])
        database[b"after"] = model[b"after"] = b"written after the compaction"
    database.close(compact=(how == "close-compact"))
    size = len(data_of(path))
    covered = size if how == "close-compact" else size - len(put_record(b"after", model[b"after"]))
    assert_valid_index(path, covered=covered)
    with open_db(compiled, path) as database:
        assert database.index_covered == covered
        check_contents(database, model, [b"k0", b"k3", b"never"])
    assert read_back(PURE, path, model) == 0


@compiled_only
def test_each_compaction_draws_a_new_seed_and_a_rewrite_keeps_it(copied, large):
    compiled = compiled_kernel()
    seed = fmt.Index.parse(large.index_data).seed
    with open_db(compiled, copied, "w") as database:
        for i in range(15_000):
            database[b"more-%d" % i] = b"m" * 300
    rewritten = assert_valid_index(copied, covered=len(data_of(copied)))
    assert rewritten.covered > large.size
    assert rewritten.seed == seed, "an index written at close keeps the database's seed"
    with open_db(compiled, copied, "w") as database:
        database.compact()
    compacted = assert_valid_index(copied, covered=len(data_of(copied)))
    assert compacted.seed != seed


@compiled_only
def test_sync_writes_an_index_once_the_uncovered_log_reaches_the_bound(copied, large):
    """At sync() ``disk end - covered >= max(4 MiB, covered // 4)``: 4 MiB here, to the byte."""
    compiled = compiled_kernel()
    model = dict(large.model)
    bound = max(MIN_TAIL, large.size // 4)
    with open_db(compiled, copied, "w") as database:
        assert database.index_covered == large.size
        written = number = 0
        while written < bound - 13:
            key = b"fill-%d" % number
            number += 1
            remaining = bound - 13 - written
            size = remaining - 12 - len(key) if remaining < 200_000 else 100_000
            database[key] = model[key] = b"f" * size
            written += 12 + len(key) + size
        assert written == bound - 13
        database.sync()
        assert len(data_of(copied)) - large.size == bound - 13
        assert index_of(copied) == large.index_data, "an index written below the bound"
        database[b"z"] = model[b"z"] = b""  # 13 bytes: the uncovered log is now the bound
        database.sync()  # a checkpoint first, for the index file to name
        covered = len(data_of(copied))
        assert ending_checkpoint(data_of(copied)) == large.size + bound
        assert_valid_index(copied, covered=covered)
        check_contents(database, model)
    with open_db(compiled, copied) as database:
        assert database.index_covered == covered
        check_contents(database, model)


@compiled_only
def test_sync_waits_for_a_quarter_of_the_covered_log_where_close_does_not(tmp_path):
    """With 18 MB covered, 4.3 MB more is past close()'s bound (4 MiB) but short of sync()'s
    (a quarter of the covered log): sync() keeps the old index file, close() writes a new one."""
    compiled = compiled_kernel()
    path = tmp_path / "db"
    with open_db(compiled, path, "c") as database:
        for i in range(17 * 1024):
            database[b"a%d" % i] = b"x" * 1024
    covered = len(data_of(path))
    assert_valid_index(path, covered=covered)
    with open_db(compiled, path, "w") as database:
        for i in range(4 * 1024 + 100):
            database[b"b%d" % i] = b"y" * 1024
        database.sync()
        size = len(data_of(path))
        assert max(MIN_TAIL, covered // 64) <= size - covered < covered // 4
        assert_valid_index(path, covered=covered)
        for i in range(1024):
            database[b"c%d" % i] = b"z" * 1024
        database.sync()
        size = len(data_of(path))
        assert size - covered >= covered // 4
        assert_valid_index(path, covered=size)
    with open_db(compiled, path, "w") as database:
        database[b"d"] = b"one more"
    # A few writes do not make close() write an index file.
    assert_valid_index(path, covered=size)
    with open_db(compiled, path, "w") as database:
        for i in range(4 * 1024 + 100):
            database[b"e%d" % i] = b"y" * 1024
    assert_valid_index(path, covered=len(data_of(path)))


# --- 2. the tail -------------------------------------------------------------------


def tail_ops(large, rng, new_tag=b"new"):
    """Writes after the index file: every kind of change to keys it holds and keys it does not."""
    keys = sorted(key for key in large.model if key not in SPECIAL)
    rng.shuffle(keys)
    ops = []
    overwritten, deleted, reset = keys[:300], keys[300:600], keys[300:400]
    for key in overwritten[:150]:
        ops.append(("set", key, fmt.value_of(key, 900, len(large.model[key]))))  # same length
    for key in overwritten[150:]:
        ops.append(("set", key, fmt.value_of(key, 901, rng.randrange(0, 700))))
    for key in deleted:
        ops.append(("del", key))
    for key in reset:
        ops.append(("set", key, fmt.value_of(key, 902, rng.randrange(0, 300))))
    new = [b"%s-%d" % (new_tag, i) for i in range(400)]
    for key in new:
        ops.append(("set", key, fmt.value_of(key, 0, rng.randrange(0, 300))))
    for key in new[:60]:
        ops.append(("del", key))
    for key in new[60:120]:
        ops.append(("set", key, fmt.value_of(key, 1, 50)))
    for key in new[:20]:
        ops.append(("set", key, fmt.value_of(key, 2, 20)))
    # An indexed key overwritten then deleted, and deleted, set, deleted, set again.
    ops += [("set", keys[700], b"short-lived"), ("del", keys[700])]
    ops += [("del", keys[701]), ("set", keys[701], b"back"), ("del", keys[701]),
            ("set", keys[701], b"back again")]
    ops += [("del", VICTIM), ("set", b"trap-huge-key", b"no longer a trap")]
    return ops


@compiled_only
@pytest.mark.parametrize("buffer_size", [0, 1 << 20], ids=["unbuffered", "buffered"])
def test_the_tail_after_the_index(copied, large, buffer_size):
    compiled = compiled_kernel()
    rng = random.Random(buffer_size)
    ops = tail_ops(large, rng)
    model = fmt.apply_ops(dict(large.model), ops)
    absent = deleted_keys(ops, model) + never_written()
    with open_db(compiled, copied, "w", buffer_size=buffer_size) as database:
        assert database.index_covered == large.size
        for op in ops:
            if op[0] == "set":
                database[op[1]] = op[2]
            else:
                del database[op[1]]
                assert op[1] not in database
                with pytest.raises(KeyError):
                    del database[op[1]]  # an indexed key deleted stays deleted
        check_contents(database, model, absent)
    size = len(data_of(copied))
    assert large.size < size < large.size + MIN_TAIL
    assert index_of(copied) == large.index_data, "no new index below the bound"
    for flag in ("r", "w"):
        with open_db(compiled, copied, flag) as database:
            assert 0 < database.index_covered == large.size < size
            check_contents(database, model, absent)
    assert read_back(PURE, copied, model, absent) == 0


@compiled_only
def test_a_tail_written_over_several_sessions(copied, large):
    compiled = compiled_kernel()
    model = dict(large.model)
    absent = []
    for session in range(3):
        ops = tail_ops(large, random.Random(session), new_tag=b"session%d" % session)
        # Later sessions find some of their keys already deleted or reset: skip what
        # would delete a missing key.
        with open_db(compiled, copied, "w") as database:
            assert database.index_covered == large.size
            for op in ops:
                if op[0] == "del" and op[1] not in model:
                    continue
                apply_ours(database, [op])
                fmt.apply_ops(model, [op])
        absent = deleted_keys(ops, model) + never_written()
        with open_db(compiled, copied) as database:
            assert database.index_covered == large.size
            check_contents(database, model, absent)
    assert index_of(copied) == large.index_data
    assert read_back(PURE, copied, model, absent) == 0


@compiled_only
def test_a_torn_tail_after_the_index(copied, large):
    """A record cut short past ``covered``: the index file may have been wrong about the boundary.

    The document lets the open drop the index file then; either way the
    answers are the log's, and the writer that cuts the tail leaves a
    valid index file for the whole log.
    """
    compiled = compiled_kernel()
    with open_db(compiled, copied, "w") as database:
        database[b"whole"] = b"kept"
        database[b"torn"] = b"cut in its value"
    data = data_of(copied)
    torn_at = len(data) - len(put_record(b"torn", b"cut in its value"))
    (copied / "data").write_bytes(data[: torn_at + 15])
    model = dict(large.model)
    model[b"whole"] = b"kept"
    for kernel in (compiled, PURE):
        with pytest.warns(semidbm.TornTailWarning):
            database = open_db(kernel, copied)
        with database:
            assert database.index_covered in ((0, large.size) if kernel is compiled else (0,))
            check_contents(database, model, [b"torn"])
    with pytest.warns(semidbm.TornTailWarning):
        database = open_db(compiled, copied, "w")
    with database:
        assert database.index_covered in (0, large.size)
        database[b"after"] = model[b"after"] = b"the cut"
        check_contents(database, model, [b"torn"])
    assert (copied / ("data.torn-%d" % torn_at)).exists()
    covered = read_back(compiled, copied, model, [b"torn"])
    assert covered in (large.size, len(data_of(copied)))
    assert_valid_index(copied, covered=covered)


# --- 3. traps ----------------------------------------------------------------------


def assert_fallback(path, model, absent=(), pure_too=False):
    """The compiled kernel replays the whole log (``index_covered == 0``) and reads ``model``.

    The pure kernel never opens the index file: where the data file is what
    changed, ``pure_too`` has it read the same contents.
    """
    assert read_back(compiled_kernel(), path, model, absent) == 0
    if pure_too:
        assert read_back(PURE, path, model, absent) == 0


def v051_tail_ops(large):
    keys = sorted(large.model)
    ops = [("set", b"v051-%d" % i, fmt.value_of(b"v051-%d" % i, 0, 100)) for i in range(300)]
    ops += [("set", key, fmt.value_of(key, 51, 77)) for key in keys[:200]]
    ops += [("del", key) for key in keys[200:400]]
    ops += [("del_missing", b"never there"), ("del", b"v051-7")]
    ops += [("set", key, b"set again by 0.5.1") for key in keys[300:350]]
    return ops


@compiled_only
def test_v051_appends_after_the_index(copied, large, tmp_path):
    ops = v051_tail_ops(large)
    model = fmt.apply_ops(dict(large.model), ops)
    absent = deleted_keys(ops, model) + [b"never there"]
    apply_v051(copied, "w", ops, tmp_path)
    assert data_of(copied)[: large.size] == large.data
    # The index is still right for its part: the open uses it and replays 0.5.1's tail,
    # its stray delete of a missing key and its deletes of indexed keys included.
    covered = check_on_every_kernel(copied, model, absent)
    assert covered["cython"] == large.size
    with open_db(compiled_kernel(), copied, "w") as database:
        assert database.index_covered == large.size
        check_contents(database, model, absent)


@compiled_only
@pytest.mark.parametrize("then", ["nothing", "grow past covered"])
def test_v051_compacts(copied, large, tmp_path, then):
    keys = sorted(large.model)
    ops = [("del", key) for key in keys[:50]] + [("set", keys[60], b"x" * 3)] + [("compact",)]
    if then == "grow past covered":
        ops += [("set", b"grown-%d" % i, fmt.value_of(b"grown-%d" % i, 0, 300))
                for i in range(2000)]
    model = fmt.apply_ops(dict(large.model), ops)
    apply_v051(copied, "c", ops, tmp_path)  # 0.5.1 compacts only what it opened with 'c'
    size = len(data_of(copied))
    assert (size > large.size) == (then == "grow past covered")
    assert index_of(copied) == large.index_data, "0.5.1 leaves the index alone"
    assert_fallback(copied, model, keys[:50], pure_too=True)
    # A writer removes the index file it refused, and writes a new one (the whole log is
    # uncovered), naming the checkpoint it appends first.
    with open_db(compiled_kernel(), copied, "w") as database:
        assert database.index_covered == 0
        assert not index_path(copied).exists()
        check_contents(database, model)
    grown = len(data_of(copied))
    assert ending_checkpoint(data_of(copied)) == size
    assert_valid_index(copied, covered=grown)
    assert read_back(compiled_kernel(), copied, model) == grown


@compiled_only
@pytest.mark.parametrize("values", ["other lengths", "same bytes"])
def test_v051_recreates_the_database(copied, large, tmp_path, values):
    if values == "same bytes":
        ops = large.ops
    else:
        ops = [op if op[0] == "del" else ("set", op[1], op[2] + b"+longer")
               for op in large.ops]
    model = fmt.apply_ops({}, ops)
    apply_v051(copied, "n", ops, tmp_path)
    data = data_of(copied)
    assert index_of(copied) == large.index_data, "0.5.1 leaves the index alone"
    if values == "same bytes":
        # The same records, without the checkpoints 0.5.1 does not write: the index file is refused.
        assert data == fmt.DATA_HEADER + large.data[fmt.LOG_START : ending_checkpoint(large.data)]
        covered = check_on_every_kernel(copied, model, large.absent)
        assert covered["cython"] == 0
    else:
        assert len(data) > large.size
        assert_fallback(copied, model, large.absent, pure_too=True)


def other_data_of_size(tmp_path, size, tag):
    """The data file of another database, padded with one record to exactly ``size`` bytes."""
    other = tmp_path / ("other-%s.db" % tag)
    ops = large_ops(tag, keys=size // 340, traps=False)  # about 300 bytes a key
    with open_db(compiled_kernel(), other, "c") as database:
        apply_ours(database, ops)
    data = data_of(other)
    padding = size - len(data) - 12 - len(b"pad")
    assert padding >= 0
    ops.append(("set", b"pad", b"p" * padding))
    data += put_record(b"pad", b"p" * padding)
    assert len(data) == size
    return data, fmt.apply_ops({}, ops)


def free_gap(large, records_needed):
    """Records that lie wholly between two samples of the index file: ``(first, last)`` positions.

    Changing the bytes of these records, and nothing else, leaves every
    sampled byte as it was.
    """
    ranges = fmt.sample_ranges(large.size)
    listed = list(fmt.records(large.data))
    offsets, _, _ = fmt.live_records(large.data)
    for (start, length), (next_start, _) in zip(ranges[1:-2], ranges[2:-1]):
        inside = [
            number for number, (offset, key, value, size) in enumerate(listed)
            if offset >= start + length + 64 and offset + size + 64 <= next_start
            and value is not None and offsets.get(key) == offset and key not in TRAPS
        ]
        if len(inside) >= records_needed:
            return listed, inside
    raise AssertionError("no gap between samples holds %d live records" % records_needed)


def rewrite_records(listed, changes):
    """The data file of ``listed`` records, with ``changes`` ({position: new value}) made."""
    parts = [fmt.DATA_HEADER]
    for number, (_, key, value, _) in enumerate(listed):
        if number in changes:
            value = changes[number]
        parts.append(delete_record(key) if value is None else put_record(key, value))
    return b"".join(parts)


@compiled_only
@pytest.mark.parametrize(
    "swap",
    [
        "another database, padded",
        "the same first half, then another log",
        "lengths moved between samples",
        "values rewritten between samples",
        "every value rewritten",
    ],
)
def test_a_data_file_of_the_same_length_swapped_in(copied, large, tmp_path, swap):
    """Another log of the index file's length: the samples catch those that differ where sampled.

    The rest have every sampled byte of the indexed log by construction.
    Values rewritten in place keep each record where the index file says it
    is. Lengths moved between two samples are the case FORMAT.md ("What
    the check cannot catch") leaves to check 4: the slots of the records
    between point into the middle of records, which check 4 refuses.
    """
    if swap == "another database, padded":
        data, model = other_data_of_size(tmp_path, large.size, "other")
    elif swap == "the same first half, then another log":
        half = max(b for b in fmt.boundaries(large.data) if b <= large.size // 2)
        rest, _ = other_data_of_size(tmp_path, large.size - half + 8, "rest")
        data = large.data[:half] + rest[8:]
        _, model, stop = fmt.live_records(data)
        assert stop == len(data) == large.size
    else:
        listed, inside = free_gap(large, 12)
        changes = {}
        if swap == "lengths moved between samples":
            # One value 5 bytes longer, a later one 5 bytes shorter: the records
            # between them move, every sampled byte stays.
            first, last = inside[0], inside[-1]
            value = listed[first][2]
            changes[first] = value + b"+five"
            changes[last] = listed[last][2][:-5]
        elif swap == "values rewritten between samples":
            for number in inside:
                changes[number] = bytes(reversed(listed[number][2]))
        else:
            for number, (_, _, value, _) in enumerate(listed):
                if value is not None:
                    changes[number] = bytes(byte ^ 0x20 for byte in value)
        data = rewrite_records(listed, changes)
        _, model, _ = fmt.live_records(data)
        assert len(data) == large.size and model != large.model
        if swap != "every value rewritten":
            index = fmt.Index.parse(large.index_data)
            assert all(
                data[offset : offset + length] == large.data[offset : offset + length]
                for offset, length, _ in index.samples
            ), "the change reaches a sample"
    (copied / "data").write_bytes(data)
    covered = check_on_every_kernel(copied, model, never_written())
    if swap in ("another database, padded", "the same first half, then another log",
                "every value rewritten"):
        assert covered["cython"] == 0, "the samples catch it"
    # Otherwise the samples match, by construction: the answers must still be the log's.


@compiled_only
@pytest.mark.parametrize("cut", ["1 byte", "half", "all"])
def test_an_index_cut_short(copied, large, cut):
    keep = {"1 byte": len(large.index_data) - 1, "half": len(large.index_data) // 2,
            "all": 0}[cut]
    index_path(copied).write_bytes(large.index_data[:keep])
    assert_fallback(copied, large.model, large.absent, pure_too=True)
    with open_db(PURE, copied, "w") as database:
        assert not index_path(copied).exists(), "a writer removes the index it refuses at open"
        database[b"by the pure kernel"] = b"p"
    model = dict(large.model)
    model[b"by the pure kernel"] = b"p"
    # A writer without an index file writes one at close.
    with open_db(compiled_kernel(), copied, "w") as database:
        assert database.index_covered == 0
        check_contents(database, model)
    assert_valid_index(copied, covered=len(data_of(copied)))


@compiled_only
def test_an_index_one_byte_longer(copied, large):
    index_path(copied).write_bytes(large.index_data + b"\0")
    assert_fallback(copied, large.model, large.absent)


@compiled_only
@pytest.mark.parametrize("field", sorted(fmt.FIELD_AT))
def test_a_flipped_byte_in_the_header(copied, large, field):
    damaged = bytearray(large.index_data)
    damaged[fmt.FIELD_AT[field]] ^= 0x04
    index_path(copied).write_bytes(bytes(damaged))
    assert_fallback(copied, large.model, large.absent)


def used_slot(index, rng, block=None):
    """The position of a used slot (in ``block`` if given)."""
    used = [at for at, (offset, _) in enumerate(index.slots) if offset
            and (block is None or at // fmt.BLOCK_SLOTS == block)]
    return rng.choice(used)


@compiled_only
@pytest.mark.parametrize(
    "where",
    [
        "a slot's offset", "a slot's high offset byte", "a slot's hash", "an empty slot",
        "the last block's slot", "the first checksum", "the last checksum",
    ],
)
@pytest.mark.parametrize("flag", ["r", "w"])
def test_a_flipped_byte_in_the_slots_or_their_checksums(copied, large, where, flag):
    """The block checksums are read as blocks are first used: the open may use the index file.

    Every answer must still be the log's; by the time every key has been
    looked up the damaged block has been used, and the index file dropped.
    """
    index = fmt.Index.parse(large.index_data)
    rng = random.Random(where)
    damaged = bytearray(large.index_data)
    sums_at = fmt.HEADER_SIZE + fmt.SLOT_SIZE * index.capacity
    last_block = fmt.blocks(index.capacity) - 1
    if where == "an empty slot":
        at = rng.choice([at for at, (offset, _) in enumerate(index.slots) if not offset])
        position = fmt.HEADER_SIZE + fmt.SLOT_SIZE * at + 3
    elif where == "the first checksum":
        position = sums_at
    elif where == "the last checksum":
        position = sums_at + 4 * last_block + 2
    else:
        at = used_slot(index, rng, last_block if where == "the last block's slot" else None)
        position = fmt.HEADER_SIZE + fmt.SLOT_SIZE * at + {
            "a slot's offset": 0, "a slot's high offset byte": 7, "a slot's hash": 9,
            "the last block's slot": 1,
        }[where]
    damaged[position] ^= 0x10
    index_path(copied).write_bytes(bytes(damaged))
    compiled = compiled_kernel()
    model = dict(large.model)
    with open_db(compiled, copied, flag) as database:
        assert database.index_covered in (0, large.size)
        if flag == "w":
            keys = sorted(model)
            for key in keys[::50]:
                del database[key]
                del model[key]
            for key in keys[1::50]:
                database[key] = model[key] = b"rewritten"
        check_contents(database, model, large.absent)
        assert database.index_covered == 0, "every block was used; the damaged one was seen"
    if flag == "w":  # the writer dropped the index: it wrote a new one
        assert read_back(PURE, copied, model) == 0
        assert_valid_index(copied, covered=len(data_of(copied)))
    covered = read_back(compiled, copied, model, large.absent)
    if flag == "w":
        assert covered == len(data_of(copied))
    else:  # the damaged index again, whose damage the open need not see
        assert covered in (0, large.size)


HEADER_LIES = {
    # field: how to change it (the header's CRC is computed again).
    "magic": lambda index, data: setattr(index, "magic", b"SEMIINDY"),
    "version 1": lambda index, data: setattr(index, "version", 1),
    "another checkpoint nonce": lambda index, data: setattr(
        index, "checkpoint", (index.checkpoint[0], bytes(b ^ 1 for b in index.checkpoint[1]))),
    "the checkpoint elsewhere": lambda index, data: setattr(
        index, "checkpoint", (8, index.checkpoint[1])),
    "header size": lambda index, data: setattr(index, "header_size", 4097),
    "slot size": lambda index, data: setattr(index, "slot_size", 16),
    "slots per block": lambda index, data: setattr(index, "block_slots", 512),
    "number of samples": lambda index, data: setattr(index, "sample_count", 31),
    "zero field": lambda index, data: setattr(index, "zero", 1),
    "covered past the data file": lambda index, data: setattr(index, "covered", index.covered + 1),
    "covered one short": lambda index, data: setattr(index, "covered", index.covered - 1),
    "covered 7": lambda index, data: setattr(index, "covered", 7),
    "count equal to capacity": lambda index, data: setattr(index, "count", index.capacity),
    "capacity one more": lambda index, data: setattr(index, "capacity", index.capacity + 1),
    "capacity huge": lambda index, data: setattr(index, "capacity", 2**62),
    "a sample's checksum": lambda index, data: index.samples.__setitem__(
        5, index.samples[5][:2] + (index.samples[5][2] ^ 1,)),
    "a sample moved": lambda index, data: index.samples.__setitem__(
        7, (index.samples[7][0] + 1,) + index.samples[7][1:]),
    "first sample shorter": lambda index, data: index.samples.__setitem__(
        0, (0, 100, fmt.crc32(data[:100]))),
    "last sample short of covered": lambda index, data: index.samples.__setitem__(
        31, (index.covered - 4096, 4000, fmt.crc32(
            data[index.covered - 4096 : index.covered - 96]))),
}


@compiled_only
@pytest.mark.parametrize("lie", sorted(HEADER_LIES))
def test_a_header_that_lies_with_a_right_checksum(copied, large, lie, no_hang):
    index = fmt.Index.parse(large.index_data)
    HEADER_LIES[lie](index, large.data)
    index_path(copied).write_bytes(index.header() + large.index_data[fmt.HEADER_SIZE:])
    if lie == "zero field":  # the layout's, but check 1 does not name it: either way is right
        assert read_back(compiled_kernel(), copied, large.model, large.absent) in (0, large.size)
    else:
        assert_fallback(copied, large.model, large.absent)


@compiled_only
def test_a_capacity_below_16_with_a_file_of_its_size(copied, large, no_hang):
    """Header, size and CRCs agree with each other; 15 slots is less than any index has."""
    index = fmt.Index.parse(large.index_data)
    index.capacity = 15
    index.slots = index.slots[:15]
    index.count = 3
    index_path(copied).write_bytes(index.encode())
    assert_fallback(copied, large.model, large.absent)


@compiled_only
def test_the_index_of_another_database(copied, large, tmp_path):
    other = Large(tmp_path / "other.db", tag="other")
    assert other.index_data is not None and len(other.data) > MIN_TAIL
    index_path(copied).write_bytes(other.index_data)
    assert_fallback(copied, large.model, large.absent)


@compiled_only
def test_an_older_index_of_the_same_log_is_still_right(copied, large):
    compiled = compiled_kernel()
    model = dict(large.model)
    with open_db(compiled, copied, "w") as database:
        for i in range(16_000):
            key = b"later-%d" % i
            database[key] = model[key] = fmt.value_of(key, 0, 280)
        for key in sorted(large.model)[:500]:
            del database[key]
            del model[key]
    newer = assert_valid_index(copied, covered=len(data_of(copied)))
    assert newer.covered > large.size
    index_path(copied).write_bytes(large.index_data)
    covered = check_on_every_kernel(copied, model, sorted(large.model)[:500])
    assert covered["cython"] == large.size


@compiled_only
@pytest.mark.parametrize("how", ["copytree", pytest.param("cp -a", marks=posix_only)])
def test_a_copied_directory_uses_its_index(copied, large, tmp_path, how):
    target = tmp_path / "copy"
    if how == "copytree":
        shutil.copytree(copied, target)
    else:
        subprocess.run(["cp", "-a", str(copied), str(target)], check=True)
    covered = check_on_every_kernel(target, large.model, large.absent)
    assert covered["cython"] == large.size
    with open_db(compiled_kernel(), target, "w") as database:
        database[b"only in the copy"] = b"c"
        del database[sorted(large.model)[0]]
    assert read_back(compiled_kernel(), copied, large.model, [b"only in the copy"]) == large.size


@compiled_only
@pytest.mark.parametrize("written", ["a few keys", "past the bound"])
def test_the_pure_kernel_writing_over_an_index(copied, large, written):
    ops = tail_ops(large, random.Random(3))
    if written == "past the bound":
        ops += [("set", b"pure-%d" % i, fmt.value_of(b"pure-%d" % i, 0, 300))
                for i in range(15_000)]
    model = fmt.apply_ops(dict(large.model), ops)
    absent = deleted_keys(ops, model)
    with open_db(PURE, copied, "w") as database:
        apply_ours(database, ops)
    assert index_of(copied) == large.index_data, "the pure kernel never writes an index"
    covered = check_on_every_kernel(copied, model, absent)
    assert covered["cython"] == large.size


@compiled_only
def test_the_pure_kernel_compacting_a_database_with_an_index(copied, large):
    ops = tail_ops(large, random.Random(4))
    model = fmt.apply_ops(dict(large.model), ops)
    with open_db(PURE, copied, "w") as database:
        apply_ours(database, ops)
        database.compact()
        assert not index_path(copied).exists(), "a compaction removes the index"
        database[b"after the compaction"] = model[b"after the compaction"] = b"a"
    assert sorted(os.listdir(copied)) == ["data", "lock"]
    assert_fallback(copied, model, deleted_keys(ops, model), pure_too=True)


@compiled_only
def test_a_compiled_compaction_replaces_the_index_of_the_old_log(copied, large):
    ops = tail_ops(large, random.Random(5))
    model = fmt.apply_ops(dict(large.model), ops)
    with open_db(compiled_kernel(), copied, "w") as database:
        apply_ours(database, ops)
        database.compact()
    assert_valid_index(copied, covered=len(data_of(copied)))
    covered = check_on_every_kernel(copied, model, deleted_keys(ops, model))
    assert covered["cython"] == len(data_of(copied))


@compiled_only
def test_new_over_a_database_with_an_index(kernel, copied, large):
    with open_db(kernel, copied, "n") as database:
        assert not index_path(copied).exists(), "'n' removes the index"
        assert len(database) == 0 and database.index_covered == 0
        database[b"fresh"] = b"start"
    assert sorted(os.listdir(copied)) == ["data", "lock"]
    assert_fallback(copied, {b"fresh": b"start"}, sorted(large.model)[:100], pure_too=True)


@compiled_only
def test_new_then_a_large_log_gets_its_own_index(copied, large):
    ops = large_ops("renewed", traps=False)
    model = fmt.apply_ops({}, ops)
    with open_db(compiled_kernel(), copied, "n") as database:
        apply_ours(database, ops)
    assert_valid_index(copied, covered=len(data_of(copied)))
    covered = check_on_every_kernel(copied, model, sorted(large.model)[:100])
    assert covered["cython"] == len(data_of(copied))


# --- 4. hostile indexes whose checksums are right -----------------------------------


def redirect(large, key, offset, keep_hash=True):
    """The large database's index with ``key``'s slot pointing at ``offset`` (CRCs computed)."""
    index = fmt.Index.parse(large.index_data)
    at = index.find(large.data, key)
    assert at is not None
    index.slots[at] = (offset, index.slots[at][1] if keep_hash else index.slots[at][1] ^ 1)
    return index.encode()


def value_offset(large, key):
    offsets, _, _ = fmt.live_records(large.data)
    return offsets[key] + 8 + len(key)


def hostile_slot(large, target):
    """The key whose slot is redirected, and where to: by the target's name."""
    offsets, _, _ = fmt.live_records(large.data)
    victim = offsets[VICTIM]
    if target == "a delete record of its key":
        # A key deleted and set again: its slot points at its delete.
        stale = [(key, offset) for offset, key, value, _ in fmt.records(large.data)
                 if value is None and key in offsets and offset < offsets[key]]
        return stale[len(stale) // 2]
    if target == "a key running past the covered log":
        return LONG, value_offset(large, LAST_TRAP[0]) + len(LAST_TRAP[1]) - 8 - 2
    return VICTIM, {
        "the covered log's end": large.size,
        "past the covered log": large.size + 100,
        "far past the file": 1 << 40,
        "the largest offset": (1 << 64) - 1,
        "inside the data header": 4,
        "the data header's end minus one": 7,
        "the middle of its record": victim + 3,
        "its value": victim + 8 + len(VICTIM),
        "its checksum": victim + 8 + len(VICTIM) + len(b"the victim's value"),
        "a huge key length": value_offset(large, b"trap-huge-key"),
        "a negative key length": value_offset(large, b"trap-negative-key"),
        "its key with a huge value length": value_offset(large, b"trap-huge-value"),
        "its key in a forged delete": value_offset(large, b"trap-delete"),
        "its key with value length -2": value_offset(large, b"trap-negative-value"),
    }[target]


HOSTILE = [
    "the covered log's end", "past the covered log", "far past the file", "the largest offset",
    "inside the data header", "the data header's end minus one", "the middle of its record",
    "its value", "its checksum", "a delete record of its key", "a huge key length",
    "a negative key length", "its key with a huge value length", "its key in a forged delete",
    "its key with value length -2", "a key running past the covered log",
]


def read_all_but(database, model, key):
    """Read every key of ``model`` but ``key``: each block of the mapped table is then
    verified, and lookups take the inline path for keys near their home (``base_near_home``)."""
    for other, value in model.items():
        if other != key:
            assert database[other] == value


@compiled_only
@pytest.mark.parametrize("first", ["nothing", "every other key"])
@pytest.mark.parametrize("target", HOSTILE)
def test_a_slot_pointing_where_no_record_of_its_key_is(copied, large, target, first, no_hang):
    """Found by the first lookup of the key, or by one after every block was verified.

    The second kills the mutation that takes a slot whose check fails
    for a hit in ``base_near_home`` (9 of these cases then read the
    forged record: a wrong value), which the first alone does not.
    """
    key, offset = hostile_slot(large, target)
    index_path(copied).write_bytes(redirect(large, key, offset))
    assert fmt.problems(index_of(copied), large.data) != []
    compiled = compiled_kernel()
    for flag in ("r", "w"):
        with open_db(compiled, copied, flag) as database:
            assert database.index_covered in (0, large.size)
            if first == "every other key":
                read_all_but(database, large.model, key)
            assert database[key] == large.model[key]
            check_contents(database, large.model, large.absent)
            assert database.index_covered in (0, large.size)


#: A reader in a process of its own, so that a crash fails the test, not the run: each
#: index file named in turn goes beside the data file, and the key is read through it.
LAST_BYTES_CHILD = r"""
import faulthandler, shutil, sys
from semidbm import _kernel, db

faulthandler.enable()
path, key, value, count = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3], int(sys.argv[4])
for index_file in sys.argv[5:]:
    shutil.copyfile(index_file, path + "/index")
    with db.open_with(_kernel.load("cython"), path, "r") as database:
        found = database.get(key)
        if found is None or found.hex() != value or len(database) != count:
            sys.exit("%s: %r, %d keys" % (index_file, found, len(database)))
    print(index_file, flush=True)
"""


@compiled_only
def test_a_slot_pointing_into_the_covered_logs_last_twelve_bytes(copied, large, tmp_path):
    """No record starts in the last 12 bytes before ``covered`` (a record has 12 at least).

    A slot pointing there, its hash right, must be refused before the
    lengths are read: they would be bytes of the last record's value and
    checksum and bytes past the covered log, and a key length from them
    runs far past the log (here: read at ``covered - 11``, 1.8 GB).
    """
    files = []
    for offset in range(large.size - EMPTY_RECORD_SIZE, large.size):
        files.append(tmp_path / ("index-at-%d" % offset))
        files[-1].write_bytes(redirect(large, VICTIM, offset))
    result = subprocess.run(
        [sys.executable, "-c", LAST_BYTES_CHILD, str(copied), VICTIM.hex(),
         large.model[VICTIM].hex(), str(len(large.model))] + [str(name) for name in files],
        capture_output=True, text=True, timeout=300,
    )
    read = result.stdout.split()
    assert result.returncode == 0, "exit status %d after %d of the index files: %s" % (
        result.returncode, len(read), result.stderr[-3000:])
    assert read == [str(name) for name in files]


@compiled_only
@pytest.mark.parametrize("target", HOSTILE)
def test_the_sorted_lines_check_each_slot_before_reading_its_record(
    copied, large, target, no_hang
):
    """``_sorted_lines`` gathers the slots first and checks them in a second pass."""
    key, offset = hostile_slot(large, target)
    index_path(copied).write_bytes(redirect(large, key, offset))
    with open_db(compiled_kernel(), copied) as database:
        count, chunks = database._sorted_lines("dump")
        text = b"".join(chunk for _, chunk in chunks)
    make_line = _fields.LINE_FORMS["dump"]
    assert count == len(large.model)
    assert text == b"".join(make_line(*item) for item in sorted(large.model.items()))


@compiled_only
def test_the_sorted_lines_of_many_keys_check_their_slots_in_both_threads(tmp_path, no_hang):
    """Past SHARED_SORT keys the records are read by two threads: a bad slot is caught there."""
    path = tmp_path / "many.db"
    model = {b"key %06d" % number: b"v" * 40 for number in range(100_000)}
    with open_db(compiled_kernel(), path, "n") as database:
        for key, value in model.items():
            database[key] = value
    data, index = data_of(path), fmt.Index.parse(index_path(path).read_bytes())
    victim = b"key %06d" % 99_000  # in a late share, which either thread may take
    at = index.find(data, victim)
    index.slots[at] = (index.slots[at][0] + 3, index.slots[at][1])  # into its own record
    index_path(path).write_bytes(index.encode())
    with open_db(compiled_kernel(), path) as database:
        count, chunks = database._sorted_lines("keys")
        text = b"".join(chunk for _, chunk in chunks)
    assert count == len(model)
    assert text == b"".join(key + b"\n" for key in sorted(model))


@compiled_only
def test_slots_of_two_keys_swapped(copied, large, no_hang):
    """Each slot has its key's hash but the other key's record: the key check catches it."""
    index = fmt.Index.parse(large.index_data)
    first = index.find(large.data, VICTIM)
    second = index.find(large.data, b"trap-huge-key")
    (offset_a, hash_a), (offset_b, hash_b) = index.slots[first], index.slots[second]
    index.slots[first], index.slots[second] = (offset_b, hash_a), (offset_a, hash_b)
    index_path(copied).write_bytes(index.encode())
    with open_db(compiled_kernel(), copied) as database:
        assert database[VICTIM] == large.model[VICTIM]
        assert database[b"trap-huge-key"] == large.model[b"trap-huge-key"]
        check_contents(database, large.model, large.absent)


@compiled_only
@pytest.mark.parametrize("first", ["nothing", "every other key"])
def test_a_slot_pointing_at_an_older_put_of_its_key_without_its_checksum(
    copied, large, first, no_hang
):
    """A sound record of the key, but not its last: only the block's checksum tells.

    So no slot is read before its block is verified: this kills the
    mutation that lets ``base_near_home`` read slots before every block
    was (the lookup then answers the older value).
    """
    offsets, _, _ = fmt.live_records(large.data)
    key, older = next((key, offset) for offset, key, value, _ in fmt.records(large.data)
                      if value is not None and key in offsets and offset < offsets[key]
                      and value != large.model[key])
    index = fmt.Index.parse(large.index_data)
    at = index.find(large.data, key)
    index.slots[at] = (older, index.slots[at][1])
    forged = bytearray(index.encode())
    forged[-fmt.CHECKSUM.size * fmt.blocks(index.capacity):] = large.index_data[
        -fmt.CHECKSUM.size * fmt.blocks(index.capacity):]
    index_path(copied).write_bytes(bytes(forged))
    with open_db(compiled_kernel(), copied) as database:
        if first == "every other key":
            read_all_but(database, large.model, key)
        assert database[key] == large.model[key]
        check_contents(database, large.model, large.absent)


@compiled_only
def test_a_compaction_beside_a_forged_extra_slot_reads_nothing_outside_the_log(
    copied, large, no_hang
):
    """A slot added with its count and checksums right, pointing past the file: the walk copies
    no record for it, and the copy from the index's offsets that follows must check the offset
    before reading there (it read the lengths first: a crash). The database keeps its keys'
    values (a forged index file may still give a wrong ``len()``: docs/FORMAT.md, "Trusting
    an index file")."""
    index = fmt.Index.parse(large.index_data)
    empty = next(at for at, (offset, _) in enumerate(index.slots) if offset == 0)
    index.slots[empty] = (large.size + (1 << 30), 12345)
    index.count += 1
    index_path(copied).write_bytes(index.encode())
    with open_db(compiled_kernel(), copied, "w") as database:
        try:
            database.compact()
        except semidbm.error:
            pass
    with open_db(compiled_kernel(), copied) as database:
        for key, value in large.model.items():
            assert database[key] == value


@compiled_only
@pytest.mark.parametrize("first", ["nothing", "every key"])
@pytest.mark.parametrize("filler", ["outside the log", "other keys' records", "mid-record"])
def test_a_table_with_no_empty_slot(copied, large, filler, first, no_hang):
    """Every slot used (the header still says fewer keys): lookups of missing keys must end,
    by the first lookups or once every block was verified (past the inline path's slots)."""
    index = fmt.Index.parse(large.index_data)
    rng = random.Random(filler)
    used = [slot for slot in index.slots if slot[0]]
    for at, (offset, _) in enumerate(index.slots):
        if offset:
            continue
        if filler == "outside the log":
            index.slots[at] = (large.size + rng.randrange(1, 1 << 30), rng.getrandbits(32))
        elif filler == "other keys' records":
            index.slots[at] = (rng.choice(used)[0], rng.getrandbits(32))
        else:
            index.slots[at] = (rng.choice(used)[0] + rng.randrange(1, 12), rng.getrandbits(32))
    assert all(offset for offset, _ in index.slots)
    index_path(copied).write_bytes(index.encode())
    with open_db(compiled_kernel(), copied) as database:
        if first == "every key":
            read_all_but(database, large.model, None)
        for key in large.absent:
            assert key not in database
            with pytest.raises(KeyError):
                database[key]
        check_contents(database, large.model, large.absent)


@compiled_only
def test_covered_in_the_middle_of_a_record(copied, large, no_hang):
    """The header says the index file covers up to a forged record head inside a value.

    Samples and slots agree with that length, so the open may use the
    index; the replay from there meets a negative key length, and the
    index must be dropped, not the database refused.
    """
    trap = value_offset(large, b"trap-negative-key")
    before = max(b for b in fmt.boundaries(large.data) if b <= trap)
    index = fmt.build(large.data, covered=before, seed=99)
    index.covered = trap
    index.samples = fmt.samples_of(large.data, trap)
    index_path(copied).write_bytes(index.encode())
    covered = check_on_every_kernel(copied, large.model, large.absent)
    assert covered["cython"] == 0


@compiled_only
def test_covered_shorter_than_the_slots_say(copied, large, no_hang):
    """The kernel's own slots, but a header covering only the first half: slots past it lie."""
    half = max(b for b in fmt.boundaries(large.data) if b <= large.size // 2)
    index = fmt.Index.parse(large.index_data)
    index.covered = half
    index.samples = fmt.samples_of(large.data, half)
    index_path(copied).write_bytes(index.encode())
    with open_db(compiled_kernel(), copied) as database:
        check_contents(database, large.model, large.absent)


@compiled_only
@pytest.mark.parametrize(
    "target", ["the data header's end minus one", "the covered log's end", "far past the file"]
)
def test_a_slot_outside_the_covered_log_is_not_carried_into_the_next_index(
    copied, large, target
):
    """The next index copies the old one's slots without reading their records.

    A slot no lookup visits, pointing outside the log the old index file
    covers (at the end: where the log written since starts), is not
    copied: the writer drops the old index file and builds the new one from
    the whole log, which is then the document's index of it.
    """
    key, offset = hostile_slot(large, target)
    index_path(copied).write_bytes(redirect(large, key, offset))
    model = dict(large.model)
    with open_db(compiled_kernel(), copied, "w") as database:
        assert database.index_covered == large.size
        for number in range(MIN_TAIL // 100_000 + 1):  # past the bound: close() writes one
            database[b"fill-%d" % number] = model[b"fill-%d" % number] = b"f" * 100_000
    assert_valid_index(copied, covered=len(data_of(copied)))
    check_on_every_kernel(copied, model, large.absent)


def forged_covered(large, where):
    """Where a forged header says the index file ends, by name (see the test below)."""
    bounds = fmt.boundaries(large.data)
    if where == "a boundary in the first tenth":
        return max(b for b in bounds if b <= large.size // 10)
    if where == "a boundary just before the end":
        return bounds[-3]
    return {
        "245": 245,
        "1000": 1000,
        "the middle of the log": large.size // 2 + 1,
        "just short of the end": large.size - 5,
    }[where]


@compiled_only
@pytest.mark.parametrize(
    "where",
    ["245", "1000", "the middle of the log", "just short of the end",
     "a boundary in the first tenth", "a boundary just before the end"],
)
def test_a_forged_covered_length_with_samples_to_match(copied, large, where, no_hang):
    """The kernel's own slots, a header saying it covers less, samples and CRCs made to match.

    Checks 1 to 3 pass; the slots past the forged length, and the replay
    from there, are left to check 4 and the replay's own checks. At a
    record boundary every answer must be the log's. Inside a record the
    replay parses from the middle of it, and the document promises no
    more than that nothing is read outside the log: the open works or
    raises semidbm.error, and every answer is a value or KeyError.
    """
    covered = forged_covered(large, where)
    index = fmt.Index.parse(large.index_data)
    index.covered = covered
    index.samples = fmt.samples_of(large.data, covered)
    index_path(copied).write_bytes(index.encode())
    compiled = compiled_kernel()
    if covered in fmt.boundaries(large.data):
        with open_db(compiled, copied) as database:
            check_contents(database, large.model, large.absent)
        return
    try:
        database = open_db(compiled, copied)
    except semidbm.error:
        return
    with database:
        for key in list(large.model) + large.absent:
            try:
                assert isinstance(database[key], bytes)
            except KeyError:
                pass
        assert len(database.keys()) == len(database) == len(database.items())


@compiled_only
@pytest.mark.parametrize(
    "layout", ["as a writer makes it", "three times the slots", "a first part of the log"]
)
def test_an_index_built_from_the_document_alone_is_used(copied, large, layout):
    """An index made by index_format, from FORMAT.md only (hash, probe, samples, CRCs)."""
    if layout == "a first part of the log":
        covered = max(b for b in fmt.boundaries(large.data) if b <= large.size * 2 // 3)
        index = fmt.build(large.data, covered=covered, seed=0xDEADBEEF)
    elif layout == "three times the slots":
        covered = large.size
        index = fmt.build(large.data, seed=12345, capacity=3 * len(large.model))
    else:
        covered = large.size
        index = fmt.build(large.data, seed=fmt.Index.parse(large.index_data).seed)
    index_path(copied).write_bytes(index.encode())
    covered_by = check_on_every_kernel(copied, large.model, large.absent)
    assert covered_by["cython"] == covered


# --- 5. readers ----------------------------------------------------------------------


@compiled_only
@pytest.mark.parametrize("install", ["close past the bound", "compact"])
def test_a_reader_switches_to_a_newer_index_at_refresh(copied, large, install):
    compiled = compiled_kernel()
    model = dict(large.model)
    reader = open_db(compiled, copied)
    try:
        assert reader.index_covered == large.size
        with open_db(compiled, copied, "w") as writer:
            for i in range(15_000):
                key = b"switch-%d" % i
                writer[key] = model[key] = fmt.value_of(key, 0, 290)
            for key in sorted(large.model)[:300]:
                del writer[key]
                del model[key]
            if install == "compact":
                writer.compact()
        size = len(data_of(copied))
        assert_valid_index(copied, covered=size)
        assert size != large.size
        # The index was replaced under the reader: it still reads what it read.
        assert reader.index_covered == large.size
        check_contents(reader, large.model)
        reader.refresh()
        assert reader.index_covered == size
        check_contents(reader, model, sorted(large.model)[:300])
    finally:
        reader.close()


READER_CHILD = r"""
import os, random, select, sys
sys.path.insert(0, sys.argv[3])
from tests.support import index_format as fmt
from semidbm import _kernel, db

path = sys.argv[1]
rng = random.Random(int(sys.argv[2]))
database = db.open_with(_kernel.load("cython"), path, "r")
model = {}
everything = set()
reads = loose = switches = refreshes = 0

def fail(message):
    print("FAIL " + message, flush=True)
    sys.exit(1)

def exact(key):
    try:
        found = database[key]
    except KeyError:
        found = None
    if found != model.get(key):
        fail("round %d: %r is %r, expected %r" % (number, key, found and found[:30],
                                                  model.get(key, b"")[:30]))

def plausible(key):
    # A read after a refresh in the middle of a round: a value this key was given.
    try:
        found = database[key]
    except KeyError:
        return
    head, _, rest = found.partition(b"|")
    generation = rest.partition(b"|")[0]
    if head != key or found != fmt.value_of(key, int(generation), len(found)):
        fail("%r reads %r, a value never written to it" % (key, found[:40]))

number = 0
while True:
    words = sys.stdin.readline().split()
    if not words or words[0] == "stop":
        break
    number, expected_covered = int(words[1]), int(words[2])
    model = fmt.apply_ops(model, fmt.round_ops(model, number))
    everything.update(model)
    database.refresh()
    refreshes += 1
    if database.index_covered != expected_covered:
        fail("round %d: index_covered %d after refresh, the index covers %d"
             % (number, database.index_covered, expected_covered))
    if len(database) != len(model) or dict(database.items()) != model:
        fail("round %d: the items are not the model's" % number)
    print("ok %d" % number, flush=True)
    # The writer goes on now: check exact answers while it writes and installs.
    keys = sorted(everything)
    for _ in range(20):
        for _ in range(200):
            exact(rng.choice(keys))
            reads += 1
        exact(b"never written")
    while not select.select([sys.stdin], [], [], 0)[0]:
        database.refresh()
        refreshes += 1
        for _ in range(200):
            plausible(rng.choice(keys))
            loose += 1
print("done %d %d %d" % (reads, loose, refreshes), flush=True)
"""


@compiled_only
@posix_only
def test_a_reader_in_another_process_while_indexes_are_installed(tmp_path):
    path = tmp_path / "db"
    compiled = compiled_kernel()
    open_db(compiled, path, "c").close()
    child = subprocess.Popen(
        [sys.executable, "-c", READER_CHILD, str(path), "7", str(ROOT)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    model = {}
    installed = []
    try:
        for number in range(1, 5):
            ops = fmt.round_ops(model, number)
            split = fmt.round_split(ops)
            with open_db(compiled, path, "w") as database:
                apply_ours(database, ops[:split])
                database.sync()  # past the bound: installs an index file while the reader reads
                assert_valid_index(path, covered=len(data_of(path)))
                apply_ours(database, ops[split:])
                if number == 3:
                    database.compact()
            fmt.apply_ops(model, ops)
            covered = fmt.Index.parse(index_of(path)).covered
            installed.append(covered)
            child.stdin.write("round %d %d\n" % (number, covered))
            child.stdin.flush()
            answer = child.stdout.readline()
            assert answer == "ok %d\n" % number, answer + child.stderr.read()
        child.stdin.write("stop\n")
        child.stdin.flush()
        answer = child.stdout.readline()
        assert answer.startswith("done "), answer + child.stderr.read()
        reads, loose, refreshes = map(int, answer.split()[1:])
        assert reads >= 4 * 4000 and refreshes >= 4
        assert child.wait(timeout=60) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdin.close()
        child.stdout.close()
        child.stderr.close()
    assert len(set(installed)) == 4
    assert read_back(compiled, path, model) == installed[-1]


# --- 6. a leftover index.new ---------------------------------------------------------


@compiled_only
@pytest.mark.parametrize("leftover", ["garbage", "a valid index", "empty"])
def test_a_leftover_index_new_is_ignored_by_readers_and_removed_by_writers(
    copied, large, leftover
):
    temp = copied / fmt.INDEX_TEMP_NAME
    contents = {"garbage": b"\xff" * 9000, "a valid index": large.index_data, "empty": b""}
    temp.write_bytes(contents[leftover])
    os.remove(index_path(copied))  # a valid index.new must not stand in for it
    assert_fallback(copied, large.model, large.absent)
    assert temp.read_bytes() == contents[leftover], "a reader changes nothing"
    with open_db(compiled_kernel(), copied, "w") as database:
        assert database.index_covered == 0
        assert not temp.exists(), "the writer removes the leftover"
        check_contents(database, large.model)
    assert not temp.exists()
    assert ending_checkpoint(data_of(copied)) == large.size
    assert_valid_index(copied, covered=len(data_of(copied)))


@compiled_only
def test_a_leftover_index_new_beside_a_valid_index(copied, large):
    temp = copied / fmt.INDEX_TEMP_NAME
    temp.write_bytes(large.index_data[: len(large.index_data) // 3])
    covered = check_on_every_kernel(copied, large.model, large.absent)
    assert covered["cython"] == large.size
    with open_db(compiled_kernel(), copied, "w") as database:
        assert database.index_covered == large.size
        assert not temp.exists()
    assert index_of(copied) == large.index_data


@compiled_only
def test_a_writer_that_cuts_a_torn_tail_below_covered_removes_the_index(copied, large, no_hang):
    """The header covers into a torn tail: up to a few bytes inside a record that runs past the
    end of the file. The writer's open drops the index file, cuts the tail back to the last whole
    record, below ``covered``, and then must remove the index file, refused for the log as cut,
    before it appends: grown again past ``covered``, the log might pass its checks."""
    last = max(fmt.boundaries(large.data))
    torn = put_record(b"torn", b"t" * 5000)[:3000]
    with open(copied / "data", "ab") as data:
        data.write(torn)
    index = fmt.build(large.data, seed=99)
    index.covered = last + 100
    index.samples = fmt.samples_of(large.data + torn, index.covered)
    index_path(copied).write_bytes(index.encode())
    with pytest.warns(semidbm.TornTailWarning):
        with open_db(compiled_kernel(), copied, "w") as database:
            assert not index_path(copied).exists()
            check_contents(database, large.model, large.absent)
    data = data_of(copied)  # and the checkpoint its close wrote for a new index file
    assert data[: large.size] == large.data and ending_checkpoint(data) == large.size


#: A writer whose new index file's table is sized too small for its keys (a count gone wrong,
#: simulated by ``_index_file.capacity_for``), in a child process: a merge that probed for an
#: empty slot in a full table would never end.
OVERFULL_CHILD = """
import sys
from semidbm import _index_file, _kernel, _settings, db

_settings.INDEX_MIN_TAIL = 0
_index_file.capacity_for = lambda count: _index_file.MIN_CAPACITY
with db.open_with(_kernel.load("cython"), sys.argv[1], "c") as database:
    for number in range(200):
        database[b"k%d" % number] = b"v"
    database.sync()
print("closed")
"""


@compiled_only
def test_a_table_too_small_for_the_keys_gives_no_index_rather_than_a_hang(tmp_path):
    path = tmp_path / "db"
    try:
        result = subprocess.run([sys.executable, "-c", OVERFULL_CHILD, str(path)],
                                capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the index merge never ended")
    assert result.stdout.strip() == "closed", result.stderr
    assert not index_path(path).exists()
    assert read_back(compiled_kernel(), path, {b"k%d" % n: b"v" for n in range(200)}) == 0
