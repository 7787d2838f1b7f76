"""Atomic batches and format 2.0 (docs/FORMAT.md, "Batches"; ``Database.batch``).

What a batch does on both kernels; the format a database is created in,
upgraded to and compacted into; the batch record's bytes, built here
independently of semidbm; what the replay does with a batch that is cut,
damaged or malformed; a reader that refreshes while batches are written;
the command's ``upgrade``; and the crash and power-loss harnesses on
batches, each shown to catch batches that are not atomic.
"""

import gc
import os
import random
import shutil
import struct
import subprocess
import sys
import textwrap
import threading
import warnings
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semidbm
from semidbm import _batch, _examine, _kernel, _pure, _records, cli, db
from semidbm._settings import DEFAULT_BUFFER_SIZE

from .conftest import IMPLEMENTATIONS, kernel_name
from .harness import crash, powerloss
from .support import records as records_support
from .support.log import log_start, records_after_start
from .support.power_loss import needs_fuse, remove_scratch
from .support.records import delete_record, put_record

HEADER_1_1 = b"SEMI" + struct.pack("!HH", 1, 1)
HEADER_2_0 = b"SEMI" + struct.pack("!HH", 2, 0)
#: The header of the format 2 files semidbm writes: 2.1.
HEADER_2 = b"SEMI" + struct.pack("!HH", 2, 1)
posix_only = pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")


def batch_record(*records):
    """A batch record of ``records``, as FORMAT.md lays it out: lengths, the body's CRC, body."""
    body = b"".join(records)
    return struct.pack("!iiI", len(body), -2, zlib.crc32(body)) + body


def write_data(path, *records, header=HEADER_2_0):
    """A database at ``path`` whose data file holds ``records``: of format 2.0 unless told."""
    records_support.write_data(path, *records, header=header)


# --- what a batch does ---


def test_a_batch_commits_its_changes_together(dbopen, dbpath):
    with dbopen(dbpath, "c", format=2) as database:
        database.update({b"a": b"1", b"b": b"2", b"c": b"3"})
        with database.batch() as batch:
            batch[b"a"] = b"10"
            del batch[b"b"]
            batch.update({"d": "4"}, e=b"5")
            batch[b"c"] = bytearray(b"30")
            assert len(batch) == 5
            # Nothing reaches the database before the block ends.
            assert dict(database.items()) == {b"a": b"1", b"b": b"2", b"c": b"3"}
        expected = {b"a": b"10", b"c": b"30", b"d": b"4", b"e": b"5"}
        assert dict(database.items()) == expected
    with dbopen(dbpath) as database:
        assert dict(database.items()) == expected


class KeysOnly:
    """Not a Mapping, but has keys() and item access: update looks each key up."""

    def keys(self):
        return [b"x", "y"]

    def __getitem__(self, key):
        return b"value of %r" % (key,)


def test_a_batch_updates_as_mutable_mappings_do(dbopen, dbpath):
    with dbopen(dbpath, "c", format=2) as database:
        with database.batch() as batch:
            batch.update(KeysOnly())
            batch.update([(b"p", b"1"), ("q", "2")], r=b"3")
        assert dict(database.items()) == {
            b"x": b"value of b'x'", b"y": b"value of 'y'", b"p": b"1", b"q": b"2", b"r": b"3"}


def test_an_exception_discards_the_batch_and_writes_nothing(dbopen, dbpath):
    with dbopen(dbpath, "c", format=2) as database:
        database[b"a"] = b"1"
        database.sync()
        size = os.path.getsize(database.path)
        with pytest.raises(RuntimeError), database.batch() as batch:
            batch[b"a"] = b"2"
            del batch[b"a"]
            raise RuntimeError
        assert dict(database.items()) == {b"a": b"1"}
        database.sync()
        assert os.path.getsize(database.path) == size
        with database.batch():
            pass  # an empty batch writes nothing
        database.sync()
        assert os.path.getsize(database.path) == size


def test_deleting_in_a_batch_needs_a_live_key(dbopen, dbpath):
    with dbopen(dbpath, "c", format=2) as database:
        database[b"there"] = b"1"
        with database.batch() as batch:
            with pytest.raises(KeyError, match="missing"):
                del batch["missing"]
            batch[b"new"] = b"2"
            del batch[b"new"]  # set by the batch itself
            del batch[b"there"]
            with pytest.raises(KeyError):
                del batch[b"there"]  # deleted by the batch already
        assert dict(database.items()) == {}
        database.sync()
        # No record deletes a key that was not there (b"new" never reached the file).
    assert b"new" not in (dbpath / "data").read_bytes()


def test_a_batch_checks_what_it_is_given(dbopen, dbpath, monkeypatch):
    with dbopen(dbpath, "c", format=2) as database:
        with database.batch() as batch:
            with pytest.raises(TypeError, match="int"):
                batch[1] = b"x"
            with pytest.raises(TypeError, match="NoneType"):
                batch[b"k"] = None
            monkeypatch.setattr(_batch, "CAPACITY", 100)
            batch[b"k"] = b"v" * 50
            with pytest.raises(ValueError, match="at most"):
                batch[b"l"] = b"v" * 50
            batch[b"k"] = b"w" * 70  # replaces the change of k: the batch does not grow by it
        assert dict(database.items()) == {b"k": b"w" * 70}


def test_a_batch_is_over_after_its_block(dbopen, dbpath):
    with dbopen(dbpath, "c", format=2) as database:
        with database.batch() as batch:
            batch[b"a"] = b"1"
        for use in (lambda: batch.__setitem__(b"b", b"2"), lambda: batch.__delitem__(b"a"),
                    lambda: batch.__enter__()):
            with pytest.raises(semidbm.error, match="over"):
                use()
        assert dict(database.items()) == {b"a": b"1"}


def test_commit_and_rollback_end_a_batch_without_a_block(dbopen, dbpath):
    with dbopen(dbpath, "c", format=2) as database:
        database[b"a"] = b"1"
        batch = database.batch()
        batch[b"a"] = b"2"
        batch[b"b"] = b"3"
        assert dict(database.items()) == {b"a": b"1"}
        batch.commit()
        assert dict(database.items()) == {b"a": b"2", b"b": b"3"}
        database.sync()
        size = os.path.getsize(database.path)
        discarded = database.batch()
        discarded[b"a"] = b"never"
        del discarded[b"b"]
        discarded.rollback()
        database.sync()
        assert os.path.getsize(database.path) == size, "a rollback writes nothing"
    with dbopen(dbpath) as database:
        assert dict(database.items()) == {b"a": b"2", b"b": b"3"}


def ended(database, how):
    """A batch of ``database`` that changed b"a" and then ended ``how``."""
    batch = database.batch()
    batch[b"a"] = b"from the batch"
    getattr(batch, how)()
    return batch


def test_a_batch_ends_once(dbopen, dbpath):
    with dbopen(dbpath, "c", format=2) as database:
        committed = ended(database, "commit")
        for again in (committed.commit, lambda: committed.__setitem__(b"b", b"1"),
                      lambda: committed.__delitem__(b"a"), committed.__enter__):
            with pytest.raises(semidbm.error, match="batch is over \\(committed\\)"):
                again()
        with pytest.raises(semidbm.error, match="cannot roll back .* it was committed"):
            committed.rollback()
        rolled_back = ended(database, "rollback")
        rolled_back.rollback()  # again: nothing to do, as cleanup code may call it
        with pytest.raises(semidbm.error, match="batch is over \\(rolled back\\)"):
            rolled_back.commit()
        assert database[b"a"] == b"from the batch"  # committed once, rolled back never


@pytest.mark.parametrize("how", ["commit", "rollback"])
def test_a_block_leaves_a_batch_ended_inside_it_as_it_is(dbopen, dbpath, how):
    with dbopen(dbpath, "c", format=2) as database:
        with database.batch() as batch:
            batch[b"a"] = b"1"
            getattr(batch, how)()
        assert dict(database.items()) == ({b"a": b"1"} if how == "commit" else {})
        with pytest.raises(RuntimeError), database.batch() as batch:
            batch[b"b"] = b"2"
            getattr(batch, how)()
            raise RuntimeError  # a committed batch stays committed: the block cannot undo it
        assert (b"b" in database) == (how == "commit")


def test_a_failed_commit_discards_the_changes(dbopen, dbpath):
    database = dbopen(dbpath, "c", format=2)
    batch = database.batch()
    batch[b"a"] = b"1"
    database.close()
    with pytest.raises(semidbm.error, match="closed"):
        batch.commit()
    batch.rollback()  # nothing left to roll back: no error
    with pytest.raises(semidbm.error, match="over \\(its commit failed"):
        batch.commit()
    with dbopen(dbpath) as reader:
        assert b"a" not in reader


def collected_warnings(make_and_drop):
    """The ResourceWarnings raised while ``make_and_drop()`` runs and the collector collects."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_and_drop()
        gc.collect()
    return [warning for warning in caught if issubclass(warning.category, ResourceWarning)]


def test_a_batch_collected_with_changes_it_never_ended_warns(dbopen, dbpath):
    with dbopen(dbpath, "c", format=2) as database:

        def forgotten():
            batch = database.batch()
            batch[b"x"] = b"1"
            del batch[b"x"]  # one key changed, whatever its last change is

        (warning,) = collected_warnings(forgotten)
        assert "a semidbm batch changing 1 key(s) was never committed" in str(warning.message)
        assert warning.filename == __file__, "the warning points at the test, not at semidbm"
        # Collected in another thread: the warning only, the database untouched.
        thread = threading.Thread(target=forgotten)
        assert len(collected_warnings(lambda: (thread.start(), thread.join()))) == 1
        # Nothing is lost: an empty batch, and batches that ended, are collected silently.
        quiet = [database.batch, lambda: ended(database, "commit"),
                 lambda: ended(database, "rollback")]
        for make in quiet:
            assert collected_warnings(make) == []
        assert dict(database.items()) == {b"a": b"from the batch"}


def test_a_shared_writer_s_batch_commits_without_a_block(dbopen, dbpath):
    # Without a block, the batch takes no turn until it commits: the commit takes one of
    # its own, and writes the batch whole.
    with dbopen(dbpath, "cm", format=2, lock_timeout=0.05) as first, dbopen(dbpath, "wm") as second:
        batch = second.batch()
        batch[b"a"] = b"1"
        batch[b"b"] = b"2"
        first[b"c"] = b"3"  # no turn is held while the batch fills
        batch.commit()
        first.refresh()
        assert dict(first.items()) == {b"a": b"1", b"b": b"2", b"c": b"3"}
        with second.batch() as batch:
            batch[b"a"] = b"10"
            batch.commit()  # in the block's turn
            with pytest.raises(semidbm.error, match="wait for itself"):
                first[b"z"] = b"1"  # the block still holds the turn after the commit
        first[b"after"] = b"1"  # the block ended its turn
        assert first[b"a"] == b"10"


def test_a_batch_needs_an_open_writable_database_of_format_2(dbopen, dbpath, tmp_path):
    with dbopen(dbpath, "c") as database:
        with pytest.raises(semidbm.error) as info:
            database.batch()
        assert "format 1.1" in str(info.value)
        assert "compact(format=2)" in str(info.value)
        assert "semidbm upgrade" in str(info.value)
        with pytest.raises(semidbm.error, match="format 1.1"):
            database._commit_batch({b"a": b"1"})  # the kernel refuses it too
    other = tmp_path / "v2.db"
    dbopen(other, "c", format=2).close()
    with dbopen(other, "r") as database, pytest.raises(semidbm.error, match="read-only"):
        database.batch()
    database = dbopen(other, "w")
    batch = database.batch()
    database.close()
    with pytest.raises(semidbm.error, match="closed"):
        database.batch()
    with pytest.raises(semidbm.error, match="closed"), batch:
        batch[b"a"] = b"1"


def test_an_empty_batch_commit_on_a_closed_database_raises(dbopen, dbpath):
    """Refused as one with changes is, though it has nothing to write.

    Catches a commit that skips the kernel when the batch is empty:
    it succeeded on a closed database, where the docstring says a commit
    raises.
    """
    database = dbopen(dbpath, "c", format=2)
    batch = database.batch()
    database.close()
    with pytest.raises(semidbm.error, match="closed"):
        batch.commit()


def test_the_kernels_write_the_same_bytes(tmp_path):
    data = {}
    for name in IMPLEMENTATIONS:
        path = tmp_path / name
        with db.open_with(_kernel.load(name), path, "c", format=2) as database:
            database[b"a"] = b"1"
            with database.batch() as batch:
                batch[b"a"] = b"2"
                batch[b""] = b""
                batch[b"big"] = b"x" * 3_000_000  # larger than the buffer: written straight
            with database.batch() as batch:
                del batch[b"a"]
                batch[b"b"] = b"3"
        data[name] = records_after_start((path / "data").read_bytes(), HEADER_2)
    assert len(set(data.values())) == 1, "the same records after each log's own id"


def test_the_batch_record_is_as_the_format_says(dbopen, dbpath):
    with dbopen(dbpath, "c", format=2) as database:
        database[b"a"] = b"1"
        with database.batch() as batch:
            batch[b"b"] = b"2"
            del batch[b"a"]
            batch[b""] = b""
    expected = put_record(b"a", b"1") + batch_record(
        put_record(b"b", b"2"), delete_record(b"a"), put_record(b"", b""))
    assert records_after_start((dbpath / "data").read_bytes(), HEADER_2) == expected


def test_a_batch_independently_built_is_read(dbopen, dbpath):
    write_data(dbpath, put_record(b"a", b"1"), batch_record(
        put_record(b"b", b"2"), delete_record(b"a"), delete_record(b"never there"),
        put_record(b"b", b"3")), put_record(b"c", b"4"))
    with dbopen(dbpath) as database:
        assert dict(database.items()) == {b"b": b"3", b"c": b"4"}


# --- batch records encoded beforehand (``Store._commit_encoded``, for semidbm.dask) ---


def test_an_encoded_batch_is_appended_whole_and_read_by_both_kernels(dbopen, dbpath):
    record = batch_record(put_record(b"a", b"1"), put_record(b"b", b"2"), put_record(b"a", b"3"))
    with dbopen(dbpath, "c", format=2) as database:
        database[b"c"] = b"0"
        database._commit_encoded(record)
        assert dict(database.items()) == {b"a": b"3", b"b": b"2", b"c": b"0"}  # in order
    assert records_after_start((dbpath / "data").read_bytes(), HEADER_2) == (
        put_record(b"c", b"0") + record)
    for name in IMPLEMENTATIONS:
        with db.open_with(_kernel.load(name), dbpath) as reader:
            assert dict(reader.items()) == {b"a": b"3", b"b": b"2", b"c": b"0"}


def spoiled(record, at, byte):
    """``record`` with the byte at ``at`` replaced by ``byte``."""
    return record[:at] + bytes([byte]) + record[at + 1:]


def with_body_crc(record):
    """``record`` with its head's body checksum made to match its body again."""
    return record[:8] + struct.pack("!I", zlib.crc32(record[12:])) + record[12:]


GOOD = batch_record(put_record(b"key", b"value"), put_record(b"k2", b"v2"))


@pytest.mark.parametrize("record", [
    b"",
    GOOD[:11],  # shorter than a head
    GOOD[:-1],  # the body shorter than the head says
    GOOD + b"\0",  # longer
    spoiled(GOOD, 7, 0xFD),  # not a batch's value length (-3)
    spoiled(GOOD, 20, ord("K")),  # the body's checksum fails
    with_body_crc(spoiled(GOOD, 20, ord("K"))),  # a record's checksum fails
    with_body_crc(spoiled(GOOD, 15, 50)),  # a record's length runs past the body
    batch_record(put_record(b"a", b"1"), delete_record(b"a")),  # a delete
    batch_record(batch_record(put_record(b"a", b"1"))),  # a batch in a batch
    struct.pack("!iiI", 0, -2, 0),  # an empty body
], ids=["empty", "short head", "short body", "long", "kind", "body crc", "record crc",
        "record length", "delete", "nested", "empty body"])
def test_an_encoded_batch_that_is_not_sound_puts_is_refused(dbopen, dbpath, record):
    with dbopen(dbpath, "c", format=2) as database:
        database[b"a"] = b"1"
        with pytest.raises(ValueError, match="not a semidbm batch record of puts"):
            database._commit_encoded(record)
        database._commit_encoded(GOOD)  # and the database goes on
        assert dict(database.items()) == {b"a": b"1", b"key": b"value", b"k2": b"v2"}
    assert records_after_start((dbpath / "data").read_bytes(), HEADER_2).startswith(
        put_record(b"a", b"1") + GOOD)  # nothing of the refused one in between


def test_an_encoded_batch_needs_a_writable_database_of_format_2(dbopen, dbpath, tmp_path):
    with dbopen(dbpath, "c") as database:
        with pytest.raises(semidbm.error, match="format 1.1"):
            database._commit_encoded(GOOD)
    dbopen(tmp_path / "v2", "c", format=2).close()
    with dbopen(tmp_path / "v2", "r") as reader, pytest.raises(semidbm.error, match="read-only"):
        reader._commit_encoded(GOOD)
    with dbopen(tmp_path / "v2", "c") as database:
        for wrong in (bytearray(GOOD), None, GOOD.decode("latin-1"), Sub(GOOD)):
            with pytest.raises(TypeError):
                database._commit_encoded(wrong)
        # Exactly bytes: a subclass's __hash__ or __eq__ could change the dict mid-commit.
        for wrong in (None, [(b"a", b"1")], Changing({b"a": b"1"}), {Sub(b"a"): b"1"},
                      {b"a": Sub(b"1")}, {b"a": bytearray(b"1")}, {"a": b"1"}):
            with pytest.raises(TypeError):
                database._commit_batch(wrong)
        assert len(database) == 0


class Sub(bytes):
    """Bytes of a subclass, which the kernels' private batch calls refuse."""


class Changing(dict):
    """A dict of a subclass, which the kernels' private batch calls refuse."""


def apply(target, changes, model):
    """Make ``changes`` (``(key, value or None)``) on ``target`` (a database or a batch) and
    on the dict ``model``; a delete of a key the model lacks is left out."""
    for key, value in changes:
        if value is not None:
            target[key] = model[key] = value
        elif key in model:
            del target[key]
            del model[key]


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(st.tuples(
    st.booleans(), st.lists(st.tuples(st.sampled_from([b"", b"a", b"b", b"c" * 300]),
                                      st.one_of(st.none(), st.binary(max_size=20))),
                            max_size=6)),
    max_size=8))
def test_batches_and_single_writes_match_a_dict(tmp_path_factory, steps):
    for name in IMPLEMENTATIONS:
        path = tmp_path_factory.mktemp(name) / "db"
        kernel = _kernel.load(name)
        model = {}
        with db.open_with(kernel, path, "c", format=2, buffer_size=64) as database:
            for batched, changes in steps:
                if batched:
                    with database.batch() as batch:
                        apply(batch, changes, model)
                else:
                    apply(database, changes, model)
                assert dict(database.items()) == model
        with db.open_with(kernel, path) as database:
            assert dict(database.items()) == model


def test_a_batch_deleting_keys_another_thread_deletes(dbopen, dbpath):
    # A batch's commit runs whole before any other thread's write (the GIL is
    # not released): a thread deleting a key the batch deletes cannot make it
    # write a delete of a missing key.
    with dbopen(dbpath, "c", format=2) as database:
        for key in range(200):
            database[b"%d" % key] = b"v"
        stop = threading.Event()

        def deleter():
            for key in range(200):
                database.pop(b"%d" % key, None)
            stop.set()

        thread = threading.Thread(target=deleter)
        thread.start()
        while not stop.is_set():
            try:
                with database.batch() as batch:
                    for key in random.sample(range(200), 20):
                        if b"%d" % key in database:
                            del batch[b"%d" % key]
            except KeyError:
                pass  # gone between the check and the delete: the batch is discarded
        thread.join()
        assert dict(database.items()) == {}
    with dbopen(dbpath) as database:
        assert dict(database.items()) == {}


def test_a_view_of_a_value_a_batch_wrote(dbopen, dbpath):
    with dbopen(dbpath, "c", format=2, buffer_size=0) as database:
        with database.batch() as batch:
            batch[b"a"] = b"x" * 5000
            batch[b"b"] = b"y"
        with database.view(b"a") as view:
            assert view == b"x" * 5000 and view.readonly


# --- the format: choosing it, upgrading, compacting ---


def test_the_format_of_a_new_database(dbopen, tmp_path):
    with dbopen(tmp_path / "default", "c") as database:
        assert database.format_version == (1, 1)
    assert records_after_start((tmp_path / "default" / "data").read_bytes(), HEADER_1_1) == b""
    with dbopen(tmp_path / "two", "c", format=2) as database:
        assert database.format_version == (2, 1)
    assert records_after_start((tmp_path / "two" / "data").read_bytes(), HEADER_2) == b""
    with dbopen(tmp_path / "two", "n", format=1) as database:
        assert database.format_version == (1, 1)
    with dbopen(tmp_path / "two", "r") as database:
        assert database.format_version == (1, 1)


def test_a_bad_format_is_refused_before_the_disk_is_touched(dbopen, dbpath):
    for bad, error in ((3, ValueError), (0, ValueError), ("2", TypeError), (True, TypeError),
                       (2.0, TypeError)):
        with pytest.raises(error, match="format must be 1 or 2"):
            dbopen(dbpath, "c", format=bad)
        assert not dbpath.exists()
    dbopen(dbpath, "c").close()
    with dbopen(dbpath, "w") as database, pytest.raises(ValueError, match="format must be"):
        database.compact(format=3)


def test_opening_an_existing_database_with_another_format_is_refused(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
    start = log_start((dbpath / "data").read_bytes(), HEADER_1_1)
    for flag in "rwc":
        with pytest.raises(semidbm.error) as info:
            dbopen(dbpath, flag, format=2)
        assert "format 1.1, not 2" in str(info.value)
        assert "compact(format=)" in str(info.value)
    # Refused before the store opens: a torn tail stays, not cut as a writer cuts it.
    with open(dbpath / "data", "ab") as stream:
        stream.write(b"torn")
    with pytest.raises(semidbm.error, match="format 1.1, not 2"):
        dbopen(dbpath, "w", format=2)
    assert sorted(os.listdir(dbpath)) == ["data", "lock"]
    assert (dbpath / "data").read_bytes() == start + put_record(b"a", b"1") + b"torn"
    (dbpath / "data").write_bytes(start + put_record(b"a", b"1"))
    # The lock given back.
    with dbopen(dbpath, "w", format=1) as database:
        assert dict(database.items()) == {b"a": b"1"}
    assert (dbpath / "data").read_bytes() == start + put_record(b"a", b"1")


def test_compaction_upgrades_keeps_and_turns_back_the_format(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
        database[b""] = b""
        database.compact(format=2)
        assert database.format_version == (2, 1)
        with database.batch() as batch:
            batch[b"b"] = b"2"
        database.compact()  # never back to 1.1 unless asked
        assert database.format_version == (2, 1)
        assert (dbpath / "data").read_bytes()[:8] == HEADER_2
        database.close(compact=True)
    with dbopen(dbpath, "w") as database:
        assert database.format_version == (2, 1)
        database.compact(format=1)  # the batch's records become records of their own
        assert database.format_version == (1, 1)
        assert dict(database.items()) == {b"a": b"1", b"": b"", b"b": b"2"}
    data = (dbpath / "data").read_bytes()
    assert data[:8] == HEADER_1_1 and struct.pack("!i", -2) not in data


def test_a_reader_follows_the_writer_s_upgrade(dbopen, dbpath):
    with dbopen(dbpath, "c") as writer:
        writer[b"a"] = b"1"
        writer.sync()
        with dbopen(dbpath, "r") as reader:
            writer.compact(format=2)
            with writer.batch() as batch:
                batch[b"b"] = b"2"
            writer.sync()
            reader.refresh()
            assert reader.format_version == (2, 1)
            assert dict(reader.items()) == {b"a": b"1", b"b": b"2"}


def test_the_command_upgrades(dbpath, capsys):
    with semidbm.open(dbpath, "c") as database:
        database[b"a"] = b"1"
    assert cli.main(["upgrade", str(dbpath)]) == 0
    assert "from format 1.1 to 2.1" in capsys.readouterr().out
    assert cli.main(["upgrade", str(dbpath)]) == 0
    assert "2.1 already" in capsys.readouterr().out
    with semidbm.open(dbpath, "w") as database:
        assert database.format_version == (2, 1)
        assert dict(database.items()) == {b"a": b"1"}
    assert cli.main(["stats", str(dbpath)]) == 0
    assert "2.1" in capsys.readouterr().out


def test_verify_finds_a_batch_whose_record_is_damaged(dbpath, capsys):
    with semidbm.open(dbpath, "c", format=2) as database:
        with database.batch() as batch:
            batch[b"a"] = b"1" * 100
            batch[b"b"] = b"2"
    assert cli.main(["verify", str(dbpath)]) == 0
    data = bytearray((dbpath / "data").read_bytes())
    # A byte of a's value, and the batch's own checksum made to match: the batch
    # is malformed (its records must match their checksums), not lost data.
    at = len(log_start(data, HEADER_2))  # the batch, after the first checkpoint
    data[at + 12 + 8 + 1 + 50] ^= 1
    data[at + 8 : at + 12] = struct.pack("!I", zlib.crc32(bytes(data[at + 12 :])))
    (dbpath / "data").write_bytes(bytes(data))
    capsys.readouterr()
    assert cli.main(["verify", str(dbpath)]) == 3
    assert "corrupt record at offset %d: impossible lengths, or a malformed batch" % at in (
        capsys.readouterr().out)


# --- cut, damaged and malformed batches ---


def test_a_batch_cut_short_is_a_torn_tail(dbopen, dbpath):
    whole = put_record(b"a", b"1")
    cut = batch_record(put_record(b"b", b"2"), put_record(b"c", b"3"))
    for length in (4, 12, 20, len(cut) - 1):
        shutil.rmtree(dbpath, ignore_errors=True)
        write_data(dbpath, whole, cut[:length])
        with pytest.warns(semidbm.TornTailWarning):
            with dbopen(dbpath, "w") as database:
                assert dict(database.items()) == {b"a": b"1"}
        assert (dbpath / "data").read_bytes() == HEADER_2_0 + whole


@pytest.mark.parametrize("place", ["body", "checksum", "zeros"])
def test_a_batch_whose_checksum_fails_is_left_out_with_what_follows(dbopen, dbpath, place):
    whole = put_record(b"a", b"1")
    damaged = bytearray(batch_record(put_record(b"b", b"2" * 5000), put_record(b"c", b"3")))
    if place == "body":
        damaged[40] ^= 0x10
    elif place == "checksum":
        damaged[9] ^= 1
    else:  # a page the disk did not write
        damaged[100:4196] = bytes(4096)
    after = put_record(b"d", b"4") * 200_000  # far longer than a write buffer
    write_data(dbpath, whole, bytes(damaged), after)
    with pytest.warns(semidbm.TornTailWarning):
        with dbopen(dbpath, "w") as database:
            assert dict(database.items()) == {b"a": b"1"}
    kept = [name for name in os.listdir(dbpath) if name.startswith("data.torn-")]
    assert kept == ["data.torn-%d" % (8 + len(whole))]
    assert (dbpath / kept[0]).read_bytes() == bytes(damaged) + after


def large_batch_records():
    """The records of a batch larger than any default write buffer, and where each one ends.

    Large values first, then small records of each kind (an empty put
    among them), so that most record ends lie beyond one buffer: a cut
    there leaves a tail longer than a buffer. Ends count from the start of
    the batch record.
    """
    records = [put_record(b"big%d" % i, os.urandom(300_000)) for i in range(4)]
    for i in range(24):
        records.append(put_record(b"k%d" % i, os.urandom(1000 + 100 * i)))
        if i % 8 == 3:
            records.append(delete_record(b"big%d" % (i // 8)))
        if i == 10:
            records.append(put_record(b"", b""))
    ends = [12]
    for record in records:
        ends.append(ends[-1] + len(record))
    return records, ends


def test_a_batch_larger_than_the_buffer_cut_anywhere_is_a_torn_tail(dbopen, dbpath):
    """What a writer killed while writing a large batch leaves is a torn tail, never damage.

    The file may end at every record boundary inside the batch, where the
    batch's own records end the file (once taken for records written after
    a damaged length), inside the batch's head, and inside a record.
    """
    whole = put_record(b"a", b"1")
    records, ends = large_batch_records()
    cut = batch_record(*records)
    assert ends[4] > DEFAULT_BUFFER_SIZE  # from the fifth record on, longer than a buffer
    inside = [4, 8, 10, ends[1] + 3, ends[4] + 20, ends[-2] + 9, len(cut) - 1]
    for length in ends[:-1] + inside:
        shutil.rmtree(dbpath, ignore_errors=True)
        write_data(dbpath, whole, cut[:length])
        with pytest.warns(semidbm.TornTailWarning, match="torn tail of %d bytes" % length):
            with dbopen(dbpath, "r") as database:
                assert dict(database.items()) == {b"a": b"1"}
    with pytest.warns(semidbm.TornTailWarning):
        with dbopen(dbpath, "w") as database:
            database[b"b"] = b"2"
    assert (dbpath / "data").read_bytes() == HEADER_2_0 + whole + put_record(b"b", b"2")
    assert (dbpath / ("data.torn-%d" % (8 + len(whole)))).read_bytes() == cut[:length]


def test_verify_says_what_an_open_does_with_a_large_batch_cut_short(kernel, dbpath, capsys):
    """``semidbm verify`` decides as the open does: a batch cut at one of its own records is a
    torn tail that opening for writing cuts off, not a tail that needs ``recover=True``."""
    records, ends = large_batch_records()
    write_data(dbpath, put_record(b"a", b"1"), batch_record(*records)[:ends[-2]])
    found = _examine.examine(str(dbpath), kernel=kernel)
    assert found.tail == ends[-2] > DEFAULT_BUFFER_SIZE and not found.tail_lost
    assert not found.tail_needs_recover
    assert cli.main(["verify", str(dbpath)]) == 3
    assert "opening for writing cuts them off" in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["length", "record"])
def test_a_damaged_batch_before_a_long_log_is_load_error(dbopen, dbpath, damage):
    """A batch whose length field claims more than the file holds, with the log going on after
    it, is damage inside the log: its records followed by the later ones are no cut batch."""
    whole = put_record(b"a", b"1")
    records = [put_record(b"b", b"2"), put_record(b"c", b"3")]
    if damage == "record":  # its length is right, but its second record is damaged
        records[1] = records[1][:-1] + bytes([records[1][-1] ^ 1])
    damaged = bytearray(batch_record(*records))
    damaged[0] = 0x7F  # the body's length: more than the file holds
    after = b"".join(put_record(b"d%d" % i, os.urandom(1000))
                     for i in range(DEFAULT_BUFFER_SIZE // 1000 + 10))
    write_data(dbpath, whole, bytes(damaged), after)
    for flag in "rw":
        with pytest.raises(semidbm.DBMLoadError, match="recover=True") as info:
            dbopen(dbpath, flag)
        assert "offset %d" % (8 + len(whole)) in str(info.value)
    with pytest.warns(semidbm.TornTailWarning):
        with dbopen(dbpath, "r", recover=True) as database:
            assert dict(database.items()) == {b"a": b"1"}


def test_a_batch_of_malformed_records_is_corrupt(dbopen, dbpath):
    whole = put_record(b"a", b"1")
    bad_bodies = [
        put_record(b"b", b"2")[:-1],  # a record crossing the body's end
        put_record(b"b", b"2") + b"\0\0\0",  # bytes left over
        struct.pack("!ii", 1, -3) + b"x" + b"\0" * 4,  # impossible lengths
        batch_record(put_record(b"b", b"2")),  # a batch inside a batch
        b"",  # an empty batch: a batch holds one record at least
        # A record whose own checksum fails (found by the fuzz harness: copied out
        # of its batch by a compaction, it read as lost data, and the rest with it).
        put_record(b"b", b"2")[:-4] + b"\0\0\0\0",
    ]
    for body in bad_bodies:
        shutil.rmtree(dbpath, ignore_errors=True)
        record = struct.pack("!iiI", len(body), -2, zlib.crc32(body)) + body
        write_data(dbpath, whole, record, put_record(b"c", b"3"))
        with pytest.raises(semidbm.DBMLoadError) as info:
            dbopen(dbpath, "r", recover=True)
        assert "offset %d" % (8 + len(whole)) in str(info.value)


def test_a_batch_record_in_a_file_of_format_1_1_is_corrupt(dbopen, dbpath):
    write_data(dbpath, put_record(b"a", b"1"), batch_record(put_record(b"b", b"2")),
               header=HEADER_1_1)
    with pytest.raises(semidbm.DBMLoadError, match="value length -2"):
        dbopen(dbpath, "r")


def test_a_batch_ending_in_the_empty_record_ends_the_log(dbopen, dbpath):
    # The batch's last twelve bytes are zeros: the batch is whole all the same.
    write_data(dbpath, batch_record(put_record(b"a", b"1"), put_record(b"", b"")))
    with dbopen(dbpath, "w") as database:
        assert dict(database.items()) == {b"a": b"1", b"": b""}


def test_empty_records_a_batch_follows_are_records(dbopen, dbpath):
    # A run of empty records counts when a sound record follows it (docs/FORMAT.md,
    # "Zero runs"); in format 2, a batch whose checksum matches is one.
    records = (put_record(b"", b"x"), put_record(b"", b"") * 3,
               batch_record(put_record(b"b", b"2")), put_record(b"c", b"3"))
    write_data(dbpath, *records)
    for flag in ("r", "w"):
        with dbopen(dbpath, flag) as database:
            assert dict(database.items()) == {b"": b"", b"b": b"2", b"c": b"3"}
            assert database.torn_tail is None
    assert (dbpath / "data").read_bytes() == HEADER_2_0 + b"".join(records)


# --- readers, the index file ---


WRITER = textwrap.dedent("""
    import sys
    from semidbm import _kernel, db
    path, kernel, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with db.open_with(_kernel.load(kernel), path, "w", buffer_size=4096) as database:
        print("ready", flush=True)
        for generation in range(1, rounds + 1):
            with database.batch() as batch:
                for key in range(20):
                    size = 9000 if key % 7 == 0 else 10
                    batch[b"k%d" % key] = (b"%d." % generation).ljust(size, b"x")
            if generation % 5 == 0:
                database.sync()
""")


@posix_only
def test_a_reader_never_sees_part_of_a_batch(kernel, dbpath):
    with db.open_with(kernel, dbpath, "c", format=2) as database:
        for key in range(20):
            database[b"k%d" % key] = b"0."
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(dbpath), kernel_name(kernel),
                              "300"], stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"ready\n"
        seen = set()
        with db.open_with(kernel, dbpath, "r") as reader:
            while True:
                running = child.poll() is None
                reader.refresh()
                generations = {value.split(b".")[0] for value in reader.values()}
                assert len(generations) == 1, generations
                seen.add(int(generations.pop()))
                if not running:
                    break
    finally:
        child.wait()
        child.stdout.close()
    assert child.returncode == 0
    assert max(seen) == 300 and len(seen) > 2  # the reader saw batches come, and the last


def test_the_index_file_covers_batches(dbpath):
    compiled = _kernel.load("cython") if "cython" in IMPLEMENTATIONS else None
    if compiled is None:
        pytest.skip("needs the compiled kernel, which writes index files")
    with db.open_with(compiled, dbpath, "c", format=2) as database:
        for start in range(0, 6000, 100):
            with database.batch() as batch:
                for key in range(start, start + 100):
                    batch[b"%d" % key] = b"v" * 900
            if start % 1000 == 0:
                with database.batch() as batch:
                    del batch[b"%d" % start]
    with db.open_with(compiled, dbpath, "r") as database:
        assert database.index_covered > 0
        indexed = dict(database.items())
    with db.open_with(_pure, dbpath, "r") as database:
        assert dict(database.items()) == indexed
    assert len(indexed) == 6000 - 6


# --- the harnesses ---


#: Kills per kernel for the batch workload in the suite; the documented long run does more.
KILLS = {"cython": 12, "python": 8}


@posix_only
@pytest.mark.slow
@pytest.mark.parametrize("buffer_size", [0, 1 << 20], ids=["unbuffered", "buffered"])
def test_batch_writers_killed_at_random_moments(kernel, tmp_path, buffer_size):
    name = kernel_name(kernel)
    with crash.Harness(tmp_path / "db", name, buffer_size, seed=buffer_size + 7,
                       workload="batch") as harness:
        failures = harness.run(KILLS[name])
    assert failures == []
    assert harness.counts["kills"] == KILLS[name]


@pytest.mark.slow
@posix_only
def test_the_crash_harness_catches_batches_written_a_change_at_a_time(tmp_path):
    with crash.Harness(tmp_path / "db", IMPLEMENTATIONS[-1], 0, seed=5,
                       workload=crash.SPLIT_BATCHES) as harness:
        failures = harness.run(60)
    assert failures and "no prefix" in failures[0], failures


def test_the_crash_log_allows_no_state_inside_a_batch():
    log = crash.Log("ready\nset k1 1 3\nbatch 2\nset k2 2 3\ndel k1\nset k3 3 3\n")
    assert log.boundaries == {0, 1, 3, 4}
    assert log.phase == "write" and log.last_started == 3
    cut = crash.Log("ready\nbatch 3\nset k2 2 3\ndel k1\n")
    assert cut.boundaries == {0} and cut.phase == "batch"


@needs_fuse
def test_the_power_loss_harness_catches_batches_taken_without_their_checksum(tmp_path,
                                                                            monkeypatch):
    # Taken whole whatever their checksum, batches holding pages the disk did
    # not write give values never written, or part of a batch.
    monkeypatch.setattr(_records, "whole_batch",
                        lambda data, position, length, end: position + 12 + length <= end)
    checker = powerloss.Checker({"python": _pure}, powerloss.scratch_directory("pl-"))
    try:
        powerloss.explore(powerloss.WORKLOADS["batches"], _pure, checker,
                          powerloss.SAFE_RULES + powerloss.HAZARD_RULES, random.Random(1),
                          samples=4, place=str(tmp_path))
    finally:
        remove_scratch(checker.scratch)
    assert checker.failures, checker.counts
