"""The keys in byte order as lines of text (``Store._sorted_lines``), in each kernel.

What ``semidbm keys`` and dumps are made of: checked against Python's
``sorted`` and the dump's field encoding (``_fields``), over keys that
take each path of the compiled kernel's radix sort.
"""

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import semidbm
from semidbm import _examine, _fields, _kernel

from .conftest import IMPLEMENTATIONS

pytestmark = pytest.mark.kernel_logic

#: Keys with runs of shared bytes, of every length around the eight the compiled kernel keeps.
KEYS = st.lists(
    st.builds(
        lambda prefix, rest: prefix + rest,
        st.sampled_from([b"", b"a", b"user:", b"\x00" * 7, b"longer-shared-prefix/", b"\xff" * 9]),
        st.binary(max_size=12),
    ),
    unique=True,
    max_size=120,
)


def expected_lines(database, form):
    make_line = _fields.LINE_FORMS[form]
    return b"".join(make_line(key, database[key]) for key in sorted(database.keys()))


def joined(database, form, progress=None):
    count, chunks = database._sorted_lines(form, progress)
    parts = list(chunks)
    assert sum(lines for lines, _ in parts) == count == len(database)
    return b"".join(chunk for _, chunk in parts)


@settings(max_examples=60, deadline=None)
@given(keys=KEYS, values=st.lists(st.binary(max_size=20), min_size=120, max_size=120))
@pytest.mark.parametrize("form", list(_fields.LINE_FORMS))
@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_lines_are_the_sorted_keys_in_each_form(tmp_path_factory, name, form, keys, values):
    path = tmp_path_factory.mktemp("db") / "d.db"
    with semidbm.db.open_with(_kernel.load(name), path, "n") as database:
        for key, value in zip(keys, values):
            database[key] = value
        database.sync()
        for key in keys[::3]:  # overwritten: the lines show the new value
            database[key] = b"new " + key
        assert joined(database, form) == expected_lines(database, form)


@pytest.mark.parametrize("form", list(_fields.LINE_FORMS))
def test_keys_branching_at_every_byte_are_sorted(dbopen, dbpath, form):
    """2**17 keys of a and b: a split at each byte, deeper than the radix sort goes (heap sort)."""
    with dbopen(dbpath, "n") as database:
        for letters in itertools.product(b"ab", repeat=17):
            database[bytes(letters)] = b"%d" % letters[-1]
        database[b"a"] = b"short"
        database[b""] = b"empty key"
        assert joined(database, form) == expected_lines(database, form)


def test_equal_prefixes_longer_than_eight_bytes_compare_in_the_log(dbopen, dbpath):
    keys = [b"p" * 8 + bytes([byte]) * length for byte in (0, 1, 255) for length in range(1, 4)]
    keys.append(b"p" * 8)
    with dbopen(dbpath, "n") as database:
        for key in reversed(keys):
            database[key] = b""
        assert joined(database, "keys") == b"".join(key + b"\n" for key in sorted(keys))


def test_large_groups_past_each_run_of_eight_bytes(dbopen, dbpath):
    """Groups larger than the small sort at depths 8, 16... and 255 (where a key's length is
    read in the log), and keys that share every byte but their ends: the compiled kernel's
    prefixes move on eight bytes at a time, and its passes skip the bytes every key shares."""
    runs = [b"r" * 7, b"r" * 8, b"shared-run-of-seventeen/"[:17], b"q" * 254, b"q" * 255]
    keys = {run + bytes([a, b]) * c for run in runs for a in (0, 7, 255) for b in (0, 9)
            for c in range(8)}
    keys |= {run[:-1] for run in runs} | {b"q" * 256 + bytes([byte]) for byte in range(40)}
    keys |= {b"z" + b"\x00" * length for length in range(40)}  # apart only by where they end
    with dbopen(dbpath, "n") as database:
        for key in keys:
            database[key] = b""
        assert joined(database, "keys") == b"".join(key + b"\n" for key in sorted(keys))


def test_an_empty_database_has_no_lines(dbopen, dbpath):
    with dbopen(dbpath, "n") as database:
        count, chunks = database._sorted_lines("dump")
        assert (count, list(chunks)) == (0, [])


def test_an_unknown_form_is_value_error(dbopen, dbpath):
    with dbopen(dbpath, "n") as database, pytest.raises(ValueError, match="no form of lines"):
        database._sorted_lines("values")


def many_keys(database, count=6000):
    """Keys long enough for several chunks in both kernels."""
    for number in range(count):
        database[b"%0300d" % number] = b"v"


@pytest.mark.parametrize(
    "change",
    ["add", "delete", "compact", "close"],
)
def test_a_change_between_chunks_stops_the_lines(dbopen, dbpath, change):
    with dbopen(dbpath, "n") as database:
        many_keys(database)
        _, chunks = database._sorted_lines("dump")
        next(chunks)
        if change == "add":
            database[b"new"] = b"1"
        elif change == "delete":
            del database[b"%0300d" % 5999]
        elif change == "compact":
            database.compact()
        else:
            database.close()
        error = semidbm.error if change == "close" else RuntimeError
        with pytest.raises(error, match="closed during iteration|changed during iteration"):
            list(chunks)


def test_a_value_assigned_after_the_call_is_not_seen(dbopen, dbpath):
    with dbopen(dbpath, "n") as database:
        many_keys(database)
        _, chunks = database._sorted_lines("dump")
        database[b"%0300d" % 5999] = b"later"
        text = b"".join(chunk for _, chunk in chunks)
    assert text.endswith(b"%0300d v\n" % 5999)


def test_progress_follows_the_sort_and_may_stop_it(dbopen, dbpath):
    with dbopen(dbpath, "n") as database:
        many_keys(database)
        calls = []
        count, _ = database._sorted_lines("keys", lambda *call: calls.append(call))
        done = [call[0] for call in calls]
        assert calls[-1] == (count, count) and done == sorted(done)
        assert {call[1] for call in calls} == {count}

        def stop(done, total):
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            database._sorted_lines("keys", stop)

        def add(done, total):
            database[b"added %d" % done] = b""

        with pytest.raises(RuntimeError, match="changed during iteration"):
            database._sorted_lines("keys", add)


def test_a_damaged_value_is_checksum_error_at_the_offset_verify_reports(dbopen, dbpath):
    with dbopen(dbpath, "n") as database:
        database[b"first"] = b"1"
        database[b"key"] = b"value"
    data = bytearray((dbpath / "data").read_bytes())
    data[data.index(b"value")] ^= 0x01
    (dbpath / "data").write_bytes(bytes(data))
    ((offset, live),) = _examine.examine(dbpath, check_checksums=True).bad_checksums
    assert live
    with dbopen(dbpath, "r", verify_checksums=True) as database:
        with pytest.raises(semidbm.DBMChecksumError) as read:
            database[b"key"]
        _, chunks = database._sorted_lines("dump")
        with pytest.raises(semidbm.DBMChecksumError) as dumped:
            list(chunks)
    for caught in (read, dumped):
        assert re.search(r"record of key b'key' at offset (\d+)", str(caught.value)).group(1) == (
            str(offset)
        )
