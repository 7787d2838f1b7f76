"""The file helpers where operating systems differ: short reads and a refused swap.

Windows refuses to rename a file over one that another process has
open, so there a compaction fails while a reader is open; the refusal
is imitated here, on any system, by making ``os.replace`` fail.
"""

import os

import pytest

import semidbm
from semidbm import _files
from semidbm.format import INDEX_NAME


def short_reads(monkeypatch, most):
    """Make every positional read return at most ``most`` bytes, as a system may."""
    real = _files.read_at

    def read_at(fd, size, offset):
        return real(fd, min(size, most), offset)

    monkeypatch.setattr(_files, "read_at", read_at)


def test_read_exactly_continues_after_short_reads(monkeypatch, tmp_path):
    path = tmp_path / "file"
    contents = bytes(range(256)) * 40
    path.write_bytes(contents)
    short_reads(monkeypatch, 100)
    fd = os.open(path, os.O_RDONLY | _files.BINARY)
    try:
        assert _files.read_exactly(fd, 5000, 7, str(path)) == contents[7:5007]
        ended = "expected 300 bytes at offset 10000, the file ended after 240"
        with pytest.raises(semidbm.error, match=ended):
            _files.read_exactly(fd, 300, 10000, str(path))
    finally:
        os.close(fd)


def test_values_read_whole_despite_short_reads(monkeypatch, dbopen, dbpath):
    value = os.urandom(5000)
    with dbopen(dbpath, "c", buffer_size=0) as db:
        db[b"k"] = value
    short_reads(monkeypatch, 64)
    with dbopen(dbpath, verify_checksums=True) as db:
        assert db[b"k"] == value


def refuse_swaps(monkeypatch):
    """Make renaming over a file named ``data`` fail as Windows does while a reader has it open."""
    real = os.replace

    def replace(source, target, **where):
        if os.path.basename(target) == "data":
            raise PermissionError(13, "Access is denied", target)
        real(source, target, **where)

    monkeypatch.setattr(_files.os, "replace", replace)


def test_refused_swap_leaves_the_database_whole_and_usable(monkeypatch, dbopen, dbpath):
    db = dbopen(dbpath, "c", buffer_size=16)
    for i in range(50):
        db[b"k%d" % (i % 5)] = b"v%d" % i
    db.sync()
    before = (dbpath / "data").read_bytes()
    refuse_swaps(monkeypatch)
    with pytest.raises(semidbm.error, match="cannot compact") as raised:
        db.compact()
    monkeypatch.undo()
    assert raised.value.errno == 13
    assert (dbpath / "data").read_bytes() == before
    assert sorted(set(os.listdir(dbpath)) - {INDEX_NAME}) == ["data", "lock"], (
        "the compacted copy is removed"
    )
    assert dict(db.items()) == {b"k%d" % i: b"v%d" % (45 + i) for i in range(5)}
    db[b"after"] = b"1"
    db.compact()
    db.close()
    with dbopen(dbpath) as db:
        assert len(db) == 6 and db[b"after"] == b"1"
    assert os.path.getsize(dbpath / "data") < len(before)
