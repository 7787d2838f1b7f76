"""A data file larger than 4 GiB: offsets past 32 bits, in both kernels.

Writing 4 GiB for real would take a minute of disk time, so the test
builds the first 4 GiB itself, cheaply: two valid records whose values
(zeros, with their true checksums) are holes in a sparse file, which
take no disk space. The kernel then writes on from there, itself: a
record that straddles the 4 GiB mark, and small records past it, which
it reads, updates, deletes, reopens and compacts.

It takes a few seconds (computing the checksums of 4 GiB of zeros,
once), so it runs with the rest of the suite; it is marked
``large_file`` to run alone (``pytest -m large_file``) or be left out.
"""

import os
import struct
import zlib

import pytest

from semidbm.format import HEADER

pytestmark = [pytest.mark.large_file, pytest.mark.slow]

GIB = 1 << 30
#: Where the records the test builds end: the kernel's first record straddles 4 GiB.
BUILT_END = 4 * GIB - (4 << 20)
#: The values of the built records: zeros, left as holes in the file.
#: A record takes 12 bytes besides its key and value (two lengths, a checksum).
HOLES = [(b"hole-a", 2**31 - 1)]
HOLES.append((b"hole-b", BUILT_END - len(HEADER) - (12 + 6) * 2 - HOLES[0][1]))


def zeros_checksum(key, size):
    """The CRC-32 of ``key`` followed by ``size`` zero bytes."""
    zeros = bytes(1 << 24)
    checksum = zlib.crc32(key)
    while size:
        step = min(size, len(zeros))
        checksum = zlib.crc32(zeros[:step] if step < len(zeros) else zeros, checksum)
        size -= step
    return checksum


@pytest.fixture(scope="module")
def hole_checksums():
    """The checksum of each built record (computed once: about 4 GiB of zeros)."""
    return [zeros_checksum(key, size) for key, size in HOLES]


@pytest.fixture
def large_db(tmp_path, hole_checksums):
    """A database directory whose data file holds the built records, ending at BUILT_END."""
    path = tmp_path / "large.db"
    path.mkdir()
    data = path / "data"
    with open(data, "wb") as out:
        out.write(HEADER)
        for (key, size), checksum in zip(HOLES, hole_checksums):
            out.write(struct.pack("!ii", len(key), size) + key)
            out.seek(size, os.SEEK_CUR)
            out.write(struct.pack("!I", checksum))
    assert os.path.getsize(data) == BUILT_END
    yield path
    # pytest keeps recent temporary directories; a 4 GiB file should not stay.
    for name in os.listdir(path):
        os.remove(path / name)


def resident_bytes():
    """This process's resident memory now (Linux's /proc), or None where it cannot be read."""
    try:
        with open("/proc/self/status") as status:
            lines = status.read().splitlines()
    except OSError:
        return None
    return next(int(line.split()[1]) * 1024 for line in lines if line.startswith("VmRSS:"))


def test_offsets_past_4_gib(dbopen, large_db):
    data = large_db / "data"
    straddling = os.urandom(8 << 20)
    past = {b"small-%d" % i: os.urandom(100 + i) for i in range(50)}
    before = resident_bytes()
    with dbopen(large_db, "w") as db:
        assert len(db) == 2
        # The open read both built records whole (their zeros are checked
        # against their checksums) and let go of their pages as it went:
        # the 4 GiB did not stay resident (settings.CHECK_CHUNK).
        if before is not None:
            assert resident_bytes() - before < GIB
        db[b"straddling"] = straddling
        db.update(past)
        # Read while still in the write buffer, then from the file.
        assert db[b"small-7"] == past[b"small-7"]
        db.sync()
        assert db[b"straddling"] == straddling
        assert all(db[key] == value for key, value in past.items())
    assert os.path.getsize(data) > 4 * GIB + (4 << 20)

    # Reopen: the index is rebuilt from records past 4 GiB; update and delete there.
    with dbopen(large_db, "w", verify_checksums=True) as db:
        assert len(db) == 2 + 1 + len(past)
        assert db[b"straddling"] == straddling
        assert all(db[key] == value for key, value in past.items())
        db[b"small-3"] = b"updated past 4 GiB"
        del db[b"small-4"]
        del db[b"hole-a"]
    past[b"small-3"] = b"updated past 4 GiB"
    del past[b"small-4"]

    with dbopen(large_db, "r", verify_checksums=True) as db:
        assert sorted(db.keys()) == sorted([b"hole-b", b"straddling"] + list(past))
        assert db[b"small-3"] == b"updated past 4 GiB"
        assert b"small-4" not in db

    # Compact: the live records past 4 GiB are copied to a new, small file.
    with dbopen(large_db, "w") as db:
        del db[b"hole-b"]
        calls = []
        db.compact(progress=lambda done, total: calls.append((done, total)))
        assert calls[-1][0] == calls[-1][1] > 4 * GIB
        assert db[b"straddling"] == straddling
        assert all(db[key] == value for key, value in past.items())
    assert os.path.getsize(data) < 9 << 20
    with dbopen(large_db, "r", verify_checksums=True) as db:
        assert sorted(db.keys()) == sorted([b"straddling"] + list(past))
        assert all(db[key] == value for key, value in past.items())
