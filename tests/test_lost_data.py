"""What a power cut leaves as zeros: zero runs and lost pages (docs/FORMAT.md).

Twelve zero bytes are a valid record (the empty key with the empty
value), and a page the disk did not write reads as zeros. These tests
build the files such a cut leaves, byte by byte, and check that both
kernels read them as the format says: the zeros and what follows them
are a torn tail, whatever its length; a writer never ends the log in an
empty record; and legitimate records (empty puts followed by more of the
log, values holding zero pages, a flipped bit) read as before. The
power-loss harness (tests/test_power_loss.py) finds the same trees by
the model.
"""

import sys
import threading
import warnings

import pytest

import semidbm
from semidbm import _checkpoint, _examine
from semidbm._records import seal
from semidbm._settings import DEFAULT_BUFFER_SIZE
from semidbm.format import DISK_PAGE, DISK_SECTOR, HEADER

from .conftest import compiled_only
from .support.log import records_after_start
from .support.records import data_bytes, delete_record, put_record, write_data

EMPTY = put_record(b"", b"")
SYNCED = put_record(b"a", b"synced") + put_record(b"", b"was synced")


def test_an_empty_record_is_twelve_zero_bytes():
    assert EMPTY == bytes(12)


def opened(dbopen, dbpath, flag="r"):
    """The contents of the database and the torn tail its open reported."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with dbopen(dbpath, flag) as database:
            found = dict(database.items()), database.torn_tail
    assert all(issubclass(w.category, semidbm.TornTailWarning) for w in caught), caught
    assert bool(caught) == (found[1] is not None)
    return found


@pytest.mark.parametrize("zeros", [1, 11, 12, 13, 24, 4096, 4097, DEFAULT_BUFFER_SIZE + 5])
def test_a_zero_tail_is_torn_whatever_its_length(dbopen, dbpath, zeros):
    write_data(dbpath, SYNCED, bytes(zeros))
    at = len(HEADER + SYNCED)
    contents = {b"a": b"synced", b"": b"was synced"}
    assert opened(dbopen, dbpath) == (contents, (at, zeros))
    assert opened(dbopen, dbpath, "w") == (contents, (at, zeros))
    assert data_bytes(dbpath) == HEADER + SYNCED, "the writer cut it"
    assert (dbpath / ("data.torn-%d" % at)).read_bytes() == bytes(zeros)
    assert opened(dbopen, dbpath) == (contents, None)


@pytest.mark.parametrize("follows", ["nothing", "garbage", "cut record", "bad checksum"])
def test_a_zero_run_no_sound_record_follows_ends_the_log(dbopen, dbpath, follows):
    after = {
        "nothing": b"",
        # A lost page ends inside a record: what follows reads out of alignment.
        "garbage": b"\x7f\xff\xff\xff\x00\x00\x00\x01" + b"x" * 40,
        "cut record": put_record(b"k", b"v" * 50)[:30],
        "bad checksum": put_record(b"k", b"v")[:-1] + b"\x00",
    }[follows]
    tail = bytes(DISK_PAGE) + after
    write_data(dbpath, SYNCED, tail)
    at = len(HEADER + SYNCED)
    expected = ({b"a": b"synced", b"": b"was synced"}, (at, len(tail)))
    assert opened(dbopen, dbpath) == expected
    assert opened(dbopen, dbpath, "w") == expected


def test_empty_records_a_sound_record_follows_are_records(dbopen, dbpath):
    # 0.5.1 writes these: puts of b"" = b"" in a row, then more of the log.
    write_data(dbpath, put_record(b"", b"x"), EMPTY * 3, put_record(b"b", b"2"))
    assert opened(dbopen, dbpath) == ({b"": b"", b"b": b"2"}, None)


def test_an_older_file_ending_in_empty_puts_loses_them_once(dbopen, dbpath):
    # The documented price of the rule: the zeros may be a lost page.
    write_data(dbpath, put_record(b"", b"old"), EMPTY)
    at = len(HEADER) + len(put_record(b"", b"old"))
    assert opened(dbopen, dbpath, "w") == ({b"": b"old"}, (at, 12))
    assert opened(dbopen, dbpath) == ({b"": b"old"}, None)


def test_an_empty_put_is_sealed_so_the_log_never_ends_in_zeros(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database[b"\0"] = b"held"  # so the filler key is b"\0\0"
        database[b""] = b""
        database.sync()
        assert records_after_start(data_bytes(dbpath)) == put_record(b"\0", b"held") + EMPTY + (
            put_record(b"\0\0", b"") + delete_record(b"\0\0")
        )
        assert dict(database.items()) == {b"\0": b"held", b"": b""}
        assert len(database) == 2
    assert opened(dbopen, dbpath) == ({b"\0": b"held", b"": b""}, None)


@pytest.mark.parametrize("buffer_size", [0, 12, 30, DEFAULT_BUFFER_SIZE])
def test_a_reader_sees_every_empty_put_the_writer_synced(dbopen, dbpath, buffer_size):
    with dbopen(dbpath, "c", buffer_size=buffer_size) as writer:
        with dbopen(dbpath, "r") as reader:
            for value in (b"", b"x", b""):
                writer[b""] = value
                writer.sync()
                reader.refresh()
                assert reader[b""] == value
                assert len(reader) == 1
        assert not data_bytes(dbpath).endswith(EMPTY)


def test_a_compaction_that_ends_in_the_empty_record_seals_it(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
        database[b""] = b""
        database[b"a"] = b"2"
        del database[b"a"]
        database.compact()
        assert records_after_start(data_bytes(dbpath)) == EMPTY + put_record(
            b"\0", b""
        ) + delete_record(b"\0")
        assert dict(database.items()) == {b"": b""}
    assert opened(dbopen, dbpath) == ({b"": b""}, None)


def seals_written(kernel, path, held, pad):
    """The records of the data file after an empty put, and after a compaction that seals it again.

    The empty record ends at offset ``_checkpoint.START_SIZE + 27 + pad``, or 14 bytes
    later with ``held``: the shortest seal key, ``b"\\0"``, live, so the seal's key is
    longer. The compaction copies the same records to the same places, the empty record
    last. Each file's log start (its checkpoint differs) is checked and left out.
    """
    with semidbm.db.open_with(kernel, path, "c", buffer_size=0) as database:
        if held:
            database[b"\0"] = b"x"
        database[b"pad"] = b"p" * pad
        database[b""] = b""
        written = data_bytes(path)
        database.compact()
    return records_after_start(written), records_after_start(data_bytes(path))


@compiled_only
def test_both_kernels_write_the_same_seals(tmp_path):
    # The empty record ends at each of the 30 offsets before a sector boundary, and at the
    # boundary, as written and as compacted, with the shortest seal key held or not.
    # The pure kernel's seal is ``_records.seal``, whose rule the test below checks.
    first_pad = DISK_SECTOR - 30 - _checkpoint.START_SIZE - 27 - 14
    for held in (False, True):
        for pad in range(first_pad, first_pad + 45):
            found = [
                seals_written(semidbm._kernel.load(name),
                              tmp_path / ("%s-%d-%d" % (name, held, pad)), held, pad)
                for name in ("python", "cython")
            ]
            assert found[0] == found[1], (held, pad)


def big_value():
    return bytes(range(256)) * 40  # 10,240 bytes, no zero page


def test_a_lost_page_inside_a_value_ends_the_log(dbopen, dbpath):
    first = put_record(b"a", b"synced")
    big = put_record(b"big", big_value())
    after = put_record(b"c", b"3") * 100_000  # more than a buffer: it would be "damage"
    data = bytearray(HEADER + first + big + after)
    data[DISK_PAGE : 2 * DISK_PAGE] = bytes(DISK_PAGE)  # inside big's value
    write_data(dbpath, bytes(data[len(HEADER) :]))
    at = len(HEADER + first)
    expected = ({b"a": b"synced"}, (at, len(data) - at))
    assert opened(dbopen, dbpath) == expected
    assert opened(dbopen, dbpath, "w") == expected
    assert data_bytes(dbpath) == HEADER + first


def test_a_lost_page_at_a_record_s_end_ends_the_log(dbopen, dbpath):
    first = put_record(b"a", b"synced")
    # "e" starts 20 bytes before a page boundary and ends after it
    filler = put_record(b"f", b"y" * (DISK_PAGE - 20 - len(HEADER + first) - 13))
    ends_in_page = put_record(b"e", b"z" * 30)
    data = bytearray(HEADER + first + filler + ends_in_page + put_record(b"g", b"1"))
    start = len(HEADER + first + filler)
    assert start < DISK_PAGE < start + len(ends_in_page)
    data[DISK_PAGE:] = bytes(len(data) - DISK_PAGE)  # the next page was not written
    write_data(dbpath, bytes(data[len(HEADER) :]))
    found, torn = opened(dbopen, dbpath)
    assert found == {b"a": b"synced", b"f": filler[9:-4]}
    assert torn == (start, len(data) - start)


def test_values_with_zero_pages_and_a_matching_checksum_are_values(dbopen, dbpath):
    zeros = bytes(3 * DISK_PAGE)
    with dbopen(dbpath, "c", buffer_size=0) as database:
        database[b"sparse"] = zeros
        database[b"ends-in-zeros"] = b"x" * 5000 + bytes(5000)
        database[b"last"] = b"1"
    assert opened(dbopen, dbpath) == (
        {b"sparse": zeros, b"ends-in-zeros": b"x" * 5000 + bytes(5000), b"last": b"1"},
        None,
    )


def test_a_flipped_bit_is_not_a_lost_page(dbopen, dbpath):
    write_data(dbpath, put_record(b"big", big_value()), put_record(b"b", b"2"))
    data = bytearray(data_bytes(dbpath))
    data[DISK_PAGE + 7] ^= 0x10
    (dbpath / "data").write_bytes(bytes(data))
    found, torn = opened(dbopen, dbpath)
    assert torn is None and found[b"b"] == b"2" and found[b"big"] != big_value()
    with dbopen(dbpath, "r", verify_checksums=True) as database:
        with pytest.raises(semidbm.DBMChecksumError):
            database[b"big"]


def test_verify_reports_a_zero_tail_as_lost_data_opening_drops(dbpath):
    write_data(dbpath, SYNCED, bytes(DEFAULT_BUFFER_SIZE + 1))
    found = _examine.examine(dbpath, check_checksums=True)
    assert (found.tail_offset, found.tail) == (len(HEADER + SYNCED), DEFAULT_BUFFER_SIZE + 1)
    assert found.tail_lost and not found.tail_needs_recover and found.damaged
    assert found.bad_checksums == [] and found.keys == 2


@pytest.mark.parametrize("value", [b"y" * 9000 + bytes(3000), b"v249"], ids=["long", "small"])
def test_a_refresh_counts_pages_from_the_file_s_start(dbopen, dbpath, value):
    # A refresh reads the new log into a copy that starts anywhere in a page; a
    # record is checked where it lies in the file: one spanning pages, and one
    # whose checksum ends in a zero byte (CRC-32 of b"kv249"), in the copy's first page.
    assert put_record(b"k", b"v249")[-1] == 0
    with dbopen(dbpath, "c", buffer_size=0) as writer:
        writer[b"a"] = b"x" * 5000
        with dbopen(dbpath, "r") as reader:
            writer[b"k"] = value
            writer[b"c"] = b"z"
            writer.sync()
            reader.refresh()
            assert reader[b"k"] == value and reader[b"c"] == b"z"


@pytest.mark.parametrize("unit", [DISK_SECTOR, DISK_PAGE])
def test_a_seal_is_never_split_by_a_sector_or_page_boundary(unit):
    # A cut that keeps the put whole keeps the delete: the delete's last sector is one
    # the put reaches (docs/FORMAT.md, "Zero runs").
    for offset in range(3 * DISK_PAGE - 80, 3 * DISK_PAGE + 20):
        sealing = seal(offset, lambda key: key in (b"\0", b"\0\0\0"))
        size = (len(sealing) - 24) // 2
        key = b"\0" * size
        assert sealing == put_record(key, b"") + delete_record(key)
        assert size not in (1, 3)
        put_end = offset + 12 + size
        assert (put_end + 12 + size - 1) // unit == (put_end - 1) // unit, offset


def test_a_page_kept_at_an_earlier_version_ends_the_log(dbopen, dbpath):
    # A record written in pieces (the compiled kernel writes one larger than its buffer
    # as lengths, key, value, checksum) may reach the disk with a page as it was after
    # an early piece: zeros from there to the page's end, the later pages whole.
    first = put_record(b"a", b"synced")
    big = put_record(b"big", big_value())
    data = bytearray(HEADER + first + big + put_record(b"c", b"3"))
    start = len(HEADER + first)
    data[start + 11 : DISK_PAGE] = bytes(DISK_PAGE - start - 11)  # lengths and key kept
    write_data(dbpath, bytes(data[len(HEADER) :]))
    expected = ({b"a": b"synced"}, (start, len(data) - start))
    assert opened(dbopen, dbpath) == expected
    assert opened(dbopen, dbpath, "w") == expected


def test_a_seal_never_takes_a_key_another_thread_is_writing(dbopen, dbpath):
    # The seal's key is chosen among keys not live and appended with no Python
    # code between (compiled kernel) or under the store's lock (pure kernel): a
    # thread setting that key meanwhile must not see the seal delete it.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with dbopen(dbpath, "c", buffer_size=0) as database, dbopen(dbpath, "r") as reader:
            done = threading.Event()

            def empty_puts():
                while not done.is_set():
                    database[b""] = b""

            other = threading.Thread(target=empty_puts)
            other.start()
            try:
                for number in range(1000):
                    database[b"\0"] = b"%d" % number
                    reader.refresh()
                    assert reader.get(b"\0") == b"%d" % number
                    del database[b"\0"]
            finally:
                done.set()
                other.join()
    finally:
        sys.setswitchinterval(interval)
