"""Writers killed with SIGKILL: at random moments (tests/harness/crash.py) and at chosen steps.

The chosen steps include the three ways semidbm 0.5.1 lost a database:
a torn write followed by new writes made it unopenable, a kill during
compaction brought deleted keys back, and deleting a missing key made it
unopenable.
"""

import os
import signal
import subprocess
import sys
import textwrap
import warnings

import pytest

import semidbm
from semidbm import _kernel, db
from semidbm._settings import DEFAULT_BUFFER_SIZE
from semidbm.format import COMPACT_NAME, HEADER, INDEX_NAME, INDEX_TEMP_NAME

from .conftest import compiled_only, kernel_name
from .harness import crash
from .support import index_format

pytestmark = pytest.mark.kernel_logic

posix_only = pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")

#: Kills per configuration in the suite: enough for every phase to be hit (60
#: kills hit each at least twice in every seed tried). More run elsewhere on
#: every CI run: the sanitize session kills 60 writers per buffer size and
#: workload under the sanitizers; the documented long run does thousands.
KILLS = {"cython": 80, "python": 60}


@pytest.mark.slow
@posix_only
@pytest.mark.parametrize("buffer_size", [0, DEFAULT_BUFFER_SIZE], ids=["unbuffered", "buffered"])
def test_writer_killed_at_random_moments(kernel, tmp_path, buffer_size):
    name = kernel_name(kernel)
    seed = buffer_size + len(name)
    with crash.Harness(tmp_path / "db", name, buffer_size, seed=seed) as harness:
        failures = harness.run(KILLS[name])
    assert failures == []
    assert harness.counts["kills"] == KILLS[name]
    # The kills reached every phase, compactions included.
    for phase in ("open", "write", "sync", "compact"):
        assert harness.counts["kills during " + phase] > 0, (phase, harness.counts)


#: Kills per kernel of the short pass at large batches in the normal suite; the
#: batch workload's slow tests (tests/test_batch.py) and long runs do more.
LARGE_BATCH_KILLS = 8


@posix_only
def test_writers_killed_while_writing_large_batches(kernel, tmp_path):
    """Kills aimed at the write of batches larger than the buffer, whose records end on pages.

    Seeded so that the short pass aims some kills at a large batch; the
    cut they leave must open as a torn tail (once it needed recover=True).
    """
    name = kernel_name(kernel)
    with crash.Harness(tmp_path / "db", name, DEFAULT_BUFFER_SIZE, seed=11,
                       workload="batch") as harness:
        failures = harness.run(LARGE_BATCH_KILLS)
    assert failures == []
    assert harness.counts["kills aimed at a large batch"] > 0, harness.counts


#: Rounds of the ``shared`` workload per kernel: in each, 3 shared writers are killed one
#: after another while the others write (docs/RELIABILITY.md has the long run's command).
SHARED_ROUNDS = 8


def kill_shared_writers(kernel, path, rounds, seed):
    """Run the ``shared`` workload's rounds; return the counts, having required no failure."""
    with crash.Harness(path, kernel_name(kernel), DEFAULT_BUFFER_SIZE, seed=seed,
                       workload="shared") as harness:
        failures = harness.run(rounds)
    assert failures == []
    assert harness.counts["kills"] == crash.SHARED_WRITERS * rounds
    return harness.counts


@pytest.mark.slow
@posix_only
def test_shared_writers_killed_at_random_moments(kernel, tmp_path):
    """Nothing that returned is lost, nothing deleted comes back, when shared writers die.

    Seeded so that the short pass kills some writers in a turn (a write)
    and some in a compaction while the others write.
    """
    counts = kill_shared_writers(kernel, tmp_path / "db", SHARED_ROUNDS, seed=5)
    for phase in ("write", "compact"):
        assert counts["kills during " + phase] > 0, (phase, counts)


def test_log_of_a_killed_writer_drops_a_cut_line():
    log = crash.Log("ready\nset k1 5 3\nsynced\ndel k1\nset k2 6 4\ncomp")
    assert log.operations == [(b"k1", b"5.5"), (b"k1", None), (b"k2", b"6.6.")]
    assert log.durable == 1
    assert log.phase == "write"


def test_prefixes_that_match_a_recovered_state():
    operations = [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"b", b"2")]
    assert crash.matching_prefixes({}, operations, {b"a": b"1", b"b": b"2"}, 0) == [2]
    assert crash.matching_prefixes({}, operations, {b"b": b"2"}, 0) == [3, 4]
    assert crash.matching_prefixes({}, operations, {b"b": b"2"}, 4) == [4]
    assert crash.matching_prefixes({}, operations, {b"a": b"2"}, 0) == []
    assert "never written" in crash.describe_mismatch({}, operations, {b"a": b"2"}, 0)


# --- kills at chosen steps, in a child that kills itself there ---

CHILD = """
import os, signal, sys, warnings
import semidbm
from semidbm import _files, _kernel, db

kernel = _kernel.load(sys.argv[1])
path = sys.argv[2]

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
"""


def run_child(kernel, path, script):
    """Run ``script`` after CHILD in a new interpreter; it must die by SIGKILL."""
    result = subprocess.run(
        [sys.executable, "-c", CHILD + textwrap.dedent(script), kernel_name(kernel), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr


def contents(kernel, path, flag="r"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", semidbm.TornTailWarning)
        with db.open_with(kernel, path, flag) as database:
            return dict(database.items())


@posix_only
@pytest.mark.parametrize("step", ["copying", "before-fsync", "before-rename", "after-rename"])
def test_kill_during_compaction_never_brings_deleted_keys_back(kernel, dbpath, step):
    """semidbm 0.5.1 reused a compaction left by a crash and revived deleted keys."""
    trap = {
        "copying": "_files.write_all = die",  # the header of the new file
        "before-fsync": "os.fsync = die",
        "before-rename": "os.replace = die",
        "after-rename": "_files.Directory.fsync = die",
    }[step]
    run_child(
        kernel,
        dbpath,
        """
        with db.open_with(kernel, path, "c") as database:
            for i in range(200):
                database[b"k%d" % i] = b"v%d" % i
            for i in range(0, 200, 2):
                del database[b"k%d" % i]
            database.sync()
            database[b"k1"] = b"updated"
            del database[b"k3"]
            database.sync()
            {trap}
            database.compact()
        """.format(trap=trap),
    )
    expected = {b"k%d" % i: b"v%d" % i for i in range(5, 200, 2)}
    expected[b"k1"] = b"updated"
    assert contents(kernel, dbpath) == expected
    assert contents(kernel, dbpath, "w") == expected
    assert not (dbpath / COMPACT_NAME).exists(), "the writer removes the leftover"
    assert contents(kernel, dbpath) == expected


@posix_only
@pytest.mark.parametrize("buffer_size", [0, DEFAULT_BUFFER_SIZE])
def test_kill_after_deleting_a_missing_key(kernel, dbpath, buffer_size):
    """semidbm 0.5.1 logged a delete of a missing key and then could not open its file."""
    run_child(
        kernel,
        dbpath,
        """
        database = db.open_with(kernel, path, "c", buffer_size=%d)
        database[b"a"] = b"1"
        database.sync()
        try:
            del database[b"missing"]
        except KeyError:
            pass
        database[b"b"] = b"2"
        database.sync()
        die()
        """ % buffer_size,
    )
    assert (dbpath / "data").read_bytes().count(b"missing") == 0
    assert contents(kernel, dbpath) == {b"a": b"1", b"b": b"2"}


def test_torn_write_followed_by_new_writes(kernel, dbpath):
    """semidbm 0.5.1 appended after a torn record and could not open the file again."""
    with db.open_with(kernel, dbpath, "n", buffer_size=0) as database:
        database[b"a"] = b"1"
        database[b"b"] = b"22"
        del database[b"a"]
    intact = (dbpath / "data").read_bytes()
    with db.open_with(kernel, dbpath, "w", buffer_size=0) as database:
        database[b"last"] = b"value"
    whole = (dbpath / "data").read_bytes()
    for cut in range(len(intact) + 1, len(whole)):
        (dbpath / "data").write_bytes(whole[:cut])
        for name in os.listdir(dbpath):
            if name.startswith("data.torn-"):
                os.remove(dbpath / name)
        with pytest.warns(semidbm.TornTailWarning):
            database = db.open_with(kernel, dbpath, "w", buffer_size=0)
        with database:
            database[b"c"] = b"333"
            database[b"b"] = b"new"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert contents(kernel, dbpath) == {b"b": b"new", b"c": b"333"}


@posix_only
@pytest.mark.parametrize("step", ["after-mkdir", "before-rename", "after-rename"])
def test_kill_while_creating_a_database(kernel, dbpath, step):
    trap = {
        "after-mkdir": "db._lock.WriterLock = die",
        "before-rename": "os.replace = die",
        "after-rename": (
            "replace = os.replace\nos.replace = lambda *a, **k: (replace(*a, **k), die())"
        ),
    }[step]
    run_child(kernel, dbpath, trap + '\ndb.open_with(kernel, path, "c")\n')
    with db.open_with(kernel, dbpath, "c") as database:
        database[b"a"] = b"1"
    assert contents(kernel, dbpath) == {b"a": b"1"}
    assert sorted(os.listdir(dbpath)) == ["data", "lock"]
    assert (dbpath / "data").read_bytes()[: len(HEADER)] == HEADER


# --- the index file (docs/FORMAT.md, "Writing an index file") ---

#: Kills of the harness's ``index`` workload in the suite.
INDEX_KILLS = 24


@pytest.mark.slow
@posix_only
@compiled_only
def test_writer_killed_while_writing_indexes(tmp_path):
    """Kills aimed at closes and compactions that write the index file, checked against the log."""
    with crash.Harness(tmp_path / "db", "cython", DEFAULT_BUFFER_SIZE, seed=11,
                       workload="index") as harness:
        failures = harness.run(INDEX_KILLS)
    assert failures == []
    assert harness.counts["kills"] == INDEX_KILLS
    for phase in ("close", "compact"):
        assert harness.counts["kills during " + phase] > 0, (phase, harness.counts)
    assert harness.counts["index after the kill"] > 0, harness.counts
    assert harness.counts["opens that used the index"] > 0, harness.counts


INDEX_CHILD = """
from semidbm import _index_file
from semidbm.format import INDEX_TEMP_NAME

install = _index_file.install
remove = _index_file.remove
replace = _files.Directory.replace

def fill(database, first, count):
    for i in range(first, first + count):
        database[b"k%d" % i] = b"v%d." % i * 30
    for i in range(first, first + count, 7):
        del database[b"k%d" % i]

with db.open_with(kernel, path, "c") as database:
    fill(database, 0, 20_000)          # past the bound: the close writes the first index file
database = db.open_with(kernel, path, "w")
fill(database, 20_000, 20_000)         # past the bound again: the close writes the next index
{trap}
{action}                               # fsyncs the data, then writes the index file
os.kill(os.getpid(), signal.SIGKILL)   # in case the trap was not reached
"""


def index_child_model():
    """What INDEX_CHILD writes."""
    model = {}
    for first in (0, 20_000):
        model.update((b"k%d" % i, b"v%d." % i * 30) for i in range(first, first + 20_000))
        for i in range(first, first + 20_000, 7):
            del model[b"k%d" % i]
    return model


INDEX_TRAPS = {
    # _index_file.install(directory, data_fd, header, write_body, ...): the body written
    # to index.new, then its fsync, the rename, the directory's fsync.
    "writing the slots": (
        "_index_file.install = lambda d, fd, header, body, *more: install("
        "d, fd, header, lambda out: (os.write(out, b'half a table'), die()), *more)"
    ),
    "before the fsync": (
        "_index_file.install = lambda d, fd, header, body, *more: install("
        "d, fd, header, lambda out: (body(out), die()), *more)"
    ),
    "before the rename": (
        "_files.Directory.replace = lambda self, source, target: "
        "die() if source == INDEX_TEMP_NAME else replace(self, source, target)"
    ),
    "after the rename": (
        "_files.Directory.replace = lambda self, source, target: "
        "(replace(self, source, target), source == INDEX_TEMP_NAME and die())"
    ),
    "compaction, the old index removed": (
        "_index_file.remove = lambda directory: (remove(directory), die())"
    ),
}


@posix_only
@compiled_only
@pytest.mark.parametrize(
    "step, action",
    [
        (step, action)
        for step in sorted(INDEX_TRAPS)
        for action in ("close", "compact")
        # Only a compaction removes the index file.
        if not (step == "compaction, the old index removed" and action == "close")
    ],
)
def test_kill_while_writing_an_index(dbpath, step, action):
    """A crash leaves the old index file or the new, each valid; a leftover index.new is inert."""
    kernel = _kernel.load("cython")
    pure = _kernel.load("python")
    data_sync = "database.close()" if action == "close" else "database.compact()"
    trap = INDEX_TRAPS[step]
    run_child(kernel, dbpath, INDEX_CHILD.format(trap=trap, action=data_sync))
    expected = index_child_model()
    names = sorted(os.listdir(dbpath))
    if step in ("writing the slots", "before the fsync", "before the rename"):
        assert INDEX_TEMP_NAME in names, names
        leftover = (dbpath / INDEX_TEMP_NAME).read_bytes()
    else:
        assert INDEX_TEMP_NAME not in names, names
        leftover = None
    data = (dbpath / "data").read_bytes()
    if INDEX_NAME in names:
        assert index_format.problems((dbpath / INDEX_NAME).read_bytes(), data) == []
    else:
        assert action == "compact", "a close never removes the index"
    for reader in (kernel, pure):
        assert contents(reader, dbpath) == expected
    if leftover is not None:
        assert (dbpath / INDEX_TEMP_NAME).read_bytes() == leftover, "a reader changes nothing"
    with db.open_with(kernel, dbpath, "w") as database:
        assert not (dbpath / INDEX_TEMP_NAME).exists(), "the writer removes the leftover"
        assert dict(database.items()) == expected
    data = (dbpath / "data").read_bytes()
    assert index_format.problems((dbpath / INDEX_NAME).read_bytes(), data) == []
    with db.open_with(kernel, dbpath, "r") as database:
        assert database.index_covered == len(data)
        assert dict(database.items()) == expected
