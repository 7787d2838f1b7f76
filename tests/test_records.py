"""The records' codecs and walk (``_records``), and the examination of a file (``_examine``)."""

import mmap
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semidbm
from semidbm import _checkpoint, _examine, _kernel, _messages, _records
from semidbm._examine import DataFile
from semidbm._records import LogSummary, checksum_matches, encode_delete, encode_put, walk
from semidbm.format import HEADER

from .conftest import compiled_only
from .support.log import CHECKPOINT_RECORDS
from .support.records import data_bytes, delete_record, put_record, write_data

H = len(HEADER)


# --- the codecs and the walk over a buffer (_records) ---


def test_encoded_records_are_the_bytes_of_the_format():
    assert encode_put(b"key", b"value") == put_record(b"key", b"value")
    assert encode_put(b"", b"") == put_record(b"", b"")
    assert encode_delete(b"key") == delete_record(b"key")
    assert encode_delete(b"") == delete_record(b"")


def test_walk_yields_each_record_with_where_its_parts_are():
    put, gone, empty = put_record(b"a", b"123"), delete_record(b"bc"), put_record(b"", b"")
    data = b"skip" + put + empty + gone
    second, third = 4 + len(put), 4 + len(put) + len(empty)
    assert list(walk(data, 4, "p")) == [
        (4, b"a", 4 + 8 + 1, 3, second),
        (second, b"", second + 8, 0, third),
        (third, b"bc", third + 8 + 2, -1, len(data)),
    ]


@given(
    st.lists(st.tuples(st.binary(max_size=20), st.one_of(st.none(), st.binary(max_size=60)))),
    st.integers(0, 2**40),
)
def test_walk_gives_back_what_was_encoded(operations, base):
    data = b"".join(
        encode_delete(key) if value is None else encode_put(key, value) for key, value in operations
    )
    walked, stop = [], 0
    for _, key, value_start, value_length, stop in walk(data, 0, "p", base):
        assert checksum_matches(data, key, value_start, stop)
        walked.append((key, None if value_length == -1 else data[value_start : stop - 4]))
    # Empty records that end the log are left out (docs/FORMAT.md, "Zero runs").
    kept = list(operations)
    while kept and kept[-1] == (b"", b""):
        kept.pop()
    assert walked == kept
    assert stop == len(data) - 12 * (len(operations) - len(kept))


@pytest.mark.parametrize(
    "record", [put_record(b"key", b"value"), delete_record(b"key")], ids=["put", "delete"]
)
def test_walk_stops_where_an_incomplete_record_starts_wherever_it_is_cut(record):
    whole = put_record(b"a", b"1")
    for cut in range(len(record)):
        ends = [end for *_, end in walk(whole + record[:cut], 0, "p", base=500)]
        assert ends == [len(whole)], cut
    assert [end for *_, end in walk(whole + record, 0, "p")] == [len(whole), len(whole + record)]


def test_walk_stops_at_the_end_it_is_given():
    first, second = put_record(b"a", b"1"), put_record(b"b", b"2")
    data = first + second
    for end in (len(first), len(first) + 8, len(data) - 1):
        assert [key for _, key, *_ in walk(data, 0, "p", end=end)] == [b"a"]
    assert list(walk(data, len(first), "p", end=len(first))) == []


@pytest.mark.parametrize("lengths", [(-1, 0), (0, -2), (-(2**31), 5), (3, -(2**31))])
def test_impossible_lengths_raise_with_the_offset_in_the_file(lengths):
    whole = put_record(b"a", b"1")
    walked = walk(whole + struct.pack("!ii", *lengths) + b"x" * 20, 0, "/db/data", base=100)
    assert next(walked)[1] == b"a"
    with pytest.raises(semidbm.DBMLoadError) as caught:
        next(walked)
    assert caught.value.offset == 100 + len(whole)
    assert str(caught.value) == _messages.CORRUPT_RECORD % ("/db/data", 100 + len(whole), *lengths)
    assert type(caught.value) is semidbm.DBMLoadError, "as the compiled kernel raises"


def test_lengths_are_checked_before_the_record_is_known_complete():
    with pytest.raises(semidbm.DBMLoadError, match="corrupt record at offset 0"):
        list(walk(struct.pack("!ii", 0, -2), 0, "p"))
    assert list(walk(struct.pack("!ii", 0, -2)[:7], 0, "p")) == [], "no lengths yet: incomplete"


@pytest.mark.parametrize(
    "kind, flip",
    [("put", None), ("put", 8), ("put", 11), ("put", -1), ("delete", None), ("delete", 9)],
    ids=["put", "put-key", "put-value", "put-checksum", "delete", "delete-key"],
)
def test_checksum_matches_checks_key_and_value(kind, flip):
    record = bytearray(put_record(b"key", b"value") if kind == "put" else delete_record(b"key"))
    if flip is not None:
        record[flip] ^= 0x10
    ((_, key, value_start, _, end),) = walk(bytes(record), 0, "p")
    assert checksum_matches(bytes(record), key, value_start, end) is (flip is None)


class AdvisedMap(mmap.mmap):
    """A memory map that notes each ``madvise`` it is given."""

    def madvise(self, *advice):
        self.advised.append(advice)
        return super().madvise(*advice)


@pytest.mark.parametrize("flip", [None, 20, 20000, 49999], ids=["whole", "first", "third", "last"])
def test_a_large_value_in_a_map_is_checked_a_chunk_at_a_time(monkeypatch, tmp_path, flip):
    # Chunks of two pages: a value of 50,000 bytes is read in four or more,
    # each chunk's whole pages let go once read; a byte changed in any
    # chunk is found, and pages let go are read again from the file.
    chunk = 2 * mmap.PAGESIZE
    monkeypatch.setattr(_records, "CHECK_CHUNK", chunk)
    record = bytearray(put_record(b"key", bytes(range(256)) * 195 + b"x" * 80))
    if flip is not None:
        record[11 + flip] ^= 0x10
    (tmp_path / "file").write_bytes(bytes(record))
    with open(tmp_path / "file", "rb") as handle, AdvisedMap(
        handle.fileno(), 0, access=mmap.ACCESS_READ
    ) as mapped:
        mapped.advised = []
        ((_, key, value_start, _, end),) = walk(mapped, 0, "p")
        assert checksum_matches(mapped, key, value_start, end) is (flip is None)
        if hasattr(mmap, "MADV_DONTNEED"):
            assert len(mapped.advised) >= 50_000 // chunk - 1
            assert all(advice[0] == mmap.MADV_DONTNEED for advice in mapped.advised)
        assert checksum_matches(mapped, key, value_start, end) is (flip is None)


def test_a_large_value_in_memory_of_its_own_is_checked_without_advice(monkeypatch):
    # Only a map is advised: madvise on the process's own memory would lose it.
    monkeypatch.setattr(_records, "CHECK_CHUNK", 2 * mmap.PAGESIZE)
    record = put_record(b"key", bytes(range(256)) * 195)
    ((_, key, value_start, _, end),) = walk(record, 0, "p")
    assert checksum_matches(record, key, value_start, end)
    assert checksum_matches(memoryview(bytearray(record)), key, value_start, end)


# --- the tools' examination of a data file (summarize_log, in each kernel) ---


def summarize(kernel, dbpath, check=False, progress=None):
    with DataFile(str(dbpath / "data")) as data:
        return kernel.summarize_log(data.map, check, progress, "the-path"), data.size


def test_the_walk_counts_records_keys_and_live_bytes(kernel, dbpath):
    records = [
        put_record(b"a", b"1"),
        put_record(b"key", b""),
        delete_record(b"a"),
        put_record(b"", b"vv"),
    ]
    write_data(dbpath, *records)
    summary, size = summarize(kernel, dbpath)
    assert summary == LogSummary(
        records=4,
        end=size,
        corrupt_at=None,
        keys=2,
        live_bytes=len(records[1]) + len(records[3]),
        bad_checksums=[],
        expired_bytes=0,
        expiry_bytes=0,
    )
    assert size == H + sum(map(len, records))


def test_the_walk_reads_what_the_database_wrote(kernel, dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"k"] = b"v" * 100
        del db[b"k"]
        db[b"other"] = b"x"
    summary, size = summarize(kernel, dbpath, check=True)
    assert (summary.records, summary.keys, summary.end, summary.bad_checksums) == (
        CHECKPOINT_RECORDS + 3, 1, size, []
    )


@pytest.mark.parametrize("flip", ["key", "value", "checksum", "delete"])
def test_checksums_are_checked_when_asked(kernel, dbpath, flip):
    good = put_record(b"good", b"value")
    bad = bytearray(delete_record(b"gone") if flip == "delete" else put_record(b"key", b"value"))
    position = {"key": 8, "value": 12, "checksum": len(bad) - 1, "delete": 9}[flip]
    bad[position] ^= 0x01
    write_data(dbpath, good, bytes(bad), good)
    checked, _ = summarize(kernel, dbpath, check=True)
    # A damaged key is another key: still the live value of that key, if a put.
    assert checked.bad_checksums == [(H + len(good), flip != "delete")]
    unchecked, _ = summarize(kernel, dbpath)
    assert unchecked.bad_checksums == []


@pytest.mark.parametrize("cut", [1, 7, 8, 12, 15])
def test_walk_stops_before_an_incomplete_last_record(kernel, dbpath, cut):
    whole = put_record(b"a", b"1")
    write_data(dbpath, whole, put_record(b"key", b"value")[:cut])
    summary, size = summarize(kernel, dbpath)
    assert summary.records == 1
    assert summary.end == H + len(whole) and size == summary.end + cut


@pytest.mark.parametrize("lengths", [(-1, 0), (0, -2), (-5, -5)])
def test_impossible_lengths_stop_the_walk_at_their_offset(kernel, dbpath, lengths):
    whole = put_record(b"a", b"1")
    write_data(dbpath, whole, struct.pack("!ii", *lengths) + b"x" * 20)
    summary, _ = summarize(kernel, dbpath, check=True)
    assert summary.corrupt_at == summary.end == H + len(whole)
    assert (summary.records, summary.keys) == (1, 1)


def test_the_walk_reports_progress_in_bytes_up_to_where_it_stopped(kernel, dbpath):
    records = [put_record(b"%d" % number, b"v" * 5000) for number in range(600)]
    write_data(dbpath, *records, b"\x00\x00\x00")
    calls = []
    summary, size = summarize(kernel, dbpath, progress=lambda *call: calls.append(call))
    assert calls[-1] == (summary.end, size) == (size - 3, size)
    assert len(calls) >= 3 and [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_an_exception_from_progress_ends_the_walk(kernel, dbpath):
    write_data(dbpath, *[put_record(b"%d" % number, b"v" * 5000) for number in range(600)])

    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        summarize(kernel, dbpath, progress=stop)


@pytest.mark.parametrize("data", [b"", b"SEMI", HEADER[:-1]])
def test_the_walk_of_less_than_a_header_is_value_error(kernel, data):
    with pytest.raises(ValueError, match="at least its 8-byte header"):
        kernel.summarize_log(data, True, None, "p")


@compiled_only
@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.binary(max_size=3), st.one_of(st.none(), st.binary(max_size=40))),
        max_size=25,
    ),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
    st.integers(0, 64),
)
def test_both_kernels_walk_any_file_alike(steps, flips, zeros):
    """Records, then damage: flipped bytes and a zero tail (a power cut's), as both read them."""
    data = bytearray(HEADER)
    for key, value in steps:
        data += delete_record(key) if value is None else put_record(key, value)
    for position, byte in flips:
        if len(data) > H:
            data[H + position % (len(data) - H)] = byte
    data += bytes(zeros)
    for check in (False, True):
        python, cython = (
            _kernel.load(name).summarize_log(bytes(data), check, None, "p")
            for name in ("python", "cython")
        )
        assert python == cython


@pytest.mark.parametrize("header", [b"", b"SEM", b"NOPE\x00\x01\x00\x01", b"SEMI\x00\x03\x00\x00"])
def test_a_file_that_is_not_a_data_file_is_load_error(dbpath, header):
    write_data(dbpath, header=header)
    with pytest.raises(semidbm.DBMLoadError):
        DataFile(str(dbpath / "data"))


def test_version_is_read_from_the_header(dbpath):
    write_data(dbpath, put_record(b"a", b"1"), header=b"SEMI\x00\x01\x00\x07")
    with DataFile(str(dbpath / "data")) as data:
        assert data.version == (1, 7)


# --- examine: the numbers of stats, the findings of verify ---


def test_examine_counts_live_and_dead_bytes(dbopen, dbpath):
    a1, b, a2, gone = (
        put_record(b"a", b"1" * 200),
        put_record(b"b", b"22"),
        put_record(b"a", b"333"),
        delete_record(b"b"),
    )
    write_data(dbpath, a1, b, a2, gone)
    found = _examine.examine(dbpath)
    assert (found.keys, found.records) == (1, 4)
    assert found.live_bytes == len(a2)
    assert found.dead_bytes == len(a1) + len(b) + len(gone)
    assert found.file_size == H + len(a1 + b + a2 + gone)
    assert found.version == (1, 1)
    assert not found.damaged
    # The log has no checkpoint: the compaction writes one, and frees the rest.
    assert found.reclaimable == found.file_size - _checkpoint.START_SIZE - len(a2) > 0
    with dbopen(dbpath, "w") as db:
        db.compact()
    assert os.path.getsize(dbpath / "data") == found.file_size - found.reclaimable


def test_after_compaction_nothing_is_reclaimable(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        for number in range(300):
            db[b"%d" % number] = b"x" * number
        for number in range(0, 300, 3):
            del db[b"%d" % number]
        db.sync()  # the walk reads the file, not the writer's buffer
        before = _examine.examine(dbpath)
        assert before.reclaimable > 0
        db.compact()
        after = _examine.examine(dbpath)
    assert after.reclaimable == 0
    assert after.dead_bytes == _checkpoint.START_SIZE - H, "only the first checkpoint is dead"
    assert after.keys == before.keys == 200
    assert after.live_bytes == before.live_bytes
    assert after.file_size == _checkpoint.START_SIZE + after.live_bytes
    assert after.file_size == before.file_size - before.reclaimable


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([b"a", b"b", b"c", b""]), st.one_of(st.none(), st.binary(max_size=30))
        ),
        max_size=30,
    )
)
def test_examine_agrees_with_the_database(tmp_path_factory, steps):
    path = tmp_path_factory.mktemp("db") / "d.db"
    with semidbm.open(path, "c") as db:
        for key, value in steps:
            if value is None:
                db.pop(key, None)
            else:
                db[key] = value
        expected = {key: db[key] for key in db.keys()}
    found = _examine.examine(path, check_checksums=True)
    assert found.keys == len(expected)
    assert found.live_bytes == sum(12 + len(key) + len(value) for key, value in expected.items())
    assert not found.damaged


def test_bad_checksums_are_reported_with_whether_they_are_live(dbpath):
    old, other, new = put_record(b"k", b"old"), put_record(b"o", b"x"), put_record(b"k", b"new")
    damaged_old, damaged_other = bytearray(old), bytearray(other)
    damaged_old[-5] ^= 0xFF
    damaged_other[-5] ^= 0xFF
    write_data(dbpath, bytes(damaged_old), bytes(damaged_other), new)
    found = _examine.examine(dbpath, check_checksums=True)
    assert found.bad_checksums == [(H, False), (H + len(old), True)]
    assert found.damaged
    assert _examine.examine(dbpath).bad_checksums == []  # not checked, not found


def test_corruption_stops_the_walk_and_is_damage(dbpath):
    whole = put_record(b"a", b"1")
    write_data(dbpath, whole, struct.pack("!ii", -3, 0) + b"rest")
    found = _examine.examine(dbpath, check_checksums=True)
    assert found.corrupt_at == H + len(whole)
    assert (found.keys, found.records, found.tail) == (1, 1, 0)
    assert found.damaged


def test_torn_tail_is_damage_unless_a_writer_is_at_work(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"a"] = b"1"
    with open(dbpath / "data", "ab") as data:
        data.write(put_record(b"b", b"2")[:-2])
    found = _examine.examine(dbpath)
    assert (found.tail_offset, found.tail) == (_checkpoint.START_SIZE + 14, 12)
    assert found.damaged and not found.writer_active and not found.tail_needs_recover
    with pytest.warns(semidbm.TornTailWarning):
        writer = dbopen(dbpath, "w")  # cuts the tail; now append a partial record as a write would
    with open(dbpath / "data", "ab") as data:
        data.write(b"\x00\x00")
    found = _examine.examine(dbpath)
    assert found.writer_active and found.tail == 2 and not found.damaged
    writer.close()


def test_examine_changes_nothing(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"a"] = b"1"
    before = sorted(path.name for path in dbpath.iterdir()), data_bytes(dbpath)
    _examine.examine(dbpath, check_checksums=True)
    assert (sorted(path.name for path in dbpath.iterdir()), data_bytes(dbpath)) == before


def test_examine_of_a_missing_database_is_module_error(tmp_path):
    with pytest.raises(semidbm.error, match="no semidbm database"):
        _examine.examine(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()


def test_examine_reports_progress_in_bytes(dbpath):
    write_data(dbpath, put_record(b"a", b"1"), put_record(b"b", b"2"))
    calls = []
    _examine.examine(dbpath, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(H + 28, H + 28)]  # every PROGRESS_STEP bytes, and at the end
