"""A default lifetime for every value a handle writes: ``semidbm.open(path, flag, expire=)``.

The records are built here from docs/FORMAT.md ("Expiry", "Batches"),
and the wall clock is the ``clock`` fixture's, so that no test sleeps.
"""

import math
import os
import pickle
import struct
import zlib

import pytest

import semidbm
from semidbm import _batch, _kernel, db

from .conftest import CLOCK_START as START
from .support.log import records_after_start
from .support.records import put_record

HEADER_2_1 = b"SEMI" + struct.pack("!HH", 2, 1)
DELETED = -1


def record(key, value=None):
    """A put record, or a delete record if ``value`` is None, as FORMAT.md lays them out."""
    if value is not None:
        return put_record(key, value)
    return struct.pack("!ii", len(key), DELETED) + key + struct.pack("!I", zlib.crc32(key))


def expiry_record(key, expires_at):
    """An expiry record: lengths (-3 for the value's), key, time, CRC-32 of key and time."""
    time = struct.pack("!Q", expires_at)
    return struct.pack("!ii", len(key), -3) + key + time + struct.pack("!I", zlib.crc32(key + time))


def batch_record(*records):
    """A batch record of ``records``: the body's length, -2, the body's CRC-32, the body."""
    body = b"".join(records)
    return struct.pack("!iiI", len(body), -2, zlib.crc32(body)) + body


def expiring(key, value, expires_at):
    """What ``set(key, value, expire=)`` appends: the put and its expiry record, one batch."""
    return batch_record(record(key, value), expiry_record(key, expires_at))


def log_records(path):
    """The records of the database at ``path`` after its header and first checkpoint."""
    return records_after_start((path / "data").read_bytes(), HEADER_2_1)


def test_every_write_of_the_handle_has_its_lifetime(dbopen, dbpath, clock):
    """Each way of writing gives its puts the handle's lifetime, in the same bytes on both
    kernels; a lifetime given to ``set`` wins. Caught by any write path that stores a plain
    value (the record's bytes differ, and the value outlives the lifetime)."""
    with dbopen(dbpath, "c", expire=2) as database:
        assert type(database).__name__.startswith("Expiring")
        assert database.expire == 2.0 and database.format_version == (2, 1)
        database[b"a"] = b"1"
        database.update({b"b": b"2"}, c="3")
        database.update([(b"d", b"4")])
        assert database.setdefault(b"e", b"5") == b"5"
        database.set(b"f", b"6")
        database.set(b"g", b"7", expire=10)
        clock[0] += 1000  # the batch's puts expire 2 s after its commit
        with database.batch() as batch:
            batch[b"h"] = b"8"
            del batch[b"a"]
        database.sync()
        at = START + 2000
        assert log_records(dbpath) == (
            expiring(b"a", b"1", at) + expiring(b"b", b"2", at) + expiring(b"c", b"3", at)
            + expiring(b"d", b"4", at) + expiring(b"e", b"5", at) + expiring(b"f", b"6", at)
            + expiring(b"g", b"7", START + 10_000)
            + batch_record(record(b"h", b"8"), expiry_record(b"h", at + 1000), record(b"a"))
        )
        clock[0] = at
        assert sorted(key for key in database.keys() if key in database) == [b"g", b"h"]
        clock[0] = at + 1000
        assert [key for key in database.keys() if key in database] == [b"g"]
    with dbopen(dbpath, "r") as reader:  # the lifetimes are in the file
        assert reader.expire is None and b"f" not in reader and reader[b"g"] == b"7"


def test_a_handle_without_a_lifetime_writes_values_that_never_expire(dbopen, dbpath, clock):
    with dbopen(dbpath, "c", format=2) as database:
        assert database.expire is None
        database[b"k"] = b"v"
        clock[0] += 10**12
        assert database[b"k"] == b"v"


@pytest.mark.parametrize("expire, error", [
    (0, ValueError), (-1, ValueError), (math.nan, ValueError), (math.inf, ValueError),
    (1e300, ValueError), ("10", TypeError), (True, TypeError), (b"1", TypeError),
])
def test_a_bad_lifetime_is_refused_before_the_disk_is_touched(dbopen, dbpath, expire, error):
    with pytest.raises(error, match="expire"):
        dbopen(dbpath, "c", expire=expire)
    assert not os.path.exists(dbpath)


@pytest.mark.parametrize("flag, options", [("r", {}), ("c", {"format": 1})])
def test_a_reader_or_format_1_takes_no_lifetime(dbopen, dbpath, flag, options):
    with dbopen(dbpath, "c"):
        pass
    before = (dbpath / "data").read_bytes()
    with pytest.raises(ValueError, match="expire"):
        dbopen(dbpath, flag, expire=1, **options)
    assert (dbpath / "data").read_bytes() == before


@pytest.mark.parametrize("flag", ["w", "c", "wm", "cm"])
def test_an_older_format_is_refused_and_left_as_it_was(dbopen, dbpath, flag):
    """A writer of a format-1.1 database with a lifetime is refused, naming the way to upgrade,
    before the store opens: nothing is written and nothing stays locked. Caught without
    the check: the open succeeds, and its first write fails."""
    with dbopen(dbpath, "c") as database:
        database[b"k"] = b"v"
    before = (dbpath / "data").read_bytes()
    with pytest.raises(semidbm.error, match="upgrade"):
        dbopen(dbpath, flag, expire=1)
    assert (dbpath / "data").read_bytes() == before
    with dbopen(dbpath, "w") as writer:  # no lock left held
        assert writer[b"k"] == b"v"


def test_a_new_database_with_a_lifetime_is_of_format_2(dbopen, dbpath):
    """``'n'`` replaces a format-1.1 database with one of format 2.1; ``format=2`` is taken."""
    with dbopen(dbpath, "c") as database:
        database[b"old"] = b"v"
    with dbopen(dbpath, "n", expire=1) as database:
        assert database.format_version == (2, 1) and len(database) == 0
    with dbopen(dbpath, "n", expire=1, format=2) as database:
        assert database.format_version == (2, 1)


def test_a_pickled_shared_writer_keeps_its_lifetime(dbopen, dbpath, clock):
    """The lifetime travels with a pickled handle (``_reopen``), which writes with it."""
    with dbopen(dbpath, "cm", expire=5) as database:
        copy = pickle.loads(pickle.dumps(database))
        try:
            assert type(copy) is type(database) and copy.expire == 5.0
            copy[b"k"] = b"v"
            with copy.batch() as batch:  # a shared writer's batch, in one turn
                batch[b"b"] = b"w"
            database.refresh()  # the other writer's writes
            assert database[b"k"] == b"v" and database[b"b"] == b"w"
            clock[0] += 5000
            assert not {b"k", b"b"} & {key for key in database.keys() if key in database}
        finally:
            copy.close()


def test_each_kind_of_handle_has_one_class_made_on_the_plainer_kind(dbopen, dbpath):
    """Every open of a kind (shared or not, synced or not, expiring or not) gets one class,
    and a synced expiring class derives from the expiring one, which derives from the plain.

    Catches a look-up of the classes keyed by less than the whole kind
    (a synced handle given the unsynced class) and the chain built in
    another order (synced under expiring).
    """
    dbopen(dbpath, "c", expire=60).close()
    found = {}
    for flag in ("w", "ws", "wm", "wsu"):
        for expire in (None, 60):
            for _ in range(2):
                with dbopen(dbpath, flag, expire=expire) as database:
                    found.setdefault((flag, expire), set()).add(type(database))
    assert all(len(classes) == 1 for classes in found.values())
    kinds = {kind: classes.pop() for kind, classes in found.items()}
    assert len(set(kinds.values())) == len(kinds)
    for plain, synced in (("w", "ws"), ("wm", "wsu")):
        assert kinds[(plain, 60)].__bases__ == (kinds[(plain, None)],)
        assert kinds[(synced, 60)].__bases__ == (kinds[(plain, 60)],)
        assert kinds[(synced, None)].__bases__ == (kinds[(plain, None)],)


def test_a_synced_writer_with_a_lifetime(dbopen, dbpath, clock):
    """dbm.gnu's ``s`` and a lifetime together: each write synced, each value expiring."""
    with dbopen(dbpath, "cs", expire=1) as database:
        assert type(database).__name__.startswith("ExpiringSynced")
        database.update({b"a": b"1", b"b": b"2"})
        database[b"c"] = b"3"
        assert log_records(dbpath) == b"".join(
            expiring(key, value, START + 1000) for key, value in
            ((b"a", b"1"), (b"b", b"2"), (b"c", b"3")))
        clock[0] += 1000
        assert len([key for key in database.keys() if key in database]) == 0


def test_the_classes_are_the_module_s_names(dbopen, dbpath):
    """Each class with a lifetime is ``semidbm.db``'s, by the name it shows (and pickles by)."""
    with dbopen(dbpath, "cm", expire=1) as database:
        made = type(database)
        assert getattr(db, made.__name__) is made
        assert pickle.loads(pickle.dumps(made)) is made


def test_a_shelf_s_objects_expire(dbpath, clock):
    with semidbm.shelf.open_shelf(dbpath, "c", expire=3) as shelf:
        shelf["point"] = {"x": 1}
        assert shelf["point"] == {"x": 1}
        clock[0] += 3000
        assert "point" not in shelf


def test_update_takes_what_the_kernels_update_takes(dbopen, tmp_path, clock):
    """An object with ``keys()`` is read key by key, as the kernels' ``update`` reads it: a
    database's expired value is missing there, not stored again with a new lifetime (its
    ``items()`` still list it). Bad items are refused in the same words, and a closed handle
    refuses even an empty update. Caught by reading a mapping through ``items()``."""
    with dbopen(tmp_path / "source", "c", format=2) as source:
        source[b"live"] = b"L"
        source.set(b"dead", b"D", expire=1)
        clock[0] += 1000
        for lifetime in (None, 60):
            with dbopen(tmp_path / ("target%s" % lifetime), "c", format=2,
                        expire=lifetime) as target:
                with pytest.raises(KeyError):
                    target.update(source)
                with pytest.raises(ValueError) as raised:
                    target.update([(b"a", b"1", b"extra")])
                assert "element #0 has length 3" in str(raised.value)
                assert b"dead" not in target
        target = dbopen(tmp_path / "closed", "c", expire=60)
        target.close()
        with pytest.raises(semidbm.error, match="closed"):
            target.update()


def test_a_shared_writer_s_update_is_one_turn(dbopen, dbpath, clock):
    """As a shared writer's own ``update``: no other writer writes between its items. Caught
    by a turn per item: the other handle's write in the middle succeeds."""
    first = dbopen(dbpath, "cm", format=2, lock_timeout=0.05)
    with first, dbopen(dbpath, "wm", expire=60) as second:

        def items():
            yield b"a", b"1"
            with pytest.raises(semidbm.error, match="it would wait for itself"):
                first[b"z"] = b"1"  # this thread holds the turn, through second
            yield b"b", b"2"

        second.update(items())
        first.refresh()
        assert first[b"a"] == b"1" and first[b"b"] == b"2" and b"z" not in first


def test_a_batch_counts_the_expiry_records_as_it_is_filled(dbopen, dbpath, monkeypatch):
    """A change that would take the batch past its record's size is refused as it is made,
    expiry records counted, not at the commit, which would lose every change. Caught by
    counting the puts alone: the batch fills, and its commit fails."""
    monkeypatch.setattr(_batch, "CAPACITY", 100)
    with dbopen(dbpath, "c", expire=60) as database:
        batch = database.batch()
        batch[b"k1"] = b"v" * 10  # 24 bytes of put and 22 of expiry record
        batch[b"k2"] = b"v" * 10
        with pytest.raises(ValueError, match="holds at most"):
            batch[b"k3"] = b"v"
        batch.commit()
        assert sorted(database.keys()) == [b"k1", b"k2"]


def test_a_handle_pickled_before_lifetimes_opens_without_one(kernel, dbopen, dbpath):
    """A pickle of a shared writer from before ``open(expire=)`` names eight arguments."""
    with dbopen(dbpath, "cm") as database:
        database[b"k"] = b"v"
        arguments = database._arguments[:8]
    handle = db._reopen(_kernel.name_of(kernel), *arguments)
    try:
        assert handle.expire is None and handle[b"k"] == b"v"
    finally:
        handle.close()
