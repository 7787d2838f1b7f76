"""The data file: exact bytes written, torn tails, corruption, checksums, compaction."""

import os
import random
import shutil
import struct
import warnings
import zlib

import pytest

import semidbm
from semidbm._settings import DEFAULT_BUFFER_SIZE
from semidbm.format import HEADER, INDEX_NAME

from .support.log import log_start, records_after_start
from .support.records import data_bytes, delete_record, put_record, write_data


def written_records(dbpath):
    """The data file's bytes after its log start (header and first checkpoint, checked)."""
    return records_after_start(data_bytes(dbpath))


def test_records_are_written_as_the_format_says(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"key"] = b"value"
        db[b"key"] = b"v2"
        db[b"other"] = b""
        del db[b"key"]
    assert written_records(dbpath) == put_record(b"key", b"value") + put_record(
        b"key", b"v2"
    ) + put_record(b"other", b"") + delete_record(b"key")


def test_reads_records_written_from_the_spec(dbopen, dbpath):
    write_data(
        dbpath,
        put_record(b"a", b"1"),
        put_record(b"b", b"2"),
        put_record(b"a", b"3"),
        delete_record(b"b"),
        put_record(b"c", b""),
    )
    with dbopen(dbpath, verify_checksums=True) as db:
        assert dict(db.items()) == {b"a": b"3", b"c": b""}


def test_delete_of_missing_key_in_the_log_is_skipped(dbopen, dbpath):
    gone = delete_record(b"a")
    write_data(dbpath, delete_record(b"ghost"), put_record(b"a", b"1"), gone, gone)
    with dbopen(dbpath) as db:
        assert len(db) == 0
    write_data_again = dbpath / "data"
    write_data_again.write_bytes(HEADER + delete_record(b"x") + put_record(b"x", b"1"))
    with dbopen(dbpath) as db:
        assert dict(db.items()) == {b"x": b"1"}


def test_other_minor_version_is_read(dbopen, dbpath):
    write_data(dbpath, put_record(b"a", b"1"), header=b"SEMI" + struct.pack("!HH", 1, 7))
    with dbopen(dbpath) as db:
        assert db[b"a"] == b"1"


@pytest.mark.parametrize(
    "header, reason",
    [
        (b"SEMJ\x00\x01\x00\x01", "magic"),
        (b"SEMI\x00\x03\x00\x00", "version 3.0"),
        (b"SEMI\x00\x00\x00\x01", "version 0.1"),
        (b"SEMI\x00\x01", "shorter than the header"),
        (b"", "shorter than the header"),
    ],
)
def test_bad_header_is_load_error_naming_file(dbopen, dbpath, header, reason):
    write_data(dbpath, header=header)
    for flag in "rwc":
        with pytest.raises(semidbm.DBMLoadError, match=reason) as info:
            dbopen(dbpath, flag)
        assert str(dbpath / "data") in str(info.value)
    assert data_bytes(dbpath) == header


@pytest.mark.parametrize(
    "lengths",
    [(-1, 5), (-(2**31), 0), (3, -2), (3, -(2**31))],
    ids=["key-1", "key-min", "value-2", "value-min"],
)
def test_negative_lengths_are_corruption_with_offset(dbopen, dbpath, lengths):
    good = put_record(b"a", b"1")
    write_data(dbpath, good, struct.pack("!ii", *lengths) + b"x" * 40)
    with pytest.raises(semidbm.DBMLoadError) as info:
        dbopen(dbpath, "r", recover=True)
    message = str(info.value)
    assert str(dbpath / "data") in message
    assert "offset %d" % (len(HEADER) + len(good)) in message


def torn_cases():
    record = put_record(b"last-key", b"last-value")
    return {
        "half-lengths": record[:5],
        "lengths-only": record[:8],
        "half-key": record[:12],
        "half-value": record[:20],
        "no-checksum": record[:-4],
        "half-checksum": record[:-1],
        "delete-no-checksum": delete_record(b"last-key")[:-2],
    }


@pytest.mark.parametrize("case", sorted(torn_cases()))
def test_torn_tail_is_dropped_with_warning(dbopen, dbpath, case):
    tail = torn_cases()[case]
    records = put_record(b"a", b"1") + put_record(b"last-key", b"old")
    write_data(dbpath, records, tail)
    before = data_bytes(dbpath)
    with pytest.warns(semidbm.TornTailWarning, match="offset %d" % (8 + len(records))):
        db = dbopen(dbpath, "r")
    with db:
        assert dict(db.items()) == {b"a": b"1", b"last-key": b"old"}
    assert data_bytes(dbpath) == before, "a reader changes nothing"


def test_the_store_reports_the_torn_tail_it_found_at_open(dbopen, dbpath):
    write_data(dbpath, put_record(b"a", b"1"), b"\x00\x00\x00")
    torn_tail = (8 + len(put_record(b"a", b"1")), 3)
    with pytest.warns(semidbm.TornTailWarning):
        reader = dbopen(dbpath, "r")
    with pytest.warns(semidbm.TornTailWarning):
        writer = dbopen(dbpath, "w")
    assert reader.torn_tail == writer.torn_tail == torn_tail
    reader.close()
    writer.compact()
    assert writer.torn_tail == torn_tail, "as found at open"
    writer.close()
    with dbopen(dbpath, "w") as again:
        assert again.torn_tail is None


def test_torn_tail_warning_points_at_the_code_that_opened(kernel, dbpath):
    write_data(dbpath, put_record(b"a", b"1"), b"\x00\x00\x00")
    openers = [
        lambda: semidbm.db.open_with(kernel, dbpath),
        lambda: semidbm.open(dbpath),
        lambda: semidbm.open_shelf(dbpath, "r"),
    ]
    for opener in openers:
        with pytest.warns(semidbm.TornTailWarning) as caught:
            opener().close()
        where = (__file__, opener.__code__.co_firstlineno)
        assert [(warning.filename, warning.lineno) for warning in caught] == [where]


def test_writer_cuts_torn_tail_and_keeps_it(dbopen, dbpath):
    records = HEADER + put_record(b"a", b"1")
    tail = put_record(b"b", b"2")[:-3]
    write_data(dbpath, put_record(b"a", b"1"), tail)
    with pytest.warns(semidbm.TornTailWarning):
        db = dbopen(dbpath, "w")
    assert data_bytes(dbpath) == records, "a writer cuts the tail on open"
    db[b"c"] = b"3"
    db.close()
    assert data_bytes(dbpath) == records + put_record(b"c", b"3")
    kept = dbpath / ("data.torn-%d" % len(records))
    assert kept.read_bytes() == tail
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with dbopen(dbpath) as again:
            assert dict(again.items()) == {b"a": b"1", b"c": b"3"}


def test_second_cut_at_same_offset_keeps_both_tails(dbopen, dbpath):
    write_data(dbpath, put_record(b"a", b"1"), b"\x00\x00\x00")
    offset = 8 + len(put_record(b"a", b"1"))
    for tail in (b"\x00\x00\x00", b"\x00\x00"):
        (dbpath / "data").write_bytes(HEADER + put_record(b"a", b"1") + tail)
        with pytest.warns(semidbm.TornTailWarning):
            db = dbopen(dbpath, "w")
        db[b"b"] = b"2"
        del db[b"b"]
        db.close()
    assert (dbpath / ("data.torn-%d" % offset)).read_bytes() == b"\x00\x00\x00"
    assert (dbpath / ("data.torn-%d.1" % offset)).read_bytes() == b"\x00\x00"


def test_compaction_cuts_torn_tail_first(dbopen, dbpath):
    write_data(dbpath, put_record(b"a", b"1"), put_record(b"a", b"2"), b"\x00\x00\x00\x01\x00")
    with pytest.warns(semidbm.TornTailWarning):
        db = dbopen(dbpath, "w")
    db.compact()
    db.close()
    assert written_records(dbpath) == put_record(b"a", b"2")
    assert (dbpath / ("data.torn-%d" % (8 + 2 * len(put_record(b"a", b"1"))))).read_bytes() == (
        b"\x00\x00\x00\x01\x00"
    )


def long_tail():
    """A tail longer than any buffer: a damaged value length claiming far more than the
    file holds, with the records written after it still ending the file."""
    count = DEFAULT_BUFFER_SIZE // 1000 + 10
    records = [put_record(b"k%d" % i, os.urandom(1000)) for i in range(count)]
    return struct.pack("!ii", 1, 50_000_000) + b"k" + b"".join(records)


def test_long_unparseable_tail_is_load_error(dbopen, dbpath):
    tail = long_tail()
    write_data(dbpath, put_record(b"a", b"1"), tail)
    before = data_bytes(dbpath)
    for flag in "rwc":
        with pytest.raises(semidbm.DBMLoadError, match="recover=True") as info:
            dbopen(dbpath, flag)
        assert "offset %d" % (8 + len(put_record(b"a", b"1"))) in str(info.value)
    assert data_bytes(dbpath) == before
    assert sorted(set(os.listdir(dbpath)) - {INDEX_NAME}) == ["data", "lock"]


@pytest.mark.parametrize("value", [os.urandom, bytes], ids=["random", "zeros"])
@pytest.mark.parametrize("flag", "rw")
def test_record_larger_than_the_buffer_cut_short_is_a_torn_tail(dbopen, dbpath, value, flag):
    """A killed writer can leave any part of a record it wrote straight to the file."""
    big = put_record(b"big", value(3 * DEFAULT_BUFFER_SIZE))
    for cut in (12, DEFAULT_BUFFER_SIZE + 100, len(big) - 1):
        if dbpath.exists():
            shutil.rmtree(dbpath)
        write_data(dbpath, put_record(b"a", b"1"), big[:cut])
        with pytest.warns(semidbm.TornTailWarning, match="torn tail of %d bytes" % cut):
            db = dbopen(dbpath, flag)
        with db:
            assert dict(db.items()) == {b"a": b"1"}
            if flag == "w":
                db[b"b"] = b"2"
        if flag == "w":
            with dbopen(dbpath) as again:
                assert dict(again.items()) == {b"a": b"1", b"b": b"2"}


def test_a_large_value_cut_after_bytes_that_read_as_a_delete_of_the_empty_key_is_torn(
        dbopen, dbpath):
    """A value holding 32-bit 0, -1, 0 (a common sentinel), cut after it: the file then ends with
    what reads as a delete of ``b''``, a record of neither key nor value bytes, whose
    checksum (that of nothing) is 0. It is no sign that the log goes on."""
    sentinels = struct.pack("!iii", 0, -1, 0) * 3
    big = put_record(b"big", os.urandom(DEFAULT_BUFFER_SIZE) + sentinels + os.urandom(1000))
    sentinels_end = 8 + len(b"big") + DEFAULT_BUFFER_SIZE + len(sentinels)
    for cut in (sentinels_end - 12, sentinels_end):
        shutil.rmtree(dbpath, ignore_errors=True)
        write_data(dbpath, put_record(b"a", b"1"), big[:cut])
        with pytest.warns(semidbm.TornTailWarning, match="torn tail of %d bytes" % cut):
            with dbopen(dbpath, "r") as db:
                assert dict(db.items()) == {b"a": b"1"}


def test_long_tail_within_a_large_buffer_is_dropped(dbopen, dbpath):
    tail = long_tail()
    write_data(dbpath, put_record(b"a", b"1"), tail)
    with pytest.warns(semidbm.TornTailWarning):
        db = dbopen(dbpath, "r", buffer_size=2 * len(tail))
    with db:
        assert dict(db.items()) == {b"a": b"1"}


def test_recover_opens_and_keeps_long_tail(dbopen, dbpath):
    tail = long_tail()
    write_data(dbpath, put_record(b"a", b"1"), tail)
    with pytest.warns(semidbm.TornTailWarning):
        db = dbopen(dbpath, "w", recover=True)
    db[b"b"] = b"2"
    db.close()
    offset = 8 + len(put_record(b"a", b"1"))
    assert (dbpath / ("data.torn-%d" % offset)).read_bytes() == tail
    with dbopen(dbpath) as again:
        assert dict(again.items()) == {b"a": b"1", b"b": b"2"}


def test_read_only_recover_changes_nothing(dbopen, dbpath):
    write_data(dbpath, put_record(b"a", b"1"), long_tail())
    before = data_bytes(dbpath)
    with pytest.warns(semidbm.TornTailWarning):
        with dbopen(dbpath, "r", recover=True) as db:
            assert dict(db.items()) == {b"a": b"1"}
    assert data_bytes(dbpath) == before
    assert os.listdir(dbpath) == ["data"]


def corrupt_value(dbpath, value):
    data = bytearray(data_bytes(dbpath))
    position = bytes(data).index(value)
    data[position] ^= 0x01
    (dbpath / "data").write_bytes(bytes(data))


@pytest.mark.parametrize("buffered", [False, True], ids=["on-disk", "in-buffer"])
def test_verify_checksums_detects_corruption(dbopen, dbpath, buffered):
    with dbopen(dbpath, "c") as db:
        db[b"good"] = b"fine value"
        db[b"bad"] = b"to be damaged"
    corrupt_value(dbpath, b"to be damaged")
    with dbopen(dbpath, "r") as db:
        assert db[b"bad"] != b"to be damaged", "by default values are not checked"
    with dbopen(dbpath, "w", verify_checksums=True) as db:
        assert db[b"good"] == b"fine value"
        with pytest.raises(semidbm.DBMChecksumError, match="bad"):
            db[b"bad"]
        db[b"new"] = b"buffered or not"
        if not buffered:
            db.sync()
        assert db[b"new"] == b"buffered or not"


def test_checksum_error_is_module_error(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"k"] = b"value"
    corrupt_value(dbpath, b"value")
    with dbopen(dbpath, verify_checksums=True) as db:
        with pytest.raises(semidbm.error):
            db[b"k"]


def test_compaction_writes_live_records_oldest_first(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"a"] = b"1"
        db[b"b"] = b"2"
        db[b"c"] = b"3"
        db[b"a"] = b"4"
        del db[b"b"]
        db[b"b"] = b"5"
        db[b"d"] = b"6"
        del db[b"d"]
        db.compact()
        assert dict(db.items()) == {b"a": b"4", b"b": b"5", b"c": b"3"}
        db[b"e"] = b"7"
    expected = put_record(b"c", b"3") + put_record(b"a", b"4") + put_record(
        b"b", b"5"
    ) + put_record(b"e", b"7")
    assert written_records(dbpath) == expected
    assert sorted(set(os.listdir(dbpath)) - {INDEX_NAME}) == ["data", "lock"]


def test_close_with_compact(dbopen, dbpath):
    db = dbopen(dbpath, "c")
    for i in range(100):
        db[b"k"] = b"%d" % i
    db.close(compact=True)
    assert written_records(dbpath) == put_record(b"k", b"99")


def test_compaction_streams_many_records(dbopen, dbpath):
    with dbopen(dbpath, "c", buffer_size=4096) as db:
        for i in range(20000):
            db[b"%08d" % i] = b"v" * (i % 300)
        for i in range(0, 20000, 3):
            del db[b"%08d" % i]
        db.compact()
        expected = {b"%08d" % i: b"v" * (i % 300) for i in range(20000) if i % 3}
        assert dict(db.items()) == expected
    with dbopen(dbpath, verify_checksums=True) as db:
        assert dict(db.items()) == expected


def test_buffer_holds_records_until_sync(dbopen, dbpath):
    db = dbopen(dbpath, "c", buffer_size=1 << 16)
    db[b"a"] = b"1"
    assert written_records(dbpath) == b""
    assert db[b"a"] == b"1", "reads see buffered records"
    db.sync()
    assert written_records(dbpath) == put_record(b"a", b"1")
    db.close()


def test_buffer_size_zero_writes_each_record_before_returning(dbopen, dbpath):
    db = dbopen(dbpath, "c", buffer_size=0)
    db[b"a"] = b"1"
    assert written_records(dbpath) == put_record(b"a", b"1")
    del db[b"a"]
    assert written_records(dbpath) == put_record(b"a", b"1") + delete_record(b"a")
    db.close()


def test_full_buffer_is_written_out(dbopen, dbpath):
    record = put_record(b"k00", b"x" * 50)
    db = dbopen(dbpath, "c", buffer_size=3 * len(record))
    for i in range(3):
        db[b"k%02d" % i] = b"x" * 50
    assert written_records(dbpath) == b"", "three records fit the buffer exactly"
    db[b"k03"] = b"x" * 50
    assert len(written_records(dbpath)) == 3 * len(record)
    db.close()
    assert len(written_records(dbpath)) == 4 * len(record)


def test_record_larger_than_buffer_goes_straight_to_file(dbopen, dbpath):
    db = dbopen(dbpath, "c", buffer_size=64)
    db[b"small"] = b"s"
    db[b"big"] = b"b" * 1000
    big = put_record(b"big", b"b" * 1000)
    assert written_records(dbpath) == put_record(b"small", b"s") + big
    assert db[b"big"] == b"b" * 1000
    db.close()


def test_same_bytes_for_any_buffer_size(dbopen, tmp_path):
    contents = []
    for size in (0, 1, 100, DEFAULT_BUFFER_SIZE):
        path = tmp_path / ("db%d" % size)
        with dbopen(path, "c", buffer_size=size) as db:
            for i in range(300):
                db[b"key%d" % (i % 70)] = b"v" * i
                if i % 7 == 0:
                    del db[b"key%d" % (i % 70)]
                if i == 150:
                    db.sync()
        contents.append(written_records(path))
    assert len(set(contents)) == 1, "the same records after each log's own id"


def test_unsynced_writes_of_an_abandoned_process_are_lost_synced_ones_kept(dbopen, dbpath):
    db = dbopen(dbpath, "c")
    db[b"synced"] = b"1"
    db.sync()
    db[b"buffered"] = b"2"
    on_disk = data_bytes(dbpath)
    db.close()
    copy = dbpath.parent / "crashed.db"
    copy.mkdir()
    (copy / "data").write_bytes(on_disk)
    with dbopen(copy) as crashed:
        assert dict(crashed.items()) == {b"synced": b"1"}


@pytest.mark.parametrize("seed", range(3))
def test_every_record_carries_zlibs_crc(dbopen, dbpath, seed):
    rng = random.Random(seed)
    sizes = list(range(0, 260)) + [1000, 4095, 4096, 65537, 300_000]
    expected = {}
    with dbopen(dbpath, "c", buffer_size=rng.choice([0, 777, 1 << 20])) as db:
        for i, size in enumerate(sizes):
            key = rng.randbytes(rng.randrange(0, 40)) + b"%d" % i
            value = rng.randbytes(size)
            db[key] = value
            expected[key] = value
    data = data_bytes(dbpath)
    position = len(log_start(data))
    while position < len(data):
        key_length, value_length = struct.unpack_from("!ii", data, position)
        body = data[position + 8 : position + 8 + key_length + value_length]
        (stored,) = struct.unpack_from("!I", data, position + 8 + key_length + value_length)
        assert stored == zlib.crc32(body), (position, key_length, value_length)
        position += 12 + key_length + value_length
    with dbopen(dbpath, verify_checksums=True) as db:
        assert dict(db.items()) == expected
