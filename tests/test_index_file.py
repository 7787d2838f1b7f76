"""The index file's header, its trust check, and where it is installed and removed.

docs/FORMAT.md, "The index file": ``semidbm._index_file`` encodes the header,
decides whether an open may trust ``index`` (the checks 1 and 2), and
swaps a new index file in; a compaction and ``'n'`` remove the old one
before they replace the log. The indexes made here have an empty table
(every slot zero, the block checksums right), which is a valid table:
the checks looked at here are the header's and the samples'.
"""

import contextlib
import errno
import os
import shutil
import stat
import struct
import sys
import zlib

import pytest

import semidbm
from semidbm import _checkpoint, _files, _index_file, _kernel, _settings, db
from semidbm.format import DATA_NAME, HEADER_SIZE, INDEX_NAME, INDEX_TEMP_NAME

from .conftest import NO_EXTENSIONS
from .support.log import first_checkpoint

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX file types and permissions")

#: The seed the index files made here carry.
SEED = 0x0123456789ABCDEF


def write_database(path, count=300, rounds=3, tag=b""):
    """Make a database at ``path`` whose keys were each set ``rounds`` times (pure kernel).

    Values overwritten leave records a compaction drops, so a compacted
    log is shorter than this one.
    """
    with db.open_with(_kernel.load("python"), path, "c") as database:
        for round_ in range(rounds):
            for number in range(count):
                database[b"key%d" % number] = tag + b"value %d of round %d" % (number, round_)
    return path


def empty_body(capacity):
    """The slots of an empty table of ``capacity`` slots, then each block's CRC-32."""
    slots = bytes(_index_file.SLOT_SIZE * capacity)
    step = _index_file.SLOT_SIZE * _index_file.BLOCK_SLOTS
    checksums = [zlib.crc32(slots[start : start + step]) for start in range(0, len(slots), step)]
    return slots + b"".join(struct.pack("<I", checksum) for checksum in checksums)


@contextlib.contextmanager
def opened(path):
    """The data file of the database ``path``, open read-only: ``(Directory, fd, size)``."""
    directory = _files.Directory(str(path))
    fd = directory.open_data(False)
    try:
        yield directory, fd, os.fstat(fd).st_size
    finally:
        os.close(fd)
        directory.close()


def make_header(path, covered=None, count=0, capacity=_index_file.MIN_CAPACITY, seed=SEED,
                checkpoint=HEADER_SIZE):
    """The header of an index file of the database ``path`` (covering all its log unless given).

    It names the checkpoint at offset ``checkpoint``: by default the log's first.
    """
    with opened(path) as (_, fd, size):
        covered = size if covered is None else covered
        return _index_file.encode_header(seed, covered, count, capacity, fd, checkpoint)


def write_header_index(path):
    """Put an index file of the log's start alone (header and checkpoint) into database ``path``.

    Its empty table is the truth, so a kernel that opens the database
    trusting it still finds every key (in the log past its start).
    """
    write_index(path, make_header(path, covered=_checkpoint.START_SIZE))


def write_index(path, header=None, capacity=_index_file.MIN_CAPACITY):
    """Put an index file with an empty table of ``capacity`` slots into the database ``path``."""
    if header is None:
        header = make_header(path, capacity=capacity)
    (path / INDEX_NAME).write_bytes(header + empty_body(capacity))


#: Who makes the checks 1 and 2: ``_index_file.load`` (the pure kernel's, and Windows'), and
#: the compiled kernel's twin in C (``_core_pieces/trust.pxi``). Every case below holds both.
CHECKERS = ["python"] if NO_EXTENSIONS else ["python", "compiled"]


def load_with(checker, directory, fd, size):
    """What ``checker`` makes of the index of the open ``directory``: ``(fd, Header)`` or None."""
    if checker == "python":
        return _index_file.load(directory, fd, size)
    return _kernel.load("cython")._index_file_load(directory.fd, fd, size)


@pytest.fixture(params=CHECKERS)
def try_load(request):
    """What a checker makes of the database ``path``'s index: a Header, or None.

    ``data_size`` is the size of the log the caller has seen (the data
    file's size unless given).
    """

    def load(path, data_size=None):
        with opened(path) as (directory, fd, size):
            size = size if data_size is None else data_size
            loaded = load_with(request.param, directory, fd, size)
        if loaded is None:
            return None
        index_fd, header = loaded
        try:
            assert os.path.samestat(os.fstat(index_fd), os.stat(path / INDEX_NAME))
            with pytest.raises(OSError):  # open read-only
                os.write(index_fd, b"x")
        finally:
            os.close(index_fd)
        return header

    return load


def reseal(header):
    """``header`` with its CRC-32 made right again (after a field was changed on purpose)."""
    body = header[: _index_file.HEADER_SIZE - 4]
    return body + struct.pack("<I", zlib.crc32(body))


def with_field(header, offset, fmt, value):
    """``header`` with the little-endian field ``fmt`` at ``offset`` set to ``value``, resealed."""
    changed = bytearray(header)
    struct.pack_into("<" + fmt, changed, offset, value)
    return reseal(bytes(changed))


def with_covered(header, covered, path):
    """``header`` claiming to cover ``covered`` bytes, with the samples of that many, resealed.

    Only the covered length is then wrong: every sample matches the data
    file of the database ``path``.
    """
    changed = bytearray(header)
    struct.pack_into("<Q", changed, 24, covered)
    data = (path / DATA_NAME).read_bytes()
    for number, (offset, length) in enumerate(_index_file.sample_ranges(covered)):
        sample = (offset, length, zlib.crc32(data[offset : offset + length]))
        struct.pack_into("<QII", changed, 64 + 16 * number, *sample)
    return reseal(bytes(changed))


def flip_byte(path, offset):
    """Change the byte at ``offset`` of the file ``path``."""
    contents = bytearray(path.read_bytes())
    contents[offset] ^= 0x5A
    path.write_bytes(bytes(contents))


@pytest.fixture
def indexed(tmp_path):
    """A database with a valid index file covering its whole log."""
    path = write_database(tmp_path / "indexed.db")
    write_index(path)
    return path


# --- the layout ------------------------------------------------------------


def test_sizes_and_capacity():
    assert _index_file.blocks(16) == 1
    assert _index_file.blocks(1024) == 1
    assert _index_file.blocks(1025) == 2
    assert _index_file.file_size(16) == 4096 + 12 * 16 + 4
    assert _index_file.file_size(3000) == 4096 + 12 * 3000 + 4 * 3
    capacities = [_index_file.capacity_for(count) for count in (0, 1, 10, 11, 1000)]
    assert capacities == [16, 16, 16, 17, 1501]
    for count in range(0, 5000, 7):
        assert _index_file.capacity_for(count) > count


def test_index_due_after_4_mib_or_a_64th_of_the_covered_log():
    mib = 1 << 20
    assert not _settings.index_due(0, 4 * mib - 1)
    assert _settings.index_due(0, 4 * mib)
    assert _settings.index_due(HEADER_SIZE, HEADER_SIZE + 4 * mib)
    covered = 1 << 30  # a 64th is 16 MiB
    assert not _settings.index_due(covered, covered + 16 * mib - 1)
    assert _settings.index_due(covered, covered + 16 * mib)


def test_sample_ranges_of_a_large_log():
    covered = 10**9
    ranges = _index_file.sample_ranges(covered)
    assert len(ranges) == _index_file.SAMPLES
    assert ranges[0] == (0, 4096)
    assert ranges[-1] == (covered - 4096, 4096)
    assert ranges[1:-1] == [(covered * i // 31, 256) for i in range(1, 31)]


@pytest.mark.parametrize("covered", [8, 9, 255, 300, 4095, 4096, 4097])
def test_sample_ranges_of_a_small_log_stay_inside_it(covered):
    ranges = _index_file.sample_ranges(covered)
    assert len(ranges) == _index_file.SAMPLES
    edge = min(4096, covered)
    assert ranges[0] == (0, edge)
    assert ranges[-1] == (covered - edge, edge)
    for i, (offset, length) in enumerate(ranges[1:-1], 1):
        assert offset == covered * i // 31
        assert length == min(256, covered - offset) > 0
        assert offset + length <= covered


def test_sample_ranges_of_the_smallest_log():
    ranges = _index_file.sample_ranges(8)
    assert ranges[0] == ranges[-1] == (0, 8)
    assert ranges[1:5] == [(0, 8), (0, 8), (0, 8), (1, 7)]
    assert ranges[-2] == (7, 1)


# --- the header ------------------------------------------------------------


def test_header_round_trip(tmp_path, try_load):
    path = write_database(tmp_path / "a.db")
    size = os.path.getsize(path / DATA_NAME)
    capacity = 2500  # three blocks, the last one short
    header = make_header(path, covered=size - 100, count=1234, capacity=capacity)
    assert len(header) == _index_file.HEADER_SIZE
    assert header[:8] == _index_file.MAGIC
    fields = struct.unpack_from("<IIQQQQIIII", header, 8)
    assert fields == (2, 4096, SEED, size - 100, 1234, capacity, 12, 1024, 32, 0)
    nonce = first_checkpoint((path / DATA_NAME).read_bytes())
    assert nonce is not None
    assert header[576:600] == struct.pack("<Q", HEADER_SIZE) + nonce, "after the samples"
    assert header[600:4092] == bytes(4092 - 600)
    assert struct.unpack_from("<I", header, 4092)[0] == zlib.crc32(header[:4092])
    data = (path / DATA_NAME).read_bytes()
    for number, (offset, length) in enumerate(_index_file.sample_ranges(size - 100)):
        sample = struct.unpack_from("<QII", header, 64 + 16 * number)
        assert sample == (offset, length, zlib.crc32(data[offset : offset + length]))
    write_index(path, header, capacity)
    assert os.path.getsize(path / INDEX_NAME) == _index_file.file_size(capacity)
    loaded = try_load(path)
    assert loaded == _index_file.Header(SEED, size - 100, 1234, capacity, loaded.identity)
    info = os.stat(path / INDEX_NAME)
    assert loaded.identity == (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    with opened(path) as (directory, _, _):
        assert _index_file.identity(directory) == loaded.identity


def test_identity_changes_with_a_new_index(indexed):
    with opened(indexed) as (directory, _, _):
        before = _index_file.identity(directory)
        write_index(indexed, capacity=40)
        assert _index_file.identity(directory) not in (None, before)
        os.remove(indexed / INDEX_NAME)
        assert _index_file.identity(directory) is None


def test_load_accepts_a_copy_of_the_directory(indexed, tmp_path, try_load):
    copy = tmp_path / "copy.db"
    shutil.copytree(indexed, copy, copy_function=shutil.copy2)
    assert try_load(copy) is not None


def test_load_accepts_a_log_grown_past_covered(indexed, try_load):
    with db.open_with(_kernel.load("python"), indexed, "w") as database:
        database[b"later"] = b"appended after the index"
    assert try_load(indexed).covered < os.path.getsize(indexed / DATA_NAME)


def test_load_accepts_a_change_between_the_samples(indexed, try_load):
    """What the check misses (docs/FORMAT.md, "Trusting an index file"): check 4's business."""
    size = os.path.getsize(indexed / DATA_NAME)
    ranges = _index_file.sample_ranges(size)
    unsampled = ranges[10][0] + ranges[10][1] + 1
    assert unsampled < ranges[11][0]
    flip_byte(indexed / DATA_NAME, unsampled)
    assert try_load(indexed) is not None


# --- what load refuses -----------------------------------------------------


def test_no_index(tmp_path, try_load):
    assert try_load(write_database(tmp_path / "a.db")) is None


def test_index_one_byte_short(indexed, try_load):
    index = indexed / INDEX_NAME
    index.write_bytes(index.read_bytes()[:-1])
    assert try_load(indexed) is None


def test_index_one_byte_long(indexed, try_load):
    with open(indexed / INDEX_NAME, "ab") as index:
        index.write(b"\0")
    assert try_load(indexed) is None


#: Bytes of the header to change: the start and end of each field, samples, the checkpoint's
#: offset and nonce, padding, CRC.
HEADER_OFFSETS = [0, 7, 8, 12, 16, 24, 31, 32, 40, 48, 52, 56, 60, 64, 300, 575, 576, 583, 584,
                  599, 600, 2000]


@pytest.mark.parametrize("offset", HEADER_OFFSETS + [4091, 4092, 4095])
def test_index_with_a_byte_of_its_header_changed(indexed, offset, try_load):
    flip_byte(indexed / INDEX_NAME, offset)
    assert try_load(indexed) is None


@pytest.mark.parametrize(
    "offset, fmt, value",
    [
        (8, "I", 1),  # version 1, whose header names no checkpoint
        (12, "I", 8192),  # header size
        (48, "I", 16),  # slot size
        (52, "I", 512),  # slots per block
        (56, "I", 31),  # number of samples
        (60, "I", 1),  # the zero
    ],
)
def test_index_with_a_field_of_another_layout(indexed, offset, fmt, value, try_load):
    write_index(indexed, with_field(make_header(indexed), offset, fmt, value))
    assert try_load(indexed) is None


def test_index_with_too_many_keys_for_its_slots(indexed, try_load):
    write_index(indexed, make_header(indexed, count=16, capacity=16), 16)
    assert try_load(indexed) is None
    write_index(indexed, make_header(indexed, count=15, capacity=16), 16)
    assert try_load(indexed) is not None


def test_index_with_too_few_slots(indexed, try_load):
    write_index(indexed, make_header(indexed, capacity=15), 15)
    assert try_load(indexed) is None


@pytest.mark.parametrize("capacity", [2**40, 2**63, 2**64 - 1])
def test_index_with_a_huge_capacity(indexed, capacity, try_load):
    write_index(indexed, with_field(make_header(indexed), 40, "Q", capacity))
    assert try_load(indexed) is None


def test_index_covering_more_than_the_data_file(indexed, try_load):
    size = os.path.getsize(indexed / DATA_NAME)
    assert try_load(indexed, data_size=size - 1) is None
    os.truncate(indexed / DATA_NAME, size - 1)
    assert try_load(indexed) is None


@pytest.mark.parametrize("covered", [0, 1, 7, HEADER_SIZE, 52, _checkpoint.START_SIZE - 1])
def test_index_covering_less_than_the_log_start(indexed, covered, try_load):
    """Less than the header and the first checkpoint (52: inside its put)."""
    assert make_header(indexed, covered=covered) is None, "no index is written for it"
    write_index(indexed, with_covered(make_header(indexed), covered, indexed))
    assert try_load(indexed) is None


@pytest.mark.parametrize("sample", [0, 1, 15, 30, 31])
def test_data_file_changed_in_a_sampled_range(indexed, sample, try_load):
    offset, length = _index_file.sample_ranges(os.path.getsize(indexed / DATA_NAME))[sample]
    flip_byte(indexed / DATA_NAME, offset + length // 2)
    assert try_load(indexed) is None


def test_data_file_changed_where_only_the_last_sample_reads(indexed, try_load):
    """The byte before ``covered``: the other 31 samples do not read it (the mutation that
    leaves the last sample unchecked trusts this index)."""
    size = os.path.getsize(indexed / DATA_NAME)
    ranges = _index_file.sample_ranges(size)
    assert [start <= size - 1 < start + length for start, length in ranges].count(True) == 1
    flip_byte(indexed / DATA_NAME, size - 1)
    assert try_load(indexed) is None


def test_data_file_of_another_database(indexed, tmp_path, try_load):
    other = write_database(tmp_path / "other.db", tag=b"other ")
    shutil.copy2(other / DATA_NAME, indexed / DATA_NAME)
    assert try_load(indexed) is None


def test_index_of_another_database(indexed, tmp_path, try_load):
    other = write_database(tmp_path / "other.db", tag=b"other ")
    write_index(other)
    shutil.copy2(other / INDEX_NAME, indexed / INDEX_NAME)
    assert try_load(indexed) is None


def test_index_of_garbage(indexed, try_load):
    index = indexed / INDEX_NAME
    index.write_bytes(os.urandom(_index_file.file_size(16)))
    assert try_load(indexed) is None
    index.write_bytes(b"")
    assert try_load(indexed) is None
    index.write_bytes(_index_file.MAGIC)
    assert try_load(indexed) is None


def test_index_that_is_a_directory(indexed, try_load):
    os.remove(indexed / INDEX_NAME)
    (indexed / INDEX_NAME).mkdir()
    assert try_load(indexed) is None
    with opened(indexed) as (directory, _, _):
        assert _index_file.identity(directory) is None


@posix_only
def test_index_that_is_a_fifo_is_not_waited_for(indexed, try_load):
    os.remove(indexed / INDEX_NAME)
    os.mkfifo(indexed / INDEX_NAME)
    assert try_load(indexed) is None


@posix_only
def test_index_that_is_a_link_to_a_valid_index(indexed, tmp_path, try_load):
    os.replace(indexed / INDEX_NAME, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", indexed / INDEX_NAME)
    assert try_load(indexed) is None


def test_index_that_cannot_be_opened(indexed, monkeypatch):
    def refuse(name, flags, mode=0o777):
        raise PermissionError(errno.EACCES, "Permission denied", name)

    with opened(indexed) as (directory, fd, size):
        monkeypatch.setattr(directory, "open", refuse)
        assert _index_file.load(directory, fd, size) is None


def test_index_that_cannot_be_read(indexed, monkeypatch):
    """Python's checks alone: C's read no Python function that could fail on purpose."""

    def fail(fd, size, offset):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(_files, "read_at", fail)
    with opened(indexed) as (directory, fd, size):
        assert _index_file.load(directory, fd, size) is None


def test_no_index_on_a_big_endian_machine(indexed, monkeypatch):
    """Python's checks alone: C's ask the machine it was compiled for."""
    monkeypatch.setattr(sys, "byteorder", "big")
    with opened(indexed) as (directory, fd, size):
        assert _index_file.load(directory, fd, size) is None


# --- installing and removing -----------------------------------------------


def install(path, capacity=_index_file.MIN_CAPACITY, write_body=None):
    """``_index_file.install`` of an empty table into the database ``path``; what it returned."""
    body = empty_body(capacity)
    with opened(path) as (directory, fd, size):
        header = _index_file.encode_header(SEED, size, 0, capacity, fd, HEADER_SIZE)
        return _index_file.install(
            directory, fd, header, write_body or (lambda out: _files.write_all(out, body))
        )


@posix_only
def test_install_writes_an_index_with_the_data_file_permissions(tmp_path, try_load):
    path = write_database(tmp_path / "a.db")
    os.chmod(path / DATA_NAME, 0o640)
    assert install(path, capacity=3000)
    assert sorted(os.listdir(path)) == [DATA_NAME, INDEX_NAME, "lock"]
    assert stat.S_IMODE(os.stat(path / INDEX_NAME).st_mode) == 0o640
    assert try_load(path).capacity == 3000


def test_install_replaces_the_old_index(indexed, try_load):
    before = try_load(indexed)
    assert install(indexed, capacity=100)
    after = try_load(indexed)
    assert after.capacity == 100 and after.identity != before.identity


def test_install_that_fails_keeps_the_old_index(indexed, try_load):
    old = (indexed / INDEX_NAME).read_bytes()

    def fail(out):
        os.write(out, b"part of a table")
        raise OSError(errno.ENOSPC, "No space left on device")

    assert install(indexed, write_body=fail) is False
    assert not (indexed / INDEX_TEMP_NAME).exists()
    assert (indexed / INDEX_NAME).read_bytes() == old
    assert try_load(indexed) is not None


def test_install_that_cannot_rename_keeps_the_old_index(indexed, monkeypatch):
    old = (indexed / INDEX_NAME).read_bytes()

    def refuse(source, target, **where):
        raise PermissionError(errno.EACCES, "Access is denied", target)

    monkeypatch.setattr(_files.os, "replace", refuse)
    assert install(indexed) is False
    monkeypatch.undo()
    assert not (indexed / INDEX_TEMP_NAME).exists()
    assert (indexed / INDEX_NAME).read_bytes() == old


def test_install_interrupted_raises_and_leaves_no_new_file(indexed):
    old = (indexed / INDEX_NAME).read_bytes()

    def interrupted(out):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        install(indexed, write_body=interrupted)
    assert not (indexed / INDEX_TEMP_NAME).exists()
    assert (indexed / INDEX_NAME).read_bytes() == old


def test_remove(indexed):
    with opened(indexed) as (directory, _, _):
        _index_file.remove(directory)
        assert not (indexed / INDEX_NAME).exists()
        _index_file.remove(directory)  # none: nothing to do


# --- where the index file is removed ---------------------------------------


def test_compaction_leaves_no_stale_index(dbopen, dbpath, try_load):
    with dbopen(dbpath, "c") as database:
        for round_ in range(3):
            for number in range(300):
                database[b"key%d" % number] = b"value %d of round %d" % (number, round_)
        database.sync()
        write_index(dbpath)
        stale = (dbpath / INDEX_NAME).read_bytes()
        database.compact()
        assert not (dbpath / INDEX_TEMP_NAME).exists()
        if (dbpath / INDEX_NAME).exists():
            assert (dbpath / INDEX_NAME).read_bytes() != stale
            assert try_load(dbpath) is not None, "a new index must describe the new log"
        assert database[b"key7"] == b"value 7 of round 2"
    if (dbpath / INDEX_NAME).exists():
        assert try_load(dbpath) is not None


def test_compaction_removes_the_index_before_the_rename(dbopen, dbpath, monkeypatch):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
        database[b"a"] = b"2"
        database.sync()
        write_index(dbpath)
        real = os.replace
        seen = []

        def replace(source, target, **where):
            if os.path.basename(target) == DATA_NAME:
                seen.append(os.path.exists(dbpath / INDEX_NAME))
            real(source, target, **where)

        monkeypatch.setattr(_files.os, "replace", replace)
        database.compact()
        assert seen == [False]


def test_compaction_that_cannot_remove_the_index_changes_nothing(
    dbopen, dbpath, monkeypatch, try_load
):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
        database[b"a"] = b"2"
        database.sync()
        write_header_index(dbpath)  # the kernel reopens the log after the failure
        data = (dbpath / DATA_NAME).read_bytes()
        real = os.remove

        def remove(name, **where):
            if os.path.basename(name) == INDEX_NAME:
                raise PermissionError(errno.EACCES, "Access is denied", name)
            real(name, **where)

        monkeypatch.setattr(_files.os, "remove", remove)
        with pytest.raises(semidbm.error, match="cannot compact") as raised:
            database.compact()
        monkeypatch.undo()
        assert raised.value.errno == errno.EACCES
        assert (dbpath / DATA_NAME).read_bytes() == data
        assert not (dbpath / "data.compact").exists()
        # The old index file, or a new one the kernel wrote for the log as it is.
        assert try_load(dbpath) is not None
        assert database[b"a"] == b"2"
        database.compact()
    with dbopen(dbpath) as database:
        assert database[b"a"] == b"2"


def test_compaction_leaves_a_directory_called_index(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
        (dbpath / INDEX_NAME).mkdir()
        database.compact()
        assert database[b"a"] == b"1"
    assert (dbpath / INDEX_NAME).is_dir()


def test_n_removes_the_index(dbopen, dbpath):
    write_database(dbpath)
    write_header_index(dbpath)
    with dbopen(dbpath, "n") as database:
        assert INDEX_NAME not in os.listdir(dbpath)
        assert len(database) == 0


def test_c_and_w_keep_the_index(dbopen, dbpath):
    write_database(dbpath)
    write_header_index(dbpath)
    index = (dbpath / INDEX_NAME).read_bytes()
    for flag in "cw":
        dbopen(dbpath, flag).close()
        assert (dbpath / INDEX_NAME).read_bytes() == index


def test_writer_removes_a_leftover_new_index(dbopen, dbpath, try_load):
    write_database(dbpath)
    write_header_index(dbpath)
    leftover = dbpath / INDEX_TEMP_NAME
    leftover.write_bytes(b"an index a writer died writing")
    dbopen(dbpath, "r").close()
    assert leftover.exists(), "a reader must not change the directory"
    dbopen(dbpath, "w").close()
    assert not leftover.exists()
    assert try_load(dbpath) is not None
