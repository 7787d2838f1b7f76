"""Faults: a full disk, a file-size limit, missing or unusable directories and files.

A write, sync or compaction that runs out of room gives ``semidbm.error``
with the operating system's errno and leaves a database that opens with
everything synced before it (and, of the writes after, a prefix). Bad
directories and permissions give clear errors and change nothing.

Permission checks run as an unprivileged user (uid 65534) in a
subprocess when the suite runs as root, since root bypasses permission
bits; they are skipped, saying why, where that user can run no Python of
this version that imports this semidbm (tests/support/unprivileged.py). The full
disk is a small tmpfs, mounted when the suite may mount (root on Linux);
the file-size limit is ``RLIMIT_FSIZE`` in a child.
"""

import errno
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings

import pytest

import semidbm
from semidbm import _kernel, db
from semidbm._settings import DEFAULT_BUFFER_SIZE
from semidbm.format import COMPACT_NAME

from .conftest import compiled_only, kernel_name
from .support import unprivileged

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX limits and permissions")
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The keys and values synced before each fault.
SYNCED = {b"s%d" % i: b"synced value %d" % i * 20 for i in range(200)}
SCENARIOS = ["set", "sync", "big-record", "compact"]
#: A torn tail (a record larger than the buffer, cut short) bigger than the room left.
TORN_TAIL = struct.pack("!ii", 1, 5_000_000) + b"k" + b"torn" * 100_000


def fill(database, scenario, squeeze):
    """Write until the room that ``squeeze(live)`` leaves runs out; return (errno, writes).

    ``live`` is the size of the live records, so the limit can be set
    below it for a compaction. ``writes`` is the list of (key, value)
    assignments that returned before the error.
    """
    writes = []
    if scenario == "compact":
        for i in range(0, 200, 2):
            del database[b"s%d" % i]
        database.sync()
        squeeze(sum(len(key) + len(value) + 12 for key, value in database.items()) // 3)
        try:
            database.compact()
        except semidbm.error as exc:
            return exc.errno, writes
        raise AssertionError("the compaction did not fail")
    squeeze(None)
    try:
        for i in range(100_000):
            size = 3 * DEFAULT_BUFFER_SIZE if scenario == "big-record" else 500
            key, value = b"u%d" % i, (b"%d." % i) * (size // 4)
            database[key] = value
            writes.append((key, value))
            if scenario == "sync" and i % 50 == 49:
                database.sync()
    except semidbm.error as exc:
        return exc.errno, writes
    raise AssertionError("the writes did not fail")


def exhaust(kernel, path, scenario, squeeze):
    """Make a database with SYNCED, run ``fill`` and close it; return (errno, writes)."""
    buffer_size = 0 if scenario == "set" else DEFAULT_BUFFER_SIZE
    database = db.open_with(kernel, path, "c", buffer_size=buffer_size)
    database.update(SYNCED)
    database.sync()
    number, writes = fill(database, scenario, squeeze)
    expected = dict(SYNCED)
    if scenario == "compact":
        for i in range(0, 200, 2):
            del expected[b"s%d" % i]
    # The failed database still reads what it had.
    assert dict(database.items()) == {**expected, **dict(writes)}
    try:
        database.close()
    except semidbm.error:
        pass  # closing syncs, which may run out of room again
    return number, writes


def check_after(kernel, path, scenario, writes):
    """The database opens with the synced contents and a prefix of the writes; it works."""
    expected = dict(SYNCED)
    if scenario == "compact":
        for i in range(0, 200, 2):
            del expected[b"s%d" % i]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", semidbm.TornTailWarning)
        with db.open_with(kernel, path, "w") as database:
            contents = dict(database.items())
            database[b"after"] = b"the fault"
    extra = {key: value for key, value in contents.items() if key not in expected}
    assert {key: contents.get(key) for key in expected} == expected
    assert extra == dict(writes[: len(extra)]), "not a prefix of the writes"
    assert not os.path.exists(os.path.join(path, COMPACT_NAME))
    with db.open_with(kernel, path) as database:
        assert dict(database.items()) == {**contents, b"after": b"the fault"}


CHILD = """
import resource, signal, sys
sys.path.insert(0, sys.argv[3])
from semidbm import _kernel
from tests import test_faults

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
path = sys.argv[2]

def squeeze(live):
    data = os.path.join(path, "data")
    limit = live if live is not None else os.path.getsize(data) + 30_000
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

number, writes = test_faults.exhaust(_kernel.load(sys.argv[1]), path, sys.argv[4], squeeze)
print(json.dumps([number, [[key.hex(), value.hex()] for key, value in writes]]))
"""


@posix_only
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_file_size_limit(kernel, dbpath, scenario):
    result = subprocess.run(
        [sys.executable, "-c", "import json, os\n" + CHILD, kernel_name(kernel), str(dbpath),
         REPOSITORY, scenario],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    number, writes = json.loads(result.stdout)
    assert number == errno.EFBIG
    writes = [(bytes.fromhex(key), bytes.fromhex(value)) for key, value in writes]
    check_after(kernel, str(dbpath), scenario, writes)


def cut_torn_tail(kernel, path, squeeze):
    """Open a writer on a database whose torn tail there is no room to keep; return the error."""
    make_database(kernel, path, owner=False)
    with open(os.path.join(path, "data"), "ab") as handle:
        handle.write(TORN_TAIL)
    before = snapshot(path)
    squeeze(len(TORN_TAIL) // 2)
    with pytest.warns(semidbm.TornTailWarning), pytest.raises(semidbm.error) as info:
        db.open_with(kernel, path, "w")
    assert "cannot cut the torn tail" in str(info.value)
    assert snapshot(path) == before
    return info.value.errno


CUT_CHILD = """
import resource, signal, sys
sys.path.insert(0, sys.argv[3])
from semidbm import _kernel
from tests import test_faults

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

def squeeze(room):
    resource.setrlimit(resource.RLIMIT_FSIZE, (room, resource.RLIM_INFINITY))

print(test_faults.cut_torn_tail(_kernel.load(sys.argv[1]), sys.argv[2], squeeze))
"""


@posix_only
def test_file_size_limit_while_cutting_a_torn_tail(kernel, dbpath):
    result = subprocess.run(
        [sys.executable, "-c", CUT_CHILD, kernel_name(kernel), str(dbpath), REPOSITORY],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == errno.EFBIG
    with pytest.warns(semidbm.TornTailWarning):
        database = db.open_with(kernel, dbpath, "w")
    with database:
        assert dict(database.items()) == {b"a": b"1", b"b": b"2"}
    kept = dbpath / ("data.torn-%d" % os.path.getsize(dbpath / "data"))
    assert kept.read_bytes() == TORN_TAIL


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_full_disk(kernel, small_disk, scenario):
    path = os.path.join(small_disk, "db")
    filler = os.path.join(small_disk, "filler")

    def squeeze(live):
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        leave = live if live is not None else 30_000
        with open(filler, "wb") as handle:
            handle.write(b"\0" * max(free - leave, 0))

    number, writes = exhaust(kernel, path, scenario, squeeze)
    assert number == errno.ENOSPC
    os.remove(filler)
    check_after(kernel, path, scenario, writes)


def test_full_disk_while_cutting_a_torn_tail(kernel, small_disk):
    path = os.path.join(small_disk, "db")
    filler = os.path.join(small_disk, "filler")

    def squeeze(room):
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        with open(filler, "wb") as handle:
            handle.write(b"\0" * max(free - room, 0))

    assert cut_torn_tail(kernel, path, squeeze) == errno.ENOSPC
    os.remove(filler)
    with pytest.warns(semidbm.TornTailWarning):
        db.open_with(kernel, path, "w").close()
    kept = "data.torn-%d" % os.path.getsize(os.path.join(path, "data"))
    assert sorted(os.listdir(path)) == ["data", kept, "lock"]


# --- directories and permissions ---

PROBE = """
import json, sys, warnings
import semidbm
from semidbm import _kernel, db

kernel, path, flag, action = _kernel.load(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", semidbm.TornTailWarning)
        database = db.open_with(kernel, path, flag)
    if action == "compact":
        database.compact()
    elif action == "write":
        database[b"new"] = b"value"
    elif action == "refresh":
        database.refresh()
    database.close()
    print(json.dumps(["ok"]))
except Exception as exc:
    print(json.dumps([type(exc).__name__, getattr(exc, "errno", None), str(exc),
                      isinstance(exc, semidbm.error)]))
"""


def probe(kernel, path, flag, action="open"):
    """Open ``path`` with ``flag`` in a child (as nobody, if we are root) and do ``action``.

    The test is skipped if nobody can run this Python (tests/support/unprivileged.py).
    """
    result = unprivileged.run(
        ["-c", PROBE, kernel_name(kernel), path, flag, action],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def snapshot(place):
    """Every entry under ``place``: its type, mode, owner and bytes (the lock file's excepted)."""
    entries = {}
    for root, directories, files in os.walk(place):
        for name in directories + files:
            full = os.path.join(root, name)
            info = os.lstat(full)
            content = None
            if os.path.isfile(full) and name != "lock":
                with open(full, "rb") as handle:
                    content = handle.read()
            entries[os.path.relpath(full, place)] = (info.st_mode, info.st_uid, content)
    return entries


@pytest.fixture
def shared_place():
    """A temporary directory an unprivileged child can reach, owned by that user."""
    place = tempfile.mkdtemp(dir=tempfile.gettempdir())
    os.chmod(place, 0o755)
    try:
        yield place
    finally:
        for root, directories, _ in os.walk(place):
            for name in directories:
                os.chmod(os.path.join(root, name), 0o755)
        shutil.rmtree(place)


def make_database(kernel, path, owner=True, torn=False):
    """A database with two keys at ``path``, owned by the unprivileged user if asked."""
    with db.open_with(kernel, path, "c") as database:
        database[b"a"] = b"1"
        database[b"b"] = b"2"
    if torn:
        with open(os.path.join(path, "data"), "ab") as handle:
            handle.write(b"\0\0\0\1\0\0")
    if owner and os.geteuid() == 0:
        for name in [path] + [os.path.join(path, entry) for entry in os.listdir(path)]:
            os.chown(name, unprivileged.NOBODY, unprivileged.NOBODY)


def assert_refused(answer, number, *words):
    assert answer[0] != "ok", answer
    name, got, message, is_module_error = answer
    assert is_module_error, answer
    assert got == number, answer
    for word in words:
        assert word in message, answer


needs_posix_users = pytest.mark.skipif(
    os.name != "posix" or (os.geteuid() == 0 and not os.path.exists("/etc/passwd")),
    reason="POSIX permissions",
)


@needs_posix_users
@pytest.mark.parametrize("flag", "cn")
def test_new_database_in_a_read_only_directory(kernel, shared_place, flag):
    parent = os.path.join(shared_place, "parent")
    os.mkdir(parent, 0o555)
    path = os.path.join(parent, "db")
    assert_refused(probe(kernel, path, flag), errno.EACCES, path)
    assert os.listdir(parent) == []


@needs_posix_users
def test_existing_database_in_a_read_only_directory(kernel, shared_place):
    path = os.path.join(shared_place, "db")
    make_database(kernel, path)
    os.chmod(path, 0o555)
    before = snapshot(shared_place)
    assert_refused(probe(kernel, path, "n"), errno.EACCES, COMPACT_NAME)
    assert_refused(probe(kernel, path, "w", "compact"), errno.EACCES, COMPACT_NAME)
    assert snapshot(shared_place) == before
    assert probe(kernel, path, "r") == ["ok"]
    assert probe(kernel, path, "w", "write") == ["ok"], "appends need no new file"
    with db.open_with(kernel, path) as database:
        assert dict(database.items()) == {b"a": b"1", b"b": b"2", b"new": b"value"}


@needs_posix_users
def test_torn_tail_in_a_read_only_directory(kernel, shared_place):
    path = os.path.join(shared_place, "db")
    make_database(kernel, path, torn=True)
    os.chmod(path, 0o555)
    before = snapshot(shared_place)
    assert_refused(probe(kernel, path, "w"), errno.EACCES, "torn tail")
    assert snapshot(shared_place) == before
    assert probe(kernel, path, "r") == ["ok"]


@needs_posix_users
@pytest.mark.parametrize(
    "target, mode, flag, word",
    [
        ("data", 0o000, "r", "data"),
        ("data", 0o000, "w", "data"),
        ("data", 0o444, "w", "data"),
        ("lock", 0o444, "w", "lock"),
        (".", 0o000, "r", "db"),
        (".", 0o000, "c", "db"),
    ],
)
def test_permission_denied(kernel, shared_place, target, mode, flag, word):
    path = os.path.join(shared_place, "db")
    make_database(kernel, path)
    os.chmod(os.path.normpath(os.path.join(path, target)), mode)
    before = snapshot(shared_place)
    assert_refused(probe(kernel, path, flag), errno.EACCES, word)
    assert snapshot(shared_place) == before


@needs_posix_users
@pytest.mark.skipif(not hasattr(os, "O_PATH"), reason="O_PATH is Linux's")
def test_reader_in_a_search_only_directory(kernel, shared_place):
    """A directory its reader may search but not list (--x) still opens, as by name."""
    path = os.path.join(shared_place, "db")
    make_database(kernel, path)
    os.chmod(path, 0o711)
    assert probe(kernel, path, "r", "refresh") == ["ok"]


@pytest.mark.parametrize("flag", "rwcn")
def test_missing_parent_directory(kernel, tmp_path, flag):
    path = tmp_path / "missing" / "db"
    with pytest.raises(semidbm.error) as info:
        db.open_with(kernel, path, flag)
    assert info.value.errno == errno.ENOENT
    assert str(path) in str(info.value)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("flag", "rwcn")
def test_data_file_replaced_by_a_directory(kernel, dbpath, flag):
    make_database(kernel, str(dbpath), owner=False)
    os.remove(dbpath / "data")
    (dbpath / "data").mkdir()
    (dbpath / "data" / "inside").write_bytes(b"x")
    before = snapshot(dbpath)
    with pytest.raises(semidbm.error, match="data is not a file"):
        db.open_with(kernel, dbpath, flag)
    assert snapshot(dbpath) == before


def test_data_directory_removed_while_open(kernel, dbpath):
    """The database's directory deleted under a writer: compaction fails with an error."""
    database = db.open_with(kernel, dbpath, "c")
    database[b"a"] = b"1"
    database.sync()
    shutil.rmtree(dbpath)
    try:
        with pytest.raises(semidbm.error) as info:
            database.compact()
        assert info.value.errno == errno.ENOENT
    finally:
        database.close()
    assert not dbpath.exists(), "nothing is made at the old path"


def test_probe_reports_success(kernel, shared_place):
    """The probe itself can tell success from failure (a check of the check)."""
    path = os.path.join(shared_place, "db")
    make_database(kernel, path)
    assert probe(kernel, path, "w", "compact") == ["ok"]
    assert probe(kernel, os.path.join(shared_place, "nothing"), "r")[0] == "DBMError"



NO_PYTHON_CHILD = """
import json, os, resource, signal, sys
import semidbm
from semidbm import _files, _kernel, db

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def python_ran(*args):
    raise AssertionError("Python code ran in a failed write's path")


path = sys.argv[1]
stored = [b"a"]
database = db.open_with(_kernel.load("cython"), path, "c", buffer_size=4096)
database[b"a"] = b"1"
database.sync()
ftruncate = os.ftruncate  # the lock's, at close
os.ftruncate = _files.written_beyond = python_ran
room = os.path.getsize(os.path.join(path, "data")) + 1000
resource.setrlimit(resource.RLIMIT_FSIZE, (room, resource.RLIM_INFINITY))
failures = []
try:
    database[b"big"] = b"x" * 10000  # straight to the file: cut back
except semidbm.error as exc:
    failures.append(exc.errno)
for number in range(200):  # in the buffer: its flush fails part way
    try:
        database[b"k%d" % number] = b"y" * 100
    except semidbm.error as exc:
        failures.append(exc.errno)
        break
    stored.append(b"k%d" % number)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
database.sync()  # resumes where the failed flush stopped
os.ftruncate = ftruncate
database.close()
print(json.dumps([failures, [key.decode() for key in stored]]))
"""


@posix_only
@compiled_only
def test_a_failed_write_is_settled_without_running_python_code(dbpath):
    """The compiled kernel cuts back a failed straight write, and learns how much of a failed
    flush reached the file, in C with the GIL held: Python code there (``os.ftruncate``,
    ``_files.written_beyond``) would let another thread append in between (the cut would
    then remove its record, or the flush resume from the wrong place)."""
    result = subprocess.run(
        [sys.executable, "-c", NO_PYTHON_CHILD, str(dbpath)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    failures, stored = json.loads(result.stdout)
    assert failures == [errno.EFBIG, errno.EFBIG]
    with db.open_with(_kernel.load("python"), dbpath, "r") as database:
        assert sorted(database.keys()) == sorted(key.encode() for key in stored)
