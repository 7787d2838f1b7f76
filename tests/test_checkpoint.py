"""An index file answers only for the log it was written for (docs/FORMAT.md, "Checkpoints").

A program that rebuilds its database with ``'n'`` every night writes
logs that differ in a record or two, with the same lengths everywhere
else; two copies of one database, each written on, differ only past
where they were copied. Before checkpoints, last night's ``data`` put
back beside tonight's ``index`` (a restore from a backup, an rsync that
copied one file before the rebuild and the other after), or one copy's
``data`` beside the other's ``index``, passed the index file's checks: a key
only in that log read as missing while ``keys()`` listed it, an updated
key gave its other value, and a writer's close or compaction then wrote
the wrong table out for good.

Each case here puts one log beside another's index, then, on the kernel
under test: a reader's answers, a writer's open (which removes the
refused index file), its close (the compiled kernel writes a new index file) and
a compaction, every answer compared with a full replay of the data file
alone (the pure kernel, which never reads an index file, on a copy of
``data`` in a directory of its own). semidbm 0.5.1's ``'n'``,
compaction and appends run in its interpreter (tests/support/v051.py).
"""

import os
import random
import shutil
import sys
import threading
import types
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semidbm import _checkpoint, _files, _index_file, _kernel, _settings, db
from semidbm.format import DATA_NAME, DISK_SECTOR, HEADER_SIZE, INDEX_NAME

from .conftest import compiled_only
from .support.log import checkpoints_in, ending_checkpoint, first_checkpoint
from .support.v051 import apply_v051

pytestmark = pytest.mark.kernel_logic

PURE = _kernel.load("python")


@pytest.fixture(autouse=True)
def index_at_every_close(monkeypatch):
    """Every close writes an index file: the 4 MiB bound only saves time, it decides nothing."""
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


def check_beside(kernel, data_from, index_from, work, asked, damaged=()):
    """Put ``data_from``'s data file beside ``index_from``'s index; every answer is the replay's.

    ``work`` gets a copy of ``index_from`` with the other data file. A
    reader first; then a writer, whose open removes the index file it
    refuses (the data file may grow past what that index claims to
    cover, as here); its close; a reader again; a compaction; a reader.
    The keys ``damaged`` have records whose checksums a forgery broke:
    the compaction, told to recover, leaves them out.
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
        assert database.compact(recover=bool(damaged)) == len(damaged)
        for key in damaged:
            del expected[key]
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
def test_the_same_program_twice_writes_two_logs_with_their_own_checkpoints(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    nightly(first, NIGHT)
    nightly(second, NIGHT)
    logs = [(path / DATA_NAME).read_bytes() for path in (first, second)]
    ends = [ending_checkpoint(log) for log in logs]
    nonces = [first_checkpoint(log) for log in logs] + [
        _checkpoint.read(log[end:]) for log, end in zip(logs, ends)]
    assert None not in nonces and len(set(nonces)) == 4, "four checkpoints, four nonces"
    assert logs[0][_checkpoint.START_SIZE:ends[0]] == logs[1][_checkpoint.START_SIZE:ends[1]]
    check_beside(compiled(), first, second, tmp_path / "mixed", [key for key, _ in NIGHT])


# --- a restored backup of the same log ----------------------------------------------------


@compiled_only
def test_a_backup_of_the_same_log_restored_beside_a_newer_index(kernel, tmp_path):
    """The backup is shorter than what the index file covers: refused, then removed by a writer."""
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
    """What the index file at ``path`` covers, as a compiled reader opens it."""
    with db.open_with(compiled(), str(path), "r") as database:
        return database.index_covered


# --- two copies of one log, each written on ---------------------------------------------

#: Bytes of each of NIGHT's records: lengths, key, value, checksum.
RECORD = 12 + len(NIGHT[0][0]) + len(NIGHT[0][1])
#: Where the two copies part: NIGHT's first records are in both.
COPIED = 200
#: A key of NIGHT's width that only the other copy has.
OTHERS_KEY = b"id-999999"


def append(path, items):
    """A writer of the compiled kernel appends ``items`` to the database at ``path``, closes."""
    with db.open_with(compiled(), str(path), "w") as database:
        for key, value in items:
            database[key] = value


def appended_by_0_5_1(path, items):
    """semidbm 0.5.1 appends ``items``: a program that never reads the index file."""
    apply_v051(path, "w", [("set", key, value) for key, value in items], path.parent)


def fork(tmp_path, write_other):
    """Two copies of one log, each written on; the other copy's data beside ours's index.

    Ours appends NIGHT's last records (its close writes an index file for all of them). The other
    copy (a standby, a backup restored) appends the same records but one, where it has
    ``OTHERS_KEY`` (same length, same value), between the samples: ``write_other(path,
    items)`` writes them. Returns our directory, which now holds the other's data, and the
    keys to ask about (``OTHERS_KEY`` first: a lookup of the key it replaced would meet a
    slot whose record is another key's, and drop the index file).
    """
    ours, other = tmp_path / "ours", tmp_path / "other"
    with db.open_with(compiled(), str(ours), "n") as database:
        database.update(dict(NIGHT[:COPIED]))
    shutil.copytree(ours, other)
    start = os.path.getsize(ours / DATA_NAME)
    append(ours, NIGHT[COPIED:])
    covered = os.path.getsize(ours / DATA_NAME)
    ranges = _index_file.sample_ranges(covered)
    at = next(number for number in range(COPIED, len(NIGHT))
              if outside(start + (number - COPIED) * RECORD, RECORD, ranges))
    changed = list(NIGHT)
    changed[at] = (OTHERS_KEY, NIGHT[at][1])
    write_other(other, changed[COPIED:])
    shutil.copyfile(other / DATA_NAME, ours / DATA_NAME)  # rsync -u, cp of data alone
    return ours, [OTHERS_KEY] + [key for key, _ in NIGHT]


def outside(start, size, ranges):
    """True if the ``size`` bytes at ``start`` overlap none of the ``(offset, length)`` ranges."""
    return all(start + size <= offset or start >= offset + length for offset, length in ranges)


@compiled_only
@pytest.mark.parametrize("writer", [append, appended_by_0_5_1],
                         ids=["this semidbm", "semidbm 0.5.1"])
def test_a_copy_written_on_beside_the_other_copys_index(kernel, tmp_path, writer):
    """The other copy has the same first checkpoint, and, with this semidbm, a checkpoint
    at the same offset, of its own nonce; 0.5.1 writes none there. Either way the index file
    names a checkpoint the other copy does not hold."""
    mixed, asked = fork(tmp_path, writer)
    check_beside(kernel, mixed, mixed, tmp_path / "mixed", asked)


def with_crc(data, at, target):
    """``data`` with its 4 bytes at ``at`` set so that its CRC-32 is ``target``.

    A CRC-32 of messages of one length is affine in their bits: the
    effect of each of the 32 bits on it is found by flipping it, and the
    bits to set by elimination over GF(2). So a CRC-32 proves nothing
    about bytes chosen to match it: a checkpoint's nonce is compared whole.
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


def record_outside(ranges, within):
    """The number of the first of NIGHT's records that lies within the range ``within``
    (``(offset, length)``) and outside every one of ``ranges``."""
    for number in range(len(NIGHT)):
        start = _checkpoint.START_SIZE + number * RECORD
        if outside(start, RECORD, ranges) and not outside(start, RECORD, [within]):
            if within[0] <= start and start + RECORD <= within[0] + within[1]:
                return number
    raise AssertionError("no such record")


@compiled_only
def test_a_log_whose_samples_all_match_but_not_its_checkpoint_is_refused(kernel, tmp_path):
    """Another night's log, one key swapped for another of its length between the samples,
    and 4 bytes of two values forged so that the first and last samples' CRC-32s are the
    index's (the nonces of both nights' checkpoints lie in them): only the checkpoint tells
    the two logs apart, and a trusted index file would read the new key as missing."""
    last, tonight = tmp_path / "last", tmp_path / "tonight"
    nightly(last, NIGHT)
    size = os.path.getsize(last / DATA_NAME)
    sampled = _index_file.sample_ranges(size)
    swapped = record_outside(sampled, (0, size))
    items = list(NIGHT)
    items[swapped] = (b"id-swap-0", NIGHT[swapped][1])
    nightly(tonight, items)
    ours = (last / DATA_NAME).read_bytes()
    forged = (tonight / DATA_NAME).read_bytes()
    damaged = []
    for edge in (sampled[0], sampled[-1]):
        patched = record_outside(sampled[1:-1], edge)
        damaged.append(items[patched][0])
        value_at = _checkpoint.START_SIZE + patched * RECORD + 8 + len(NIGHT[0][0]) - edge[0]
        part = slice(edge[0], edge[0] + edge[1])
        forged = (forged[:part.start] + with_crc(forged[part], value_at, zlib.crc32(ours[part]))
                  + forged[part.stop:])
    (tonight / DATA_NAME).write_bytes(forged)
    for offset, length in sampled:
        sample = slice(offset, offset + length)
        assert zlib.crc32(forged[sample]) == zlib.crc32(ours[sample])
    asked = [key for key, _ in items] + [NIGHT[swapped][0]]
    check_beside(kernel, tonight, last, tmp_path / "mixed", asked, damaged)


# --- semidbm 0.5.1 -------------------------------------------------------------------


@compiled_only
@pytest.mark.parametrize("what", ["'n' with tonight's items", "'n' with the same items",
                                  "a compaction"])
def test_semidbm_0_5_1_leaves_our_index_beside_a_log_of_its_own(kernel, tmp_path, what):
    """0.5.1 removes only ``data`` at ``'n'``, and its compaction renames a new ``data`` in:
    our index stays, beside a log without checkpoints."""
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
    assert first_checkpoint((ours / DATA_NAME).read_bytes()) is None
    check_beside(kernel, ours, ours, tmp_path / "after", [key for key, _ in NIGHT] + [b"never"])


# --- logs without checkpoints, and the pair itself ---------------------------------------


@compiled_only
def test_a_log_without_checkpoints_gets_an_index_naming_the_one_its_close_writes(kernel, tmp_path):
    """A log that 0.5.1 (or a semidbm before checkpoints) created has none: the compiled
    kernel's close appends one and writes an index file that names it."""
    path = tmp_path / "db"
    nightly(path, NIGHT[:50])
    data = (path / DATA_NAME).read_bytes()
    records = data[_checkpoint.START_SIZE:ending_checkpoint(data)]
    (path / DATA_NAME).write_bytes(data[:HEADER_SIZE] + records)  # the checkpoints left out
    os.remove(path / INDEX_NAME)
    with db.open_with(kernel, str(path), "w") as database:
        database[b"more"] = b"x" * 100
    data = (path / DATA_NAME).read_bytes()
    if kernel is PURE:
        assert not (path / INDEX_NAME).exists()
    else:
        assert ending_checkpoint(data) is not None
        assert _index_covered(path) == len(data)
    with db.open_with(compiled(), str(path), "r") as database:
        assert dict(database.items()) == {**dict(NIGHT[:50]), b"more": b"x" * 100}


@pytest.mark.parametrize(
    "damage",
    [
        lambda pair: pair[:1] + b"\1" + pair[2:],  # a length changed
        lambda pair: pair[:10] + b"X" + pair[11:],  # the prefix changed
        lambda pair: pair[:-1] + bytes([pair[-1] ^ 1]),  # the delete's checksum
        lambda pair: pair[:30] + bytes([pair[30] ^ 1]) + pair[31:],  # the nonce, in the put only
        lambda pair: pair[: len(pair) // 2] * 2,  # two puts
        lambda pair: pair[:-1],  # cut short
    ],
    ids=["length", "prefix", "delete checksum", "nonce", "two puts", "short"],
)
@pytest.mark.parametrize("offset", [HEADER_SIZE, 512 - 60, 512 - 44, 512 - 30])
def test_only_the_exact_pair_is_a_checkpoint(damage, offset):
    pair = _checkpoint.new(offset)
    assert _checkpoint.parse(pair) == (pair[24:40], len(pair))
    assert _checkpoint.parse(pair + b"more") == (pair[24:40], len(pair))
    assert _checkpoint.read(damage(pair)) is None


def test_a_checkpoint_never_shows_its_key_across_a_sector(tmp_path):
    """Wherever it is written, the delete reaches no 512-byte sector that the put does not:
    a power cut that keeps the put whole (a disk writes a sector whole or not at all) keeps
    the delete."""
    sizes = set()
    for offset in range(HEADER_SIZE, HEADER_SIZE + 2 * DISK_SECTOR):
        pair = _checkpoint.new(offset)
        sizes.add(len(pair))
        put_end = offset + len(pair) // 2
        assert (offset + len(pair) - 1) // DISK_SECTOR == (put_end - 1) // DISK_SECTOR, offset
        assert _checkpoint.parse(pair)[1] == len(pair) <= _checkpoint.MAX_SIZE
    assert min(sizes) == _checkpoint.SIZE and len(sizes) > 1, "padded where it must be"
    assert len(_checkpoint.new_log(1)) == _checkpoint.START_SIZE


def test_a_checkpoint_leaves_no_key_and_every_key_stays_free(dbopen, tmp_path):
    path = tmp_path / "db"
    shaped = _checkpoint.PREFIX + bytes(_checkpoint.NONCE_SIZE)  # a key shaped like theirs
    with dbopen(str(path), "c") as database:
        assert len(database) == 0 and list(database.keys()) == []
        database[shaped] = b"a user's value"
        database[_checkpoint.PREFIX] = b"another"
    expected = {shaped: b"a user's value", _checkpoint.PREFIX: b"another"}
    with dbopen(str(path), "r") as database:
        assert dict(database.items()) == expected
    with dbopen(str(path), "w") as database:
        database.compact()
        assert dict(database.items()) == expected


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
def test_a_writer_opens_beside_a_refused_index_it_cannot_remove(kernel, tmp_path, monkeypatch):
    """A refused index file stays refused however the log grows (it names a checkpoint the log
    does not hold where it says), so failing to remove it (a directory the writer may not
    change) does not keep the writer from opening, nor makes it trusted later."""
    last, tonight = tmp_path / "last", tmp_path / "tonight"
    nightly(last, NIGHT)
    nightly(tonight, with_new_key(NIGHT))
    shutil.copyfile(last / DATA_NAME, tonight / DATA_NAME)

    def refuse(directory, name):
        raise PermissionError(13, "Permission denied", name)

    monkeypatch.setattr(_files.Directory, "remove", refuse)
    grown = {b"grown-%04d" % number: os.urandom(40) for number in range(300)}
    with db.open_with(kernel, str(tonight), "w") as database:
        assert (tonight / INDEX_NAME).exists()
        database.update(grown)
    with db.open_with(compiled(), str(tonight), "r") as database:
        assert dict(database.items()) == {**dict(NIGHT), **grown}


# --- threads: a compiled writer's sync() is busy while it appends a checkpoint and names it ----


def sector_rule_holds(offset, size):
    """The delete of the checkpoint at ``offset`` reaches no sector its put does not."""
    return (offset + size - 1) // DISK_SECTOR <= (offset + size // 2 - 1) // DISK_SECTOR


def started(action):
    """``action`` in a thread of its own, started: what a switch of the GIL lets run."""
    worker = threading.Thread(target=action)
    worker.start()
    return worker


@compiled_only
def test_a_write_while_the_nonce_is_drawn_waits_for_the_sync(tmp_path, monkeypatch):
    """Drawing the nonce (``os.urandom``) releases the GIL after the checkpoint's padding was
    chosen for where the log ends: another thread's write then waits, so the checkpoint lands
    where its padding was chosen for, and a power cut that keeps its put keeps its delete."""
    path = tmp_path / "db"
    database = db.open_with(compiled(), str(path), "c")
    first = b"a" * (DISK_SECTOR - _checkpoint.START_SIZE - 12 - 1)
    database[b"a"] = first  # the log now ends on a sector boundary
    other = b"b" * (DISK_SECTOR - 50 - 13)  # would leave 50 bytes of the next sector
    workers = []
    real = _checkpoint.os.urandom

    def urandom(size):
        workers.append(started(lambda: database.__setitem__(b"b", other)))
        return real(size)

    monkeypatch.setattr(_checkpoint, "os", types.SimpleNamespace(urandom=urandom))
    database.sync()
    monkeypatch.undo()
    workers[0].join(10)
    database.close()
    data = (path / DATA_NAME).read_bytes()
    assert all(sector_rule_holds(*found) for found in checkpoints_in(data))
    with db.open_with(compiled(), str(path), "r") as reopened:
        assert dict(reopened.items()) == {b"a": first, b"b": other}
        assert not [key for key in reopened.keys() if key.startswith(_checkpoint.PREFIX)]


@compiled_only
def test_a_write_while_the_fsync_starts_is_not_covered_by_the_index(tmp_path, monkeypatch):
    """The index names the checkpoint that ends what it covers: a record another thread writes
    straight to the file while the fsync starts waits, and lands past ``covered``."""
    path = tmp_path / "db"
    database = db.open_with(compiled(), str(path), "c", buffer_size=4096)
    database[b"a"] = b"1"
    workers = []
    real = _files.BackgroundFsync

    def background_fsync(fd):
        workers.append(started(lambda: database.__setitem__(b"big", b"x" * 10000)))
        return real(fd)

    monkeypatch.setattr(_files, "BackgroundFsync", background_fsync)
    database.sync()
    monkeypatch.undo()
    workers[0].join(10)
    database.close()
    data = (path / DATA_NAME).read_bytes()
    covered = int.from_bytes((path / INDEX_NAME).read_bytes()[24:32], "little")
    offset, size = checkpoints_in(data[:covered])[-1]
    assert covered == offset + size < len(data)


@compiled_only
def test_threads_writing_through_syncs_keep_every_checkpoint_whole(tmp_path):
    """No patching: a thread writes while another syncs, under a short switch interval."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for attempt in range(200):
            path = tmp_path / str(attempt)
            database = db.open_with(compiled(), str(path), "c", buffer_size=4096)
            stop = threading.Event()

            def write(database=database, stop=stop):
                count = 0
                while not stop.is_set():
                    database[b"k%d" % count] = b"v" * (count % 97)
                    count += 1

            writer = started(write)
            try:
                for _ in range(4):
                    database.sync()
            finally:
                stop.set()
                writer.join()
            database.close()
            data = (path / DATA_NAME).read_bytes()
            broken = [found for found in checkpoints_in(data) if not sector_rule_holds(*found)]
            assert not broken, (attempt, broken)
    finally:
        sys.setswitchinterval(previous)
