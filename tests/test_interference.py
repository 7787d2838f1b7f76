"""Interference: what other processes, threads, signals and renames do to an open database.

Each test reproduces a defect an adversarial review found (issue 18):
a full disk under a reader, a directory renamed under a writer, a
snapshot taken while another thread deletes, a copied database, a
signal handler in the middle of a write, options that fail after the
disk was touched, a creation that fails halfway. Multi-process cases
run in subprocesses, the full disk on a real small tmpfs.
"""

import copy
import errno
import json
import os
import pickle
import struct
import subprocess
import sys
import textwrap
import threading
import time
import zlib

import pytest

import semidbm
from semidbm import _files, db
from semidbm._messages import CHANGED_DURING_ITERATION, SHRANK
from semidbm._settings import MAX_BUFFER_SIZE

from .conftest import compiled_only, kernel_name

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX signals, limits and renames")
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(script, *args, timeout=120):
    """Run ``script`` in a new interpreter with the repository's ``src`` importable."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPOSITORY, "src"))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


# --- a full disk: the file never shrinks under a reader ---

READER_LOOP = """
import json, os, sys, warnings
from semidbm import _kernel, db

kernel, path, stop = _kernel.load(sys.argv[1]), sys.argv[2], sys.argv[3]
warnings.simplefilter("ignore")
reader = db.open_with(kernel, path)
refreshes = most = 0
while not os.path.exists(stop):
    reader.refresh()
    refreshes += 1
    keys = reader.keys()
    most = max(most, len(keys))
    for key in keys:
        assert reader[key] == b"%s=" % key * 100, key
print(json.dumps({"refreshes": refreshes, "most": most, "keys": len(reader)}))
"""


@posix_only
def test_a_full_disk_never_cuts_records_a_reader_has_seen(kernel, small_disk, tmp_path):  # noqa: F811
    """A flush cut short by ENOSPC keeps the complete records it wrote; a reader never dies.

    Before: the writer cut the file back to its last durable end, so a
    reader that had indexed the records in between listed keys that were
    gone and died with SIGBUS at its next refresh.
    """
    path = os.path.join(small_disk, "db")
    filler = os.path.join(small_disk, "filler")
    stop = tmp_path / "stop"
    keys = [b"k%04d" % i for i in range(1000)]
    writer = db.open_with(kernel, path, "c", buffer_size=4 * 1024 * 1024)
    writer.sync()
    reader = subprocess.Popen(
        [sys.executable, "-c", READER_LOOP, kernel_name(kernel), path, str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.path.join(REPOSITORY, "src")),
    )
    try:
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        with open(filler, "wb") as handle:
            handle.write(b"\0" * (free - 500_000))
        for key in keys:
            writer[key] = b"%s=" % key * 100
        sizes = []
        for _ in range(20):
            with pytest.raises(semidbm.error) as raised:
                writer.sync()
            assert raised.value.errno == errno.ENOSPC
            sizes.append(os.path.getsize(os.path.join(path, "data")))
            time.sleep(0.01)
        assert sizes[0] > 100_000, "the short write kept what it wrote"
        assert sizes == sorted(sizes), "the file only grows"
        # What the failed writer holds is all readable, from file and buffer.
        assert writer.items() == [(key, b"%s=" % key * 100) for key in keys] or sorted(
            writer.items()
        ) == [(key, b"%s=" % key * 100) for key in keys]
        with db.open_with(kernel, path) as fresh:
            on_disk = len(fresh)
            assert 0 < on_disk < len(keys)
        os.remove(filler)
        writer.sync()
        time.sleep(0.2)
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=60)
        writer.close()
    assert reader.returncode == 0, (reader.returncode, err)
    seen = json.loads(out)
    assert seen["keys"] == len(keys)
    with db.open_with(kernel, path) as fresh:
        assert sorted(fresh.items()) == [(key, b"%s=" % key * 100) for key in keys]


def test_refresh_of_a_file_cut_under_the_reader_raises_and_closes_it(dbopen, dbpath):
    """Another process truncating the data file: ``refresh()`` says so, not reading past the end."""
    with dbopen(dbpath, "c") as writer:
        for i in range(100):
            writer[b"k%d" % i] = b"v%d" % i
    reader = dbopen(dbpath)
    data = dbpath / "data"
    full = data.stat().st_size
    os.truncate(data, full - 50)
    with pytest.raises(semidbm.error) as raised:
        reader.refresh()
    assert str(raised.value) == SHRANK % (reader.path, full - 50, full)
    assert reader.closed
    with pytest.raises(semidbm.error, match="is closed"):
        reader[b"k1"]


@pytest.mark.parametrize("chunk", [16, 100, 1 << 20])
def test_refresh_reads_the_new_log_in_chunks(dbopen, dbpath, monkeypatch, chunk):
    """``refresh()`` catches up a chunk at a time.

    Records larger than a chunk, and one in progress, included.
    """
    monkeypatch.setattr(_files, "CATCH_UP_CHUNK", chunk)
    writer = dbopen(dbpath, "c", buffer_size=0)
    writer[b"first"] = b"1"
    reader = dbopen(dbpath)
    expected = {b"first": b"1"}
    for i in range(40):
        expected[b"k%d" % i] = b"v" * (i * 37 % 500)
        writer[b"k%d" % i] = expected[b"k%d" % i]
    del writer[b"k3"]
    del expected[b"k3"]
    record = struct.pack("!ii", 4, 300) + b"late" + b"x" * 300
    record += struct.pack("!I", zlib.crc32(b"x" * 300, zlib.crc32(b"late")))
    with open(dbpath / "data", "ab") as data:  # a write in progress: the writer holds the lock
        data.write(record[:150])
    reader.refresh()
    assert dict(reader.items()) == expected
    with open(dbpath / "data", "ab") as data:
        data.write(record[150:])
    reader.refresh()
    expected[b"late"] = b"x" * 300
    assert dict(reader.items()) == expected
    reader.close()
    writer.close()


def test_pure_kernel_read_of_a_cut_file_has_a_clear_message(dbpath):
    """The pure kernel past a cut end: a DBMError saying where, not ``[Errno None] ... None``.

    (The compiled kernel reads from a memory map, where the missing pages
    end the process with SIGBUS: docs/limits.md forbids cutting an open data
    file, and says so.)
    """
    from semidbm import _pure

    with db.open_with(_pure, dbpath, "c") as writer:
        writer[b"key"] = b"value" * 100
    reader = db.open_with(_pure, dbpath)
    os.truncate(dbpath / "data", 20)
    with pytest.raises(semidbm.error) as raised:
        reader[b"key"]
    message = str(raised.value)
    assert "None" not in message and "file ended" in message, message
    assert raised.value.errno is None
    reader.close()


# --- a renamed directory ---


def test_a_writer_follows_its_renamed_directory(dbopen, tmp_path):
    """Compacting after the directory was renamed never touches the database now at the old path.

    Before: the compaction renamed its file over ``A/data`` (another
    database by then) and the writer's later writes landed there.
    """
    first, moved = tmp_path / "A", tmp_path / "B"
    writer = dbopen(first, "c")
    reader = None
    try:
        for i in range(50):
            writer[b"w%d" % i] = b"writer %d" % i
        writer.sync()
        os.rename(first, moved)
        with dbopen(first, "c") as other:
            other[b"other"] = b"mine"
        reader = dbopen(moved)
        for i in range(0, 50, 2):
            del writer[b"w%d" % i]
        writer.compact()
        writer[b"after"] = b"compaction"
        writer.sync()
        reader.refresh()
        expected = {b"w%d" % i: b"writer %d" % i for i in range(1, 50, 2)}
        expected[b"after"] = b"compaction"
        assert dict(reader.items()) == expected, "the reader follows the renamed directory too"
    finally:
        writer.close()
        if reader is not None:
            reader.close()
    with dbopen(first) as other:
        assert dict(other.items()) == {b"other": b"mine"}
    with dbopen(moved) as mine:
        assert dict(mine.items()) == expected
    assert sorted(os.listdir(first)) == ["data", "lock"]


# --- snapshots under other threads ---


def test_items_and_values_are_snapshots_while_another_thread_deletes(dbopen, dbpath):
    """``items()``, ``values()`` and ``keys()`` never raise KeyError for a key they listed.

    Before: they were ``[(k, self[k]) for k in self.keys()]``; a key
    deleted in between raised KeyError (473 in 3 s).
    """
    database = dbopen(dbpath, "c", buffer_size=4096)
    keys = [b"k%d" % i for i in range(300)]
    for key in keys:
        database[key] = key + b"!"
    stop = time.monotonic() + 1.5
    failures = []
    calls = []

    def mutate():
        i = 0
        while time.monotonic() < stop:
            key = keys[i % len(keys)]
            del database[key]
            database[key] = key + b"!"
            i += 1
            if i % 500 == 0:
                database.compact()

    def snapshot(method):
        count = 0
        try:
            while time.monotonic() < stop:
                got = getattr(database, method)()
                if method == "items":
                    assert all(value == key + b"!" for key, value in got)
                elif method == "values":
                    assert all(value.endswith(b"!") for value in got)
                assert len(got) >= len(keys) - 1
                count += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append((method, repr(exc)))
        calls.append(count)

    threads = [threading.Thread(target=mutate)] + [
        threading.Thread(target=snapshot, args=(method,)) for method in ("items", "values", "keys")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    database.close()
    assert failures == []
    assert min(calls) > 0


# --- copies ---


@pytest.mark.parametrize(
    "duplicate",
    [copy.copy, copy.deepcopy, pickle.dumps, lambda database: pickle.dumps(database, 0)],
    ids=["copy", "deepcopy", "pickle", "pickle-protocol-0"],
)
def test_a_writer_cannot_be_copied_or_pickled(dbopen, dbpath, duplicate):
    """Both kernels refuse with the same TypeError, and the database goes on working.

    (Readers and shared writers pickle: tests/test_pickle.py.)

    Before: the pure kernel's copy shared the file descriptor and closed
    it when collected, and later writes were lost.
    """
    database = dbopen(dbpath, "c")
    database[b"a"] = b"1"
    with pytest.raises(TypeError, match="cannot be (copied or )?pickled"):
        duplicate(database)
    database[b"b"] = b"2"
    database.close()
    with dbopen(dbpath) as again:
        assert dict(again.items()) == {b"a": b"1", b"b": b"2"}


# --- the kernels say the same ---


def outcome(action):
    """``(type name, errno, message)`` of what ``action()`` raised, or None."""
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - compared across kernels
        return type(exc).__name__, getattr(exc, "errno", None), str(exc)
    return None


def iterate_across(change):
    """Start iterating over a fresh database, ``change`` it, take the next key."""

    def action(database, reader):
        keys = iter(reader if change == "refresh" else database)
        next(keys)
        if change == "refresh":
            database[b"new"] = b"key"
            database.sync()
            reader.refresh()
        elif change == "compact":
            database[b"k1"] = b"overwritten"  # the compaction keeps the count
            database.compact()
        else:
            del database[b"k1"]
        next(keys)

    return action


PARITY = {
    "iterate across a refresh": iterate_across("refresh"),
    "iterate across a compaction": iterate_across("compact"),
    "iterate across a delete": iterate_across("delete"),
    "read a closed database": lambda database, reader: (reader.close(), reader[b"k1"]),
    "write a reader": lambda database, reader: reader.__setitem__(b"a", b"b"),
    "a key of a bad type": lambda database, reader: database[3.5],
    "a missing key": lambda database, reader: database[b"missing"],
    "delete a missing key": lambda database, reader: database.__delitem__(b"missing"),
    "refresh a cut file": lambda database, reader: (
        os.truncate(os.path.join(os.path.dirname(reader.path), "data"), 12),
        reader.refresh(),
    ),
}


@compiled_only
@pytest.mark.parametrize("case", sorted(PARITY))
def test_both_kernels_raise_the_same(tmp_path, case):
    """The same error type, errno and message from each kernel (paths aside)."""
    from semidbm import _core, _pure

    seen = {}
    for kernel in (_pure, _core):
        path = tmp_path / kernel_name(kernel)
        database = db.open_with(kernel, path, "c")
        for i in range(20):
            database[b"k%d" % i] = b"v%d" % i
        database.sync()
        reader = db.open_with(kernel, path)
        try:
            result = outcome(lambda: PARITY[case](database, reader))
        finally:
            reader.close()
            database.close()
        assert result is not None, "%s raised nothing" % case
        seen[kernel_name(kernel)] = (result[0], result[1], result[2].replace(str(path), "PATH"))
    assert seen["python"] == seen["cython"]


def test_iterating_across_a_compaction_does_not_say_size(dbopen, dbpath):
    """A compaction that kept the number of keys is not reported as a change of size."""
    database = dbopen(dbpath, "c")
    database.update({b"a": b"1", b"b": b"2"})
    keys = iter(database)
    next(keys)
    database[b"a"] = b"3"
    database.compact()
    with pytest.raises(RuntimeError) as raised:
        next(keys)
    assert str(raised.value) == CHANGED_DURING_ITERATION % database.path
    database.close()


MAP_LIMIT = """
import json, resource, sys
from semidbm import _kernel, db

kernel, path = _kernel.load(sys.argv[1]), sys.argv[2]
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[3]), hard))
try:
    db.open_with(kernel, path, "r")
except Exception as exc:
    print(json.dumps([type(exc).__name__, exc.errno, str(exc)]))
else:
    print(json.dumps(None))
"""


@posix_only
@compiled_only
def test_a_failed_mapping_gives_the_same_error_in_both_kernels(tmp_path):
    """Under a low address-space limit both raise DBMError [Errno 12] naming the file.

    Before: the pure kernel raised a bare OSError without the path.
    """
    from semidbm import _core, _pure

    seen = {}
    for kernel in (_pure, _core):
        path = tmp_path / kernel_name(kernel)
        with db.open_with(kernel, path, "c") as database:
            database[b"big"] = b"x" * (64 << 20)
        usage = run_python(
            "import resource, semidbm, semidbm._core, semidbm._pure\n"
            "print(int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize())"
        )
        limit = int(usage.stdout) + (48 << 20)
        result = run_python(MAP_LIMIT, kernel_name(kernel), path, limit)
        assert result.returncode == 0, result.stderr
        found = json.loads(result.stdout)
        assert found is not None, "the limit did not bite"
        seen[kernel_name(kernel)] = found[:2] + [found[2].replace(str(path), "PATH")]
    assert seen["python"] == seen["cython"]
    assert seen["python"][:2] == ["DBMError", errno.ENOMEM]
    assert "cannot map PATH" in seen["python"][2]


# --- signal handlers in the middle of a write ---

SIGNALS = """
import json, signal, sys
import semidbm
from semidbm import _kernel, db

kernel, path, mode = _kernel.load(sys.argv[1]), sys.argv[2], sys.argv[3]
buffer_size = int(sys.argv[4])
database = db.open_with(kernel, path, "c", buffer_size=buffer_size)

class Alarm(Exception):
    pass

handled = [0]
# Raise only inside the try below, and disarm before raising, so that an
# alarm landing in the except clause cannot raise a second Alarm out of it.
armed = [False]

def handler(signum, frame):
    handled[0] += 1
    number = handled[0]  # once: the next alarm may run this handler again, nested
    if mode == "writes":
        try:
            database[b"h%d" % number] = b"handler %d" % number
        except semidbm.error:
            pass  # refused in the middle of a write: the point of the test
    if armed[0]:
        armed[0] = False
        raise Alarm()

signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)
interrupted = done = 0
while done < 100000:
    try:
        armed[0] = True
        database[b"k%d" % done] = b"v%d" % done
        armed[0] = False
        done += 1
    except Alarm:
        interrupted += 1
signal.setitimer(signal.ITIMER_REAL, 0, 0)

def wrong(database):
    bad = []
    for key in database.keys():
        expected = (b"handler " if key.startswith(b"h") else b"v") + key[1:]
        if database[key] != expected:
            bad.append(key.decode())
    return bad

before = wrong(database)
count = len(database)
database.close()
with db.open_with(kernel, path) as again:
    after = wrong(again)
    assert len(again) == count, (len(again), count)
print(json.dumps({"interrupted": interrupted, "handled": handled[0],
                  "wrong": before[:5] + after[:5], "count": count}))
"""


@posix_only
@pytest.mark.parametrize("mode", ["raises", "writes"])
@pytest.mark.parametrize("buffer_size", [0, 4096])
def test_a_signal_handler_never_makes_values_wrong(kernel, dbpath, mode, buffer_size):
    """SIGALRM every 0.3 ms raising (and writing to the database) around ``db[k] = v``.

    Before: in the pure kernel a handler that raised between the write
    and the bookkeeping left every later offset wrong (198,738 of
    200,000 values), and one that wrote to the database 3,054.
    """
    result = run_python(SIGNALS, kernel_name(kernel), dbpath, mode, buffer_size, timeout=300)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["handled"] > 20, found
    assert found["wrong"] == [], found
    assert found["count"] >= 100000


# --- options and failed creations ---


def test_an_impossible_buffer_size_fails_before_the_disk_is_touched(dbopen, dbpath):
    """``buffer_size`` past the limit: ValueError, no directory made, no database emptied."""
    for size in (2**62, MAX_BUFFER_SIZE + 1, -1):
        with pytest.raises(ValueError, match="buffer_size"):
            dbopen(dbpath, "c", buffer_size=size)
        assert not dbpath.exists()
    with dbopen(dbpath, "c") as database:
        database[b"kept"] = b"yes"
    with pytest.raises(ValueError, match="buffer_size"):
        dbopen(dbpath, "n", buffer_size=2**62)
    with dbopen(dbpath) as database:
        assert dict(database.items()) == {b"kept": b"yes"}


FILE_LIMIT = """
import os, resource, sys
import semidbm
from semidbm import _kernel, db

kernel, path, spare = _kernel.load(sys.argv[1]), sys.argv[2], int(sys.argv[3])
in_use = {int(name) for name in os.listdir("/proc/self/fd")}
free = [number for number in range(4096) if number not in in_use][: spare + 1]
hard_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (free[-1], hard_limit))
try:
    db.open_with(kernel, path, "c")
except semidbm.error as exc:
    print(exc.errno)
"""


@posix_only
@pytest.mark.parametrize("spare", [0, 1], ids=["at-the-directory", "at-the-lock"])
def test_a_creation_that_runs_out_of_files_leaves_nothing(kernel, dbpath, spare):
    """A creation refused for want of file descriptors removes the directory it made."""
    result = run_python(FILE_LIMIT, kernel_name(kernel), dbpath, spare)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(errno.EMFILE)
    assert not dbpath.exists()
