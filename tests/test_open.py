"""Opening databases: flags, paths, permissions, what is created and what is refused."""

import errno
import functools
import os
import shutil
import stat
import sys
import tempfile

import pytest

import semidbm
from semidbm import db
from semidbm.format import HEADER

from .conftest import kernel_name
from .support import unprivileged
from .support.log import records_after_start

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")


def test_c_creates_directory_with_data_file(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        assert len(db) == 0
    assert sorted(os.listdir(dbpath)) == ["data", "lock"]
    assert records_after_start((dbpath / "data").read_bytes()) == b""


@pytest.mark.parametrize(
    "convert", [str, os.fsencode, lambda p: p], ids=["str", "bytes", "pathlike"]
)
def test_filename_may_be_str_bytes_or_pathlike(dbopen, dbpath, convert):
    with dbopen(convert(dbpath), "c") as db:
        db[b"k"] = b"v"
    with dbopen(convert(dbpath), "r") as db:
        assert db[b"k"] == b"v"


def test_filename_of_wrong_type_is_type_error(dbopen):
    with pytest.raises(TypeError):
        dbopen(42, "c")


def test_default_flag_is_read_only(dbopen, dbpath):
    dbopen(dbpath, "c").close()
    with dbopen(dbpath) as db:
        assert not db.writable


@pytest.mark.parametrize("flag", ["x", "", "rw", "R", None, b"r"])
def test_bad_flag_is_value_error_and_creates_nothing(dbopen, dbpath, flag):
    with pytest.raises(ValueError, match="flag"):
        dbopen(dbpath, flag)
    assert not dbpath.exists()


@pytest.mark.parametrize("flag", ["r", "w"])
def test_r_and_w_on_missing_path_create_nothing(dbopen, dbpath, flag):
    with pytest.raises(semidbm.error) as info:
        dbopen(dbpath, flag)
    assert str(dbpath) in str(info.value)
    assert not dbpath.exists()


@pytest.mark.parametrize("flag", ["c", "n"])
def test_missing_parent_directory_is_an_error(dbopen, tmp_path, flag):
    path = tmp_path / "missing" / "test.db"
    with pytest.raises(semidbm.error):
        dbopen(path, flag)
    assert not (tmp_path / "missing").exists()


def test_w_opens_existing_for_writing(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"a"] = b"1"
    with dbopen(dbpath, "w") as db:
        assert db[b"a"] == b"1"
        db[b"b"] = b"2"
    with dbopen(dbpath, "r") as db:
        assert dict(db.items()) == {b"a": b"1", b"b": b"2"}


def test_c_keeps_existing_contents(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"a"] = b"1"
    with dbopen(dbpath, "c") as db:
        assert db[b"a"] == b"1"


def test_n_empties_an_existing_database(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"a"] = b"1"
    with dbopen(dbpath, "n") as db:
        assert len(db) == 0
    assert records_after_start((dbpath / "data").read_bytes()) == b""


@pytest.mark.parametrize("flag", ["c", "n"])
def test_empty_file_at_path_is_replaced(dbopen, dbpath, flag):
    dbpath.write_bytes(b"")
    with dbopen(dbpath, flag) as db:
        db[b"a"] = b"1"
    assert dbpath.is_dir()
    with dbopen(dbpath) as db:
        assert db[b"a"] == b"1"


@pytest.mark.parametrize("flag", ["r", "w", "c", "n"])
def test_non_empty_file_at_path_is_refused_and_kept(dbopen, dbpath, flag):
    dbpath.write_bytes(b"precious")
    with pytest.raises(semidbm.error) as info:
        dbopen(dbpath, flag)
    assert str(dbpath) in str(info.value)
    assert dbpath.read_bytes() == b"precious"


@pytest.mark.parametrize("flag", ["r", "w", "c", "n"])
def test_directory_of_other_files_is_refused_and_kept(dbopen, dbpath, flag):
    dbpath.mkdir()
    (dbpath / "notes.txt").write_text("mine")
    with pytest.raises(semidbm.error) as info:
        dbopen(dbpath, flag)
    assert str(dbpath) in str(info.value)
    assert os.listdir(dbpath) == ["notes.txt"]


@pytest.mark.parametrize("flag", ["r", "w", "c", "n"])
def test_data_file_of_another_format_is_refused_and_kept(dbopen, dbpath, flag):
    dbpath.mkdir()
    (dbpath / "data").write_bytes(b"GDBM and more bytes")
    with pytest.raises(semidbm.error) as info:
        dbopen(dbpath, flag)
    assert "data" in str(info.value)
    assert (dbpath / "data").read_bytes() == b"GDBM and more bytes"


def test_data_that_is_a_directory_is_refused(dbopen, dbpath):
    (dbpath / "data").mkdir(parents=True)
    for flag in "rwcn":
        with pytest.raises(semidbm.error, match="data"):
            dbopen(dbpath, flag)
    assert (dbpath / "data").is_dir()


@pytest.mark.parametrize("flag", ["c", "n"])
def test_empty_directory_becomes_a_database(dbopen, dbpath, flag):
    dbpath.mkdir()
    with dbopen(dbpath, flag) as db:
        db[b"a"] = b"1"
    assert sorted(os.listdir(dbpath)) == ["data", "lock"]


@pytest.mark.parametrize("flag", ["r", "w"])
def test_empty_directory_is_not_a_database_for_r_and_w(dbopen, dbpath, flag):
    dbpath.mkdir()
    with pytest.raises(semidbm.error, match="no data file"):
        dbopen(dbpath, flag)
    assert os.listdir(dbpath) == []


@posix_only
@pytest.mark.parametrize(
    "mode, umask, file_mode, dir_mode",
    [
        (0o666, 0o022, 0o644, 0o755),
        (0o600, 0o022, 0o600, 0o700),
        (0o640, 0o000, 0o640, 0o750),
        (0o666, 0o077, 0o600, 0o700),
        (0o200, 0o000, 0o200, 0o200),
    ],
)
def test_mode_sets_permissions_minus_umask(dbopen, dbpath, mode, umask, file_mode, dir_mode):
    old = os.umask(umask)
    try:
        db = dbopen(dbpath, "c", mode)
    finally:
        os.umask(old)
    db.close()
    assert stat.S_IMODE(os.stat(dbpath / "data").st_mode) == file_mode
    assert stat.S_IMODE(os.stat(dbpath).st_mode) == dir_mode


@posix_only
def test_compaction_keeps_the_data_file_permissions(dbopen, dbpath):
    old = os.umask(0o022)
    try:
        db = dbopen(dbpath, "c", 0o640)
    finally:
        os.umask(old)
    db[b"a"] = b"1"
    db[b"a"] = b"2"
    db.compact()
    db.close()
    assert stat.S_IMODE(os.stat(dbpath / "data").st_mode) == 0o640


@pytest.mark.parametrize("mode", ["0o666", 1.5, None])
def test_mode_must_be_an_integer(dbopen, dbpath, mode):
    with pytest.raises(TypeError):
        dbopen(dbpath, "c", mode)
    assert not dbpath.exists()


@pytest.mark.parametrize("size, error", [(-1, ValueError), ("big", TypeError), (1.0, TypeError)])
def test_bad_buffer_size(dbopen, dbpath, size, error):
    with pytest.raises(error):
        dbopen(dbpath, "c", buffer_size=size)
    assert not dbpath.exists()


def test_unknown_option_is_type_error(dbopen, dbpath):
    with pytest.raises(TypeError):
        dbopen(dbpath, "c", no_such_option=True)


@posix_only
def test_permission_denied_is_module_error_with_errno(kernel, tmp_path):
    """Run as an unprivileged user (root bypasses permissions), in a subprocess.

    Skipped, saying why, where that user can run no Python of this
    version that imports this semidbm (tests/support/unprivileged.py).
    """
    place = tempfile.mkdtemp(dir=tempfile.gettempdir())
    try:
        os.chmod(place, 0o755)
        path = os.path.join(place, "test.db")
        dbopen = functools.partial(db.open_with, kernel)
        dbopen(path, "c", 0o600).close()
        script = (
            "import sys, semidbm\n"
            "from semidbm import _kernel, db\n"
            "try:\n"
            "    db.open_with(_kernel.load(sys.argv[2]), sys.argv[1], 'r')\n"
            "except semidbm.error as exc:\n"
            "    print(exc.errno)\n"
        )
        result = unprivileged.run(
            ["-c", script, path, kernel_name(kernel)], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == str(errno.EACCES)
    finally:
        shutil.rmtree(place)


def test_writer_removes_leftover_compaction_file(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"a"] = b"1"
    stale = dbpath / "data.compact"
    stale.write_bytes(HEADER + b"stale")
    with dbopen(dbpath, "r") as db:
        assert dict(db.items()) == {b"a": b"1"}
    assert stale.exists(), "a reader must not change the directory"
    with dbopen(dbpath, "w") as db:
        assert dict(db.items()) == {b"a": b"1"}
    assert not stale.exists()


def test_writer_removes_leftover_compaction_directory_of_v051(dbopen, dbpath):
    with dbopen(dbpath, "c") as db:
        db[b"a"] = b"1"
    (dbpath / "compact").mkdir()
    (dbpath / "compact" / "data").write_bytes(HEADER)
    with dbopen(dbpath, "c") as db:
        assert dict(db.items()) == {b"a": b"1"}
    assert sorted(os.listdir(dbpath)) == ["data", "lock"]


def test_open_module_function_uses_named_implementation(dbpath):
    with semidbm.open(dbpath, "c") as db:
        db["x"] = "y"
        assert type(db).__module__ == "semidbm.db"
    assert semidbm.implementation in ("cython", "python")
    with semidbm.open(dbpath) as db:
        assert db["x"] == b"y"


def test_repr_names_path_and_state(dbopen, dbpath):
    db = dbopen(dbpath, "c")
    assert str(dbpath) in repr(db) and "read-write" in repr(db)
    db.close()
    assert "closed" in repr(db)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file names")
def test_non_utf8_bytes_path(dbopen, tmp_path):
    path = os.path.join(os.fsencode(tmp_path), b"caf\xe9.db")
    with dbopen(path, "c") as db:
        db[b"k"] = b"v"
    assert os.path.isdir(path)
    with dbopen(path) as db:
        assert db[b"k"] == b"v"
