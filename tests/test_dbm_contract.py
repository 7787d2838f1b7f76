"""semidbm in place of the stdlib dbm modules: what code written for them relies on.

The checks follow what CPython's own test suites for ``dbm``, ``dbm.dumb``,
``dbm.gnu`` and ``dbm.ndbm`` look at (method names, return types,
exceptions, str and bytes, paths, closing), written afresh. The first test
runs one piece of dbm client code against the stdlib modules and semidbm
and compares what it observes.

The checks that hold for any database run on a sharded one too
(``any_open``: ``semidbm.open_sharded``, 3 shards); those that look at a
single database's files (its ``data``, its directory) use ``dbopen`` alone.
"""

import dbm
import errno
import os
import pickle

import pytest

import semidbm
from semidbm import sharded


@pytest.fixture(params=["single", "sharded"])
def any_open(request, kernel, dbopen):
    """What opens a database with the kernel under test: ``semidbm.open``, or
    ``semidbm.open_sharded`` (3 shards), called as code written for ``dbm.open`` calls it."""
    if request.param == "single":
        return dbopen

    def open_sharded(path, flag="r", mode=0o666, verify_checksums=False, **options):
        return sharded.open_sharded_with(
            kernel, path, flag, 3, mode, verify_checksums=verify_checksums, **options
        )

    return open_sharded


class BytesPath:
    """A path-like object whose ``__fspath__`` gives bytes."""

    def __init__(self, path):
        self.path = os.fsencode(path)

    def __fspath__(self):
        return self.path


def client_code(open_function, path):
    """Code written for the stdlib dbm interface; returns what it saw, in comparable form."""
    seen = []
    with open_function(path, "c") as db:
        seen.append(("empty keys", db.keys()))
        db[b"bytes"] = b"data"
        db["text \U0001f40d"] = "value \U0001f40d"
        db[b"empty"] = b""
        db[b"twice"] = b"first"
        db[b"twice"] = b"second"
        seen.append(("keys type", type(db.keys()).__name__))
        seen.append(("sorted keys", sorted(db.keys())))
        seen.append(("str key stored as", db[b"text \xf0\x9f\x90\x8d"]))
        seen.append(("in with str", "text \U0001f40d" in db, "missing" in db))
        seen.append(("empty value", db[b"empty"], db.get(b"empty"), b"empty" in db))
        seen.append(("get", db.get(b"bytes"), db.get(b"missing"), db.get(b"missing", b"d")))
        seen.append(("setdefault", db.setdefault(b"new", b"v"), db.setdefault(b"new", b"w")))
        seen.append(("len", len(db)))
        try:
            db[b"missing"]
        except KeyError as exc:
            seen.append(("missing key", type(exc).__name__, exc.args))
        del db[b"new"]
        seen.append(("after del", b"new" in db, len(db)))
        seen.append(("twice", db[b"twice"]))
    with open_function(path, "r") as db:
        seen.append(("reopened", sorted((key, db[key]) for key in db.keys())))
        try:
            db[b"x"] = b"y"
        except dbm.error as exc:
            seen.append(("write to read-only", "caught by dbm.error", isinstance(exc, OSError)))
    try:
        db.keys()
    except dbm.error as exc:
        seen.append(("keys after close", "caught by dbm.error", isinstance(exc, OSError)))
    with open_function(path, "n") as db:
        seen.append(("n empties", db.keys()))
    return seen


@pytest.mark.parametrize("name", ["dbm.dumb", "dbm.gnu"])
def test_client_code_sees_the_same_as_with_the_stdlib(name, any_open, tmp_path):
    # dbm.gnu comes with Debian's python3-gdbm (the nox sessions install it).
    module = pytest.importorskip(
        name, reason="this Python has no %s (Debian's own has it with python3-gdbm)" % name
    )
    expected = client_code(module.open, str(tmp_path / "stdlib"))
    assert client_code(any_open, str(tmp_path / "semidbm")) == expected


def test_error_is_an_oserror_naming_the_missing_database(any_open, dbpath):
    assert issubclass(semidbm.error, OSError)
    with pytest.raises(semidbm.error) as caught:
        any_open(dbpath, "r")
    assert caught.value.errno == 2
    assert caught.value.filename == str(dbpath)


@pytest.mark.parametrize(
    "convert",
    [str, os.fsencode, lambda path: path, BytesPath],
    ids=["str", "bytes", "path", "bytes-path"],
)
def test_every_kind_of_path(any_open, dbpath, convert):
    with any_open(convert(dbpath), "c") as db:
        db[b"k"] = b"v"
    with any_open(convert(dbpath), "r") as db:
        assert db[b"k"] == b"v"


def test_non_ascii_path(any_open, tmp_path):
    path = tmp_path / "d\u00e9j\u00e0 vu \U0001f40d"
    with any_open(path, "c") as db:
        db[b"key"] = b"value"
    assert path.is_dir()
    with any_open(path, "r") as db:
        assert db.keys() == [b"key"]


def test_n_replaces_an_empty_file(dbopen, dbpath):
    dbpath.write_bytes(b"")
    with dbopen(dbpath, "n") as db:
        assert len(db) == 0


def test_reader_on_a_read_only_directory_writes_nothing(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"k"] = b"v"
    os.remove(dbpath / "lock")  # as semidbm 0.5.1 left its databases
    os.chmod(dbpath / "data", 0o400)
    os.chmod(dbpath, 0o500)
    try:
        with dbopen(dbpath, "r") as db:
            assert dict(db.items()) == {b"k": b"v"}
            db.sync()
        assert os.listdir(dbpath) == ["data"]
    finally:
        os.chmod(dbpath, 0o700)


def test_every_operation_on_a_closed_database_raises_error(any_open, dbpath):
    db = any_open(dbpath, "c")
    db[b"k"] = b"v"
    db.close()
    for operation in [
        lambda: db[b"k"],
        lambda: db.__setitem__(b"k", b"v"),
        lambda: db.__delitem__(b"k"),
        lambda: b"k" in db,
        lambda: len(db),
        db.keys,
        db.items,
        db.values,
        lambda: list(db),
        lambda: db.get(b"k"),
        lambda: db.setdefault(b"k", b"v"),
        db.sync,
        db.firstkey,
        lambda: db.nextkey(b"k"),
        db.reorganize,
    ]:
        with pytest.raises(semidbm.error, match="closed"):
            operation()


def test_clear_empties_and_stays_empty(any_open, dbpath):
    with any_open(dbpath, "c") as db:
        db.update({b"a": b"b", b"12345678910": b"019237410982340912840198242"})
        db.clear()
        assert len(db) == 0 and b"a" not in db
    with any_open(dbpath, "r") as db:
        assert db.keys() == []


# --- dbm.gnu's extras: firstkey, nextkey, reorganize, sync ---


def firstkey_pass(db):
    keys = []
    key = db.firstkey()
    while key is not None:
        keys.append(key)
        key = db.nextkey(key)
    return keys


def test_firstkey_nextkey_visit_every_key_once_in_iteration_order(any_open, dbpath):
    with any_open(dbpath, "c") as db:
        for number in range(200):
            db[b"key %d" % number] = b"v"
        assert firstkey_pass(db) == list(db)
        assert sorted(firstkey_pass(db)) == sorted(b"key %d" % number for number in range(200))


def test_walk_of_an_empty_database(any_open, dbpath):
    with any_open(dbpath, "c") as db:
        assert db.firstkey() is None
        db[b"only"] = b"v"
        assert db.firstkey() == b"only"
        assert db.nextkey(b"only") is None


def test_nextkey_of_an_unknown_key_is_none(any_open, dbpath):
    with any_open(dbpath, "c") as db:
        db[b"a"] = b"1"
        db.firstkey()
        assert db.nextkey(b"missing") is None


def test_nextkey_takes_str_and_works_without_firstkey(any_open, dbpath):
    with any_open(dbpath, "c") as db:
        db.update({"a": "1", "b": "2", "c": "3"})
        order = list(db)
        assert db.nextkey(order[0].decode()) == order[1]
        assert db.nextkey(bytearray(order[1])) == order[2]


def test_walk_survives_deleting_the_keys_it_visits(any_open, dbpath):
    with any_open(dbpath, "c") as db:
        for number in range(100):
            db[b"%d" % number] = b"v"
        visited = []
        key = db.firstkey()
        while key is not None:
            visited.append(key)
            del db[key]
            key = db.nextkey(key)
        assert len(visited) == 100 and len(set(visited)) == 100
        assert len(db) == 0


def test_walk_skips_keys_deleted_ahead_and_not_keys_added(any_open, dbpath):
    with any_open(dbpath, "c") as db:
        for number in range(10):
            db[b"%d" % number] = b"v"
        order = list(db)
        visited = [db.firstkey()]
        del db[order[1]]
        db[b"added"] = b"v"
        key = db.nextkey(visited[0])
        while key is not None:
            visited.append(key)
            key = db.nextkey(key)
        assert visited == [order[0]] + order[2:]
        assert b"added" in firstkey_pass(db)


def test_reorganize_shrinks_the_file_after_deletes(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db.sync()
        size0 = os.path.getsize(dbpath / "data")
        db[b"x"] = b"x" * 10000
        db.sync()
        size1 = os.path.getsize(dbpath / "data")
        del db[b"x"]
        db.reorganize()
        size2 = os.path.getsize(dbpath / "data")
        assert size0 <= size2 < size1
        assert len(db) == 0


def test_reorganize_keeps_the_content(any_open, dbpath):
    with any_open(dbpath, "c") as db:
        for number in range(50):
            db[b"%d" % number] = b"old"
            db[b"%d" % number] = b"new %d" % number
        before = sorted(db.items())
        db.reorganize()
        assert sorted(db.items()) == before


def test_reader_cannot_reorganize_but_can_sync(any_open, dbpath):
    with any_open(dbpath, "c") as db:
        db[b"k"] = b"v"
    with any_open(dbpath, "r") as db:
        db.sync()
        with pytest.raises(semidbm.error, match="read-only"):
            db.reorganize()


# --- dbm.gnu's flag letters (CPython's test_dbm_gnu: test_flags, test_error_conditions) ---


def test_every_flag_and_every_dbm_gnu_letter_after_it_opens(dbopen, dbpath):
    for first in "cnrw":  # "c" first: it creates the database the others open
        dbopen(dbpath, first).close()
    for first in "cnrw":
        for letter in "fsu":
            if first + letter == "nu":
                continue  # refused: the test below
            database = dbopen(dbpath, first + letter)
            assert database.writable == (first != "r")
            database.close()


def test_nu_and_letters_dbm_gnu_lacks_are_refused(dbopen, dbpath):
    # A shared writer never empties a database, so 'u' after 'n' has no meaning to take.
    with pytest.raises(ValueError, match="'nu': semidbm reads dbm.gnu's 'u' .*'wm' or 'cm'"):
        dbopen(dbpath, "nu")
    for flag in ("rx", "cfx", "c ", "fc", "cms"):  # "m" is semidbm's own, and takes no letters
        with pytest.raises(ValueError, match="dbm.gnu's letters f, s and u"):
            dbopen(dbpath, flag)
    assert not dbpath.exists()


def test_u_opens_a_shared_writer_and_f_an_exclusive_one(dbopen, dbpath):
    """Each as its letter says, and the refusals that name shared writers' flags name 'u'.

    Catches a refusal naming only 'wm' or 'cm', flags that code written
    for dbm.gnu never used.
    """
    with dbopen(dbpath, "cu") as first, dbopen(dbpath, "wu") as second:
        first[b"a"] = b"1"
        second.refresh()
        assert second[b"a"] == b"1"  # two writers at once: shared, each in its turn
        with dbopen(dbpath, "ru") as reader:
            assert reader[b"a"] == b"1" and not reader.writable
        # The refusal names the letters these writers were opened with, not semidbm's alone.
        with pytest.raises(semidbm.error, match="open by shared writers .*dbm.gnu's 'wu' or 'cu'"):
            dbopen(dbpath, "w")
    with dbopen(dbpath, "wf") as writer:
        with pytest.raises(semidbm.error, match="locked by another writer"):
            dbopen(dbpath, "wf")
        with pytest.raises(TypeError, match="open a shared writer .*dbm.gnu's 'wu' or 'cu'"):
            pickle.dumps(writer)


def fsynced_data(monkeypatch, dbpath):
    """A list to which every fsync of ``dbpath``'s data file adds one entry, from now on."""
    calls, real_fsync = [], os.fsync

    def counting_fsync(fd):
        if os.path.samestat(os.fstat(fd), os.stat(dbpath / "data")):
            calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    return calls


def _committed_batch(db):
    batch = db.batch()
    batch[b"d"] = b"4"
    batch.commit()


#: Each way a database is written, in an order in which each finds the keys it needs.
WRITES = {
    "set": lambda db: db.__setitem__(b"k", b"v"),
    "delete": lambda db: db.__delitem__(b"k"),
    "update": lambda db: db.update({b"a": b"1", b"b": b"2"}),
    "pop": lambda db: db.pop(b"a"),
    "setdefault": lambda db: db.setdefault(b"c", b"3"),
    "delete_many": lambda db: db.delete_many([b"b", b"c"]),
    "batch": _committed_batch,
}


@pytest.mark.parametrize("flag", ["cs", "csu"])
def test_s_makes_every_write_durable_before_it_returns(dbopen, dbpath, monkeypatch, flag):
    database = dbopen(dbpath, flag, format=2)
    with database:
        fsyncs = fsynced_data(monkeypatch, dbpath)
        for name, write in WRITES.items():
            size, count = os.path.getsize(dbpath / "data"), len(fsyncs)
            write(database)
            # In the file and fsynced: without 's', the record would wait in the write buffer.
            assert os.path.getsize(dbpath / "data") > size, name
            assert len(fsyncs) > count, name
        if flag == "csu":  # a shared writer pickles, and its copy syncs every write too
            copy = pickle.loads(pickle.dumps(database))
            count = len(fsyncs)
            copy[b"e"] = b"5"
            assert len(fsyncs) > count
            copy.close()


def test_s_syncs_once_per_bulk_write(dbopen, dbpath, monkeypatch):
    """``update``, ``clear`` and ``pop`` each sync the data file once, on both kernels.

    The pure-Python kernel's update sets each item through the
    database's ``__setitem__``, and ``clear`` deletes each key through
    ``__delitem__``, both synced under ``s``: without the synced class's
    check of a write inside another, they synced once per item (and the
    update once more).
    """
    with dbopen(dbpath, "cs") as database:
        fsyncs = fsynced_data(monkeypatch, dbpath)
        database.update({b"a": b"1", b"b": b"2", b"c": b"3"})
        assert len(fsyncs) == 1
        database.pop(b"a")
        assert len(fsyncs) == 2
        database.clear()
        assert len(fsyncs) == 3 and len(database) == 0


def failing_fsync(monkeypatch, dbpath):
    """Make every fsync of ``dbpath``'s data file fail (EIO) from now on, as a failing disk."""
    real_fsync = os.fsync

    def fsync(fd):
        if os.path.samestat(os.fstat(fd), os.stat(dbpath / "data")):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_s_with_a_failing_sync_says_the_write_was_made(dbopen, dbpath, monkeypatch):
    """The error of a write whose sync failed says what it changed is in the database and may
    not be on the disk (no promise that a later sync saves it), and carries its result.

    Catches the synced class raising the sync's bare error ("cannot
    sync"), which reads as if nothing was written, and ``pop`` losing the
    value of the key it deleted (``DBMNotSyncedError.result``).
    """
    with dbopen(dbpath, "cs") as database:
        database[b"a"] = b"1"
        failing_fsync(monkeypatch, dbpath)
        with pytest.raises(semidbm.DBMNotSyncedError, match="cannot sync .*; what the write "
                           "changed, if anything, is in the database.*may not be on the "
                           "disk.*cannot be trusted") as failed:
            database[b"k"] = b"v"
        assert failed.value.errno == errno.EIO and failed.value.result is None
        assert database[b"k"] == b"v"
        with pytest.raises(semidbm.DBMNotSyncedError) as failed:
            database.pop(b"a")
        assert failed.value.result == b"1" and b"a" not in database
        monkeypatch.undo()
    with dbopen(dbpath) as database:
        assert dict(database.items()) == {b"k": b"v"}


def test_s_a_batch_whose_sync_failed_is_committed_not_synced(dbopen, dbpath, monkeypatch):
    """Its rollback raises, as a committed batch's does: its changes are in the database.

    Catches a batch left as "its commit failed", on which a rollback
    does nothing and tells cleanup code that nothing was written.
    """
    with dbopen(dbpath, "cs", format=2) as database:
        batch = database.batch()
        batch[b"k"] = b"v"
        failing_fsync(monkeypatch, dbpath)
        with pytest.raises(semidbm.DBMNotSyncedError):
            batch.commit()
        with pytest.raises(semidbm.error, match="it was committed"):
            batch.rollback()
        with pytest.raises(semidbm.error, match=r"batch is over \(committed, not synced\)"):
            batch.commit()
        assert database[b"k"] == b"v"
        monkeypatch.undo()


def test_f_leaves_writes_buffered_as_the_default_does(dbopen, dbpath, monkeypatch):
    with dbopen(dbpath, "cf") as database:
        database.sync()
        size = os.path.getsize(dbpath / "data")
        fsyncs = fsynced_data(monkeypatch, dbpath)
        database[b"k"] = b"v"
        assert (os.path.getsize(dbpath / "data"), fsyncs) == (size, [])


# --- code written for semidbm 0.5.1 ---


def test_code_written_for_semidbm_051_runs_unchanged(dbopen, dbpath):
    db = dbopen(
        str(dbpath), "c", 0o666, True
    )  # verify_checksums as 0.5.1 took it: fourth, positional
    db[b"key"] = b"value"
    db[b"other"] = b"x"
    del db[b"other"]
    assert list(db.keys()) == [b"key"] and db.values() == [b"value"]
    assert b"key" in db and list(db) == [b"key"]
    db.sync()
    db.compact()
    db.close(compact=True)
    with open(dbpath / "data", "r+b") as data:
        data.seek(-6, os.SEEK_END)  # inside the value
        data.write(b"V")
    db = dbopen(str(dbpath), "r", 0o666, True)
    with pytest.raises(semidbm.DBMChecksumError):
        db[b"key"]
    db.close()
