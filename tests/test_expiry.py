"""Values that expire: ``Database.set(key, value, expire=)`` and format 2.1's expiry record.

The records are built here from docs/FORMAT.md ("Expiry"), and the
wall clock is moved by replacing ``semidbm._expiry.now``, which both
kernels and the API layer read, so that no test sleeps.
"""

import errno
import math
import os
import pickle
import struct
import sys
import threading
import time
import zlib

import pytest

import semidbm
from semidbm import _checkpoint, _examine, _kernel, cli, db, sharded

from .conftest import CLOCK_START as START
from .conftest import IMPLEMENTATIONS, compiled_only
from .support.log import log_start, records_after_start
from .support.records import put_record

HEADER_1_1 = b"SEMI" + struct.pack("!HH", 1, 1)
HEADER_2_0 = b"SEMI" + struct.pack("!HH", 2, 0)
HEADER_2_1 = b"SEMI" + struct.pack("!HH", 2, 1)
def expiry_record(key, expires_at):
    """An expiry record, as FORMAT.md lays it out: lengths, key, time, CRC-32 of key and time."""
    time = struct.pack("!Q", expires_at)
    return struct.pack("!ii", len(key), -3) + key + time + struct.pack(
        "!I", zlib.crc32(key + time))


def batch_record(*records):
    """A batch record of ``records``: the body's length, -2, the body's CRC-32, the body."""
    body = b"".join(records)
    return struct.pack("!iiI", len(body), -2, zlib.crc32(body)) + body


def expiring(key, value, expires_at):
    """What ``set(key, value, expire=)`` appends: the put and its expiry record, one batch."""
    return batch_record(put_record(key, value), expiry_record(key, expires_at))


def test_a_value_expires_for_every_lookup(dbopen, dbpath, clock):
    with dbopen(dbpath, "c", format=2) as database:
        database.set(b"k", b"v", expire=2)
        database.set("s", "text", expire=0.0001)  # rounded up to a millisecond
        database.set(b"plain", b"p")
        assert database[b"k"] == b"v" and b"k" in database and database[b"s"] == b"text"
        clock[0] += 1
        assert b"s" not in database and database.get(b"s") is None
        clock[0] = START + 2000  # the expiry time itself is past
        for key in (b"k", b"s"):
            with pytest.raises(KeyError):
                database[key]
            with pytest.raises(KeyError):
                database.view(key)
            assert key not in database and database.get(key, b"gone") == b"gone"
        assert database.get_many([b"k", b"plain"], b"-") == [b"-", b"p"]
        # Counted until a compaction drops them (docs/expiry.md).
        assert len(database) == 3 and sorted(database.keys()) == [b"k", b"plain", b"s"]
        database.sync()
        assert records_after_start((dbpath / "data").read_bytes(), HEADER_2_1) == (
            expiring(b"k", b"v", START + 2000) + expiring(b"s", b"text", START + 1)
            + put_record(b"plain", b"p"))


def test_a_sharded_database_reads_an_expired_key_as_missing(kernel, tmp_path, clock):
    """The routed reads (``ShardRouter``: ``[]``, ``in``, ``get``, ``get_many``) ask each shard
    as its own reads do. Caught by a routed ``in`` that finds the key without its expiry."""
    path = tmp_path / "sharded"
    with sharded.open_sharded_with(kernel, path, "c", shards=3, format=2) as database:
        shard = database.shards[database.shard_of(b"k")]
        shard.set(b"k", b"v", expire=1)
        database[b"plain"] = b"p"
        assert database[b"k"] == b"v" and b"k" in database
        clock[0] += 1000
        with pytest.raises(KeyError):
            database[b"k"]
        assert b"k" not in database and database.get(b"k", b"-") == b"-"
        assert database.get_many([b"k", b"plain"], b"-") == [b"-", b"p"]


def test_a_later_write_replaces_an_expiring_value(dbopen, dbpath, clock):
    with dbopen(dbpath, "c", format=2) as database:
        database.set(b"a", b"1", expire=1)
        database[b"a"] = b"2"  # never expires
        database.set(b"b", b"1", expire=1)
        database.set(b"b", b"2", expire=5)
        database.set(b"c", b"1", expire=1)
        del database[b"c"]
        clock[0] += 1000
        assert database.get(b"a") == b"2" and database.get(b"b") == b"2"
        assert b"c" not in database and len(database) == 2


def test_reopened_refreshed_and_compacted_the_expiry_holds(dbopen, dbpath, clock):
    """Both kernels, through the buffer, the file, a reader's refresh and a compaction.

    The reader meets its first expiry record at the refresh. Mutation
    caught: a replay of new records (a refresh, a shared writer's
    catch-up) that does not tell reads to look for expiry records from
    then on.
    """
    with dbopen(dbpath, "c", format=2) as database:
        database[b"kept"] = b"3"
        database.sync()
        with dbopen(dbpath, "r") as reader:
            database.set(b"old", b"1", expire=1)
            database.set(b"new", b"2", expire=10)
            database.sync()
            reader.refresh()
            assert reader[b"old"] == b"1"
            clock[0] += 1000
            assert reader.get_many([b"old", b"new", b"kept"]) == [None, b"2", b"3"]
    with dbopen(dbpath, "w") as database:
        assert database.get(b"old") is None and database[b"new"] == b"2"
        before = len((dbpath / "data").read_bytes())
        assert database.compact() == 0
        assert sorted(database.keys()) == [b"kept", b"new"]
        data = (dbpath / "data").read_bytes()
        assert records_after_start(data, HEADER_2_1) == (
            put_record(b"kept", b"3") + expiring(b"new", b"2", START + 10000))
        assert len(data) < before
        clock[0] += 9000
        assert database.get(b"new") is None
        database.compact()
        assert list(database.keys()) == [b"kept"]


def test_the_kernels_write_the_same_bytes(tmp_path, clock):
    """Sets, then a compaction that keeps one value, drops one and copies a plain one."""
    from semidbm import _kernel, db

    files = {}
    for name in ("cython", "python"):
        try:
            kernel = _kernel.load(name)
        except ImportError:
            pytest.skip("the compiled kernel is not built")
        path = tmp_path / name
        with db.open_with(kernel, path, "c", format=2) as database:
            database.set(b"a", b"1", expire=1)
            database.set(b"b", b"2", expire=5)
            database[b""] = b""
            clock[0] += 1000
            database.compact()
            database.set(b"c", b"x" * 100, expire=3)
        files[name] = records_after_start((path / "data").read_bytes(), HEADER_2_1)
        clock[0] = START
    assert files["cython"] == files["python"]
    assert files["python"].startswith(expiring(b"b", b"2", START + 5000))


def test_clock_jumps(dbopen, dbpath, clock):
    """Forward: values expire early; back: they read again, until a compaction dropped them."""
    with dbopen(dbpath, "c", format=2) as database:
        database.set(b"a", b"1", expire=60)
        database.set(b"b", b"2", expire=60)
        clock[0] += 3_600_000
        assert b"a" not in database
        clock[0] = START
        assert database[b"a"] == b"1"
        clock[0] += 3_600_000
        database.compact()
        clock[0] = START
        assert b"a" not in database and len(database) == 0


@pytest.mark.parametrize("expire, error", [
    (0, ValueError), (-1, ValueError), (-0.5, ValueError), (math.nan, ValueError),
    (math.inf, ValueError), (1e300, ValueError), ("1", TypeError), (True, TypeError),
    (b"1", TypeError),
])
def test_bad_expire_is_refused_and_writes_nothing(dbopen, dbpath, expire, error):
    with dbopen(dbpath, "c", format=2) as database:
        with pytest.raises(error, match="expire must be"):
            database.set(b"k", b"v", expire=expire)
        with pytest.raises(TypeError):
            database.set(b"k", 1, expire=5)
        assert b"k" not in database
    assert records_after_start((dbpath / "data").read_bytes(), HEADER_2_1) == b""


def test_earlier_formats_refuse_expire_and_say_how_to_upgrade(dbopen, dbpath, capsys):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
        with pytest.raises(semidbm.error, match=r"format 1\.1, which has no expiring values: "
                                                r"upgrade it to format 2\.1 with "
                                                r"db\.compact\(format=2\)"):
            database.set(b"k", b"v", expire=5)
    start = log_start((dbpath / "data").read_bytes(), HEADER_1_1)
    # A file of format 2.0 (an earlier semidbm's) refuses too, until compacted: 2.1.
    (dbpath / "data").write_bytes(HEADER_2_0 + start[8:] + put_record(b"a", b"1"))
    with dbopen(dbpath, "w") as database:
        with pytest.raises(semidbm.error, match=r"format 2\.0, which has no expiring values"):
            database.set(b"k", b"v", expire=5)
    assert cli.main(["upgrade", str(dbpath)]) == 0
    assert "from format 2.0 to 2.1" in capsys.readouterr().out
    with dbopen(dbpath, "w") as database:
        database.set(b"k", b"v", expire=5)
        assert dict(database.items()) == {b"a": b"1", b"k": b"v"}
    with dbopen(dbpath, "r") as reader, pytest.raises(semidbm.error, match="read-only"):
        reader.set(b"k", b"v", expire=5)


def test_format_1_refuses_a_value_that_has_not_expired(dbopen, dbpath, clock):
    with dbopen(dbpath, "c", format=2) as database:
        database.set(b"a", b"1", expire=5)
        database[b"b"] = b"2"
        with pytest.raises(semidbm.error, match="format 1.1 cannot hold"):
            database.compact(format=1)
        assert sorted(os.listdir(dbpath)) == ["data", "lock"]
        assert database.format_version == (2, 1) and database[b"a"] == b"1"
        clock[0] += 5000
        database.compact(format=1)  # expired: left out
        assert dict(database.items()) == {b"b": b"2"}
    assert records_after_start((dbpath / "data").read_bytes(), HEADER_1_1) == put_record(
        b"b", b"2")


@pytest.mark.parametrize("records", [
    # Outside a batch (after the put, at offset 22).
    [put_record(b"k", b"v"), expiry_record(b"k", START)],
    # After a put of another key, or after a delete, or first in a batch.
    [batch_record(put_record(b"j", b"v"), expiry_record(b"k", START))],
    [batch_record(expiry_record(b"k", START), put_record(b"k", b"v"))],
    # Two for one put.
    [batch_record(put_record(b"k", b"v"), expiry_record(b"k", START),
                  expiry_record(b"k", START))],
], ids=["outside", "other key", "first", "twice"])
def test_an_expiry_record_out_of_place_is_corrupt(dbopen, dbpath, records):
    """Mutation caught: a body check (``parser_batch_fits``, ``_batch_fits``) that lets an
    expiry record follow anything but a put of its key."""
    dbpath.mkdir()
    (dbpath / "data").write_bytes(HEADER_2_1 + b"".join(records))
    with pytest.raises(semidbm.DBMLoadError, match="at offset (8|22) "):
        dbopen(dbpath, "r")


def test_a_reader_of_format_2_0_refuses_an_expiry_record(dbopen, dbpath):
    """What the semidbm before 2.1 does with one (docs/FORMAT.md, "Expiry": "Older
    readers"): a 2.0 file with the same record is read by the same rule."""
    dbpath.mkdir()
    (dbpath / "data").write_bytes(HEADER_2_0 + expiring(b"k", b"v", START))
    with pytest.raises(semidbm.DBMLoadError, match="at offset 8"):
        dbopen(dbpath, "r")
    (dbpath / "data").write_bytes(HEADER_2_1 + expiring(b"k", b"v", 1000))  # in 1970
    with dbopen(dbpath, "r") as reader:
        assert b"k" not in reader


def test_a_cut_expiring_batch_is_a_torn_tail(dbopen, dbpath, clock):
    """The put is whole in both cuts: a writer of the put and its expiry as records of their
    own, outside a batch (the mutation this catches), would leave it, never to expire."""
    whole = expiring(b"k", b"v" * 10, START + 5000)
    dbpath.mkdir()
    for cut in (len(whole) - 1, len(whole) - 10):
        (dbpath / "data").write_bytes(HEADER_2_1 + put_record(b"a", b"1") + whole[:cut])
        with pytest.warns(semidbm.TornTailWarning), dbopen(dbpath, "w") as database:
            assert dict(database.items()) == {b"a": b"1"}


def test_no_index_file_covers_an_expiry_record(dbopen, dbpath, clock):
    """An open with an index file replays only past it, and an older semidbm trusts it.

    Mutation caught: a compaction (or a close) that writes an index file
    while its log holds an expiry record; the compiled kernel would then
    lose the flag that makes its reads look for one.
    """
    with dbopen(dbpath, "c", format=2) as database:
        database[b"a"] = b"1"
        database.compact()
        written = "index" in os.listdir(dbpath)  # the compiled kernel's, not the pure one's
        database.set(b"k", b"v", expire=5)
        database.compact()
        assert "index" not in os.listdir(dbpath)
    with dbopen(dbpath, "r") as reader:
        clock[0] += 5000
        assert b"k" not in reader
    with dbopen(dbpath, "w") as database:
        database.compact()  # drops the expired value: index files again
        assert ("index" in os.listdir(dbpath)) == written


def test_shared_writers_see_each_other_s_expiry(dbopen, dbpath, clock):
    with dbopen(dbpath, "cm", format=2, lock_timeout=1) as first, \
            dbopen(dbpath, "wm", lock_timeout=1) as second:
        first.set(b"k", b"v", expire=1)
        second.set(b"j", b"w", expire=2)
        with first.locked():  # caught up with the other writer
            assert first[b"k"] == b"v" and first[b"j"] == b"w"
        clock[0] += 1000
        assert b"k" not in second and second[b"j"] == b"w"
        second.compact()
        with first.locked():
            assert sorted(first.keys()) == [b"j"]


def test_a_full_disk_keeps_nothing_of_an_expiring_value(dbopen, small_disk, clock):
    """The batch of the put and its expiry, written straight, fails whole: cut back, not in the
    index, the rest of the database as it was."""
    path = os.path.join(small_disk, "db")
    filler = os.path.join(small_disk, "filler")
    with dbopen(path, "c", format=2, buffer_size=0) as database:
        database[b"a"] = b"1"
        size = os.path.getsize(os.path.join(path, "data"))
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        with open(filler, "wb") as stream:
            stream.write(b"\0" * max(free - 8192, 0))
        with pytest.raises(semidbm.error) as info:
            database.set(b"k", b"v" * 100_000, expire=5)
        assert info.value.errno == errno.ENOSPC
        assert b"k" not in database and database[b"a"] == b"1"
        assert os.path.getsize(os.path.join(path, "data")) == size
        os.remove(filler)
        database.set(b"k", b"w", expire=5)
    with dbopen(path, "r") as reader:
        assert dict(reader.items()) == {b"a": b"1", b"k": b"w"}


def test_stats_counts_expired_bytes(dbpath, clock, capsys):
    with semidbm.open(dbpath, "c", format=2) as database:
        database.set(b"k", b"v" * 10, expire=1)
        database[b"p"] = b"q"
    clock[0] += 1000
    assert cli.main(["stats", "--json", str(dbpath)]) == 0
    out = capsys.readouterr().out
    assert '"expired_bytes": %d' % len(put_record(b"k", b"v" * 10)) in out
    assert '"records": 4' in out  # the checkpoint's two, the puts; not the expiry record


def test_stats_counts_what_a_compaction_frees(kernel, tmp_path, clock):
    """A live value with an expiry is copied in a batch with its expiry record: stats counts
    those bytes as kept. Caught by a count that frees them."""
    path = tmp_path / "db"
    with db.open_with(kernel, str(path), "c", format=2) as database:
        database.set(b"later", b"l" * 30, expire=3600)
        database.set(b"gone", b"g" * 20, expire=1)
        database[b"plain"] = b"p"
        database[b"plain"] = b"q"
    clock[0] += 1000
    found = _examine.examine(str(path), kernel=kernel)
    before = os.path.getsize(path / "data")
    with db.open_with(kernel, str(path), "w") as database:
        database.compact()
    assert found.reclaimable == before - os.path.getsize(path / "data") > 0


def test_values_and_items_list_an_expired_value_until_a_compaction(dbopen, dbpath, clock):
    """docs/expiry.md: the listings count a key whose value expired until a compaction drops
    it. Caught by a listing that reads each value as a lookup does (KeyError)."""
    with dbopen(dbpath, "c", format=2) as database:
        database.set(b"a", b"1", expire=1)
        database[b"b"] = b"2"
        clock[0] += 1000
        assert sorted(database.values()) == [b"1", b"2"]
        assert sorted(database.items()) == [(b"a", b"1"), (b"b", b"2")]
        database.compact()
        assert list(database.items()) == [(b"b", b"2")]


def test_the_kernels_compact_the_latest_expiry_time_alike(tmp_path):
    """An expiry record may hold any unsigned 64-bit time, the largest too. Caught by a kernel
    that takes that time for "no expiry record" (and copies the put without it)."""
    found = {}
    for name in IMPLEMENTATIONS:
        path = tmp_path / name
        path.mkdir()
        (path / "data").write_bytes(HEADER_2_1 + expiring(b"k", b"v", 2**64 - 1))
        with db.open_with(_kernel.load(name), str(path), "w") as database:
            database.compact()
            assert database[b"k"] == b"v"
        found[name] = (path / "data").read_bytes()[_checkpoint.START_SIZE:]
    assert found["python"] == expiring(b"k", b"v", 2**64 - 1)
    assert found.get("cython", found["python"]) == found["python"]


def test_a_pickled_handle_finds_an_expired_value_missing_at_its_first_read(dbopen, dbpath,
                                                                          clock):
    """A handle opens at its first use, and only then knows that its log holds expiry
    records. Caught by a read that reads the clock before that open (nothing then expires)."""
    with dbopen(dbpath, "c", format=2) as database:
        database.set(b"k", b"v", expire=1)
        database[b"p"] = b"q"
    clock[0] += 1000
    with dbopen(dbpath) as reader:
        handle = pickle.dumps(reader)
    for read in (lambda db: db[b"k"], lambda db: db.view(b"k")):
        with pickle.loads(handle) as copy, pytest.raises(KeyError):
            read(copy)
    for read in (lambda db: b"k" in db, lambda db: db.get_many([b"k"])[0]):
        with pickle.loads(handle) as copy:
            assert not read(copy)


def test_a_clock_before_1970_has_nothing_expired(dbopen, dbpath, clock):
    """Caught by a kernel that cannot take a negative time (OverflowError on every read)."""
    with dbopen(dbpath, "c", format=2) as database:
        database.set(b"k", b"v", expire=3600)
        clock[0] = -5
        assert b"k" in database and database[b"k"] == b"v" and database.get_many([b"k"]) == [b"v"]
        assert bytes(database.view(b"k")) == b"v"


@compiled_only
def test_a_read_of_an_expiring_value_is_atomic_for_threads(tmp_path):
    """A read runs no Python code between finding a value and copying it, expiry check
    included: a writer thread that reuses the append buffer meanwhile cannot slip other bytes
    under it. Caught by a read that asks the clock (Python) after it found the value."""
    store = db.open_with(_kernel.load("cython"), str(tmp_path / "t.db"), "c", format=2,
                         buffer_size=4096)
    value = b"V" * 200
    store.set(b"k", value, expire=3600)
    stop = threading.Event()
    wrong = []
    interval = sys.getswitchinterval()

    def writer():
        at = 0
        while not stop.is_set():
            store[b"x%d" % at] = b"%d" % at * 60
            if at % 7 == 0:
                store.set(b"k", value, expire=3600)
            at += 1

    threads = [threading.Thread(target=writer)]
    sys.setswitchinterval(1e-6)
    try:
        threads[0].start()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline and not wrong:
            for got in (store[b"k"], store.get(b"k"), store.get_many([b"k"])[0],
                        bytes(store.view(b"k"))):
                if got != value:
                    wrong.append(got[:40])
    finally:
        stop.set()
        threads[0].join()
        sys.setswitchinterval(interval)
        store.close()
    assert wrong == []


def test_a_damaged_expiry_is_a_damaged_record_at_compaction(dbopen, dbpath, clock):
    """Damage under a writer: the batch's checksum fails, the walk loses its way, and the copy
    by the index judges the expiry record with its put (never copying it as one that does not
    expire). Mutation caught: ``expiry_copy_size`` or ``kept_expiring`` skipping its checksum."""
    with dbopen(dbpath, "c", format=2) as database:
        database[b"a"] = b"1"
        database.set(b"k", b"v", expire=5)
        database.sync()
        data = (dbpath / "data").read_bytes()
        at = data.rindex(struct.pack("!Q", START + 5000))
        with open(dbpath / "data", "r+b") as stream:
            stream.seek(at + 7)
            stream.write(b"\x01")
        with pytest.raises(semidbm.DBMChecksumError):
            database.compact()
        assert database.compact(recover=True) == 1
        assert dict(database.items()) == {b"a": b"1"}
