"""An index file answers only for the log it was written for (docs/FORMAT.md, "The log id").

A program that rebuilds its database with ``'n'`` every night writes
logs that differ in a record or two, with the same lengths everywhere
else. Before the log id, last night's ``data`` put back beside
tonight's ``index`` (a restore from a backup, an rsync that copied one
file before the rebuild and the other after) passed the index's checks:
a key only in the restored log read as missing while ``keys()`` listed
it, an updated key gave its other value, and a writer's close or
compaction then wrote the wrong table out for good.

Each case here puts one log beside another's index, then, on the kernel
under test: a reader's answers, a writer's open (which removes the
refused index), its close (the compiled kernel writes a new index) and
a compaction, every answer compared with a full replay of the data file
alone (the pure kernel, which never reads an index, on a copy of
``data`` in a directory of its own). semidbm 0.5.1's ``'n'`` and
compaction, which leave the index beside a log of their own, run in its
interpreter (v051_support).
"""

import os
import random
import shutil
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import semidbm
from semidbm import _files, _index, _kernel, _log_id, _settings, db
from semidbm.format import DATA_NAME, INDEX_NAME

from .conftest import compiled_only
from .v051_support import apply_v051

PURE = _kernel.load("python")


@pytest.fixture(autouse=True)
def index_at_every_close(monkeypatch):
    """Every close writes an index: the 4 MiB bound saves time, it does not decide what is right."""
    monkeypatch.setattr(_settings, "INDEX_MIN_TAIL", 0)


def compiled():
    """The compiled kernel: the one that writes index files."""
    return _kernel.load("cython")


def nightly(path, items):
    """The program: rebuild the database at ``path`` with ``'n'`` from ``items``, then close."""
    with db.open_with(compiled(), str(path), "n") as database:
        for key, value in items:
            database[key] = value
    assert (path / INDEX_NAME).exists(), "the close wrote no index"


def replay_of(data_path, scratch):
    """What a full replay of the data file ``data_path`` alone gives: a dict."""
    alone = scratch / "replayed"
    shutil.rmtree(alone, ignore_errors=True)
    alone.mkdir()
    shutil.copyfile(data_path, alone / DATA_NAME)
    with db.open_with(PURE, str(alone), "r") as database:
        return dict(database.items())


def assert_answers(database, expected, asked):
    """Every way of reading ``database`` agrees with ``expected``, for every key in ``asked``."""
    for key in asked:
        assert (key in database) == (key in expected), key
        assert database.get(key) == expected.get(key), key
    assert len(database) == len(expected)
    assert sorted(database.keys()) == sorted(expected)
    assert dict(database.items()) == expected


def check_beside(kernel, data_from, index_from, work, asked):
    """Put ``data_from``'s data file beside ``index_from``'s index; every answer is the replay's.

    ``work`` gets a copy of ``index_from`` with the other data file. A
    reader first; then a writer, whose open removes the index it
    refuses (the data file may grow past what that index claims to
    cover, as here); its close; a reader again; a compaction; a reader.
    """
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(index_from, work)
    shutil.copyfile(data_from / DATA_NAME, work / DATA_NAME)
    expected = replay_of(work / DATA_NAME, work.parent)
    with db.open_with(kernel, str(work), "r") as database:
        assert database.index_covered == 0, "an index trusted for another log"
        assert_answers(database, expected, asked)
    with db.open_with(kernel, str(work), "w") as database:
        assert not (work / INDEX_NAME).exists(), "the writer kept the index it refused"
        assert_answers(database, expected, asked)
        grown = {b"grown-%04d" % number: os.urandom(40) for number in range(120)}
        database.update(grown)
        expected.update(grown)
    for kernel_used in (kernel, compiled()):
        with db.open_with(kernel_used, str(work), "r") as database:
            assert_answers(database, expected, asked)
    with db.open_with(kernel, str(work), "w") as database:
        database.compact()
        assert_answers(database, expected, asked)
    with db.open_with(compiled(), str(work), "r") as database:
        if kernel is not PURE:
            assert database.index_covered > 0, "the compaction wrote no index"
        assert_answers(database, expected, asked)
    assert replay_of(work / DATA_NAME, work.parent) == expected


# --- the nightly rebuild ------------------------------------------------------------

#: Keys of fixed width and values of one size: every record of a night has the same length.
NIGHT = [(b"id-%06d" % number, random.Random(number).randbytes(32)) for number in range(400)]


def with_new_key(items):
    """Another night: the same items and one new key in the middle."""
    middle = len(items) // 2
    return items[:middle] + [(b"id-new-0", b"n" * 32)] + items[middle:]


def with_same_size_update(items):
    """Another night: one key's value replaced by another of the same size."""
    changed = list(items)
    key, value = changed[len(items) // 2]
    changed[len(items) // 2] = (key, bytes(255 - byte for byte in value))
    return changed


@compiled_only
@pytest.mark.parametrize("change", [with_new_key, with_same_size_update])
@pytest.mark.parametrize("direction", ["last night's data", "tonight's data"])
def test_a_rebuild_beside_the_other_nights_index(kernel, tmp_path, change, direction):
    last, tonight = tmp_path / "last", tmp_path / "tonight"
    nightly(last, NIGHT)
    nightly(tonight, change(NIGHT))
    assert os.path.getsize(last / DATA_NAME) <= os.path.getsize(tonight / DATA_NAME)
    data_from, index_from = (last, tonight) if direction == "last night's data" else (tonight, last)
    asked = [key for key, _ in NIGHT] + [b"id-new-0", b"never"]
    check_beside(kernel, data_from, index_from, tmp_path / "mixed", asked)


@compiled_only
def test_the_same_program_twice_writes_two_logs_with_their_own_ids(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    nightly(first, NIGHT)
    nightly(second, NIGHT)
    starts = [(path / DATA_NAME).read_bytes() for path in (first, second)]
    ids = [_log_id.read(start) for start in starts]
    assert None not in ids and ids[0] != ids[1]
    assert starts[0][_log_id.START_SIZE:] == starts[1][_log_id.START_SIZE:]
    check_beside(compiled(), first, second, tmp_path / "mixed", [key for key, _ in NIGHT])


# --- a restored backup of the same log ----------------------------------------------------


@compiled_only
def test_a_backup_of_the_same_log_restored_beside_a_newer_index(kernel, tmp_path):
    """The backup is shorter than what the index covers: refused, then removed by a writer."""
    live = tmp_path / "live"
    nightly(live, NIGHT[:200])
    backup = (live / DATA_NAME).read_bytes()
    with db.open_with(compiled(), str(live), "w") as database:
        for key, value in NIGHT[200:]:
            database[key] = value
        del database[NIGHT[0][0]]
    assert _index_covered(live) > len(backup)
    (live / DATA_NAME).write_bytes(backup)  # cp data.bak data
    asked = [key for key, _ in NIGHT]
    check_beside(kernel, live, live, tmp_path / "restored", asked)


def _index_covered(path):
    """What the index at ``path`` covers, as a compiled reader opens it."""
    with db.open_with(compiled(), str(path), "r") as database:
        return database.index_covered


@compiled_only
def test_a_restored_backup_that_another_program_appended_to_is_refused(kernel, tmp_path):
    """A fork of one log: a backup taken before its last record, then a record of the same
    length, another key's, appended by a program that ignores the index (0.5.1). Same log
    id, same size: the sample of the bytes before ``covered`` is what refuses it (only that
    sample holds the last record)."""
    live = tmp_path / "live"
    nightly(live, NIGHT)
    data = (live / DATA_NAME).read_bytes()
    key, value = NIGHT[-1]
    other_key = b"id-999999"
    assert len(other_key) == len(key)
    last = data[-(len(key) + len(value) + 12):]
    assert last[8:8 + len(key)] == key
    other = last[:8] + other_key + value + zlib.crc32(other_key + value).to_bytes(4, "big")
    (live / DATA_NAME).write_bytes(data[:-len(last)] + other)
    asked = [key for key, _ in NIGHT] + [other_key]
    check_beside(kernel, live, live, tmp_path / "forked", asked)


def with_crc(data, at, target):
    """``data`` with its 4 bytes at ``at`` set so that its CRC-32 is ``target``.

    A CRC-32 of messages of one length is affine in their bits: the
    effect of each of the 32 bits on it is found by flipping it, and the
    bits to set by elimination over GF(2). So a CRC-32 proves nothing
    about bytes chosen to match it: the log id is compared whole.
    """
    base = bytearray(data)
    base[at:at + 4] = bytes(4)
    start = zlib.crc32(base)
    rows = []  # (effect, bits) with distinct leading bits, highest first
    for bit in range(32):
        probe = bytearray(base)
        probe[at + bit // 8] ^= 1 << (bit % 8)
        effect, bits = zlib.crc32(probe) ^ start, 1 << bit
        for row_effect, row_bits in rows:
            if effect ^ row_effect < effect:
                effect, bits = effect ^ row_effect, bits ^ row_bits
        if effect:
            rows = sorted(rows + [(effect, bits)], reverse=True)
    want, bits = target ^ start, 0
    for row_effect, row_bits in rows:
        if want ^ row_effect < want:
            want, bits = want ^ row_effect, bits ^ row_bits
    assert want == 0, "no 4 bytes there reach that CRC-32"
    base[at:at + 4] = bits.to_bytes(4, "little")
    assert zlib.crc32(base) == target
    return bytes(base)


def first_record_outside(ranges, record):
    """The number of the first of NIGHT's records (``record`` bytes each) outside ``ranges``."""
    for number in range(len(NIGHT)):
        start = _log_id.START_SIZE + number * record
        if all(start + record <= offset or start >= offset + length for offset, length in ranges):
            return number
    raise AssertionError("every record overlaps a range")


@compiled_only
def test_a_log_of_another_id_whose_samples_all_match_is_refused(kernel, tmp_path):
    """Another night's log, one key swapped for another of its length between the samples,
    and 4 bytes of a value forged so that the first sample's CRC-32 is the index's: only the
    log id tells the two logs apart, and a trusted index would read the new key as missing."""
    last, tonight = tmp_path / "last", tmp_path / "tonight"
    nightly(last, NIGHT)
    size = os.path.getsize(last / DATA_NAME)
    record = len(NIGHT[0][0]) + len(NIGHT[0][1]) + 12
    sampled = _index.sample_ranges(size)
    swapped = first_record_outside(sampled, record)
    patched = first_record_outside(sampled[1:], record)  # in the first sample only
    items = list(NIGHT)
    items[swapped] = (b"id-swap-0", NIGHT[swapped][1])
    nightly(tonight, items)
    edge = sampled[0][1]
    ours = (last / DATA_NAME).read_bytes()
    theirs = (tonight / DATA_NAME).read_bytes()
    value_at = _log_id.START_SIZE + patched * record + 8 + len(NIGHT[0][0])
    forged = with_crc(theirs[:edge], value_at, zlib.crc32(ours[:edge])) + theirs[edge:]
    (tonight / DATA_NAME).write_bytes(forged)
    for offset, length in sampled:
        sample = slice(offset, offset + length)
        assert zlib.crc32(forged[sample]) == zlib.crc32(ours[sample])
    asked = [key for key, _ in items] + [NIGHT[swapped][0]]
    check_beside(kernel, tonight, last, tmp_path / "mixed", asked)


# --- semidbm 0.5.1 -------------------------------------------------------------------


@compiled_only
@pytest.mark.parametrize("what", ["'n' with tonight's items", "'n' with the same items",
                                  "a compaction"])
def test_semidbm_0_5_1_leaves_our_index_beside_a_log_of_its_own(kernel, tmp_path, what):
    """0.5.1 removes only ``data`` at ``'n'``, and its compaction renames a new ``data`` in:
    our index stays, beside a log without a log id."""
    ours = tmp_path / "ours"
    nightly(ours, NIGHT)
    index = (ours / INDEX_NAME).read_bytes()
    if what == "a compaction":
        flag, ops = "c", [("set", NIGHT[7][0], b"u" * 32), ("del", NIGHT[8][0]), ("compact",)]
    else:
        flag = "n"
        items = with_same_size_update(NIGHT) if what.endswith("tonight's items") else NIGHT
        ops = [("set", key, value) for key, value in items]
    apply_v051(ours, flag, ops, tmp_path)
    assert (ours / INDEX_NAME).read_bytes() == index, "0.5.1 left the index alone"
    assert _log_id.read((ours / DATA_NAME).read_bytes()) is None
    check_beside(kernel, ours, ours, tmp_path / "after", [key for key, _ in NIGHT] + [b"never"])


# --- logs without an id -----------------------------------------------------------


@compiled_only
def test_a_log_without_an_id_gets_no_index(kernel, tmp_path):
    """A log that does not begin with the pair (0.5.1's) is replayed whole, and no index is
    written for it: none could prove it describes that log."""
    path = tmp_path / "db"
    nightly(path, NIGHT[:50])
    data = (path / DATA_NAME).read_bytes()
    (path / DATA_NAME).write_bytes(data[:8] + data[_log_id.START_SIZE:])  # the pair left out
    os.remove(path / INDEX_NAME)
    with db.open_with(kernel, str(path), "w") as database:
        database[b"more"] = b"x" * 100
    assert not (path / INDEX_NAME).exists()
    with db.open_with(compiled(), str(path), "w") as database:
        database.compact()  # a compaction gives the log an id, and its index
    assert _log_id.read((path / DATA_NAME).read_bytes()) is not None
    assert _index_covered(path) == os.path.getsize(path / DATA_NAME)


@pytest.mark.parametrize(
    "damage",
    [
        lambda start: start[:8] + start[9:] + b"\0",  # a length changed
        lambda start: start[:20] + b"X" + start[21:],  # the key changed
        lambda start: start[:-1] + bytes([start[-1] ^ 1]),  # the delete's checksum
        lambda start: start[:40] + bytes([start[40] ^ 1]) + start[41:],  # the id, not its checksum
        lambda start: start[:-1],  # cut short
    ],
    ids=["length", "key", "delete checksum", "id", "short"],
)
def test_only_the_exact_pair_is_a_log_id(damage):
    start = _log_id.new_log(1)
    assert len(start) == _log_id.START_SIZE
    assert _log_id.read(start) == start[32:48]
    assert _log_id.read(damage(start)) is None


def test_a_new_log_is_a_header_then_a_put_and_a_delete_that_leave_no_key(dbopen, tmp_path):
    path = tmp_path / "db"
    with dbopen(str(path), "c") as database:
        assert len(database) == 0 and _log_id.KEY not in database
        database[_log_id.KEY] = b"a user's value"  # the key stays free for users
    with dbopen(str(path), "r") as database:
        assert dict(database.items()) == {_log_id.KEY: b"a user's value"}
    with dbopen(str(path), "w") as database:
        database.compact()
        assert dict(database.items()) == {_log_id.KEY: b"a user's value"}


# --- the property: any two logs of one program, each beside the other's index ----------------

#: A night's small change to the items, by kind.
CHANGES = ["new key", "same-size update", "other-size update", "delete", "swap two", "same"]


@compiled_only
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    count=st.integers(min_value=1, max_value=120),
    change=st.sampled_from(CHANGES),
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_two_logs_of_one_program_each_beside_the_others_index(kernel, tmp_path, count, change,
                                                              where, seed):
    rng = random.Random(seed)
    items = [(b"k%05d" % number, rng.randbytes(24)) for number in range(count)]
    other = list(items)
    at = int(where * count)
    if change == "new key":
        other.insert(at, (b"k-new", rng.randbytes(24)))
    elif change == "same-size update":
        other[at] = (other[at][0], rng.randbytes(24))
    elif change == "other-size update":
        other[at] = (other[at][0], rng.randbytes(25))
    elif change == "delete":
        del other[at]
    elif change == "swap two":
        other[at], other[-1] = other[-1], other[at]
    work = tmp_path / ("example-%d" % seed)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    first, second = work / "first", work / "second"
    nightly(first, items)
    nightly(second, other)
    asked = sorted({key for key, _ in items + other} | {b"k-new", b"never"})
    check_beside(kernel, first, second, work / "mixed-1", asked)
    check_beside(kernel, second, first, work / "mixed-2", asked)



@compiled_only
def test_a_writer_that_cannot_remove_a_refused_index_does_not_open(kernel, tmp_path, monkeypatch):
    """Appending beside an index it refused could make that index pass its checks later: a
    writer that cannot remove it refuses to open, and leaves the database as it was."""
    last, tonight = tmp_path / "last", tmp_path / "tonight"
    nightly(last, NIGHT)
    nightly(tonight, with_new_key(NIGHT))
    shutil.copyfile(last / DATA_NAME, tonight / DATA_NAME)
    data = (tonight / DATA_NAME).read_bytes()

    def refuse(directory, name):
        raise PermissionError(13, "Permission denied", name)

    monkeypatch.setattr(_files.Directory, "remove", refuse)
    with pytest.raises(semidbm.error, match="cannot remove an index file"):
        db.open_with(kernel, str(tonight), "w")
    assert (tonight / INDEX_NAME).exists() and (tonight / DATA_NAME).read_bytes() == data
    with db.open_with(kernel, str(tonight), "r") as database:
        assert database.index_covered == 0
        assert dict(database.items()) == dict(NIGHT)
