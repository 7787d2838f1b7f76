"""The write path's edges that the rest of the suite leaves loose.

Each test here pins one rule a hand-made mutation of the code broke
without any other test noticing:

* ``sync()`` and a writer's ``close()`` fsync the data file, after the
  record they flush is in it (the fsync is seen by wrapping ``os.fsync``,
  which both kernels call through the ``os`` module);
* a record exactly as long as the append buffer is buffered, one byte
  longer goes straight to the file, and a record that exactly fills what
  is left of the buffer is buffered too;
* a compaction reports progress after a live record that ends *exactly*
  ``_settings.PROGRESS_STEP`` bytes past the last report (``>=``, not
  ``>``), and not after one that ends a byte short;
* cutting a torn tail fsyncs the kept bytes (and their directory) before
  truncating the data file, and fsyncs the data file after truncating it.

Every test runs on both kernels (the ``dbopen`` fixture).
"""

import os
import struct
import zlib

import pytest

import semidbm
from semidbm import _checkpoint
from semidbm._settings import PROGRESS_STEP
from semidbm.format import HEADER

from .support.log import records_after_start

#: Bytes a put record adds to its key and value: two lengths and a CRC.
OVERHEAD = 8 + 4


def put(key, value):
    """The bytes of a put record, as the format describes it."""
    return (
        struct.pack("!ii", len(key), len(value))
        + key
        + value
        + struct.pack("!I", zlib.crc32(key + value) & 0xFFFFFFFF)
    )


def identity(path):
    """``(st_dev, st_ino)`` of the file at ``path``."""
    found = os.stat(path)
    return found.st_dev, found.st_ino


def data_size(dbpath):
    """The size on disk of the database's data file."""
    return os.path.getsize(dbpath / "data")


# --- 1. sync() and close() fsync the data file ---


@pytest.fixture
def fsyncs(monkeypatch):
    """Record every ``os.fsync``: ``(st_dev, st_ino, st_size)`` of its file at the time.

    The real fsync still runs after the record is taken.
    """
    calls = []
    real_fsync = os.fsync

    def fsync(fd):
        found = os.fstat(fd)
        calls.append((found.st_dev, found.st_ino, found.st_size))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def data_fsync_sizes(calls, dbpath):
    """The file sizes seen by the recorded fsyncs that hit the data file."""
    data = identity(dbpath / "data")
    return [size for dev, ino, size in calls if (dev, ino) == data]


@pytest.mark.parametrize("buffer_size", [0, 1 << 16], ids=["unbuffered", "buffered"])
def test_each_sync_fsyncs_the_data_file_holding_the_new_record(fsyncs, dbopen, dbpath, buffer_size):
    """Every sync() fsyncs the data file once it holds the record written before it.

    Buffered, sync() must write the buffer and then fsync; unbuffered,
    the record is already in the file and sync() must still fsync it.
    The size the fsync saw shows the record was in the file by then.
    """
    db = dbopen(dbpath, "c", buffer_size=buffer_size)
    expected = _checkpoint.START_SIZE
    for i in range(3):
        key, value = b"key-%d" % i, b"value-%d" % i
        db[key] = value
        expected += len(put(key, value))
        del fsyncs[:]
        db.sync()
        sizes = data_fsync_sizes(fsyncs, dbpath)
        assert sizes, "sync() did not fsync the data file"
        assert sizes[-1] == expected, "the fsync came before the record was written"
        assert data_size(dbpath) == expected
    db.close()


def test_closing_a_writer_fsyncs_the_data_file_after_flushing(fsyncs, dbopen, dbpath):
    """A writer's close() writes out its buffer and then fsyncs the data file."""
    db = dbopen(dbpath, "c")
    db[b"key"] = b"value"
    assert data_size(dbpath) == _checkpoint.START_SIZE, "the record waits in the buffer"
    del fsyncs[:]
    db.close()
    sizes = data_fsync_sizes(fsyncs, dbpath)
    assert sizes, "close() did not fsync the data file"
    assert sizes[-1] == _checkpoint.START_SIZE + len(put(b"key", b"value"))


# --- 2. records at the edges of the append buffer ---

#: The append buffer size of the buffer-edge tests.
BUFFER = 100


def value_for(key, size):
    """A value that makes the put record of ``key`` exactly ``size`` bytes long."""
    value = bytes(range(size - OVERHEAD - len(key)))
    assert len(put(key, value)) == size
    return value


def check_values(db, expected):
    """Every key of ``expected`` reads back its value, and nothing else is there."""
    for key, value in expected.items():
        assert db[key] == value
    assert sorted(db.keys()) == sorted(expected)


def finish(dbopen, dbpath, db, expected, records):
    """Sync, check the file and the values, close, reopen and check again."""
    db.sync()
    assert records_after_start((dbpath / "data").read_bytes()) == b"".join(records)
    check_values(db, expected)
    db.close()
    with dbopen(dbpath, "r") as again:
        check_values(again, expected)


def test_record_exactly_the_buffer_size_stays_buffered(dbopen, dbpath):
    """A record of exactly ``buffer_size`` bytes, into an empty buffer, waits for sync()."""
    db = dbopen(dbpath, "c", buffer_size=BUFFER)
    value = value_for(b"exact", BUFFER)
    db[b"exact"] = value
    assert data_size(dbpath) == _checkpoint.START_SIZE, "the record went to the file"
    check_values(db, {b"exact": value})
    finish(dbopen, dbpath, db, {b"exact": value}, [put(b"exact", value)])


def test_record_of_buffer_size_after_others_flushes_them_and_stays_buffered(dbopen, dbpath):
    """A ``buffer_size`` record that does not fit beside buffered ones writes them out, not itself.

    The buffer is emptied first; the record then fits the whole buffer
    exactly, so it is buffered rather than written straight through.
    """
    db = dbopen(dbpath, "c", buffer_size=BUFFER)
    db[b"small"] = b"s"
    value = value_for(b"exact", BUFFER)
    db[b"exact"] = value
    assert data_size(dbpath) == _checkpoint.START_SIZE + len(put(b"small", b"s")), (
        "the buffered record is written out, the one of buffer_size stays in the buffer"
    )
    expected = {b"small": b"s", b"exact": value}
    check_values(db, expected)
    finish(dbopen, dbpath, db, expected, [put(b"small", b"s"), put(b"exact", value)])


def test_record_one_byte_over_the_buffer_size_goes_straight_to_the_file(dbopen, dbpath):
    """A record of ``buffer_size + 1`` bytes is written at once, after what was buffered."""
    db = dbopen(dbpath, "c", buffer_size=BUFFER)
    first = value_for(b"over-1", BUFFER + 1)
    db[b"over-1"] = first
    assert data_size(dbpath) == _checkpoint.START_SIZE + BUFFER + 1
    db[b"small"] = b"s"
    second = value_for(b"over-2", BUFFER + 1)
    db[b"over-2"] = second
    records = [put(b"over-1", first), put(b"small", b"s"), put(b"over-2", second)]
    assert records_after_start((dbpath / "data").read_bytes()) == b"".join(records)
    expected = {b"over-1": first, b"small": b"s", b"over-2": second}
    check_values(db, expected)
    finish(dbopen, dbpath, db, expected, records)


def test_record_that_exactly_fills_the_rest_of_the_buffer_stays_buffered(dbopen, dbpath):
    """A record exactly as long as the room left in a partly used buffer joins it there."""
    db = dbopen(dbpath, "c", buffer_size=BUFFER)
    db[b"small"] = b"s"
    room = BUFFER - len(put(b"small", b"s"))
    value = value_for(b"rest", room)
    db[b"rest"] = value
    assert data_size(dbpath) == _checkpoint.START_SIZE, (
        "a buffer filled exactly is not written out yet"
    )
    expected = {b"small": b"s", b"rest": value}
    check_values(db, expected)
    db[b"next"] = b"n"
    assert data_size(dbpath) == _checkpoint.START_SIZE + BUFFER, (
        "the full buffer goes before the next record"
    )
    expected[b"next"] = b"n"
    check_values(db, expected)
    written = [put(b"small", b"s"), put(b"rest", value), put(b"next", b"n")]
    finish(dbopen, dbpath, db, expected, written)


# --- 3. compaction progress at a step boundary ---


def write_ending_at(db, key, start, end):
    """Put ``key`` with a value that makes its record run from offset ``start`` to ``end``."""
    value = b"v" * (end - start - OVERHEAD - len(key))
    db[key] = value
    return value


def compaction_calls(db):
    """Compact ``db`` and return the progress calls it made."""
    calls = []
    db.compact(progress=lambda done, total: calls.append((done, total)))
    return calls


def test_progress_is_reported_for_records_ending_exactly_a_step_on(dbopen, dbpath):
    """Live records ending exactly at PROGRESS_STEP and 2 * PROGRESS_STEP are reported.

    The log's start counts: the first record runs from the end of the
    first checkpoint (``_checkpoint.START_SIZE``) to exactly PROGRESS_STEP. The second
    ends exactly one step after the first report; the third ends one
    byte short of the next step, so only the final ``(total, total)``
    follows.
    """
    db = dbopen(dbpath, "c", buffer_size=0)
    expected = {
        b"a": write_ending_at(db, b"a", _checkpoint.START_SIZE, PROGRESS_STEP),
        b"b": write_ending_at(db, b"b", PROGRESS_STEP, 2 * PROGRESS_STEP),
        b"c": write_ending_at(db, b"c", 2 * PROGRESS_STEP, 3 * PROGRESS_STEP - 1),
    }
    total = 3 * PROGRESS_STEP - 1
    assert data_size(dbpath) == total
    assert compaction_calls(db) == [
        (PROGRESS_STEP, total),
        (2 * PROGRESS_STEP, total),
        (total, total),
    ]
    check_values(db, expected)
    db.close()


def test_progress_is_not_reported_for_a_record_ending_a_byte_short(dbopen, dbpath):
    """A live record ending at PROGRESS_STEP - 1 is not reported; the next record, past it, is."""
    db = dbopen(dbpath, "c", buffer_size=0)
    expected = {b"a": write_ending_at(db, b"a", _checkpoint.START_SIZE, PROGRESS_STEP - 1)}
    db[b"b"] = b"2"
    db[b"c"] = b"3"
    expected.update({b"b": b"2", b"c": b"3"})
    after_b = PROGRESS_STEP - 1 + len(put(b"b", b"2"))
    total = after_b + len(put(b"c", b"3"))
    assert data_size(dbpath) == total
    assert compaction_calls(db) == [(after_b, total), (total, total)]
    check_values(db, expected)
    db.close()


def test_a_dead_record_ending_at_the_step_is_not_reported(dbopen, dbpath):
    """Only live records are reported: an overwritten one ending exactly at the step is not."""
    db = dbopen(dbpath, "c", buffer_size=0)
    write_ending_at(db, b"a", _checkpoint.START_SIZE, PROGRESS_STEP)
    db[b"b"] = b"2"
    db[b"a"] = b"1"
    after_b = PROGRESS_STEP + len(put(b"b", b"2"))
    total = after_b + len(put(b"a", b"1"))
    assert data_size(dbpath) == total
    assert compaction_calls(db) == [(after_b, total), (total, total)]
    check_values(db, {b"a": b"1", b"b": b"2"})
    db.close()


# --- 4. the order of fsyncs and truncation when a torn tail is cut ---


@pytest.fixture
def file_calls(monkeypatch):
    """Record ``os.fsync`` and ``os.ftruncate`` as ``semidbm._files`` sees them, in order.

    Each entry is ``("fsync", (st_dev, st_ino))`` or ``("ftruncate",
    (st_dev, st_ino), length)``, the identity taken before the real call.
    """
    from semidbm import _files

    calls = []
    real_fsync = _files.os.fsync
    real_ftruncate = _files.os.ftruncate

    def fsync(fd):
        found = os.fstat(fd)
        calls.append(("fsync", (found.st_dev, found.st_ino)))
        return real_fsync(fd)

    def ftruncate(fd, length):
        found = os.fstat(fd)
        calls.append(("ftruncate", (found.st_dev, found.st_ino), length))
        return real_ftruncate(fd, length)

    monkeypatch.setattr(_files.os, "fsync", fsync)
    monkeypatch.setattr(_files.os, "ftruncate", ftruncate)
    return calls


def test_cutting_a_torn_tail_flushes_the_kept_bytes_before_truncating(file_calls, dbopen, dbpath):
    """A writer opening a torn log: keep-file fsync, (directory fsync), truncate, data fsync.

    The kept bytes must be on disk before the data file loses them, and
    the data file is flushed once it is cut.
    """
    good = put(b"a", b"1")
    tail = put(b"b", b"2")[:-3]
    dbpath.mkdir()
    (dbpath / "data").write_bytes(HEADER + good + tail)
    offset = len(HEADER) + len(good)
    del file_calls[:]
    with pytest.warns(semidbm.TornTailWarning):
        db = dbopen(dbpath, "w")
    calls = list(file_calls)
    kept = dbpath / ("data.torn-%d" % offset)
    assert kept.read_bytes() == tail
    assert (dbpath / "data").read_bytes() == HEADER + good
    keep, data, directory = identity(kept), identity(dbpath / "data"), identity(dbpath)

    # (Other files, the lock file among them, may be truncated too.)
    truncations = [i for i, call in enumerate(calls) if call[:2] == ("ftruncate", data)]
    assert [calls[i] for i in truncations] == [("ftruncate", data, offset)]
    cut = truncations[0]
    keep_fsyncs = [i for i, call in enumerate(calls) if call == ("fsync", keep)]
    assert keep_fsyncs and keep_fsyncs[0] < cut, "the kept bytes were not flushed before the cut"
    if os.name != "nt":
        directory_fsyncs = [i for i, call in enumerate(calls) if call == ("fsync", directory)]
        assert any(keep_fsyncs[0] < i < cut for i in directory_fsyncs), (
            "the directory holding the kept bytes was not flushed before the cut"
        )
    assert any(i > cut for i, call in enumerate(calls) if call == ("fsync", data)), (
        "the data file was not flushed after the cut"
    )

    db[b"c"] = b"3"
    db.close()
    with dbopen(dbpath, "r") as again:
        check_values(again, {b"a": b"1", b"c": b"3"})
